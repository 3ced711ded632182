"""Topic, config, ACL, quota and partition admin, compared with Apache Kafka: the answers and their error paths.

Each scenario is one admin request (or a short sequence) sent as raw framed requests to both brokers; the answer
compared is the error code of each result and whatever else the scenario is about (a described value, a created
partition count). Error messages are worded by each broker and not compared. Every name is per peer
(``peer.name``), so the scenarios share the session's Kafka and a module broker_sim.
"""
from __future__ import annotations

import time

import pytest
from kafka.protocol.admin import (
    AlterClientQuotasRequest, AlterConfigsRequest, AlterPartitionReassignmentsRequest, CreateAclsRequest,
    CreatePartitionsRequest, CreateTopicsRequest, DeleteAclsRequest, DeleteRecordsRequest, DeleteTopicsRequest,
    DescribeAclsRequest, DescribeClientQuotasRequest, DescribeClusterRequest, DescribeConfigsRequest,
    ElectLeadersRequest, IncrementalAlterConfigsRequest,
)
from kafka.protocol.producer import ProduceRequest
from kafka.record.default_records import DefaultRecordBatchBuilder

from differential import Scenario

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
CreatableTopic = CreateTopicsRequest.CreatableTopic
AlterResource = IncrementalAlterConfigsRequest.AlterConfigsResource
QuotaEntry = AlterClientQuotasRequest.EntryData


PYLOG_BROKER_ID = 1   # Kafka's node id: replica lists and broker resources name the same broker (conftest.py)


# --- requests ------------------------------------------------------------------------------------------------

def create(peer, name, partitions=1, factor=1, configs=None, validate_only=False):
    """The error code of creating one topic."""
    request = CreateTopicsRequest[5](timeout_ms=30000, validate_only=validate_only, topics=[CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=factor, assignments=[],
        configs=[CreatableTopic.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])])
    return peer.call(request).topics[0].error_code


def created_topic(peer, prefix="t", partitions=1, configs=None):
    name = peer.name(prefix)
    assert create(peer, name, partitions, configs=configs) == 0
    return name


def incremental(peer, resource_type, name, changes, validate_only=False):
    """The error code of one IncrementalAlterConfigs resource; ``changes`` are (name, operation, value)."""
    request = IncrementalAlterConfigsRequest[1](validate_only=validate_only, resources=[AlterResource(
        resource_type=resource_type, resource_name=name, configs=[
            AlterResource.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in changes])])
    return peer.call(request).responses[0].error_code


def legacy_alter(peer, resource_type, name, configs):
    resource = AlterConfigsRequest.AlterConfigsResource
    request = AlterConfigsRequest[2](validate_only=False, resources=[resource(
        resource_type=resource_type, resource_name=name,
        configs=[resource.AlterableConfig(name=k, value=v) for k, v in configs.items()])])
    return peer.call(request).responses[0].error_code


def described(peer, resource_type, name, keys=None):
    """(error code, {config: (value, source)}) of one DescribeConfigs resource."""
    resource = DescribeConfigsRequest.DescribeConfigsResource
    request = DescribeConfigsRequest[4](include_synonyms=False, include_documentation=False, resources=[resource(
        resource_type=resource_type, resource_name=name, configuration_keys=keys)])
    result = peer.call(request).results[0]
    return result.error_code, {c.name: (c.value, c.config_source) for c in result.configs}


def alter_quota(peer, entity, ops, validate_only=False):
    """The error code of one AlterClientQuotas entry; ``entity`` {type: name}, ``ops`` {key: value or None}."""
    request = AlterClientQuotasRequest[1](validate_only=validate_only, entries=[QuotaEntry(
        entity=[QuotaEntry.EntityData(entity_type=k, entity_name=v) for k, v in entity.items()],
        ops=[QuotaEntry.OpData(key=k, value=0.0 if v is None else v, remove=v is None) for k, v in ops.items()])])
    return peer.call(request).entries[0].error_code


def quotas_of(peer, entity_type, match, *, settle_s=5.0):
    """(error code, [(entity, values)]) of DescribeClientQuotas matching one exact entity name, once two answers
    in a row agree (Kafka's broker applies a quota change from the controller's log a moment after it answers
    AlterClientQuotas), within ``settle_s``."""
    deadline = time.monotonic() + settle_s
    answer = _quotas_once(peer, entity_type, match)
    while time.monotonic() < deadline:
        time.sleep(0.1)
        again = _quotas_once(peer, entity_type, match)
        if again == answer:
            break
        answer = again
    return answer


