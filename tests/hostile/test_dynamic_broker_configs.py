"""Kafka's dynamic broker configs (DynamicBrokerConfig.AllDynamicConfigs), as librdkafka's integration suite
sets them: each is accepted by AlterConfigs / IncrementalAlterConfigs on a BROKER resource, stored, described
with its dynamic source, and kept across a restart; those pylog does not act on (e.g.
sasl.kerberos.min.time.before.relogin) leave the value in effect unchanged. Kafka's rules stay: static configs,
security configs without a listener prefix and per-broker configs at the cluster default are INVALID_REQUEST."""
from __future__ import annotations

from kafka.protocol.admin import DescribeConfigsRequest, IncrementalAlterConfigsRequest

from broker_sim.config import APPLIED_DYNAMIC_CONFIGS, DYNAMIC_BROKER_CONFIGS, PER_BROKER_CONFIGS
from broker_sim.server.broker import Broker
from tests.integration.kafka_wire import WireClient

BROKER, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 4, 2, 3
INVALID_REQUEST = 42
# one value per config Kafka 4 treats as dynamic that pylog accepted before only for the log.* defaults
SAMPLES = {
    "log.cleaner.threads": "2", "log.cleaner.io.max.bytes.per.second": "1048576.0", "num.io.threads": "16",
    "num.replica.fetchers": "2", "background.threads": "4", "max.connections.per.ip": "500",
    "max.connections": "2000", "max.connection.creation.rate": "100", "producer.id.expiration.ms": "3600000",
    "remote.log.reader.threads": "5", "follower.fetch.last.tiered.offset.enable": "true",
    "metric.reporters": "", "log.cleaner.backoff.ms": "20000",
}
PER_BROKER = {"sasl.kerberos.min.time.before.relogin": "30000", "sasl.kerberos.ticket.renew.window.factor": "0.75",
              "sasl.enabled.mechanisms": "SCRAM-SHA-512", "ssl.cipher.suites": "TLS_AES_128_GCM_SHA256",
              "listener.name.external.ssl.keystore.location": "/etc/pylog/new.pem",
              "listener.name.external.scram-sha-512.sasl.jaas.config": "x required;"}


def incremental(client, name: str, configs: dict[str, str]):
    Resource = IncrementalAlterConfigsRequest.AlterConfigsResource
    response = client.call(IncrementalAlterConfigsRequest[1](resources=[Resource(
        resource_type=BROKER, resource_name=name,
        configs=[Resource.AlterableConfig(name=k, config_operation=0, value=v) for k, v in configs.items()])],
        validate_only=False))
    return response.responses[0]


def described(client, broker_id: int) -> dict[str, tuple[str | None, int, bool]]:
    resource = DescribeConfigsRequest.DescribeConfigsResource(resource_type=BROKER, resource_name=str(broker_id),
                                                              configuration_keys=None)
    result = client.call(DescribeConfigsRequest[4](resources=[resource], include_synonyms=False,
                                                   include_documentation=False)).results[0]
    assert result.error_code == 0, result
    return {c.name: (c.value, c.config_source, c.read_only) for c in result.configs}


def test_every_kafka_dynamic_broker_config_is_accepted_stored_and_described(tmp_path):
    assert set(SAMPLES) <= DYNAMIC_BROKER_CONFIGS and not set(SAMPLES) & (APPLIED_DYNAMIC_CONFIGS | PER_BROKER_CONFIGS)
    config = {"listeners": "PLAINTEXT://127.0.0.1:0", "max.connections": "1000"}
    with Broker(tmp_path, config=config) as broker, WireClient(broker.bootstrap_servers) as client:
        bid = broker.broker_id
        assert incremental(client, "", SAMPLES).error_code == 0
        answer = incremental(client, str(bid), PER_BROKER)
        assert answer.error_code == 0, answer.error_message
        shown = described(client, bid)
        for name, value in SAMPLES.items():
            assert shown[name] == (value, DYNAMIC_DEFAULT_BROKER_CONFIG, False), (name, shown[name])
        for name, value in PER_BROKER.items():
            expected = None if "jaas" in name else value  # sensitive: described without its value
            assert shown[name] == (expected, DYNAMIC_BROKER_CONFIG, False), (name, shown[name])
        assert broker.config.get("max.connections") == 1000  # stored and shown, not acted on
        assert shown["broker.id"][2] is True  # static configs stay read-only

        refused = {"broker.id": "7", "ssl.keystore.location": "/x.pem", "listeners": "PLAINTEXT://:1",
                   "sasl.kerberos.min.time.before.relogin": "1"}
        for name, value in refused.items():  # static; security config without a listener; per-broker at default
            answer = incremental(client, "", {name: value})
            assert answer.error_code == INVALID_REQUEST and name in answer.error_message, (name, answer)
        assert "listeners" in PER_BROKER_CONFIGS
        bad = incremental(client, "", {"num.io.threads": "soon"})
        assert bad.error_code == INVALID_REQUEST and "soon" in bad.error_message  # Kafka: 42 on a broker config
    with Broker(tmp_path, config=config) as broker, WireClient(broker.bootstrap_servers) as client:
        shown = described(client, broker.broker_id)
        assert shown["sasl.kerberos.min.time.before.relogin"] == ("30000", DYNAMIC_BROKER_CONFIG, False)
        assert shown["num.io.threads"] == ("16", DYNAMIC_DEFAULT_BROKER_CONFIG, False)
        assert shown["listener.name.external.ssl.keystore.location"][0] == "/etc/pylog/new.pem"
