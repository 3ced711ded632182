"""Replication between real in-process brokers over the Kafka protocol.

Two or three ``Broker(port=0)`` instances in this process, each on its own
event loop thread.  The tests play the controller: they create the topic on
every broker and hand out leadership with ``replicas.become_leader`` /
``become_follower`` on each broker's loop, with ``resolve_broker`` pointing at
the other brokers' ports and an ISR writer that accepts every change (and
records it), as ZooKeeper would when nobody else wrote.  Followers really
fetch (FetchRequest v12 with replica_id) from the leader's listener; producers
and consumers are kafka-python, confluent-kafka, or ``BrokerClient`` for exact
wire-level requests.
"""
from __future__ import annotations

import asyncio
import threading
import time

import pytest
from confluent_kafka import Producer as ConfluentProducer
from kafka import KafkaProducer
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.producer import ProduceRequest

from broker_sim.config import RACK_AWARE_REPLICA_SELECTOR
from broker_sim.controller.cluster_state import BrokerEndpoint, PartitionState
from broker_sim.replication.client import BrokerClient
from broker_sim.server.broker import Broker
from broker_sim.server.inter_broker import InterBrokerIdentity
from replication_helpers import build_batch
from broker_sim.testing.waiting import wait_until

TOPIC = "replicated"
KEY = (TOPIC, 0)
NOT_LEADER_OR_FOLLOWER = 6
REQUEST_TIMED_OUT = 7
NOT_ENOUGH_REPLICAS = 19
BROKER_CONFIG = {
    "replica.fetch.wait.max.ms": 100,
    "replica.fetch.backoff.ms": 100,
    "replica.lag.time.max.ms": 1500,
    "replica.socket.timeout.ms": 5000,
}
# what ZooKeeper's shared secret gives a real cluster: followers' fetches (and this test's wire requests,
# which play brokers) prove they come from brokers, so they are not refused as clients' follower fetches
IDENTITY = InterBrokerIdentity("replication-test secret")


