"""A 50-partition topic: keyed records spread out, each consumed exactly once, in order per partition.

Records carry a per-key sequence number; a key always maps to one partition,
so per-partition order shows up as each key's sequence numbers arriving in
offset order.  Both kafka-python and confluent-kafka produce (their default
partitioners differ); both consumers read all 50 partitions.
"""
from __future__ import annotations

from collections import defaultdict

import pytest

from client_helpers import (
    Record, consume_confluent, consume_kafka_python, create_topic, produce_confluent, produce_kafka_python,
)

PARTITIONS = 50
KEYS = 200
PER_KEY = 5


def keyed_records(tag: str) -> list[Record]:
    return [Record(f"{tag}-key-{k}".encode(), f"{tag}:{k}:{seq}".encode())
            for seq in range(PER_KEY) for k in range(KEYS)]


@pytest.mark.parametrize("producer", ["kafka-python", "confluent-kafka"])
def test_keyed_records_spread_over_fifty_partitions_are_consumed_once_in_order(pylog_broker, producer):
    bootstrap = pylog_broker.bootstrap_servers
    create_topic(bootstrap, "wide", partitions=PARTITIONS)
    sent = keyed_records(producer)
    (produce_kafka_python if producer == "kafka-python" else produce_confluent)(bootstrap, "wide", sent)

    for consume in (consume_kafka_python, consume_confluent):
        got = consume(bootstrap, "wide", len(sent), partitions=range(PARTITIONS), timeout=30)
        assert sorted(r.value for r in got) == sorted(r.value for r in sent), consume.__name__
        by_partition = defaultdict(list)
        partition_of_key = {}
        for r in got:
            by_partition[r.partition].append(r)
            assert partition_of_key.setdefault(r.key, r.partition) == r.partition, f"{r.key} in two partitions"
        assert len(by_partition) >= PARTITIONS * 0.8, f"records reached only {len(by_partition)} partitions"
        for partition, records in by_partition.items():
            assert [r.offset for r in records] == list(range(len(records))), f"partition {partition}"
            sequences = defaultdict(list)
            for r in records:
                sequences[r.key].append(int(r.value.rsplit(b":", 1)[1]))
            assert all(seqs == list(range(PER_KEY)) for seqs in sequences.values()), f"partition {partition}"
    ends = {p.index: p.log_end_offset for p in pylog_broker.replicas.topic_partitions("wide")}
    assert len(ends) == PARTITIONS and sum(ends.values()) == len(sent)
