"""Every API of the authorizer's operation table, sent raw, just below and just above its line (issue 24, item 1).

Real clients stop at an earlier request (FindCoordinator, JoinGroup, Metadata) when a right is missing, so
each API's own check is reached here only by a framed request over a socket (``WireClient``), as a
principal that holds exactly the rights just below the line: every other operation of the resource (those
that do not imply the needed one), and the needed one on a sibling literal name and on a prefix that does
not match.  The request must get the API's exact error code and change nothing (read back by ``admin``, a
super user, over the wire); with the needed right added, the same request passes and (for the APIs that
change state) changes it.  One broker, a SASL_PLAINTEXT listener (PLAIN users from its JAAS config: admin
and one user per case, so cases do not see each other's bindings).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import pytest
from kafka.protocol.admin import AlterReplicaLogDirsRequest, DescribeLogDirsRequest
from kafka.protocol.admin import (
    AlterClientQuotasRequest, AlterConfigsRequest, AlterPartitionReassignmentsRequest,
    AlterUserScramCredentialsRequest, CreateAclsRequest,
    CreatePartitionsRequest, CreateTopicsRequest, DeleteAclsRequest, DeleteGroupsRequest, DeleteRecordsRequest,
    DeleteTopicsRequest, DescribeAclsRequest, DescribeClientQuotasRequest, DescribeConfigsRequest,
    DescribeGroupsRequest, DescribeProducersRequest, DescribeTransactionsRequest,
    DescribeUserScramCredentialsRequest, IncrementalAlterConfigsRequest, ListGroupsRequest,
    ListPartitionReassignmentsRequest, ListTransactionsRequest,
)
from kafka.protocol.consumer import (
    HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, OffsetCommitRequest, OffsetDeleteRequest,
    OffsetFetchRequest, OffsetForLeaderEpochRequest, SyncGroupRequest,
)
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, EndTxnRequest, InitProducerIdRequest,
    TxnOffsetCommitRequest, WriteTxnMarkersRequest,
)

from broker_sim.security.acl import _IMPLIED_BY, SUPPORTED_OPERATIONS, Operation, ResourceType
from broker_sim.security.sasl import SaslLogin
from broker_sim.server.broker import Broker
from tests.broker.test_sasl import _authenticate
from tests.integration.kafka_wire import (
    EARLIEST, LATEST, WireClient, batches_of, fetch_request, fetched_partitions, list_offsets, produce_request,
    record_batch,
)

AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
PASSWORD = "pw"
TOPIC_DENIED, GROUP_DENIED, CLUSTER_DENIED, TXN_DENIED = 29, 30, 31, 53
RT = {"topic": ResourceType.TOPIC, "group": ResourceType.GROUP, "txn": ResourceType.TRANSACTIONAL_ID,
      "cluster": ResourceType.CLUSTER}
OP = Operation
_LogDir = AlterReplicaLogDirsRequest.AlterReplicaLogDir


@dataclass
class Env:
    """One case's names (its own topic, group, transactional id and user) and the admin's connection."""
    broker: Broker
    admin: WireClient
    user: str
    topic: str
    group: str
    txn: str
    data: dict

    def name(self, kind: str) -> str:
        return {"topic": self.topic, "group": self.group, "txn": self.txn, "cluster": "kafka-cluster"}[kind]


@dataclass
class Case:
    """``grants`` ((kind, operation) pairs) are held below the line, ``needed`` is the one right on top.
    ``error`` reads the code the check answers, ``state`` what the request would change (read by admin),
    ``told`` what it would disclose (empty/None when refused), ``passed`` the code once allowed."""
    id: str
    request: Callable[[Env], object]
    error: Callable[[object], int]
    needed: tuple[str, Operation]
    refused: int
    grants: tuple = ()
    setup: Callable[[Env], None] | None = None
    state: Callable[[Env], object] | None = None
    told: Callable[[object], object] | None = None
    passed: int = 0
    tells_when_allowed: bool = True
    changes: bool = True  # an allowed request changes ``state`` (Heartbeat only keeps it)
    partitions: int = 1  # of the case's topic; 0: no topic made
    finish: Callable[[Env], None] | None = None  # admin's last check


def _below(kind: str, needed: Operation) -> list[tuple[str, Operation]]:
    """Every other operation of the resource type that does not imply ``needed``."""
    implying = set(_IMPLIED_BY.get(needed, (needed,))) | {needed}
    return [(kind, op) for op in SUPPORTED_OPERATIONS[RT[kind]] if op not in implying]


# --- admin's view of the state (a super user over the wire) ----------------------------------------

def _offsets(env: Env, topic: str | None = None) -> tuple[int, int]:
    topic = topic or env.topic
    return list_offsets(env.admin, topic, 0, EARLIEST)[2], list_offsets(env.admin, topic, 0, LATEST)[2]


def _topic(env: Env, name: str | None = None):
    response = env.admin.call(MetadataRequest[12](topics=[MetadataRequest.MetadataRequestTopic(
        name=name or env.topic)], allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    [topic] = response.topics
    return topic.error_code, len(topic.partitions)


def _topic_config(env: Env, key: str = "retention.ms"):
    response = env.admin.call(DescribeConfigsRequest[4](resources=[DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=2, resource_name=env.topic, configuration_keys=[key])], include_synonyms=False,
        include_documentation=False))
    return [(c.name, c.value) for c in response.results[0].configs]


def _group(env: Env):
    [group] = env.admin.call(DescribeGroupsRequest[5](groups=[env.group],
                                                      include_authorized_operations=False)).groups
    return group.group_state, sorted(m.member_id for m in group.members)


def _committed(env: Env):
    response = env.admin.call(OffsetFetchRequest[7](group_id=env.group, topics=None, require_stable=False))
    return sorted((t.name, p.partition_index, p.committed_offset) for t in response.topics for p in t.partitions)


def _txn(env: Env):
    [described] = env.admin.call(DescribeTransactionsRequest[0](transactional_ids=[env.txn])).transaction_states
    return (described.error_code, described.transaction_state, described.producer_id,
            sorted((t.topic, list(t.partitions)) for t in described.topics))


def _acls(env: Env):
    response = env.admin.call(DescribeAclsRequest[3](
        resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
        host_filter=None, operation=1, permission_type=1))
    return sorted((r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation,
                   a.permission_type) for r in response.resources for a in r.acls)


def _scram_users(env: Env):
    response = env.admin.call(DescribeUserScramCredentialsRequest[0](users=None))
    return sorted((r.user, [(i.mechanism, i.iterations) for i in r.credential_infos]) for r in response.results)


def _quotas(env: Env):
    response = env.admin.call(DescribeClientQuotasRequest[1](components=[], strict=False))
    return sorted((tuple((e.entity_type, e.entity_name) for e in entry.entity),
                   tuple((v.key, v.value) for v in entry.values)) for entry in response.entries or [])


def _broker_config(env: Env, key: str = "log.retention.ms"):
    response = env.admin.call(DescribeConfigsRequest[4](resources=[DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=4, resource_name=str(env.broker.broker_id), configuration_keys=[key])],
        include_synonyms=False, include_documentation=False))
    return [(c.name, c.value, c.config_source) for c in response.results[0].configs]


# --- admin's setup -------------------------------------------------------------------------------------

def _produce(env: Env, count: int = 3) -> None:
    response = env.admin.call(produce_request(env.topic, 0, record_batch([b"v%d" % i for i in range(count)])))
    assert response.responses[0].partition_responses[0].error_code == 0


def _commit(env: Env, offset: int = 1) -> None:
    _produce(env)
    response = env.admin.call(OffsetCommitRequest[8](group_id=env.group, generation_id_or_member_epoch=-1,
                                                     member_id="", group_instance_id=None, topics=[_commit_topic(
                                                         env.topic, offset, OffsetCommitRequest)]))
    assert response.topics[0].partitions[0].error_code == 0, response


def _commit_topic(topic: str, offset: int, cls, partition: int = 0):
    Topic = cls.OffsetCommitRequestTopic if cls is OffsetCommitRequest else cls.TxnOffsetCommitRequestTopic
    Partition = Topic.OffsetCommitRequestPartition if cls is OffsetCommitRequest \
        else Topic.TxnOffsetCommitRequestPartition
    return Topic(name=topic, partitions=[Partition(partition_index=partition, committed_offset=offset,
                                                   committed_leader_epoch=-1, committed_metadata="")])


def _join(env: Env, member_id: str = ""):
    return env.admin.call(_join_request(env, member_id))


def _join_request(env: Env, member_id: str = ""):
    return (JoinGroupRequest[5](
        group_id=env.group, session_timeout_ms=30000, rebalance_timeout_ms=30000, member_id=member_id,
        group_instance_id=None, protocol_type="consumer",
        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"m")]))


def _joined(env: Env) -> None:
    """admin is the group's one member, its rebalance waiting for the leader's SyncGroup."""
    first = _join(env)
    assert first.error_code == 79, first  # MEMBER_ID_REQUIRED
    joined = _join(env, member_id=first.member_id)
    assert joined.error_code == 0, joined
    env.data.update(member=joined.member_id, generation=joined.generation_id)


def _stable(env: Env) -> None:
    _joined(env)
    synced = env.admin.call(_sync(env))
    assert synced.error_code == 0, synced


def _sync(env: Env):
    return SyncGroupRequest[3](group_id=env.group, generation_id=env.data["generation"],
                               member_id=env.data["member"], group_instance_id=None, assignments=[
                                   SyncGroupRequest.SyncGroupRequestAssignment(member_id=env.data["member"],
                                                                               assignment=b"a")])


def _init_txn(env: Env) -> None:
    response = env.admin.call(InitProducerIdRequest[4](transactional_id=env.txn, transaction_timeout_ms=60000,
                                                       producer_id=-1, producer_epoch=-1))
    assert response.error_code == 0, response
    env.data.update(pid=response.producer_id, epoch=response.producer_epoch)


def _add_partitions(env: Env):
    Topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
    return AddPartitionsToTxnRequest[3](
        v3_and_below_transactional_id=env.txn, v3_and_below_producer_id=env.data["pid"],
        v3_and_below_producer_epoch=env.data["epoch"], v3_and_below_topics=[Topic(name=env.topic, partitions=[0])])


def _ongoing(env: Env) -> None:
    _init_txn(env)
    response = env.admin.call(_add_partitions(env))
    assert response.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0


def _ongoing_with_offsets(env: Env) -> None:
    _ongoing(env)
    response = env.admin.call(_add_offsets(env))
    assert response.error_code == 0, response


def _add_offsets(env: Env):
    return AddOffsetsToTxnRequest[3](transactional_id=env.txn, producer_id=env.data["pid"],
                                     producer_epoch=env.data["epoch"], group_id=env.group)


# --- requests ------------------------------------------------------------------------------------------

def _by_topic(cls, topic_cls_name, partition_cls_name, topic_field="name", **partition):
    Topic = getattr(cls, topic_cls_name)
    Partition = getattr(Topic, partition_cls_name)

    def build(env: Env, **fields):
        return {"topics": [Topic(**{topic_field: env.topic}, partitions=[Partition(**partition)])], **fields}
    return build


def _first_partition_error(response) -> int:
    topics = getattr(response, "topics", None) or getattr(response, "responses", None)
    topic = topics[0]
    partitions = getattr(topic, "partitions", None) or getattr(topic, "partition_responses", None)
    return partitions[0].error_code


_epochs = _by_topic(OffsetForLeaderEpochRequest, "OffsetForLeaderTopic", "OffsetForLeaderPartition",
                    topic_field="topic", partition=0, current_leader_epoch=-1, leader_epoch=0)
_records = _by_topic(DeleteRecordsRequest, "DeleteRecordsTopic", "DeleteRecordsPartition", partition_index=0,
                     offset=2)
_deleted_offsets = _by_topic(OffsetDeleteRequest, "OffsetDeleteRequestTopic", "OffsetDeleteRequestPartition",
                             partition_index=0)


def _create_topic(env: Env):
    return CreateTopicsRequest[7](topics=[CreateTopicsRequest.CreatableTopic(
        name=env.topic + "-new", num_partitions=1, replication_factor=1, assignments=[], configs=[])],
        timeout_ms=5000, validate_only=False)


def _alter_topic(env: Env, incremental: bool = True, resource_type: int = 2, name: str | None = None,
                 key: str = "retention.ms", value: str = "123456"):
    name = name or env.topic
    if incremental:
        Resource = IncrementalAlterConfigsRequest.AlterConfigsResource
        return IncrementalAlterConfigsRequest[1](resources=[Resource(
            resource_type=resource_type, resource_name=name,
            configs=[Resource.AlterableConfig(name=key, config_operation=0, value=value)])], validate_only=False)
    Resource = AlterConfigsRequest.AlterConfigsResource
    return AlterConfigsRequest[2](resources=[Resource(resource_type=resource_type, resource_name=name, configs=[
        Resource.AlterableConfig(name=key, value=value)])], validate_only=False)


def _entity_config(env: Env, resource_type: int, key: str):
    """A group's (32) or client-metrics subscription's (16, named after the case's group) config, as admin sees it."""
    response = env.admin.call(DescribeConfigsRequest[4](resources=[DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=resource_type, resource_name=env.group, configuration_keys=[key])], include_synonyms=False,
        include_documentation=False))
    return [(c.name, c.value, c.config_source) for c in response.results[0].configs]


