"""The group coordinator: every group this broker coordinates, their offsets, and their durable records.

Theory of operation: ``GroupCoordinator`` is the synchronous core behind the
group APIs.  It finds the ``ClassicGroup`` a request names (creating it where
Kafka would), lets the group decide, and writes what must survive a restart to
``__consumer_offsets`` *before* answering: offset commits, group metadata
after each completed rebalance, tombstones for deleted groups and expired
offsets.  Writes go through ``Partition.append_records`` of the group's
partition (``InternalTopicOwner.append``), so records get real offsets and the
topic is an ordinary, readable Kafka topic; appends are synchronous, so no
other request runs between "write" and "answer".

A group record that was not stored is Kafka's ``storeGroup`` callback with an
error: no reply says NONE about it (``unstored``: it becomes the append's error
as ``GROUP_APPEND_ERRORS`` maps it), and a leader's assignment that was not
stored is dropped and the group rebalances again (``assignment_not_stored``).
That holds for an append that fails at once and, through ``group.service``, for
one that the ISR did not get.

Ownership: the coordinator serves a group only when it has loaded the group's
partition (``load_partition``, replaying the records: the last value of a key
wins, a tombstone deletes it).  A single broker loads every partition at start
and every partition of the topic it creates on first use; a replicated broker
calls ``load_partition``/``unload_partition`` as it gains and loses leadership,
and requests for other groups get NOT_COORDINATOR.  Groups come back Empty with
their offsets and generation; their members rejoin (as after a coordinator move).

Groups are bounded: a coordinator holds at most ``group.max.groups`` (a pylog
addition modelled on Kafka's ``group.share.max.groups``; Kafka has no bound on
classic groups), because every group is state replayed at each load and any
client that may commit offsets can create one.  A JoinGroup, OffsetCommit or
TxnOffsetCommit that would create one more gets GROUP_MAX_SIZE_REACHED; groups
that already exist (and the records of a loaded partition) are never refused.

Transactional offset commits (TxnOffsetCommit) are written as part of the
producer's transaction — a transactional batch with its producer id and
epoch — and kept pending in the group until the transaction coordinator's
marker reaches the partition: ``complete_txn_offsets`` applies them on
COMMIT and drops them on ABORT (Kafka's ``GroupMetadata.completePendingTxnOffsetCommit``);
a reload does the same with the markers it reads.  As there, an offset is
applied only over an older one: a plain commit of the partition appended after
the pending one wins, whenever the transaction commits.

Time comes from the injected ``clock``; the held requests (JoinGroup,
SyncGroup) are tickets answered through the returned replies — the asyncio
layer is ``group.service.GroupService``, which also answers only once the ISR
has the records.  Runs on the broker's event loop thread.
"""
from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

import kafka.errors as Errors

from broker_sim.coordinator.group.consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH, POLL_RETRY_MS, ConsumerGroup, ConsumerSettings, GroupError,
    HeartbeatAnswer, HeartbeatRequest,
)
from broker_sim.coordinator.group.metadata import (
    COORDINATOR_NOT_AVAILABLE, GROUP_MAX_SIZE_REACHED, INCONSISTENT_GROUP_PROTOCOL, NONE, UNKNOWN_MEMBER_ID,
    ClassicGroup, GroupConfig, JoinRequest,
    JoinResult, Outcome, Reply, SyncResult,
)
from broker_sim.coordinator.group.records import (
    OFFSETS_TOPIC, CommittedOffset, ConsumerGroupEpochKey, GroupKey, OffsetKey, RegexKey, StoredGroup,
    TargetAssignmentEpochKey, decode_consumer_group_value, decode_group, decode_key, decode_offset,
    encode_consumer_group_key, encode_consumer_group_value, encode_group, encode_key, encode_offset,
    is_consumer_group_key,
)
from broker_sim.coordinator.group.state import DEAD, STABLE
from broker_sim.coordinator.internal_topic import (
    UNKNOWN_SERVER_ERROR, InternalTopic, InternalTopicOwner, read_partition_batches,
)

log = logging.getLogger(__name__)

NOT_COORDINATOR = Errors.NotCoordinatorError.errno
INVALID_GROUP_ID = Errors.InvalidGroupIdError.errno
INVALID_SESSION_TIMEOUT = Errors.InvalidSessionTimeoutError.errno
ILLEGAL_GENERATION = Errors.IllegalGenerationError.errno
GROUP_ID_NOT_FOUND = Errors.GroupIdNotFoundError.errno
NON_EMPTY_GROUP = Errors.NonEmptyGroupError.errno
GROUP_SUBSCRIBED_TO_TOPIC = Errors.GroupSubscribedToTopicError.errno
OFFSET_METADATA_TOO_LARGE = Errors.OffsetMetadataTooLargeError.errno
UNKNOWN_TOPIC_OR_PARTITION = Errors.UnknownTopicOrPartitionError.errno
INVALID_COMMIT_OFFSET_SIZE = Errors.InvalidCommitOffsetSizeError.errno


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    error: int
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberDescription, ...] = ()
    not_found: str | None = None   # DescribeGroups v6+: why the group is GROUP_ID_NOT_FOUND (None: it is not)


