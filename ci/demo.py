"""The main job, for now: the embedded broker with two different Kafka clients.

Starts a pylog broker in-process (data in a temp dir), creates a topic with
the admin API, produces records with confluent-kafka (librdkafka) and with
kafka-python, consumes everything back with both, checks that every record
arrived exactly once with its key, value and headers, and prints what
happened.  Exit status 0 only when the check passes.
"""
from __future__ import annotations

import sys
import tempfile
import time
from collections import Counter

from confluent_kafka import Consumer, Producer
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic

from broker_sim.server.broker import Broker

TOPIC = "demo-events"
PARTITIONS = 3
PER_CLIENT = 5000


def say(message: str) -> None:
    print(f"[demo] {message}", flush=True)


def produce_confluent(bootstrap: str) -> set[tuple[bytes, bytes]]:
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": "lz4", "linger.ms": 5,
                         "enable.idempotence": True})
    sent = set()
    for i in range(PER_CLIENT):
        key, value = f"user-{i % 97}".encode(), f"confluent event {i}".encode()
        producer.produce(TOPIC, value=value, key=key, headers=[("client", b"confluent-kafka")])
        sent.add((key, value))
        if i % 1000 == 0:
            producer.poll(0)
    left = producer.flush(30)
    if left:
        raise SystemExit(f"confluent-kafka could not deliver {left} records")
    return sent


def produce_kafka_python(bootstrap: str) -> set[tuple[bytes, bytes]]:
    producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type="gzip", linger_ms=5, acks="all")
    sent = set()
    for i in range(PER_CLIENT):
        key, value = f"user-{i % 89}".encode(), f"kafka-python event {i}".encode()
        producer.send(TOPIC, value=value, key=key, headers=[("client", b"kafka-python")])
        sent.add((key, value))
    producer.flush(30)
    producer.close()
    return sent


def consume_kafka_python(bootstrap: str, expected: int) -> list:
    consumer = KafkaConsumer(TOPIC, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, group_id=None, consumer_timeout_ms=10000)
    records = []
    for record in consumer:
        records.append((record.key, record.value, dict(record.headers)))
        if len(records) >= expected:
            break
    consumer.close()
    return records


def consume_confluent(bootstrap: str, expected: int) -> list:
    from confluent_kafka import TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "pylog-demo", "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    records = []
    deadline = time.monotonic() + 30
    while len(records) < expected and time.monotonic() < deadline:
        for message in consumer.consume(1000, timeout=1.0):
            if message.error():
                raise SystemExit(f"confluent-kafka consumer error: {message.error()}")
            records.append((message.key(), message.value(), dict(message.headers() or [])))
    consumer.close()
    return records


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="pylog-demo-") as data_dir:
        started = time.monotonic()
        with Broker(data_dir, port=0) as broker:
            bootstrap = broker.bootstrap_servers
            say(f"embedded broker up on {bootstrap} in {(time.monotonic() - started) * 1000:.0f} ms "
                f"(data dir {data_dir})")
            admin = KafkaAdminClient(bootstrap_servers=bootstrap)
            admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)])
            admin.close()
            say(f"created topic {TOPIC} with {PARTITIONS} partitions")

            t0 = time.monotonic()
            sent = produce_confluent(bootstrap)
            say(f"confluent-kafka (librdkafka, lz4, idempotent) produced {len(sent)} records "
                f"in {time.monotonic() - t0:.2f} s")
            t0 = time.monotonic()
            sent |= produce_kafka_python(bootstrap)
            say(f"kafka-python (gzip, acks=all) produced {PER_CLIENT} records in {time.monotonic() - t0:.2f} s")

            failures = 0
            for name, consume in (("kafka-python", consume_kafka_python), ("confluent-kafka", consume_confluent)):
                t0 = time.monotonic()
                records = consume(bootstrap, len(sent))
                got = Counter((k, v) for k, v, _ in records)
                missing = len(sent - set(got))
                duplicated = sum(n - 1 for n in got.values() if n > 1)
                by_client = Counter(h.get("client", b"?").decode() for _, _, h in records)
                ok = missing == 0 and duplicated == 0 and len(records) == len(sent)
                failures += not ok
                say(f"{name} consumed {len(records)} records in {time.monotonic() - t0:.2f} s: "
                    f"missing {missing}, duplicated {duplicated}, by producer {dict(by_client)} "
                    f"-> {'OK' if ok else 'FAILED'}")
            ends = {p.index: (p.log_start_offset, p.log_end_offset) for p in broker.replicas.topic_partitions(TOPIC)}
            say(f"partition offsets (start, end): {ends}")
        say("broker stopped cleanly" if not failures else "demo FAILED")
        return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
