"""valueFormat=protobuf and valueFormat=json through Spark: records from confluent-kafka's ProtobufSerializer
and JSONSerializer across two schema versions read exactly; the sink's records read exactly by their
deserializers."""
from __future__ import annotations

import datetime as dt
import json

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from schema_samples import compiled_proto
from spark_helpers import batch, create_topic
from typed_samples import produce_serialized, stream_and_batch

pytestmark = pytest.mark.spark
UTC = dt.timezone.utc

PROTO_V1 = """
syntax = "proto3";
package acme;
import "google/protobuf/timestamp.proto";
message Event {
  int64 id = 1; string name = 2; Color color = 3; google.protobuf.Timestamp at = 4; repeated string tags = 5;
  map<string, int32> attrs = 6; Inner inner = 7;
  enum Color { RED = 0; GREEN = 1; }
  message Inner { int32 x = 1; }
}
"""
PROTO_V2 = PROTO_V1.replace("Inner inner = 7;", "Inner inner = 7; string source = 8;")

JSON_V1 = {"title": "Event", "type": "object", "additionalProperties": False, "required": ["id"],
           "properties": {"id": {"type": "integer"}, "name": {"type": ["null", "string"]},
                          "at": {"type": "string", "format": "date-time"}, "day": {"type": "string", "format": "date"},
                          "score": {"type": "number"}, "ok": {"type": "boolean"},
                          "tags": {"type": "array", "items": {"type": "string"}},
                          "attrs": {"type": "object", "additionalProperties": {"type": "integer"}},
                          "inner": {"type": "object", "properties": {"x": {"type": "integer"}}}}}
JSON_V2 = {**JSON_V1, "properties": {**JSON_V1["properties"], "source": {"type": "string"}}}


@pytest.fixture
def registry(pylog_broker):
    client = SchemaRegistryClient({"url": pylog_broker.schema_registry_url, "max.retries": 0})
    yield client
    client.close()


def _registry_options(pylog_broker) -> dict:
    return {"schema.registry.url": pylog_broker.schema_registry_url}


def test_protobuf_records_of_two_versions_read_into_the_latest_message(spark, pylog_broker, registry):
    bootstrap = pylog_broker.bootstrap_servers
    create_topic(bootstrap, "proto-events")
    _, v1_class = compiled_proto(PROTO_V1, "acme/event.proto")
    _, v2_class = compiled_proto(PROTO_V2, "acme/event.proto")
    v1 = ProtobufSerializer(v1_class("acme.Event"), registry, {"use.deprecated.format": False})
    v2 = ProtobufSerializer(v2_class("acme.Event"), registry, {"use.deprecated.format": False})

    def message(cls, i, **extra):
        m = cls("acme.Event")(id=i, name=f"n{i}", color=i % 2, tags=[f"t{i}"], **extra)
        m.at.FromDatetime(dt.datetime(2026, 2, 3, 4, 5, 6, 7000, tzinfo=UTC) + dt.timedelta(seconds=i))
        m.attrs["a"] = i
        m.inner.x = i * 10
        return m
    produce_serialized(bootstrap, "proto-events", [(v1, message(v1_class, 1)), (v1, message(v1_class, 2)),
                                                   (v2, message(v2_class, 3, source="s3"))])
    options = {"subscribe": "proto-events", "valueFormat": "protobuf", **_registry_options(pylog_broker)}
    df = batch(spark, bootstrap, **options)
    assert df.schema["value"].dataType.simpleString() == (
        "struct<id:bigint,name:string,color:string,at:timestamp,tags:array<string>,attrs:map<string,int>,"
        "inner:struct<x:int>,source:string>")
    streamed, batched = stream_and_batch(spark, bootstrap, lambda df: [tuple(r) for r in df.selectExpr(
        "value.id", "value.name", "value.color", "unix_micros(value.at) AS at", "value.tags", "value.attrs",
        "value.inner.x", "value.source").collect()], **options)
    base = int(dt.datetime(2026, 2, 3, 4, 5, 6, 7000, tzinfo=UTC).timestamp() * 1_000_000)
    assert streamed == batched == [
        (1, "n1", "GREEN", base + 1_000_000, ["t1"], {"a": 1}, 10, None),
        # proto3 leaves a default (RED = 0) off the wire: null, as spark-protobuf's from_protobuf reads it
        (2, "n2", None, base + 2_000_000, ["t2"], {"a": 2}, 20, None),
        (3, "n3", "GREEN", base + 3_000_000, ["t3"], {"a": 3}, 30, "s3"),
    ]


