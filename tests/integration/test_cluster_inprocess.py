"""Three in-process brokers on a real ZooKeeper: the broker's cluster mode end to end, fast.

Each test gets a fresh cluster (its own ZooKeeper chroot and data dirs) of
three ``Broker`` objects, each on its own event loop thread, and drives it
with real clients: topics created through any broker are replicated to all,
acks=all produce is read back from every replica, the group and transaction
coordinators move with the leaders of their internal partitions, a
transaction spans partitions led by different brokers (markers sent between
brokers), and a clean stop is a controlled shutdown.  Process-level faults
(SIGKILL, SIGSTOP, the nemesis) are in tests/cluster/.
"""
from __future__ import annotations

import uuid

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import NewTopic

from broker_sim.server.broker import Broker
from broker_sim.testing.waiting import wait_until

FAST = {
    "zookeeper.session.timeout.ms": "3000",
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "100",
    "leader.imbalance.check.interval.seconds": "2",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
    "controlled.shutdown.timeout.ms": "15000",
    "group.initial.rebalance.delay.ms": "0",
}


def settle(condition, message: str):
    """Cluster changes (elections, ISR moves, catch-up) take a few seconds: wait up to 30."""
    return wait_until(condition, timeout_s=30, what=message, interval_s=0.05)


class InProcessCluster:
    def __init__(self, connect: str, root) -> None:
        self.connect = connect
        self.root = root
        self.brokers: dict[int, Broker] = {}
        self.ports: dict[int, int] = {}

    def start(self, broker_id: int, **extra) -> Broker:
        config = dict(FAST, **{"zookeeper.connect": self.connect}, **extra)
        broker = Broker(self.root / f"broker-{broker_id}", broker_id=broker_id, port=self.ports.get(broker_id, 0),
                        config=config).start()
        self.ports[broker_id] = broker.port
        self.brokers[broker_id] = broker
        return broker

    def stop(self, broker_id: int) -> None:
        self.brokers.pop(broker_id).stop()
        # the others learn of it through a ZooKeeper watch: until then their Metadata still lists it
        settle(lambda: all(broker_id not in b.metadata.brokers for b in self.brokers.values()),
               message=f"every broker saw broker {broker_id} leave")

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(b.bootstrap_servers for b in self.brokers.values())

    def state(self, topic: str, partition: int, via: int | None = None):
        broker = self.brokers[via] if via is not None else next(iter(self.brokers.values()))
        return broker.metadata.partition_states.get((topic, partition))

    def wait_for_leaders(self, topic: str, partitions: int, isr_size: int | None = None) -> None:
        def ready():
            for broker in self.brokers.values():
                for index in range(partitions):
                    state = broker.metadata.partition_states.get((topic, index))
                    if state is None or state.leader not in self.brokers:
                        return False
                    if isr_size is not None and len(state.isr) != isr_size:
                        return False
                    local = self.brokers[state.leader].replicas.partitions.get((topic, index))
                    if local is None or not local.is_leader:
                        return False
            return True
        settle(ready, message=f"leaders of {topic}")

    def close(self) -> None:
        for broker_id in list(self.brokers):
            self.stop(broker_id)


@pytest.fixture
def cluster(zookeeper, tmp_path):
    nodes = InProcessCluster(f"{zookeeper.connect_string}/c{uuid.uuid4().hex[:10]}", tmp_path)
    try:
        for broker_id in (1, 2, 3):
            nodes.start(broker_id)
        settle(lambda: all(len(b.metadata.brokers) == 3 for b in nodes.brokers.values()), message="3 brokers")
        yield nodes
    finally:
        nodes.close()


def create_topic(cluster, name: str, partitions: int, rf: int, configs=None, via: int = 1) -> None:
    admin = KafkaAdminClient(bootstrap_servers=cluster.brokers[via].bootstrap_servers)
    try:
        admin.create_topics([NewTopic(name, partitions, rf, topic_configs=configs or {})])
    finally:
        admin.close()
    cluster.wait_for_leaders(name, partitions, isr_size=rf)


def produce(bootstrap: str, topic: str, values: list[bytes], partition: int | None = None, **conf) -> None:
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5, **conf})
    errors = []
    for value in values:
        kwargs = {} if partition is None else {"partition": partition}
        producer.produce(topic, value, on_delivery=lambda err, msg: err and errors.append(err), **kwargs)
    assert producer.flush(30) == 0
    assert not errors, errors


