"""valueFormat=avro|protobuf|json: records written by confluent-kafka's serializers, across two schema
versions, read by spark.read / readStream.format("pylog") as typed columns, exactly; FAILFAST / PERMISSIVE. The
Avro tests run on broker_sim and on Apache Kafka (``broker``: the data on Kafka, the registry broker_sim's)."""
from __future__ import annotations

import json
import struct
import tempfile

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from spark_helpers import batch, create_topic, stream
from typed_samples import (AVRO_SPARK_TYPE, AVRO_V1, AVRO_V2, avro_event, expected_avro_row, produce_raw,
                           produce_serialized, typed_rows)

pytestmark = pytest.mark.spark


@pytest.fixture
def registry(broker):
    client = SchemaRegistryClient({"url": broker.schema_registry_url, "max.retries": 0})
    yield client
    client.close()


def _avro_serializer(registry, schema: str) -> AvroSerializer:
    return AvroSerializer(registry, schema, conf={"auto.register.schemas": True})


@pytest.fixture
def avro_topic(broker, registry):
    """``avro-events-*``: records 0-3 written with V1, 4-7 with V2 (subject ``<topic>-value`` has both)."""
    topic = broker.name("avro-events")
    create_topic(broker.bootstrap_servers, topic)
    v1, v2 = _avro_serializer(registry, AVRO_V1), _avro_serializer(registry, AVRO_V2)
    produce_serialized(broker.bootstrap_servers, topic, [(v1, avro_event(i, v2=False)) for i in range(4)]
                       + [(v2, avro_event(i, v2=True)) for i in range(4, 8)])
    return topic


def _typed(broker, topic: str, **extra) -> dict:
    return {"subscribe": topic, "valueFormat": "avro", "schema.registry.url": broker.schema_registry_url, **extra}


def test_batch_read_decodes_both_avro_versions_into_the_latest_reader_schema(spark, broker, registry, avro_topic):
    df = batch(spark, broker.bootstrap_servers, **_typed(broker, avro_topic))
    assert df.schema["value"].dataType.simpleString() == AVRO_SPARK_TYPE
    assert [f.name for f in df.schema.fields] == ["key", "value", "topic", "partition", "offset", "timestamp",
                                                  "timestampType", "valueSchemaId"]
    assert typed_rows(df) == [expected_avro_row(i, v2=i >= 4) for i in range(8)]
    v1_id = registry.get_version(f"{avro_topic}-value", 1).schema_id
    v2_id = registry.get_version(f"{avro_topic}-value", 2).schema_id
    ids = [r.valueSchemaId for r in df.orderBy("offset").select("valueSchemaId").collect()]
    assert ids == [v1_id] * 4 + [v2_id] * 4


def test_a_pinned_older_version_is_the_reader_schema_and_drops_the_new_field(spark, broker, avro_topic):
    df = batch(spark, broker.bootstrap_servers, **_typed(broker, avro_topic, valueSchemaVersion="1"))
    assert "source" not in df.schema["value"].dataType.fieldNames()
    rows = typed_rows(df)
    assert [r["id"] for r in rows] == list(range(8))
    assert rows[5] == {k: v for k, v in expected_avro_row(5, v2=True).items() if k != "source"}


def test_stream_read_gives_the_same_typed_rows(spark, broker, avro_topic):
    df = stream(spark, broker.bootstrap_servers, startingOffsets="earliest", **_typed(broker, avro_topic))
    seen = []

    def collect(batch_df, _batch_id):
        seen.extend(typed_rows(batch_df))

    query = (df.writeStream.foreachBatch(collect).trigger(availableNow=True)
             .option("checkpointLocation", tempfile.mkdtemp(prefix="pylog-ckpt-")).start())
    assert query.awaitTermination(120)
    assert query.exception() is None
    assert sorted(seen, key=lambda r: r["id"]) == [expected_avro_row(i, v2=i >= 4) for i in range(8)]


def test_inline_schema_reads_bare_avro_without_a_registry(spark, broker):
    topic = broker.name("bare-avro")
    import io

    import fastavro
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, topic)
    schema = fastavro.parse_schema(json.loads(AVRO_V2))
    payloads = []
    for i in range(3):
        out = io.BytesIO()
        fastavro.schemaless_writer(out, schema, avro_event(i, v2=True))
        payloads.append(out.getvalue())
    produce_raw(bootstrap, topic, payloads)
    df = batch(spark, bootstrap, subscribe=topic, valueFormat="avro", valueSchema=AVRO_V2)
    assert "valueSchemaId" not in df.columns
    assert typed_rows(df) == [expected_avro_row(i, v2=True) for i in range(3)]