def _list_config_resources(env: Env):
    from kafka.protocol.admin import ListConfigResourcesRequest

    return ListConfigResourcesRequest[1](resource_types=[])


def _update_features():
    from kafka.protocol.admin import UpdateFeaturesRequest

    return UpdateFeaturesRequest[1](timeout_ms=5000, feature_updates=[UpdateFeaturesRequest.FeatureUpdateKey(
        feature="group.version", max_version_level=1, upgrade_type=1)], validate_only=False)


def _describe_configs(resource_type: int):
    def build(env: Env):
        name = {2: env.topic, 16: env.group, 32: env.group}.get(resource_type, str(env.broker.broker_id))
        return DescribeConfigsRequest[4](resources=[DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=resource_type, resource_name=name, configuration_keys=None)], include_synonyms=False,
            include_documentation=False)
    return build


def _acl_creation(env: Env):
    return CreateAclsRequest[3](creations=[CreateAclsRequest.AclCreation(
        resource_type=2, resource_name=env.topic + "-acl", resource_pattern_type=3, principal="User:somebody",
        host="*", operation=3, permission_type=3)])


def _acl_setup(env: Env) -> None:
    response = env.admin.call(_acl_creation(env))
    assert response.results[0].error_code == 0


def _acl_deletion(env: Env):
    return DeleteAclsRequest[3](filters=[DeleteAclsRequest.DeleteAclsFilter(
        resource_type_filter=2, resource_name_filter=env.topic + "-acl", pattern_type_filter=3,
        principal_filter="User:somebody", host_filter=None, operation=1, permission_type=1)])


