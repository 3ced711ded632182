"""Reading a topic back for the sink tests: every record, as a read_committed (or read_uncommitted) consumer sees it."""
from __future__ import annotations

import time

from kafka import KafkaConsumer
from kafka.structs import TopicPartition


def read_topic(bootstrap: str, topic: str, *, isolation: str = "read_committed", timeout_s: float = 30,
               client_kwargs: dict | None = None):
    """[(partition, key, value, headers)] of every record up to the end (the LSO under read_committed);
    ``client_kwargs``: kafka-python security settings of a secured broker."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False,
                             group_id=None, fetch_max_wait_ms=100, **(client_kwargs or {}))
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        ends = consumer.end_offsets(partitions)
        records = []
        deadline = time.monotonic() + timeout_s
        while any(consumer.position(tp) < ends[tp] for tp in partitions):
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {topic} did not reach {ends}")
            for batch in consumer.poll(timeout_ms=200).values():
                records.extend((r.partition, r.key, r.value, list(r.headers)) for r in batch)
        return records
    finally:
        consumer.close()


def values_of(records) -> list:
    return sorted(r[2] for r in records)
