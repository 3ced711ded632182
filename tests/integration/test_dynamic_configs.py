"""Dynamic broker configs (AlterConfigs / IncrementalAlterConfigs on BROKER resources) and AlterConfigs'
replace semantics on topics, over the wire (kafka-python's alter_configs sends the incremental form).

Effects are read back with DescribeConfigs, so the tests run on Apache Kafka too; broker configs are changed
on a node of the test's own (a factory), never on the session's shared Kafka node."""
from __future__ import annotations

import pytest
from kafka.protocol.admin import AlterConfigsRequest, DescribeConfigsRequest, IncrementalAlterConfigsRequest

from broker_sim.server.broker import Broker
from tests.integration.client_helpers import create_topic
from tests.integration.kafka_wire import WireClient, metadata
from broker_sim.testing.waiting import wait_until

TOPIC, BROKER = 2, 4
DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 1, 2, 3
FACTORIES = pytest.mark.parametrize("factory", ["pylog_broker_factory", "kafka_broker_factory"],
                                    ids=["pylog", "kafka"])


def _alter(broker, resource_type: int, name: str, configs: dict, validate_only=False):
    Resource = AlterConfigsRequest.AlterConfigsResource
    with WireClient(broker.bootstrap_servers) as client:
        response = client.call(AlterConfigsRequest[2](resources=[Resource(
            resource_type=resource_type, resource_name=name,
            configs=[Resource.AlterableConfig(name=k, value=v) for k, v in configs.items()])],
            validate_only=validate_only))
    return response.responses[0]


def _incremental(broker, resource_type: int, name: str, ops: list[tuple[str, int, str | None]]):
    Resource = IncrementalAlterConfigsRequest.AlterConfigsResource
    with WireClient(broker.bootstrap_servers) as client:
        response = client.call(IncrementalAlterConfigsRequest[1](resources=[Resource(
            resource_type=resource_type, resource_name=name,
            configs=[Resource.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops])],
            validate_only=False))
    return response.responses[0]


def _described(broker, resource_type: int, name: str) -> dict[str, tuple[str, int]]:
    """config name -> (value, config source) of one DescribeConfigs resource."""
    with WireClient(broker.bootstrap_servers) as client:
        (result,) = client.call(DescribeConfigsRequest[4](resources=[DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=resource_type, resource_name=name, configuration_keys=None)], include_synonyms=False,
            include_documentation=False)).results
    assert result.error_code == 0, result
    return {c.name: (c.value, c.config_source) for c in result.configs}


def _broker_id(broker) -> int:
    with WireClient(broker.bootstrap_servers) as client:
        (node,) = metadata(client, []).brokers
    return node.node_id


# broker_sim only: it reads the partitions' log configs and restarts the in-process broker on its data dir
def test_a_dynamic_default_applies_to_every_partition_and_survives_a_restart(tmp_path):
    """log.retention.ms set for every broker: topics without their own value take it at once (their log
    config changes); a restart keeps it.  Mutation: reconfigure not called -> the log keeps 7 days."""
    config = {"listeners": "PLAINTEXT://127.0.0.1:0"}
    with Broker(tmp_path, config=config) as broker:
        with WireClient(broker.bootstrap_servers) as client:
            metadata(client, ["dyn"])
        assert _alter(broker, BROKER, "", {"log.retention.ms": "12345"}).error_code == 0
        assert broker.replicas.get("dyn", 0).log.config.retention_ms == 12345
        assert broker.config.source("log.retention.ms") == "dynamic-default"
    with Broker(tmp_path, config=config) as broker:
        assert broker.config.source("log.retention.ms") == "dynamic-default"
        assert broker.replicas.get("dyn", 0).log.config.retention_ms == 12345


@FACTORIES
def test_incremental_broker_configs_win_over_the_default_and_can_be_deleted(request, factory):
    broker = request.getfixturevalue(factory)()
    own = str(_broker_id(broker))
    assert _incremental(broker, BROKER, "", [("message.max.bytes", 0, "3000000")]).error_code == 0
    assert _incremental(broker, BROKER, own, [("message.max.bytes", 0, "2000000")]).error_code == 0
    # Kafka's broker takes a change from its metadata log a moment after the controller answered
    wait_until(lambda: _described(broker, BROKER, own)["message.max.bytes"] == ("2000000", DYNAMIC_BROKER_CONFIG),
               timeout_s=10, what="message.max.bytes 2000000 from the broker's own config")
    assert _incremental(broker, BROKER, own, [("message.max.bytes", 1, None)]).error_code == 0
    wait_until(lambda: _described(broker, BROKER, own)["message.max.bytes"] ==
               ("3000000", DYNAMIC_DEFAULT_BROKER_CONFIG),
               timeout_s=10, what="DELETE: the dynamic default shows again")


def test_static_or_bad_broker_configs_are_refused_naming_them(any_broker):
    static = _alter(any_broker, BROKER, "", {"broker.id": "7"})
    assert static.error_code == 42 and "broker.id" in static.error_message  # INVALID_REQUEST
    bad = _alter(any_broker, BROKER, "", {"log.retention.ms": "soon"})
    assert bad.error_code == 42 and "soon" in bad.error_message  # Kafka: INVALID_REQUEST (a topic's: 40)
    other = _alter(any_broker, BROKER, "9", {"log.retention.ms": "1"})
    # Kafka: "Unexpected broker id, expected 1, but received 9"
    assert other.error_code == 42 and "9" in other.error_message
    own = _described(any_broker, BROKER, str(_broker_id(any_broker)))
    assert own["log.retention.ms"][1] not in (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG)


def test_alter_configs_replaces_a_topics_overrides(any_broker, unique):
    topic = unique("replaced")
    create_topic(any_broker.bootstrap_servers, topic)

    def overrides():
        return {k: v for k, (v, source) in _described(any_broker, TOPIC, topic).items()
                if source == DYNAMIC_TOPIC_CONFIG}

    assert _incremental(any_broker, TOPIC, topic, [("cleanup.policy", 0, "compact"),
                                                   ("retention.ms", 0, "1000")]).error_code == 0
    assert _alter(any_broker, TOPIC, topic, {"retention.ms": "2000"}, validate_only=True).error_code == 0
    assert overrides() == {"cleanup.policy": "compact", "retention.ms": "1000"}
    assert _alter(any_broker, TOPIC, topic, {"retention.ms": "2000"}).error_code == 0
    assert overrides() == {"retention.ms": "2000"}
