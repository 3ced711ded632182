"""Tiny legal bombs on topics that re-encode (compression.type): a 1.4 KB zstd batch holding 31 records of
~1 MB each, and 18 KB of zstd holding 30,000 empty records, pass every size bound on the wire. Re-encoding
costs what the records are (~31 MB to compress; ~10 us a record rebuilt in Python), so that cost is judged by
the decompressed size and the record count and paid on a validation thread, while other clients keep getting
answers; a batch that re-encodes past max.message.bytes is refused, as Kafka re-checks sizes after it."""
from __future__ import annotations

import time
import uuid

import zstandard
from client_helpers import consume_kafka_python, create_topic
from hostile import assert_serving
from kafka_wire import crafted_batch, crafted_record, varint
from test_records import MESSAGE_TOO_LARGE, normal_client_latencies, produce_raw

RECORD_VALUE = 1_000_000
RECORDS = 31
EMPTY_RECORDS = 30_000


def megabyte_records_bomb() -> bytes:
    """31 keyless records of RECORD_VALUE zero bytes, zstd-compressed into one ~1.4 KB batch."""
    stream = zstandard.ZstdCompressor(level=19).compressobj()
    parts = []
    for delta in range(RECORDS):
        body = b"\x00" + varint(0) + varint(delta) + varint(-1) + varint(RECORD_VALUE)
        parts.append(stream.compress(varint(len(body) + RECORD_VALUE + 1) + body))
        parts.extend(stream.compress(bytes(1 << 16)) for _ in range(RECORD_VALUE >> 16))
        parts.append(stream.compress(bytes(RECORD_VALUE & 0xFFFF) + varint(0)))
    return crafted_batch(b"".join(parts) + stream.flush(), RECORDS, codec=4)


def many_records_bomb() -> bytes:
    """One batch of 3 * EMPTY_RECORDS empty records (~768 KB decompressed; a produce carries one batch a
    partition, as Kafka requires)."""
    payload = b"".join(crafted_record(i, None, b"") for i in range(3 * EMPTY_RECORDS))
    return crafted_batch(zstandard.ZstdCompressor().compress(payload), 3 * EMPTY_RECORDS, codec=4)


def test_tiny_batches_re_encoded_by_the_broker_do_not_stall_other_clients(hostile_broker):
    broker = hostile_broker()
    big, many = megabyte_records_bomb(), many_records_bomb()
    assert len(big) < 1500 and len(many) < 96 << 10, (len(big), len(many))
    topics = {codec: f"reencode-{codec}-{uuid.uuid4().hex[:6]}" for codec in ("gzip", "lz4", "uncompressed")}
    for codec, topic in topics.items():
        create_topic(broker.bootstrap_servers, topic, configs={"compression.type": codec})

    with normal_client_latencies(broker.bootstrap_servers) as latencies:
        started = time.monotonic()
        answers = {(codec, name): produce_raw(broker.bootstrap_servers, topic, bomb)
                   for codec, topic in topics.items() for name, bomb in (("big", big), ("many", many))}
        bomb_seconds = time.monotonic() - started
    assert latencies, "the normal client got no answer at all"
    print(f"\nsix re-encoding produces took {bomb_seconds:.3f} s; the normal client's longest wait "
          f"{max(latencies) * 1000:.0f} ms")
    assert max(latencies) < 0.5, f"normal client waited {max(latencies):.3f} s (re-encoding took {bomb_seconds:.3f} s)"
    for (codec, name), answer in answers.items():
        if (codec, name) == ("uncompressed", "big"):  # 31 MB once uncompressed: past max.message.bytes
            assert (answer.error_code, answer.error_message) == (MESSAGE_TOO_LARGE, None), answer
        else:
            assert answer.error_code == 0, (codec, name, answer)
    assert_serving(broker)
    broker = hostile_broker.restart(broker)
    for codec, topic in topics.items():
        expected = ([] if codec == "uncompressed" else [RECORD_VALUE] * RECORDS) + [0] * (3 * EMPTY_RECORDS)
        values = consume_kafka_python(broker.bootstrap_servers, topic, len(expected), timeout=60)
        assert [len(r.value) for r in values] == expected, codec