def _quotas_once(peer, entity_type, match):
    component = DescribeClientQuotasRequest.ComponentData
    request = DescribeClientQuotasRequest[1](strict=False, components=[
        component(entity_type=entity_type, match_type=0, match=match)])
    answer = peer.call(request)
    return answer.error_code, sorted(  # the matched name as "<match>": each peer has names of its own
        (tuple(sorted((e.entity_type, "<match>" if e.entity_name == match else e.entity_name) for e in entry.entity)),
         tuple(sorted((v.key, v.value) for v in entry.values))) for entry in answer.entries or [])


def produce(peer, topic, count, keyed=False):
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i in range(count):
        builder.append(i, timestamp=None, key=b"k%d" % i if keyed else None, value=b"v%d" % i, headers=[])
    data = ProduceRequest[8].TopicProduceData
    request = ProduceRequest[8](transactional_id=None, acks=-1, timeout_ms=10000, topic_data=[data(
        name=topic, partition_data=[data.PartitionProduceData(index=0, records=bytes(builder.build()))])])
    return peer.settled(lambda: request).responses[0].partition_responses[0].error_code


# --- scenarios -----------------------------------------------------------------------------------------------

def invalid_topic_names(peer):
    return {label: create(peer, name) for label, name in
            (("empty", ""), ("dot", "."), ("dotdot", ".."), ("space", "bad name"), ("long", "x" * 250))}


def existing_topic(peer):
    name = created_topic(peer)
    return {"again": create(peer, name), "again_validate_only": create(peer, name, validate_only=True)}


def partitions_and_factor(peer):
    return {f"{label}": create(peer, peer.name("p"), partitions, factor, validate_only=validate_only)
            for label, partitions, factor, validate_only in (
                ("zero_partitions", 0, 1, False), ("negative_partitions", -5, 1, False),
                ("factor_over_brokers", 1, 3, False), ("factor_zero", 1, 0, False),
                ("factor_negative", 1, -7, False), ("validate_only_over_brokers", 1, 3, True),
                ("defaults", -1, -1, False))}


def topic_config_values(peer):
    """Codes for bad topic configs: unknown names, values that do not parse or are out of range, broker names."""
    cases = {"unknown_name": {"no.such.config": "1"}, "retention_not_a_number": {"retention.ms": "abc"},
             "retention_below_minus_one": {"retention.ms": "-5"}, "broker_name_on_topic": {"log.retention.ms": "1"},
             "policy_unknown": {"cleanup.policy": "shred"}, "min_isr_zero": {"min.insync.replicas": "0"},
             "bool_not_bool": {"unclean.leader.election.enable": "maybe"}, "null_value": {"retention.ms": None},
             "removed_in_kafka_4": {"message.format.version": "3.0-IV1"},
             "downconversion_removed": {"message.downconversion.enable": "true"},
             "difference_removed": {"message.timestamp.difference.max.ms": "1000"},
             "kip_950": {"remote.log.copy.disable": "false", "remote.log.delete.on.disable": "false"},
             "good": {"retention.ms": "1000", "cleanup.policy": "compact,delete"}}
    return {label: {"create": create(peer, peer.name("c"), configs=configs),
                    "validate_only": create(peer, peer.name("c"), configs=configs, validate_only=True)}
            for label, configs in cases.items()}


def config_numbers_with_whitespace(peer):
    """Number configs padded with whitespace are accepted: Kafka's ConfigDef.parseType parses ``value.trim()``
    (Java's trim: every character up to U+0020, so NUL and the other controls too, but not NBSP or U+2003), for
    CreateTopics and IncrementalAlterConfigs alike.  Not compared: DescribeConfigs then shows Kafka's parsed
    value (1048576) and pylog the value as sent (' 1048576 '), a known difference."""
    cases = {"spaces": " 1048576 ", "tab_newline": "\t1048576\n", "nul": "\x001048576", "unit_separator":
             "\x1f1048576", "nbsp": "\u00a01048576", "em_space": "\u20031048576", "inner_space": "1048 576"}
    answers = {}
    for label, value in cases.items():
        name = peer.name("ws")
        code = create(peer, name, configs={"max.message.bytes": value})
        answers[label] = {"create": code}
        altered = created_topic(peer, "ws-alter")
        answers[label]["incremental"] = incremental(peer, TOPIC, altered, [("retention.ms", SET, value)])
    return answers


def delete_unknown_topic(peer):
    request = DeleteTopicsRequest[4](timeout_ms=30000, topic_names=[peer.name("gone")])
    return [r.error_code for r in peer.call(request).responses]


