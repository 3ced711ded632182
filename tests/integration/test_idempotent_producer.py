"""Idempotent produce: retries are not written twice, gaps and fenced epochs are refused.

At the protocol level (kafka-python's request classes over a raw socket) the
same ProduceRequest sent twice gets the original base offset back and the
log holds the batch once, also for a retry of an older batch still among the
last five; a sequence gap gets OUT_OF_ORDER_SEQUENCE_NUMBER (45) and a batch
from an epoch older than the partition's current one gets
INVALID_PRODUCER_EPOCH (47).  kafka-python (idempotent by default) and
confluent-kafka with ``enable.idempotence`` must really send producer ids and
sequences, and their records arrive exactly once.
"""
from __future__ import annotations

import pytest

from client_helpers import Record, consume_kafka_python, create_topic, produce_confluent, produce_kafka_python
from kafka_wire import (
    LATEST, WireClient, batches_of, fetch_request, fetched_partitions, init_producer_id, list_offsets,
    produce_request, produce_result, record_batch,
)

OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47


@pytest.fixture
def idem(any_broker, unique):
    topic = unique("idem")
    create_topic(any_broker.bootstrap_servers, topic)
    return topic


@pytest.fixture
def wire(any_broker, idem):
    with WireClient(any_broker.bootstrap_servers) as client:
        yield client


def _log_values(bootstrap: str, topic: str) -> list[bytes]:
    with WireClient(bootstrap) as client:
        (partition,) = fetched_partitions(client.call(fetch_request(topic, 0, 0)))
    return [record.value for batch in batches_of(partition.records) for record in batch]


def test_resending_the_same_produce_request_returns_the_original_offset_and_writes_once(any_broker, idem, wire):
    pid, epoch = init_producer_id(wire)
    batch = record_batch([b"a", b"b", b"c"], producer_id=pid, producer_epoch=epoch, base_sequence=0)
    first = produce_result(wire.call(produce_request(idem, 0, batch)))
    again = produce_result(wire.call(produce_request(idem, 0, batch)))

    assert first == (0, 0)
    assert again == (0, 0)
    assert list_offsets(wire, idem, 0, LATEST)[::2] == (0, 3)
    assert _log_values(any_broker.bootstrap_servers, idem) == [b"a", b"b", b"c"]


def test_retry_of_an_older_cached_batch_returns_its_own_offset(any_broker, idem, wire):
    pid, epoch = init_producer_id(wire)
    first = record_batch([b"a", b"b", b"c"], producer_id=pid, producer_epoch=epoch, base_sequence=0)
    second = record_batch([b"d", b"e"], producer_id=pid, producer_epoch=epoch, base_sequence=3)
    assert produce_result(wire.call(produce_request(idem, 0, first))) == (0, 0)
    assert produce_result(wire.call(produce_request(idem, 0, second))) == (0, 3)
    assert produce_result(wire.call(produce_request(idem, 0, first))) == (0, 0)
    assert produce_result(wire.call(produce_request(idem, 0, second))) == (0, 3)
    assert _log_values(any_broker.bootstrap_servers, idem) == [b"a", b"b", b"c", b"d", b"e"]


def test_sequence_gap_is_refused_with_out_of_order_sequence_number(any_broker, idem, wire):
    pid, epoch = init_producer_id(wire)
    assert produce_result(wire.call(produce_request(
        idem, 0, record_batch([b"a", b"b", b"c"], producer_id=pid, producer_epoch=epoch, base_sequence=0)))) \
        == (0, 0)
    code, _ = produce_result(wire.call(produce_request(
        idem, 0, record_batch([b"gap"], producer_id=pid, producer_epoch=epoch, base_sequence=5))))
    assert code == OUT_OF_ORDER_SEQUENCE_NUMBER
    # the expected next sequence is still accepted
    assert produce_result(wire.call(produce_request(
        idem, 0, record_batch([b"d"], producer_id=pid, producer_epoch=epoch, base_sequence=3)))) == (0, 3)
    assert _log_values(any_broker.bootstrap_servers, idem) == [b"a", b"b", b"c", b"d"]


def test_batch_from_a_fenced_epoch_is_refused_with_invalid_producer_epoch(any_broker, idem, wire):
    pid, old_epoch = init_producer_id(wire)
    assert produce_result(wire.call(produce_request(
        idem, 0, record_batch([b"old"], producer_id=pid, producer_epoch=old_epoch, base_sequence=0)))) == (0, 0)
    # an idempotent producer bumps its epoch itself (KIP-360; InitProducerId would give it a new producer id)
    assert produce_result(wire.call(produce_request(
        idem, 0, record_batch([b"new"], producer_id=pid, producer_epoch=old_epoch + 1, base_sequence=0)))) \
        == (0, 1)
    code, _ = produce_result(wire.call(produce_request(
        idem, 0, record_batch([b"zombie"], producer_id=pid, producer_epoch=old_epoch, base_sequence=1))))
    assert code == INVALID_PRODUCER_EPOCH
    assert _log_values(any_broker.bootstrap_servers, idem) == [b"old", b"new"]


