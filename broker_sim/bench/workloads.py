"""The timed client workloads of ``pylog bench``.

Every workload writes or reads *records* values of *record_size* bytes on a
one-partition topic and returns a result dict::

    {"records": 1000000, "seconds": 2.1, "records_per_s": 476190.5, "mb_per_s": 47.6}

MB are 10**6 bytes of record values (keys are empty, headers none). A workload
that fails or passes its deadline returns ``{"error": "...", "records": done}``
instead of raising, so one broker/client incompatibility does not end the run.

Client settings are the client defaults plus what a throughput test needs; they
are reported verbatim in the benchmark's JSON (:data:`CONFLUENT_PRODUCER`,
:data:`KAFKA_PYTHON_PRODUCER`, ...). Consumers use manual assignment, not
group subscription, so only fetch throughput is measured.
"""

import os
import time
from contextlib import closing

from broker_sim.progress import Progress

CONFLUENT_PRODUCER = {
    "linger.ms": 5,
    "batch.size": 1_000_000,
    "queue.buffering.max.messages": 2_000_000,
}
CONFLUENT_CONSUMER = {
    "group.id": "pylog-bench",
    "enable.auto.commit": False,
    "enable.partition.eof": False,
}
# consume(1000, 0.1 s): with consume(10000, 0.5 s) librdkafka 2.16 delivered
# 3x fewer records/s against both brokers (the call waits out its timeout for
# a full batch while the fetcher is backing off).
CONFLUENT_CONSUME_BATCH = 1_000
CONFLUENT_CONSUME_TIMEOUT_S = 0.1
KAFKA_PYTHON_PRODUCER = {"linger_ms": 5, "batch_size": 1_000_000}
KAFKA_PYTHON_CONSUMER = {"enable_auto_commit": False, "auto_offset_reset": "earliest"}
KAFKA_PYTHON_POLL_RECORDS = 10_000
MB = 1_000_000


def payload(record_size: int) -> bytes:
    """The value every record carries (random, so compression would not help)."""
    return os.urandom(record_size)


def create_topic(bootstrap_servers: str, topic: str, timeout_s: float, security: dict | None = None) -> None:
    """Create a one-partition topic with kafka-python's admin client and wait
    until its leader is in the metadata (``security``: kafka-python TLS/SASL settings)."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers, client_id="pylog-bench",
                             bootstrap_timeout_ms=int(timeout_s * 1000), **(security or {}))
    with closing(admin):
        admin.create_topics({topic: {"num_partitions": 1, "replication_factor": 1}},
                            wait_for_metadata=True)


def _result(records: int, record_size: int, seconds: float) -> dict:
    seconds = max(seconds, 1e-9)
    return {
        "records": records,
        "seconds": round(seconds, 4),
        "records_per_s": round(records / seconds, 1),
        "mb_per_s": round(records * record_size / seconds / MB, 3),
    }


def _failure(message: str, records: int) -> dict:
    return {"error": message, "records": records}


# ``batch=True``: records handed over PRODUCE_BATCH at a time with ``produce_batch`` and delivery reports for
# failures only, so the Python loop costs a fraction of one produce() call and delivery callback per record
PRODUCE_BATCH = 10_000
CONFLUENT_BATCH_PRODUCER = {"delivery.report.only.error": True}


def confluent_produce(bootstrap_servers: str, topic: str, records: int, record_size: int, acks: str,
                      timeout_s: float, progress: Progress, security: dict | None = None,
                      value: bytes | None = None, batch: bool = False) -> dict:
    """Produce with confluent-kafka (librdkafka) to partition 0 and flush (``security``: librdkafka settings;
    ``value``: what every record carries, else ``payload(record_size)``; ``batch``: ``produce_batch`` of
    ``PRODUCE_BATCH`` records with delivery reports for failures only, see ``CONFLUENT_BATCH_PRODUCER``)."""
    from confluent_kafka import KafkaException, Producer

    errors: list[str] = []

    def delivered(err, _msg):
        if err is not None and len(errors) < 5:
            errors.append(str(err))

    producer = Producer({"bootstrap.servers": bootstrap_servers, "acks": acks,
                         "message.timeout.ms": int(timeout_s * 1000), **CONFLUENT_PRODUCER,
                         **(CONFLUENT_BATCH_PRODUCER if batch else {}), **(security or {})})
    value = payload(record_size) if value is None else value
    started = time.perf_counter()
    deadline = started + timeout_s
    sent = 0
    try:
        while batch and sent < records:
            pending = [{"value": value} for _ in range(min(PRODUCE_BATCH, records - sent))]
            while pending:
                try:
                    queued = producer.produce_batch(topic, pending, partition=0, on_delivery=delivered)
                except BufferError:
                    queued = 0
                sent += queued
                if queued < len(pending):  # the local queue is full: those not taken carry "_error", sent again
                    pending = [m for m in pending if m.pop("_error", None) is not None] or pending
                    producer.poll(0.005)
                    if time.perf_counter() > deadline:
                        return _failure(f"timeout after {timeout_s:g} s with the local queue full", sent)
                    continue
                pending = []
            producer.poll(0)
            progress.update(sent)
        while sent < records:
            try:
                producer.produce(topic, value, partition=0, on_delivery=delivered)
            except BufferError:
                producer.poll(0.005)
                if time.perf_counter() > deadline:
                    return _failure(f"timeout after {timeout_s:g} s with the local queue full", sent)
                continue
            sent += 1
            if sent % 10_000 == 0:
                producer.poll(0)
                progress.update(sent)
        remaining = producer.flush(max(deadline - time.perf_counter(), 0.1))
    except KafkaException as exc:
        return _failure(f"confluent-kafka: {exc}", sent)
    elapsed = time.perf_counter() - started
    progress.finish(sent)
    if remaining:
        return _failure(f"timeout after {timeout_s:g} s: {remaining} records not acknowledged", sent - remaining)
    if errors:
        return _failure(f"delivery failed: {errors[0]}", sent)
    return _result(sent, record_size, elapsed)


# librdkafka's in-process mock cluster (test.mock.num.brokers): a broker in C in the client's own process that
# keeps records in memory and does no validation; its log lines go to stderr unless quietened
LIBRDKAFKA_MOCK_BROKER = {"test.mock.num.brokers": 1, "log_level": 3}


def confluent_enqueue_ceiling(records: int, record_size: int, unused_port: int) -> dict:
    """How fast this Python process can hand records to librdkafka, with no broker.

    The producer points at a closed port, so nothing is sent; records are
    purged afterwards. Broker throughput near this figure means the client, not
    the broker, was the limit.
    """
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": f"127.0.0.1:{unused_port}", "log_level": 0,
                         **CONFLUENT_PRODUCER})
    value = payload(record_size)
    started = time.perf_counter()
    for sent in range(1, records + 1):
        producer.produce("enqueue-ceiling", value, partition=0)
        if sent % 10_000 == 0:
            producer.poll(0)
    elapsed = time.perf_counter() - started
    producer.purge()
    producer.flush(0)
    return _result(records, record_size, elapsed)


def confluent_consume(bootstrap_servers: str, topic: str, records: int, record_size: int,
                      timeout_s: float, progress: Progress, security: dict | None = None) -> dict:
    """Read *records* records from partition 0, offset 0, with confluent-kafka."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap_servers, **CONFLUENT_CONSUMER, **(security or {})})
    received = 0
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        started = time.perf_counter()
        deadline = started + timeout_s
        while received < records:
            if time.perf_counter() > deadline:
                return _failure(f"timeout after {timeout_s:g} s", received)
            for message in consumer.consume(CONFLUENT_CONSUME_BATCH, CONFLUENT_CONSUME_TIMEOUT_S):
                if message.error():
                    return _failure(f"confluent-kafka: {message.error()}", received)
                received += 1
            progress.update(received)
        elapsed = time.perf_counter() - started
    except KafkaException as exc:
        return _failure(f"confluent-kafka: {exc}", received)
    finally:
        consumer.close()
    progress.finish(received)
    return _result(received, record_size, elapsed)