def _scram_upsert(env: Env):
    import hashlib  # the salted password a client sends (KIP-554)
    salt = env.user.encode() * 4
    return AlterUserScramCredentialsRequest[0](deletions=[], upsertions=[
        AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
            name=env.user + "-new", mechanism=1, iterations=4096, salt=salt,
            salted_password=hashlib.pbkdf2_hmac("sha256", b"secret", salt, 4096))])


def _admin_calls(env: Env, build) -> None:
    response = env.admin.call(build(env))
    assert "error_code=0" in repr(response) and "error_code=3" not in repr(response), response


def _quota(env: Env):
    Entry = AlterClientQuotasRequest.EntryData
    return AlterClientQuotasRequest[1](entries=[Entry(
        entity=[Entry.EntityData(entity_type="client-id", entity_name=env.user + "-client")],
        ops=[Entry.OpData(key="producer_byte_rate", value=4096.0, remove=False)])], validate_only=False)


def _marker(env: Env):
    Marker = WriteTxnMarkersRequest.WritableTxnMarker
    return WriteTxnMarkersRequest[1](markers=[Marker(
        producer_id=env.data["pid"], producer_epoch=env.data["epoch"], transaction_result=True, coordinator_epoch=0,
        topics=[Marker.WritableTxnMarkerTopic(name=env.topic, partition_indexes=[0])])])