class TestCluster:
    """Brokers 0..n-1 with hand-made leadership; see the module docstring."""

    __test__ = False

    def __init__(self, size: int, tmp_path, config=None, racks=None) -> None:
        self.racks = list(racks) if racks is not None else [None] * size  # broker i in racks[i] (broker.rack)
        self.brokers = [Broker(tmp_path / f"broker-{i}", broker_id=i, config={
            **BROKER_CONFIG, **(config or {}), **({"broker.rack": self.racks[i]} if self.racks[i] else {})})
            for i in range(size)]
        self.isr_writes: list[tuple[int, tuple]] = []
        self.states: dict[tuple[str, int], PartitionState] = {}
        self._lock = threading.Lock()
        self._isr_checks: dict[int, asyncio.Task] = {}
        for broker in self.brokers:
            broker.inter_broker = IDENTITY
            broker.start()
        for broker in self.brokers:
            self.call(broker, self._install, broker)

    def _install(self, broker) -> None:
        broker.replicas.resolve_broker = self.endpoint
        broker.replicas.isr_writer = self._isr_writer
        broker.replicas.inter_broker_client_id = IDENTITY.client_id
        self._isr_checks[broker.broker_id] = asyncio.get_running_loop().create_task(self._check_isr(broker))

    async def _check_isr(self, broker) -> None:
        every = broker.config.get("replica.lag.time.max.ms") / 2000.0
        while True:
            await asyncio.sleep(every)
            broker.replicas.check_isr()

    def endpoint(self, broker_id: int) -> BrokerEndpoint | None:
        if 0 <= broker_id < len(self.brokers) and self.brokers[broker_id]._thread is not None:
            return BrokerEndpoint(broker_id, "127.0.0.1", self.brokers[broker_id].port, rack=self.racks[broker_id])
        return None

    async def _isr_writer(self, partition, new_isr):
        key = (partition.topic, partition.index)
        with self._lock:
            current = self.states[key]
            if partition.zk_version != current.zk_version or partition.leader_epoch != current.leader_epoch:
                return None  # what ZooKeeper's conditional write does for a stale leader
            new = PartitionState(current.leader, current.leader_epoch, tuple(new_isr), current.controller_epoch,
                                 current.zk_version + 1)
            self.states[key] = new
            self.isr_writes.append((partition.broker_id, tuple(new_isr)))
        return new

    @staticmethod
    def call(broker, fn, *args, timeout: float = 10.0):
        """Run ``fn(*args)`` on the broker's event loop thread and return its result."""
        async def run():
            return fn(*args)
        return asyncio.run_coroutine_threadsafe(run(), broker._loop).result(timeout)

    def create_topic(self, configs=None) -> None:
        for broker in self.brokers:
            self.call(broker, broker.create_topic, TOPIC, 1, dict(configs or {}))

    def elect(self, leader: int, epoch: int, isr, replicas=None, *, followers=None) -> None:
        """The controller's decision for partition 0 of TOPIC, applied on every (running) replica."""
        replicas = list(range(len(self.brokers))) if replicas is None else list(replicas)
        state = PartitionState(leader, epoch, tuple(isr), 1, self.states.get(KEY, PartitionState(0, 0, (), 0, 0))
                               .zk_version + 1)
        with self._lock:
            self.states[KEY] = state
        for broker_id in replicas if followers is None else [leader, *followers]:
            broker = self.brokers[broker_id]
            if broker._thread is None:
                continue
            if broker_id == leader:
                self.call(broker, broker.replicas.become_leader, TOPIC, 0, state, replicas)
            else:
                self.call(broker, broker.replicas.become_follower, TOPIC, 0, state, replicas)

    def partition_info(self, broker_id: int) -> dict:
        broker = self.brokers[broker_id]

        def read():
            p = broker.replicas.partitions[KEY]
            return {"leo": p.log_end_offset, "hw": p.high_watermark, "isr": p.isr, "leader": p.is_leader,
                    "epochs": p.epochs.entries, "bytes": p.log.read_bytes(p.log_start_offset, 1 << 30)}
        return self.call(broker, read)

    def stop_fetching(self, broker_id: int) -> None:
        broker = self.brokers[broker_id]
        self.call(broker, broker.replicas.fetcher.remove_partitions, [KEY])

    def bootstrap(self, broker_id: int) -> str:
        return self.brokers[broker_id].bootstrap_servers

    def close(self) -> None:
        for broker in self.brokers:
            task = self._isr_checks.get(broker.broker_id)
            if broker._thread is not None and task is not None:
                broker._loop.call_soon_threadsafe(task.cancel)
        for broker in self.brokers:
            broker.stop()


@pytest.fixture
def cluster(tmp_path):
    made = []

    def make(size: int, racks=None, **config) -> TestCluster:
        made.append(TestCluster(size, tmp_path, config, racks))
        return made[-1]

    yield make
    for c in made:
        c.close()


def wire(bootstrap: str, *requests):
    """Send requests over one BrokerClient connection (pipelined); the decoded responses in order."""
    host, port = bootstrap.rsplit(":", 1)

    async def run():
        client = BrokerClient(host, int(port), client_id=IDENTITY.client_id("replication-test"), timeout_s=15)
        try:
            return await asyncio.gather(*(client.request(r) for r in requests))
        finally:
            client.close()
    return asyncio.run(run())


def produce_request(values, *, acks: int, timeout_ms: int = 5000):
    return ProduceRequest[9](transactional_id=None, acks=acks, timeout_ms=timeout_ms, topic_data=[
        ProduceRequest.TopicProduceData(name=TOPIC, partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=build_batch(values))])])


def produce_error(response) -> tuple[int, int]:
    answer = response.responses[0].partition_responses[0]
    return answer.error_code, answer.base_offset


def fetch_request(offset: int, *, max_wait_ms: int = 0, version: int = 12, rack: str = ""):
    return FetchRequest[version](
        replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0,
        session_epoch=-1, topics=[FetchRequest.FetchTopic(topic=TOPIC, partitions=[
            FetchRequest.FetchTopic.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20,
                                                   current_leader_epoch=-1, last_fetched_epoch=-1,
                                                   log_start_offset=-1)])],
        forgotten_topics_data=[], rack_id=rack)


def list_latest_request():
    return ListOffsetsRequest[7](replica_id=-1, isolation_level=0, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name=TOPIC, partitions=[
            ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                partition_index=0, current_leader_epoch=-1, timestamp=-1)])])