def read_all(bootstrap: str, topic: str, partitions: int, isolation: str = "read_uncommitted") -> dict[int, list]:
    """Every record up to each partition's end offset (the LSO under read_committed), then one more poll so
    a record past it would show in the result too.  Waits on positions, not on a quiet period: a slow
    fetch on a loaded machine is waited for, and the exact content is the caller's assertion."""
    import time

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, isolation_level=isolation,
                             auto_offset_reset="earliest")
    try:
        assigned = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(assigned)
        ends = consumer.end_offsets(assigned)
        seen: dict[int, list] = {p: [] for p in range(partitions)}
        deadline = time.monotonic() + 30

        def poll(timeout_ms: int) -> None:
            for tp, records in consumer.poll(timeout_ms=timeout_ms).items():
                seen[tp.partition].extend((r.offset, r.value) for r in records)

        while any(consumer.position(tp) < ends[tp] for tp in assigned):
            assert time.monotonic() < deadline, \
                f"read {[consumer.position(tp) for tp in assigned]} of the end offsets {list(ends.values())}"
            poll(500)
        poll(200)
        return seen
    finally:
        consumer.close()


def test_topic_created_through_one_broker_is_led_and_replicated_on_all(cluster):
    create_topic(cluster, "events", 3, 3)
    leaders = {cluster.state("events", p).leader for p in range(3)}
    assert leaders == {1, 2, 3}, "round-robin assignment spreads the preferred leaders"
    for broker in cluster.brokers.values():  # every broker's view agrees (clients can bootstrap from any)
        assert [broker.metadata.partition_states[("events", p)].leader for p in range(3)] == \
               [cluster.state("events", p).leader for p in range(3)]
    produce(cluster.brokers[2].bootstrap_servers, "events", [f"v{i}".encode() for i in range(300)])
    seen = read_all(cluster.brokers[3].bootstrap_servers, "events", 3)
    assert sorted(v for p in seen.values() for _, v in p) == sorted(f"v{i}".encode() for i in range(300))

    def replicas_equal():
        for p in range(3):
            logs = []
            for broker in cluster.brokers.values():
                local = broker.replicas.partitions[("events", p)]
                logs.append((local.log_end_offset, local.high_watermark,
                             local.log.read_bytes(0, 1 << 20, max_offset=local.log_end_offset)))
            if len(set(logs)) != 1:
                return False
        return True
    settle(replicas_equal, message="byte-identical replicas with equal high watermarks")


def test_acks_all_fails_with_not_enough_replicas_below_min_insync(cluster):
    create_topic(cluster, "guarded", 1, 3, {"min.insync.replicas": "3"})
    produce(cluster.bootstrap_servers, "guarded", [b"before"])
    leader = cluster.state("guarded", 0).leader
    follower = next(b for b in cluster.brokers if b != leader)
    cluster.stop(follower)
    settle(lambda: len(cluster.state("guarded", 0).isr) == 2, message="the stopped follower leaves the ISR")
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "retries": 0,
                         "message.timeout.ms": 3000})
    outcome = []
    producer.produce("guarded", b"refused", on_delivery=lambda err, msg: outcome.append(err))
    producer.flush(10)
    assert outcome and outcome[0] is not None and outcome[0].name() == "NOT_ENOUGH_REPLICAS", outcome


def test_controlled_shutdown_moves_leadership_and_data_stays_readable(cluster):
    create_topic(cluster, "moving", 3, 3)
    produce(cluster.bootstrap_servers, "moving", [f"m{i}".encode() for i in range(90)])
    victim = cluster.state("moving", 0).leader
    epoch_before = cluster.state("moving", 0).leader_epoch
    cluster.stop(victim)  # a clean stop: controlled shutdown first
    for p in range(3):
        state = cluster.state("moving", p)
        assert state.leader != victim and state.leader in cluster.brokers, state
    assert cluster.state("moving", 0).leader_epoch > epoch_before
    produce(cluster.bootstrap_servers, "moving", [f"n{i}".encode() for i in range(30)])
    seen = read_all(cluster.bootstrap_servers, "moving", 3)
    values = sorted(v for p in seen.values() for _, v in p)
    assert values == sorted([f"m{i}".encode() for i in range(90)] + [f"n{i}".encode() for i in range(30)])
    cluster.start(victim)  # rejoins, catches up into the ISR, then preferred-leader election gives it back
    cluster.wait_for_leaders("moving", 3, isr_size=3)
    settle(lambda: cluster.state("moving", 0).leader == victim, message="preferred leader restored")


