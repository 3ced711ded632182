"""Acknowledged records survive a SIGKILL of the broker process, and a SIGTERM stop loses nothing.

SIGKILL: an idempotent confluent-kafka producer (acks=all) streams ascending
integers while the test kills the broker mid-stream and restarts it on the
same data dir and port.  The producer stays up across the restart, so it
retries whatever was in flight with the same producer id and sequences.
Afterwards every acknowledged value is in the log exactly once, no value
appears twice, values are in the order sent, and offsets are contiguous
from 0.  SIGTERM: the broker exits 0 and a restart serves every record and
continues the offsets.  Topic configs, a DeleteRecords log start offset and
idempotent-producer state (a retried batch still gets its original offset)
come back after either kind of stop.
"""
from __future__ import annotations

import threading
import time

from confluent_kafka import Producer

from kafka import KafkaAdminClient, TopicPartition

from client_helpers import (
    Record, consume_confluent, consume_kafka_python, create_topic, produce_kafka_python,
)
from kafka_wire import (
    EARLIEST, WireClient, init_producer_id, list_offsets, metadata, produce_request, produce_result, record_batch,
)
from broker_sim.testing.waiting import wait_until

TOTAL = 4000
KILL_AFTER_ACKS = 800


class StreamingProducer(threading.Thread):
    """Produces 0..TOTAL-1 as fast as it can; ``acked`` fills from delivery callbacks."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.topic = topic
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                  "linger.ms": 2, "batch.num.messages": 50, "message.timeout.ms": 60000,
                                  "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 200})
        self.acked: list[int] = []
        self.failed: list[tuple[int, str]] = []
        self.left = None

    def _on_delivery(self, err, msg) -> None:
        value = int(msg.value())
        if err is None:
            self.acked.append(value)
        else:
            self.failed.append((value, str(err)))

    def run(self) -> None:
        for value in range(TOTAL):
            self.producer.produce(self.topic, value=str(value).encode(), on_delivery=self._on_delivery)
            self.producer.poll(0)
            if value % 20 == 0:
                time.sleep(0.005)  # a steady stream, so the kill lands in the middle of it
        self.left = self.producer.flush(45)


def end_offsets(bootstrap: str, topic: str, partitions=(0,)) -> dict[int, int]:
    """Each partition's log end offset (ListOffsets latest): a record past what a reader stopped at shows here."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        ends = consumer.end_offsets([TopicPartition(topic, p) for p in partitions])
        return {tp.partition: offset for tp, offset in ends.items()}
    finally:
        consumer.close()


def test_every_acknowledged_record_survives_sigkill_exactly_once(broker_process):
    """Mutation (of the scenario: a duplicate of the last value appended at the tail, as a retried batch
    without dedupe would be) -> "records after the expected ones"; the checks on the TOTAL values read all
    passed, because the reader stops at TOTAL."""
    broker = broker_process()
    create_topic(broker.bootstrap_servers, "durable")
    stream = StreamingProducer(broker.bootstrap_servers, "durable")
    stream.start()
    wait_until(lambda: len(stream.acked) >= KILL_AFTER_ACKS, timeout_s=30, what="first acknowledgements",
               interval_s=0.005)
    broker.kill()
    acked_before_kill = len(stream.acked)
    assert acked_before_kill < TOTAL, "the stream finished before the kill; the test proves nothing"
    time.sleep(0.3)
    broker.start()
    stream.join(60)
    assert not stream.is_alive()

    got = consume_confluent(broker.bootstrap_servers, "durable", TOTAL, timeout=30)
    values = [int(r.value) for r in got]
    assert [r.offset for r in got] == list(range(len(got))), "offsets are not contiguous from 0"
    assert len(values) == len(set(values)), "a value was written twice"
    assert set(stream.acked) <= set(values), f"lost acknowledged values {sorted(set(stream.acked) - set(values))[:10]}"
    assert values == sorted(values), "values are out of the order they were sent in"
    assert stream.left == 0 and not stream.failed, f"producer gave up on {len(stream.failed)}: {stream.failed[:3]}"
    assert len(values) == TOTAL
    assert end_offsets(broker.bootstrap_servers, "durable") == {0: TOTAL}, "records after the expected ones"


def test_sigterm_stops_cleanly_and_restart_keeps_every_record(broker_process):
    broker = broker_process()
    create_topic(broker.bootstrap_servers, "kept", partitions=2)
    sent = [Record(b"k%d" % i, b"v%d" % i, partition=i % 2) for i in range(200)]
    produce_kafka_python(broker.bootstrap_servers, "kept", sent)

    assert broker.terminate() == 0
    assert "stopped cleanly" in broker.log_path.read_text()
    broker.start()

    got = consume_kafka_python(broker.bootstrap_servers, "kept", len(sent), partitions=(0, 1))
    assert sorted((r.partition, r.offset, r.value) for r in got) == \
        sorted((i % 2, i // 2, b"v%d" % i) for i in range(200))
    assert end_offsets(broker.bootstrap_servers, "kept", (0, 1)) == {0: 100, 1: 100}
    more = produce_kafka_python(broker.bootstrap_servers, "kept", [Record(b"k", b"after restart", partition=0)])
    assert more[0].offset == 100


def test_retried_idempotent_batch_after_sigkill_gets_its_original_offset(broker_process):
    broker = broker_process()
    with WireClient(broker.bootstrap_servers) as client:
        metadata(client, ["fenced"])
        pid, epoch = init_producer_id(client)
        batches = [record_batch([b"v%d" % seq], producer_id=pid, producer_epoch=epoch, base_sequence=seq)
                   for seq in range(3)]
        assert [produce_result(client.call(produce_request("fenced", 0, b))) for b in batches] == \
            [(0, 0), (0, 1), (0, 2)]
    broker.kill()
    broker.start()
    with WireClient(broker.bootstrap_servers) as client:
        # the producer never saw the answer to its last batch and retries it
        assert produce_result(client.call(produce_request("fenced", 0, batches[2]))) == (0, 2)
        next_batch = record_batch([b"v3"], producer_id=pid, producer_epoch=epoch, base_sequence=3)
        assert produce_result(client.call(produce_request("fenced", 0, next_batch))) == (0, 3)
    got = consume_kafka_python(broker.bootstrap_servers, "fenced", 4)
    assert [r.value for r in got] == [b"v0", b"v1", b"v2", b"v3"]


def test_topic_configs_and_log_start_offset_survive_restart(pylog_broker_factory, tmp_path):
    data_dir = tmp_path / "restarted"
    broker = pylog_broker_factory(data_dir=data_dir)
    create_topic(broker.bootstrap_servers, "kept-config", configs={"retention.ms": "123456789"})
    produce_kafka_python(broker.bootstrap_servers, "kept-config", [Record(b"k", b"v%d" % i) for i in range(10)])
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        admin.delete_records({TopicPartition("kept-config", 0): 6})
    finally:
        admin.close()
    broker.stop()

    broker = pylog_broker_factory(data_dir=data_dir)
    assert broker.replicas.get("kept-config", 0).log.config.retention_ms == 123456789
    with WireClient(broker.bootstrap_servers) as client:
        assert list_offsets(client, "kept-config", 0, EARLIEST)[::2] == (0, 6)
    got = consume_kafka_python(broker.bootstrap_servers, "kept-config", 4)
    assert [(r.offset, r.value) for r in got] == [(i, b"v%d" % i) for i in range(6, 10)]
