"""format("pylog") beside Spark's own format("kafka") (spark-sql-kafka-0-10): the same query through both on the
same topics gives the same schema and the same rows, every column compared (issue 38, item 1).

Every test runs on broker_sim and on Apache Kafka (``broker``) with the shared session (``spark_kafka``). One
topic set per test serves many cases, and the rows are few: Spark on two shared cores is the cost here.
Differences that stay on purpose are listed in docs/migrating-from-spark-kafka.md, each pinned by a test here.
"""
from __future__ import annotations

import json
import tempfile

import pytest
from confluent_kafka import Producer
from kafka import KafkaAdminClient, TopicPartition
from spark_helpers import broker_sim_only, create_topic

pytestmark = pytest.mark.spark
FORMATS = ("kafka", "pylog")
BASE = 1_700_000_000_000   # record timestamps (2023): kept only with retention.ms=-1


# -- running one query through both formats -------------------------------------------------------------------

def plain(value):
    """A collected value as plain Python: Rows (the headers' structs) and lists become tuples, to compare and sort."""
    if isinstance(value, (list, tuple)):
        return tuple(plain(v) for v in value)
    return value


def source_rows(df) -> list[tuple]:
    """Every row of a source DataFrame, every column, sorted by (topic, partition, offset)."""
    return sorted((plain(row) for row in df.collect()), key=lambda row: (row[2], row[3], row[4]))


def _load(reader, bootstrap: str, options: dict):
    reader = reader.option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load()


def read_batch(spark, fmt: str, bootstrap: str, options: dict):
    return _load(spark.read.format(fmt), bootstrap, options)


def read_stream(spark, fmt: str, bootstrap: str, options: dict):
    return _load(spark.readStream.format(fmt), bootstrap, options)


def run_available_now(df, checkpoint: str | None = None, timeout_s: float = 120):
    """Run ``df`` with Trigger.AvailableNow into foreachBatch; (checkpoint, batches).

    ``batches``: (rows, numInputRows) of each micro-batch that read rows, in order. Batches without rows are
    left out: whether a side plans an empty batch is not something a user's output shows.
    """
    checkpoint = checkpoint or tempfile.mkdtemp(prefix="pylog-vs-ckpt-")
    collected: dict[int, list[tuple]] = {}

    def collect(batch_df, batch_id):
        collected[batch_id] = source_rows(batch_df)

    query = (df.writeStream.foreachBatch(collect).trigger(availableNow=True)
             .option("checkpointLocation", checkpoint).start())
    try:
        assert query.awaitTermination(timeout_s), "AvailableNow query did not finish"
    finally:
        query.stop()
    if query.exception() is not None:
        raise query.exception()
    counts = {p["batchId"]: p["numInputRows"] for p in query.recentProgress}
    return checkpoint, [(collected[b], counts.get(b)) for b in sorted(collected) if collected[b]]


def batch_difference(spark, bootstrap: str, options: dict) -> tuple[list[tuple], str | None]:
    """(format("kafka")'s rows, None) when the batch read ``options`` gives the same schema and rows through
    both formats, else (those rows, what differs first)."""
    kafka_df, pylog_df = (read_batch(spark, fmt, bootstrap, options) for fmt in FORMATS)
    if pylog_df.schema != kafka_df.schema:
        return [], f"{options}: schema {pylog_df.schema.simpleString()} != {kafka_df.schema.simpleString()}"
    kafka_rows, pylog_rows = source_rows(kafka_df), source_rows(pylog_df)
    if pylog_rows != kafka_rows:
        if len(pylog_rows) != len(kafka_rows):
            return kafka_rows, f"{options}: {len(pylog_rows)} rows != {len(kafka_rows)}"
        first = next(i for i, (p, k) in enumerate(zip(pylog_rows, kafka_rows)) if p != k)
        return kafka_rows, f"{options}: row {first}: pylog {pylog_rows[first]} != kafka {kafka_rows[first]}"
    return kafka_rows, None


def assert_same_batch(spark, bootstrap: str, options: dict) -> list[tuple]:
    """The batch read ``options`` gives the same schema and rows through both formats; returns the rows."""
    rows, difference = batch_difference(spark, bootstrap, options)
    assert difference is None, difference
    return rows