def test_group_offsets_survive_their_coordinator_moving(cluster):
    create_topic(cluster, "grouped", 2, 3)
    produce(cluster.bootstrap_servers, "grouped", [b"a", b"b", b"c", b"d"])
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    consumer = KafkaConsumer("grouped", bootstrap_servers=cluster.bootstrap_servers, group_id="movers",
                             enable_auto_commit=False, auto_offset_reset="earliest", consumer_timeout_ms=5000)
    try:
        got = [r.value for r in consumer]
        assert sorted(got) == [b"a", b"b", b"c", b"d"]
        consumer.commit()
        committed = {tp.partition: om.offset for tp, om in admin.list_group_offsets({"movers": None})["movers"].items()}
    finally:
        consumer.close()
        admin.close()
    assert sum(committed.values()) == 4
    from broker_sim.coordinator.group.records import OFFSETS_TOPIC
    from broker_sim.coordinator.internal_topic import partition_for
    index = partition_for("movers", 3)
    coordinator = cluster.state(OFFSETS_TOPIC, index).leader
    cluster.stop(coordinator)
    settle(lambda: (cluster.state(OFFSETS_TOPIC, index).leader in cluster.brokers
                        and index in cluster.brokers[cluster.state(OFFSETS_TOPIC, index).leader].groups.loaded),
               message="a new coordinator loaded the group's partition")
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        moved = {tp.partition: om.offset for tp, om in admin.list_group_offsets({"movers": None})["movers"].items()}
    finally:
        admin.close()
    assert moved == committed


def test_an_offset_commit_is_answered_once_every_in_sync_replica_has_it(cluster):
    """Kafka's coordinators append with acks=all: the OffsetCommit answer waits for the followers in the ISR,
    here made slow (a second per append), so a coordinator that answered at once would be caught."""
    import time

    from kafka.structs import OffsetAndMetadata

    from broker_sim.coordinator.group.records import OFFSETS_TOPIC
    from broker_sim.coordinator.internal_topic import partition_for

    def slow_appends(partition, seconds: float = 1.0) -> None:
        append = partition.append_as_follower

        def append_as_follower(records):
            time.sleep(seconds)  # stalls the follower's whole broker, as a slow disk would
            return append(records)
        partition.append_as_follower = append_as_follower

    create_topic(cluster, "acked", 1, 3)
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id="isr-waiters",
                             enable_auto_commit=False)
    try:
        consumer.commit({TopicPartition("acked", 0): OffsetAndMetadata(1, "", -1)})  # __consumer_offsets exists now
        cluster.wait_for_leaders(OFFSETS_TOPIC, 3, isr_size=3)
        index = partition_for("isr-waiters", 3)
        state = cluster.state(OFFSETS_TOPIC, index)
        leader = cluster.brokers[state.leader].replicas.get(OFFSETS_TOPIC, index)
        followers = [cluster.brokers[b].replicas.get(OFFSETS_TOPIC, index) for b in state.isr if b != state.leader]
        for follower in followers:
            slow_appends(follower)
        consumer.commit({TopicPartition("acked", 0): OffsetAndMetadata(2, "", -1)})
        end = leader.log_end_offset
        assert [follower.log_end_offset for follower in followers] == [end] * 2
    finally:
        consumer.close()


def test_transaction_over_partitions_led_by_different_brokers(cluster):
    create_topic(cluster, "txn-spread", 3, 3)
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": "spread-1"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for p in range(3):
        producer.produce("txn-spread", f"committed-{p}".encode(), partition=p)
    producer.commit_transaction(30)
    producer.begin_transaction()
    for p in range(3):
        producer.produce("txn-spread", f"aborted-{p}".encode(), partition=p)
    producer.abort_transaction(30)
    seen = read_all(cluster.bootstrap_servers, "txn-spread", 3, isolation="read_committed")
    assert {p: [v for _, v in records] for p, records in seen.items()} == \
           {p: [f"committed-{p}".encode()] for p in range(3)}
    for p in range(3):  # markers reached every replica: nothing stays open anywhere
        settle(lambda: all(b.replicas.partitions[("txn-spread", p)].last_stable_offset
                               == b.replicas.partitions[("txn-spread", p)].log_end_offset
                               for b in cluster.brokers.values()), message=f"LSO = LEO on all replicas of {p}")
