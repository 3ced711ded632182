"""Dynamic broker configs (AlterConfigs / IncrementalAlterConfigs on BROKER resources) and AlterConfigs'
replace semantics on topics, over the wire (kafka-python's alter_configs sends the incremental form)."""
from __future__ import annotations

from kafka.protocol.admin import AlterConfigsRequest, IncrementalAlterConfigsRequest

from broker_sim.server.broker import Broker
from tests.integration.kafka_wire import WireClient, metadata

TOPIC, BROKER = 2, 4


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


def test_incremental_broker_configs_win_over_the_default_and_can_be_deleted(pylog_broker):
    assert _incremental(pylog_broker, BROKER, "", [("message.max.bytes", 0, "3000000")]).error_code == 0
    assert _incremental(pylog_broker, BROKER, str(pylog_broker.broker_id),
                        [("message.max.bytes", 0, "2000000")]).error_code == 0
    assert pylog_broker.config.get("message.max.bytes") == 2000000
    assert pylog_broker.config.source("message.max.bytes") == "dynamic"
    assert _incremental(pylog_broker, BROKER, str(pylog_broker.broker_id),
                        [("message.max.bytes", 1, None)]).error_code == 0  # DELETE: the default shows again
    assert pylog_broker.config.get("message.max.bytes") == 3000000


def test_static_or_bad_broker_configs_are_refused_naming_them(pylog_broker):
    static = _alter(pylog_broker, BROKER, "", {"broker.id": "7"})
    assert static.error_code == 42 and "broker.id" in static.error_message  # INVALID_REQUEST
    bad = _alter(pylog_broker, BROKER, "", {"log.retention.ms": "soon"})
    assert bad.error_code == 42 and "soon" in bad.error_message  # Kafka: INVALID_REQUEST (a topic's: 40)
    other = _alter(pylog_broker, BROKER, "9", {"log.retention.ms": "1"})
    assert other.error_code == 42 and "not 9" in other.error_message
    assert pylog_broker.config.source("log.retention.ms") == "default"


def test_alter_configs_replaces_a_topics_overrides(pylog_broker):
    with WireClient(pylog_broker.bootstrap_servers) as client:
        metadata(client, ["replaced"])
    assert _incremental(pylog_broker, TOPIC, "replaced", [("cleanup.policy", 0, "compact"),
                                                          ("retention.ms", 0, "1000")]).error_code == 0
    assert _alter(pylog_broker, TOPIC, "replaced", {"retention.ms": "2000"}, validate_only=True).error_code == 0
    assert pylog_broker.metadata.get("replaced").configs == {"cleanup.policy": "compact", "retention.ms": "1000"}
    assert _alter(pylog_broker, TOPIC, "replaced", {"retention.ms": "2000"}).error_code == 0
    assert pylog_broker.metadata.get("replaced").configs == {"retention.ms": "2000"}
