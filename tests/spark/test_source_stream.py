"""Streaming reads with format("pylog") into the memory sink, on broker_sim and on Apache Kafka (``broker``)."""
from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import pytest
from kafka import KafkaAdminClient
from kafka.admin import NewPartitions
from kafka.structs import TopicPartition

from connector.source.offsets import group_of, without_group
from spark_helpers import (
    checkpoint_source_offsets,
    create_topic,
    numbered,
    produce,
    rows_of,
    run_available_now,
    source_progress,
    stream,
    to_memory,
)

pytestmark = pytest.mark.spark
# for records stamped in 2023: Kafka's first retention pass (retention.ms 7 days) would delete them
KEEP_FOREVER = {"retention.ms": "-1"}


def test_stream_rows_match_the_records_exactly(spark, broker):
    topic = broker.name("exact")
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, topic, partitions=2, config=KEEP_FOREVER)
    base = 1_700_000_000_000
    records = [(i % 2, f"k{i}".encode(), f"value-{i}".encode(), base + i, [("h", f"{i}".encode())])
               for i in range(40)] + [(0, None, b"no key", base + 99, []), (1, b"tombstone", None, base + 100, [])]
    produce(bootstrap, topic, records)

    query, table = to_memory(stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest",
                                    includeHeaders="true"))
    try:
        query.processAllAvailable()
    finally:
        query.stop()

    rows = spark.sql(f"SELECT *, unix_millis(timestamp) AS ms FROM {table} ORDER BY partition, offset").collect()
    expected = []
    for partition in (0, 1):
        mine = [r for r in records if r[0] == partition]
        for offset, (_, key, value, timestamp, headers) in enumerate(mine):
            expected.append((key, value, topic, partition, offset, timestamp, 0, headers or None))
    # a record without headers reads headers null, as in Spark's connector
    got = [(r.key, r.value, r.topic, r.partition, r.offset, r.ms, r.timestampType,
            None if r.headers is None else [(h.key, h.value) for h in r.headers]) for r in rows]
    assert got == expected
    assert source_progress(query, "latestOffset") == {topic: {"0": 21, "1": 21}}


def test_restart_from_checkpoint_loses_and_duplicates_nothing(spark, broker):
    topic = broker.name("restart")
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, topic, partitions=2)
    produce(bootstrap, topic, numbered(0, 0, 30) + numbered(1, 0, 20))
    checkpoint = tempfile.mkdtemp(prefix="pylog-ckpt-")

    _, first = run_available_now(stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest"),
                                 checkpoint)
    produce(bootstrap, topic, numbered(0, 30, 15) + numbered(1, 20, 25))
    _, second = run_available_now(stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest"),
                                  checkpoint)

    assert len(first) == 50
    assert sorted((p, o) for p, o, _, _ in first + second) == [(0, o) for o in range(45)] + [(1, o) for o in range(45)]
    assert sorted(first + second) == sorted(set(first + second))
    _assert_checkpoint_offsets_match_the_schema(checkpoint, {topic: {"0": 45, "1": 45}})


def _assert_checkpoint_offsets_match_the_schema(checkpoint: str, expected_last: dict) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((Path(__file__).parents[2] / "connector" / "schemas" / "source-offsets.json").read_text())
    offsets = checkpoint_source_offsets(checkpoint)
    for offset in offsets:
        jsonschema.validate(offset, schema)
    # every offset carries the query's own default consumer group (connector.source.readers), the same across restarts
    groups = {group_of(offset) for offset in offsets}
    assert len(groups) == 1 and groups.pop().startswith("pylog-")
    assert without_group(offsets[-1]) == expected_last


def test_max_offsets_per_trigger_caps_every_batch(spark, broker):
    topic = broker.name("capped")
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, topic, partitions=2)
    produce(bootstrap, topic, numbered(0, 0, 70) + numbered(1, 0, 30))

    query, rows = run_available_now(stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest",
                                           maxOffsetsPerTrigger=25))

    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    # Spark's rateLimit: 70 and 30 of backlog share 25 as floor(17.5) + floor(7.5) = 24 per batch.
    assert sizes == [24, 24, 24, 24, 4]
    assert len(rows) == 100


def test_available_now_stops_at_the_snapshot_taken_at_start(spark, broker):
    topic = broker.name("snapshot")
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, topic, partitions=1)
    produce(bootstrap, topic, numbered(0, 0, 30))
    produced_late = []

    def produce_more_while_running(batch_df, batch_id):
        batch_df.count()
        if not produced_late:
            produce(bootstrap, topic, numbered(0, 30, 20, prefix="late"))
            produced_late.append(batch_id)

    query = (stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger=10)
             .writeStream.foreachBatch(produce_more_while_running).trigger(availableNow=True)
             .option("checkpointLocation", tempfile.mkdtemp(prefix="pylog-ckpt-")).start())
    assert query.awaitTermination(120)
    assert produced_late, "the foreachBatch function never ran"
    assert sum(p["numInputRows"] for p in query.recentProgress) == 30
    assert source_progress(query, "endOffset") == {topic: {"0": 30}}


