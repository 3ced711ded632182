"""Compacted topics over the wire: the cleaner leaves the latest value per key, across a restart.

The broker runs the cleaner every 100 ms; topics use 1 KiB segments and a
dirty ratio of 0.01 so every roll makes the log cleanable. After the keyed
data, records with unique "filler" keys push it out of the active segment
(which is never cleaned). Waits are bounded polls of the cleaner checkpoint.
"""
from __future__ import annotations

import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import InvalidRecordError
from kafka.record.default_records import DefaultRecordBatchBuilder

from broker_sim.storage.batch import parse_batches
from broker_sim.storage.cleaner import read_cleaner_checkpoint
from client_helpers import (
    Record,
    consume_aiokafka,
    consume_confluent,
    consume_kafka_python,
    consume_kcat,
    create_topic,
    produce_confluent,
    produce_kafka_python,
)
from kafka_wire import (
    WireClient,
    batches_of,
    fetch_request,
    fetched_partitions,
    init_producer_id,
    produce_request,
    produce_result,
)
from broker_sim.testing.waiting import wait_until

BROKER = {"log.cleaner.backoff.ms": "100"}
TOPIC_CONFIGS = {"cleanup.policy": "compact", "internal.segment.bytes": "1024", "min.cleanable.dirty.ratio": "0.01"}
# a produced batch larger than its topic's segment is refused (RECORD_LIST_TOO_LARGE), as on Kafka: the producers
# of these 1 KB-segment topics keep their batches well below that
KAFKA_PYTHON_SMALL_BATCHES = {"batch_size": 400}
CONFLUENT_SMALL_BATCHES = {"batch.size": 400}


def _updates(round_: int, keys: int = 20) -> list[Record]:
    return [Record(f"key-{k}".encode(), f"value-{k}-{round_}".encode() * 4) for k in range(keys)]


def _fillers(start: int, count: int = 40) -> list[Record]:
    return [Record(f"filler-{i}".encode(), b"f" * 60) for i in range(start, start + count)]


def _wait_cleaned_past(broker, topic: str, offset: int) -> None:
    directory = broker.replicas.get(topic, 0).log.directory

    def cleaned() -> bool:
        ranges = read_cleaner_checkpoint(directory)
        return bool(ranges) and ranges[-1].end_offset > offset

    wait_until(cleaned, timeout_s=15, what=f"{topic} cleaned past offset {offset}", interval_s=0.05)


def _latest(records) -> dict:
    latest = {}
    for r in records:
        latest[r.key] = r.value
    return latest


def _end_offset(broker, topic: str) -> int:
    return broker.replicas.get(topic, 0).log.log_end_offset


def test_compacted_topic_keeps_latest_value_per_key_across_restart(pylog_broker_factory):
    broker = pylog_broker_factory(config=BROKER)
    create_topic(broker.bootstrap_servers, "table", configs={**TOPIC_CONFIGS, "delete.retention.ms": "600000"})
    written = [r for round_ in range(5) for r in _updates(round_)]
    written += [Record(f"key-{k}".encode(), None) for k in range(5)]  # tombstones
    produce_kafka_python(broker.bootstrap_servers, "table", written, **KAFKA_PYTHON_SMALL_BATCHES)
    data_end = _end_offset(broker, "table")
    produce_kafka_python(broker.bootstrap_servers, "table", _fillers(0), **KAFKA_PYTHON_SMALL_BATCHES)
    _wait_cleaned_past(broker, "table", data_end - 1)

    expected = _latest(written)
    got = consume_kafka_python(broker.bootstrap_servers, "table", len(expected) + 40)
    keyed = [r for r in got if r.key.startswith(b"key-")]
    assert {r.key: r.value for r in keyed} == expected
    assert len(keyed) == len(expected)  # one record per key: tombstones stay, older values are gone
    assert [r.offset for r in got] == sorted(r.offset for r in got)
    assert got[-1].offset == _end_offset(broker, "table") - 1

    data_dir = broker.data_dir
    broker.stop()
    broker = pylog_broker_factory(config=BROKER, data_dir=data_dir)
    again = consume_confluent(broker.bootstrap_servers, "table", len(got))
    assert [(r.offset, r.key, r.value) for r in again] == [(r.offset, r.key, r.value) for r in got]

    more = [r for round_ in range(5, 8) for r in _updates(round_, keys=10)]
    produce_confluent(broker.bootstrap_servers, "table", more, **CONFLUENT_SMALL_BATCHES)
    data_end = _end_offset(broker, "table")
    produce_confluent(broker.bootstrap_servers, "table", _fillers(40), **CONFLUENT_SMALL_BATCHES)
    _wait_cleaned_past(broker, "table", data_end - 1)
    expected = _latest(written + more)
    final = consume_kafka_python(broker.bootstrap_servers, "table", len(expected) + 80)
    keyed = [r for r in final if r.key.startswith(b"key-")]
    assert {r.key: r.value for r in keyed} == expected and len(keyed) == len(expected)


