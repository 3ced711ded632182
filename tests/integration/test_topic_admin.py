"""Topic administration through kafka-python's KafkaAdminClient and confluent-kafka's AdminClient.

Each test runs once per admin client, through a small adapter that turns both
APIs into the same operations (errors as Kafka error codes: kafka-python
raises the error class for the code, confluent-kafka fails the future with a
KafkaError carrying it).  Effects are checked through other clients (metadata, DescribeConfigs,
ListOffsets, produce, consume), not through the admin client that caused
them, so every test runs on Apache Kafka too; broker_sim's partition
directories are checked on broker_sim.  Kafka's broker serves a created or
deleted topic a moment after its controller answered: the checks wait for it.
"""
from __future__ import annotations

import pytest
from confluent_kafka import KafkaException
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import (
    AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource as ConfluentConfigResource, ConfigSource,
    NewPartitions, NewTopic as ConfluentNewTopic, ResourceType,
)
from kafka import KafkaAdminClient, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.errors import KafkaError

from client_helpers import (
    Record, consume_confluent, consume_kafka_python, produce_confluent, produce_kafka_python, wait_for_leaders,
)
from kafka_wire import EARLIEST, WireClient, list_offsets, metadata
from broker_sim.testing.waiting import wait_until

TOPIC_ALREADY_EXISTS, INVALID_TOPIC, INVALID_REPLICATION_FACTOR, UNKNOWN_TOPIC_OR_PARTITION = 36, 17, 38, 3
INVALID_CONFIG = 40
# Kafka 4.1 describes min.insync.replicas as a cluster-wide dynamic default: its controller writes one (KIP-966)
OVERRIDE, DEFAULT, BROKER_DEFAULT, CLUSTER_DEFAULT = "override", "default", "broker", "cluster"


class KafkaPythonAdmin:
    def __init__(self, bootstrap: str) -> None:
        self.client = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)

    def close(self) -> None:
        self.client.close()

    def create(self, name, partitions=1, replication_factor=1, configs=None, validate_only=False) -> int:
        try:
            self.client.create_topics({name: {"num_partitions": partitions, "replication_factor": replication_factor,
                                              "configs": configs or {}}}, validate_only=validate_only)
        except KafkaError as exc:
            return exc.errno
        return 0

    def list(self) -> set[str]:
        return set(self.client.list_topics())

    def describe(self, name) -> dict[str, tuple[str, str]]:
        result = self.client.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)], config_filter="all")
        sources = {"DYNAMIC_TOPIC_CONFIG": OVERRIDE, "DEFAULT_CONFIG": DEFAULT, "STATIC_BROKER_CONFIG": BROKER_DEFAULT,
                   "DYNAMIC_DEFAULT_BROKER_CONFIG": CLUSTER_DEFAULT}
        return {key: (entry["value"], sources[entry["config_source"]])
                for key, entry in result["topic"][name].items()}

    def set_config(self, name, key, value) -> None:
        result = self.client.alter_configs([ConfigResource(ConfigResourceType.TOPIC, name, configs={key: value})],
                                           incremental=True)
        assert result["topic"][name] == "OK", result

    def add_partitions(self, name, total) -> None:
        self.client.create_partitions({name: total})

    def delete_topic(self, name) -> None:
        self.client.delete_topics([name])

    def delete_records(self, name, partition, before) -> int:
        result = self.client.delete_records({TopicPartition(name, partition): before})
        answer = result[TopicPartition(name, partition)]
        assert answer["error_code"] == 0, answer
        return answer["low_watermark"]


class ConfluentAdmin:
    def __init__(self, bootstrap: str) -> None:
        self.client = AdminClient({"bootstrap.servers": bootstrap})

    def close(self) -> None:
        pass

    def create(self, name, partitions=1, replication_factor=1, configs=None, validate_only=False) -> int:
        futures = self.client.create_topics([ConfluentNewTopic(name, partitions, replication_factor,
                                                               config=configs or {})],
                                            validate_only=validate_only, request_timeout=10)
        try:
            futures[name].result(15)
        except KafkaException as exc:
            return exc.args[0].code()
        return 0

    def list(self) -> set[str]:
        return set(self.client.list_topics(timeout=10).topics)

    def describe(self, name) -> dict[str, tuple[str, str]]:
        resource = ConfluentConfigResource(ResourceType.TOPIC, name)
        entries = self.client.describe_configs([resource])[resource].result(15)
        sources = {ConfigSource.DYNAMIC_TOPIC_CONFIG.value: OVERRIDE, ConfigSource.DEFAULT_CONFIG.value: DEFAULT,
                   ConfigSource.STATIC_BROKER_CONFIG.value: BROKER_DEFAULT,
                   ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value: CLUSTER_DEFAULT}
        return {key: (entry.value, sources[entry.source]) for key, entry in entries.items()}

    def set_config(self, name, key, value) -> None:
        resource = ConfluentConfigResource(ResourceType.TOPIC, name, incremental_configs=[
            ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)])
        self.client.incremental_alter_configs([resource])[resource].result(15)

    def add_partitions(self, name, total) -> None:
        self.client.create_partitions([NewPartitions(name, total)])[name].result(15)

    def delete_topic(self, name) -> None:
        self.client.delete_topics([name])[name].result(15)

    def delete_records(self, name, partition, before) -> int:
        futures = self.client.delete_records([ConfluentTopicPartition(name, partition, before)])
        (future,) = futures.values()
        return future.result(15).low_watermark


@pytest.fixture(params=[KafkaPythonAdmin, ConfluentAdmin], ids=["kafka-python", "confluent-kafka"])
def admin(request, any_broker):
    client = request.param(any_broker.bootstrap_servers)
    yield client
    client.close()