class GroupCoordinator(InternalTopicOwner):
    TOPIC = OFFSETS_TOPIC
    # Kafka's storeOffsets: append errors as an OffsetCommit answers them
    APPEND_ERRORS = {
        Errors.UnknownTopicOrPartitionError.errno: COORDINATOR_NOT_AVAILABLE,
        Errors.NotEnoughReplicasError.errno: COORDINATOR_NOT_AVAILABLE,
        Errors.NotEnoughReplicasAfterAppendError.errno: COORDINATOR_NOT_AVAILABLE,
        Errors.NotLeaderForPartitionError.errno: NOT_COORDINATOR,
        Errors.KafkaStorageError.errno: NOT_COORDINATOR,
        Errors.MessageSizeTooLargeError.errno: INVALID_COMMIT_OFFSET_SIZE,
        Errors.RecordListTooLargeError.errno: INVALID_COMMIT_OFFSET_SIZE,
        Errors.InvalidFetchRequestError.errno: INVALID_COMMIT_OFFSET_SIZE,  # Kafka's INVALID_FETCH_SIZE
    }
    # a group record's append error as JoinGroup, SyncGroup and LeaveGroup answer it: the storeGroup callback of
    # Kafka's GroupMetadataManager.scala, with a timeout answered COORDINATOR_NOT_AVAILABLE as the new coordinator's
    # appendGroupMetadataErrorToResponseError does (the Scala one answers it REBALANCE_IN_PROGRESS)
    GROUP_APPEND_ERRORS = {
        UNKNOWN_TOPIC_OR_PARTITION: COORDINATOR_NOT_AVAILABLE,
        Errors.NotEnoughReplicasError.errno: COORDINATOR_NOT_AVAILABLE,
        Errors.NotEnoughReplicasAfterAppendError.errno: COORDINATOR_NOT_AVAILABLE,
        Errors.RequestTimedOutError.errno: COORDINATOR_NOT_AVAILABLE,
        Errors.NotLeaderForPartitionError.errno: NOT_COORDINATOR,
        Errors.KafkaStorageError.errno: NOT_COORDINATOR,
        Errors.MessageSizeTooLargeError.errno: UNKNOWN_SERVER_ERROR,
        Errors.RecordListTooLargeError.errno: UNKNOWN_SERVER_ERROR,
        Errors.InvalidFetchRequestError.errno: UNKNOWN_SERVER_ERROR,
    }

    def __init__(self, config: GroupConfig, topic: InternalTopic, *, clock: Callable[[], int],
                 partition_exists: Callable[[str, int], bool], topics: Callable[[], Mapping] = dict,
                 group_timing: Callable[[str], tuple[int, int]] | None = None) -> None:
        super().__init__(topic, clock)
        self.config = config
        self.partition_exists = partition_exists
        self.topics = topics   # the cluster's topics by name (TopicInfo: topic_id, partitions), for KIP-848 groups
        self.consumer_settings = ConsumerSettings(config.consumer_session_timeout_ms,
                                                  config.consumer_heartbeat_interval_ms, config.consumer_max_size,
                                                  config.consumer_assignors)
        # a KIP-848 group's (session timeout, heartbeat interval): its group configs, else the broker's
        self.group_timing = group_timing or (lambda group_id: (self.consumer_settings.session_timeout_ms,
                                                               self.consumer_settings.heartbeat_interval_ms))
        self.groups: dict[str, ClassicGroup | ConsumerGroup] = {}
        self._tickets = itertools.count(1)
        self._warned_full = False  # group.max.groups reached and logged

    @property
    def default_partitions(self) -> int:
        return self.config.offsets_partitions

    def load_partition(self, partition) -> int:
        """Rebuild the groups and offsets kept in one partition; returns the number of groups loaded.

        A record that cannot be decoded (unknown key version, truncated value,
        a value of the wrong type) or that names a group of another partition
        is logged with its offset and skipped: the rest of the partition loads.
        """
        stored: dict[str, StoredGroup | None] = {}
        offsets: dict[str, dict[tuple[str, int], CommittedOffset]] = {}
        consumer_records: dict[str, list] = {}   # KIP-848 groups' records, in log order, replayed below
        latest_kind: dict[str, str] = {}   # "classic" or "consumer": the protocol of a group's latest record
        in_txn: dict[int, dict] = {}  # producer id -> key -> value of its open transaction, in order

        def decoded(record):
            """(key, value) of a record, or None when it is to be skipped."""
            try:
                key = decode_key(record.key)
                if self.partition_of(key.group) != partition.index:
                    raise ValueError(f"group {key.group!r} belongs to partition {self.partition_of(key.group)}")
                if record.value is None:
                    return key, None
                if is_consumer_group_key(key):
                    return key, decode_consumer_group_value(key, record.value)
                return key, decode_offset(record.value) if isinstance(key, OffsetKey) else decode_group(record.value)
            except ValueError as exc:
                log.warning("%s-%d: skipping the record at offset %d: %s", OFFSETS_TOPIC, partition.index,
                            record.offset, exc)
                return None

        def apply(key, value) -> None:
            if isinstance(key, OffsetKey):
                group_offsets = offsets.setdefault(key.group, {})
                if value is None:
                    group_offsets.pop((key.topic, key.partition), None)
                else:
                    group_offsets[(key.topic, key.partition)] = value
            elif is_consumer_group_key(key):
                consumer_records.setdefault(key.group, []).append((key, value))
                if value is not None:
                    latest_kind[key.group] = "consumer"
            else:
                stored[key.group] = value
                if value is not None:
                    latest_kind[key.group] = "classic"

        for batch, records in read_partition_batches(partition):
            if batch.is_control_batch:
                held = in_txn.pop(batch.producer_id, {})
                if any(record.commit for record in records):
                    for key, value in held.items():
                        apply(key, value)
            elif batch.is_transactional:
                in_txn.setdefault(batch.producer_id, {}).update(filter(None, map(decoded, records)))
            else:
                for key, value in filter(None, map(decoded, records)):
                    apply(key, value)
                    if isinstance(key, OffsetKey) and value is not None:
                        for held in in_txn.values():  # older than this commit: never applied over it
                            held.pop(key, None)
        now = self.clock()
        loaded = 0
        for group_id in set(stored) | set(offsets) | set(consumer_records):
            record, group_offsets = stored.get(group_id), offsets.get(group_id) or {}
            consumer = None
            if latest_kind.get(group_id) == "consumer":
                consumer = self._new_consumer_group(group_id, now)
                for key, value in consumer_records[group_id]:
                    consumer.replay(key, value)
                if consumer.dead:
                    consumer = None
                else:
                    consumer.restart_sessions(now, self.group_timing(group_id)[0])
            if consumer is None and record is None and not group_offsets:
                continue
            if consumer is not None:
                group = consumer
            else:
                group = (ClassicGroup.restored(group_id, record, now, self.config) if record is not None
                         and latest_kind.get(group_id) == "classic" else ClassicGroup(group_id, now, self.config))
            group.offsets = group_offsets
            self.groups[group_id] = group
            loaded += 1
        for producer_id, records in in_txn.items():
            for key, value in records.items():
                if isinstance(key, OffsetKey) and value is not None:
                    group = self.groups.get(key.group)
                    if group is None:
                        group = self.groups[key.group] = ClassicGroup(key.group, now, self.config)
                    group.pending_txn_offsets.setdefault(producer_id, {})[(key.topic, key.partition)] = value
        self.loaded.add(partition.index)
        log.info("loaded %d groups from %s-%d", loaded, OFFSETS_TOPIC, partition.index)
        return loaded

    def unload_partition(self, index: int) -> list[Reply]:
        """Forget the groups of a partition this broker no longer leads; held requests get NOT_COORDINATOR."""
        self.loaded.discard(index)
        replies: list[Reply] = []
        for group_id in [g for g in self.groups if self.partition_of(g) == index]:
            group = self.groups.pop(group_id)
            if isinstance(group, ConsumerGroup):
                continue   # nothing held: its members heartbeat the new coordinator
            for member in group.members.values():
                if member.join_ticket is not None:
                    replies.append((member.join_ticket, JoinResult(NOT_COORDINATOR, member.member_id)))
                if member.sync_ticket is not None:
                    replies.append((member.sync_ticket, SyncResult(NOT_COORDINATOR)))
        return replies

    # --- FindCoordinator ------------------------------------------------------------
    def find_coordinator(self, group_id: str) -> int:
        self.ensure_topic()
        return NONE if self.is_coordinator(group_id) else NOT_COORDINATOR

    # --- membership ---------------------------------------------------------------------
    def new_ticket(self) -> int:
        return next(self._tickets)

    def join(self, group_id: str, request: JoinRequest, ticket: int) -> list[Reply]:
        error = self._group_error(group_id)
        if not error and not (self.config.min_session_timeout_ms <= request.session_timeout_ms
                              <= self.config.max_session_timeout_ms):
            error = INVALID_SESSION_TIMEOUT
        group = self.groups.get(group_id)
        if not error and isinstance(group, ConsumerGroup):
            if group.empty:   # Kafka converts an empty consumer group to a classic one on a JoinGroup
                error = self._delete_consumer_group(group)
                group = None
            else:
                # Kafka 4 lets classic members join a consumer group (group.consumer.migration.policy); pylog
                # keeps the protocols apart and answers as Kafka does a group of another type
                log.info("group %s: a classic JoinGroup to a consumer-protocol group with members refused",
                         group_id)
                error = INCONSISTENT_GROUP_PROTOCOL
        if not error and group is None:
            if request.member_id:
                error = UNKNOWN_MEMBER_ID
            elif self._full():
                error = GROUP_MAX_SIZE_REACHED
            else:
                group = self.groups[group_id] = ClassicGroup(group_id, self.clock(), self.config)
        if error:
            return [(ticket, JoinResult(error, request.member_id))]
        return self._finish(group, group.join(request, ticket, self.clock()))

    def sync(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int,
             protocol_type: str | None, protocol_name: str | None, assignments: dict[str, bytes],
             ticket: int) -> list[Reply]:
        error = self._group_error(group_id)
        group = self.groups.get(group_id)
        if not error and (group is None or isinstance(group, ConsumerGroup)):
            error = UNKNOWN_MEMBER_ID
        if error:
            return [(ticket, SyncResult(error))]
        replies, error = self._stored(group, group.sync(member_id, group_instance_id, generation_id, protocol_type,
                                                        protocol_name, assignments, ticket, self.clock()))
        if error:  # the leader's assignment did not reach the log
            replies += self.assignment_not_stored(group_id, generation_id)
        return replies

    def assignment_not_stored(self, group_id: str, generation_id: int) -> list[Reply]:
        """The group record the leader's SyncGroup of ``generation_id`` wrote may be lost: drop its assignment and
        rebalance again (Kafka's storeGroup callback with an error: resetAndPropagateAssignmentError, then
        maybePrepareRebalance); returns the replies that this gives.

        Only while the group is still Stable at that generation: a rebalance begun or completed since has
        replaced that assignment already (Kafka checks CompletingRebalance at the generation, the state it
        stays in until the record is stored; pylog's group became Stable when the leader's SyncGroup came).
        """
        group = self.groups.get(group_id)
        if (not isinstance(group, ClassicGroup) or group.state is not STABLE
                or group.generation_id != generation_id):
            return []
        log.warning("group %s: the assignment of generation %d was not stored; rebalancing again", group_id,
                    generation_id)
        for member in group.members.values():
            member.assignment = b""
        return group._prepare_rebalance(self.clock()).replies

    @staticmethod
    def unstored(result: JoinResult | SyncResult, error: int) -> JoinResult | SyncResult:
        """``result`` as answered when the group record behind it may be lost: a success becomes ``error`` (a
        JoinGroup's without a member id, as Kafka's); an error stays, it depends on no record."""
        if result.error != NONE:
            return result
        return SyncResult(error) if isinstance(result, SyncResult) else JoinResult(error, "")

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int) -> int:
        error = self._group_error(group_id)
        if error:
            return error
        group = self.groups.get(group_id)
        if not isinstance(group, ClassicGroup):
            return UNKNOWN_MEMBER_ID
        return group.heartbeat(member_id, group_instance_id, generation_id, self.clock())

    def leave(self, group_id: str, members: list[tuple[str, str | None]]) -> tuple[int, list[int], list[Reply]]:
        """(group error, per-member errors, replies to held requests)."""
        error = self._group_error(group_id)
        if error:
            return error, [error] * len(members), []
        group = self.groups.get(group_id)
        if not isinstance(group, ClassicGroup):
            return NONE, [UNKNOWN_MEMBER_ID] * len(members), []
        if group.state is DEAD:
            return COORDINATOR_NOT_AVAILABLE, [COORDINATOR_NOT_AVAILABLE] * len(members), []
        errors, outcome = group.leave(members, self.clock())
        return NONE, errors, self._finish(group, outcome)

    def poll(self, group_ids: Iterable[str] | None = None) -> list[Reply]:
        """Session expiry, rebalance timeouts and initial delays of these groups (None: every group)."""
        now = self.clock()
        replies: list[Reply] = []
        groups = self.groups.values() if group_ids is None else filter(None, map(self.groups.get, group_ids))
        for group in list(groups):
            if isinstance(group, ConsumerGroup):
                self._poll_consumer_group(group, now)
            else:
                replies.extend(self._finish(group, group.poll(now)))
        return replies

    def next_deadline_ms(self, group_id: str) -> int | None:
        """When ``poll`` next has something to do for this group (None: nothing, or no such group)."""
        group = self.groups.get(group_id)
        return None if group is None else group.next_deadline_ms()

    def _finish(self, group: ClassicGroup, outcome: Outcome) -> list[Reply]:
        return self._stored(group, outcome)[0]

    def _stored(self, group: ClassicGroup, outcome: Outcome) -> tuple[list[Reply], int]:
        """The outcome's replies once the group record it asks for is written, and the error that write had."""
        error = self._store_group(group) if outcome.store else NONE
        if error:
            return [(ticket, self.unstored(result, error)) for ticket, result in outcome.replies], error
        return outcome.replies, NONE

    def _full(self) -> bool:
        """True when this coordinator holds group.max.groups groups: no new one may be created."""
        if len(self.groups) < self.config.max_groups:
            self._warned_full = False
            return False
        if not self._warned_full:  # once each time the bound is reached, not once per refused request
            self._warned_full = True
            log.warning("group.max.groups=%d reached: new groups are refused", self.config.max_groups)
        return True

    def _group_error(self, group_id: str | None) -> int:
        if not group_id:
            return INVALID_GROUP_ID
        return NONE if self.is_coordinator(group_id) else NOT_COORDINATOR

    # --- offsets --------------------------------------------------------------------------
    def commit_offsets(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int,
                       commits: list[tuple[str, int, CommittedOffset]], *,
                       missing_group: int = ILLEGAL_GENERATION, version: int = 9) -> dict[tuple[str, int], int]:
        """Error code per (topic, partition); the commits are durable before this returns.

        A commit timestamp of -1 means "now".  Commits from outside the group (generation -1, no member
        id) create the group when it does not exist, as Kafka does for consumers that assign themselves; a
        member's commit (generation >= 0) to a group that does not exist is ``missing_group``: Kafka's
        ILLEGAL_GENERATION before OffsetCommit v9, GROUP_ID_NOT_FOUND from it.
        """
        now = self.clock()
        error = self._group_error(group_id)
        group = self.groups.get(group_id)
        created = False
        if not error and group is None:
            if generation_id >= 0:
                error = missing_group  # a member of a generation this coordinator never saw
            elif self._full():
                error = GROUP_MAX_SIZE_REACHED
            else:
                group, created = ClassicGroup(group_id, now, self.config), True
        if not error:
            if isinstance(group, ConsumerGroup):
                error = group.validate_offset_commit(member_id, group_instance_id, generation_id, now,
                                                     version=version)
            else:
                error = group.validate_offset_commit(member_id, group_instance_id, generation_id, now)
        if error:
            return {(t, p): error for t, p, _ in commits}
        results, accepted = self._screen_commits(commits, now, keep_given_timestamp=True)
        if accepted:
            records = [(encode_key(OffsetKey(group_id, t, p)), encode_offset(v)) for (t, p), v in accepted.items()]
            append_error = self.append(group_id, records)
            if not append_error:
                group.offsets.update(accepted)
                # pending transactional commits of these partitions are older than this one: as Kafka's
                # completePendingTxnOffsetCommit, their transaction's commit must not write over it
                for pending in group.pending_txn_offsets.values():
                    for tp in accepted:
                        pending.pop(tp, None)
                if created:
                    self.groups[group_id] = group
            for tp in accepted:
                results[tp] = append_error
        return results

    def _screen_commits(self, commits: list[tuple[str, int, CommittedOffset]], now: int, *,
                        keep_given_timestamp: bool):
        """(error code per refused partition, offsets to write stamped with ``now``) for a commit request."""
        results: dict[tuple[str, int], int] = {}
        accepted: dict[tuple[str, int], CommittedOffset] = {}
        for topic, partition, value in commits:
            if not self.partition_exists(topic, partition):
                results[(topic, partition)] = UNKNOWN_TOPIC_OR_PARTITION
            elif len(value.metadata.encode()) > self.config.offset_metadata_max_bytes:
                results[(topic, partition)] = OFFSET_METADATA_TOO_LARGE
            elif keep_given_timestamp and value.commit_timestamp >= 0:
                accepted[(topic, partition)] = value
            else:
                accepted[(topic, partition)] = CommittedOffset(value.offset, value.leader_epoch, value.metadata,
                                                               now, value.expire_timestamp)
        return results, accepted

    def commit_txn_offsets(self, group_id: str, producer_id: int, producer_epoch: int, member_id: str,
                           group_instance_id: str | None, generation_id: int,
                           commits: list[tuple[str, int, CommittedOffset]]) -> dict[tuple[str, int], int]:
        """TxnOffsetCommit: error code per (topic, partition); the commits are pending until the marker.

        The records are durable, as part of the producer's transaction, before this returns.
        """
        now = self.clock()
        error = self._group_error(group_id)
        group = self.groups.get(group_id)
        created = False
        if not error and group is None:
            if generation_id >= 0:
                error = ILLEGAL_GENERATION  # a member of a generation this coordinator never saw
            elif self._full():
                error = GROUP_MAX_SIZE_REACHED
            else:
                group, created = ClassicGroup(group_id, now, self.config), True
        if not error:
            error = group.validate_offset_commit(member_id, group_instance_id, generation_id, now, transactional=True)
        if error:
            return {(t, p): error for t, p, _ in commits}
        results, accepted = self._screen_commits(commits, now, keep_given_timestamp=False)
        if accepted:
            records = [(encode_key(OffsetKey(group_id, t, p)), encode_offset(v)) for (t, p), v in accepted.items()]
            append_error = self.append(group_id, records, producer=(producer_id, producer_epoch))
            if not append_error:
                group.pending_txn_offsets.setdefault(producer_id, {}).update(accepted)
                if created:
                    self.groups[group_id] = group
            for tp in accepted:
                results[tp] = append_error
        return results

    def complete_txn_offsets(self, partition_index: int, producer_id: int, commit: bool) -> None:
        """A marker for ``producer_id`` reached ``__consumer_offsets-<partition_index>``: apply or drop its offsets."""
        for group_id, group in self.groups.items():
            if producer_id in group.pending_txn_offsets and self.partition_of(group_id) == partition_index:
                pending = group.pending_txn_offsets.pop(producer_id)
                if commit:
                    group.offsets.update(pending)

    def fetch_offsets(self, group_id: str, partitions: list[tuple[str, list[int]]] | None,
                      member: tuple[str | None, int] = (None, -1)
                      ) -> tuple[int, dict[str, dict[int, CommittedOffset | None]]]:
        """(group error, topic -> partition -> committed offset or None); ``partitions`` None means all.
        ``member`` (OffsetFetch v9's member id and epoch) is checked against a consumer-protocol group."""
        error = self._group_error(group_id)
        if error:
            return error, {}
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            error = group.validate_offset_fetch(*member)
            if error:
                return error, {}
        offsets = group.offsets if group is not None else {}
        result: dict[str, dict[int, CommittedOffset | None]] = {}
        if partitions is None:
            for (topic, partition), value in sorted(offsets.items()):
                result.setdefault(topic, {})[partition] = value
        else:
            for topic, indexes in partitions:
                result[topic] = {p: offsets.get((topic, p)) for p in indexes}
        return NONE, result

    def unstable_partitions(self, group_id: str) -> frozenset[tuple[str, int]]:
        """The group's partitions with a transactional commit pending (Kafka's hasPendingTransactionalOffsets)."""
        group = self.groups.get(group_id)
        if group is None:
            return frozenset()
        return frozenset(tp for pending in group.pending_txn_offsets.values() for tp in pending)

    def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]]
                       ) -> tuple[int, dict[tuple[str, int], int]]:
        """(group error, error per partition) for OffsetDelete."""
        error = self._group_error(group_id)
        group = self.groups.get(group_id)
        if not error and (group is None or group.dead):
            error = GROUP_ID_NOT_FOUND
        if not error and not group.empty and group.protocol_type != "consumer":
            error = NON_EMPTY_GROUP
        if error:
            return error, {}
        results: dict[tuple[str, int], int] = {}
        doomed = []
        for topic, partition in partitions:
            if not self.partition_exists(topic, partition):
                results[(topic, partition)] = UNKNOWN_TOPIC_OR_PARTITION
            elif not group.empty and group.is_subscribed_to(topic):
                results[(topic, partition)] = GROUP_SUBSCRIBED_TO_TOPIC
            else:
                results[(topic, partition)] = NONE
                if (topic, partition) in group.offsets:
                    doomed.append((topic, partition))
        if doomed:
            append_error = self.append(group_id, [(encode_key(OffsetKey(group_id, t, p)), None) for t, p in doomed])
            if append_error:
                return append_error, {}
            for tp in doomed:
                del group.offsets[tp]
        return NONE, results

    def expire_offsets(self) -> int:
        """Tombstone offsets past retention, drop Empty groups left without offsets; returns offsets expired."""
        now = self.clock()
        expired_total = 0
        for group_id, group in list(self.groups.items()):
            if self.partition_of(group_id) not in self.loaded and self.topic.exists():
                continue
            if isinstance(group, ConsumerGroup):
                expired = group.expired_offsets(now, self.config.offsets_retention_ms)
            else:
                expired = group.expired_offsets(now)
            records = [(encode_key(OffsetKey(group_id, t, p)), None) for t, p in expired]
            remove_group = (group.empty and not group.pending_members and not group.pending_txn_offsets
                            and len(expired) == len(group.offsets))
            if remove_group:
                records.extend(self._group_tombstones(group))
            if not records or self.append(group_id, records):
                continue
            for tp in expired:
                del group.offsets[tp]
            expired_total += len(expired)
            if remove_group:
                group.mark_dead(now)
                del self.groups[group_id]
                log.info("group %s removed: Empty and its offsets expired", group_id)
        return expired_total

    # --- admin ---------------------------------------------------------------------------
    def describe(self, group_id: str) -> GroupDescription:
        error = self._group_error(group_id)
        if error:
            return GroupDescription(group_id, error, "", "", "")
        group = self.groups.get(group_id)
        if group is None:
            return GroupDescription(group_id, NONE, str(DEAD), "", "", not_found=f"Group {group_id} not found.")
        if isinstance(group, ConsumerGroup):   # Kafka's classicGroup(): GroupIdNotFoundException
            return GroupDescription(group_id, NONE, str(DEAD), "", "",
                                    not_found=f"Group {group_id} is not a classic group.")
        stable = group.state is STABLE
        members = tuple(MemberDescription(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                          m.metadata(group.protocol_name) if stable else b"",
                                          m.assignment if stable else b"")
                        for m in group.members.values())
        return GroupDescription(group_id, NONE, str(group.state), group.protocol_type or "",
                                (group.protocol_name or "") if stable else "", members)

    def list_groups(self, states: Iterable[str] = (), types: Iterable[str] = ()) -> list[tuple[str, str, str, str]]:
        """(group id, protocol type, state, group type) of the groups this broker coordinates, optionally only
        those whose state (case-insensitive, as Kafka's filter) is in ``states`` and type in ``types``."""
        wanted = {str(state).lower() for state in states}
        kinds = {kind.lower() for kind in types}
        return [(g.group_id, g.protocol_type or "", str(g.state), g.group_type)
                for group_id, g in sorted(self.groups.items())
                if self.is_coordinator(group_id) and (not wanted or str(g.state).lower() in wanted)
                and (not kinds or g.group_type in kinds)]

    def delete_groups(self, group_ids: list[str]) -> dict[str, int]:
        now = self.clock()
        results = {}
        for group_id in group_ids:
            error = self._group_error(group_id)
            group = self.groups.get(group_id)
            if not error and (group is None or group.dead):
                error = GROUP_ID_NOT_FOUND
            if not error and not group.empty:
                error = NON_EMPTY_GROUP
            if not error:
                records = [(encode_key(OffsetKey(group_id, t, p)), None) for t, p in group.offsets]
                records.extend(self._group_tombstones(group))
                error = self.append(group_id, records)
                if not error:
                    group.mark_dead(now)
                    del self.groups[group_id]
            results[group_id] = error
        return results

    # --- the log ---------------------------------------------------------------------------
    def _store_group(self, group: ClassicGroup) -> int:
        """Append the group's record; NONE or the error to answer (``GROUP_APPEND_ERRORS``)."""
        error = self.append(group.group_id, [(encode_key(GroupKey(group.group_id)), encode_group(group.stored()))],
                            errors=self.GROUP_APPEND_ERRORS)
        if error:
            log.error("could not store the metadata of group %s (error %d)", group.group_id, error)
        return error

    def _group_tombstones(self, group) -> list[tuple[bytes, None]]:
        """The tombstones that delete an Empty group's own records (not its offsets)."""
        if isinstance(group, ConsumerGroup):
            keys = [*(RegexKey(group.group_id, regex) for regex in group.regexes),
                    TargetAssignmentEpochKey(group.group_id), ConsumerGroupEpochKey(group.group_id)]
            return [(encode_consumer_group_key(key), None) for key in keys]
        return [(encode_key(GroupKey(group.group_id)), None)]

    # --- KIP-848 consumer groups -----------------------------------------------------------------
    def _new_consumer_group(self, group_id: str, now: int) -> ConsumerGroup:
        return ConsumerGroup(group_id, now, self.consumer_settings)

    def _write_consumer_records(self, group: ConsumerGroup, records) -> int:
        """Append a consumer group's records; NONE or the error to answer (``GROUP_APPEND_ERRORS``)."""
        if not records:
            return NONE
        encoded = [(encode_consumer_group_key(key), encode_consumer_group_value(key, value)) for key, value in records]
        error = self.append(group.group_id, encoded, errors=self.GROUP_APPEND_ERRORS)
        if error:
            log.error("could not store the records of consumer group %s (error %d)", group.group_id, error)
        return error

    def _delete_consumer_group(self, group: ConsumerGroup) -> int:
        """Drop an Empty consumer group's own records (a classic JoinGroup converts it); its offsets stay."""
        error = self.append(group.group_id, self._group_tombstones(group), errors=self.GROUP_APPEND_ERRORS)
        if not error:
            del self.groups[group.group_id]
            log.info("group %s: converted the empty consumer group to a classic group", group.group_id)
        return error

    def consumer_group_heartbeat(self, group_id: str, request: HeartbeatRequest) -> HeartbeatAnswer:
        """ConsumerGroupHeartbeat (KIP-848), after the request's own checks (``check_heartbeat``): the answer
        once the group's records are written; a refusal is an answer with the error and its message."""
        error = self._group_error(group_id)
        if error:
            return HeartbeatAnswer(error)
        now = self.clock()
        group = self.groups.get(group_id)
        created = None
        replaced_classic = False
        try:
            if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                if not isinstance(group, ConsumerGroup):
                    raise GroupError(Errors.GroupIdNotFoundError, f"Group {group_id} not found." if group is None
                                     else f"Group {group_id} is not a consumer group.")
                snapshot = group.snapshot()
                answer = group.leave(request.member_id, request.instance_id, request.member_epoch, self.topics, now)
            else:
                if group is None or (isinstance(group, ClassicGroup) and request.member_epoch == 0 and group.empty
                                     and not group.pending_members):
                    if request.member_epoch != 0:
                        raise GroupError(Errors.GroupIdNotFoundError, f"Consumer group {group_id} not found.")
                    if group is None and self._full():
                        raise GroupError(Errors.GroupMaxSizeReachedError,
                                         f"this coordinator holds group.max.groups={self.config.max_groups} groups")
                    created = self._new_consumer_group(group_id, now)
                    if group is not None:   # an empty classic group becomes a consumer group, its offsets kept
                        created.offsets, created.pending_txn_offsets = group.offsets, group.pending_txn_offsets
                        replaced_classic = True
                    group = created
                elif not isinstance(group, ConsumerGroup):
                    # Kafka converts a classic group with members online (group.consumer.migration.policy); pylog
                    # does not mix the protocols and answers as Kafka does when the policy forbids it
                    raise GroupError(Errors.GroupIdNotFoundError, f"Group {group_id} is not a consumer group.")
                snapshot = group.snapshot()
                session_ms, interval_ms = self.group_timing(group_id)
                answer = group.heartbeat(request, self.topics, now, interval_ms=interval_ms, session_ms=session_ms)
        except GroupError as exc:   # Kafka answers a refusal with its error and message only
            if created is None and isinstance(group, ConsumerGroup) and "snapshot" in locals():
                group.restore(snapshot)
            return HeartbeatAnswer(exc.code, exc.message)
        encoded = [(encode_consumer_group_key(k), encode_consumer_group_value(k, v)) for k, v in group.take_records()]
        if replaced_classic:   # Kafka's maybeDeleteEmptyClassicGroup: the classic group's record goes first
            encoded.insert(0, (encode_key(GroupKey(group_id)), None))
        error = self.append(group_id, encoded, errors=self.GROUP_APPEND_ERRORS) if encoded else NONE
        if error:
            log.error("could not store the records of consumer group %s (error %d)", group_id, error)
            if created is None:
                group.restore(snapshot)
            return HeartbeatAnswer(error)
        if created is not None:
            self.groups[group_id] = created
            log.info("group %s: created as a consumer-protocol group", group_id)
        return answer

    def _poll_consumer_group(self, group: ConsumerGroup, now: int) -> None:
        snapshot = group.snapshot()
        group.poll(self.topics, now)
        if self._write_consumer_records(group, group.take_records()):
            group.restore(snapshot)
            group.retry_at_ms = now + POLL_RETRY_MS

    def describe_consumer_group(self, group_id: str):
        """(error, message, group or None) for ConsumerGroupDescribe."""
        error = self._group_error(group_id)
        if error:
            return error, None, None
        group = self.groups.get(group_id)
        if group is None:
            return GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", None
        if not isinstance(group, ConsumerGroup):
            return GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.", None
        return NONE, None, group