def _transactional_produce(env: Env):
    from kafka.record.default_records import DefaultRecordBatchBuilder
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True,
                                        producer_id=env.data["pid"], producer_epoch=env.data["epoch"],
                                        base_sequence=0, batch_size=1 << 20)
    builder.append(0, timestamp=None, key=b"k", value=b"v", headers=[])
    request = produce_request(env.topic, 0, bytes(builder.build()))
    request.transactional_id = env.txn
    return request


def _written_in_a_transaction(env: Env) -> None:
    """admin's open transaction wrote a batch to partition 0: its producer state is there to describe."""
    _ongoing(env)
    response = env.admin.call(_transactional_produce(env))
    assert _first_partition_error(response) == 0, response


def _describe_producers(env: Env):
    return DescribeProducersRequest[0](topics=[DescribeProducersRequest.TopicRequest(name=env.topic,
                                                                                     partition_indexes=[0])])


def _txn_offsets(env: Env):
    return TxnOffsetCommitRequest[3](transactional_id=env.txn, group_id=env.group, producer_id=env.data["pid"],
                                     producer_epoch=env.data["epoch"], generation_id=-1, member_id="",
                                     group_instance_id=None, topics=[_commit_topic(
                                         env.topic, 2, TxnOffsetCommitRequest, env.data["attempt"])])


def _txn_committed(env: Env) -> None:
    """admin commits the transaction: only the allowed attempt's offset (partition 1) may be there."""
    response = env.admin.call(EndTxnRequest[3](transactional_id=env.txn, producer_id=env.data["pid"],
                                               producer_epoch=env.data["epoch"], committed=True))
    assert response.error_code == 0, response
    for _ in range(100):
        if _committed(env):
            break
        time.sleep(0.05)
    assert _committed(env) == [(env.topic, 1, 2)]


def _find(key_type: int, kind: str):
    return lambda env: FindCoordinatorRequest[4](key_type=key_type, coordinator_keys=[env.name(kind)])


def _fetch(replica_id: int):
    def build(env: Env):
        request = fetch_request(env.topic, 0, 0)
        request.replica_id = replica_id
        return request
    return build


def _fetched(response):
    return [batch for p in fetched_partitions(response) for batch in batches_of(p.records)]


