"""Produce and consume with each real client, and run a broker in its own process.

Theory of operation: every client's records are normalised to ``Record`` so
one assertion can compare what kafka-python, confluent-kafka, aiokafka and
kcat saw.  Consumers assign partitions explicitly (the broker has no group
coordinator) and stop after the expected count or a deadline, never later.
``BrokerProcess`` runs ``python -m broker_sim`` for tests that SIGKILL it.
"""
from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from broker_sim.testing.waiting import wait_until

CREATE, APPEND = "CreateTime", "LogAppendTime"


@dataclass(frozen=True)
class Record:
    key: bytes | None
    value: bytes | None
    headers: tuple = ()
    timestamp: int | None = None
    partition: int | None = None
    offset: int | None = None
    timestamp_type: str | None = None

    def content(self) -> tuple:
        """What a producer controls and a consumer must see unchanged."""
        return self.key, self.value, tuple(self.headers)


# --- producers -------------------------------------------------------------

def produce_kafka_python(bootstrap: str, topic: str, records, *, compression: str | None = None,
                         acks="all", **config) -> list:
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type=compression, acks=acks,
                             linger_ms=5, **config)
    try:
        futures = [producer.send(topic, key=r.key, value=r.value, headers=list(r.headers) or None,
                                 timestamp_ms=r.timestamp, partition=r.partition) for r in records]
        producer.flush(15)
        return [f.get(timeout=15) for f in futures] if acks != 0 else []
    finally:
        producer.close(timeout=5)


def produce_confluent(bootstrap: str, topic: str, records, *, compression: str = "none", acks="all",
                      **config) -> list:
    from confluent_kafka import Producer
    settings = {"bootstrap.servers": bootstrap, "compression.type": compression, "acks": str(acks),
                "linger.ms": 5, **config}
    producer = Producer(settings)
    delivered, errors = [], []

    def on_delivery(err, msg):
        (errors if err else delivered).append(err or msg)

    for r in records:
        kwargs = {"key": r.key, "value": r.value, "on_delivery": on_delivery}
        if r.headers:
            kwargs["headers"] = list(r.headers)
        if r.timestamp is not None:
            kwargs["timestamp"] = r.timestamp
        if r.partition is not None:
            kwargs["partition"] = r.partition
        producer.produce(topic, **kwargs)
    left = producer.flush(15)
    assert left == 0 and not errors, f"confluent-kafka: {left} undelivered, errors {errors}"
    return delivered


def produce_aiokafka(bootstrap: str, topic: str, records, *, compression: str | None = None,
                     acks="all") -> list:
    from aiokafka import AIOKafkaProducer

    async def run():
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type=compression, acks=acks,
                                    request_timeout_ms=10000)
        await producer.start()
        try:
            futures = [await producer.send(topic, key=r.key, value=r.value, headers=list(r.headers) or None,
                                           timestamp_ms=r.timestamp, partition=r.partition) for r in records]
            return [await f for f in futures]
        finally:
            await producer.stop()

    return asyncio.run(asyncio.wait_for(run(), 30))


def kcat(*args, input: bytes | None = None, timeout: float = 30) -> bytes:
    done = subprocess.run(["kcat", *args], input=input, capture_output=True, timeout=timeout)
    assert done.returncode == 0, f"kcat {args} exited {done.returncode}: {done.stderr.decode(errors='replace')}"
    return done.stdout


def produce_kcat(bootstrap: str, topic: str, lines: list[bytes], *, headers=(), compression: str | None = None,
                 key_delimiter: str = ":", partition: int = 0, config: dict | None = None) -> None:
    """One kcat -P run: each line is ``key<delim>value``; an empty value is sent as NULL (-Z); ``config``:
    librdkafka properties (-X)."""
    args = ["-b", bootstrap, "-P", "-t", topic, "-p", str(partition), "-K", key_delimiter, "-Z"]
    for name, value in (config or {}).items():
        args += ["-X", f"{name}={value}"]
    for name, value in headers:
        args += ["-H", name.encode() + b"=" + value]
    if compression:
        args += ["-z", compression]
    kcat(*args, input=b"\n".join(lines) + b"\n")


# --- consumers -------------------------------------------------------------

def consume_kafka_python(bootstrap: str, topic: str, expected: int, *, partitions=(0,), timeout: float = 15,
                         start: str = "earliest") -> list[Record]:
    from kafka import KafkaConsumer, TopicPartition
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset=start, fetch_max_wait_ms=100)
    try:
        consumer.assign([TopicPartition(topic, p) for p in partitions])
        out: list[Record] = []
        deadline = time.monotonic() + timeout
        while len(out) < expected and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=200).values():
                for m in batch:
                    out.append(Record(m.key, m.value, tuple(m.headers), m.timestamp, m.partition, m.offset,
                                      APPEND if m.timestamp_type == 1 else CREATE))
        return out
    finally:
        consumer.close()


def consume_confluent(bootstrap: str, topic: str, expected: int, *, partitions=(0,), timeout: float = 15,
                      start_offset: int | None = None) -> list[Record]:
    from confluent_kafka import OFFSET_BEGINNING, TIMESTAMP_LOG_APPEND_TIME, Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "pylog-integration",
                         "enable.auto.commit": False, "enable.partition.eof": False,
                         "fetch.wait.max.ms": 100})
    try:
        offset = OFFSET_BEGINNING if start_offset is None else start_offset
        consumer.assign([TopicPartition(topic, p, offset) for p in partitions])
        out: list[Record] = []
        deadline = time.monotonic() + timeout
        while len(out) < expected and time.monotonic() < deadline:
            for m in consumer.consume(1000, timeout=0.2):
                if m.error():
                    raise AssertionError(f"confluent-kafka consumer error: {m.error()}")
                ts_type, ts = m.timestamp()
                out.append(Record(m.key(), m.value(), tuple(m.headers() or ()), ts, m.partition(), m.offset(),
                                  APPEND if ts_type == TIMESTAMP_LOG_APPEND_TIME else CREATE))
        return out
    finally:
        consumer.close()