def create_partitions(peer):
    name = created_topic(peer, partitions=2)

    def grow(topic, count, validate_only=False):
        request = CreatePartitionsRequest[3](timeout_ms=30000, validate_only=validate_only, topics=[
            CreatePartitionsRequest.CreatePartitionsTopic(name=topic, count=count, assignments=None)])
        return peer.call(request).results[0].error_code
    return {"decrease": grow(name, 1), "same": grow(name, 2), "zero": grow(name, 0),
            "unknown_topic": grow(peer.name("gone"), 3), "validate_only": grow(name, 4, True),
            "increase": grow(name, 3), "after": described(peer, TOPIC, name, ["retention.ms"])[0]}


def describe_config_errors(peer):
    return {"unknown_topic": described(peer, TOPIC, peer.name("gone"))[0],
            "other_broker": described(peer, BROKER, "77")[0],
            "broker_not_a_number": described(peer, BROKER, "one")[0],
            "unknown_resource_type": described(peer, 99, "x")[0]}


def incremental_list_configs(peer):
    """APPEND/SUBTRACT on cleanup.policy start from the current value, the default ``delete`` included."""
    name = created_topic(peer)
    steps = {}
    for label, changes in (("append_compact", [("cleanup.policy", APPEND, "compact")]),
                           ("subtract_delete", [("cleanup.policy", SUBTRACT, "delete")]),
                           ("append_again", [("cleanup.policy", APPEND, "compact")]),
                           ("delete_override", [("cleanup.policy", DELETE, None)]),
                           ("append_to_non_list", [("retention.ms", APPEND, "5")]),
                           ("subtract_absent", [("cleanup.policy", SUBTRACT, "compact")])):
        steps[label] = (incremental(peer, TOPIC, name, changes), described(peer, TOPIC, name, ["cleanup.policy"]))
    return steps


def incremental_errors(peer):
    name = created_topic(peer)
    return {"unknown_config": incremental(peer, TOPIC, name, [("no.such.config", SET, "1")]),
            "bad_value": incremental(peer, TOPIC, name, [("retention.ms", SET, "abc")]),
            "validate_only": incremental(peer, TOPIC, name, [("retention.ms", SET, "1000")], validate_only=True),
            "after_validate_only": described(peer, TOPIC, name, ["retention.ms"])[1]["retention.ms"][1],
            "unknown_topic": incremental(peer, TOPIC, peer.name("gone"), [("retention.ms", SET, "1")]),
            "broker_bad_value": incremental(peer, BROKER, "", [("log.retention.ms", SET, "abc")]),
            "broker_unknown": incremental(peer, BROKER, "", [("no.such.broker.config", SET, "1")]),
            # removed again: Kafka's node is the session's, and other tests describe its broker defaults
            "broker_unknown_removed": incremental(peer, BROKER, "", [("no.such.broker.config", DELETE, None)]),
            "broker_read_only": incremental(peer, BROKER, "", [("broker.id", SET, "5")])}


def broker_loggers(peer):
    """BROKER_LOGGER (8): the root logger described, a logger's level set and unset, Kafka's refusals."""
    logger = "kafka.server.KafkaApis" if peer.kind == "kafka" else "broker_sim.server.handlers.topics"
    broker = str(peer.server.node_id if peer.kind == "kafka" else peer.server.broker_id)
    code, root = described(peer, BROKER_LOGGER, broker, ["root"])
    answer = {"describe_root": (code, sorted(root)), "root_source": root["root"][1],
              "describe_empty_name": described(peer, BROKER_LOGGER, "")[0],
              "describe_other_broker": described(peer, BROKER_LOGGER, "77")[0],
              "unknown_logger": incremental(peer, BROKER_LOGGER, broker, [("no.such.Logger", SET, "INFO")]),
              "bad_level": incremental(peer, BROKER_LOGGER, broker, [(logger, SET, "LOUD")]),
              "append": incremental(peer, BROKER_LOGGER, broker, [(logger, APPEND, "INFO")]),
              "delete_root": incremental(peer, BROKER_LOGGER, broker, [("root", DELETE, None)]),
              "alter_other_broker": incremental(peer, BROKER_LOGGER, "77", [(logger, SET, "INFO")]),
              "validate_only": incremental(peer, BROKER_LOGGER, broker, [(logger, SET, "TRACE")], validate_only=True),
              "set_debug": incremental(peer, BROKER_LOGGER, broker, [(logger, SET, "DEBUG")]),
              "after_set": described(peer, BROKER_LOGGER, broker, [logger])[1][logger],
              "unset": incremental(peer, BROKER_LOGGER, broker, [(logger, DELETE, None)]),
              "after_unset": described(peer, BROKER_LOGGER, broker, [logger])[1][logger][0] == root["root"][0],
              "legacy_alter": legacy_alter(peer, BROKER_LOGGER, broker, {logger: "INFO"})}
    return answer