def fetched_records(response) -> tuple[int, int, list[tuple[int, bytes]]]:
    """(error code, high watermark, (offset, value) of the records returned)."""
    from kafka.record.memory_records import MemoryRecords
    answer = response.responses[0].partitions[0]
    records = []
    memory = MemoryRecords(bytes(answer.records or b""))
    while memory.has_next():
        batch = memory.next_batch()
        if batch is None:
            break
        records.extend((record.offset, bytes(record.value)) for record in batch)
    return answer.error_code, answer.high_watermark, records


def fetched_offsets(response) -> tuple[int, int, list[int]]:
    """(error code, high watermark, offsets of the records returned)."""
    error, hw, records = fetched_records(response)
    return error, hw, [offset for offset, _ in records]


# -- the tests ---------------------------------------------------------------------------------

def test_followers_replicate_byte_identical_logs(cluster):
    c = cluster(3)
    c.create_topic()
    c.elect(leader=0, epoch=1, isr=[0, 1, 2])
    producer = KafkaProducer(bootstrap_servers=c.bootstrap(0), acks=1, linger_ms=5)
    for i in range(200):
        producer.send(TOPIC, key=b"k%d" % i, value=b"value-%d" % i, partition=0)
    producer.flush()
    producer.close()
    leader = wait_until(lambda: (info := c.partition_info(0))["hw"] == 200 and info, timeout_s=10.0,
                        what="leader HW 200", interval_s=0.02)
    for follower in (1, 2):
        info = wait_until(lambda: (i := c.partition_info(follower))["leo"] == 200 and i["hw"] == 200 and i,
                          timeout_s=10.0, what=f"follower {follower} caught up", interval_s=0.02)
        assert info["bytes"] == leader["bytes"], f"follower {follower}'s log differs from the leader's"
        assert info["epochs"] == leader["epochs"] == [(1, 0)]
        assert info["leader"] is False


def test_acks_all_waits_for_the_followers_kafka_python(cluster):
    c = cluster(3)
    c.create_topic({"min.insync.replicas": "2"})
    c.elect(leader=0, epoch=1, isr=[0, 1, 2])
    producer = KafkaProducer(bootstrap_servers=c.bootstrap(0), acks="all", request_timeout_ms=10000)
    for i in range(5):
        metadata = producer.send(TOPIC, value=b"v%d" % i, partition=0).get(timeout=15)
        # acknowledged means in every ISR member's log already
        for follower in (1, 2):
            assert c.partition_info(follower)["leo"] >= metadata.offset + 1
    producer.close()
    assert c.partition_info(0)["hw"] == 5


def test_acks_all_with_confluent_kafka(cluster):
    c = cluster(2)
    c.create_topic({"min.insync.replicas": "2"})
    c.elect(leader=0, epoch=1, isr=[0, 1])
    results = []
    producer = ConfluentProducer({"bootstrap.servers": c.bootstrap(0), "acks": "all",
                                  "enable.idempotence": True, "linger.ms": 5})
    for i in range(50):
        producer.produce(TOPIC, value=b"c%d" % i, partition=0,
                         on_delivery=lambda err, msg: results.append((err, msg.offset())))
    assert producer.flush(20) == 0
    assert [err for err, _ in results] == [None] * 50
    assert sorted(offset for _, offset in results) == list(range(50))
    assert c.partition_info(1)["leo"] == 50
    assert c.partition_info(1)["bytes"] == c.partition_info(0)["bytes"]


def test_not_enough_replicas_when_the_isr_is_below_min_insync(cluster):
    c = cluster(2)
    c.create_topic({"min.insync.replicas": "2"})
    c.elect(leader=0, epoch=1, isr=[0], followers=[])  # the follower is out of the ISR and does not fetch
    (all_acks, one_ack) = wire(c.bootstrap(0), produce_request([b"a"], acks=-1), produce_request([b"b"], acks=1))
    assert produce_error(all_acks)[0] == NOT_ENOUGH_REPLICAS
    assert produce_error(one_ack) == (0, 0), "acks=1 does not need the ISR; nothing was appended before it"


def test_acks_all_times_out_when_an_isr_follower_does_not_fetch(cluster):
    c = cluster(2, **{"replica.lag.time.max.ms": 60000})
    c.create_topic()
    c.elect(leader=0, epoch=1, isr=[0, 1])
    c.stop_fetching(1)
    started = time.monotonic()
    (response,) = wire(c.bootstrap(0), produce_request([b"a"], acks=-1, timeout_ms=400))
    assert produce_error(response)[0] == REQUEST_TIMED_OUT
    assert 0.3 < time.monotonic() - started < 5


