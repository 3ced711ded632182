"""Kafka transactions with real clients: commit, abort, read_committed, offsets in transactions, fencing,
restarts and timeouts.

Producers are kafka-python's ``KafkaProducer(transactional_id=...)`` and
confluent-kafka's ``Producer({"transactional.id": ...})``; consumers in
``read_committed`` (kafka-python, confluent-kafka, aiokafka, kcat) must see
exactly the committed records, in order, and ``read_uncommitted`` ones
everything.  Consumers assign partitions themselves and stop at the expected
count or a deadline.
"""
from __future__ import annotations

import asyncio
import json
import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
from kafka.errors import InvalidProducerEpochError, KafkaError, KafkaTimeoutError, ProducerFencedError

from client_helpers import create_topic, kcat
from broker_sim.testing.waiting import wait_until

FAST_TIMEOUTS = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"}


def _producer(bootstrap: str, txn_id: str, **config) -> KafkaProducer:
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id, linger_ms=5, **config)
    producer.init_transactions()
    return producer


def _send(producer: KafkaProducer, topic: str, values, partition: int | None = None) -> None:
    for value in values:
        producer.send(topic, value=value, partition=partition)
    producer.flush(10)


def consume_kafka_python(bootstrap, topic, expected, *, partitions=(0,), isolation="read_committed",
                         settle: float = 0.5, timeout: float = 10) -> list[bytes]:
    """Values read from the start; waits ``settle`` s past ``expected`` so extra records would show."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", fetch_max_wait_ms=100, isolation_level=isolation)
    try:
        consumer.assign([TopicPartition(topic, p) for p in partitions])
        out: list[bytes] = []
        deadline = time.monotonic() + timeout
        settled = None
        while time.monotonic() < deadline and (settled is None or time.monotonic() < settled):
            for batch in consumer.poll(timeout_ms=100).values():
                out.extend(m.value for m in batch)
            if len(out) >= expected and settled is None:
                settled = time.monotonic() + settle
        return out
    finally:
        consumer.close()


def consume_confluent(bootstrap, topic, expected, *, partitions=(0,), settle: float = 0.5,
                      timeout: float = 10) -> list[bytes]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition as CTopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "txn-reader", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "fetch.wait.max.ms": 100})
    try:
        consumer.assign([CTopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        out: list[bytes] = []
        deadline = time.monotonic() + timeout
        settled = None
        while time.monotonic() < deadline and (settled is None or time.monotonic() < settled):
            for m in consumer.consume(1000, timeout=0.1):
                assert not m.error(), m.error()
                out.append(m.value())
            if len(out) >= expected and settled is None:
                settled = time.monotonic() + settle
        return out
    finally:
        consumer.close()


def consume_aiokafka(bootstrap, topic, expected, *, partitions=(0,), settle: float = 0.5,
                     timeout: float = 10) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, TopicPartition as ATopicPartition

    async def run():
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                    auto_offset_reset="earliest", fetch_max_wait_ms=100,
                                    isolation_level="read_committed")
        await consumer.start()
        try:
            consumer.assign([ATopicPartition(topic, p) for p in partitions])
            out: list[bytes] = []
            deadline = time.monotonic() + timeout
            settled = None
            while time.monotonic() < deadline and (settled is None or time.monotonic() < settled):
                for batch in (await consumer.getmany(timeout_ms=100)).values():
                    out.extend(m.value for m in batch)
                if len(out) >= expected and settled is None:
                    settled = time.monotonic() + settle
            return out
        finally:
            await consumer.stop()

    return asyncio.run(asyncio.wait_for(run(), timeout + 15))


def _state(bootstrap: str, txn_id: str) -> str:
    """The transaction's state as DescribeTransactions answers it."""
    from kafka.protocol.admin import DescribeTransactionsRequest

    from kafka_wire import WireClient
    with WireClient(bootstrap) as client:
        answer = client.call(DescribeTransactionsRequest[0](transactional_ids=[txn_id]))
    return answer.transaction_states[0].transaction_state


def _stable_and_end(bootstrap: str, topic: str) -> tuple[int, int]:
    """(last stable offset, high watermark) of partition 0: ListOffsets latest read_committed, read_uncommitted."""
    from kafka.protocol.consumer import ListOffsetsRequest

    from kafka_wire import WireClient

    def latest(client, isolation):
        return client.call(ListOffsetsRequest[7](replica_id=-1, isolation_level=isolation, topics=[
            ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
                ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                    partition_index=0, current_leader_epoch=-1, timestamp=-1)])])).topics[0].partitions[0].offset
    with WireClient(bootstrap) as client:
        return latest(client, 1), latest(client, 0)