def legacy_alter_errors(peer):
    name = created_topic(peer)
    return {"unknown_config": legacy_alter(peer, TOPIC, name, {"no.such.config": "1"}),
            "bad_value": legacy_alter(peer, TOPIC, name, {"retention.ms": "abc"}),
            "good": legacy_alter(peer, TOPIC, name, {"retention.ms": "2000"}),
            "after": described(peer, TOPIC, name, ["retention.ms"])[1]}


def acls_without_authorizer(peer):
    binding = dict(resource_type=2, resource_name="t", resource_pattern_type=3, principal="User:a", host="*",
                   operation=3, permission_type=3)
    created = peer.call(CreateAclsRequest[3](creations=[CreateAclsRequest.AclCreation(**binding)]))
    listed = peer.call(DescribeAclsRequest[3](
        resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
        host_filter=None, operation=1, permission_type=1))
    deleted = peer.call(DeleteAclsRequest[3](filters=[DeleteAclsRequest.DeleteAclsFilter(
        resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
        host_filter=None, operation=1, permission_type=1)]))
    return {"create": [r.error_code for r in created.results], "describe": listed.error_code,
            "delete": [r.error_code for r in deleted.filter_results]}


def client_quota_errors(peer):
    user = peer.name("u")
    return {"unknown_key": alter_quota(peer, {"user": user}, {"no_such_quota": 10.0}),
            "negative": alter_quota(peer, {"user": user}, {"producer_byte_rate": -1.0}),
            "zero": alter_quota(peer, {"user": user}, {"producer_byte_rate": 0.0}),
            "fraction_byte_rate": alter_quota(peer, {"user": user}, {"producer_byte_rate": 1.5}),
            "unknown_entity_type": alter_quota(peer, {"group": user}, {"producer_byte_rate": 10.0}),
            "ip_key_on_user": alter_quota(peer, {"user": user}, {"connection_creation_rate": 10.0}),
            "validate_only": alter_quota(peer, {"user": user}, {"producer_byte_rate": 10.0}, validate_only=True),
            "described_after_validate_only": quotas_of(peer, "user", user),
            "good": alter_quota(peer, {"user": user, "client-id": "c"}, {"producer_byte_rate": 1024.0,
                                                                        "request_percentage": 12.5}),
            "described": quotas_of(peer, "user", user),
            "describe_unknown_type": quotas_of(peer, "group", "x")[0]}


def ip_quotas(peer):
    """IP connection-creation quotas: stored and described by IP (and <default>), their own key only."""
    ip = "10.77.0.1"
    answer = {"set": alter_quota(peer, {"ip": ip}, {"connection_creation_rate": 10.0}),
              "described": quotas_of(peer, "ip", ip),
              "byte_rate_on_ip": alter_quota(peer, {"ip": ip}, {"producer_byte_rate": 10.0}),
              "not_an_ip": alter_quota(peer, {"ip": "not an ip"}, {"connection_creation_rate": 10.0}),
              "ip_with_user": alter_quota(peer, {"ip": ip, "user": "u"}, {"connection_creation_rate": 10.0}),
              "fraction": alter_quota(peer, {"ip": ip}, {"connection_creation_rate": 2.5}),
              "negative": alter_quota(peer, {"ip": ip}, {"connection_creation_rate": -3.0}),
              "remove": alter_quota(peer, {"ip": ip}, {"connection_creation_rate": None}),
              "described_after_remove": quotas_of(peer, "ip", ip)}
    return answer


def describe_cluster(peer):
    answer = peer.call(DescribeClusterRequest[1](include_cluster_authorized_operations=True, endpoint_type=1))
    return {"error_code": answer.error_code, "endpoint_type": answer.endpoint_type,
            "brokers": len(answer.brokers), "authorized_operations": answer.authorized_operations}


def elect_leaders(peer):
    name = created_topic(peer)
    topics = ElectLeadersRequest.TopicPartitions

    def elect(election_type, topic, partitions):
        request = ElectLeadersRequest[2](election_type=election_type, timeout_ms=30000,
                                         topic_partitions=[topics(topic=topic, partitions=partitions)])
        answer = peer.call(request)
        return answer.error_code, [(p.partition_id, p.error_code) for r in answer.replica_election_results
                                   for p in r.partition_result]
    return {"preferred": elect(0, name, [0]), "unclean": elect(1, name, [0]),
            "unknown_partition": elect(0, name, [7]), "unknown_topic": elect(0, peer.name("gone"), [0])}


