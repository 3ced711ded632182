"""The test kit's topics, seeding, reading back and assertions (broker_sim.testing.data / .assertions), no Spark.

Each format is seeded and read back through the kit on ``pylog_broker``; the typed ones are also decoded with
confluent-kafka's own deserializers (so the bytes carry Confluent's framing and a registered schema id), and the
registry is asked for ``<topic>-value``. read_committed hides an aborted transaction; assert_exactly_once's
message names lost, duplicated and unexpected keys; assert_lag names the partitions behind.
"""
from __future__ import annotations

import json

import pytest

from broker_sim.testing.assertions import assert_exactly_once, assert_lag
from broker_sim.testing.data import create_topics, end_offsets, read, seed

AVRO = {"type": "record", "name": "Event", "namespace": "com.acme",
        "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"}]}
JSON_SCHEMA = {"title": "Event", "type": "object", "properties": {"id": {"type": "integer"},
                                                                  "name": {"type": "string"}}}
PROTO = """syntax = "proto3";
package acme;
message Event { int64 id = 1; string name = 2; }
"""
EVENTS = [{"id": i, "name": f"n{i}"} for i in range(5)]


def registry(broker):
    from confluent_kafka.schema_registry import SchemaRegistryClient
    return SchemaRegistryClient({"url": broker.schema_registry_url, "max.retries": 0})


def confluent_decoded(broker, topic: str, fmt: str, values: list[bytes]):
    from confluent_kafka.serialization import MessageField, SerializationContext
    client = registry(broker)
    context = SerializationContext(topic, MessageField.VALUE)
    if fmt == "avro":
        from confluent_kafka.schema_registry.avro import AvroDeserializer
        deserializer = AvroDeserializer(client)
    elif fmt == "json-schema":
        from confluent_kafka.schema_registry.json_schema import JSONDeserializer
        deserializer = JSONDeserializer(None, schema_registry_client=client)
    else:
        from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer

        from broker_sim.testing.data import protobuf_class, protobuf_dict
        inner = ProtobufDeserializer(protobuf_class(PROTO), {"use.deprecated.format": False})

        def deserializer(value, ctx):
            return protobuf_dict(inner(value, ctx))
    return [deserializer(v, context) for v in values]


def test_bytes_and_json_seed_and_read_back_with_keys_partitions_and_headers(pylog_broker):
    create_topics(pylog_broker, {"raw": 2, "js": 1})
    seeded = seed(pylog_broker, "raw", [{"key": "a", "value": b"1", "partition": 1, "headers": [("h", b"x")]},
                                       b"2", "3"], partition=lambda row: 1 if isinstance(row, dict) else 0)
    assert (seeded.count, seeded.offsets) == (3, {0: (0, 1), 1: (0, 0)})
    rows = read(pylog_broker, "raw")
    assert [(r["partition"], r["offset"], r["key"], r["value"]) for r in rows] == [
        (0, 0, None, b"2"), (0, 1, None, b"3"), (1, 0, b"a", b"1")]
    assert [r["headers"] for r in rows if r["key"] == b"a"] == [[("h", b"x")]]
    seed(pylog_broker, "js", EVENTS, format="json", key="id")
    rows = read(pylog_broker, "js", format="json", as_="records")
    assert [(r.key, r.value) for r in rows] == [(str(e["id"]).encode(), e) for e in EVENTS]
    assert json.loads(read(pylog_broker, "js")[0]["value"]) == EVENTS[0]


@pytest.mark.parametrize("fmt,schema", [("avro", AVRO), ("json-schema", JSON_SCHEMA), ("protobuf", PROTO)])
def test_typed_formats_register_the_schema_and_write_confluent_framing(pylog_broker, fmt, schema):
    create_topics(pylog_broker, ["events"])
    seeded = seed(pylog_broker, "events", EVENTS, format=fmt, schema=schema, key="id")
    assert seeded.count == 5 and seeded.end_offsets == {("events", 0): 5}
    client = registry(pylog_broker)
    latest = client.get_latest_version("events-value")
    assert latest.schema_id == seeded.schema_id
    raw = read(pylog_broker, "events")
    assert all(r["value"][0] == 0 and int.from_bytes(r["value"][1:5], "big") == seeded.schema_id for r in raw)
    if fmt == "protobuf":
        assert all(r["value"][5] == 0 for r in raw)   # message indexes [0]: one zero byte
    assert confluent_decoded(pylog_broker, "events", fmt, [r["value"] for r in raw]) == EVENTS
    assert [r["value"] for r in read(pylog_broker, "events", format=fmt)] == EVENTS
    assert [r["key"] for r in raw] == [str(e["id"]).encode() for e in EVENTS]