def produce(bootstrap: str, topic: str, records) -> None:
    """``records``: (partition, key, value, timestamp_ms, headers) with key and value each bytes or None."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    failures = []
    for partition, key, value, timestamp, headers in records:
        producer.produce(topic, value, key, partition=partition, timestamp=timestamp or 0, headers=headers or None,
                         on_delivery=lambda err, _msg: err is not None and failures.append(err))
        producer.poll(0)
    assert producer.flush(30) == 0 and not failures, failures


def sample(partition: int, start: int, count: int):
    """Records ``start``..: every third key null, every third value null (not both), headers on odd ones
    (one repeated, one null-valued), timestamps a second apart from BASE."""
    records = []
    for i in range(start, start + count):
        key = None if i % 3 == 0 else f"k{i}".encode()
        value = None if i % 3 == 1 else f"v{partition}-{i}".encode()
        headers = [("h", b"x"), ("h", f"{i}".encode()), ("n", None)] if i % 2 else None
        records.append((partition, key, value, BASE + 1000 * i, headers))
    return records


@pytest.fixture
def topics(broker):
    """Two topics of the same stem, ``a`` (2 partitions, 12 records each) and ``b`` (1 partition, 6)."""
    bootstrap = broker.bootstrap_servers
    a, b = broker.name("vs-a"), broker.name("vs-b")
    create_topic(bootstrap, a, partitions=2, config={"retention.ms": "-1"})
    create_topic(bootstrap, b, partitions=1, config={"retention.ms": "-1"})
    produce(bootstrap, a, sample(0, 0, 12) + sample(1, 0, 12))
    produce(bootstrap, b, sample(0, 0, 6))
    return a, b


# -- batch reads ----------------------------------------------------------------------------------------------

def test_batch_reads_give_the_same_rows_for_every_shared_source_option(spark_kafka, broker, topics):
    a, b = topics
    stem = a.rsplit("-", 2)[0]            # "vs": a pattern matching a and b of this test only
    suffix = a.rsplit("-", 1)[1]
    cases = [
        {"subscribe": a},
        {"subscribe": f"{a},{b}", "includeHeaders": "true"},
        {"subscribePattern": f"{stem}-[ab]-{suffix}"},
        {"assign": json.dumps({a: [1], b: [0]})},
        {"subscribe": a, "startingOffsets": json.dumps({a: {"0": 3, "1": -2}}),
         "endingOffsets": json.dumps({a: {"0": 7, "1": -1}})},
        {"assign": json.dumps({a: [0]}), "startingOffsets": "earliest", "endingOffsets": "latest"},
        {"subscribe": a, "startingOffsetsByTimestamp": json.dumps({a: {"0": BASE + 2500, "1": BASE}}),
         "endingOffsetsByTimestamp": json.dumps({a: {"0": BASE + 9000, "1": BASE + 4000}})},
        {"subscribe": f"{a},{b}", "startingTimestamp": BASE + 4000, "endingTimestamp": BASE + 10_000},
        # a start timestamp after every record: "latest" starts at the end (no rows), unlike the default error
        {"subscribe": a, "startingTimestamp": BASE + 60_000, "startingOffsetsByTimestampStrategy": "latest"},
        {"subscribe": f"{a},{b}", "minPartitions": 5, "includeHeaders": "true"},
    ]
    results = [batch_difference(spark_kafka, broker.bootstrap_servers, options) for options in cases]
    assert [difference for _, difference in results if difference] == []
    assert [len(rows) for rows, _ in results] == [24, 30, 30, 18, 16, 12, 10, 14, 0, 30]


def test_a_record_without_headers_reads_null_headers_as_in_spark(spark_kafka, broker, topics):
    """Spark's connector gives a record without headers a null headers column (KafkaRecordToRowConverter), not
    an empty array."""
    _, b = topics
    for fmt in FORMATS:
        rows = source_rows(read_batch(spark_kafka, fmt, broker.bootstrap_servers,
                                      {"subscribe": b, "includeHeaders": "true"}))
        assert [row[7] for row in rows[:2]] == [None, (("h", b"x"), ("h", b"1"), ("n", None))], fmt


def test_a_start_timestamp_after_every_record_fails_both_by_default(spark_kafka, broker, topics):
    a, _ = topics
    options = {"subscribe": a, "startingTimestamp": BASE + 60_000}
    errors = {}
    for fmt in FORMATS:
        with pytest.raises(Exception) as caught:
            read_batch(spark_kafka, fmt, broker.bootstrap_servers, options).collect()
        errors[fmt] = str(caught.value)
    assert "startingOffsetsByTimestampStrategy" in errors["kafka"] or "timestamp" in errors["kafka"].lower()
    assert "timestamp" in errors["pylog"].lower() and a in errors["pylog"], errors["pylog"]


# -- streaming ------------------------------------------------------------------------------------------------

def test_available_now_micro_batches_match_batch_by_batch(spark_kafka, broker, topics):
    """maxOffsetsPerTrigger splits the backlog into the same micro-batches (rows and numInputRows); a rerun on
    each side's checkpoint reads the same new records."""
    a, b = topics
    bootstrap = broker.bootstrap_servers
    options = {"subscribe": f"{a},{b}", "startingOffsets": "earliest", "maxOffsetsPerTrigger": 7,
               "includeHeaders": "true"}
    runs = {fmt: run_available_now(read_stream(spark_kafka, fmt, bootstrap, options)) for fmt in FORMATS}
    assert runs["pylog"][1] == runs["kafka"][1]
    assert [n for _, n in runs["kafka"][1]] == [5] * 6    # 7 prorated over 3 partitions: 12:12:6 -> 2+2+1

    produce(bootstrap, a, sample(0, 12, 3) + sample(1, 12, 2))
    again = {fmt: run_available_now(read_stream(spark_kafka, fmt, bootstrap, options), runs[fmt][0])[1]
             for fmt in FORMATS}
    assert again["pylog"] == again["kafka"]
    assert [n for _, n in again["kafka"]] == [5]


