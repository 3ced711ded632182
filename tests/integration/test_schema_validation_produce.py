"""Broker-side schema validation with real clients: confluent-kafka's AvroSerializer passes, raw records are
refused whole with INVALID_RECORD and per-record errors (KIP-467) that kafka-python reports, nothing of a
refused batch is appended, a topic without validation takes everything, a registry still loading answers a
retriable error the producer retries, and a broker without a registry refuses to turn validation on."""
from __future__ import annotations

import json
import struct
import time
import uuid

import kafka.errors as Errors
import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from kafka import KafkaProducer

from broker_sim.registry.validation import SchemaValidation

EVENT = json.dumps({"type": "record", "name": "Event", "namespace": "com.acme",
                    "fields": [{"name": "id", "type": "long"}]})
VALIDATED = {"confluent.value.schema.validation": "true"}


@pytest.fixture
def broker(pylog_broker_factory):
    return pylog_broker_factory(config={"schema.registry.listeners": "http://127.0.0.1:0"})


def create(bootstrap: str, name: str, configs: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept until the future resolves
    admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1, config=configs or {})])[name] \
        .result(timeout=30)


def produce(bootstrap: str, topic: str, values: list[bytes], **settings) -> list:
    """Send ``values`` in one batch (linger) and return each delivery's error (None when delivered)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 100, **settings})
    outcomes = {}

    def delivered(index):
        def report(error, _message):
            outcomes[index] = error
        return report
    for index, value in enumerate(values):
        producer.produce(topic, value=value, on_delivery=delivered(index))
    assert producer.flush(60) == 0
    return [outcomes[index] for index in range(len(values))]


def consume_all(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    values = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
            elif message is None and len(values) >= expected:
                break
    finally:
        consumer.close()
    return values


def avro_values(registry_url: str, topic: str, count: int) -> list[bytes]:
    serializer = AvroSerializer(SchemaRegistryClient({"url": registry_url}), EVENT)
    context = SerializationContext(topic, MessageField.VALUE)
    return [serializer({"id": n}, context) for n in range(count)]


def test_avro_serialized_records_pass_and_raw_ones_are_refused_whole(broker):
    bootstrap = broker.bootstrap_servers
    create(bootstrap, "events", VALIDATED)
    good = avro_values(broker.schema_registry_url, "events", 3)
    assert produce(bootstrap, "events", good) == [None] * 3

    outcomes = produce(bootstrap, "events", [good[0], b'{"id": 7}', good[1]])  # one batch: refused whole
    assert all(error is not None and error.code() == KafkaError.INVALID_RECORD for error in outcomes)

    assert consume_all(bootstrap, "events", 3) == good  # nothing of the refused batch was appended


def test_kafka_python_sees_the_per_record_error(broker):
    bootstrap = broker.bootstrap_servers
    create(bootstrap, "orders", VALIDATED)
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=100)
    try:
        futures = [producer.send("orders", value=value)
                   for value in (b"\x00" + struct.pack(">i", 4242) + b"\x02", b"plain text")]
        producer.flush(30)
        errors = []
        for future in futures:
            with pytest.raises(Errors.InvalidRecordError) as caught:
                future.get(timeout=30)
            errors.append(str(caught.value))
    finally:
        producer.close()
    assert "value of record 0: schema id 4242 is not registered" in errors[0]
    assert "subject 'orders-value'" in errors[0]
    assert "value of record 1: not in the schema registry's wire format" in errors[1]


def test_an_id_under_another_subject_is_refused(broker):
    bootstrap = broker.bootstrap_servers
    create(bootstrap, "payments", VALIDATED)
    other = avro_values(broker.schema_registry_url, "refunds", 1)  # registered under refunds-value
    (error,) = produce(bootstrap, "payments", other)
    assert error.code() == KafkaError.INVALID_RECORD


def test_the_same_records_go_to_a_topic_without_validation(broker):
    bootstrap = broker.bootstrap_servers
    create(bootstrap, "plain")
    values = avro_values(broker.schema_registry_url, "plain", 1) + [b"raw", b'{"id": 1}']
    assert produce(bootstrap, "plain", values) == [None] * 3
    assert consume_all(bootstrap, "plain", 3) == values


def test_validation_turned_on_later_applies_to_the_next_produce(broker):
    bootstrap = broker.bootstrap_servers
    create(bootstrap, "later")
    assert produce(bootstrap, "later", [b"raw"]) == [None]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, "later", incremental_configs=[ConfigEntry(
        "confluent.value.schema.validation", "true", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(timeout=30)
    (error,) = produce(bootstrap, "later", [b"raw"])
    assert error.code() == KafkaError.INVALID_RECORD
    described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "later")])
    configs = next(iter(described.values())).result(timeout=30)
    assert configs["confluent.value.schema.validation"].value == "true"
    assert configs["confluent.value.subject.name.strategy"].value == \
        "io.confluent.kafka.serializers.subject.TopicNameStrategy"


def test_a_registry_still_loading_is_retried_by_the_producer(broker):
    bootstrap = broker.bootstrap_servers
    create(bootstrap, "loading", VALIDATED)
    good = avro_values(broker.schema_registry_url, "loading", 2)
    real = broker.replicas.record_check
    answers = []

    def loading_then_ready(refresh):
        answers.append(refresh)
        return None if len(answers) <= 2 else real._state_of(refresh)
    broker.replicas.record_check = SchemaValidation(loading_then_ready)
    try:
        assert produce(bootstrap, "loading", good, **{"retry.backoff.ms": 50}) == [None, None]
    finally:
        broker.replicas.record_check = real
    assert len(answers) >= 3  # refused twice as COORDINATOR_LOAD_IN_PROGRESS, then checked and appended
    assert consume_all(bootstrap, "loading", 2) == good


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")  # AlterConfigs, the legacy API, on purpose
def test_without_a_registry_validation_cannot_be_turned_on(pylog_broker_factory):
    broker = pylog_broker_factory(config={"schema.registry.listeners": ""})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    future = admin.create_topics([NewTopic("nope", 1, 1, config=VALIDATED)])["nope"]
    with pytest.raises(Exception) as caught:
        future.result(timeout=30)
    error = caught.value.args[0]
    assert error.code() == KafkaError.INVALID_CONFIG and "schema.registry.listeners" in error.str()

    create(broker.bootstrap_servers, "plain")
    resource = ConfigResource(ConfigResource.Type.TOPIC, "plain", set_config=VALIDATED)
    with pytest.raises(Exception) as caught:
        admin.alter_configs([resource])[resource].result(timeout=30)
    assert caught.value.args[0].code() == KafkaError.INVALID_CONFIG


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_compressed_and_large_batches_are_checked(broker, codec):
    """Compressed batches are checked from the validator's decompressed copy; a produce over 256 KB is checked
    on the validation threads with the rest of its records."""
    bootstrap = broker.bootstrap_servers
    topic = f"packed-{codec}"
    create(bootstrap, topic, VALIDATED)
    (framed,) = avro_values(broker.schema_registry_url, topic, 1)
    many = [framed + bytes(200)] * 3000  # ~630 KB in one request
    settings = {"compression.type": codec, "batch.size": 1_000_000}
    assert produce(bootstrap, topic, many, **settings) == [None] * len(many)
    outcomes = produce(bootstrap, topic, many[:100] + [bytes(205)] + many[:100], **settings)
    assert all(error is not None and error.code() == KafkaError.INVALID_RECORD for error in outcomes)
    assert len(consume_all(bootstrap, topic, len(many))) == len(many)