CASES = [
    # Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, Metadata
    Case("produce", lambda e: produce_request(e.topic, 0, record_batch([b"x"])), _first_partition_error,
         ("topic", OP.WRITE), TOPIC_DENIED, state=_offsets),
    Case("produce-transactional", _transactional_produce, _first_partition_error, ("txn", OP.WRITE), TXN_DENIED,
         grants=(("topic", OP.WRITE),), setup=_ongoing, state=_offsets),
    Case("fetch", _fetch(-1), _first_partition_error, ("topic", OP.READ), TOPIC_DENIED, setup=_produce,
         told=_fetched),
    Case("fetch-follower", _fetch(0), _first_partition_error, ("cluster", OP.CLUSTER_ACTION), TOPIC_DENIED,
         grants=(("topic", OP.READ),), setup=_produce, told=_fetched, passed=6,  # NOT_LEADER_OR_FOLLOWER:
         tells_when_allowed=False),  # past the check, replica 0 is no follower of a one-broker topic
    Case("list-offsets", lambda e: _offsets_request(e), _first_partition_error, ("topic", OP.DESCRIBE),
         TOPIC_DENIED, setup=_produce, told=lambda r: max(r.topics[0].partitions[0].offset, 0)),
    Case("offset-for-leader-epoch", lambda e: OffsetForLeaderEpochRequest[4](replica_id=-1, **_epochs(e)),
         _first_partition_error, ("topic", OP.DESCRIBE), TOPIC_DENIED, setup=_produce,
         told=lambda r: max(r.topics[0].partitions[0].end_offset, 0)),
    Case("offset-for-leader-epoch-follower", lambda e: OffsetForLeaderEpochRequest[4](replica_id=0, **_epochs(e)),
         _first_partition_error, ("cluster", OP.CLUSTER_ACTION), TOPIC_DENIED, grants=(("topic", OP.DESCRIBE),),
         setup=_produce, told=lambda r: max(r.topics[0].partitions[0].end_offset, 0)),
    Case("metadata", lambda e: MetadataRequest[12](topics=[MetadataRequest.MetadataRequestTopic(name=e.topic)],
                                                   allow_auto_topic_creation=False,
                                                   include_topic_authorized_operations=False),
         lambda r: r.topics[0].error_code, ("topic", OP.DESCRIBE), TOPIC_DENIED,
         told=lambda r: len(r.topics[0].partitions)),
    Case("metadata-auto-create", lambda e: MetadataRequest[12](
        topics=[MetadataRequest.MetadataRequestTopic(name=e.topic)], allow_auto_topic_creation=True,
        include_topic_authorized_operations=False),
         lambda r: r.topics[0].error_code, ("cluster", OP.CREATE), TOPIC_DENIED, grants=(("topic", OP.DESCRIBE),),
         state=_topic, partitions=0),  # created (a single node has its leader at once)
    # topic admin
    Case("create-topics", _create_topic, lambda r: r.topics[0].error_code, ("cluster", OP.CREATE), TOPIC_DENIED,
         state=lambda e: _topic(e, e.topic + "-new")),
    Case("create-topics-configs", lambda e: CreateTopicsRequest[7](topics=[CreateTopicsRequest.CreatableTopic(
        name=e.topic, num_partitions=2, replication_factor=1, assignments=[], configs=[])],
        timeout_ms=5000, validate_only=True), lambda r: r.topics[0].topic_config_error_code,
         ("topic", OP.DESCRIBE_CONFIGS), TOPIC_DENIED, grants=(("cluster", OP.CREATE),),
         told=lambda r: max(r.topics[0].num_partitions, 0), partitions=0),  # validated; configs told with the right
    Case("delete-topics-by-id", lambda e: DeleteTopicsRequest[6](topics=[DeleteTopicsRequest.DeleteTopicState(
        name=None, topic_id=e.broker.metadata.get(e.topic).topic_id)], timeout_ms=5000),
         lambda r: r.responses[0].error_code, ("topic", OP.DESCRIBE), TOPIC_DENIED, passed=TOPIC_DENIED,
         state=_topic, changes=False, told=lambda r: r.responses[0].name),  # DELETE still missing: the name told
    Case("delete-topics", lambda e: DeleteTopicsRequest[6](topics=[DeleteTopicsRequest.DeleteTopicState(
        name=e.topic, topic_id=None)], timeout_ms=5000), lambda r: r.responses[0].error_code, ("topic", OP.DELETE),
         TOPIC_DENIED, state=_topic),
    Case("delete-records", lambda e: DeleteRecordsRequest[2](timeout_ms=5000, **_records(e)),
         _first_partition_error, ("topic", OP.DELETE), TOPIC_DENIED, setup=_produce, state=_offsets),
    Case("create-partitions", lambda e: CreatePartitionsRequest[3](topics=[
        CreatePartitionsRequest.CreatePartitionsTopic(name=e.topic, count=3, assignments=None)], timeout_ms=5000,
        validate_only=False), lambda r: r.results[0].error_code, ("topic", OP.ALTER), TOPIC_DENIED, state=_topic),
    Case("describe-configs-topic", _describe_configs(2), lambda r: r.results[0].error_code,
         ("topic", OP.DESCRIBE_CONFIGS), TOPIC_DENIED, told=lambda r: r.results[0].configs),
    Case("describe-configs-broker", _describe_configs(4), lambda r: r.results[0].error_code,
         ("cluster", OP.DESCRIBE_CONFIGS), CLUSTER_DENIED, told=lambda r: r.results[0].configs),
    Case("incremental-alter-configs-topic", _alter_topic, lambda r: r.responses[0].error_code,
         ("topic", OP.ALTER_CONFIGS), TOPIC_DENIED, state=_topic_config),
    Case("incremental-alter-configs-broker", lambda e: _alter_topic(
        e, resource_type=4, name=str(e.broker.broker_id), key="log.retention.ms", value="604800001"),
         lambda r: r.responses[0].error_code, ("cluster", OP.ALTER_CONFIGS), CLUSTER_DENIED, state=_broker_config),
    Case("alter-configs-topic", lambda e: _alter_topic(e, incremental=False), lambda r: r.responses[0].error_code,
         ("topic", OP.ALTER_CONFIGS), TOPIC_DENIED, state=_topic_config),
    # group configs (KIP-848) on the group, client-metrics subscriptions (KIP-714) on the cluster, as Kafka's
    Case("describe-configs-group", _describe_configs(32), lambda r: r.results[0].error_code,
         ("group", OP.DESCRIBE_CONFIGS), GROUP_DENIED, told=lambda r: r.results[0].configs),
    Case("describe-configs-client-metrics", _describe_configs(16), lambda r: r.results[0].error_code,
         ("cluster", OP.DESCRIBE_CONFIGS), CLUSTER_DENIED, told=lambda r: r.results[0].configs),
    Case("incremental-alter-configs-group", lambda e: _alter_topic(
        e, resource_type=32, name=e.group, key="consumer.session.timeout.ms", value="50000"),
         lambda r: r.responses[0].error_code, ("group", OP.ALTER_CONFIGS), GROUP_DENIED,
         state=lambda e: _entity_config(e, 32, "consumer.session.timeout.ms")),
    Case("alter-configs-client-metrics", lambda e: _alter_topic(
        e, incremental=False, resource_type=16, name=e.group, key="interval.ms", value="1000"),
         lambda r: r.responses[0].error_code, ("cluster", OP.ALTER_CONFIGS), CLUSTER_DENIED,
         state=lambda e: _entity_config(e, 16, "interval.ms")),
    Case("update-features", lambda e: _update_features(), lambda r: r.error_code, ("cluster", OP.ALTER),
         CLUSTER_DENIED),
    Case("list-config-resources", _list_config_resources, lambda r: r.error_code, ("cluster", OP.DESCRIBE_CONFIGS),
         CLUSTER_DENIED, told=lambda r: r.config_resources),
    # groups
    Case("find-coordinator-group", _find(0, "group"), lambda r: r.coordinators[0].error_code,
         ("group", OP.DESCRIBE), GROUP_DENIED, told=lambda r: max(r.coordinators[0].port, 0)),
    Case("find-coordinator-txn", _find(1, "txn"), lambda r: r.coordinators[0].error_code,
         ("txn", OP.DESCRIBE), TXN_DENIED, told=lambda r: max(r.coordinators[0].port, 0)),
    Case("join-group", _join_request, lambda r: r.error_code, ("group", OP.READ), GROUP_DENIED, state=_group,
         passed=79, changes=False),  # MEMBER_ID_REQUIRED: the join goes on
    Case("sync-group", _sync, lambda r: r.error_code, ("group", OP.READ), GROUP_DENIED, setup=_joined,
         state=_group),
    Case("heartbeat", lambda e: HeartbeatRequest[4](group_id=e.group, generation_id=e.data["generation"],
                                                    member_id=e.data["member"], group_instance_id=None),
         lambda r: r.error_code, ("group", OP.READ), GROUP_DENIED, setup=_stable, state=_group, changes=False),
    Case("leave-group", lambda e: LeaveGroupRequest[4](group_id=e.group, members=[
        LeaveGroupRequest.MemberIdentity(member_id=e.data["member"], group_instance_id=None)]),
         lambda r: r.error_code, ("group", OP.READ), GROUP_DENIED, setup=_stable, state=_group),
    Case("offset-commit-group", lambda e: OffsetCommitRequest[8](
        group_id=e.group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=[_commit_topic(e.topic, 2, OffsetCommitRequest)]), _first_partition_error, ("group", OP.READ),
         GROUP_DENIED, grants=(("topic", OP.READ),), setup=_commit, state=_committed),
    Case("offset-commit-topic", lambda e: OffsetCommitRequest[8](
        group_id=e.group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=[_commit_topic(e.topic, 2, OffsetCommitRequest)]), _first_partition_error, ("topic", OP.READ),
         TOPIC_DENIED, grants=(("group", OP.READ),), setup=_commit, state=_committed),
    Case("offset-fetch-group", lambda e: OffsetFetchRequest[7](group_id=e.group, topics=None, require_stable=False),
         lambda r: r.error_code, ("group", OP.DESCRIBE), GROUP_DENIED, grants=(("topic", OP.DESCRIBE),),
         setup=_commit, told=lambda r: r.topics),
    Case("offset-fetch-all-topics", lambda e: OffsetFetchRequest[7](group_id=e.group, topics=None,
                                                                   require_stable=False),
         lambda r: r.error_code, ("topic", OP.DESCRIBE), 0, grants=(("group", OP.DESCRIBE),), setup=_commit,
         told=lambda r: [t.name for t in r.topics]),  # all topics: those it may not DESCRIBE left out
    Case("offset-fetch-topic", lambda e: OffsetFetchRequest[7](group_id=e.group, topics=[
        OffsetFetchRequest.OffsetFetchRequestTopic(name=e.topic, partition_indexes=[0])], require_stable=False),
         _first_partition_error, ("topic", OP.DESCRIBE), TOPIC_DENIED, grants=(("group", OP.DESCRIBE),),
         setup=_commit, told=lambda r: max(r.topics[0].partitions[0].committed_offset, 0)),
    Case("describe-groups", lambda e: DescribeGroupsRequest[5](groups=[e.group], include_authorized_operations=True),
         lambda r: r.groups[0].error_code, ("group", OP.DESCRIBE), GROUP_DENIED, setup=_stable,
         told=lambda r: r.groups[0].members),
    Case("list-groups", lambda e: ListGroupsRequest[4](states_filter=[]), lambda r: r.error_code,
         ("group", OP.DESCRIBE), 0, setup=_commit,
         told=lambda r: [g.group_id for g in r.groups if g.group_id.startswith("g-list-groups")]),
    Case("delete-groups", lambda e: DeleteGroupsRequest[2](groups_names=[e.group]),
         lambda r: r.results[0].error_code, ("group", OP.DELETE), GROUP_DENIED, setup=_commit, state=_committed),
    Case("offset-delete-group", lambda e: OffsetDeleteRequest[0](group_id=e.group, **_deleted_offsets(e)),
         lambda r: r.error_code, ("group", OP.DELETE), GROUP_DENIED, grants=(("topic", OP.READ),), setup=_commit,
         state=_committed),
    Case("offset-delete-topic", lambda e: OffsetDeleteRequest[0](group_id=e.group, **_deleted_offsets(e)),
         _first_partition_error, ("topic", OP.READ), TOPIC_DENIED, grants=(("group", OP.DELETE),), setup=_commit,
         state=_committed),
    # transactions
    Case("init-producer-id-transactional", lambda e: InitProducerIdRequest[4](
        transactional_id=e.txn, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1),
         lambda r: r.error_code, ("txn", OP.WRITE), TXN_DENIED, state=_txn,
         told=lambda r: max(r.producer_id, 0)),
    Case("init-producer-id-idempotent", lambda e: InitProducerIdRequest[4](
        transactional_id=None, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1),
         lambda r: r.error_code, ("cluster", OP.IDEMPOTENT_WRITE), CLUSTER_DENIED, grants=_below("topic", OP.WRITE),
         told=lambda r: max(r.producer_id, 0)),
    Case("add-partitions-to-txn-txn", _add_partitions,
         lambda r: r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code,
         ("txn", OP.WRITE), TXN_DENIED, grants=(("topic", OP.WRITE),), setup=_init_txn, state=_txn),
    Case("add-partitions-to-txn-topic", _add_partitions,
         lambda r: r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code,
         ("topic", OP.WRITE), TOPIC_DENIED, grants=(("txn", OP.WRITE),), setup=_init_txn, state=_txn),
    Case("add-partitions-to-txn-v4", lambda e: AddPartitionsToTxnRequest[4](transactions=[
        AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
            transactional_id=e.txn, producer_id=e.data["pid"], producer_epoch=e.data["epoch"], verify_only=False,
            topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction.AddPartitionsToTxnTopic(
                name=e.topic, partitions=[0])])]), lambda r: r.error_code, ("cluster", OP.CLUSTER_ACTION),
         CLUSTER_DENIED, grants=(("txn", OP.WRITE), ("topic", OP.WRITE)), setup=_init_txn, state=_txn),
    Case("add-offsets-to-txn-txn", _add_offsets, lambda r: r.error_code, ("txn", OP.WRITE), TXN_DENIED,
         grants=(("group", OP.READ),), setup=_ongoing, state=_txn),
    Case("add-offsets-to-txn-group", _add_offsets, lambda r: r.error_code, ("group", OP.READ), GROUP_DENIED,
         grants=(("txn", OP.WRITE),), setup=_ongoing, state=_txn),
    Case("txn-offset-commit-txn", _txn_offsets, _first_partition_error, ("txn", OP.WRITE), TXN_DENIED,
         grants=(("group", OP.READ), ("topic", OP.READ)), setup=_ongoing_with_offsets,
         finish=_txn_committed, partitions=2),
    Case("txn-offset-commit-group", _txn_offsets, _first_partition_error, ("group", OP.READ), GROUP_DENIED,
         grants=(("txn", OP.WRITE), ("topic", OP.READ)), setup=_ongoing_with_offsets,
         finish=_txn_committed, partitions=2),
    Case("txn-offset-commit-topic", _txn_offsets, _first_partition_error, ("topic", OP.READ), TOPIC_DENIED,
         grants=(("txn", OP.WRITE), ("group", OP.READ)), setup=_ongoing_with_offsets,
         finish=_txn_committed, partitions=2),
    Case("end-txn", lambda e: EndTxnRequest[3](transactional_id=e.txn, producer_id=e.data["pid"],
                                               producer_epoch=e.data["epoch"], committed=True),
         lambda r: r.error_code, ("txn", OP.WRITE), TXN_DENIED, setup=_ongoing, state=_txn),
    Case("write-txn-markers", _marker, lambda r: r.markers[0].topics[0].partitions[0].error_code,
         ("cluster", OP.CLUSTER_ACTION), CLUSTER_DENIED, grants=(("topic", OP.WRITE), ("txn", OP.WRITE)),
         setup=_ongoing, state=lambda e: (_offsets(e), _txn(e))),
    Case("describe-transactions", lambda e: DescribeTransactionsRequest[0](transactional_ids=[e.txn]),
         lambda r: r.transaction_states[0].error_code, ("txn", OP.DESCRIBE), TXN_DENIED, setup=_ongoing,
         told=lambda r: r.transaction_states[0].transaction_state),
    Case("list-transactions", lambda e: ListTransactionsRequest[1](state_filters=[], producer_id_filters=[],
                                                                   duration_filter=-1),
         lambda r: r.error_code, ("txn", OP.DESCRIBE), 0, setup=_ongoing,
         told=lambda r: [t.transactional_id for t in r.transaction_states
                         if t.transactional_id.startswith("x-list-transactions")]),
    # KIP-664: READ on the topic, as Kafka's handleDescribeProducersRequest (not DESCRIBE)
    Case("describe-producers", _describe_producers, _first_partition_error, ("topic", OP.READ), TOPIC_DENIED,
         setup=_written_in_a_transaction, told=lambda r: r.topics[0].partitions[0].active_producers),
    # users, ACLs, quotas
    Case("describe-user-scram-credentials", lambda e: DescribeUserScramCredentialsRequest[0](users=None),
         lambda r: r.error_code, ("cluster", OP.DESCRIBE), CLUSTER_DENIED,
         setup=lambda e: _admin_calls(e, _scram_upsert),
         told=lambda r: r.results),
    Case("alter-user-scram-credentials", _scram_upsert, lambda r: r.results[0].error_code,
         ("cluster", OP.ALTER), CLUSTER_DENIED, state=_scram_users),
    Case("describe-acls", lambda e: DescribeAclsRequest[3](
        resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
        host_filter=None, operation=1, permission_type=1), lambda r: r.error_code, ("cluster", OP.DESCRIBE),
         CLUSTER_DENIED, told=lambda r: r.resources),
    Case("create-acls", _acl_creation, lambda r: r.results[0].error_code, ("cluster", OP.ALTER), CLUSTER_DENIED,
         state=_acls),
    Case("delete-acls", _acl_deletion, lambda r: r.filter_results[0].error_code, ("cluster", OP.ALTER),
         CLUSTER_DENIED, setup=_acl_setup, state=_acls),
    Case("describe-client-quotas", lambda e: DescribeClientQuotasRequest[1](components=[], strict=False),
         lambda r: r.error_code, ("cluster", OP.DESCRIBE_CONFIGS), CLUSTER_DENIED,
         setup=lambda e: _admin_calls(e, _quota), told=lambda r: r.entries),
    Case("alter-client-quotas", _quota, lambda r: r.entries[0].error_code, ("cluster", OP.ALTER_CONFIGS),
         CLUSTER_DENIED, state=_quotas),
    # partition reassignment (KIP-455): on a single node the only replica set is the broker itself
    Case("alter-partition-reassignments", lambda e: AlterPartitionReassignmentsRequest[0](
        timeout_ms=5000, topics=[AlterPartitionReassignmentsRequest.ReassignableTopic(name=e.topic, partitions=[
            AlterPartitionReassignmentsRequest.ReassignableTopic.ReassignablePartition(
                partition_index=0, replicas=[e.broker.broker_id])])]),
         lambda r: r.error_code, ("cluster", OP.ALTER), CLUSTER_DENIED,
         told=lambda r: [p.partition_index for t in r.responses for p in t.partitions if p.error_code == 0]),
    Case("list-partition-reassignments", lambda e: ListPartitionReassignmentsRequest[0](timeout_ms=5000, topics=None),
         lambda r: r.error_code, ("cluster", OP.DESCRIBE), CLUSTER_DENIED),
    # log dirs (JBOD): DESCRIBE / ALTER on the cluster
    Case("describe-log-dirs", lambda e: DescribeLogDirsRequest[4](topics=None), lambda r: r.error_code,
         ("cluster", OP.DESCRIBE), CLUSTER_DENIED, told=lambda r: [d.log_dir for d in r.results]),
    Case("alter-replica-log-dirs", lambda e: AlterReplicaLogDirsRequest[2](dirs=[_LogDir(
        path=str(e.broker.data_dir), topics=[_LogDir.AlterReplicaLogDirTopic(name=e.topic, partitions=[0])])]),
         lambda r: r.results[0].partitions[0].error_code, ("cluster", OP.ALTER), CLUSTER_DENIED),
]


