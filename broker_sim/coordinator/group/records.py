"""Records of the ``__consumer_offsets`` topic, in Kafka's own format.

Theory of operation: the coordinator's durable state is a log of key/value
records in the internal compacted topic ``__consumer_offsets``; the last value
of each key wins and a null value (tombstone) deletes the key.  Keys and values
are Kafka's (``OffsetCommitKey``/``OffsetCommitValue``,
``GroupMetadataKey``/``GroupMetadataValue`` from apache/kafka's
group-coordinator message JSONs), so Kafka's tools can read a pylog broker's
topic and the other way round.  Each key and value starts with an int16
version; the key's version says which record it is (0 and 1: offset commit,
2: group metadata).  The layout is described in ``schemas/consumer-offsets.json``.

The message definitions below are transcribed from those JSON files
(``coordinator.records.message``) and built at the first record encoded or
decoded (``MESSAGES``).  A group's records all go to partition
``partition_for(group_id)`` (``coordinator.internal_topic``), Kafka's
``abs(groupId.hashCode) % partitions``.
"""
from __future__ import annotations

import base64
import enum
import uuid
from dataclasses import asdict, dataclass, field

from broker_sim.coordinator.records import VERSION, LazyMessages, decode_body, message, record_version

OFFSETS_TOPIC = "__consumer_offsets"
Assignment = dict[uuid.UUID, frozenset[int]]   # a member's partitions: topic id -> partition indexes

# versions written; every version Kafka ever wrote is readable
OFFSET_COMMIT_KEY_VERSION = 1
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_KEY_VERSION = 2
GROUP_METADATA_VALUE_VERSION = 3

def _define() -> dict[str, type]:
    """The message classes (kafka-python's schema codec loads with them)."""
    OffsetCommitKey = message("OffsetCommitKey", "0-1", "none", [
        {"name": "group", "type": "string", "versions": "0-1"},
        {"name": "topic", "type": "string", "versions": "0-1"},
        {"name": "partition", "type": "int32", "versions": "0-1"},
    ])
    OffsetCommitValue = message("OffsetCommitValue", "0-4", "4+", [
        {"name": "offset", "type": "int64", "versions": "0+"},
        {"name": "leaderEpoch", "type": "int32", "versions": "3+", "default": -1},
        {"name": "metadata", "type": "string", "versions": "0+"},
        {"name": "commitTimestamp", "type": "int64", "versions": "0+"},
        {"name": "expireTimestamp", "type": "int64", "versions": "1", "default": -1},
    ])
    GroupMetadataKey = message("GroupMetadataKey", "2", "none", [
        {"name": "group", "type": "string", "versions": "2"},
    ])
    GroupMetadataValue = message("GroupMetadataValue", "0-4", "4+", [
        {"name": "protocolType", "type": "string", "versions": "0+"},
        {"name": "generation", "type": "int32", "versions": "0+"},
        {"name": "protocol", "type": "string", "versions": "0+", "nullableVersions": "0+"},
        {"name": "leader", "type": "string", "versions": "0+", "nullableVersions": "0+"},
        {"name": "currentStateTimestamp", "type": "int64", "versions": "2+", "default": -1},
        {"name": "members", "type": "[]MemberMetadata", "versions": "0+", "fields": [
            {"name": "memberId", "type": "string", "versions": "0+"},
            {"name": "groupInstanceId", "type": "string", "versions": "3+", "default": "null",
             "nullableVersions": "3+"},
            {"name": "clientId", "type": "string", "versions": "0+"},
            {"name": "clientHost", "type": "string", "versions": "0+"},
            {"name": "rebalanceTimeout", "type": "int32", "versions": "1+"},
            {"name": "sessionTimeout", "type": "int32", "versions": "0+"},
            {"name": "subscription", "type": "bytes", "versions": "0+"},
            {"name": "assignment", "type": "bytes", "versions": "0+"},
        ]},
    ])
    return {"OffsetCommitKey": OffsetCommitKey, "OffsetCommitValue": OffsetCommitValue,
            "GroupMetadataKey": GroupMetadataKey, "GroupMetadataValue": GroupMetadataValue,
            "MemberMetadataRecord": GroupMetadataValue.MemberMetadata}


# built at the first record encoded or decoded (coordinator.records.LazyMessages)
MESSAGES = LazyMessages(("OffsetCommitKey", "OffsetCommitValue", "GroupMetadataKey", "GroupMetadataValue",
                         "MemberMetadataRecord"), _define)