def test_stream_starting_positions_match(spark_kafka, broker, topics):
    """startingOffsets latest (then what arrives after the first run) / JSON with -2 and -1 / by timestamp."""
    a, b = topics
    bootstrap = broker.bootstrap_servers
    cases = [
        {"subscribe": a},                                             # latest by default
        {"subscribe": f"{a},{b}", "startingOffsets": json.dumps({a: {"0": 5, "1": -1}, b: {"0": -2}})},
        {"assign": json.dumps({a: [0, 1]}), "startingOffsetsByTimestamp": json.dumps({a: {"0": BASE + 8000,
                                                                                           "1": BASE}})},
        # no record of b is that late: b starts at its end, as startingOffsetsByTimestampStrategy=latest says
        {"subscribePattern": f"{a}|{b}", "startingTimestamp": BASE + 10_000,
         "startingOffsetsByTimestampStrategy": "latest"},
    ]
    runs = {}
    for index, options in enumerate(cases):
        for fmt in FORMATS:
            runs[index, fmt] = run_available_now(read_stream(spark_kafka, fmt, bootstrap, options))
        first = [rows for rows, _ in runs[index, "kafka"][1]]
        assert [rows for rows, _ in runs[index, "pylog"][1]] == first, options
    assert [len(rows) for rows, _ in runs[0, "kafka"][1]] == []        # latest: nothing yet
    produce(bootstrap, a, sample(0, 12, 2) + sample(1, 12, 1))
    # what arrives later, on the checkpoint "latest" started with (resuming the others: the availableNow test)
    rows = {fmt: [r for batch, _ in run_available_now(read_stream(spark_kafka, fmt, bootstrap, cases[0]),
                                                      runs[0, fmt][0])[1] for r in batch]
            for fmt in FORMATS}
    assert rows["pylog"] == rows["kafka"]
    assert [(r[3], r[4]) for r in rows["kafka"]] == [(0, 12), (0, 13), (1, 12)]


def test_min_offsets_per_trigger_waits_for_max_trigger_delay_alike(spark_kafka, broker, topics):
    """minOffsetsPerTrigger above what arrives: the first batch runs at once with the backlog (Spark's last
    trigger time starts at 0), the next waits for maxTriggerDelay, then reads what arrived; on both formats."""
    import time

    a, _ = topics
    bootstrap = broker.bootstrap_servers
    options = {"subscribe": a, "startingOffsets": "earliest", "minOffsetsPerTrigger": 100, "maxTriggerDelay": "6s"}
    seen, gaps = {}, {}
    for fmt in FORMATS:
        batches: list[tuple[float, list[tuple]]] = []
        query = (read_stream(spark_kafka, fmt, bootstrap, options).writeStream
                 .foreachBatch(lambda df, _id, into=batches: into.append((time.monotonic(), source_rows(df))))
                 .trigger(processingTime="500 milliseconds")
                 .option("checkpointLocation", tempfile.mkdtemp(prefix="pylog-vs-ckpt-")).start())
        try:
            deadline = time.monotonic() + 90
            while len([b for b in batches if b[1]]) < 2 and time.monotonic() < deadline \
                    and query.exception() is None:
                if len([b for b in batches if b[1]]) == 1 and not gaps.get(fmt):
                    gaps[fmt] = time.monotonic()
                    produce(bootstrap, a, sample(0, 12 + 3 * FORMATS.index(fmt), 3))
                time.sleep(0.1)
        finally:
            query.stop()
        assert query.exception() is None, query.exception()
        filled = [b for b in batches if b[1]]
        assert len(filled) == 2, f"{fmt}: {len(filled)} batches with rows"
        seen[fmt] = [[r[3:5] for r in rows] for _, rows in filled]
        gaps[fmt] = filled[1][0] - filled[0][0]
    # pylog's query runs second: its backlog holds the 3 records format("kafka")'s second batch read
    assert seen["kafka"] == [[(0, o) for o in range(12)] + [(1, o) for o in range(12)], [(0, o) for o in range(12, 15)]]
    assert seen["pylog"] == [[(0, o) for o in range(15)] + [(1, o) for o in range(12)], [(0, o) for o in range(15, 18)]]
    assert min(gaps.values()) >= 5, f"a batch with fewer than minOffsetsPerTrigger before maxTriggerDelay: {gaps}"