def _offsets_request(env: Env):
    from kafka.protocol.consumer import ListOffsetsRequest
    return ListOffsetsRequest[7](replica_id=-1, isolation_level=0, topics=[ListOffsetsRequest.ListOffsetsTopic(
        name=env.topic, partitions=[ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
            partition_index=0, current_leader_epoch=-1, timestamp=LATEST)])])


USERS = {f"u{i}": PASSWORD for i in range(len(CASES))}


def plain_broker(directory, users: dict[str, str]) -> Broker:
    """A broker with an authorizer and one SASL_PLAINTEXT listener whose PLAIN users are admin (a super user,
    password admin) and ``users``."""
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin" '
            'user_admin="admin" ' + " ".join(f'user_{u}="{p}"' for u, p in users.items()) + ";")
    config = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "authorizer.class.name": AUTHORIZER,
              "super.users": "User:admin", "sasl.enabled.mechanisms": "PLAIN",
              "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas, "group.initial.rebalance.delay.ms": "0"}
    return Broker(directory, config=config)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with plain_broker(tmp_path_factory.mktemp("acl-per-api"), USERS) as started:
        yield started


def login(broker: Broker, user: str, password: str) -> WireClient:
    client = WireClient(broker.bootstrap_servers_for("SASL_PLAINTEXT"))
    answer = _authenticate(client, "PLAIN", SaslLogin("PLAIN", user, password).exchange())
    assert answer.error_code == 0, answer
    return client


