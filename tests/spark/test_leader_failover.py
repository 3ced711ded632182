"""The Spark source and the exactly-once sink across a leader failover on a 3-broker cluster (real processes).

A streaming query reads topic ``in`` with ``format("pylog")`` and writes a
transform of each record to ``out`` with the exactly-once ``format("pylog")``
sink while the cluster loses brokers: the leader of an ``in`` partition is
SIGKILLed mid-stream (and later restarted), then the leader of an ``out``
partition (which may also be the coordinator of the sink's transactions or
of the query's group).  Every record produced (acks=all) must come out exactly
once under read_committed, and no transaction may stay open.
"""
from __future__ import annotations

import tempfile
import time

import pytest
from confluent_kafka import Producer
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from broker_sim.controller.zookeeper_server import zookeeper_available
from sink_helpers import read_topic, values_of
from spark_helpers import stream

CLUSTER_CONFIGS = {
    "zookeeper.session.timeout.ms": 3000,
    "replica.lag.time.max.ms": 3000,
    "leader.imbalance.check.interval.seconds": 5,
    "min.insync.replicas": 2,
    "offsets.topic.num.partitions": 3,
    "transaction.state.log.num.partitions": 3,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 2000,
}


@pytest.fixture
def cluster(tmp_path):
    reason = zookeeper_available()
    if reason:
        pytest.skip(reason)
    from broker_sim.tools.cluster import LocalCluster
    with LocalCluster(tmp_path / "cluster", 3, configs=CLUSTER_CONFIGS) as nodes:
        admin = KafkaAdminClient(bootstrap_servers=nodes.bootstrap_servers)
        try:
            admin.create_topics([NewTopic("in", 3, 3), NewTopic("out", 3, 3)])
        finally:
            admin.close()
        nodes.wait_for_full_isr("in", 3)
        nodes.wait_for_full_isr("out", 3)
        yield nodes


def produce(bootstrap: str, start: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5, "message.timeout.ms": 60000})
    failed = []
    for i in range(start, start + count):
        producer.produce("in", f"{i}".encode(), key=f"k{i}".encode(), partition=i % 3,
                         on_delivery=lambda err, msg: err and failed.append(err))
    assert producer.flush(90) == 0 and not failed, failed


def wait_for_output(bootstrap: str, query, expected: int, timeout_s: float) -> list:
    deadline = time.monotonic() + timeout_s
    while True:
        assert query.exception() is None, query.exception()
        try:
            records = read_topic(bootstrap, "out", timeout_s=20)
        except Exception:  # a leader moving under the reader: read again
            records = []
        if len(records) >= expected or time.monotonic() > deadline:
            return records
        time.sleep(1.0)


def test_source_and_exactly_once_sink_survive_leader_failovers(spark, cluster):
    bootstrap = cluster.bootstrap_servers
    produce(bootstrap, 0, 300)
    source = stream(spark, bootstrap, subscribe="in", startingOffsets="earliest", maxOffsetsPerTrigger=150,
                    groupId="failover-query")
    query = (source.selectExpr("key", "concat('out-', CAST(value AS STRING)) AS value")
             .writeStream.format("pylog").option("kafka.bootstrap.servers", bootstrap).option("topic", "out")
             .option("checkpointLocation", tempfile.mkdtemp(prefix="pylog-ckpt-"))
             .trigger(processingTime="500 milliseconds").start())
    try:
        wait_for_output(bootstrap, query, 150, 120)
        victim = cluster.leader_of("in", 0)
        cluster.kill(victim)                      # the source's leader dies mid-stream
        produce(bootstrap, 300, 300)
        second = cluster.leader_of("out", 1)
        if second == victim or second is None:
            second = next(b for b in cluster.broker_ids if b != victim)
        cluster.restart(victim)
        cluster.wait_for_full_isr("in", 3)
        cluster.kill(second)                      # then a leader of the sink's topic
        produce(bootstrap, 600, 300)
        cluster.restart(second)
        records = wait_for_output(bootstrap, query, 900, 240)
    finally:
        query.stop()
    assert query.exception() is None
    assert values_of(records) == sorted(f"out-{i}".encode() for i in range(900))
    uncommitted = read_topic(bootstrap, "out", isolation="read_uncommitted")
    assert len(uncommitted) >= 900  # aborted retries may be there, invisible to read_committed
