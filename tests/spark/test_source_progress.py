"""Per-query default consumer groups, offsets behind latest (connector.progress), and a broker that goes away.
Offsets behind latest runs on Apache Kafka too (``broker``)."""
from __future__ import annotations

import logging
import tempfile
import time

import pytest

import connector
from connector.options import parse_source_options
from connector.source.offset_reader import OffsetReader
from connector.source.offsets import GROUP_KEY_PREFIX, group_of
from connector.source.readers import PylogStreamReader, source_schema
from connector.wire import BootstrapUnreachable
from spark_helpers import create_topic, numbered, produce, run_available_now, stream

pytestmark = pytest.mark.spark


def _group_offsets(bootstrap: str, group: str, topic: str, partitions: int = 1) -> dict:
    options = parse_source_options({"kafka.bootstrap.servers": bootstrap, "subscribe": topic, "groupId": group})
    reader = OffsetReader(options)
    try:
        return reader.group_offsets([(topic, p) for p in range(partitions)])
    finally:
        reader.close()


def test_two_queries_on_the_same_topic_commit_their_progress_to_groups_of_their_own(spark, pylog_broker):
    bootstrap = pylog_broker.bootstrap_servers
    create_topic(bootstrap, "shared", partitions=1)
    produce(bootstrap, "shared", numbered(0, 0, 10))
    first_checkpoint = tempfile.mkdtemp(prefix="pylog-ckpt-")
    first, _ = run_available_now(stream(spark, bootstrap, subscribe="shared", startingOffsets="earliest"),
                                 first_checkpoint)
    produce(bootstrap, "shared", numbered(0, 10, 15))
    second, _ = run_available_now(stream(spark, bootstrap, subscribe="shared", startingOffsets="earliest"))

    groups = [connector.progress(q)[0]["consumerGroup"] for q in (first, second)]
    assert groups[0] != groups[1] and all(g.startswith("pylog-") for g in groups)
    assert _group_offsets(bootstrap, groups[0], "shared") == {("shared", 0): 10}
    assert _group_offsets(bootstrap, groups[1], "shared") == {("shared", 0): 25}
    # a restart from the checkpoint keeps committing to the query's group
    again, rows = run_available_now(stream(spark, bootstrap, subscribe="shared", startingOffsets="earliest"),
                                    first_checkpoint)
    assert len(rows) == 15 and connector.progress(again)[0]["consumerGroup"] == groups[0]
    assert _group_offsets(bootstrap, groups[0], "shared") == {("shared", 0): 25}


def test_progress_reports_offsets_behind_latest_like_spark_kafka_metrics(spark, broker):
    topic = broker.name("behind")
    group = broker.name("behind-group")
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, topic, partitions=2)
    produce(bootstrap, topic, numbered(0, 0, 60) + numbered(1, 0, 40))
    query, rows = run_available_now(stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest",
                                           maxOffsetsPerTrigger=50, groupId=group))
    assert len(rows) == 100
    metrics = [connector.source.progress.source_progress(p)[0]["metrics"] for p in query.recentProgress
               if p["numInputRows"]]
    # rateLimit shares 50 as 30 + 20, then the other 50: 30 and 20 behind after the first batch, 0 after.
    assert metrics == [
        {"avgOffsetsBehindLatest": 25.0, "maxOffsetsBehindLatest": 30, "minOffsetsBehindLatest": 20},
        {"avgOffsetsBehindLatest": 0.0, "maxOffsetsBehindLatest": 0, "minOffsetsBehindLatest": 0}]
    assert connector.progress(query)[0]["consumerGroup"] is None   # groupId names it
    assert connector.progress(query)[0]["subscription"] == [topic]


def test_the_stream_reader_carries_its_group_in_its_offsets_and_logs_offsets_behind(pylog_broker, caplog):
    bootstrap = pylog_broker.bootstrap_servers
    create_topic(bootstrap, "carried", partitions=1)
    options = parse_source_options({"kafka.bootstrap.servers": bootstrap, "subscribe": "carried",
                                    "startingOffsets": "earliest"}).for_stream()
    readers = [PylogStreamReader(options, source_schema()) for _ in range(2)]
    try:
        starts = [r.initialOffset() for r in readers]
        groups = [group_of(s) for s in starts]
        assert groups[0] != groups[1]
        assert all(g.startswith(options.group_id + "-") for g in groups)
        # the group is a "topic" without partitions, so Spark's own connector reads this offset too
        assert starts[0] == {"carried": {"0": 0}, GROUP_KEY_PREFIX + groups[0]: {}}
        produce(bootstrap, "carried", numbered(0, 0, 3))
        from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows
        with caplog.at_level(logging.INFO, logger="connector.source"):
            middle = readers[0].latestOffset(starts[0], ReadMaxRows(2))
        assert middle == {"carried": {"0": 2}, GROUP_KEY_PREFIX + groups[0]: {}}
        assert "next batch ends at {'carried': {'0': 2}}; offsets behind latest after it: " \
               "{'avgOffsetsBehindLatest': 1.0, 'maxOffsetsBehindLatest': 1, 'minOffsetsBehindLatest': 1}" \
               in caplog.text
        end = readers[0].latestOffset(middle, ReadAllAvailable())
        assert end == {"carried": {"0": 3}, GROUP_KEY_PREFIX + groups[0]: {}}
        readers[0].commit(end)
        assert _group_offsets(bootstrap, groups[0], "carried") == {("carried", 0): 3}
    finally:
        for reader in readers:
            reader.stop()


def test_a_broker_gone_mid_stream_fails_the_driver_naming_the_address_and_the_refusal(pylog_broker_factory,
                                                                                      monkeypatch):
    monkeypatch.setattr("connector.source.offset_reader.DEFAULT_API_TIMEOUT_S", 1.0)
    broker = pylog_broker_factory()
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, "gone", partitions=1)
    reader = OffsetReader(parse_source_options({"kafka.bootstrap.servers": bootstrap, "subscribe": "gone",
                                                "fetchOffset.numRetries": "3"}))
    try:
        assert reader.partitions() == [("gone", 0)]
        broker.stop()
        started = time.monotonic()
        with pytest.raises(BootstrapUnreachable, match=f"kafka.bootstrap.servers={bootstrap}.*Connection refused"):
            reader.latest([("gone", 0)])
        # not fetchOffset.numRetries rounds of kafka-python's 30 s bootstrap hangs
        assert time.monotonic() - started < 25
    finally:
        reader.close()
