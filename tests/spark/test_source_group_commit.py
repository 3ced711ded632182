"""The source's consumer-group commits, read from the broker at each point of a batch's life: while a batch runs
the group holds the previous batch's end, once the batch completes it holds the batch's end, and a batch that
fails leaves the group where it was. On broker_sim and on Apache Kafka (``broker``)."""
from __future__ import annotations

import tempfile
import threading
import time

import pytest
from kafka import KafkaAdminClient
from kafka.errors import CoordinatorLoadInProgressError, CoordinatorNotAvailableError, NotCoordinatorError

from spark_helpers import create_topic, numbered, produce, stream

pytestmark = pytest.mark.spark


def _committed(bootstrap: str, name: str, timeout_s: float = 30) -> dict[int, int]:
    """The offsets group ``name`` holds for topic ``name``; a coordinator not there yet (Kafka loads its
    __consumer_offsets partition a moment after a group's first use) is asked again, as Kafka's clients do."""
    deadline = time.monotonic() + timeout_s
    while True:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            answer = admin.list_group_offsets({name: None}).get(name, {})
            return {tp.partition: meta.offset for tp, meta in answer.items() if tp.topic == name}
        except (CoordinatorNotAvailableError, NotCoordinatorError, CoordinatorLoadInProgressError):
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.2)
        finally:
            admin.close()


def _wait_committed(bootstrap: str, name: str, wanted: dict[int, int], timeout_s: float = 60) -> dict[int, int]:
    deadline = time.monotonic() + timeout_s
    while (seen := _committed(bootstrap, name)) != wanted and time.monotonic() < deadline:
        time.sleep(0.1)
    return seen


class GatedBatches:
    """foreachBatch target: batch ``hold`` waits until released (telling when it started); batch ``fail`` raises."""

    def __init__(self, hold: int, fail: int) -> None:
        self.hold, self.fail = hold, fail
        self.holding, self.release = threading.Event(), threading.Event()
        self.ends: dict[int, dict[int, int]] = {}

    def __call__(self, batch_df, batch_id) -> None:
        rows = batch_df.select("partition", "offset").collect()
        if not rows:
            return
        if batch_id == self.hold:
            self.holding.set()
            assert self.release.wait(120), "the test never released the held batch"
        if batch_id == self.fail:
            raise RuntimeError(f"batch {batch_id} fails on purpose")
        ends = {}
        for row in rows:
            ends[row.partition] = max(ends.get(row.partition, 0), row.offset + 1)
        self.ends[batch_id] = ends


def test_the_group_holds_the_previous_end_during_a_batch_its_end_after_and_is_unchanged_by_a_failure(
        spark, broker):
    bootstrap, name = broker.bootstrap_servers, broker.name("commit-points")   # the topic and its group
    create_topic(bootstrap, name, partitions=2)
    produce(bootstrap, name, numbered(0, 0, 5) + numbered(1, 0, 3))        # batch 0: 5 / 3
    gate = GatedBatches(hold=1, fail=2)
    query = (stream(spark, bootstrap, subscribe=name, startingOffsets="earliest", groupId=name)
             .writeStream.foreachBatch(gate)
             .option("checkpointLocation", tempfile.mkdtemp(prefix="pylog-ckpt-")).start())
    try:
        assert _wait_committed(bootstrap, name, {0: 5, 1: 3}) == {0: 5, 1: 3}, "batch 0's end after it completed"
        produce(bootstrap, name, numbered(0, 5, 4) + numbered(1, 3, 2))    # batch 1: 9 / 5, held
        assert gate.holding.wait(60), "batch 1 never started"
        time.sleep(1)   # the group is read while batch 1 is still held, with time for a wrong commit to land
        assert _committed(bootstrap, name) == {0: 5, 1: 3}, "the group moved while batch 1 was running"
        gate.release.set()
        assert _wait_committed(bootstrap, name, {0: 9, 1: 5}) == {0: 9, 1: 5}, "batch 1's end after it completed"
        assert gate.ends[1] == {0: 9, 1: 5}
        produce(bootstrap, name, numbered(0, 9, 2))                         # batch 2: fails
        deadline = time.monotonic() + 60
        while query.isActive and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not query.isActive and query.exception() is not None, "batch 2 did not fail the query"
        assert "fails on purpose" in str(query.exception())
        assert _committed(bootstrap, name) == {0: 9, 1: 5}, "a failed batch moved the group"
    finally:
        gate.release.set()
        query.stop()
