"""ListOffsets: earliest, latest, by timestamp and max timestamp.

The log is written over the wire so batch boundaries are known:
batch A holds timestamps T, T+10, T+20 (offsets 0-2), batch B T+30, T+40
(3-4), batch C T+100, T+50 (5-6, out of order inside the batch).  A query
for timestamp t must answer the first offset whose record timestamp is >= t,
also inside a batch, and nothing past the end; kafka-python's
``offsets_for_times`` and confluent-kafka's ``offsets_for_times`` must agree.
MAX_TIMESTAMP (-3, ListOffsets v7, KIP-734) answers the record with the
largest timestamp.
"""
from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from kafka import KafkaConsumer, TopicPartition

from client_helpers import create_topic
from kafka_wire import (
    EARLIEST, LATEST, MAX_TIMESTAMP, WireClient, list_offsets, produce_request, produce_result, record_batch,
)

T = int(time.time() * 1000) - 60_000
# timestamp query -> expected offset (None: no record at or after it)
EXPECTED = {T - 1000: 0, T: 0, T + 1: 1, T + 15: 2, T + 20: 2, T + 21: 3, T + 40: 4, T + 41: 5, T + 60: 5,
            T + 100: 5, T + 101: None}


@pytest.fixture
def stamped_topic(any_broker, unique):
    topic = unique("stamped")
    create_topic(any_broker.bootstrap_servers, topic)
    with WireClient(any_broker.bootstrap_servers) as client:
        for timestamps, base in (([T, T + 10, T + 20], 0), ([T + 30, T + 40], 3), ([T + 100, T + 50], 5)):
            batch = record_batch([b"v%d" % t for t in timestamps], timestamps=timestamps)
            assert produce_result(client.call(produce_request(topic, 0, batch))) == (0, base)
    return topic


def test_earliest_latest_and_timestamp_queries_over_the_wire(any_broker, stamped_topic):
    with WireClient(any_broker.bootstrap_servers) as client:
        assert list_offsets(client, stamped_topic, 0, EARLIEST)[::2] == (0, 0)
        assert list_offsets(client, stamped_topic, 0, LATEST)[::2] == (0, 7)
        for query, offset in EXPECTED.items():
            code, _, got = list_offsets(client, stamped_topic, 0, query)
            assert (code, got) == (0, -1 if offset is None else offset), f"timestamp T{query - T:+d}"
        for version in (1, 4):
            assert list_offsets(client, stamped_topic, 0, T + 15, version=version)[::2] == (0, 2)


def test_max_timestamp_query_answers_the_record_with_the_largest_timestamp(any_broker, stamped_topic):
    with WireClient(any_broker.bootstrap_servers) as client:
        assert list_offsets(client, stamped_topic, 0, MAX_TIMESTAMP, version=7) == (0, T + 100, 5)


def test_max_timestamp_of_an_empty_partition_is_unknown(any_broker, unique):
    topic = unique("empty")
    create_topic(any_broker.bootstrap_servers, topic)
    with WireClient(any_broker.bootstrap_servers) as client:
        assert list_offsets(client, topic, 0, MAX_TIMESTAMP, version=7) == (0, -1, -1)


def test_kafka_python_offsets_for_times_and_watermarks(any_broker, stamped_topic):
    consumer = KafkaConsumer(bootstrap_servers=any_broker.bootstrap_servers, group_id=None,
                             enable_auto_commit=False)
    try:
        tp = TopicPartition(stamped_topic, 0)
        assert consumer.beginning_offsets([tp]) == {tp: 0}
        assert consumer.end_offsets([tp]) == {tp: 7}
        for query, offset in EXPECTED.items():
            found = consumer.offsets_for_times({tp: query})[tp]
            assert (found.offset if found else None) == offset, f"timestamp T{query - T:+d}"
        assert consumer.offsets_for_times({tp: T + 15})[tp].timestamp == T + 20
    finally:
        consumer.close()


def test_confluent_offsets_for_times_and_watermarks(any_broker, stamped_topic):
    consumer = Consumer({"bootstrap.servers": any_broker.bootstrap_servers, "group.id": "pylog-list-offsets",
                         "enable.auto.commit": False})
    try:
        assert consumer.get_watermark_offsets(ConfluentTopicPartition(stamped_topic, 0), timeout=10) == (0, 7)
        for query, expected in EXPECTED.items():
            (answer,) = consumer.offsets_for_times([ConfluentTopicPartition(stamped_topic, 0, query)], timeout=10)
            assert answer.error is None
            assert answer.offset == (-1 if expected is None else expected), f"timestamp T{query - T:+d}"
    finally:
        consumer.close()
