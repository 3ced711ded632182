"""The pylog sink end to end: batch and streaming writes, read back read_committed, on broker_sim and on
Apache Kafka (``broker``)."""
from __future__ import annotations

import tempfile
import time

import pytest
from kafka.partitioner.default import murmur2
from pyspark.sql.types import ArrayType, BinaryType, StringType, StructField, StructType

from sink_helpers import read_topic, values_of
from spark_helpers import create_topic, produce, stream

pytestmark = pytest.mark.spark

HEADERS = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))


def write_batch(df, bootstrap: str, **options):
    writer = df.write.format("pylog").mode("append").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        writer = writer.option(key, str(value))
    writer.save()


def test_batch_write_keys_values_headers_exactly_once(spark, broker):
    topic = broker.name("out")
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, topic, partitions=3)
    rows = [(f"user-{i % 17}", f"event-{i}".encode(), [(f"h{i % 2}", f"{i}".encode())]) for i in range(300)]
    rows.append((None, b"no key", []))
    schema = StructType([StructField("key", StringType()), StructField("value", BinaryType()),
                         StructField("headers", HEADERS)])
    write_batch(spark.createDataFrame(rows, schema).repartition(2), bootstrap, topic=topic)

    records = read_topic(bootstrap, topic)
    assert sorted(((r[1], r[2], [(k, v) for k, v in r[3]]) for r in records), key=repr) == \
        sorted((((k.encode() if k else None), v, h) for k, v, h in rows), key=repr)
    for partition, key, _, _ in records:
        if key is not None:   # where the Java client's default partitioner puts the key
            assert partition == (murmur2(key) & 0x7FFFFFFF) % 3
    # committed: read_uncommitted sees the same records, and nothing is left open
    assert len(read_topic(bootstrap, topic, isolation="read_uncommitted")) == len(rows)


def test_keyed_records_land_where_kafka_python_producer_puts_them(spark, broker):
    java_like = broker.name("java-like")
    reference_topic = broker.name("reference")
    from kafka import KafkaProducer
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, java_like, partitions=7)
    create_topic(bootstrap, reference_topic, partitions=7)
    keys = [f"customer-{i}" for i in range(200)] + ["", "21", "foobar", "a-little-bit-long-string"]
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for key in keys:
        producer.send(reference_topic, key=key.encode(), value=b"x")
    producer.flush()
    producer.close()
    df = spark.createDataFrame([(k, "x") for k in keys], "key string, value string")
    write_batch(df, bootstrap, topic=java_like, deliveryGuarantee="at_least_once")
    placed = {r[1]: r[0] for r in read_topic(bootstrap, java_like)}
    reference = {r[1]: r[0] for r in read_topic(bootstrap, reference_topic)}
    assert placed == reference


def test_topic_column_explicit_partitions_and_topic_option_override(spark, broker):
    left = broker.name("left")
    right = broker.name("right")
    forced = broker.name("forced")
    bootstrap = broker.bootstrap_servers
    for topic in (left, right, forced):
        create_topic(bootstrap, topic, partitions=4)
    rows = [(left if i % 2 else right, i % 4 if i % 3 else None, f"v{i}") for i in range(60)]
    df = spark.createDataFrame(rows, "topic string, partition int, value string")
    write_batch(df, bootstrap)
    for topic in (left, right):
        got = read_topic(bootstrap, topic)
        expected = [r for r in rows if r[0] == topic]
        assert values_of(got) == sorted(r[2].encode() for r in expected)
        explicit = {r[2].encode(): r[1] for r in expected if r[1] is not None}
        assert all(p == explicit[v] for p, _, v, _ in got if v in explicit)

    write_batch(df, bootstrap, topic=forced)   # the option wins over the column
    assert len(read_topic(bootstrap, forced)) == 60


