"""The Spark source and the exactly-once sink across leader failovers on a 3-broker cluster.

A streaming query reads ``events`` (RF=3) and writes ``clean`` (RF=3) through the transactional
sink while the nemesis SIGKILLs the leader of a sink partition and then of a source partition
(each restarted after a few seconds). Internal topics are replicated too
(``offsets.topic.replication.factor=3``, ``transaction.state.log.replication.factor=3``; the
sink creates its ``__pylog_sink_log`` with replication factor 3), so the group and transaction
coordinators move with their partitions' leaders. The output, read read_committed, must hold
every input record exactly once.

The faults must be real: each kill hits a query that is active and mid-stream (its output not complete),
leadership of the partition must move to another broker while the leader is down, and the query must commit
new batches after each failover.
Mutation: LocalCluster.kill as a no-op -> "leadership of clean-0 stayed on broker N".
"""
from __future__ import annotations

import tempfile

import pytest

from broker_sim.testing.waiting import wait_until
from sink_helpers import read_topic, values_of
from spark_helpers import create_replicated_topics, kill_and_restart, produce_acks_all, stream

pytestmark = [pytest.mark.spark, pytest.mark.cluster, pytest.mark.slow]

CLUSTER_CONFIGS = {
    "zookeeper.session.timeout.ms": "3000",
    "replica.lag.time.max.ms": "3000",
    "leader.imbalance.check.interval.seconds": "5",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "min.insync.replicas": "2",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from broker_sim.testing.requirements import require_zookeeper
    from broker_sim.local.cluster import LocalCluster

    require_zookeeper()
    running = LocalCluster(tmp_path_factory.mktemp("spark-cluster"), brokers=3, configs=CLUSTER_CONFIGS).start()
    try:
        yield running
    finally:
        running.stop_all()


def batch_id(query) -> int:
    progress = query.lastProgress
    return progress["batchId"] if progress else -1


def assert_running_mid_stream(query, bootstrap: str, expected: int) -> int:
    """The fault is about to hit a live query that has not written everything yet; its last batch id."""
    assert query.isActive and query.exception() is None, query.exception()
    assert committed_count(bootstrap, "clean") < expected, "the stream had already finished"
    return batch_id(query)


def wait_while_running(query, condition, *, timeout_s: float, what: str, interval_s: float) -> None:
    """Until ``condition()`` holds; fails at once if ``query`` failed; a timeout names its last progress."""
    def reached() -> bool:
        assert query.exception() is None, query.exception()
        return condition()

    try:
        wait_until(reached, timeout_s=timeout_s, what=what, interval_s=interval_s, retry_on=())
    except AssertionError as failure:
        raise AssertionError(f"{failure}; last progress: {query.lastProgress}") from None


def wait_for_new_batches(query, after: int, what: str) -> None:
    wait_while_running(query, lambda: batch_id(query) > after + 1, timeout_s=120, interval_s=0.5,
                       what=f"a new batch committed after {what}")


def committed_count(bootstrap: str, topic: str) -> int:
    try:
        return len(read_topic(bootstrap, topic, timeout_s=20))
    except Exception:  # noqa: BLE001 - a failover in progress: ask again
        return -1


def test_stream_exactly_once_across_leader_failovers(spark, cluster):
    bootstrap = cluster.bootstrap_servers
    create_replicated_topics(cluster, {"events": 2, "clean": 3})
    produce_acks_all(bootstrap, "events", range(400), 2)
    checkpoint = tempfile.mkdtemp(prefix="pylog-ckpt-")

    source = stream(spark, bootstrap, subscribe="events", startingOffsets="earliest", maxOffsetsPerTrigger=40)
    query = (source.selectExpr("key", "concat('seen-', CAST(value AS STRING)) AS value")
             .writeStream.format("pylog").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", "clean").option("checkpointLocation", checkpoint)
             .trigger(processingTime="500 milliseconds").start())
    try:
        wait_while_running(query, lambda: committed_count(bootstrap, "clean") > 0, timeout_s=120, interval_s=1,
                           what="a first batch")   # the faults hit a running stream
        before = assert_running_mid_stream(query, bootstrap, 700)
        killed = [kill_and_restart(cluster, "clean", 0, down_s=5)]          # the sink's leader
        produce_acks_all(bootstrap, "events", range(400, 600), 2)
        wait_for_new_batches(query, before, f"the kill of clean-0's leader {killed[0]}")
        before = assert_running_mid_stream(query, bootstrap, 700)
        killed.append(kill_and_restart(cluster, "events", 1, down_s=5))    # the source's leader
        produce_acks_all(bootstrap, "events", range(600, 700), 2)
        wait_for_new_batches(query, before, f"the kill of events-1's leader {killed[1]}")
        wait_while_running(query, lambda: committed_count(bootstrap, "clean") >= 700, timeout_s=240, interval_s=2,
                           what="the query catching up to 700 rows")
    finally:
        query.stop()
    assert query.exception() is None
    assert values_of(read_topic(bootstrap, "clean")) == sorted(f"seen-{i}".encode() for i in range(700)), (
        f"killed leaders {killed}")
