"""connector.foreach_batch: update-mode aggregations written exactly once, replays included; save modes."""
from __future__ import annotations

import json
import tempfile

import pytest
from pyspark.sql.functions import window

import connector
from sink_helpers import read_topic
from spark_helpers import broker_sim_only, create_topic, produce, stream

pytestmark = pytest.mark.spark


MINUTE_0 = 1_700_000_040_000   # 2023-11-14 22:14:00 UTC, a minute boundary


def _events(minute_counts: dict[int, int], start_ms: int = MINUTE_0):
    """JSON events: ``count`` events stamped in each minute (0 = the minute of ``start_ms``)."""
    events = []
    for minute, count in sorted(minute_counts.items()):
        for i in range(count):
            at = start_ms + minute * 60_000 + i
            events.append((0, None, json.dumps({"user": f"u{i % 3}", "at": at}).encode()))
    return events


def _windowed_counts(spark, bootstrap: str, topic: str):
    parsed = (stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest")
              .selectExpr("from_json(CAST(value AS STRING), 'user STRING, at LONG') AS e")
              .selectExpr("e.user AS user", "timestamp_millis(e.at) AS at"))
    counts = parsed.withWatermark("at", "10 minutes").groupBy(window("at", "1 minute")).count()
    return counts.selectExpr("CAST(unix_millis(window.start) AS STRING) AS key", "CAST(count AS STRING) AS value")


# broker_sim only for the suite's Kafka budget (80 s on Kafka under load); the exactly-once sink on Kafka is
# test_sink's stream and batch writes
@broker_sim_only
def test_update_mode_windowed_counts_are_written_once_even_when_a_batch_is_written_twice(spark, broker):
    clicks = broker.name("clicks")
    counts = broker.name("counts")
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, clicks, partitions=1)
    create_topic(bootstrap, counts, partitions=2)
    produce(bootstrap, clicks, _events({0: 5, 1: 3}))
    write = connector.foreach_batch(**{"kafka.bootstrap.servers": bootstrap, "topic": counts})

    def write_twice(batch_df, batch_id):   # what Spark does when it replays a batch after a crash
        write(batch_df, batch_id)
        write(batch_df, batch_id)

    checkpoint = tempfile.mkdtemp(prefix="pylog-ckpt-")
    for more in ({}, {1: 2, 2: 4}):   # the second run restarts from the checkpoint with new events
        if more:
            produce(bootstrap, clicks, _events(more))
        query = (_windowed_counts(spark, bootstrap, clicks).writeStream.outputMode("update")
                 .foreachBatch(write_twice).trigger(availableNow=True)
                 .option("checkpointLocation", checkpoint).start())
        assert query.awaitTermination(180), "the AvailableNow query did not finish"
        assert query.exception() is None

    records = sorted((key.decode(), int(value)) for _, key, value, _ in read_topic(bootstrap, counts))
    minute = [str(MINUTE_0 + m * 60_000) for m in range(3)]
    # one update per window and run: minute 1 was updated by the restart, minute 2 is new
    assert records == [(minute[0], 5), (minute[1], 3), (minute[1], 5), (minute[2], 4)]


def test_foreach_batch_refuses_bad_options_before_the_query_starts():
    with pytest.raises(ValueError, match="Option 'kafka.bootstrap.servers' must be specified"):
        connector.foreach_batch(topic="t")
    with pytest.raises(ValueError, match="Option 'pylog.batchId' is set by connector.foreach_batch itself"):
        connector.foreach_batch(**{"kafka.bootstrap.servers": "h:1", "pylog.batchId": "3"})


def test_batch_save_modes_append_works_overwrite_is_refused_and_writes_nothing(spark, pylog_broker):
    bootstrap = pylog_broker.bootstrap_servers
    create_topic(bootstrap, "modes", partitions=1)
    df = spark.createDataFrame([("a",), ("b",)], "value STRING")
    writer = df.write.format("pylog").option("kafka.bootstrap.servers", bootstrap).option("topic", "modes")
    writer.mode("append").save()
    with pytest.raises(Exception, match=r'does not support save mode Overwrite.*mode\("append"\)'):
        writer.mode("overwrite").save()
    assert sorted(value for _, _, value, _ in read_topic(bootstrap, "modes")) == [b"a", b"b"]