def __getattr__(name: str) -> type:
    return MESSAGES.lookup(__name__, name)


def _encode(record, version: int) -> bytes:
    flexible = version >= 4  # the values' first flexible version; keys never reach it
    body = record._struct.encode(record, version=version, compact=flexible, tagged=flexible)
    return VERSION.pack(version) + body


def _decode(cls, data: bytes):
    # a newer, unknown version is read with the newest layout known, as Kafka's readers do
    version = min(record_version(data, cls.__name__), cls._struct.max_version)
    return decode_body(cls, data, version, version >= 4)


# --- keys and values as the coordinator uses them -------------------------

@dataclass(frozen=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupKey:
    group: str


@dataclass(frozen=True)
class CommittedOffset:
    """One partition's committed position (Kafka's OffsetAndMetadata)."""

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1


@dataclass(frozen=True)
class StoredMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class StoredGroup:
    """A group as the GroupMetadataValue record keeps it."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[StoredMember, ...] = ()


def encode_key(key: OffsetKey | GroupKey) -> bytes:
    if isinstance(key, OffsetKey):
        return _encode(MESSAGES.OffsetCommitKey(group=key.group, topic=key.topic, partition=key.partition),
                       OFFSET_COMMIT_KEY_VERSION)
    return _encode(MESSAGES.GroupMetadataKey(group=key.group), GROUP_METADATA_KEY_VERSION)


def decode_key(data: bytes | None):
    """Raises ValueError for a key version this broker does not know or bytes that are not a key."""
    version = record_version(data, "__consumer_offsets key")
    if version in (0, 1):
        key = decode_body(MESSAGES.OffsetCommitKey, data, version, False)
        if key.group is None or key.topic is None:
            raise ValueError("__consumer_offsets offset key with a null group or topic")
        return OffsetKey(key.group, key.topic, key.partition)
    if version == 2:
        key = decode_body(MESSAGES.GroupMetadataKey, data, 2, False)
        if key.group is None:
            raise ValueError("__consumer_offsets group key with a null group")
        return GroupKey(key.group)
    if version in _BY_TYPE:
        return decode_consumer_group_key(version, data)
    if version in OTHER_GROUP_RECORD_TYPES:
        raise ValueError(f"__consumer_offsets record of type {version} (a share or streams group, which pylog lacks)")
    raise ValueError(f"unknown __consumer_offsets key version {version}")


def encode_offset(value: CommittedOffset) -> bytes:
    return _encode(MESSAGES.OffsetCommitValue(offset=value.offset, leader_epoch=value.leader_epoch,
                                              metadata=value.metadata, commit_timestamp=value.commit_timestamp,
                                              expire_timestamp=value.expire_timestamp),
                   OFFSET_COMMIT_VALUE_VERSION)


def decode_offset(data: bytes) -> CommittedOffset:
    """Raises ValueError for bytes that are not an OffsetCommitValue."""
    value = _decode(MESSAGES.OffsetCommitValue, data)
    return CommittedOffset(value.offset, value.leader_epoch, value.metadata or "", value.commit_timestamp,
                           value.expire_timestamp)


def encode_group(group: StoredGroup) -> bytes:
    members = [MESSAGES.MemberMetadataRecord(member_id=m.member_id, group_instance_id=m.group_instance_id,
                                             client_id=m.client_id, client_host=m.client_host,
                                             rebalance_timeout=m.rebalance_timeout_ms,
                                             session_timeout=m.session_timeout_ms,
                                             subscription=m.subscription, assignment=m.assignment)
               for m in group.members]
    return _encode(MESSAGES.GroupMetadataValue(protocol_type=group.protocol_type, generation=group.generation,
                                               protocol=group.protocol, leader=group.leader,
                                               current_state_timestamp=group.current_state_timestamp,
                                               members=members),
                   GROUP_METADATA_VALUE_VERSION)


def decode_group(data: bytes) -> StoredGroup:
    """Raises ValueError for bytes that are not a GroupMetadataValue."""
    value = _decode(MESSAGES.GroupMetadataValue, data)
    version = record_version(data, "GroupMetadataValue")
    members = tuple(StoredMember(m.member_id, m.group_instance_id if version >= 3 else None, m.client_id,
                                 m.client_host,
                                 m.rebalance_timeout if version >= 1 else m.session_timeout,  # v0: Kafka's rule
                                 m.session_timeout, bytes(m.subscription or b""), bytes(m.assignment or b""))
                    for m in value.members)
    return StoredGroup(value.protocol_type or "", value.generation, value.protocol, value.leader,
                       value.current_state_timestamp if version >= 2 else -1, members)


def _consumer_group_json(decoded, key_version: int, value: bytes | None) -> dict:
    """A KIP-848 record as ``schemas/consumer-offsets.json``'s consumerGroupRecord (topic ids as strings)."""
    _, name = CONSUMER_GROUP_RECORDS[type(decoded)]
    doc_key = {"type": name, "version": key_version, "group": decoded.group}
    if hasattr(decoded, "member_id"):
        doc_key["member_id"] = decoded.member_id
    if isinstance(decoded, RegexKey):
        doc_key["regex"] = decoded.regex
    if value is None:
        return {"key": doc_key, "value": None}
    decoded_value = decode_consumer_group_value(decoded, value)

    def partitions(assignment) -> list:
        return [{"topic_id": str(t), "partitions": sorted(p)} for t, p in sorted(assignment.items(), key=str)]

    if isinstance(decoded, ConsumerGroupEpochKey):
        doc = {"epoch": decoded_value[0], "metadata_hash": decoded_value[1]}
    elif isinstance(decoded, TargetAssignmentEpochKey):
        doc = {"assignment_epoch": decoded_value}
    elif isinstance(decoded, TargetAssignmentMemberKey):
        doc = {"topic_partitions": partitions(decoded_value)}
    elif isinstance(decoded, RegexKey):
        doc = {"topics": sorted(decoded_value.topics), "regex_version": decoded_value.version,
               "timestamp": decoded_value.timestamp}
    elif isinstance(decoded, MemberMetadataKey):
        m = decoded_value
        doc = {"instance_id": m.instance_id, "rack_id": m.rack_id, "client_id": m.client_id,
               "client_host": m.client_host, "subscribed_topic_names": list(m.subscribed_topic_names),
               "subscribed_topic_regex": m.subscribed_topic_regex or "", "rebalance_timeout_ms": m.rebalance_timeout_ms,
               "server_assignor": m.server_assignor}
    else:
        m = decoded_value
        doc = {"member_epoch": m.member_epoch, "previous_member_epoch": m.previous_member_epoch,
               "state": int(m.state), "assigned_partitions": partitions(m.assigned),
               "partitions_pending_revocation": partitions(m.pending_revocation)}
    return {"key": doc_key, "value": {"version": VERSION.unpack_from(value)[0], **doc}}


def record_to_json(key: bytes, value: bytes | None) -> dict:
    """A record as the JSON document ``schemas/consumer-offsets.json`` describes (bytes in base64)."""
    decoded = decode_key(key)
    (key_version,) = VERSION.unpack_from(key)
    if is_consumer_group_key(decoded):
        return _consumer_group_json(decoded, key_version, value)
    value_version = VERSION.unpack_from(value)[0] if value is not None else None
    if isinstance(decoded, OffsetKey):
        doc_key = {"type": "offset_commit", "version": key_version, "group": decoded.group, "topic": decoded.topic,
                   "partition": decoded.partition}
        doc_value = None if value is None else {"version": value_version, **asdict(decode_offset(value))}
    else:
        doc_key = {"type": "group_metadata", "version": key_version, "group": decoded.group}
        doc_value = None
        if value is not None:
            group = asdict(decode_group(value))
            group["members"] = list(group["members"])
            for member in group["members"]:
                member["subscription"] = base64.b64encode(member["subscription"]).decode()
                member["assignment"] = base64.b64encode(member["assignment"]).decode()
            doc_value = {"version": value_version, **group}
    return {"key": doc_key, "value": doc_value}


# --- KIP-848 consumer groups: what their records keep -------------------------------------------------------

class MemberState(enum.IntEnum):
    """Kafka's MemberState, by the byte its CurrentMemberAssignment record keeps."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


@dataclass(frozen=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)

    def subscription_fields(self) -> tuple:
        return (self.instance_id, self.rack_id, self.client_id, self.client_host, self.subscribed_topic_names,
                self.subscribed_topic_regex, self.rebalance_timeout_ms, self.server_assignor)

    def assignment_fields(self) -> tuple:
        return (self.member_epoch, self.previous_member_epoch, self.state, self.assigned, self.pending_revocation)

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == epoch


@dataclass(frozen=True)
class ResolvedRegex:
    topics: frozenset[str]
    version: int
    timestamp: int


# --- KIP-848 consumer groups: Kafka 4's records (broker_sim/protocol/messages/ConsumerGroup*.json) --------------
# The key's int16 version is the record type (CoordinatorRecordType), the key's body its version 0; every value
# is version 0, flexible (compact strings and arrays, tagged fields).

@dataclass(frozen=True)
class ConsumerGroupEpochKey:       # ConsumerGroupMetadata (3): the group epoch
    group: str


@dataclass(frozen=True)
class MemberMetadataKey:           # ConsumerGroupMemberMetadata (5): a member's subscription
    group: str
    member_id: str


@dataclass(frozen=True)
class TargetAssignmentEpochKey:    # ConsumerGroupTargetAssignmentMetadata (6): the assignment epoch
    group: str


@dataclass(frozen=True)
class TargetAssignmentMemberKey:   # ConsumerGroupTargetAssignmentMember (7): a member's target partitions
    group: str
    member_id: str


@dataclass(frozen=True)
class CurrentAssignmentKey:        # ConsumerGroupCurrentMemberAssignment (8): a member's epoch and partitions
    group: str
    member_id: str


@dataclass(frozen=True)
class RegexKey:                    # ConsumerGroupRegularExpression (16): a regex's resolution
    group: str
    regex: str


CONSUMER_GROUP_RECORDS = {   # key class -> (record type, Kafka's message name without Key/Value)
    ConsumerGroupEpochKey: (3, "ConsumerGroupMetadata"),
    MemberMetadataKey: (5, "ConsumerGroupMemberMetadata"),
    TargetAssignmentEpochKey: (6, "ConsumerGroupTargetAssignmentMetadata"),
    TargetAssignmentMemberKey: (7, "ConsumerGroupTargetAssignmentMember"),
    CurrentAssignmentKey: (8, "ConsumerGroupCurrentMemberAssignment"),
    RegexKey: (16, "ConsumerGroupRegularExpression"),
}
_BY_TYPE = {record_type: (cls, name) for cls, (record_type, name) in CONSUMER_GROUP_RECORDS.items()}
# Kafka's other modern groups' record types (share 9-15, streams 17-24, share partition state 15): a pylog broker
# writes none; a topic written by Kafka may hold them, and they are skipped as records of another group type
OTHER_GROUP_RECORD_TYPES = frozenset(range(9, 16)) | frozenset(range(17, 25))


def _kafka4_messages() -> dict[str, type]:
    from broker_sim.protocol.messages import coordinator_record

    classes = {}
    for _, name in CONSUMER_GROUP_RECORDS.values():
        for kind, flexible in (("Key", "none"), ("Value", "0+")):
            definition = coordinator_record(name + kind)
            # a field named Version would be kafka-python's own ``version=`` (names are not on the wire)
            fields = [dict(f, name="RegexVersion") if f["name"] == "Version" else f for f in definition["fields"]]
            classes[name + kind] = message(name + kind, definition["validVersions"], flexible, fields)
    return classes


KAFKA4_MESSAGES = LazyMessages(tuple(name + kind for _, name in CONSUMER_GROUP_RECORDS.values()
                                     for kind in ("Key", "Value")), _kafka4_messages)


def is_consumer_group_key(key) -> bool:
    return type(key) in CONSUMER_GROUP_RECORDS


def _encode_kafka4(record, version: int, flexible: bool) -> bytes:
    return VERSION.pack(version) + record._struct.encode(record, version=0, compact=flexible, tagged=flexible)


def _topic_partitions(cls, assignment) -> list:
    return [cls(topic_id=topic, partitions=sorted(parts))
            for topic, parts in sorted(assignment.items(), key=lambda item: str(item[0]))]


def encode_consumer_group_key(key) -> bytes:
    record_type, name = CONSUMER_GROUP_RECORDS[type(key)]
    cls = getattr(KAFKA4_MESSAGES, name + "Key")
    fields = {"group_id": key.group}
    if hasattr(key, "member_id"):
        fields["member_id"] = key.member_id
    if isinstance(key, RegexKey):
        fields["regular_expression"] = key.regex
    return _encode_kafka4(cls(**fields), record_type, False)


def encode_consumer_group_value(key, value) -> bytes | None:
    """The value record of ``key``: a group epoch and metadata hash, an assignment epoch, a member
    (ConsumerMember), an assignment (topic id -> partitions) or a resolved regex; None stays None (a tombstone)."""
    if value is None:
        return None
    _, name = CONSUMER_GROUP_RECORDS[type(key)]
    cls = getattr(KAFKA4_MESSAGES, name + "Value")
    if isinstance(key, ConsumerGroupEpochKey):   # (epoch, metadata hash)
        record = cls(epoch=value[0], metadata_hash=value[1])
    elif isinstance(key, TargetAssignmentEpochKey):
        record = cls(assignment_epoch=value)
    elif isinstance(key, TargetAssignmentMemberKey):
        record = cls(topic_partitions=_topic_partitions(cls.TopicPartition, value))
    elif isinstance(key, RegexKey):
        record = cls(topics=sorted(value.topics), regex_version=value.version, timestamp=value.timestamp)
    elif isinstance(key, MemberMetadataKey):
        record = cls(instance_id=value.instance_id, rack_id=value.rack_id, client_id=value.client_id,
                     client_host=value.client_host, subscribed_topic_names=list(value.subscribed_topic_names),
                     subscribed_topic_regex=value.subscribed_topic_regex or "",   # Kafka writes "" for none
                     rebalance_timeout_ms=value.rebalance_timeout_ms, server_assignor=value.server_assignor)
    else:
        record = cls(member_epoch=value.member_epoch, previous_member_epoch=value.previous_member_epoch,
                     state=int(value.state), assigned_partitions=_topic_partitions(cls.TopicPartitions, value.assigned),
                     partitions_pending_revocation=_topic_partitions(cls.TopicPartitions, value.pending_revocation))
    return _encode_kafka4(record, 0, True)


def decode_consumer_group_key(record_type: int, data: bytes):
    cls, name = _BY_TYPE[record_type]
    key = decode_body(getattr(KAFKA4_MESSAGES, name + "Key"), data, 0, False)
    if key.group_id is None:
        raise ValueError(f"__consumer_offsets {name} key with a null group")
    if cls is RegexKey:
        return RegexKey(key.group_id, key.regular_expression or "")
    if hasattr(key, "member_id"):
        if key.member_id is None:
            raise ValueError(f"__consumer_offsets {name} key with a null member id")
        return cls(key.group_id, key.member_id)
    return cls(key.group_id)


def decode_consumer_group_value(key, data: bytes):
    """The value of a consumer group record, as ``encode_consumer_group_value`` takes it."""
    _, name = CONSUMER_GROUP_RECORDS[type(key)]
    cls = getattr(KAFKA4_MESSAGES, name + "Value")
    version = min(record_version(data, name + "Value"), cls._struct.max_version)
    value = decode_body(cls, data, version, True)

    def assignment(entries) -> dict:
        return {entry.topic_id: frozenset(entry.partitions or ()) for entry in entries or () if entry.partitions}

    if isinstance(key, ConsumerGroupEpochKey):
        return value.epoch, getattr(value, "metadata_hash", None) or 0
    if isinstance(key, TargetAssignmentEpochKey):
        return value.assignment_epoch
    if isinstance(key, TargetAssignmentMemberKey):
        return assignment(value.topic_partitions)
    if isinstance(key, RegexKey):
        return ResolvedRegex(frozenset(value.topics or ()), value.regex_version, value.timestamp)
    if isinstance(key, MemberMetadataKey):
        return ConsumerMember(key.member_id, instance_id=value.instance_id, rack_id=value.rack_id,
                              client_id=value.client_id or "", client_host=value.client_host or "",
                              subscribed_topic_names=tuple(value.subscribed_topic_names or ()),
                              subscribed_topic_regex=value.subscribed_topic_regex or None,
                              rebalance_timeout_ms=value.rebalance_timeout_ms, server_assignor=value.server_assignor)
    try:
        state = MemberState(value.state)
    except ValueError:
        state = MemberState.UNKNOWN
    return ConsumerMember(key.member_id, member_epoch=value.member_epoch,
                          previous_member_epoch=value.previous_member_epoch, state=state,
                          assigned=assignment(value.assigned_partitions),
                          pending_revocation=assignment(value.partitions_pending_revocation))
