"""Topic administration through kafka-python's KafkaAdminClient and confluent-kafka's AdminClient.

Each test runs once per admin client, through a small adapter that turns both
APIs into the same operations (errors as Kafka error codes: kafka-python
raises the error class for the code, confluent-kafka fails the future with a
KafkaError carrying it).  Effects are checked on the broker itself (partition
directories, log start offsets) and through other clients (metadata,
produce, consume), not through the admin client that caused them.
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

from client_helpers import Record, consume_confluent, consume_kafka_python, produce_confluent, produce_kafka_python
from kafka_wire import EARLIEST, WireClient, list_offsets, metadata

TOPIC_ALREADY_EXISTS, INVALID_TOPIC, INVALID_REPLICATION_FACTOR, UNKNOWN_TOPIC_OR_PARTITION = 36, 17, 38, 3
INVALID_CONFIG = 40
OVERRIDE, DEFAULT, BROKER_DEFAULT = "override", "default", "broker"


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
        sources = {"DYNAMIC_TOPIC_CONFIG": OVERRIDE, "DEFAULT_CONFIG": DEFAULT, "STATIC_BROKER_CONFIG": BROKER_DEFAULT}
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
                   ConfigSource.STATIC_BROKER_CONFIG.value: BROKER_DEFAULT}
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
def admin(request, pylog_broker):
    client = request.param(pylog_broker.bootstrap_servers)
    yield client
    client.close()


def test_create_topic_with_configs_and_validate_only_creates_nothing(pylog_broker, admin):
    assert admin.create("created", partitions=3, configs={"retention.ms": "12345", "segment.bytes": "2097152"}) == 0
    assert admin.create("validated", partitions=2, validate_only=True) == 0

    assert "created" in admin.list() and "validated" not in admin.list()
    assert [p.index for p in pylog_broker.replicas.topic_partitions("created")] == [0, 1, 2]
    assert pylog_broker.replicas.get("created", 0).log.config.retention_ms == 12345
    assert not (pylog_broker.data_dir / "validated-0").exists()
    with WireClient(pylog_broker.bootstrap_servers) as client:
        assert metadata(client, ["validated"], auto_create=False).topics[0].error_code == UNKNOWN_TOPIC_OR_PARTITION


def test_create_topic_errors_are_reported_per_topic(pylog_broker, admin):
    assert admin.create("exists") == 0
    assert admin.create("exists") == TOPIC_ALREADY_EXISTS
    assert admin.create("bad name!") == INVALID_TOPIC
    assert admin.create("rf3", replication_factor=3) == INVALID_REPLICATION_FACTOR
    assert admin.create("bad-config", configs={"retention.ms": "soon"}) == INVALID_CONFIG
    assert admin.create("unknown-config", configs={"no.such.config": "1"}) == INVALID_CONFIG
    assert admin.list() & {"bad name!", "rf3", "bad-config", "unknown-config"} == set()
    # the broker goes on answering the same admin client
    assert admin.create("after-errors") == 0


@pytest.mark.parametrize("admin_class", [KafkaPythonAdmin, ConfluentAdmin], ids=["kafka-python", "confluent-kafka"])
def test_describe_configs_shows_overrides_broker_settings_and_defaults(pylog_broker_factory, admin_class):
    broker = pylog_broker_factory(config={"log.retention.bytes": "1000000"})
    admin = admin_class(broker.bootstrap_servers)
    try:
        assert admin.create("configured", configs={"retention.ms": "12345"}) == 0
        described = admin.describe("configured")
        assert described["retention.ms"] == ("12345", OVERRIDE)
        assert described["retention.bytes"] == ("1000000", BROKER_DEFAULT)
        assert described["segment.bytes"] == ("1073741824", DEFAULT)

        admin.set_config("configured", "retention.ms", "999")
        assert admin.describe("configured")["retention.ms"] == ("999", OVERRIDE)
        assert broker.replicas.get("configured", 0).log.config.retention_ms == 999
    finally:
        admin.close()


def test_created_partitions_take_produce_and_fetch(pylog_broker, admin):
    bootstrap = pylog_broker.bootstrap_servers
    assert admin.create("growing", partitions=1) == 0
    admin.add_partitions("growing", 3)

    with WireClient(bootstrap) as client:
        assert len(metadata(client, ["growing"]).topics[0].partitions) == 3
    produce_confluent(bootstrap, "growing", [Record(b"new", b"in partition 2", partition=2)])
    got = consume_kafka_python(bootstrap, "growing", 1, partitions=(2,))
    assert [(r.partition, r.value) for r in got] == [(2, b"in partition 2")]


def test_deleted_topic_is_unknown_and_its_directories_are_gone(pylog_broker, admin):
    assert admin.create("doomed", partitions=2) == 0
    produce_kafka_python(pylog_broker.bootstrap_servers, "doomed", [Record(b"k", b"v", partition=1)])
    assert (pylog_broker.data_dir / "doomed-1").is_dir()

    admin.delete_topic("doomed")

    assert "doomed" not in admin.list()
    with WireClient(pylog_broker.bootstrap_servers) as client:
        assert metadata(client, ["doomed"], auto_create=False).topics[0].error_code == UNKNOWN_TOPIC_OR_PARTITION
    assert not [p for p in pylog_broker.data_dir.iterdir() if p.name.startswith("doomed")]


def test_delete_records_moves_the_log_start_and_consumers_start_there(pylog_broker, admin):
    bootstrap = pylog_broker.bootstrap_servers
    assert admin.create("trimmed") == 0
    produce_kafka_python(bootstrap, "trimmed", [Record(b"k", b"v%d" % i) for i in range(10)])

    assert admin.delete_records("trimmed", 0, 4) == 4

    assert pylog_broker.replicas.get("trimmed", 0).log_start_offset == 4
    with WireClient(bootstrap) as client:
        assert list_offsets(client, "trimmed", 0, EARLIEST)[::2] == (0, 4)
    for consume in (consume_kafka_python, consume_confluent):
        got = consume(bootstrap, "trimmed", 6)
        assert [(r.offset, r.value) for r in got] == [(i, b"v%d" % i) for i in range(4, 10)], consume.__name__
