"""The kit's broker clock: time-driven behaviour happens after ``pylog_clock.advance``, in about a second, where
real time would take minutes or days (broker_sim/testing/timing.py's table)."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic
from kafka.structs import TopicPartition

from broker_sim.testing.timing import FAST_TIMERS, BrokerClock
from broker_sim.testing.waiting import wait_until


def test_the_clock_runs_with_the_wall_and_moves_only_forward():
    clock = BrokerClock()
    before = time.time() * 1000
    assert before - 5 <= clock() <= time.time() * 1000 + 5
    clock.advance(days=1, ms=5)
    assert clock.offset_ms == 86_400_005
    assert clock() - time.time() * 1000 == pytest.approx(86_400_005, abs=50)
    with pytest.raises(ValueError, match="never goes back"):
        clock.advance(seconds=-1)


def _topic(bootstrap: str, name: str, configs: dict | None = None) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(name, 1, 1, topic_configs=configs or {})])
    finally:
        admin.close()


def _offsets(bootstrap: str, topic: str, isolation: str = "read_uncommitted") -> tuple[int, int]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation)
    try:
        tp = TopicPartition(topic, 0)
        return consumer.beginning_offsets([tp])[tp], consumer.end_offsets([tp])[tp]
    finally:
        consumer.close()


def test_retention_by_time_deletes_records_after_the_clock_passes_retention_ms(pylog_clocked_broker, pylog_clock):
    bootstrap = pylog_clocked_broker.bootstrap_servers
    _topic(bootstrap, "aging", {"retention.ms": "3600000"})   # one hour
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(10):
        producer.send("aging", f"v{i}".encode())
    producer.flush(10)
    producer.close()
    time.sleep(1.5)   # two retention passes on the real clock: nothing is an hour old yet
    assert _offsets(bootstrap, "aging") == (0, 10)
    started = time.monotonic()
    pylog_clock.advance(hours=2)
    wait_until(lambda: _offsets(bootstrap, "aging")[0] == 10, timeout_s=10,
               what="retention to delete the two-hour-old records")
    assert time.monotonic() - started < 5


def test_a_transaction_past_its_timeout_is_aborted_after_an_advance(pylog_clocked_broker, pylog_clock):
    bootstrap = pylog_clocked_broker.bootstrap_servers
    _topic(bootstrap, "txn-aging")
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "aging-txn",
                         "transaction.timeout.ms": 60000})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(5):
        producer.produce("txn-aging", f"v{i}".encode())
    producer.flush(30)
    time.sleep(0.5)
    assert _offsets(bootstrap, "txn-aging", "read_committed")[1] == 0   # open: the LSO stays at 0
    pylog_clock.advance(minutes=2)
    # the coordinator aborts it: the abort marker moves the LSO past the five records
    wait_until(lambda: _offsets(bootstrap, "txn-aging", "read_committed")[1] == 6, timeout_s=10,
               what="the timed-out transaction's abort")


def _members(bootstrap: str, group: str) -> int:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    return len(admin.describe_consumer_groups([group])[group].result(10).members)


def test_a_static_member_that_went_away_expires_after_its_session_timeout(pylog_clocked_broker, pylog_clock):
    """A static member does not leave on close (KIP-345): the group keeps it until session.timeout.ms
    has passed on the broker's clock. An advance past it removes the member at once, not after 45 s."""
    bootstrap = pylog_clocked_broker.bootstrap_servers
    _topic(bootstrap, "static-in")
    consumer = KafkaConsumer("static-in", bootstrap_servers=bootstrap, group_id="static-group",
                             group_instance_id="worker-1", session_timeout_ms=45000, heartbeat_interval_ms=3000,
                             # a leader that assigned before its metadata had the new topic ("No partition
                             # metadata") rejoins at its next refresh: every 0.5 s, not kafka-python's 5 min
                             metadata_max_age_ms=500)
    wait_until(lambda: consumer.poll(timeout_ms=200) is not None and consumer.assignment(), timeout_s=20,
               what="the static member's assignment")
    consumer.close(autocommit=False)
    time.sleep(0.5)
    assert _members(bootstrap, "static-group") == 1
    started = time.monotonic()
    pylog_clock.advance(seconds=46)
    wait_until(lambda: _members(bootstrap, "static-group") == 0, timeout_s=10,
               what="the expired static member's removal")
    assert time.monotonic() - started < 5


def test_fast_timers_are_broker_configs_kafka_knows(pylog_broker_factory):
    """Every FAST_TIMERS key is a broker config (a typo would be refused at the start, naming it)."""
    broker = pylog_broker_factory(config=FAST_TIMERS)
    assert {key: str(broker.config.get(key)) for key in FAST_TIMERS} == FAST_TIMERS


def test_an_empty_groups_committed_offsets_expire_after_offsets_retention(pylog_clocked_broker, pylog_clock):
    from kafka.structs import OffsetAndMetadata

    bootstrap = pylog_clocked_broker.bootstrap_servers
    _topic(bootstrap, "committed")
    tp = TopicPartition("committed", 0)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id="expiring", enable_auto_commit=False)
    consumer.assign([tp])
    consumer.commit({tp: OffsetAndMetadata(0, "", -1)})
    consumer.close(autocommit=False)
    reader = KafkaConsumer(bootstrap_servers=bootstrap, group_id="expiring", enable_auto_commit=False)
    try:
        assert reader.committed(tp) == 0
        pylog_clock.advance(days=7, hours=1)   # offsets.retention.minutes: Kafka's default, 7 days
        wait_until(lambda: reader.committed(tp) is None, timeout_s=10, what="the empty group's offsets to expire")
    finally:
        reader.close(autocommit=False)