def test_new_partition_is_read_from_its_earliest_offset(spark, broker):
    topic = broker.name("growing")
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, topic, partitions=1)
    produce(bootstrap, topic, numbered(0, 0, 5))
    query, table = to_memory(stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest"))
    try:
        query.processAllAvailable()
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            admin.create_partitions({topic: NewPartitions(total_count=2)})
        finally:
            admin.close()
        produce(bootstrap, topic, numbered(1, 0, 7) + numbered(0, 5, 2))
        query.processAllAvailable()
    finally:
        query.stop()
    got = [(p, o) for p, o, _, _ in rows_of(spark, table)]
    assert got == [(0, o) for o in range(7)] + [(1, o) for o in range(7)]


def test_subscribe_pattern_picks_up_a_new_topic(spark, broker):
    prefix = broker.name("pat")
    pat_a, pat_b, other = f"{prefix}-a", f"{prefix}-b", broker.name("other")
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, pat_a, partitions=1)
    create_topic(bootstrap, other, partitions=1)
    produce(bootstrap, pat_a, numbered(0, 0, 3))
    produce(bootstrap, other, numbered(0, 0, 3))
    query, table = to_memory(stream(spark, bootstrap, subscribePattern=f"{prefix}-.*", startingOffsets="earliest"))
    try:
        query.processAllAvailable()
        create_topic(bootstrap, pat_b, partitions=1)
        produce(bootstrap, pat_b, numbered(0, 0, 4))
        query.processAllAvailable()
    finally:
        query.stop()
    topics = [r.topic for r in spark.sql(f"SELECT topic FROM {table} ORDER BY topic, offset").collect()]
    assert topics == [pat_a] * 3 + [pat_b] * 4


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_deleted_records_fail_the_query_or_are_skipped(spark, broker, fail_on_data_loss):
    bootstrap = broker.bootstrap_servers
    topic = broker.name(f"lossy-{fail_on_data_loss}".lower())
    create_topic(bootstrap, topic, partitions=1)
    produce(bootstrap, topic, numbered(0, 0, 10))
    checkpoint = tempfile.mkdtemp(prefix="pylog-ckpt-")
    options = dict(subscribe=topic, startingOffsets="earliest", failOnDataLoss=str(fail_on_data_loss).lower())
    run_available_now(stream(spark, bootstrap, **options), checkpoint)

    produce(bootstrap, topic, numbered(0, 10, 10))
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.delete_records({TopicPartition(topic, 0): 15})
    finally:
        admin.close()

    if fail_on_data_loss:
        with pytest.raises(Exception) as failure:
            run_available_now(stream(spark, bootstrap, **options), checkpoint)
        message = str(failure.value)
        assert f"Cannot fetch offsets 10 until 15 of {topic}-0" in message
        assert "the earliest available offset is 15" in message
        assert 'failOnDataLoss" to "false"' in message
    else:
        _, rows = run_available_now(stream(spark, bootstrap, **options), checkpoint)
        assert [o for _, o, _, _ in rows] == list(range(15, 20))


def test_starting_timestamp_starts_at_the_first_record_at_or_after_it(spark, broker):
    topic = broker.name("timed")
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, topic, partitions=2, config=KEEP_FOREVER)
    base = 1_700_000_000_000
    produce(bootstrap, topic, [(p, b"k", f"{p}-{i}".encode(), base + 1000 * i) for p in (0, 1) for i in range(10)])
    _, rows = run_available_now(stream(spark, bootstrap, subscribe=topic, startingTimestamp=base + 6500))
    assert [(p, o) for p, o, _, _ in rows] == [(0, 7), (0, 8), (0, 9), (1, 7), (1, 8), (1, 9)]


def test_group_offsets_follow_the_last_committed_batch(spark, broker):
    topic = broker.name("grouped")
    group = broker.name("lag-watch")
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, topic, partitions=2)
    produce(bootstrap, topic, numbered(0, 0, 12) + numbered(1, 0, 8))
    query, _ = to_memory(stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest",
                                groupId=group, maxOffsetsPerTrigger=7))
    try:
        query.processAllAvailable()
        end = source_progress(query, "endOffset")
        committed = _wait_for_group_offsets(bootstrap, group, {(topic, 0): 12, (topic, 1): 8})
    finally:
        query.stop()
    assert end == {topic: {"0": 12, "1": 8}}
    assert committed == {(topic, 0): 12, (topic, 1): 8}


def test_starting_offsets_group_resumes_from_the_groups_commits(spark, broker):
    topic = broker.name("resume")
    group = broker.name("resumers")
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, topic, partitions=1)
    produce(bootstrap, topic, numbered(0, 0, 10))
    run_available_now(stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest", groupId=group))
    _wait_for_group_offsets(bootstrap, group, {(topic, 0): 10})
    produce(bootstrap, topic, numbered(0, 10, 5))
    _, rows = run_available_now(stream(spark, bootstrap, subscribe=topic, startingOffsets="group",
                                       groupId=group))
    assert [o for _, o, _, _ in rows] == list(range(10, 15))


def _wait_for_group_offsets(bootstrap, group, expected, timeout_s=30.0):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            answer = admin.list_group_offsets({group: None}).get(group, {})
            committed = {(tp.topic, tp.partition): meta.offset for tp, meta in answer.items()}
            if committed == expected or time.monotonic() > deadline:
                return committed
            time.sleep(0.2)
    finally:
        admin.close()