# -- failOnDataLoss -------------------------------------------------------------------------------------------

def _delete_records(bootstrap: str, topic: str, before: dict[int, int]) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.delete_records({TopicPartition(topic, p): offset for p, offset in before.items()})
    finally:
        admin.close()


def test_deleted_records_fail_both_or_are_skipped_by_both(spark_kafka, broker, topics):
    """After DeleteRecords: a stream resumed before the log start fails with failOnDataLoss=true and skips to
    the log start with false; a batch read from a JSON start before it likewise."""
    a, _ = topics
    bootstrap = broker.bootstrap_servers
    checkpoints = {}
    for loss in ("true", "false"):
        options = {"subscribe": a, "startingOffsets": "earliest", "failOnDataLoss": loss}
        for fmt in FORMATS:
            checkpoints[fmt, loss] = run_available_now(read_stream(spark_kafka, fmt, bootstrap, options))[0]
    produce(bootstrap, a, sample(0, 12, 6))
    _delete_records(bootstrap, a, {0: 15, 1: 8})

    resumed = {}
    for fmt in FORMATS:
        options = {"subscribe": a, "startingOffsets": "earliest", "failOnDataLoss": "false"}
        batches = run_available_now(read_stream(spark_kafka, fmt, bootstrap, options), checkpoints[fmt, "false"])[1]
        resumed[fmt] = sorted((r for rows, _ in batches for r in rows), key=lambda r: (r[2], r[3], r[4]))
    assert resumed["pylog"] == resumed["kafka"]
    assert [(r[3], r[4]) for r in resumed["kafka"]] == [(0, 15), (0, 16), (0, 17)]   # 12-14 lost

    errors = {}
    for fmt in FORMATS:
        options = {"subscribe": a, "startingOffsets": "earliest", "failOnDataLoss": "true"}
        with pytest.raises(Exception) as caught:
            run_available_now(read_stream(spark_kafka, fmt, bootstrap, options), checkpoints[fmt, "true"])
        errors[fmt] = str(caught.value)
    for fmt in FORMATS:
        assert "failOnDataLoss" in errors[fmt] or "data loss" in errors[fmt].lower(), (fmt, errors[fmt])

    start = json.dumps({a: {"0": 2, "1": -2}})
    lenient = assert_same_batch(spark_kafka, bootstrap, {"subscribe": a, "startingOffsets": start,
                                                         "failOnDataLoss": "false"})
    assert [(r[3], r[4]) for r in lenient] == [(0, o) for o in range(15, 18)] + [(1, o) for o in range(8, 12)]
    for fmt in FORMATS:
        with pytest.raises(Exception) as caught:
            read_batch(spark_kafka, fmt, bootstrap, {"subscribe": a, "startingOffsets": start}).collect()
        assert "lost" in str(caught.value).lower() or "failondataloss" in str(caught.value).lower(), (fmt, caught)


def _wait_compacted(bootstrap: str, topic: str, gone: int, timeout_s: float = 90) -> list[int]:
    """Poll the topic from its start until offset ``gone`` no longer reads (the cleaner ran); its offsets."""
    import time

    from kafka import KafkaConsumer
    deadline = time.monotonic() + timeout_s
    while True:
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=2000,
                                 enable_auto_commit=False)
        try:
            consumer.assign([TopicPartition(topic, 0)])
            consumer.seek_to_beginning()
            offsets = [record.offset for record in consumer]
        finally:
            consumer.close()
        if gone not in offsets:
            return offsets
        assert time.monotonic() < deadline, f"{topic} not compacted within {timeout_s}s: {offsets}"
        time.sleep(1)


