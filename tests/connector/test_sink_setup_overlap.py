"""A sink task's InitProducerId and sink log entry run in a thread while its first rows are encoded
(``TaskProducer.start_init``): nothing is sent before they are done, and the batches encoded meanwhile carry
the producer id, epoch and CRC the broker checks."""
from __future__ import annotations

import threading
import time

import pyarrow as pa
import pytest
from committed_reads import committed_row_numbers
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from connector.options import parse_sink_options
from connector.sink.brokers import SinkCluster
from connector.sink.producer import TaskProducer
from connector.wire import BrokerConnection

ROWS = 2000


def _batch(start: int, count: int) -> pa.RecordBatch:
    keys = pa.array([f"key-{i % 31}" for i in range(start, start + count)], pa.string())
    values = pa.array([f"v{i}:" + "x" * 50 for i in range(start, start + count)], pa.string())
    return pa.RecordBatch.from_arrays([keys, values], names=["key", "value"])


@pytest.mark.parametrize("request_bytes", [None, 3000])
def test_rows_encoded_before_the_producer_id_is_known_are_sent_after_the_setup_with_its_id(pylog_broker, monkeypatch,
                                                                                          request_bytes):
    """With small requests the first send comes in the middle of one partition's encoded batches: those after it
    were encoded before the producer id was known too."""
    bootstrap = pylog_broker.bootstrap_servers
    topic = f"overlap{request_bytes or ''}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, 3, 1)])
    admin.close()
    sizes = {"kafka.batch.size": str(request_bytes), "kafka.max.request.size": str(request_bytes)} \
        if request_bytes else {}
    options = parse_sink_options({"kafka.bootstrap.servers": bootstrap, "topic": topic, **sizes})
    events: list[str] = []
    gate = threading.Event()
    original = BrokerConnection.send_produce

    def recorded_send(connection, records, **kwargs):
        events.append("send")
        return original(connection, records, **kwargs)

    monkeypatch.setattr(BrokerConnection, "send_produce", recorded_send)
    finds: list[str] = []
    original_find = BrokerConnection.find_coordinator

    def counted_find(connection, key, key_type):
        finds.append(key)
        return original_find(connection, key, key_type)

    monkeypatch.setattr(BrokerConnection, "find_coordinator", counted_find)

    def then(cluster, producer_id, epoch):
        assert gate.wait(60), "the setup thread was never let go"
        events.append(f"setup done pid={producer_id} epoch={epoch}")

    encoded_early = []
    finish_init = TaskProducer._finish_init

    def open_gate_then_finish(self):   # the setup ends only when the producer first needs its id
        encoded_early.append(len(self._ready))
        gate.set()
        finish_init(self)

    monkeypatch.setattr(TaskProducer, "_finish_init", open_gate_then_finish)
    transactional_id = f"{topic}-txn-0"
    producer = TaskProducer(options, transactional_id)
    try:
        producer.start_init(then)
        for start in range(0, ROWS, 500):
            producer.write(_batch(start, 500), topic)
        producer.flush()
    finally:
        producer.close()
    # the task's AddPartitionsToTxn went to the coordinator its setup thread found
    assert finds == [transactional_id], finds
    assert encoded_early and encoded_early[0] > 0, "no batch was encoded while the setup thread was still running"
    assert events and events[0].startswith("setup done"), f"sent before the setup was done: {events[:3]}"
    assert events[0] == f"setup done pid={producer.producer_id} epoch={producer.epoch}" and producer.producer_id >= 0
    assert committed_row_numbers(bootstrap, topic, 3) == [], "an open transaction's records were visible"
    cluster = SinkCluster(options, "test")
    try:
        code = cluster.coordinator(transactional_id, time.monotonic() + 30).end_txn(
            transactional_id, producer.producer_id, producer.epoch, True)
    finally:
        cluster.close()
    assert code == 0
    assert committed_row_numbers(bootstrap, topic, 3) == list(range(ROWS))


def test_a_failing_setup_fails_the_task_before_anything_is_sent(pylog_broker, monkeypatch):
    bootstrap = pylog_broker.bootstrap_servers
    options = parse_sink_options({"kafka.bootstrap.servers": bootstrap, "topic": "overlap_fail"})
    sends: list[int] = []
    original = BrokerConnection.send_produce

    def counted_send(connection, records, **kwargs):
        sends.append(1)
        return original(connection, records, **kwargs)

    monkeypatch.setattr(BrokerConnection, "send_produce", counted_send)

    def then(cluster, producer_id, epoch):
        raise RuntimeError("sink log unwritable (test)")

    producer = TaskProducer(options, "overlap-fail-0")
    try:
        producer.start_init(then)
        producer.write(_batch(0, 100), "overlap_fail")
        with pytest.raises(RuntimeError, match="sink log unwritable"):
            producer.flush()
    finally:
        producer.close()
    assert sends == []