def test_a_follower_that_stops_fetching_leaves_the_isr_and_the_hw_moves_on(cluster):
    c = cluster(3)
    c.create_topic()
    c.elect(leader=0, epoch=1, isr=[0, 1, 2])
    wire(c.bootstrap(0), produce_request([b"a", b"b"], acks=-1))
    # follower 2 was caught up until its last fetch, at most replica.fetch.wait.max.ms (+ 0.5 s of scheduling
    # on a loaded machine) before stop() began: measured from there, not from when a slow stop() returns, it
    # may leave the ISR no sooner than replica.lag.time.max.ms.
    # Mutation: maybe_shrink_isr ignoring replica.lag.time.max.ms -> "left the ISR 1.29 s after its last fetch".
    started = time.monotonic() - BROKER_CONFIG["replica.fetch.wait.max.ms"] / 1000.0 - 0.5
    c.brokers[2].stop()  # follower 2 dies
    (response,) = wire(c.bootstrap(0), produce_request([b"c"], acks=1))
    assert produce_error(response) == (0, 2)
    info = wait_until(lambda: (i := c.partition_info(0))["isr"] == (0, 1) and i, timeout_s=30, what="ISR shrink",
                      interval_s=0.02)
    elapsed = time.monotonic() - started
    lag_s = BROKER_CONFIG["replica.lag.time.max.ms"] / 1000.0
    assert elapsed >= lag_s, f"the follower left the ISR {elapsed:.2f} s after its last fetch, before " \
                             f"replica.lag.time.max.ms ({lag_s} s)"
    assert (0, (0, 1)) in c.isr_writes
    wait_until(lambda: c.partition_info(0)["hw"] == 3, timeout_s=10.0, what="HW advancing without the dead follower",
               interval_s=0.02)
    (response,) = wire(c.bootstrap(0), produce_request([b"d"], acks=-1, timeout_ms=5000))
    assert produce_error(response) == (0, 3)
    assert info["leader"] is True


def test_a_follower_that_catches_up_rejoins_the_isr(cluster):
    c = cluster(2)
    c.create_topic()
    c.elect(leader=0, epoch=1, isr=[0])
    wire(c.bootstrap(0), produce_request([b"a", b"b", b"c"], acks=1))
    wait_until(lambda: c.partition_info(0)["isr"] == (0, 1), timeout_s=10.0, what="ISR expansion", interval_s=0.02)
    assert (0, (0, 1)) in c.isr_writes
    assert c.partition_info(1)["leo"] == 3


def test_a_divergent_follower_is_truncated_to_the_new_leaders_log(cluster):
    c = cluster(2, **{"replica.lag.time.max.ms": 60000})
    c.create_topic()
    c.elect(leader=0, epoch=1, isr=[0, 1])
    wire(c.bootstrap(0), produce_request([b"a", b"b"], acks=-1))
    wait_until(lambda: c.partition_info(1)["leo"] == 2, timeout_s=10.0, what="replication of the first records",
               interval_s=0.02)
    c.stop_fetching(1)
    # broker 0 appends at epoch 1 what broker 1 never gets (acks=1), then loses leadership
    (response,) = wire(c.bootstrap(0), produce_request([b"lost-1", b"lost-2", b"lost-3"], acks=1))
    assert produce_error(response) == (0, 2)
    assert c.partition_info(0)["leo"] == 5
    c.elect(leader=1, epoch=2, isr=[1], followers=[])
    (response,) = wire(c.bootstrap(1), produce_request([b"new-1"], acks=1))
    assert produce_error(response) == (0, 2)
    c.elect(leader=1, epoch=2, isr=[1], followers=[0])  # broker 0 learns of the change and follows
    old = wait_until(lambda: (i := c.partition_info(0))["leo"] == 3 and i, timeout_s=10.0,
                     what="truncation and catch-up", interval_s=0.02)
    new = c.partition_info(1)
    assert old["bytes"] == new["bytes"], "the divergent tail was not replaced by the new leader's records"
    assert old["epochs"] == new["epochs"] == [(1, 0), (2, 2)]
    wait_until(lambda: c.partition_info(1)["isr"] == (0, 1), timeout_s=10.0, what="old leader rejoining the ISR",
               interval_s=0.02)
    assert wire(c.bootstrap(1), fetch_request(0))[0].responses[0].partitions[0].error_code == 0