@pytest.fixture(params=["pylog", "kafka"])
def fast_timeouts_broker(request):
    """A fresh broker_sim or Apache Kafka node that looks for timed-out transactions every 200 ms."""
    factory = "pylog_broker_factory" if request.param == "pylog" else "kafka_broker_factory"
    return request.getfixturevalue(factory)(config=FAST_TIMEOUTS)


# --- commit and abort -------------------------------------------------------------------------------

@pytest.fixture
def mixed_log(any_broker, unique):
    """Partition 0 of ``mixed``: committed, aborted, committed again, interleaved with an aborted
    transaction of a second producer and plain records; what read_committed must return."""
    bootstrap = any_broker.bootstrap_servers
    mixed = unique("mixed")
    create_topic(bootstrap, mixed, 1)
    first = _producer(bootstrap, unique("first"))
    second = _producer(bootstrap, unique("second"))
    plain = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        first.begin_transaction()
        _send(first, mixed, [b"c0", b"c1"])
        second.begin_transaction()
        _send(second, mixed, [b"x0"])
        _send(plain, mixed, [b"p0"])
        _send(first, mixed, [b"c2"])
        first.commit_transaction()
        first.begin_transaction()
        _send(first, mixed, [b"a0", b"a1"])
        _send(second, mixed, [b"x1"])
        first.abort_transaction()
        second.abort_transaction()
        first.begin_transaction()
        _send(first, mixed, [b"c3"])
        first.commit_transaction()
    finally:
        for producer in (first, second, plain):
            producer.close(timeout=5)
    return bootstrap, mixed, [b"c0", b"c1", b"p0", b"c2", b"c3"], [b"c0", b"c1", b"x0", b"p0", b"c2", b"a0", b"a1",
                                                                   b"x1", b"c3"]


def test_read_committed_kafka_python_sees_only_committed_records_in_order(mixed_log):
    bootstrap, mixed, committed, everything = mixed_log
    assert consume_kafka_python(bootstrap, mixed, len(committed)) == committed
    assert consume_kafka_python(bootstrap, mixed, len(everything), isolation="read_uncommitted") == everything


def test_read_committed_confluent_sees_only_committed_records_in_order(mixed_log):
    bootstrap, mixed, committed, _ = mixed_log
    assert consume_confluent(bootstrap, mixed, len(committed)) == committed


def test_read_committed_aiokafka_sees_only_committed_records_in_order(mixed_log):
    bootstrap, mixed, committed, _ = mixed_log
    assert consume_aiokafka(bootstrap, mixed, len(committed)) == committed


def test_read_committed_kcat_sees_only_committed_records(mixed_log):
    bootstrap, mixed, committed, _ = mixed_log
    out = kcat("-b", bootstrap, "-C", "-t", mixed, "-p", "0", "-o", "beginning", "-e", "-J",
               "-X", "isolation.level=read_committed")
    assert [json.loads(line)["payload"].encode() for line in out.decode().splitlines()] == committed


def test_confluent_transactional_producer_commits_and_aborts(any_broker, unique):
    from confluent_kafka import Producer
    bootstrap = any_broker.bootstrap_servers
    conf = unique("conf")
    conf_tx = unique("conf-tx")
    create_topic(bootstrap, conf, 2)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": conf_tx, "linger.ms": 5})
    producer.init_transactions(10)
    producer.begin_transaction()
    for i in range(4):
        producer.produce(conf, b"c%d" % i, partition=i % 2)
    producer.commit_transaction(10)
    producer.begin_transaction()
    for i in range(4):
        producer.produce(conf, b"a%d" % i, partition=i % 2)
    producer.flush(10)
    producer.abort_transaction(10)
    assert sorted(consume_kafka_python(bootstrap, conf, 4, partitions=(0, 1))) == [b"c0", b"c1", b"c2", b"c3"]
    # Kafka writes the markers after answering EndTxn: PrepareAbort for a moment
    wait_until(lambda: _state(bootstrap, conf_tx) == "CompleteAbort", timeout_s=10, what="the abort completed")