def test_compacted_gaps_read_alike_with_fail_on_data_loss(spark_kafka, broker):
    """A compacted topic has offsets the cleaner removed: batch and stream (failOnDataLoss true and false) read
    the same surviving records through both formats."""
    import time

    bootstrap, topic = broker.bootstrap_servers, broker.name("vs-compacted")
    create_topic(bootstrap, topic, partitions=1, config={"cleanup.policy": "compact", "segment.ms": "100",
                                                         "min.cleanable.dirty.ratio": "0.01",
                                                         "min.compaction.lag.ms": "0"})
    for round_ in range(3):   # each round in a segment of its own: segments roll by age (segment.ms) on append
        keys = range(5) if round_ < 2 else range(5, 6)
        produce(bootstrap, topic, [(0, f"k{k}".encode(), f"v{round_}".encode(), None, None) for k in keys])
        time.sleep(0.3)
    produce(bootstrap, topic, [(0, b"last", b"x", None, None)])
    offsets = _wait_compacted(bootstrap, topic, gone=0)
    assert offsets[:6] == [5, 6, 7, 8, 9, 10], offsets
    for loss in ("true", "false"):
        options = {"subscribe": topic, "failOnDataLoss": loss}
        rows = assert_same_batch(spark_kafka, bootstrap, options)
        assert [r[4] for r in rows] == offsets, loss
        stream_options = {**options, "startingOffsets": "earliest", "maxOffsetsPerTrigger": 3}
        runs = {fmt: run_available_now(read_stream(spark_kafka, fmt, bootstrap, stream_options))[1]
                for fmt in FORMATS}
        assert runs["pylog"] == runs["kafka"], loss
        assert [r[4] for rows, _ in runs["kafka"] for r in rows] == offsets, loss


# -- writes ---------------------------------------------------------------------------------------------------

def _sink_frame(spark, topic_column: str):
    """20 keyed rows, 4 null-keyed ones, one null value, headers on some: key, value, topic, headers."""
    rows = []
    for i in range(24):
        key = f"key-{i}" if i < 20 else None
        value = None if i == 5 else f"value-{i}"
        headers = [("h", f"{i}".encode()), ("e", None)] if i % 4 == 0 else None
        rows.append((key, value, topic_column, headers))
    return spark.createDataFrame(rows, "key string, value string, topic string, "
                                       "headers array<struct<key: string, value: binary>>")


def _written(spark, bootstrap: str, topics: list[str]) -> dict[str, tuple[list[tuple], list[tuple]]]:
    """What each of ``topics`` holds, read at once with both formats (asserted equal): by topic, (keyed records
    as (key, value, partition, headers), null-keyed ones as (value, headers)), each sorted."""
    read = {fmt: source_rows(read_batch(spark, fmt, bootstrap, {"subscribe": ",".join(topics),
                                                               "includeHeaders": "true"}))
            for fmt in FORMATS}
    assert read["pylog"] == read["kafka"]
    return {topic: (sorted((r[0], r[1] or b"", r[3], r[7] or ()) for r in read["kafka"]
                           if r[2] == topic and r[0] is not None),
                    sorted((r[1] or b"", r[7] or ()) for r in read["kafka"] if r[2] == topic and r[0] is None))
            for topic in topics}


def test_writes_land_alike_and_read_back_alike(spark_kafka, broker):
    """The same DataFrame written with each format (topic column; then the topic option over a topic column;
    then a partition column) lands as the same records: keys on the same partitions (Kafka's murmur2
    partitioner), null keys and values, headers; each topic read back with both formats gives the same rows."""
    from pyspark.sql import functions as F

    bootstrap = broker.bootstrap_servers
    decoy = broker.name("vs-decoy")
    create_topic(bootstrap, decoy, partitions=1)
    targets = {}
    for fmt in FORMATS:
        for case in ("column", "option", "partition"):
            targets[fmt, case] = broker.name(f"vs-w-{case}-{fmt}")
            create_topic(bootstrap, targets[fmt, case], partitions=3)
    for fmt in FORMATS:
        _sink_frame(spark_kafka, targets[fmt, "column"]).write.format(fmt) \
            .option("kafka.bootstrap.servers", bootstrap).mode("append").save()
        _sink_frame(spark_kafka, decoy).write.format(fmt).option("kafka.bootstrap.servers", bootstrap) \
            .option("topic", targets[fmt, "option"]).mode("append").save()
        partitioned = _sink_frame(spark_kafka, targets[fmt, "partition"]).withColumn(
            "partition", F.expr("CAST(length(coalesce(value, '')) % 3 AS INT)"))
        (partitioned
         .write.format(fmt).option("kafka.bootstrap.servers", bootstrap).mode("append").save())
    written = _written(spark_kafka, bootstrap, [decoy, *targets.values()])
    for case in ("column", "option", "partition"):
        kafka_keyed, kafka_unkeyed = written[targets["kafka", case]]
        pylog_keyed, pylog_unkeyed = written[targets["pylog", case]]
        assert pylog_keyed == kafka_keyed, case
        assert pylog_unkeyed == kafka_unkeyed, case
        assert len(kafka_keyed) == 20 and len(kafka_unkeyed) == 4, case
        assert len({partition for _, _, partition, _ in kafka_keyed}) == 3, case
    assert written[decoy] == ([], []), "the topic option wins over the topic column"


