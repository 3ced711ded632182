"""Compacted topics over the wire: the cleaner leaves the latest value per key, across a restart.

The broker runs the cleaner every 100 ms; topics use 1 KiB segments and a
dirty ratio of 0.01 so every roll makes the log cleanable. After the keyed
data, records with unique "filler" keys push it out of the active segment
(which is never cleaned). Waits are bounded polls of the cleaner checkpoint.
"""
from __future__ import annotations

import pytest
from kafka import KafkaProducer
from kafka.errors import InvalidRecordError

from broker_sim.storage.cleaner import read_cleaner_checkpoint
from client_helpers import (
    Record,
    consume_confluent,
    consume_kafka_python,
    create_topic,
    produce_confluent,
    produce_kafka_python,
    wait_until,
)

BROKER = {"log.cleaner.backoff.ms": "100"}
TOPIC_CONFIGS = {"cleanup.policy": "compact", "internal.segment.bytes": "1024", "min.cleanable.dirty.ratio": "0.01"}


def _updates(round_: int, keys: int = 20) -> list[Record]:
    return [Record(f"key-{k}".encode(), f"value-{k}-{round_}".encode() * 4) for k in range(keys)]


def _fillers(start: int, count: int = 40) -> list[Record]:
    return [Record(f"filler-{i}".encode(), b"f" * 60) for i in range(start, start + count)]


def _wait_cleaned_past(broker, topic: str, offset: int) -> None:
    directory = broker.replicas.get(topic, 0).log.directory

    def cleaned() -> bool:
        ranges = read_cleaner_checkpoint(directory)
        return bool(ranges) and ranges[-1].end_offset > offset

    wait_until(cleaned, 15, 0.05, message=f"{topic} cleaned past offset {offset}")


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
    produce_kafka_python(broker.bootstrap_servers, "table", written)
    data_end = _end_offset(broker, "table")
    produce_kafka_python(broker.bootstrap_servers, "table", _fillers(0))
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
    produce_confluent(broker.bootstrap_servers, "table", more)
    data_end = _end_offset(broker, "table")
    produce_confluent(broker.bootstrap_servers, "table", _fillers(40))
    _wait_cleaned_past(broker, "table", data_end - 1)
    expected = _latest(written + more)
    final = consume_kafka_python(broker.bootstrap_servers, "table", len(expected) + 80)
    keyed = [r for r in final if r.key.startswith(b"key-")]
    assert {r.key: r.value for r in keyed} == expected and len(keyed) == len(expected)


def test_tombstones_disappear_after_delete_retention(pylog_broker_factory):
    broker = pylog_broker_factory(config=BROKER)
    create_topic(broker.bootstrap_servers, "deletes", configs={**TOPIC_CONFIGS, "delete.retention.ms": "300"})
    written = _updates(0) + [Record(f"key-{k}".encode(), None) for k in range(10)]
    produce_kafka_python(broker.bootstrap_servers, "deletes", written)
    data_end = _end_offset(broker, "deletes")
    produce_kafka_python(broker.bootstrap_servers, "deletes", _fillers(0))
    _wait_cleaned_past(broker, "deletes", data_end - 1)
    directory = broker.replicas.get("deletes", 0).log.directory
    wait_until(lambda: not any(r.tombstones for r in read_cleaner_checkpoint(directory)), 15, 0.05,
               message="tombstones removed")
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
    produce_kafka_python(broker.bootstrap_servers, "needs-keys", [Record(b"k", b"keyed")])
    assert _end_offset(broker, "needs-keys") == 1