def kafka_python_produce(bootstrap_servers: str, topic: str, records: int, record_size: int,
                         timeout_s: float, progress: Progress) -> dict:
    """Produce with kafka-python (acks=1) to partition 0 and flush."""
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    failures: list[Exception] = []
    value = payload(record_size)
    sent = 0
    try:
        producer = KafkaProducer(bootstrap_servers=bootstrap_servers, acks=1, client_id="pylog-bench",
                                 bootstrap_timeout_ms=int(timeout_s * 1000), **KAFKA_PYTHON_PRODUCER)
        with closing(producer):
            started = time.perf_counter()
            deadline = started + timeout_s
            while sent < records:
                producer.send(topic, value, partition=0).add_errback(failures.append)
                sent += 1
                if sent % 10_000 == 0:
                    progress.update(sent)
                    if time.perf_counter() > deadline:
                        return _failure(f"timeout after {timeout_s:g} s", sent)
            producer.flush(timeout=max(deadline - time.perf_counter(), 0.1))
            elapsed = time.perf_counter() - started
    except KafkaError as exc:
        return _failure(f"kafka-python: {type(exc).__name__}: {exc}", sent)
    progress.finish(sent)
    if failures:
        return _failure(f"delivery failed: {failures[0]!r}", sent)
    return _result(sent, record_size, elapsed)


def kafka_python_consume(bootstrap_servers: str, topic: str, records: int, record_size: int,
                         timeout_s: float, progress: Progress) -> dict:
    """Read *records* records from partition 0, offset 0, with kafka-python."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import KafkaError

    received = 0
    try:
        consumer = KafkaConsumer(bootstrap_servers=bootstrap_servers, client_id="pylog-bench",
                                 bootstrap_timeout_ms=int(timeout_s * 1000), **KAFKA_PYTHON_CONSUMER)
        with closing(consumer):
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            consumer.seek_to_beginning(tp)
            started = time.perf_counter()
            deadline = started + timeout_s
            while received < records:
                if time.perf_counter() > deadline:
                    return _failure(f"timeout after {timeout_s:g} s", received)
                batches = consumer.poll(timeout_ms=500, max_records=KAFKA_PYTHON_POLL_RECORDS)
                received += sum(len(batch) for batch in batches.values())
                progress.update(received)
            elapsed = time.perf_counter() - started
    except KafkaError as exc:
        return _failure(f"kafka-python: {type(exc).__name__}: {exc}", received)
    progress.finish(received)
    return _result(received, record_size, elapsed)