# -- differences that stay (docs/migrating-from-spark-kafka.md) -----------------------------------------------

def _produce_committed_and_aborted(bootstrap: str, topic: str) -> None:
    """c0 c1 committed, a0 a1 aborted, c2 committed, on partition 0."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-txn"})
    producer.init_transactions(30)
    for values, commit in (([b"c0", b"c1"], True), ([b"a0", b"a1"], False), ([b"c2"], True)):
        producer.begin_transaction()
        for value in values:
            producer.produce(topic, value, partition=0)
        producer.flush(30)
        (producer.commit_transaction if commit else producer.abort_transaction)(30)


def test_pylog_reads_read_committed_by_default_and_spark_read_uncommitted(spark_kafka, broker):
    bootstrap, topic = broker.bootstrap_servers, broker.name("vs-txn")
    create_topic(bootstrap, topic, partitions=1)
    _produce_committed_and_aborted(bootstrap, topic)

    def values(fmt, **options):
        return [r[1] for r in source_rows(read_batch(spark_kafka, fmt, bootstrap, {"subscribe": topic, **options}))]

    assert values("kafka") == [b"c0", b"c1", b"a0", b"a1", b"c2"]
    assert values("pylog") == [b"c0", b"c1", b"c2"]
    for level, expected in (("read_committed", [b"c0", b"c1", b"c2"]),
                            ("read_uncommitted", [b"c0", b"c1", b"a0", b"a1", b"c2"])):
        assert values("kafka", **{"kafka.isolation.level": level}) == expected
        assert values("pylog", **{"kafka.isolation.level": level}) == expected


def _end_offsets(bootstrap: str, topic: str) -> int:
    from kafka import KafkaConsumer
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        return sum(consumer.end_offsets([TopicPartition(topic, 0)]).values())
    finally:
        consumer.close()


def test_pylog_writes_in_transactions_by_default_and_spark_does_not(spark_kafka, broker):
    """The same 3 rows: format("kafka") appends 3 records; format("pylog") (exactly_once) 3 records and a commit
    marker; deliveryGuarantee=at_least_once writes as Spark does. Spark needs no save mode; pylog needs Append."""
    bootstrap = broker.bootstrap_servers
    df = spark_kafka.createDataFrame([("a",), ("b",), ("c",)], "value string").coalesce(1)   # one task
    ends = {}
    for name, fmt, options in (("kafka", "kafka", {}), ("exactly_once", "pylog", {}),
                               ("at_least_once", "pylog", {"deliveryGuarantee": "at_least_once"})):
        topic = broker.name(f"vs-guarantee-{name.replace('_', '-')}")
        create_topic(bootstrap, topic, partitions=1)
        writer = df.write.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
        for key, value in options.items():
            writer = writer.option(key, value)
        if fmt == "kafka":
            writer.save()                  # Spark's default save mode, ErrorIfExists, appends to a topic
        else:
            with pytest.raises(Exception, match="UNSUPPORTED_DATA_SOURCE_SAVE_MODE"):
                writer.save()              # Spark refuses it for a Python data source
            writer.mode("append").save()
        ends[name] = _end_offsets(bootstrap, topic)
        assert sorted(r[1] for r in source_rows(read_batch(spark_kafka, "kafka", bootstrap, {"subscribe": topic}))) \
            == [b"a", b"b", b"c"], name
    assert ends == {"kafka": 3, "exactly_once": 4, "at_least_once": 3}


def _committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    """The group's committed offsets of ``topic``'s partitions 0 and 1 (OffsetFetch; the group is not joined)."""
    from kafka import KafkaConsumer
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        committed = {p: consumer.committed(TopicPartition(topic, p)) for p in (0, 1)}
    finally:
        consumer.close()
    return {p: offset for p, offset in committed.items() if offset is not None}


def test_pylog_commits_a_stream_s_progress_to_its_group_and_spark_does_not(spark_kafka, broker, topics):
    a, _ = topics
    bootstrap = broker.bootstrap_servers
    groups = {fmt: broker.name(f"vs-group-{fmt}") for fmt in FORMATS}
    for fmt in FORMATS:
        group_option = {"kafka": "kafka.group.id", "pylog": "groupId"}[fmt]
        run_available_now(read_stream(spark_kafka, fmt, bootstrap, {"subscribe": a, "startingOffsets": "earliest",
                                                                   group_option: groups[fmt]}))
    assert _committed(bootstrap, groups["kafka"], a) == {}
    assert _committed(bootstrap, groups["pylog"], a) == {0: 12, 1: 12}


# -- the same mistakes, side by side --------------------------------------------------------------------------

def _failure(action) -> str:
    with pytest.raises(Exception) as caught:
        action()
    return str(caught.value)


# Spark's clients wait default.api.timeout.ms (60 s) for an unreachable broker; both sides get 3 s here.
_UNREACHABLE = {"kafka.bootstrap.servers": "127.0.0.1:1", "kafka.default.api.timeout.ms": "3000",
                "kafka.request.timeout.ms": "2000", "fetchOffset.numRetries": "1", "bootstrapTimeoutMs": "3000"}


@broker_sim_only    # no broker answers any of these
def test_the_same_mistakes_fail_both_and_pylog_names_the_option_before_the_query_starts(spark_kafka, broker):
    bootstrap = broker.bootstrap_servers

    def load(fmt, stream=False, **options):
        reader = (spark_kafka.readStream if stream else spark_kafka.read).format(fmt)
        for key, value in options.items():
            reader = reader.option(key, value)
        return reader.load()

    for fmt in FORMATS:   # refused at load(), before any query: the same words from both
        message = _failure(lambda: load(fmt, **{"kafka.bootstrap.servers": bootstrap, "subscribe": "t",
                                                "startingOffsets": "bogus"}))
        assert "got bogus" in message, (fmt, message)
        message = _failure(lambda: load(fmt, **{"kafka.bootstrap.servers": bootstrap}))
        assert "One of the following options must be specified for Kafka source" in message, (fmt, message)
        message = _failure(lambda: load(fmt, subscribe="t").collect())
        assert "Option 'kafka.bootstrap.servers' must be specified for configuring Kafka consumer" in message, fmt
    assert "Option 'startingOffsets' must be one of earliest, latest" in _failure(
        lambda: load("pylog", **{"kafka.bootstrap.servers": bootstrap, "subscribe": "t", "startingOffsets": "bogus"}))
    assert "Option 'kafka.bootstrap.servers' must be specified" in _failure(lambda: load("pylog", subscribe="t"))

    # maxOffsetsPerTrigger=-1: Spark's connector takes it and its query fails later ("Some data may have been
    # lost"); pylog refuses it at load(), naming the option and the value
    load("kafka", stream=True, **{"kafka.bootstrap.servers": bootstrap, "subscribe": "t", "maxOffsetsPerTrigger": "-1"})
    assert "Option 'maxOffsetsPerTrigger' must be a positive integer, got '-1'" in _failure(
        lambda: load("pylog", stream=True, **{"kafka.bootstrap.servers": bootstrap, "subscribe": "t",
                                              "maxOffsetsPerTrigger": "-1"}))

    unreachable = {fmt: _failure(lambda: load(fmt, subscribe="t", **_UNREACHABLE).collect()) for fmt in FORMATS}
    assert "Timed out waiting for a node assignment" in unreachable["kafka"]
    assert "Cannot connect to kafka.bootstrap.servers=127.0.0.1:1 within bootstrapTimeoutMs=3000" in \
        unreachable["pylog"] and "Connection refused" in unreachable["pylog"]

    df = spark_kafka.createDataFrame([("k", "v")], "key string, value string")
    no_topic = {fmt: _failure(lambda: df.write.format(fmt).option("kafka.bootstrap.servers", bootstrap)
                              .mode("append").save()) for fmt in FORMATS}
    for fmt in FORMATS:
        assert "topic option required when no 'topic' attribute is present" in no_topic[fmt], fmt
    writes = {}
    for fmt in FORMATS:
        writer = df.write.format(fmt).mode("append").option("topic", "t")
        for key, value in {**_UNREACHABLE, "kafka.max.block.ms": "3000", "kafka.delivery.timeout.ms": "3000"}.items():
            writer = writer.option(key, value)
        writes[fmt] = _failure(writer.save)
    assert "Topic t not present in metadata after 3000 ms" in writes["kafka"]
    assert "Cannot connect to kafka.bootstrap.servers=127.0.0.1:1 within bootstrapTimeoutMs=3000" in writes["pylog"]


def test_an_unknown_topic_fails_both_before_reading(spark_kafka, broker):
    """subscribe names a topic that does not exist: Spark's connector fails (its admin client's
    UnknownTopicOrPartitionException, batch and stream); pylog must fail too, naming the topic, not read 0 rows."""
    missing = broker.name("vs-missing")
    for fmt in FORMATS:
        message = _failure(lambda: read_batch(spark_kafka, fmt, broker.bootstrap_servers,
                                              {"subscribe": missing}).collect())
        if fmt == "kafka":
            assert "UnknownTopicOrPartitionException" in message
        else:
            assert missing in message and "does not exist" in message, message


# Spark's source option keys (KafkaSourceProvider's *_OPTION_KEY and friends, Spark 4.2), as its docs spell them.
SPARK_SOURCE_OPTIONS = (
    "assign", "subscribe", "subscribePattern", "startingOffsets", "endingOffsets", "startingOffsetsByTimestamp",
    "endingOffsetsByTimestamp", "startingTimestamp", "endingTimestamp", "startingOffsetsByTimestampStrategy",
    "failOnDataLoss", "minPartitions", "maxRecordsPerPartition", "maxOffsetsPerTrigger", "minOffsetsPerTrigger",
    "maxTriggerDelay", "fetchOffset.numRetries", "fetchOffset.retryIntervalMs", "kafkaConsumer.pollTimeoutMs",
    "groupIdPrefix", "includeHeaders",
)
# The options only pylog has, as docs/migrating-from-spark-kafka.md lists them.
PYLOG_ONLY_SOURCE_OPTIONS = ("groupId", "commitOffsetsToGroup", "groupFallback", "bootstrapTimeoutMs")
PYLOG_ONLY_SINK_OPTIONS = ("deliveryGuarantee", "sinkId", "transactionTimeoutMs", "sinkLogTopic", "bootstrapTimeoutMs")


def test_every_spark_option_is_a_pylog_option_and_the_pylog_only_ones_are_the_documented_ones():
    from connector.options import SINK_OPTION_NAMES, SOURCE_OPTION_NAMES
    from connector.typed.spec import TYPED_SINK_OPTION_NAMES, TYPED_SOURCE_OPTION_NAMES

    assert [name for name in SPARK_SOURCE_OPTIONS if name not in SOURCE_OPTION_NAMES] == []
    extra = [n for n in SOURCE_OPTION_NAMES if n not in SPARK_SOURCE_OPTIONS and n not in TYPED_SOURCE_OPTION_NAMES]
    assert extra == list(PYLOG_ONLY_SOURCE_OPTIONS)
    assert [n for n in SINK_OPTION_NAMES if n != "topic" and n not in TYPED_SINK_OPTION_NAMES] \
        == list(PYLOG_ONLY_SINK_OPTIONS)


@pytest.mark.parametrize("option, value", [("kafka.acks", "1"), ("kafka.transactional.id", "t"),
                                           ("kafka.enable.idempotence", "false")])
def test_producer_settings_spark_passes_on_are_refused_by_pylog_naming_them(option, value):
    from connector.options import PylogOptionError, parse_sink_options

    with pytest.raises(PylogOptionError, match=option.removeprefix("kafka.")):
        parse_sink_options({"kafka.bootstrap.servers": "127.0.0.1:9092", option: value})


def test_a_continuous_trigger_is_refused_for_pylog(spark_kafka, broker, topics):
    """Spark's connector runs in continuous processing; Spark runs Python data sources in micro-batches only."""
    a, _ = topics
    df = read_stream(spark_kafka, "pylog", broker.bootstrap_servers, {"subscribe": a})
    writer = (df.writeStream.format("memory").queryName("pylog_continuous").trigger(continuous="1 second")
              .option("checkpointLocation", tempfile.mkdtemp(prefix="pylog-vs-ckpt-")))
    try:
        query = writer.start()
    except Exception as refused:  # noqa: BLE001 - Spark's own analysis error
        message = str(refused)
    else:
        try:
            query.awaitTermination(30)
            message = str(query.exception())
        finally:
            query.stop()
    assert "continuous" in message.lower(), message