def _error_of(bootstrap: str, topic: str) -> int:
    with WireClient(bootstrap) as client:
        return metadata(client, [topic], auto_create=False).topics[0].error_code


def test_create_topic_with_configs_and_validate_only_creates_nothing(any_broker, admin, unique):
    created, validated = unique("created"), unique("validated")
    assert admin.create(created, partitions=3, configs={"retention.ms": "12345", "segment.bytes": "2097152"}) == 0
    assert admin.create(validated, partitions=2, validate_only=True) == 0

    wait_for_leaders(any_broker.bootstrap_servers, created, 3)
    assert created in admin.list() and validated not in admin.list()
    assert admin.describe(created)["retention.ms"] == ("12345", OVERRIDE)
    assert _error_of(any_broker.bootstrap_servers, validated) == UNKNOWN_TOPIC_OR_PARTITION
    if any_broker.kind == "pylog":  # broker_sim's own partition log and directories
        assert any_broker.server.replicas.get(created, 0).log.config.retention_ms == 12345
        assert not (any_broker.server.data_dir / f"{validated}-0").exists()


def test_create_topic_errors_are_reported_per_topic(admin, unique):
    exists, refused = unique("exists"), [unique("rf3"), unique("bad-config"), unique("unknown-config")]
    assert admin.create(exists) == 0
    assert admin.create(exists) == TOPIC_ALREADY_EXISTS
    assert admin.create("bad name!") == INVALID_TOPIC
    assert admin.create(refused[0], replication_factor=3) == INVALID_REPLICATION_FACTOR
    assert admin.create(refused[1], configs={"retention.ms": "soon"}) == INVALID_CONFIG
    assert admin.create(refused[2], configs={"no.such.config": "1"}) == INVALID_CONFIG
    assert admin.list() & {"bad name!", *refused} == set()
    # the broker goes on answering the same admin client
    assert admin.create(unique("after-errors")) == 0


@pytest.mark.parametrize("factory", ["pylog_broker_factory", "kafka_broker_factory"], ids=["pylog", "kafka"])
@pytest.mark.parametrize("admin_class", [KafkaPythonAdmin, ConfluentAdmin], ids=["kafka-python", "confluent-kafka"])
def test_describe_configs_shows_overrides_broker_settings_and_defaults(request, factory, admin_class):
    broker = request.getfixturevalue(factory)(config={"log.retention.bytes": "1000000"})
    admin = admin_class(broker.bootstrap_servers)
    try:
        assert admin.create("configured", configs={"retention.ms": "12345"}) == 0
        wait_for_leaders(broker.bootstrap_servers, "configured", 1)
        described = admin.describe("configured")
        assert described["retention.ms"] == ("12345", OVERRIDE)
        assert described["retention.bytes"] == ("1000000", BROKER_DEFAULT)
        assert described["segment.bytes"] == ("1073741824", DEFAULT)

        admin.set_config("configured", "retention.ms", "999")
        wait_until(lambda: admin.describe("configured")["retention.ms"] == ("999", OVERRIDE), timeout_s=10,
                   what="retention.ms 999 described")
        if factory == "pylog_broker_factory":  # broker_sim's partition log took it too
            assert broker.replicas.get("configured", 0).log.config.retention_ms == 999
    finally:
        admin.close()


def test_created_partitions_take_produce_and_fetch(any_broker, admin, unique):
    bootstrap, growing = any_broker.bootstrap_servers, unique("growing")
    assert admin.create(growing, partitions=1) == 0
    admin.add_partitions(growing, 3)

    wait_for_leaders(bootstrap, growing, 3)
    produce_confluent(bootstrap, growing, [Record(b"new", b"in partition 2", partition=2)])
    got = consume_kafka_python(bootstrap, growing, 1, partitions=(2,))
    assert [(r.partition, r.value) for r in got] == [(2, b"in partition 2")]


def test_deleted_topic_is_unknown_and_its_directories_are_gone(any_broker, admin, unique):
    bootstrap, doomed = any_broker.bootstrap_servers, unique("doomed")
    assert admin.create(doomed, partitions=2) == 0
    wait_for_leaders(bootstrap, doomed, 2)
    produce_kafka_python(bootstrap, doomed, [Record(b"k", b"v", partition=1)])

    admin.delete_topic(doomed)

    wait_until(lambda: _error_of(bootstrap, doomed) == UNKNOWN_TOPIC_OR_PARTITION, timeout_s=10,
               what=f"{doomed} unknown")
    assert doomed not in admin.list()
    if any_broker.kind == "pylog":
        assert not [p for p in any_broker.server.data_dir.iterdir() if p.name.startswith(doomed)]


def test_delete_records_moves_the_log_start_and_consumers_start_there(any_broker, admin, unique):
    bootstrap, trimmed = any_broker.bootstrap_servers, unique("trimmed")
    assert admin.create(trimmed) == 0
    wait_for_leaders(bootstrap, trimmed, 1)
    produce_kafka_python(bootstrap, trimmed, [Record(b"k", b"v%d" % i) for i in range(10)])

    assert admin.delete_records(trimmed, 0, 4) == 4

    with WireClient(bootstrap) as client:
        assert list_offsets(client, trimmed, 0, EARLIEST)[::2] == (0, 4)
    for consume in (consume_kafka_python, consume_confluent):
        got = consume(bootstrap, trimmed, 6)
        assert [(r.offset, r.value) for r in got] == [(i, b"v%d" % i) for i in range(4, 10)], consume.__name__