def test_stream_pylog_to_pylog_exactly_once_and_restart(spark, broker):
    events = broker.name("events")
    clean = broker.name("clean")
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, events, partitions=2)
    create_topic(bootstrap, clean, partitions=3)
    produce(bootstrap, events, [(i % 2, f"k{i}".encode(), f"{i}".encode()) for i in range(500)])
    checkpoint = tempfile.mkdtemp(prefix="pylog-ckpt-")

    def run():
        source = stream(spark, bootstrap, subscribe=events, startingOffsets="earliest", maxOffsetsPerTrigger=120)
        query = (source.selectExpr("key", "concat('seen-', CAST(value AS STRING)) AS value")
                 .writeStream.format("pylog").option("kafka.bootstrap.servers", bootstrap)
                 .option("topic", clean).option("checkpointLocation", checkpoint).start())
        try:
            query.processAllAvailable()
        finally:
            query.stop()
        return query

    query = run()
    assert len(query.recentProgress) >= 4
    produce(bootstrap, events, [(i % 2, f"k{i}".encode(), f"{i}".encode()) for i in range(500, 700)])
    run()   # restarts from the checkpoint: the new records only
    assert values_of(read_topic(bootstrap, clean)) == sorted(f"seen-{i}".encode() for i in range(700))
    assert len(read_topic(bootstrap, clean, isolation="read_uncommitted")) == 700


def test_stream_at_least_once_from_rate_source(spark, broker):
    topic = broker.name("alo")
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, topic, partitions=2)
    source = spark.readStream.format("rate").option("rowsPerSecond", 200).option("numPartitions", 2).load()
    query = (source.selectExpr("CAST(value AS STRING) AS key", "CAST(value AS STRING) AS value")
             .writeStream.format("pylog").option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
             .option("deliveryGuarantee", "at_least_once")
             .option("checkpointLocation", tempfile.mkdtemp(prefix="pylog-ckpt-")).start())
    deadline = time.monotonic() + 120
    try:
        while sum(p["numInputRows"] for p in query.recentProgress) < 300:
            assert query.exception() is None, query.exception()
            assert time.monotonic() < deadline, f"300 rows not written in 120 s: {query.lastProgress}"
            query.awaitTermination(0.5)
    finally:
        query.stop()  # possibly in the middle of a batch: its rows may be written or not
    written = sum(p["numInputRows"] for p in query.recentProgress)
    values = [int(v) for v in values_of(read_topic(bootstrap, topic))]
    # the rate source numbers its rows 0, 1, 2, ...: every row of a completed batch is there, once (no faults,
    # so no retries); of the batch the stop interrupted, any task's rows may follow (one task of two can have
    # written its rows, the other not: the rate source splits a batch's rows between partitions by value)
    assert len(values) == len(set(values)), "a row was written twice without a retry"
    missing = sorted(set(range(written)) - set(values))
    assert not missing, f"rows of completed batches missing: {missing[:10]}"
    assert len(values) >= written, f"{written} rows in completed batches, {len(values)} written"


BAD_SCHEMAS = [
    ("key string", {"topic": "t"}, "Required attribute 'value' not found"),
    ("value int", {"topic": "t"}, "value attribute type must be a string or binary"),
    ("key int, value string", {"topic": "t"}, "key attribute type must be a string or binary"),
    ("value string", {}, "topic option required when no 'topic' attribute is present"),
    ("topic int, value string", {}, "topic attribute type must be a string"),
    ("value string, partition long", {"topic": "t"}, "partition attribute type must be an int"),
    ("value string, headers array<string>", {"topic": "t"}, "headers attribute type must be a"),
    ("value string", {"topic": "t", "deliveryGuarantee": "twice"},
     "Option 'deliveryGuarantee' must be one of exactly_once, at_least_once"),
    ("value string", {"topic": "t", "kafka.acks": "1"}, "Option 'kafka.acks' must be all"),
]


@pytest.mark.parametrize("ddl,options,message", BAD_SCHEMAS, ids=[m[:30] for _, _, m in BAD_SCHEMAS])
def test_bad_schema_or_option_fails_the_batch_write_naming_it(spark, ddl, options, message):
    df = spark.createDataFrame([], ddl)
    with pytest.raises(Exception, match=message.replace("(", r"\(").replace(")", r"\)").replace("'", ".")):
        write_batch(df, "127.0.0.1:1", **options)


def test_bad_schema_fails_the_stream_before_its_first_batch(spark, pylog_broker):
    bootstrap = pylog_broker.bootstrap_servers
    source = spark.readStream.format("rate").option("rowsPerSecond", 10).load()
    query = (source.selectExpr("CAST(value AS STRING) AS value").writeStream.format("pylog")
             .option("kafka.bootstrap.servers", bootstrap)
             .option("checkpointLocation", tempfile.mkdtemp(prefix="pylog-ckpt-")).start())
    with pytest.raises(Exception, match="topic option required when no 'topic' attribute is present"):
        query.awaitTermination(60)
    assert not query.recentProgress
