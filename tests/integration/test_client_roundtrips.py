"""Every client's records come back unchanged through every client, with every codec.

Each producer (kafka-python, confluent-kafka, aiokafka, kcat) writes records
with keys, a missing key, a tombstone (null value), duplicate header keys,
binary header values and explicit CreateTime timestamps, compressed with one
codec; then all four consumers read them back and must see the same keys,
values, headers and timestamps in the same order.  A raw Fetch checks that the
stored batches really carry the codec, so a client that silently sent
uncompressed data cannot make a codec test pass.  A topic with
``message.timestamp.type=LogAppendTime`` must hand back the broker's clock
instead of the producer's timestamp.
"""
from __future__ import annotations

import time

import pytest

from client_helpers import (
    APPEND, CONSUMERS, CREATE, Record, consume_kafka_python, create_topic, produce_aiokafka, produce_confluent,
    produce_kafka_python, produce_kcat,
)
from kafka_wire import WireClient, batches_of, fetch_request, fetched_partitions

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
BINARY = bytes([0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF])
# compressible, so librdkafka does not fall back to sending small batches uncompressed
FILLER = b"the quick brown fox jumps over the lazy dog " * 8


def api_client_records() -> list[Record]:
    base = int(time.time() * 1000) - 3_600_000
    return [
        Record(b"key-0", b"value-0 " + FILLER,
               (("trace", b"t-1"), ("dup", b"first"), ("dup", b"second"), ("bin", BINARY)), base),
        Record(b"tombstone", None, (), base + 1),
        Record(None, b"no key " + FILLER, (("only", b"one"),), base + 2),
        Record(b"key-3", BINARY + FILLER, (), base + 10_000),
        Record(b"key-4", b"older than the previous one", (("dup", b"x"), ("dup", b"x")), base + 5),
    ]


def _produce_api(producer: str, bootstrap: str, topic: str, codec: str) -> list[Record]:
    records = api_client_records()
    if producer == "kafka-python":
        produce_kafka_python(bootstrap, topic, records, compression=None if codec == "none" else codec)
    elif producer == "confluent-kafka":
        produce_confluent(bootstrap, topic, records, compression=codec)
    else:
        produce_aiokafka(bootstrap, topic, records, compression=None if codec == "none" else codec)
    return records


def _produce_kcat(bootstrap: str, topic: str, codec: str) -> list[Record]:
    # kcat applies -H headers to every record and cannot set timestamps; "key:" sends a NULL value (-Z)
    headers = (("dup", b"first"), ("dup", b"second"), ("bin", BINARY[2:]))
    lines = [b"key-0:value-0 " + FILLER, b"tombstone:", b"key-2:" + FILLER]
    # one batch, sent once it holds every line: a batch that compression would not shrink (a lone small record,
    # when a loaded machine lets librdkafka's default 5 ms linger end between two stdin lines) is sent
    # uncompressed (rdkafka_msgset_writer.c), and the stored codecs below would not be the one asked for
    produce_kcat(bootstrap, topic, lines, headers=headers, compression=None if codec == "none" else codec,
                 config={"linger.ms": 2_000, "batch.num.messages": len(lines)})
    return [Record(b"key-0", b"value-0 " + FILLER, headers), Record(b"tombstone", None, headers),
            Record(b"key-2", FILLER, headers)]


def _stored_codecs(bootstrap: str, topic: str) -> set[int]:
    with WireClient(bootstrap) as client:
        (partition,) = fetched_partitions(client.call(fetch_request(topic, 0, 0)))
    assert partition.error_code == 0
    return {batch.compression_type for batch in batches_of(partition.records)}


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("producer", ["kafka-python", "confluent-kafka", "aiokafka", "kcat"])
def test_records_round_trip_through_every_client_with_codec(pylog_broker, producer, codec):
    bootstrap = pylog_broker.bootstrap_servers
    topic = f"roundtrip-{producer}-{codec}"
    create_topic(bootstrap, topic)
    if producer == "kcat":
        sent = _produce_kcat(bootstrap, topic, codec)
    else:
        sent = _produce_api(producer, bootstrap, topic, codec)

    # librdkafka enables LZ4 only when the broker advertises FindCoordinator (rdkafka_feature.c)
    assert _stored_codecs(bootstrap, topic) == {CODEC_IDS[codec]}
    for consumer, consume in CONSUMERS.items():
        got = consume(bootstrap, topic, len(sent))
        assert [r.content() for r in got] == [r.content() for r in sent], f"{producer} -> {consumer}"
        assert [r.offset for r in got] == list(range(len(sent))), f"{producer} -> {consumer}"
        assert {r.timestamp_type for r in got} == {CREATE}, f"{producer} -> {consumer}"
        if producer != "kcat":
            assert [r.timestamp for r in got] == [r.timestamp for r in sent], \
                f"CreateTime not preserved, {producer} -> {consumer}"


@pytest.mark.parametrize("producer", ["kafka-python", "confluent-kafka", "aiokafka"])
def test_log_append_time_topic_returns_broker_time_not_producer_time(any_broker, unique, producer):
    bootstrap = any_broker.bootstrap_servers
    topic = unique(f"append-time-{producer}")
    create_topic(bootstrap, topic, configs={"message.timestamp.type": "LogAppendTime"})
    old = 1_000_000_000_000  # 2001: far from the broker's clock
    records = [Record(b"k%d" % i, b"v%d" % i, (), old + i) for i in range(3)]
    before = int(time.time() * 1000)
    if producer == "kafka-python":
        metadata = produce_kafka_python(bootstrap, topic, records)
        acked = [m.timestamp for m in metadata]
    elif producer == "confluent-kafka":
        acked = [m.timestamp()[1] for m in produce_confluent(bootstrap, topic, records)]
    else:
        acked = [m.timestamp for m in produce_aiokafka(bootstrap, topic, records)]
    after = int(time.time() * 1000)

    assert all(before - 1000 <= t <= after + 1000 for t in acked), f"produce acks carried {acked}"
    for consumer, consume in CONSUMERS.items():
        got = consume(bootstrap, topic, len(records))
        assert [r.content() for r in got] == [r.content() for r in records], consumer
        assert {r.timestamp_type for r in got} == {APPEND}, consumer
        assert all(before - 1000 <= r.timestamp <= after + 1000 for r in got), \
            f"{consumer} saw {[r.timestamp for r in got]}, not the broker's append time"


def test_records_spread_over_partitions_keep_their_partition_and_order(any_broker, unique):
    bootstrap, topic = any_broker.bootstrap_servers, unique("explicit-partitions")
    create_topic(bootstrap, topic, partitions=3)
    records = [Record(b"k%d" % i, b"v%d" % i, partition=i % 3) for i in range(30)]
    produce_confluent(bootstrap, topic, records)
    got = consume_kafka_python(bootstrap, topic, 30, partitions=(0, 1, 2))
    for p in range(3):
        assert [(r.key, r.value) for r in got if r.partition == p] == \
            [(r.key, r.value) for r in records if r.partition == p]
