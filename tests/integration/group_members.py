"""Consumer-group members of every client, each polling in its own thread, for the group tests.

Theory of operation: a ``Member`` wraps one subscribed consumer (kafka-python,
confluent-kafka or aiokafka) and polls it in a daemon thread, so several
members of one group make progress at once, as separate processes would.
Tests look only at ``partitions()`` (what the member owns now) and
``records`` (what it consumed); ``stop()`` closes the consumer, which leaves
the group.  Heartbeats are short (500 ms) so rebalances take about a second.
``KILLABLE_MEMBER`` is the script a test runs in a subprocess to SIGKILL it.
"""
from __future__ import annotations

import asyncio
import threading

HEARTBEAT_MS = 500
POLL_MS = 2000  # kafka-python's poll; see KafkaPythonMember.run
SESSION_MS = 6000


class Member:
    client = "?"

    def __init__(self, bootstrap: str, topic: str, group: str, *, strategy: str = "range",
                 offset_reset: str = "earliest", session_ms: int = SESSION_MS) -> None:
        self.bootstrap, self.topic, self.group = bootstrap, topic, group
        self.strategy, self.offset_reset, self.session_ms = strategy, offset_reset, session_ms
        self.records: list[tuple[int, int, bytes]] = []  # (partition, offset, value)
        self.error: BaseException | None = None
        self._owned: frozenset[int] = frozenset()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, name=f"{self.client}-{group}", daemon=True)

    def start(self) -> "Member":
        self._thread.start()
        return self

    def _own(self, assignment) -> None:
        """Record the partitions of a client's ``assignment()`` (TopicPartitions) as what this member owns."""
        self._owned = frozenset(tp.partition for tp in assignment)

    def partitions(self) -> frozenset[int]:
        if self.error is not None:
            raise AssertionError(f"{self.client} member failed: {self.error!r}") from self.error
        return self._owned

    def stop(self, timeout: float = 20) -> None:
        self._stop.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"{self.client} member did not close within {timeout} s"

    def _main(self) -> None:
        try:
            self.run()
        except BaseException as exc:  # reported to the test through partitions()
            self.error = exc

    def run(self) -> None:
        raise NotImplementedError


class KafkaPythonMember(Member):
    client = "kafka-python"

    def run(self) -> None:
        from kafka import ConsumerRebalanceListener, KafkaConsumer
        from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
        from kafka.coordinator.assignors.range import RangePartitionAssignor
        from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
        assignor = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
                    "cooperative-sticky": CooperativeStickyAssignor}[self.strategy]
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=self.group,
                                 auto_offset_reset=self.offset_reset, partition_assignment_strategy=[assignor],
                                 session_timeout_ms=self.session_ms, heartbeat_interval_ms=HEARTBEAT_MS,
                                 fetch_max_wait_ms=100, enable_auto_commit=False)
        member = self

        class Owned(ConsumerRebalanceListener):  # what the member owns, as soon as a rebalance assigns it
            def on_partitions_revoked(self, revoked):
                pass

            def on_partitions_assigned(self, assigned):
                member._own(consumer.assignment())

        # kafka-python 3.0.12 loses a join in flight when the group leader rejoins on its own (its metadata
        # snapshot changed after it assigned) and poll() times out mid-join: the next poll sees no rejoin needed
        # (the assignment refreshed the snapshot), never completes the join, and the member stops heartbeating
        # in "rebalancing" with its old partitions until the broker expires it. Seen here under load with
        # poll(timeout_ms=300): the broker had answered its SyncGroup. Know the partitions before subscribing,
        # and poll long enough that a join ends within the poll that started it.
        consumer.partitions_for_topic(self.topic)
        consumer.subscribe([self.topic], listener=Owned())
        try:
            while not self._stop.is_set():
                for batch in consumer.poll(timeout_ms=POLL_MS).values():
                    self.records.extend((m.partition, m.offset, m.value) for m in batch)
                self._own(consumer.assignment())
            consumer.commit()
        finally:
            consumer.close()


class ConfluentMember(Member):
    client = "confluent-kafka"

    def run(self) -> None:
        from confluent_kafka import Consumer
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group,
                             "auto.offset.reset": self.offset_reset, "partition.assignment.strategy": self.strategy,
                             "session.timeout.ms": self.session_ms, "heartbeat.interval.ms": HEARTBEAT_MS,
                             "fetch.wait.max.ms": 100, "enable.auto.commit": False})
        consumer.subscribe([self.topic])
        try:
            while not self._stop.is_set():
                for m in consumer.consume(num_messages=100, timeout=0.1):
                    if m.error() is None:
                        self.records.append((m.partition(), m.offset(), m.value()))
                self._own(consumer.assignment())
            if self.records:
                consumer.commit(asynchronous=False)
        finally:
            consumer.close()


class AiokafkaMember(Member):
    client = "aiokafka"

    def run(self) -> None:
        asyncio.run(self._run())

    async def _run(self) -> None:
        from aiokafka import AIOKafkaConsumer
        from aiokafka.coordinator.assignors.range import RangePartitionAssignor
        from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
        assignor = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}[self.strategy]
        consumer = AIOKafkaConsumer(self.topic, bootstrap_servers=self.bootstrap, group_id=self.group,
                                    auto_offset_reset=self.offset_reset, partition_assignment_strategy=[assignor],
                                    session_timeout_ms=self.session_ms, heartbeat_interval_ms=HEARTBEAT_MS,
                                    fetch_max_wait_ms=100, enable_auto_commit=False)
        await consumer.start()
        try:
            while not self._stop.is_set():
                for batch in (await consumer.getmany(timeout_ms=100)).values():
                    self.records.extend((m.partition, m.offset, m.value) for m in batch)
                self._own(consumer.assignment())
            if self.records:
                await consumer.commit()
        finally:
            await consumer.stop()


MEMBERS = {cls.client: cls for cls in (KafkaPythonMember, ConfluentMember, AiokafkaMember)}


def split_evenly(members, partitions: int):
    """The members' partitions when they own every partition exactly once, all of them something; else None."""
    owned = [m.partitions() for m in members]
    every = sorted(p for parts in owned for p in parts)
    if every == list(range(partitions)) and all(owned):
        return owned
    return None


KILLABLE_MEMBER = """
import sys
from kafka import KafkaConsumer
bootstrap, topic, group = sys.argv[1:4]
consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, session_timeout_ms=6000,
                         heartbeat_interval_ms=500, fetch_max_wait_ms=100, auto_offset_reset="earliest")
consumer.partitions_for_topic(topic)
consumer.subscribe([topic])
owned = None
while True:
    consumer.poll(timeout_ms=300)
    now = sorted(tp.partition for tp in consumer.assignment())
    if now != owned:
        owned = now
        print("owns", *now, flush=True)
"""