def test_tombstones_disappear_after_delete_retention(pylog_broker_factory):
    broker = pylog_broker_factory(config=BROKER)
    create_topic(broker.bootstrap_servers, "deletes", configs={**TOPIC_CONFIGS, "delete.retention.ms": "300"})
    written = _updates(0) + [Record(f"key-{k}".encode(), None) for k in range(10)]
    produce_kafka_python(broker.bootstrap_servers, "deletes", written, **KAFKA_PYTHON_SMALL_BATCHES)
    data_end = _end_offset(broker, "deletes")
    produce_kafka_python(broker.bootstrap_servers, "deletes", _fillers(0), **KAFKA_PYTHON_SMALL_BATCHES)
    _wait_cleaned_past(broker, "deletes", data_end - 1)
    directory = broker.replicas.get("deletes", 0).log.directory
    wait_until(lambda: not any(r.tombstones for r in read_cleaner_checkpoint(directory)), timeout_s=15,
               what="tombstones removed", interval_s=0.05)
    got = consume_kafka_python(broker.bootstrap_servers, "deletes", 10 + 40)
    assert {r.key: r.value for r in got if r.key.startswith(b"key-")} == _latest(_updates(0)[10:])


def test_unkeyed_record_to_a_compacted_topic_is_rejected(pylog_broker_factory):
    broker = pylog_broker_factory(config=BROKER)
    create_topic(broker.bootstrap_servers, "needs-keys", configs=TOPIC_CONFIGS)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, retries=0)
    try:
        with pytest.raises(InvalidRecordError):
            producer.send("needs-keys", value=b"no key").get(timeout=15)
    finally:
        producer.close(timeout=5)
    with pytest.raises(AssertionError, match="INVALID_RECORD|Invalid record|InvalidRecord"):
        produce_confluent(broker.bootstrap_servers, "needs-keys", [Record(None, b"no key")])
    produce_kafka_python(broker.bootstrap_servers, "needs-keys", [Record(b"k", b"keyed")], **KAFKA_PYTHON_SMALL_BATCHES)
    assert _end_offset(broker, "needs-keys") == 1


# -- an idempotent producer's fully superseded last batch: kept as an empty batch ------------------

_OUT_OF_ORDER_SEQUENCE_NUMBER = 45


def _keyed_batch(pairs, *, producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=producer_id,
                                        producer_epoch=producer_epoch, base_sequence=base_sequence,
                                        batch_size=1 << 30)
    now = int(time.time() * 1000)
    for i, (key, value) in enumerate(pairs):
        builder.append(i, timestamp=now, key=key, value=value, headers=[])
    return bytes(builder.build())


def _produce(client: WireClient, topic: str, batch: bytes) -> tuple[int, int]:
    return produce_result(client.call(produce_request(topic, 0, batch)))


def _stored_batches(broker, topic: str):
    log = broker.replicas.get(topic, 0).log
    data = log.read_bytes(log.log_start_offset, 1 << 30)
    return parse_batches(data, stored=True)


def _rows(records) -> list[tuple]:
    return [(r.offset, r.key, r.value) for r in records]


