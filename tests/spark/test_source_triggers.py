"""Trigger-related source behaviour: minOffsetsPerTrigger / maxTriggerDelay, and the latest offset in progress
(on Apache Kafka too: ``broker``)."""
from __future__ import annotations

import json
import tempfile
from datetime import datetime

import pytest

from broker_sim.testing.waiting import wait_until
from spark_helpers import create_topic, numbered, produce, run_available_now, source_progress, stream

pytestmark = pytest.mark.spark


class BatchRecorder:
    """foreachBatch target: remembers each non-empty micro-batch's (partition, offset) rows, in order."""

    def __init__(self) -> None:
        self.batches: list[list[tuple[int, int]]] = []

    def __call__(self, batch_df, _batch_id) -> None:
        rows = sorted((r.partition, r.offset) for r in batch_df.select("partition", "offset").collect())
        if rows:
            self.batches.append(rows)

    def wait_for(self, count: int, timeout_s: float) -> list[list[tuple[int, int]]]:
        """The batches recorded, once there are ``count`` (AssertionError naming them after ``timeout_s``)."""
        return wait_until(lambda: len(self.batches) >= count and list(self.batches), timeout_s=timeout_s,
                          what=f"{count} micro-batches with rows", interval_s=0.05)


def _start(df, recorder: BatchRecorder, interval: str = "100 milliseconds"):
    return (df.writeStream.foreachBatch(recorder).trigger(processingTime=interval)
            .option("checkpointLocation", tempfile.mkdtemp(prefix="pylog-ckpt-")).start())


def _wait_for_data_batch_starts(query, count: int, timeout_s: float) -> list[float]:
    """Trigger start times (epoch seconds) of the micro-batches that read rows, once ``count`` have reported."""
    def starts() -> list[float]:
        return [datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp()
                for p in query.recentProgress if p["numInputRows"]]
    return wait_until(lambda: len(found := starts()) >= count and found, timeout_s=timeout_s,
                      what=f"progress of {count} micro-batches with rows")


def _wait_for_triggers_that_saw(query, latest: dict, count: int, timeout_s: float) -> int:
    """How many triggers ran no batch while the source's latest offset was ``latest`` (waits for ``count``)."""
    def held() -> int:
        return sum(1 for p in query.recentProgress
                   if not p["numInputRows"] and p["sources"]
                   and json.loads(p["sources"][0].get("latestOffset") or "null") == latest)
    return wait_until(lambda: (seen := held()) >= count and seen, timeout_s=timeout_s,
                      what=f"{count} triggers that saw latest offset {latest} and ran no batch")


def test_min_offsets_per_trigger_holds_the_batch_until_enough_offsets_arrive(spark, pylog_broker):
    bootstrap = pylog_broker.bootstrap_servers
    create_topic(bootstrap, "trickle", partitions=2)
    produce(bootstrap, "trickle", numbered(0, 0, 3) + numbered(1, 0, 2))
    recorder = BatchRecorder()
    # every trigger that runs no batch reports its progress (Spark's default: one such report per 10 s), so
    # the test can count the triggers that saw the 9 new offsets and held them, however slow the machine
    spark.conf.set("spark.sql.streaming.noDataProgressEventInterval", "0")
    try:
        query = _start(stream(spark, bootstrap, subscribe="trickle", startingOffsets="earliest",
                              minOffsetsPerTrigger=10, maxTriggerDelay="1h"), recorder)
    finally:
        spark.conf.unset("spark.sql.streaming.noDataProgressEventInterval")
    try:
        # Spark's rule: the first batch never waits (no trigger yet to measure the delay from).
        assert len(recorder.wait_for(1, 60)) == 1
        produce(bootstrap, "trickle", numbered(0, 3, 4) + numbered(1, 2, 5))   # 9 new offsets: one short
        held = _wait_for_triggers_that_saw(query, {"trickle": {"0": 7, "1": 7}}, count=5, timeout_s=60)
        assert held >= 5, f"only {held} triggers saw the 9 new offsets within 60 s"
        assert len(recorder.batches) == 1, "a batch ran with fewer than minOffsetsPerTrigger new offsets"
        produce(bootstrap, "trickle", numbered(1, 7, 1))                        # the 10th
        batches = recorder.wait_for(2, 60)
    finally:
        query.stop()
    assert batches == [[(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)],
                       [(0, o) for o in range(3, 7)] + [(1, o) for o in range(2, 8)]]


DELAY_S = 8  # well above the first batch's own run time, so a batch that did not wait shows


def test_max_trigger_delay_releases_a_small_batch(spark, pylog_broker):
    bootstrap = pylog_broker.bootstrap_servers
    create_topic(bootstrap, "sparse", partitions=1)
    produce(bootstrap, "sparse", numbered(0, 0, 2))
    recorder = BatchRecorder()
    query = _start(stream(spark, bootstrap, subscribe="sparse", startingOffsets="earliest",
                          minOffsetsPerTrigger=1000, maxTriggerDelay=f"{DELAY_S}s"), recorder)
    try:
        assert recorder.wait_for(1, 60) == [[(0, 0), (0, 1)]]
        produce(bootstrap, "sparse", numbered(0, 2, 3))
        batches = recorder.wait_for(2, 60)
        starts = _wait_for_data_batch_starts(query, 2, 60)
    finally:
        query.stop()
    assert batches == [[(0, 0), (0, 1)], [(0, 2), (0, 3), (0, 4)]]
    # The second batch ran on the delay, not on the row count (3 rows < 1000): its latestOffset decided to run
    # no sooner than maxTriggerDelay after the first trigger's decision, which came after the first trigger
    # started. The decision ends within the second trigger's execution, so this holds however slow the
    # machine is (a fixed slack on trigger timestamps did not: the time from a trigger's start to its
    # latestOffset call grows with load).
    # Mutation: _delay_batch ignoring minOffsetsPerTrigger (no delay) -> decided ~3-4 s after the first start.
    # An upper bound on when the second trigger's latestOffset returned: its start plus its execution time
    # less the phases Spark runs after latestOffset (WAL commit, planning, the batch itself, the commit).
    second = [p for p in query.recentProgress if p["numInputRows"]][1]["durationMs"]
    after = sum(second.get(phase, 0) for phase in ("walCommit", "getBatch", "queryPlanning", "addBatch",
                                                   "commitOffsets"))
    decided_by = starts[1] + (second["triggerExecution"] - after) / 1000.0
    assert decided_by - starts[0] >= DELAY_S, (starts, second)


def test_progress_reports_the_latest_offset_beyond_a_capped_batch(spark, broker):
    topic = broker.name("backlog")
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, topic, partitions=1)
    produce(bootstrap, topic, numbered(0, 0, 100))
    query, rows = run_available_now(stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest",
                                           maxOffsetsPerTrigger=30))
    assert len(rows) == 100
    first = next(i for i, p in enumerate(query.recentProgress) if p["numInputRows"])
    assert source_progress(query, "endOffset", first) == {topic: {"0": 30}}
    assert source_progress(query, "latestOffset", first) == {topic: {"0": 100}}