@pytest.fixture
def dirty_topic(broker, registry):
    """Good V2 record, a record that is not framed, an unknown schema id, a truncated body, a good record:
    (topic, the good records' schema id)."""
    bootstrap, topic = broker.bootstrap_servers, broker.name("dirty-avro")
    create_topic(bootstrap, topic)
    good = _avro_serializer(registry, AVRO_V2)
    produce_serialized(bootstrap, topic, [(good, avro_event(1, v2=True))])
    schema_id = registry.get_latest_version(f"{topic}-value").schema_id
    produce_raw(bootstrap, topic, [b"plain text", b"\x00" + struct.pack(">I", 987654) + b"\x02",
                                   b"\x00" + struct.pack(">I", schema_id) + b"\x02"])
    produce_serialized(bootstrap, topic, [(good, avro_event(2, v2=True))])
    return topic, schema_id


def test_failfast_names_topic_partition_offset_and_schema_id(spark, broker, dirty_topic):
    topic, _ = dirty_topic
    df = batch(spark, broker.bootstrap_servers, subscribe=topic, valueFormat="avro",
               **{"schema.registry.url": broker.schema_registry_url})
    with pytest.raises(Exception) as failure:
        df.collect()
    assert f"Malformed value at topic {topic} partition 0 offset 1" in str(failure.value)
    unknown = batch(spark, broker.bootstrap_servers, subscribe=topic, valueFormat="avro",
                    startingOffsets=json.dumps({topic: {"0": 2}}),
                    **{"schema.registry.url": broker.schema_registry_url})
    with pytest.raises(Exception) as failure:
        unknown.collect()
    assert "offset 2 with schema id 987654" in str(failure.value)


def test_permissive_keeps_bad_records_as_null_with_their_bytes(spark, broker, dirty_topic):
    topic, schema_id = dirty_topic
    df = batch(spark, broker.bootstrap_servers, subscribe=topic, valueFormat="avro", mode="PERMISSIVE",
               **{"schema.registry.url": broker.schema_registry_url})
    assert df.columns[-2:] == ["valueSchemaId", "_corrupt_value"]
    rows = df.orderBy("offset").select("offset", "value.id", "valueSchemaId", "_corrupt_value").collect()
    assert [(r.offset, r.id, r.valueSchemaId, r._corrupt_value) for r in rows] == [
        (0, 1, schema_id, None),
        (1, None, None, b"plain text"),
        (2, None, 987654, b"\x00" + struct.pack(">I", 987654) + b"\x02"),
        (3, None, schema_id, b"\x00" + struct.pack(">I", schema_id) + b"\x02"),
        (4, 2, schema_id, None),
    ]


def test_string_format_and_bad_options_fail_before_the_query_starts(spark, broker, avro_topic):
    from connector.errors import PylogOptionError
    bootstrap = broker.bootstrap_servers
    text = batch(spark, bootstrap, subscribe=avro_topic, keyFormat="string")
    assert text.schema["key"].dataType.simpleString() == "string"
    with pytest.raises(Exception, match="Option 'valueFormat' must be one of binary, string, json, avro, protobuf"):
        batch(spark, bootstrap, subscribe=avro_topic, valueFormat="parquet")
    with pytest.raises(Exception, match="needs the option 'schema.registry.url' or an inline 'valueSchema'"):
        batch(spark, bootstrap, subscribe=avro_topic, valueFormat="avro")
    with pytest.raises(Exception, match=r"no-such-subject.*answered 404 \(error 40401\)"):
        batch(spark, bootstrap, subscribe=avro_topic, valueFormat="avro", valueSubject="no-such-subject",
              **{"schema.registry.url": broker.schema_registry_url})
    assert issubclass(PylogOptionError, ValueError)


def test_typed_key_and_string_value_side_by_side(spark, broker, registry):
    topic = broker.name("keyed-avro")
    from confluent_kafka import Producer
    from confluent_kafka.serialization import MessageField, SerializationContext
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, topic)
    key_schema = json.dumps({"type": "record", "name": "Key", "fields": [{"name": "tenant", "type": "string"},
                                                                        {"name": "n", "type": "int"}]})
    serialize = AvroSerializer(registry, key_schema)
    context = SerializationContext(topic, MessageField.KEY)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(3):
        producer.produce(topic, key=serialize({"tenant": f"t{i}", "n": i}, context), value=f"v{i}".encode())
    assert producer.flush(30) == 0
    df = batch(spark, bootstrap, subscribe=topic, keyFormat="avro", valueFormat="string",
               **{"schema.registry.url": broker.schema_registry_url})
    assert df.schema.simpleString().startswith("struct<key:struct<tenant:string,n:int>,value:string,")
    assert df.columns[-1] == "keySchemaId"
    assert [(r.key.tenant, r.key.n, r.value) for r in df.orderBy("offset").collect()] == [
        ("t0", 0, "v0"), ("t1", 1, "v1"), ("t2", 2, "v2")]
