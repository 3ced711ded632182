"""PylogClusterContainers' fault vocabulary does what it says, seen through the Kafka protocol."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

pytestmark = pytest.mark.containers


def _create(cluster, topic: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    admin.create_topics([NewTopic(topic, 1, 3, topic_configs={"min.insync.replicas": "2"})])
    admin.close()
    cluster.wait_for_full_isr(topic, 1, timeout_s=60)


def test_a_paused_follower_leaves_the_isr_and_rejoins_after_unpause(pylog_cluster_containers):
    cluster = pylog_cluster_containers
    _create(cluster, "paused")
    state = cluster.partition_state("paused", 0)
    follower = next(b for b in state["replicas"] if b != state["leader"])
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    cluster.pause(follower)
    try:
        deadline = time.monotonic() + 90
        while follower in cluster.partition_state("paused", 0, via=[state["leader"]])["isr"]:
            producer.produce("paused", b"x")  # the leader notices a follower that stopped fetching
            producer.poll(0)
            assert time.monotonic() < deadline, "the paused follower never left the ISR"
            time.sleep(0.5)
    finally:
        cluster.unpause(follower)
    assert producer.flush(60) == 0, "acks=all writes stalled with 2 of 3 replicas in sync"
    cluster.wait_for_full_isr("paused", 1, timeout_s=90)


def test_a_slow_link_delays_but_heal_restores(pylog_cluster_containers):
    """tc netem on a broker delays every packet it sends: a Metadata round trip to it takes at least the
    delay; heal() removes it."""
    cluster = pylog_cluster_containers

    def round_trip(i: int) -> float:
        started = time.monotonic()
        cluster.describe([i])
        return time.monotonic() - started

    from broker_sim.testing.containers import NetemUnavailable

    try:
        cluster.slow_link(1, delay_ms=400)
    except NetemUnavailable as exc:
        # e.g. this project's CI machines (a microVM kernel without sch_netem): the error must say so
        assert "sch_netem" in str(exc) and "partitions (iptables) still work" in str(exc)
        return
    try:
        assert round_trip(1) >= 0.4
    finally:
        cluster.heal_network()
    assert min(round_trip(1) for _ in range(3)) < 0.4
