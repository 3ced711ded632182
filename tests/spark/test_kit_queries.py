"""The test kit's query runner (broker_sim.testing.queries) on the shared Spark session: a pylog -> pylog
query seeded, run until consumed, stopped with the group handoff and checked exactly-once by key; and the
timeout naming the partitions still short."""
from __future__ import annotations

import tempfile

import pytest

from broker_sim.testing.assertions import assert_exactly_once, assert_lag
from broker_sim.testing.data import create_topics, seed
from broker_sim.testing.queries import run_until_consumed


def pipeline(spark, options: dict, out: str):
    return (spark.readStream.format("pylog").options(**options).load()
            .selectExpr("key", "upper(CAST(value AS STRING)) AS value")
            .writeStream.format("pylog").option("kafka.bootstrap.servers", options["kafka.bootstrap.servers"])
            .option("topic", out).option("checkpointLocation", tempfile.mkdtemp(prefix="pylog-ckpt-")).start())


def test_pylog_to_pylog_runs_until_consumed_stops_and_is_exactly_once(spark, pylog_broker):
    create_topics(pylog_broker, {"in": 2, "out": 1})
    rows = [{"key": f"k{i}", "value": f"v{i}"} for i in range(60)]
    seed(pylog_broker, "in", rows)
    options = {"kafka.bootstrap.servers": pylog_broker.bootstrap_servers, "subscribe": "in",
               "startingOffsets": "earliest", "groupId": "etl", "maxOffsetsPerTrigger": "40"}
    progress = run_until_consumed(pipeline(spark, options, "out"), options=options, timeout_s=60)
    assert progress is not None
    assert_exactly_once([(r["key"], r["value"].upper()) for r in rows], "out", bootstrap=pylog_broker)
    assert_lag(pylog_broker, "etl", topics=["in"])   # stop_query handed the progress to the group


def test_timeout_names_the_partitions_short_and_by_how_many(spark, pylog_broker):
    create_topics(pylog_broker, {"src": 2, "dst": 1})
    seed(pylog_broker, "src", [b"a", b"b"], partition=0)
    options = {"kafka.bootstrap.servers": pylog_broker.bootstrap_servers, "subscribe": "src",
               "startingOffsets": "earliest"}
    query = pipeline(spark, options, "dst")
    run_until_consumed(query, offsets={("src", 0): 2}, stop=False, timeout_s=60)   # src-0 done, src-1 never fed
    with pytest.raises(TimeoutError, match=r"short on 1 of 2 partitions: src-1 at 0 of 5 \(5 short\); status "):
        run_until_consumed(query, offsets={("src", 0): 2, ("src", 1): 5}, timeout_s=1)
    assert not query.isActive