def test_consumers_never_see_offsets_above_the_high_watermark(cluster):
    c = cluster(2, **{"replica.lag.time.max.ms": 60000})
    c.create_topic()
    c.elect(leader=0, epoch=1, isr=[0, 1])
    wire(c.bootstrap(0), produce_request([b"a", b"b"], acks=-1))
    c.stop_fetching(1)
    wire(c.bootstrap(0), produce_request([b"c", b"d", b"e"], acks=1))
    assert c.partition_info(0)["leo"] == 5
    fetched, latest, waited = wire(c.bootstrap(0), fetch_request(0), list_latest_request(),
                                   fetch_request(2, max_wait_ms=300))
    assert fetched_offsets(fetched) == (0, 2, [0, 1])
    assert latest.topics[0].partitions[0].offset == 2
    assert fetched_offsets(waited) == (0, 2, []), "uncommitted records must not be served"
    # the follower comes back; a consumer long-polling at the HW wakes when the HW moves
    c.elect(leader=0, epoch=1, isr=[0, 1], followers=[1])
    (fetched,) = wire(c.bootstrap(0), fetch_request(2, max_wait_ms=5000))
    error, hw, offsets = fetched_offsets(fetched)
    assert error == 0 and offsets and offsets[0] == 2 and max(offsets) < hw <= 5


def test_followers_refuse_client_requests_and_replica_fetches(cluster):
    """A follower refuses produce, ListOffsets, replica fetches and consumer fetches before v11; a v11+
    consumer fetch it serves (KIP-392: any replica may serve it, up to its high watermark)."""
    c = cluster(2)
    c.create_topic()
    c.elect(leader=0, epoch=1, isr=[0, 1])
    replica_fetch = fetch_request(0)
    replica_fetch.replica_id = 0
    produced, fetched, latest, from_replica, fetched_v12 = wire(
        c.bootstrap(1), produce_request([b"x"], acks=1), fetch_request(0, version=10), list_latest_request(),
        replica_fetch, fetch_request(0))
    assert produce_error(produced)[0] == NOT_LEADER_OR_FOLLOWER
    assert fetched.responses[0].partitions[0].error_code == NOT_LEADER_OR_FOLLOWER
    assert fetched_v12.responses[0].partitions[0].error_code == 0
    assert latest.topics[0].partitions[0].error_code == NOT_LEADER_OR_FOLLOWER
    assert from_replica.responses[0].partitions[0].error_code == NOT_LEADER_OR_FOLLOWER


def test_a_follower_serves_consumers_only_below_its_own_high_watermark(cluster):
    """KIP-392: a follower answering a v11+ consumer fetch reads up to its high watermark (the leader's, as
    the follower last learned it, at most its log end offset), never the records it holds above it."""
    c = cluster(3, **{"replica.lag.time.max.ms": 60000})
    c.create_topic()
    c.elect(leader=0, epoch=1, isr=[0, 1, 2])
    wire(c.bootstrap(0), produce_request([b"a", b"b"], acks=-1))
    c.stop_fetching(2)  # in the ISR but no longer fetching: the high watermark stays at 2
    wire(c.bootstrap(0), produce_request([b"c", b"d", b"e"], acks=1))
    follower = wait_until(lambda: (i := c.partition_info(1))["leo"] == 5 and i, timeout_s=10.0,
                          what="follower 1 holding 2-4", interval_s=0.02)
    assert c.partition_info(0)["hw"] == 2 and follower["leader"] is False
    fetched, at_hw = wire(c.bootstrap(1), fetch_request(0), fetch_request(2, max_wait_ms=200))
    assert fetched_records(at_hw) == (0, 2, []), "a follower served records above its high watermark"
    assert fetched_records(fetched) == (0, 2, [(0, b"a"), (1, b"b")])
    assert c.partition_info(1)["hw"] == 2


RACKS = ["r0", "r1", "r2"]