def alter_reassignments(peer):
    name = created_topic(peer)
    topic = AlterPartitionReassignmentsRequest.ReassignableTopic

    def reassign(topic_name, partition, replicas):
        request = AlterPartitionReassignmentsRequest[0](timeout_ms=30000, topics=[topic(name=topic_name, partitions=[
            topic.ReassignablePartition(partition_index=partition, replicas=replicas)])])
        answer = peer.call(request)
        return answer.error_code, [p.error_code for r in answer.responses for p in r.partitions]
    return {"cancel_none": reassign(name, 0, None), "unknown_broker": reassign(name, 0, [42]),
            "duplicate_replicas": reassign(name, 0, [1, 1]), "empty": reassign(name, 0, []),
            "unknown_partition": reassign(name, 9, [1]), "unknown_topic": reassign(peer.name("gone"), 0, [1])}


def delete_records(peer):
    name = created_topic(peer)
    assert produce(peer, name, 5) == 0
    topic = DeleteRecordsRequest.DeleteRecordsTopic

    def delete(topic_name, partition, offset):
        request = DeleteRecordsRequest[2](timeout_ms=30000, topics=[topic(name=topic_name, partitions=[
            topic.DeleteRecordsPartition(partition_index=partition, offset=offset)])])
        result = peer.call(request).topics[0].partitions[0]
        return result.error_code, result.low_watermark
    return {"beyond_high_watermark": delete(name, 0, 6), "to_two": delete(name, 0, 2),
            "backwards": delete(name, 0, 1), "high_watermark": delete(name, 0, -1),
            "below_minus_one": delete(name, 0, -2), "unknown_partition": delete(name, 3, 0),
            "unknown_topic": delete(peer.name("gone"), 0, 0)}


def delete_records_compacted(peer):
    """A log without ``delete`` in cleanup.policy refuses DeleteRecords (POLICY_VIOLATION), at any offset;
    compact,delete accepts it."""
    topic = DeleteRecordsRequest.DeleteRecordsTopic

    def delete(topic_name, offset):
        request = DeleteRecordsRequest[2](timeout_ms=30000, topics=[topic(name=topic_name, partitions=[
            topic.DeleteRecordsPartition(partition_index=0, offset=offset)])])
        result = peer.call(request).topics[0].partitions[0]
        return result.error_code, result.low_watermark
    compacted = created_topic(peer, "compacted", configs={"cleanup.policy": "compact"})
    both = created_topic(peer, "compact-delete", configs={"cleanup.policy": "compact,delete"})
    assert produce(peer, compacted, 5, keyed=True) == 0
    assert produce(peer, both, 5, keyed=True) == 0
    return {"compact_to_two": delete(compacted, 2), "compact_high_watermark": delete(compacted, -1),
            "compact_zero": delete(compacted, 0), "compact_delete_to_two": delete(both, 2)}


SCENARIOS = [
    Scenario("create-topics invalid names", invalid_topic_names),
    Scenario("create-topics existing topic", existing_topic),
    Scenario("create-topics partitions and replication factor", partitions_and_factor),
    Scenario("create-topics config values", topic_config_values),
    Scenario("config numbers padded with whitespace", config_numbers_with_whitespace),
    Scenario("delete-topics unknown topic", delete_unknown_topic),
    Scenario("create-partitions", create_partitions),
    Scenario("describe-configs errors", describe_config_errors),
    Scenario("incremental-alter-configs APPEND/SUBTRACT on list configs", incremental_list_configs),
    Scenario("incremental-alter-configs errors", incremental_errors),
    Scenario("alter-configs (legacy) errors", legacy_alter_errors),
    Scenario("broker loggers (BROKER_LOGGER resources)", broker_loggers),
    Scenario("ACL admin without an authorizer", acls_without_authorizer),
    Scenario("client quotas: keys, values, entities", client_quota_errors),
    Scenario("IP connection-creation quotas", ip_quotas),
    Scenario("describe-cluster", describe_cluster),
    Scenario("elect-leaders on a single node", elect_leaders),
    Scenario("alter-partition-reassignments errors", alter_reassignments),
    Scenario("delete-records offsets", delete_records),
    Scenario("delete-records on compacted topics", delete_records_compacted),
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=str)
def test_admin_answers_match_kafka(pair, scenario):
    pair.compare(scenario)
