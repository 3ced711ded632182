"""PylogClusterContainers' fault vocabulary does what it says, seen through the Kafka protocol."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaAdminClient
from kafka import TopicPartition as KafkaTopicPartition
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


def test_a_slow_link_delays_but_heal_restores_or_says_why_netem_is_missing(pylog_cluster_containers):
    """tc netem on a broker delays every packet it sends: a Metadata round trip to it takes at least the
    delay; heal() removes it.  On a kernel without sch_netem (this project's CI microVMs) slow_link must
    refuse with that reason and leave the broker as it was (thin_link, below, is the fault that runs there)."""
    cluster = pylog_cluster_containers

    def round_trip(i: int) -> float:
        started = time.monotonic()
        cluster.describe([i])
        return time.monotonic() - started

    from broker_sim.testing.containers import NetemUnavailable

    try:
        cluster.slow_link(1, delay_ms=400)
    except NetemUnavailable as exc:
        assert "sch_netem" in str(exc) and "partitions (iptables) still work" in str(exc)
        code, qdiscs = cluster.brokers[1].exec_root(["tc", "qdisc", "show", "dev", "eth0"])
        assert code == 0 and "netem" not in qdiscs
        assert min(round_trip(1) for _ in range(3)) < 0.4
        return
    try:
        assert round_trip(1) >= 0.4
    finally:
        cluster.heal_network()
    assert min(round_trip(1) for _ in range(3)) < 0.4


def test_a_thin_link_slows_what_a_broker_sends_until_heal(pylog_cluster_containers):
    """thin_link(i, 512 kbit): reading 192 KB that only broker i holds takes at least 192 KB / 512 kbit
    (3 s); after heal_network() the same read is several times faster."""
    cluster = pylog_cluster_containers
    cluster.wait_for_brokers(3)   # the module's cluster: an earlier test's paused broker may still be registering
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    admin.create_topics([NewTopic("thin", num_partitions=-1, replication_factor=-1, replica_assignments={0: [2]})])
    admin.close()
    cluster.wait_for_full_isr("thin", 1, timeout_s=60)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 5})
    for _ in range(192):
        producer.produce("thin", b"x" * 1024)
    assert producer.flush(60) == 0

    def read_all() -> float:
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "thin-reader",
                             "enable.auto.commit": False, "fetch.max.bytes": 1 << 20})
        consumer.assign([TopicPartition("thin", 0, 0)])
        consumer.poll(0)   # metadata and connections before the clock starts
        started, count, deadline = time.monotonic(), 0, time.monotonic() + 120
        while count < 192:
            assert time.monotonic() < deadline, f"read {count} of 192 records"
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                count += 1
        elapsed = time.monotonic() - started
        consumer.close()
        return elapsed

    cluster.thin_link(2, rate_kbit=512)
    try:
        thin = read_all()
    finally:
        cluster.heal_network()
    healed = read_all()
    assert thin >= 192 * 1024 * 8 / 512_000 * 0.9, f"192 KB through a 512 kbit link in {thin:.2f} s"
    assert healed < thin / 3, f"after heal {healed:.2f} s, thin {thin:.2f} s"


def test_a_reassignment_whose_target_is_isolated_waits_and_completes_after_heal_without_loss(
        pylog_cluster_containers):
    """KIP-455 through the container cluster: the target replica is cut off (iptables) as the reassignment
    starts, so it cannot catch up; the reassignment stays in progress while acks=all writes go on to the old
    replicas and after the controller saw the target's ZooKeeper session expire, and completes once the network
    heals: the new replica set serves every acknowledged record, in
    order, once."""
    cluster = pylog_cluster_containers
    controller = cluster.controller_id()
    target = next(b for b in range(cluster.size) if b != controller)
    leaving = next(b for b in range(cluster.size) if b not in (controller, target))
    others = ",".join(cluster.brokers[b].get_bootstrap_server() for b in (controller, leaving))
    admin = KafkaAdminClient(bootstrap_servers=others, request_timeout_ms=30000)
    try:
        admin.create_topics([NewTopic("moving", num_partitions=-1, replication_factor=-1,
                                      replica_assignments={0: [leaving, controller]},
                                      topic_configs={"min.insync.replicas": "2"})])
        cluster.wait_for_full_isr("moving", 1, timeout_s=60)
        producer = Producer({"bootstrap.servers": others, "acks": "all", "enable.idempotence": True})
        for i in range(200):
            producer.produce("moving", f"before-{i}".encode(), partition=0)
        assert producer.flush(60) == 0
        cluster.isolate(target)
        try:
            admin.alter_partition_reassignments({KafkaTopicPartition("moving", 0): [controller, target]})
            for i in range(200):
                producer.produce("moving", f"during-{i}".encode(), partition=0)
            assert producer.flush(60) == 0, "acks=all writes stalled while the target replica was cut off"
            # the target's ZooKeeper session expires: the controller reconsiders the reassignment, and must wait
            cluster.wait_for(lambda: target not in {b["broker_id"] for b in cluster.describe([controller])["brokers"]},
                             timeout_s=60, what=f"broker {target} unregistered while cut off")
            cluster.wait_for(lambda: target not in cluster.partition_state("moving", 0, via=[controller])["isr"],
                             timeout_s=10, what="the partition's state re-read")
            ongoing = admin.list_partition_reassignments()
            assert KafkaTopicPartition("moving", 0) in ongoing, ongoing  # the target is not in the ISR
            state = cluster.partition_state("moving", 0, via=[controller])
            assert target not in state["isr"] and set(state["replicas"]) == {controller, target, leaving}, state
        finally:
            cluster.heal(wait=True)
        cluster.wait_for(lambda: not admin.list_partition_reassignments()
                         and set(cluster.partition_state("moving", 0, via=[controller])["replicas"])
                         == {controller, target}, timeout_s=120, what="the reassignment completed after heal")
    finally:
        admin.close()
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "moving-reader",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    consumer.assign([TopicPartition("moving", 0, 0)])
    values, deadline = [], time.monotonic() + 60
    while len(values) < 400:
        assert time.monotonic() < deadline, f"read {len(values)} of 400 records"
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value().decode())
    consumer.close()
    assert values == [f"before-{i}" for i in range(200)] + [f"during-{i}" for i in range(200)]