def preferred_read_replica(c, rack: str) -> int:
    """The leader's (broker 0's) answer to a consumer in ``rack`` fetching offset 0 (-1: read from me)."""
    (response,) = wire(c.bootstrap(0), fetch_request(0, rack=rack))
    answer = response.responses[0].partitions[0]
    assert answer.error_code == 0
    return answer.preferred_read_replica


def test_the_preferred_read_replica_is_never_a_follower_outside_the_isr(cluster):
    """KIP-392 (``replica_selector``): the leader names only followers in the ISR (Kafka's
    ``ReplicaManager.findPreferredReadReplica``); one that left it is no longer named, though it is in the
    consumer's rack and was named while in sync."""
    c = cluster(3, racks=RACKS, **{"replica.selector.class": RACK_AWARE_REPLICA_SELECTOR})
    c.create_topic()
    c.elect(leader=0, epoch=1, isr=[0, 1, 2])
    wire(c.bootstrap(0), produce_request([b"a", b"b"], acks=-1))  # both followers have fetched offset 2
    assert [preferred_read_replica(c, rack) for rack in RACKS] == [-1, 1, 2]
    c.stop_fetching(2)
    wire(c.bootstrap(0), produce_request([b"c"], acks=1))  # follower 2 falls behind, out after replica.lag.time.max.ms
    wait_until(lambda: c.partition_info(0)["isr"] == (0, 1), timeout_s=30, what="follower 2 leaving the ISR",
               interval_s=0.02)
    assert [preferred_read_replica(c, rack) for rack in RACKS] == [-1, 1, -1], \
        "a follower outside the ISR was named the preferred read replica"


@pytest.mark.parametrize("side", ["leader", "follower"])
def test_a_replication_throttle_never_holds_back_a_replica_in_the_isr(cluster, side):
    """KIP-73 (``replication/throttle.py``): with ``<side>.replication.throttled.rate`` far exceeded, a
    throttled follower that is in the ISR still gets every record at once (its bytes counted), so acks=all
    produces keep their latency; only replicas outside the ISR wait for the quota."""
    c = cluster(2, **{f"{side}.replication.throttled.rate": 1, "replica.lag.time.max.ms": 60000})
    c.create_topic({f"{side}.replication.throttled.replicas": "*"})
    c.elect(leader=0, epoch=1, isr=[0, 1])
    throttling = c.brokers[0 if side == "leader" else 1]
    quota = getattr(throttling.replicas.throttles, side)
    value = b"x" * 10_000
    latencies = []
    for i in range(10):
        started = time.monotonic()
        (response,) = wire(c.bootstrap(0), produce_request([value], acks=-1, timeout_ms=5000))
        latencies.append(time.monotonic() - started)
        assert produce_error(response) == (0, i), f"acks=all produce {i} with the in-sync follower throttled"
    assert max(latencies) < 2.5, f"acks=all latencies {latencies}: the in-sync follower was held back"
    assert c.partition_info(1)["leo"] == 10
    counted = c.call(throttling, lambda: (quota.recorded_bytes, quota.exceeded()))
    assert counted[0] >= 10 * len(value) and counted[1], \
        f"the {side} quota (1 byte/s) was not in force: {counted} (recorded bytes, exceeded)"


def test_stopping_a_broker_stops_its_fetchers(cluster):
    """stop() returns only once the broker's thread has ended and every fetcher task is finished.

    Mutation: ``_close`` hanging (an ``await asyncio.sleep(3600)``) -> stop() raised BrokerStopError (before
    this fix stop() cleared its thread reference and the test passed).
    """
    c = cluster(2)
    c.create_topic()
    c.elect(leader=0, epoch=1, isr=[0, 1])
    wait_until(lambda: c.call(c.brokers[1], lambda: c.brokers[1].replicas.fetcher.sources[0].fetches) > 2,
               timeout_s=10.0, what="fetching", interval_s=0.02)
    follower = c.brokers[1]
    thread = follower._thread
    tasks = c.call(follower, lambda: [s.task for s in follower.replicas.fetcher.sources.values()])
    assert tasks and all(t is not None and not t.done() for t in tasks)
    follower.stop(timeout=10)
    assert not thread.is_alive(), "stop() returned with the broker's thread still running"
    assert all(t.done() for t in tasks), "a fetcher task outlived its broker"
    assert not [t for t in threading.enumerate() if t.name == thread.name]


