"""A pylog -> pylog exactly-once pipeline survives injected sink Produce errors and a broker restart.

The test kit's in-process faults (broker_sim/testing/faults.py): NOT_LEADER_OR_FOLLOWER refuses the sink's
appends to clean-0 (nothing written), REQUEST_TIMED_OUT answers clean-1 after the append (written, not
confirmed: the transactional producer's retry must not duplicate), and the broker restarts between the two
runs of the query on one checkpoint.  The read_committed output must hold every key exactly once.
"""
from __future__ import annotations

import logging
import tempfile
from collections import Counter

import pytest

from broker_sim.testing.faults import inject, restart
from sink_helpers import read_topic
from spark_helpers import create_topic, produce, stream

pytestmark = pytest.mark.spark


def _run(spark, bootstrap: str, source: str, sink: str, checkpoint: str) -> None:
    query = (stream(spark, bootstrap, subscribe=source, startingOffsets="earliest", maxOffsetsPerTrigger=150)
             .selectExpr("key", "value").writeStream.format("pylog").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", sink).option("checkpointLocation", checkpoint).start())
    try:
        query.processAllAvailable()
    finally:
        query.stop()


def test_pipeline_exactly_once_through_not_leader_request_timed_out_and_a_restart(spark, pylog_broker, caplog):
    bootstrap = pylog_broker.bootstrap_servers
    create_topic(bootstrap, "kit-in", partitions=2)
    create_topic(bootstrap, "kit-out", partitions=2)
    produce(bootstrap, "kit-in", [(i % 2, f"k{i}".encode(), f"{i}".encode()) for i in range(300)])
    checkpoint = tempfile.mkdtemp(prefix="pylog-ckpt-")
    with caplog.at_level(logging.WARNING, logger="broker_sim.server.faults"):
        not_leader = inject(pylog_broker, "Produce", error="NOT_LEADER_OR_FOLLOWER", count=3, topic="kit-out",
                            partition=0)
        timed_out = inject(pylog_broker, "Produce", error="REQUEST_TIMED_OUT", count=2, topic="kit-out",
                           partition=1)
        _run(spark, bootstrap, "kit-in", "kit-out", checkpoint)
        assert (not_leader.injected, timed_out.injected) == (3, 2)
        restart(pylog_broker)
        produce(bootstrap, "kit-in", [(i % 2, f"k{i}".encode(), f"{i}".encode()) for i in range(300, 400)])
        again = inject(pylog_broker, "Produce", error="REQUEST_TIMED_OUT", count=1, topic="kit-out")
        _run(spark, bootstrap, "kit-in", "kit-out", checkpoint)
        assert again.injected == 1
    keys = Counter(record[1].decode() for record in read_topic(bootstrap, "kit-out"))
    expected = {f"k{i}" for i in range(400)}
    lost = sorted(expected - set(keys))
    duplicated = sorted(f"{k} x{n}" for k, n in keys.items() if n > 1)
    assert not lost and not duplicated and set(keys) == expected, f"lost {lost[:10]}, duplicated {duplicated[:10]}"
    logged = [r.message for r in caplog.records if r.message.startswith("fault injected: Produce")]
    assert sum("kit-out-0 -> NOT_LEADER_OR_FOLLOWER" in m for m in logged) == 3
    assert sum("-> REQUEST_TIMED_OUT" in m for m in logged) == 3