def _consume(bootstrap: str, topic: str, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    out = []
    try:
        for _ in range(150):
            if len(out) == count:
                break
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                out.append(message.value())
    finally:
        consumer.close()
    assert len(out) == count
    return out


def _write(df, pylog_broker, topic: str, fmt: str) -> None:
    (df.coalesce(1).write.format("pylog").mode("append").option("kafka.bootstrap.servers",
                                                                 pylog_broker.bootstrap_servers)
     .option("topic", topic).option("valueFormat", fmt)
     .option("schema.registry.url", pylog_broker.schema_registry_url).save())


def test_protobuf_sink_is_read_by_confluents_deserializer(spark, pylog_broker, registry):
    create_topic(pylog_broker.bootstrap_servers, "proto-out")
    df = spark.createDataFrame([(1, "a", [1, 2]), (2, None, [])], "id long, name string, nums array<int>") \
        .selectExpr("struct(id, name, nums) AS value")
    _write(df, pylog_broker, "proto-out", "protobuf")
    registered = registry.get_latest_version("proto-out-value")
    assert registered.schema.schema_type == "PROTOBUF"
    _, classes = compiled_proto(registered.schema.schema_str, "derived.proto")
    from broker_sim.registry.types import parse
    name = parse("PROTOBUF", registered.schema.schema_str).name
    deserialize = ProtobufDeserializer(classes(name), {"use.deprecated.format": False})
    context = SerializationContext("proto-out", MessageField.VALUE)
    got = sorted((deserialize(v, context) for v in _consume(pylog_broker.bootstrap_servers, "proto-out", 2)),
                 key=lambda m: m.id)
    assert [(m.id, m.HasField("name"), m.name, list(m.nums)) for m in got] == [(1, True, "a", [1, 2]),
                                                                              (2, False, "", [])]


def test_json_records_of_two_versions_read_into_the_latest_schema(spark, pylog_broker, registry):
    bootstrap = pylog_broker.bootstrap_servers
    create_topic(bootstrap, "json-events")
    v1 = JSONSerializer(json.dumps(JSON_V1), registry)
    v2 = JSONSerializer(json.dumps(JSON_V2), registry)
    first = {"id": 1, "name": None, "at": "2026-02-03T04:05:06.007Z", "day": "2026-02-03", "score": 1.5,
             "ok": True, "tags": ["a"], "attrs": {"k": 1}, "inner": {"x": 7}}
    second = {"id": 2, "name": "b", "source": "s2", "tags": []}
    produce_serialized(bootstrap, "json-events", [(v1, first), (v2, second)])
    options = {"subscribe": "json-events", "valueFormat": "json", **_registry_options(pylog_broker)}
    df = batch(spark, bootstrap, **options)
    assert df.schema["value"].dataType.simpleString() == (
        "struct<id:bigint,name:string,at:timestamp,day:date,score:double,ok:boolean,tags:array<string>,"
        "attrs:map<string,bigint>,inner:struct<x:bigint>,source:string>")
    streamed, batched = stream_and_batch(spark, bootstrap, lambda df: [tuple(r) for r in df.selectExpr(
        "value.id", "value.name", "unix_micros(value.at) AS at", "value.day", "value.score", "value.ok", "value.tags",
        "value.attrs", "value.inner.x", "value.source").collect()], **options)
    at = int(dt.datetime(2026, 2, 3, 4, 5, 6, 7000, tzinfo=UTC).timestamp() * 1_000_000)
    assert streamed == batched == [
        (1, None, at, dt.date(2026, 2, 3), 1.5, True, ["a"], {"k": 1}, 7, None),
        (2, "b", None, None, None, None, [], None, None, "s2"),
    ]


def test_json_sink_is_read_by_confluents_deserializer(spark, pylog_broker, registry):
    create_topic(pylog_broker.bootstrap_servers, "json-out")
    df = spark.createDataFrame([(1, "a", 2.5), (2, None, None)], "id long, name string, score double") \
        .selectExpr("struct(id, name, score) AS value")
    _write(df, pylog_broker, "json-out", "json")
    deserialize = JSONDeserializer(None, schema_registry_client=registry)
    context = SerializationContext("json-out", MessageField.VALUE)
    got = sorted((deserialize(v, context) for v in _consume(pylog_broker.bootstrap_servers, "json-out", 2)),
                 key=lambda d: d["id"])
    assert got == [{"id": 1, "name": "a", "score": 2.5}, {"id": 2, "name": None, "score": None}]