def test_aiokafka_transactional_producer_commits_aborts_and_sends_offsets(any_broker, unique):
    from aiokafka import AIOKafkaProducer, TopicPartition as ATopicPartition
    bootstrap = any_broker.bootstrap_servers
    aio = unique("aio")
    aio_tx = unique("aio-tx")
    aio_group = unique("aio-group")
    create_topic(bootstrap, aio, 1)

    async def run():
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=aio_tx)
        await producer.start()
        try:
            async with producer.transaction():
                await producer.send_and_wait(aio, b"c0")
            await producer.begin_transaction()
            await producer.send_and_wait(aio, b"a0")
            await producer.abort_transaction()
            async with producer.transaction():
                await producer.send_and_wait(aio, b"c1")
                await producer.send_offsets_to_transaction({ATopicPartition(aio, 0): 1}, aio_group)
        finally:
            await producer.stop()

    asyncio.run(asyncio.wait_for(run(), 30))
    assert consume_kafka_python(bootstrap, aio, 2) == [b"c0", b"c1"]
    assert _committed(bootstrap, aio_group, TopicPartition(aio, 0)) == 1


def test_a_read_committed_consumer_waits_for_the_commit(any_broker, unique):
    bootstrap = any_broker.bootstrap_servers
    pending = unique("pending")
    slow = unique("slow")
    create_topic(bootstrap, pending, 1)
    producer = _producer(bootstrap, slow)
    try:
        producer.begin_transaction()
        _send(producer, pending, [b"v0", b"v1"])
        assert consume_kafka_python(bootstrap, pending, 1, timeout=1.5) == []
        assert consume_kafka_python(bootstrap, pending, 2, isolation="read_uncommitted") == [b"v0", b"v1"]
        producer.commit_transaction()
    finally:
        producer.close(timeout=5)
    assert consume_kafka_python(bootstrap, pending, 2) == [b"v0", b"v1"]


# --- offsets in transactions ----------------------------------------------------------------------------

def _committed(bootstrap: str, group: str, tp: TopicPartition):
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        return consumer.committed(tp)
    finally:
        consumer.close()


def test_consume_transform_produce_commits_offsets_only_with_the_transaction(any_broker, unique):
    bootstrap = any_broker.bootstrap_servers
    in_topic = unique("in")
    out_topic = unique("out")
    ctp = unique("ctp")
    ctp_group = unique("ctp-group")
    create_topic(bootstrap, in_topic, 1)
    create_topic(bootstrap, out_topic, 1)
    source = TopicPartition(in_topic, 0)
    plain = KafkaProducer(bootstrap_servers=bootstrap)
    _send(plain, in_topic, [b"r%d" % i for i in range(6)])
    plain.close(timeout=5)
    producer = _producer(bootstrap, ctp)
    try:
        producer.begin_transaction()
        _send(producer, out_topic, [b"R0", b"R1", b"R2"])
        producer.send_offsets_to_transaction({source: OffsetAndMetadata(3, "", -1)}, ctp_group)
        assert _committed(bootstrap, ctp_group, source) is None
        producer.commit_transaction()
        assert _committed(bootstrap, ctp_group, source) == 3

        producer.begin_transaction()
        _send(producer, out_topic, [b"R3"])
        producer.send_offsets_to_transaction({source: OffsetAndMetadata(4, "", -1)}, ctp_group)
        producer.abort_transaction()
        assert _committed(bootstrap, ctp_group, source) == 3
    finally:
        producer.close(timeout=5)
    assert consume_kafka_python(bootstrap, out_topic, 3) == [b"R0", b"R1", b"R2"]


def test_confluent_send_offsets_to_transaction(any_broker, unique):
    from confluent_kafka import Consumer, Producer, TopicPartition as CTopicPartition
    bootstrap = any_broker.bootstrap_servers
    cin = unique("cin")
    conf_group = unique("conf-group")
    conf_ctp = unique("conf-ctp")
    create_topic(bootstrap, cin, 1)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": conf_group, "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": conf_ctp})
    try:
        producer.init_transactions(10)
        producer.begin_transaction()
        producer.produce(cin, b"x")
        producer.send_offsets_to_transaction([CTopicPartition(cin, 0, 1)], consumer.consumer_group_metadata(), 10)
        producer.commit_transaction(10)
        (committed,) = consumer.committed([CTopicPartition(cin, 0)], timeout=10)
        assert committed.offset == 1
    finally:
        consumer.close()


# --- fencing, timeouts, restarts ------------------------------------------------------------------------------

