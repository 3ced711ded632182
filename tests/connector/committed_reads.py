"""What a read_committed consumer sees of a topic the sink tests wrote: the sorted row numbers of its values."""
from __future__ import annotations

import time

from kafka import KafkaConsumer, TopicPartition


def committed_row_numbers(bootstrap: str, topic: str, partitions: int) -> list[int]:
    """The row numbers (values ``v<n>:...``) of every committed record of ``topic``, sorted; read for at most 60 s."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, isolation_level="read_committed")
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    consumer.assign(tps)
    consumer.seek_to_beginning()
    ends = consumer.end_offsets(tps)
    seen: list[int] = []
    deadline = time.monotonic() + 60
    while any(consumer.position(tp) < ends[tp] for tp in tps) and time.monotonic() < deadline:
        for records in consumer.poll(500).values():
            seen.extend(int(r.value.split(b":")[0][1:]) for r in records)
    consumer.close()
    return sorted(seen)