def consume_aiokafka(bootstrap: str, topic: str, expected: int, *, partitions=(0,),
                     timeout: float = 15) -> list[Record]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run():
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                    auto_offset_reset="earliest", fetch_max_wait_ms=100)
        await consumer.start()
        try:
            consumer.assign([TopicPartition(topic, p) for p in partitions])
            out: list[Record] = []
            deadline = time.monotonic() + timeout
            while len(out) < expected and time.monotonic() < deadline:
                for batch in (await consumer.getmany(timeout_ms=200)).values():
                    for m in batch:
                        out.append(Record(m.key, m.value, tuple(m.headers), m.timestamp, m.partition, m.offset,
                                          APPEND if m.timestamp_type == 1 else CREATE))
            return out
        finally:
            await consumer.stop()

    return asyncio.run(asyncio.wait_for(run(), timeout + 15))


def consume_kcat(bootstrap: str, topic: str, expected: int, *, partitions=(0,), timeout: float = 15) -> list[Record]:
    """kcat -C -J from the beginning of each partition until its end.

    kcat writes keys, values and header values into its JSON unescaped, so
    non-UTF-8 bytes are carried through ``surrogateescape``.
    """
    records = []
    for partition in partitions:
        out = kcat("-b", bootstrap, "-C", "-t", topic, "-p", str(partition), "-o", "beginning", "-e", "-J",
                   "-m", "10", timeout=timeout)
        for line in out.decode("utf-8", "surrogateescape").splitlines():
            doc = json.loads(line, strict=False)
            hdrs = doc.get("headers") or []
            headers = tuple((hdrs[i], _raw(hdrs[i + 1])) for i in range(0, len(hdrs), 2))
            records.append(Record(_raw(doc["key"]), _raw(doc["payload"]), headers, doc["ts"], doc["partition"],
                                  doc["offset"], APPEND if doc.get("tstype") == "logappend" else CREATE))
    return records


def _raw(text: str | None) -> bytes | None:
    return None if text is None else text.encode("utf-8", "surrogateescape")


CONSUMERS = {
    "kafka-python": consume_kafka_python,
    "confluent-kafka": consume_confluent,
    "aiokafka": consume_aiokafka,
    "kcat": consume_kcat,
}


# --- admin -----------------------------------------------------------------

def create_topic(bootstrap: str, name: str, partitions: int = 1, configs: dict | None = None) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1,
                                      topic_configs=configs or {})])
    finally:
        admin.close()
    wait_for_leaders(bootstrap, name, partitions)


def wait_for_leaders(bootstrap: str, topic: str, partitions: int, timeout: float = 15) -> None:
    """Wait until Metadata names a leader for each of ``topic``'s partitions and each leader serves it.

    Apache Kafka answers CreateTopics once its controller committed the topic; its broker serves the
    partitions a moment later (UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE until then), where
    broker_sim serves them at once.  Its Metadata can name the leader before that leader's replica manager
    has made the partition (a Fetch then answers at once, empty, with an error), so each leader is also asked
    a ListOffsets.  Clients retry those codes; raw-wire tests wait here instead.
    """
    from kafka_wire import WireClient, list_offsets, metadata

    def led() -> bool:
        with WireClient(bootstrap) as client:
            answer = metadata(client, [topic], auto_create=False)
        (found,) = answer.topics
        if not (found.error_code == 0 and len(found.partitions) == partitions and all(
                p.error_code == 0 and p.leader_id >= 0 for p in found.partitions)):
            return False
        brokers = {b.node_id: f"{b.host}:{b.port}" for b in answer.brokers}
        for p in found.partitions:
            with WireClient(brokers[p.leader_id]) as leader:
                if list_offsets(leader, topic, p.partition_index, -1)[0] != 0:
                    return False
        return True

    wait_until(led, timeout_s=timeout, what=f"a leader for every partition of {topic}")


# --- broker in a separate process -----------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class BrokerProcess:
    """``python -m broker_sim`` on 127.0.0.1; stderr goes to ``<data_dir>/../broker-<port>.log``."""

    data_dir: Path
    port: int
    config: dict = field(default_factory=dict)
    process: subprocess.Popen | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir.parent / f"broker-{self.port}.log"

    def start(self, timeout: float = 20) -> "BrokerProcess":
        args = [sys.executable, "-m", "broker_sim", "--data-dir", str(self.data_dir), "--port", str(self.port),
                "--host", "127.0.0.1"]
        for key, value in self.config.items():
            args += ["--config", f"{key}={value}"]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log)
        wait_until(lambda: self._ready(), timeout_s=timeout, what=f"broker on port {self.port} listening")
        return self

    def _ready(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"broker exited with {self.process.returncode}: {self.log_path.read_text()}")
        if f"listening on 127.0.0.1:{self.port}" not in self.log_path.read_text(errors="replace"):
            return False
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return True
        except OSError:
            return False

    def kill(self) -> None:
        """SIGKILL, then reap."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def terminate(self, timeout: float = 20) -> int:
        """SIGTERM; returns the exit status."""
        os.kill(self.process.pid, signal.SIGTERM)
        return self.process.wait(timeout)
