"""A Spark job against pylog in containers — the design's "integration tests against testcontainers":
format("pylog") source -> transform -> exactly-once sink, against a PylogContainer, and against
PylogClusterContainers while the leader of the output partition is SIGKILLed (and restarted)."""
from __future__ import annotations

import tempfile
import time

import pytest
from kafka.errors import KafkaTimeoutError
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from sink_helpers import read_topic, values_of
from spark_helpers import create_topic, produce, stream

pytestmark = [pytest.mark.spark, pytest.mark.containers]


def _query(spark, bootstrap: str, source_topic: str, sink_topic: str, **source_options):
    source = stream(spark, bootstrap, subscribe=source_topic, startingOffsets="earliest", **source_options)
    return (source.selectExpr("key", "concat('seen-', CAST(value AS STRING)) AS value")
            .writeStream.format("pylog").option("kafka.bootstrap.servers", bootstrap)
            .option("topic", sink_topic).option("checkpointLocation", tempfile.mkdtemp(prefix="pylog-ckpt-")))


def _wait_for_count(query, bootstrap: str, topic: str, count: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s

    def records() -> int:
        try:
            return len(read_topic(bootstrap, topic, timeout_s=20))
        except KafkaTimeoutError:  # a broker restarting: its partitions' end offsets are not known yet
            return -1

    while records() < count:
        assert query.exception() is None, query.exception()
        assert time.monotonic() < deadline, f"{topic}: fewer than {count} records in {timeout_s} s: " \
                                            f"{query.lastProgress}"
        time.sleep(1)


def test_a_spark_job_against_a_pylog_container_writes_exactly_once(spark, pylog_container, pylog_topic):
    bootstrap = pylog_container.get_bootstrap_server()
    source, sink = f"{pylog_topic}-in", f"{pylog_topic}-out"
    create_topic(bootstrap, source, partitions=2)
    create_topic(bootstrap, sink, partitions=2)
    produce(bootstrap, source, [(i % 2, f"k{i}".encode(), f"{i}".encode()) for i in range(300)])
    query = _query(spark, bootstrap, source, sink, maxOffsetsPerTrigger=100).trigger(availableNow=True).start()
    try:
        assert query.awaitTermination(180), "the availableNow query did not finish in 180 s"
    finally:
        query.stop()
    assert query.exception() is None
    assert values_of(read_topic(bootstrap, sink)) == sorted(f"seen-{i}".encode() for i in range(300))
    assert len(read_topic(bootstrap, sink, isolation="read_uncommitted")) == 300


def test_a_spark_stream_against_cluster_containers_survives_a_killed_leader(spark, pylog_cluster_containers):
    cluster = pylog_cluster_containers
    bootstrap = cluster.bootstrap_servers
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic("c-events", 2, 3, topic_configs={"min.insync.replicas": "2"}),
                         NewTopic("c-clean", 2, 3, topic_configs={"min.insync.replicas": "2"})])
    admin.close()
    for topic in ("c-events", "c-clean"):
        cluster.wait_for_full_isr(topic, 2, timeout_s=60)
    produce(bootstrap, "c-events", [(i % 2, f"k{i}".encode(), f"{i}".encode()) for i in range(200)])
    query = _query(spark, bootstrap, "c-events", "c-clean", maxOffsetsPerTrigger=40) \
        .trigger(processingTime="500 milliseconds").start()
    try:
        _wait_for_count(query, bootstrap, "c-clean", 1, 120)  # the kill hits a running stream
        leader = cluster.leader_of("c-clean", 0)
        cluster.kill(leader)
        others = [b for b in range(cluster.size) if b != leader]
        # the controller moves leadership to an ISR member (or, if the ISR had shrunk to the dead leader, the
        # partition is offline, -1, until it returns): either way not the dead broker once its session expired
        moved = cluster.wait_for(lambda: (l := cluster.leader_of("c-clean", 0, via=others)) != leader and str(l),
                                 timeout_s=60, what=f"leadership of c-clean-0 off killed broker {leader}")
        produce(",".join(cluster.brokers[b].get_bootstrap_server() for b in others), "c-events",
                [(i % 2, f"k{i}".encode(), f"{i}".encode()) for i in range(200, 300)])
        cluster.restart(leader)
        _wait_for_count(query, bootstrap, "c-clean", 300, 240)
    finally:
        query.stop()
    assert query.exception() is None
    assert int(moved) != leader
    assert values_of(read_topic(bootstrap, "c-clean")) == sorted(f"seen-{i}".encode() for i in range(300))
