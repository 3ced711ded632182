"""df.write / writeStream.format("pylog") with valueFormat=avro|protobuf|json: a struct column serialized in
Confluent's wire format, read back exactly by confluent-kafka's deserializers; a row that does not fit fails
the write naming the field and commits nothing. On broker_sim and on Apache Kafka (``broker``: the data on Kafka,
the registry broker_sim's)."""
from __future__ import annotations

import datetime as dt
import decimal
import json
import struct

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from pyspark.sql.types import (ArrayType, DateType, DecimalType, IntegerType, LongType, MapType, StringType,
                               StructField, StructType, TimestampType)
from spark_helpers import broker_sim_only, create_topic

pytestmark = pytest.mark.spark
UTC = dt.timezone.utc

ROW_TYPE = StructType([
    StructField("id", LongType(), False),
    StructField("name", StringType()),
    StructField("at", TimestampType()),
    StructField("day", DateType()),
    StructField("price", DecimalType(10, 2)),
    StructField("tags", ArrayType(StringType())),
    StructField("attrs", MapType(StringType(), IntegerType())),
    StructField("inner", StructType([StructField("a", IntegerType())])),
])


def _row(i: int) -> dict:
    return {"id": i, "name": None if i == 2 else f"n{i}",
            "at": dt.datetime(2026, 3, 4, 5, 6, 7, 890000, tzinfo=UTC) + dt.timedelta(minutes=i),
            "day": dt.date(2026, 1, 1) + dt.timedelta(days=i), "price": decimal.Decimal(f"{i}.50"),
            "tags": [f"t{i}"], "attrs": {"k": i}, "inner": {"a": i * 10}}


@pytest.fixture
def registry(broker):
    client = SchemaRegistryClient({"url": broker.schema_registry_url, "max.retries": 0})
    yield client
    client.close()


def _frame(spark, rows: list[dict]):
    schema = StructType([StructField("key", StringType()), StructField("value", ROW_TYPE)])
    return spark.createDataFrame([(str(r["id"]), r) for r in rows], schema)


def _consume(bootstrap: str, topic: str, count: int, *, committed_only: bool = True) -> list:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}", "enable.auto.commit": False,
                         "isolation.level": "read_committed" if committed_only else "read_uncommitted"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    out = []
    try:
        for _ in range(100):
            if len(out) >= count:
                message = consumer.poll(0.5)   # one more look: nothing beyond ``count``
                assert message is None or message.error() is not None, "more records than expected"
                break
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                out.append(message)
    finally:
        consumer.close()
    return out


def _write(df, broker, topic: str, **options):
    writer = (df.write.format("pylog").mode("append").option("kafka.bootstrap.servers", broker.bootstrap_servers)
              .option("topic", topic).option("schema.registry.url", broker.schema_registry_url))
    for key, value in options.items():
        writer = writer.option(key, str(value))
    writer.save()


def test_avro_sink_registers_the_derived_schema_and_confluent_reads_every_row(spark, broker, registry):
    topic = broker.name("typed-out")
    create_topic(broker.bootstrap_servers, topic)
    rows = [_row(i) for i in range(4)]
    _write(_frame(spark, rows).coalesce(1), broker, topic, valueFormat="avro")
    latest = registry.get_latest_version(f"{topic}-value")
    derived = json.loads(latest.schema.schema_str)
    assert derived["name"] == "topLevelRecord"
    assert [f["name"] for f in derived["fields"]] == ["id", "name", "at", "day", "price", "tags", "attrs", "inner"]
    messages = _consume(broker.bootstrap_servers, topic, 4)
    assert all(struct.unpack(">bI", m.value()[:5]) == (0, latest.schema_id) for m in messages)
    deserialize = AvroDeserializer(registry)
    context = SerializationContext(topic, MessageField.VALUE)
    got = sorted((deserialize(m.value(), context) for m in messages), key=lambda r: r["id"])
    for value in got:
        value["attrs"] = dict(value["attrs"])
    assert got == rows
    assert sorted(m.key() for m in messages) == [b"0", b"1", b"2", b"3"]