@pytest.mark.parametrize("producer", ["kafka-python", "confluent-kafka"])
def test_idempotent_clients_send_producer_ids_and_records_arrive_once(any_broker, idem, producer):
    bootstrap = any_broker.bootstrap_servers
    sent = [Record(b"k%d" % (i % 7), b"idempotent %d" % i) for i in range(300)]
    if producer == "kafka-python":
        produce_kafka_python(bootstrap, idem, sent, enable_idempotence=True, batch_size=2048)
    else:
        produce_confluent(bootstrap, idem, sent, **{"enable.idempotence": True, "batch.size": 2048})

    with WireClient(bootstrap) as client:
        (partition,) = fetched_partitions(client.call(fetch_request(idem, 0, 0)))
    batches = batches_of(partition.records)
    assert len(batches) > 1
    assert {b.producer_id for b in batches} != {-1} and len({b.producer_id for b in batches}) == 1
    sequences = [(b.base_sequence, len(list(b))) for b in batches]
    assert [seq for seq, _ in sequences] == [sum(n for _, n in sequences[:i]) for i in range(len(sequences))]
    got = consume_kafka_python(bootstrap, idem, len(sent))
    assert [(r.key, r.value) for r in got] == [(r.key, r.value) for r in sent]


def test_retry_on_a_log_append_time_topic_gets_the_original_append_time(any_broker, unique, wire):
    topic = unique("appended")
    create_topic(any_broker.bootstrap_servers, topic, configs={"message.timestamp.type": "LogAppendTime"})
    pid, epoch = init_producer_id(wire)
    batch = record_batch([b"a"], producer_id=pid, producer_epoch=epoch, base_sequence=0, timestamps=[1])
    first = wire.call(produce_request(topic, 0, batch)).responses[0].partition_responses[0]
    again = wire.call(produce_request(topic, 0, batch)).responses[0].partition_responses[0]
    assert first.error_code == again.error_code == 0
    assert first.log_append_time_ms > 1
    # Kafka answers a duplicate with the offsets and append time of the original (UnifiedLog.append)
    assert (again.base_offset, again.log_append_time_ms) == (first.base_offset, first.log_append_time_ms)


# broker_sim only: the forged batch takes the producer's next sequences from the in-process broker's producer state
def test_the_workload_producer_survives_a_librdkafka_fatal_desync_with_a_new_incarnation(pylog_broker):
    """A batch forged with the producer's id and its next sequences desynchronizes a real librdkafka producer
    (OUT_OF_ORDER_SEQUENCE_NUMBER on its head-of-line batch: a fatal error, which confluent-kafka raises from
    poll() instead of calling error_cb). The Jepsen workload's producer must record it and go on as a new
    incarnation, not die (CI once lost a whole partition run to that).
    Mutation: ``_raised`` returning False -> "workload producer died: KafkaException ... FATAL"."""
    import threading
    import time

    from broker_sim.testing.jepsen_workload import WorkloadOptions, _Clock, _ProducerWorker

    create_topic(pylog_broker.bootstrap_servers, "desync")
    options = WorkloadOptions(topic="desync", partitions=1, rate_per_producer=20.0, message_timeout_ms=10_000,
                              fault_s=(1.0, 1.0))
    stop, events = threading.Event(), []
    worker = _ProducerWorker(0, pylog_broker.bootstrap_servers, options, stop, _Clock(), events)
    worker.start()
    partition = pylog_broker.replicas.get("desync", 0)
    try:
        deadline = time.monotonic() + 30
        while not any(v.startswith("p0.0/") for v in list(worker.acks)):
            assert time.monotonic() < deadline and worker.is_alive(), "the first incarnation got no ack"
            time.sleep(0.05)
        with WireClient(pylog_broker.bootstrap_servers) as wire:
            for _ in range(50):  # the producer's own next batch may win the race: forge after it
                (pid, entry), = partition.producers.producers.items()
                forged = record_batch([b"x", b"y", b"z"], producer_id=pid, producer_epoch=entry.epoch,
                                      base_sequence=entry.last_seq + 1)
                if produce_result(wire.call(produce_request("desync", 0, forged)))[0] == 0:
                    break
            else:
                raise AssertionError("the forged batch never took the producer's next sequences")
        while not any(v.startswith("p0.1/") for v in list(worker.acks)):
            assert worker.is_alive(), f"workload producer died: {worker.failure!r}"
            assert time.monotonic() < deadline + 30, f"no second incarnation acknowledged: {events}"
            time.sleep(0.05)
    finally:
        stop.set()
        worker.join(30)
    assert worker.failure is None, repr(worker.failure)
    fatal = [e for e in events if e.get("fatal")]
    assert fatal and fatal[0]["producer"] == "p0.0", events
    assert "OUT_OF_ORDER_SEQUENCE" in fatal[0]["error"] or "desynchronization" in fatal[0]["error"], fatal