def test_read_committed_hides_an_aborted_transaction(pylog_broker):
    create_topics(pylog_broker, ["tx"])
    seed(pylog_broker, "tx", [b"kept-1"], transactional=True)
    seed(pylog_broker, "tx", [b"aborted-1", b"aborted-2"], transactional=True, abort=True)
    seed(pylog_broker, "tx", [b"kept-2"], transactional=True)
    assert [r["value"] for r in read(pylog_broker, "tx")] == [b"kept-1", b"kept-2"]
    uncommitted = read(pylog_broker, "tx", isolation="read_uncommitted")
    assert [r["value"] for r in uncommitted] == [b"kept-1", b"aborted-1", b"aborted-2", b"kept-2"]


def test_bad_arguments_name_the_option_and_what_is_allowed(pylog_broker):
    create_topics(pylog_broker, {"dup": 1})
    with pytest.raises(ValueError, match=r"'dup': TopicAlreadyExistsError"):
        create_topics(pylog_broker, {"dup": 1})
    with pytest.raises(ValueError, match=r"partitions 0 is not a positive integer"):
        create_topics(pylog_broker, {"zero": 0})
    with pytest.raises(ValueError, match=r"format: 'xml' is not one of bytes, json, avro"):
        seed(pylog_broker, "dup", [b"x"], format="xml")
    with pytest.raises(ValueError, match=r"schema: format='avro' needs schema="):
        seed(pylog_broker, "dup", [{"id": 1}], format="avro")
    with pytest.raises(ValueError, match=r"isolation: 'committed' is not one of read_committed"):
        read(pylog_broker, "dup", isolation="committed")


@pytest.mark.pylog_topics("a", "b", partitions=2, config={"cleanup.policy": "compact"})
@pytest.mark.pylog_topics(out=3)
def test_pylog_topics_marker_creates_the_topics_on_the_broker(pylog_broker, pylog_topics):
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource, ConfigResourceType
    assert dict(pylog_topics) == {"a": 2, "b": 2, "out": 3}
    assert {tp[0]: 0 for tp in end_offsets(pylog_broker, ["a", "b", "out"])} == {"a": 0, "b": 0, "out": 0}
    assert len(end_offsets(pylog_broker, "out")) == 3
    admin = KafkaAdminClient(bootstrap_servers=pylog_broker.bootstrap_servers)
    try:
        described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "a")])
    finally:
        admin.close()
    assert "compact" in str(described)
    assert pylog_topics.create(extra=1) == {"extra": 1} and pylog_topics["extra"] == 1


def test_assert_exactly_once_names_lost_duplicated_unexpected_and_different_keys(pylog_broker):
    create_topics(pylog_broker, ["out", "typed"])
    expected = [(f"k{i}", f"v{i}") for i in range(7)]
    rows = [{"key": k, "value": "other" if k == "k5" else v} for k, v in expected if k not in ("k1", "k4", "k6")]
    rows += [{"key": "k2", "value": "v2"}, {"key": "k2", "value": "v2"}, {"key": "k3", "value": "v3"},
             {"key": "zz", "value": "v"}]
    seed(pylog_broker, "out", rows)
    with pytest.raises(AssertionError) as failure:
        assert_exactly_once(expected, "out", bootstrap=pylog_broker, show=2)
    assert str(failure.value) == (
        "topic 'out': 3 of 7 keys lost (k1, k4, ...), 2 duplicated (k2 x3, k3 x2), 1 unexpected (zz x1), "
        "1 with other values (k5: b'other' != expected 'v5') (8 records read)")
    clean = [{"id": i, "name": f"n{i}"} for i in range(3)]
    seed(pylog_broker, "typed", clean, format="json")
    assert len(assert_exactly_once(clean, "typed", bootstrap=pylog_broker.bootstrap_servers, key="id",
                                   format="json")) == 3


def test_assert_lag_names_the_partitions_behind(pylog_broker):
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata
    create_topics(pylog_broker, {"lagged": 2})
    seed(pylog_broker, "lagged", [b"a", b"b", b"c"], partition=0)
    seed(pylog_broker, "lagged", [b"d"], partition=1)
    consumer = KafkaConsumer(bootstrap_servers=pylog_broker.bootstrap_servers, group_id="etl",
                             enable_auto_commit=False)
    try:
        consumer.commit({TopicPartition("lagged", 0): OffsetAndMetadata(1, "", -1),
                         TopicPartition("lagged", 1): OffsetAndMetadata(1, "", -1)})
    finally:
        consumer.close()
    with pytest.raises(AssertionError, match=r"group 'etl': 1 of 2 partitions more than 0 behind \(lagged-0 lag 2\)"):
        assert_lag(pylog_broker, "etl")
    assert assert_lag(pylog_broker, "etl", max_lag=2) == {("lagged", 0): 2, ("lagged", 1): 0}