def test_stop_reports_a_broker_that_does_not_stop(tmp_path):
    """A broker whose shutdown hangs: stop() raises naming the broker, keeps it stoppable, and a second
    stop() after the hang ends succeeds."""
    from broker_sim.server.broker import Broker, BrokerStopError

    broker = Broker(tmp_path / "b").start()
    release = threading.Event()
    original = broker._close

    async def hanging_close():
        while not release.is_set():
            await asyncio.sleep(0.05)
        await original()

    broker._close = hanging_close
    with pytest.raises(BrokerStopError, match=r"broker 0 did not stop within 0.5 s"):
        broker.stop(timeout=0.5)
    assert broker._thread is not None and broker._thread.is_alive()
    release.set()
    broker.stop(timeout=30)
    assert broker._thread is None


def test_a_follower_behind_the_leaders_log_start_restarts_there_and_follows_it(cluster):
    c = cluster(2)
    c.create_topic()
    c.elect(leader=0, epoch=1, isr=[0], followers=[])
    wire(c.bootstrap(0), produce_request([b"a", b"b", b"c", b"d"], acks=1))
    c.call(c.brokers[0], c.brokers[0].replicas.partitions[KEY].delete_records_before, 3)
    c.elect(leader=0, epoch=1, isr=[0], followers=[1])
    follower = wait_until(lambda: (i := c.partition_info(1))["leo"] == 4 and i, timeout_s=10.0,
                          what="follower catch-up", interval_s=0.02)
    leader = c.partition_info(0)
    assert follower["bytes"] == leader["bytes"]
    assert c.call(c.brokers[1], lambda: c.brokers[1].replicas.partitions[KEY].log_start_offset) == 3
    wire(c.bootstrap(0), produce_request([b"e"], acks=-1))
    c.call(c.brokers[0], c.brokers[0].replicas.partitions[KEY].delete_records_before, 5)
    wait_until(lambda: c.call(c.brokers[1], lambda: c.brokers[1].replicas.partitions[KEY].log_start_offset) == 5,
               timeout_s=10.0, what="the follower following the leader's log start offset", interval_s=0.02)


def test_transactions_replicate_with_markers_and_aborted_index(cluster):
    c = cluster(2)
    c.create_topic()
    c.elect(leader=0, epoch=1, isr=[0, 1])
    producer = KafkaProducer(bootstrap_servers=c.bootstrap(0), transactional_id="replicated-txn", acks="all")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send(TOPIC, value=b"aborted", partition=0)
    producer.flush()  # unsent records would just be dropped by the abort
    producer.abort_transaction()
    producer.begin_transaction()
    producer.send(TOPIC, value=b"committed", partition=0)
    producer.commit_transaction()
    producer.close()

    def txn_view(broker_id):
        broker = c.brokers[broker_id]

        def view():
            p = broker.replicas.partitions[KEY]
            return (p.log_end_offset, p.aborted_transactions(0, p.log_end_offset),
                    dict(p.producers.ongoing_transactions()), p.log.read_bytes(0, 1 << 30))
        return c.call(broker, view)

    leader = wait_until(lambda: (v := txn_view(0))[0] == 4 and v, timeout_s=10.0, what="both markers on the leader",
                        interval_s=0.02)
    follower = wait_until(lambda: (v := txn_view(1))[0] == 4 and v, timeout_s=10.0, what="both markers on the follower",
                          interval_s=0.02)
    assert follower == leader
    assert leader[1] == [(leader[1][0][0], 0)] and leader[2] == {}