def test_a_zombie_with_an_open_transaction_is_fenced_and_its_records_aborted(any_broker, unique):
    """Mutation: the produce path's epoch check and partition verification off -> the zombie's send failed
    with OutOfOrderSequenceNumberError, which the old `pytest.raises(KafkaError)` accepted; now it fails."""
    bootstrap = any_broker.bootstrap_servers
    zombies = unique("zombies")
    worker_1 = unique("worker-1")
    create_topic(bootstrap, zombies, 1)
    zombie = _producer(bootstrap, worker_1)
    successor = None
    try:
        zombie.begin_transaction()
        _send(zombie, zombies, [b"zombie"])
        successor = _producer(bootstrap, worker_1)  # fences the zombie, aborting its transaction
        successor.begin_transaction()
        _send(successor, zombies, [b"fresh"])
        successor.commit_transaction()
        # the fencing error itself: the broker refuses the zombie's old epoch (Kafka's INVALID_PRODUCER_EPOCH
        # on the produce path), not a timeout or any other error
        with pytest.raises(InvalidProducerEpochError):
            zombie.send(zombies, value=b"late").get(timeout=10)
        with pytest.raises(KafkaError) as raised:
            zombie.commit_transaction()
        assert not isinstance(raised.value, KafkaTimeoutError), raised.value
    finally:
        zombie.close(timeout=2)
        if successor is not None:
            successor.close(timeout=5)
    assert consume_kafka_python(bootstrap, zombies, 1) == [b"fresh"]


def test_a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced(fast_timeouts_broker):
    bootstrap = fast_timeouts_broker.bootstrap_servers
    create_topic(bootstrap, "slow", 1)
    producer = _producer(bootstrap, "sleepy", transaction_timeout_ms=2000)
    try:
        producer.begin_transaction()
        _send(producer, "slow", [b"never"])
        wait_until(lambda: _state(bootstrap, "sleepy") == "CompleteAbort", timeout_s=10, what="the coordinator's abort")
        # the coordinator bumped the epoch when it aborted: EndTxn at the old one is PRODUCER_FENCED
        with pytest.raises(ProducerFencedError):
            producer.commit_transaction()
    finally:
        producer.close(timeout=2)
    assert _stable_and_end(bootstrap, "slow") == (2, 2)  # the record and the ABORT marker
    assert consume_kafka_python(bootstrap, "slow", 1, timeout=1.5) == []


def test_an_open_transaction_survives_a_broker_restart_and_commits(tmp_path):
    # broker_sim only, as the next test: the broker restarts on its data (the session's Kafka node cannot)
    from broker_sim.server.broker import Broker
    broker = Broker(tmp_path / "data").start()
    port = broker.port
    producer = None
    try:
        create_topic(broker.bootstrap_servers, "durable", 1)
        producer = _producer(broker.bootstrap_servers, "restarted", reconnect_backoff_ms=50)
        producer.begin_transaction()
        _send(producer, "durable", [b"before"])
        broker.stop()
        broker = Broker(tmp_path / "data", port=port).start()
        assert _state(broker.bootstrap_servers, "restarted") == "Ongoing"
        assert _stable_and_end(broker.bootstrap_servers, "durable") == (0, 1)
        _send(producer, "durable", [b"after"])
        producer.commit_transaction()
        assert consume_kafka_python(broker.bootstrap_servers, "durable", 2) == [b"before", b"after"]
    finally:
        if producer is not None:
            producer.close(timeout=5)
        broker.stop()


def test_an_open_transaction_left_by_a_restart_times_out(tmp_path):
    from broker_sim.server.broker import Broker
    broker = Broker(tmp_path / "data", config=FAST_TIMEOUTS).start()
    try:
        create_topic(broker.bootstrap_servers, "orphan", 1)
        producer = _producer(broker.bootstrap_servers, "orphaned", transaction_timeout_ms=2000)
        producer.begin_transaction()
        _send(producer, "orphan", [b"lost"])
        producer.close(timeout=0)
        broker.stop()
        broker = Broker(tmp_path / "data", config=FAST_TIMEOUTS).start()
        wait_until(lambda: _state(broker.bootstrap_servers, "orphaned") == "CompleteAbort", timeout_s=10,
                   what="the abort after restart")
        partition = broker.replicas.get("orphan", 0)
        assert partition.last_stable_offset == partition.high_watermark
        assert partition.aborted_transactions(0, partition.high_watermark)
    finally:
        broker.stop()