@pytest.fixture(scope="module")
def admin(broker):
    with login(broker, "admin", "admin") as client:
        yield client


def grant(admin: WireClient, principal: str, bindings, *, permission: int = 3, pattern: int = 3,
          host: str = "*") -> None:
    """ALLOW (3) or DENY (2) bindings ((resource type, name, operation) triples), through CreateAcls."""
    response = admin.call(CreateAclsRequest[3](creations=[CreateAclsRequest.AclCreation(
        resource_type=int(rtype), resource_name=name, resource_pattern_type=pattern, principal=principal, host=host,
        operation=int(operation), permission_type=permission) for rtype, name, operation in bindings]))
    assert [r.error_code for r in response.results] == [0] * len(bindings), response


def create_topic(admin: WireClient, name: str, partitions: int = 1) -> None:
    response = admin.call(CreateTopicsRequest[7](topics=[CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[], configs=[])], timeout_ms=5000,
        validate_only=False))
    assert response.topics[0].error_code == 0, response


@pytest.mark.parametrize("index", range(len(CASES)), ids=[case.id for case in CASES])
def test_each_api_refuses_just_below_its_line_and_passes_just_above(broker, admin, index):
    case = CASES[index]
    env = Env(broker, admin, f"u{index}", f"t-{case.id}", f"g-{case.id}", f"x-{case.id}", {})
    if case.partitions:
        create_topic(admin, env.topic, case.partitions)
    if case.setup:
        case.setup(env)
    kind, operation = case.needed
    below = [*_below(kind, operation), *case.grants]
    principal = f"User:{env.user}"
    grant(admin, principal, [(RT[k], env.name(k), op) for k, op in below])
    if kind != "cluster":  # the right itself on names that are not this one
        grant(admin, principal, [(RT[kind], env.name(kind) + "-sibling", operation)])
        grant(admin, principal, [(RT[kind], env.name(kind) + "x", operation)], pattern=4)
    before = case.state(env) if case.state else None
    with login(broker, env.user, PASSWORD) as client:
        env.data["attempt"] = 0
        refused = client.call(case.request(env))
        assert case.error(refused) == case.refused, refused
        if case.told:
            assert not case.told(refused), f"a refused {case.id} told {case.told(refused)!r}"
        if case.state:
            assert case.state(env) == before, f"a refused {case.id} changed the state"
        grant(admin, principal, [(RT[kind], env.name(kind), operation)])
        env.data["attempt"] = 1
        allowed = client.call(case.request(env))
    assert case.error(allowed) == case.passed, allowed
    if case.told and case.tells_when_allowed:
        assert case.told(allowed), f"an allowed {case.id} told nothing: {allowed}"
    if case.state and case.changes:
        assert case.state(env) != before, f"an allowed {case.id} changed nothing"
    if case.finish:
        case.finish(env)