def test_failover_keeps_every_acks_all_record_and_the_old_leader_rejoins_as_a_follower(cluster, tmp_path):
    """Every acks=all record is read back with its own value at the offset it was acknowledged at.

    Mutation: follower truncation skipped (truncate_for_epoch_end returning at once) -> "the old leader
    caught up after truncation not reached"; the final read compares values, not only offsets, so a log with
    the right offsets but other records (e.g. the unreplicated one) fails too.
    """
    c = cluster(3, **{"replica.lag.time.max.ms": 60000})
    c.create_topic({"min.insync.replicas": "2"})
    c.elect(leader=0, epoch=1, isr=[0, 1, 2])
    acked = {}  # offset -> value, as acknowledged
    for i in range(10):
        (response,) = wire(c.bootstrap(0), produce_request([b"acked-%d" % i], acks=-1))
        assert produce_error(response)[0] == 0
        acked[produce_error(response)[1]] = b"acked-%d" % i
    # the leader takes unreplicated records with it when it dies: followers stop fetching first
    c.stop_fetching(1)
    c.stop_fetching(2)
    (response,) = wire(c.bootstrap(0), produce_request([b"unreplicated"], acks=1))
    assert produce_error(response) == (0, 10)
    c.brokers[0].stop()
    c.elect(leader=1, epoch=2, isr=[1, 2])  # the controller's failover: a live ISR member, epoch + 1
    for i in range(5):
        (response,) = wire(c.bootstrap(1), produce_request([b"after-%d" % i], acks=-1))
        assert produce_error(response) == (0, 10 + i), "acks=all through the new leader and follower 2"
        acked[10 + i] = b"after-%d" % i
    # the old leader restarts on its data dir and is told to follow
    restarted = Broker(tmp_path / "broker-0", broker_id=0, config=BROKER_CONFIG, port=0).start()
    c.brokers[0] = restarted  # on a new port: resolve_broker answers with it
    c.call(restarted, c._install, restarted)
    c.elect(leader=1, epoch=2, isr=[1, 2], followers=[0])
    wait_until(lambda: c.partition_info(0)["leo"] == 15, timeout_s=10.0,
               what="the old leader caught up after truncation", interval_s=0.02)
    new_leader = c.partition_info(1)
    for broker_id in (0, 2):
        info = c.partition_info(broker_id)
        assert info["bytes"] == new_leader["bytes"], f"broker {broker_id} diverges from the new leader"
        assert info["epochs"] == new_leader["epochs"] == [(1, 0), (2, 10)]
    wait_until(lambda: c.partition_info(1)["isr"] == (0, 1, 2), timeout_s=10.0, what="the old leader back in the ISR",
               interval_s=0.02)
    (fetched,) = wire(c.bootstrap(1), fetch_request(0))
    error, hw, records = fetched_records(fetched)
    assert error == 0 and hw == 15
    assert dict(records) == acked, "the log is not exactly the acknowledged values at their offsets"
    assert b"unreplicated" not in dict(records).values()


def _request_counter(broker):
    """The number of replica requests (Fetch, OffsetForLeaderEpoch) ``broker`` has answered, as /metrics has it."""
    def count() -> int:
        return broker.metrics.request_count("Fetch", "OffsetForLeaderEpoch")
    return count


def test_a_follower_that_learns_of_the_epoch_before_its_leader_backs_off_and_then_replicates(cluster):
    c = cluster(2)
    c.create_topic()
    wire(c.bootstrap(0), produce_request([b"a", b"b"], acks=1))  # broker 0 leads at epoch 0 (single node)
    state = PartitionState(0, 3, (0, 1), 1, 1)
    with c._lock:
        c.states[KEY] = state
    asked = _request_counter(c.brokers[0])
    before = asked()
    c.call(c.brokers[1], c.brokers[1].replicas.become_follower, TOPIC, 0, state, [0, 1])
    # broker 1 asks at epoch 3, broker 0 is at 0: UNKNOWN_LEADER_EPOCH, backoff (100 ms), retry
    arrivals = []
    deadline = time.monotonic() + 10
    while len(arrivals) < 4:
        assert time.monotonic() < deadline, f"the follower asked {len(arrivals)} times in 10 s: it did not retry"
        now = asked()
        if now > before + len(arrivals):
            arrivals.append(time.monotonic())
        time.sleep(0.005)
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:])]
    assert min(gaps) >= 0.08, f"retries {gaps} s apart: no replica.fetch.backoff.ms (100 ms) between them"
    assert c.partition_info(1)["leo"] == 0
    c.call(c.brokers[0], c.brokers[0].replicas.become_leader, TOPIC, 0, state, [0, 1])
    follower = wait_until(lambda: (i := c.partition_info(1))["leo"] == 2 and i, timeout_s=10.0,
                          what="replication after the epoch", interval_s=0.02)
    assert follower["bytes"] == c.partition_info(0)["bytes"]
    wait_until(lambda: c.partition_info(0)["hw"] == 2, timeout_s=10.0, what="HW", interval_s=0.02)
