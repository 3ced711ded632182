"""Batches up to max.message.bytes are accepted and read back whole; larger ones get MESSAGE_TOO_LARGE.

The limit is the topic's ``max.message.bytes`` (falling back to the broker's
``message.max.bytes``) and applies to a whole record batch.  At the protocol
level a batch of exactly the limit succeeds and one byte more fails with
error 10; the real clients see their own names for that error.  After a
rejection the broker keeps serving: the next produce and a consume on new
connections work, and the rejected record is nowhere in the log.
"""
from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, Producer
from kafka import KafkaProducer
from kafka.errors import MessageSizeTooLargeError

from client_helpers import Record, consume_confluent, consume_kafka_python, create_topic, produce_kafka_python
from kafka_wire import LATEST, WireClient, list_offsets, produce_request, produce_result, record_batch

LIMIT = 200_000  # above the 64 KiB where Fetch switches to sendfile, so that path is covered too
MESSAGE_TOO_LARGE = 10


def batch_of_exactly(size: int) -> tuple[bytes, bytes]:
    """(batch, its record's value): a one-record batch of exactly ``size`` bytes."""
    length = size - 100
    for _ in range(5):
        value = b"x" * length
        batch = record_batch([value], key=None)
        if len(batch) == size:
            return batch, value
        length += size - len(batch)
    raise AssertionError(f"could not build a batch of {size} bytes")


@pytest.fixture
def limited_topic(any_broker, unique):
    topic = unique("big")
    create_topic(any_broker.bootstrap_servers, topic, configs={"max.message.bytes": str(LIMIT)})
    return topic


def test_batch_of_exactly_the_limit_is_accepted_and_one_byte_more_is_rejected(any_broker, limited_topic):
    (at_limit, value), (over_limit, _) = batch_of_exactly(LIMIT), batch_of_exactly(LIMIT + 1)
    with WireClient(any_broker.bootstrap_servers) as client:
        assert produce_result(client.call(produce_request(limited_topic, 0, at_limit))) == (0, 0)
        code, _ = produce_result(client.call(produce_request(limited_topic, 0, over_limit)))
        assert code == MESSAGE_TOO_LARGE
        # the same connection goes on serving
        assert produce_result(client.call(produce_request(limited_topic, 0, record_batch([b"small"])))) == (0, 1)
        assert list_offsets(client, limited_topic, 0, LATEST)[::2] == (0, 2)
    got = consume_kafka_python(any_broker.bootstrap_servers, limited_topic, 2)
    assert [r.value for r in got] == [value, b"small"]


@pytest.mark.parametrize("factory", ["pylog_broker_factory", "kafka_broker_factory"], ids=["pylog", "kafka"])
def test_broker_wide_message_max_bytes_applies_to_topics_without_override(request, factory):
    broker = request.getfixturevalue(factory)(config={"message.max.bytes": str(LIMIT)})
    create_topic(broker.bootstrap_servers, "plain")
    with WireClient(broker.bootstrap_servers) as client:
        assert produce_result(client.call(produce_request("plain", 0, batch_of_exactly(LIMIT)[0])))[0] == 0
        assert produce_result(client.call(produce_request("plain", 0, batch_of_exactly(LIMIT + 1)[0])))[0] == \
            MESSAGE_TOO_LARGE


def test_kafka_python_near_limit_round_trips_and_over_limit_raises_message_size_too_large(any_broker,
                                                                                          limited_topic):
    bootstrap = any_broker.bootstrap_servers
    near = b"n" * (LIMIT - 150)
    produce_kafka_python(bootstrap, limited_topic, [Record(b"near", near)])
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=0)
    try:
        future = producer.send(limited_topic, key=b"over", value=b"o" * (LIMIT + 10))
        with pytest.raises(MessageSizeTooLargeError):
            future.get(timeout=15)
    finally:
        producer.close(timeout=5)
    produce_kafka_python(bootstrap, limited_topic, [Record(b"after", b"still serving")])

    got = consume_kafka_python(bootstrap, limited_topic, 2)
    assert [(r.key, r.value) for r in got] == [(b"near", near), (b"after", b"still serving")]


def test_confluent_near_limit_round_trips_and_over_limit_reports_msg_size_too_large(any_broker, limited_topic):
    bootstrap = any_broker.bootstrap_servers
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.max.bytes": 1_000_000,
                         "linger.ms": 0})
    results = {}

    def on_delivery(err, msg):
        results[msg.key()] = err

    near = b"n" * (LIMIT - 150)
    producer.produce(limited_topic, key=b"near", value=near, on_delivery=on_delivery)
    assert producer.flush(15) == 0
    producer.produce(limited_topic, key=b"over", value=b"o" * (LIMIT + 10), on_delivery=on_delivery)
    assert producer.flush(15) == 0
    producer.produce(limited_topic, key=b"after", value=b"still serving", on_delivery=on_delivery)
    assert producer.flush(15) == 0

    assert results[b"near"] is None and results[b"after"] is None
    assert results[b"over"] is not None and results[b"over"].code() == KafkaError.MSG_SIZE_TOO_LARGE
    got = consume_confluent(bootstrap, limited_topic, 2)
    assert [(r.key, r.value) for r in got] == [(b"near", near), (b"after", b"still serving")]