def test_use_latest_version_writes_with_the_registered_schema_matching_fields_by_name(spark, broker,
                                                                                    registry):
    topic = broker.name("typed-latest")
    create_topic(broker.bootstrap_servers, topic)
    schema = json.dumps({"type": "record", "name": "Reading", "namespace": "com.acme", "fields": [
        {"name": "name", "type": ["null", "string"], "default": None},
        {"name": "id", "type": "long"},
        {"name": "unit", "type": "string", "default": "C"}]})
    schema_id = registry.register_schema(f"{topic}-value", Schema(schema, "AVRO"))
    df = spark.createDataFrame([(1, "a"), (2, None)], "id long, name string").selectExpr("struct(id, name) AS value")
    _write(df.coalesce(1), broker, topic, valueFormat="avro", **{"use.latest.version": "true",
                                                                                  "auto.register.schemas": "false"})
    messages = _consume(broker.bootstrap_servers, topic, 2)
    assert {struct.unpack(">I", m.value()[1:5])[0] for m in messages} == {schema_id}
    deserialize = AvroDeserializer(registry)
    context = SerializationContext(topic, MessageField.VALUE)
    assert sorted((deserialize(m.value(), context) for m in messages), key=lambda r: r["id"]) == [
        {"name": "a", "id": 1, "unit": "C"}, {"name": None, "id": 2, "unit": "C"}]
    assert len(registry.get_versions(f"{topic}-value")) == 1


def test_a_row_that_does_not_fit_fails_the_write_naming_the_field_and_commits_nothing(spark, broker,
                                                                                    registry):
    topic = broker.name("typed-strict")
    create_topic(broker.bootstrap_servers, topic)
    schema = json.dumps({"type": "record", "name": "Strict", "fields": [
        {"name": "id", "type": "long"}, {"name": "name", "type": "string"}]})
    registry.register_schema(f"{topic}-value", Schema(schema, "AVRO"))
    df = spark.createDataFrame([(1, "a"), (2, None), (3, "c")], "id long, name string") \
        .selectExpr("struct(id, name) AS value").coalesce(1)
    with pytest.raises(Exception) as failure:
        _write(df, broker, topic, valueFormat="avro", **{"use.latest.version": "true",
                                                                         "auto.register.schemas": "false"})
    assert "field 'value.name'" in str(failure.value)
    assert _consume(broker.bootstrap_servers, topic, 0) == []


@broker_sim_only   # refused before any broker is asked
def test_a_struct_value_without_a_format_is_refused_before_the_write(spark, broker):
    topic = broker.name("never-written")
    df = spark.createDataFrame([(1,)], "id long").selectExpr("struct(id) AS value")
    with pytest.raises(Exception, match="set valueFormat=avro, protobuf or json"):
        _write(df, broker, topic)


@broker_sim_only   # subject naming: the registry's, not the broker's
def test_record_name_strategy_registers_under_the_record_name(spark, broker, registry):
    topic = broker.name("typed-by-record")
    create_topic(broker.bootstrap_servers, topic)
    df = spark.createDataFrame([(1,)], "id long").selectExpr("struct(id) AS value")
    _write(df, broker, topic, valueFormat="avro", valueRecordName="Reading",
           valueRecordNamespace="com.acme", valueSubjectNameStrategy="RecordNameStrategy")
    assert "com.acme.Reading" in registry.get_subjects()
    assert f"{topic}-value" not in registry.get_subjects()
    _write(df, broker, topic, valueFormat="avro", valueRecordName="Reading",
           valueRecordNamespace="com.acme", valueSubjectNameStrategy="TopicRecordNameStrategy")
    assert f"{topic}-com.acme.Reading" in registry.get_subjects()


@broker_sim_only   # refused on the driver before any task writes
def test_a_protobuf_stream_with_a_decimal_column_fails_at_its_first_planning_naming_the_column(spark, broker,
                                                                                             tmp_path):
    import time
    df = spark.readStream.format("rate").option("rowsPerSecond", "1").load() \
        .selectExpr("struct(value AS id, CAST(value AS DECIMAL(10, 2)) AS price) AS value")
    started = time.monotonic()
    query = (df.writeStream.format("pylog").option("kafka.bootstrap.servers", broker.bootstrap_servers)
             .option("topic", broker.name("never-written")).option("valueFormat", "protobuf")
             .option("schema.registry.url", broker.schema_registry_url)
             .option("checkpointLocation", str(tmp_path / "ckpt")).start())
    with pytest.raises(Exception, match=r"Column 'value.price' is decimal\(10,2\), which valueFormat=protobuf "
                                        r"cannot encode"):
        query.awaitTermination(60)
    assert time.monotonic() - started < 30