def _consume_kafka_python_from(bootstrap: str, topic: str, offset: int, expected: int, **config) -> list[tuple]:
    """kafka-python from ``offset`` (which may fall inside the empty batch), with its fetch size limits."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             fetch_max_wait_ms=100, **config)
    try:
        partition = TopicPartition(topic, 0)
        consumer.assign([partition])
        consumer.seek(partition, offset)
        out = []
        deadline = time.monotonic() + 15
        while len(out) < expected and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=200).values():
                out.extend((m.offset, m.key, m.value) for m in batch)
        return out
    finally:
        consumer.close()


def test_an_idempotent_producers_superseded_last_batch_is_an_empty_batch_every_client_reads_past(
        pylog_broker_factory):
    """The cleaner keeps a fully superseded last batch of an idempotent producer as its header alone
    (recordsCount 0, Kafka's RETAIN_EMPTY): no superseded record is left, every client reads across it, a
    restart recovers it, and the producer's sequence survives: its retry is a duplicate, its next batch
    follows."""
    topic = "empty-batch"
    broker = pylog_broker_factory(config=BROKER)
    create_topic(broker.bootstrap_servers, topic, configs={**TOPIC_CONFIGS, "delete.retention.ms": "600000"})
    client = WireClient(broker.bootstrap_servers)
    try:
        producer_id, epoch = init_producer_id(client)
        idempotent = {"producer_id": producer_id, "producer_epoch": epoch}
        first = _keyed_batch([(b"a", b"a1"), (b"b", b"b1")], base_sequence=0, **idempotent)
        last = _keyed_batch([(b"c", b"c1"), (b"d", b"d1")], base_sequence=2, **idempotent)
        assert _produce(client, topic, first) == (0, 0)
        assert _produce(client, topic, last) == (0, 2)
        # another, non-idempotent writer supersedes every record of the producer's last batch
        assert _produce(client, topic, _keyed_batch([(b"c", b"c2"), (b"d", b"d2"), (b"e", b"e2")])) == (0, 4)
    finally:
        client.close()
    produce_kafka_python(broker.bootstrap_servers, topic, _fillers(0), **KAFKA_PYTHON_SMALL_BATCHES)
    _wait_cleaned_past(broker, topic, 6)

    empty = _stored_batches(broker, topic)[1]
    assert (empty.base_offset, empty.last_offset_delta, empty.record_count, empty.size) == (2, 1, 0, 61)
    assert (empty.producer_id, empty.producer_epoch, empty.base_sequence, empty.last_sequence) == (
        producer_id, epoch, 2, 3)
    fillers = [(7 + i, r.key, r.value) for i, r in enumerate(_fillers(0))]
    expected = [(0, b"a", b"a1"), (1, b"b", b"b1"), (4, b"c", b"c2"), (5, b"d", b"d2"), (6, b"e", b"e2"), *fillers]

    def check_every_client() -> None:
        bootstrap = broker.bootstrap_servers
        assert _rows(consume_kafka_python(bootstrap, topic, len(expected))) == expected
        assert _rows(consume_confluent(bootstrap, topic, len(expected))) == expected
        assert _rows(consume_aiokafka(bootstrap, topic, len(expected))) == expected
        assert _rows(consume_kcat(bootstrap, topic, len(expected))) == expected
        # starting inside the empty batch, and with fetches so small the empty batch comes alone
        assert _rows(consume_confluent(bootstrap, topic, len(expected) - 2, start_offset=3)) == expected[2:]
        assert _consume_kafka_python_from(bootstrap, topic, 2, len(expected) - 2) == expected[2:]
        assert _consume_kafka_python_from(bootstrap, topic, 2, len(expected) - 2, max_partition_fetch_bytes=61,
                                          fetch_max_bytes=61) == expected[2:]
        with WireClient(bootstrap) as wire:
            response = wire.call(fetch_request(topic, 0, 2, partition_max_bytes=1, max_bytes=1))
            (answer,) = fetched_partitions(response)
            assert answer.error_code == 0
            (alone,) = batches_of(answer.records)  # the first batch, whatever the limit: the empty one
            assert (alone.base_offset, alone.next_offset, list(alone)) == (2, 4, [])

    check_every_client()

    # restart with the indexes and producer snapshots gone: segments are recovered and the producer state is
    # rebuilt from the log alone, the empty batch included
    data_dir = broker.data_dir
    directory = broker.replicas.get(topic, 0).log.directory
    broker.stop()
    lost = [*directory.glob("*.index"), *directory.glob("*.timeindex"), *directory.glob("*.snapshot")]
    assert any(path.suffix == ".snapshot" for path in lost)
    for path in lost:
        path.unlink()
    broker = pylog_broker_factory(config=BROKER, data_dir=data_dir)
    assert broker.replicas.get(topic, 0).log.recovered_bytes_truncated == 0
    assert _stored_batches(broker, topic)[1] == empty
    check_every_client()

    client = WireClient(broker.bootstrap_servers)
    try:
        gap = _keyed_batch([(b"x", b"gap")], base_sequence=5, **idempotent)
        assert _produce(client, topic, gap)[0] == _OUT_OF_ORDER_SEQUENCE_NUMBER
        assert _produce(client, topic, last) == (0, 2)  # a retry of the last batch: a duplicate, original offset
        end = _end_offset(broker, topic)
        assert _produce(client, topic, _keyed_batch([(b"f", b"f1")], base_sequence=4, **idempotent)) == (0, end)
    finally:
        client.close()
    assert _end_offset(broker, topic) == end + 1
    got = consume_kafka_python(broker.bootstrap_servers, topic, len(expected) + 1)
    assert _rows(got) == [*expected, (end, b"f", b"f1")]
