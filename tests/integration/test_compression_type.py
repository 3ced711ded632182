"""A topic's compression.type: ``producer`` keeps the producer's codec, a codec re-encodes data batches to it
(Kafka's LogValidator), keeping records, producer ids and sequences (an idempotent retry is still a duplicate)."""
from __future__ import annotations

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic

from tests.integration.client_helpers import wait_for_leaders
from tests.integration.kafka_wire import WireClient, batches_of, fetch_request


def _stored_codecs(broker, topic: str) -> set[int]:
    with WireClient(broker.bootstrap_servers) as client:
        response = client.call(fetch_request(topic, 0, 0))
    return {b.compression_type for b in batches_of(response.responses[0].partitions[0].records)}


@pytest.mark.parametrize("topic_codec,producer_codec,stored", [
    ("gzip", None, {1}), ("uncompressed", "lz4", {0}), ("zstd", "gzip", {4}), ("producer", "snappy", {2}),
])
def test_batches_are_stored_in_the_topics_codec(any_broker, unique, topic_codec, producer_codec, stored):
    topic = unique(f"codec-{topic_codec}-{producer_codec}")
    admin = KafkaAdminClient(bootstrap_servers=any_broker.bootstrap_servers)
    admin.create_topics([NewTopic(topic, 1, 1, topic_configs={"compression.type": topic_codec})])
    admin.close()
    wait_for_leaders(any_broker.bootstrap_servers, topic, 1)
    producer = KafkaProducer(bootstrap_servers=any_broker.bootstrap_servers, compression_type=producer_codec,
                             linger_ms=20, enable_idempotence=True)
    for i in range(200):
        producer.send(topic, key=f"k{i}".encode(), value=f"value-{i}".encode() * 5, headers=[("n", str(i).encode())])
    producer.flush(30)
    producer.close()
    assert _stored_codecs(any_broker, topic) == stored
    consumer = KafkaConsumer(topic, bootstrap_servers=any_broker.bootstrap_servers, auto_offset_reset="earliest",
                             consumer_timeout_ms=10000, group_id=None)
    got = []
    for m in consumer:  # all 200, or what came within 10 s
        got.append((m.offset, m.key, m.value, m.headers))
        if len(got) == 200:
            break
    consumer.close()
    assert got == [(i, f"k{i}".encode(), f"value-{i}".encode() * 5, [("n", str(i).encode())]) for i in range(200)]


def test_an_unknown_codec_is_refused(any_broker, unique):
    from kafka.errors import InvalidConfigurationError
    admin = KafkaAdminClient(bootstrap_servers=any_broker.bootstrap_servers)
    try:
        with pytest.raises(InvalidConfigurationError):
            admin.create_topics([NewTopic(unique("codec-bad"), 1, 1, topic_configs={"compression.type": "brotli"})])
    finally:
        admin.close()
