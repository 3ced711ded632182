"""storage/validator.py on crafted bytes: each LogValidator rule, lying batches, and decompression bombs of
every codec, whose cost must stay within the bound whatever they declare."""
from __future__ import annotations

import gzip
import sys
import tracemalloc
from pathlib import Path

import cramjam
import lz4.frame
import pytest
import zstandard
from kafka.errors import InvalidRecordError, MessageSizeTooLargeError, UnknownError

from broker_sim.storage.batch import parse_batches
from broker_sim.storage.validator import (
    CHUNK, INLINE_BYTES, THREAD_THRESHOLD, MoveToThread, RecordRules, RecordValidationError, costs_a_thread,
    validate_records)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "integration"))
from kafka_wire import (  # noqa: E402
    crafted_batch as batch, crafted_record as record, one_record_bomb, xerial_snappy)

RULES = RecordRules(compact=False, max_message_bytes=1048588, max_decompressed_bytes=32 << 20)
GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4


def records(n: int, *, key: bytes | None = b"k") -> bytes:
    return b"".join(record(i, key, b"value %d" % i) for i in range(n))


def compress(codec: int, data: bytes) -> bytes:
    if codec == GZIP:
        return gzip.compress(data)
    if codec == SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == LZ4:
        return lz4.frame.compress(data)
    return zstandard.ZstdCompressor().compress(data)


@pytest.mark.parametrize("codec", [0, GZIP, SNAPPY, LZ4, ZSTD])
def test_valid_batches_of_every_codec_pass_and_give_their_headers(codec):
    payload = records(50)
    data = batch(compress(codec, payload) if codec else payload, 50, codec=codec)
    (header,) = validate_records(data, RULES).batches
    assert (header.record_count, header.compression) == (50, codec)


def test_xerial_framed_snappy_as_java_and_kafka_python_write_it_passes():
    payload = records(3000)
    (header,) = validate_records(batch(xerial_snappy(payload), 3000, codec=SNAPPY), RULES).batches
    assert header.record_count == 3000


@pytest.mark.parametrize("codec", [0, GZIP, LZ4])
def test_compression_type_re_encodes_data_batches_and_gives_the_new_headers(codec):
    """compression.type other than producer: batches in another codec come out in it, control batches and
    batches already in it unchanged, and the headers returned are those of the bytes returned."""
    plain = batch(records(200), 200)  # big enough that every codec makes it smaller (else it stays plain)
    zstd = batch(compress(ZSTD, records(100)), 100, codec=ZSTD)
    valid = validate_records(plain + zstd, RULES._replace(codec=codec))
    assert valid.batches == parse_batches(valid.records)
    assert [(b.compression, b.record_count) for b in valid.batches] == [(codec, 200), (codec, 100)]
    kept = validate_records(plain + zstd, RULES._replace(codec=ZSTD))
    assert kept.records.endswith(zstd)
    assert kept.batches[1] == parse_batches(zstd)[0]._replace(position=len(kept.records) - len(zstd))


def test_several_batches_are_all_walked():
    data = batch(records(3), 3) + batch(records(2, key=None)[:-1], 2)
    with pytest.raises(InvalidRecordError, match="batch at byte %d" % len(batch(records(3), 3))):
        validate_records(data, RULES)


@pytest.mark.parametrize("count", [2, 4])
def test_record_count_must_match_the_records_there(count):
    with pytest.raises(InvalidRecordError):
        validate_records(batch(records(3), count), RULES)


@pytest.mark.parametrize("length_error", [-1, 1, 1000])
def test_a_record_length_that_lies_is_refused(length_error):
    payload = record(0, b"k", b"v") + record(1, b"k", b"v", length_error=length_error)
    with pytest.raises(InvalidRecordError):
        validate_records(batch(payload, 2), RULES)


def test_a_value_length_past_the_batch_end_is_refused():
    with pytest.raises(InvalidRecordError):
        validate_records(batch(record(0, b"k", b"v", value_length=1 << 30), 1), RULES)


def test_a_record_length_longer_than_five_bytes_is_an_unknown_server_error_as_in_kafka():
    payload = b"\xff" * 12 + b"\x01"  # Kafka reads the length outside its record checks: UNKNOWN_SERVER_ERROR
    with pytest.raises(UnknownError, match="not a varint of at most 5 bytes"):
        validate_records(batch(payload, 1), RULES)


def test_offset_deltas_off_are_kept_uncompressed_and_refused_compressed_as_in_kafka():
    payload = record(0, b"k", b"a") + record(2, b"k", b"b")
    assert validate_records(batch(payload, 2), RULES).records == batch(payload, 2)
    with pytest.raises(UnknownError, match="offset deltas are not 0, 1, 2"):
        validate_records(batch(compress(GZIP, payload), 2, codec=GZIP), RULES)


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_unknown_codec_is_an_unknown_server_error_as_in_kafka(codec):
    with pytest.raises(UnknownError, match=f"unknown compression type id: {codec}"):
        validate_records(batch(records(1), 1, codec=codec), RULES)


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_garbage_in_place_of_compressed_data_is_an_unknown_server_error_as_in_kafka(codec):
    with pytest.raises(UnknownError, match="corrupt"):
        validate_records(batch(b"\x28\xb5\x2f\xfd garbage, not compressed at all" * 3, 1, codec=codec), RULES)


@pytest.mark.parametrize("codec", [GZIP, LZ4, ZSTD])
def test_truncated_compressed_data_is_refused(codec):
    data = compress(codec, records(200))
    with pytest.raises((UnknownError, InvalidRecordError)):
        validate_records(batch(data[:len(data) // 2], 200, codec=codec), RULES)


def test_a_producer_id_without_a_sequence_is_refused():
    with pytest.raises(InvalidRecordError, match="invalid sequence number -1"):
        validate_records(batch(records(1), 1, producer_id=7, base_sequence=-1), RULES)


def test_a_batch_over_max_message_bytes_is_too_large():
    with pytest.raises(MessageSizeTooLargeError, match="max.message.bytes=100"):
        validate_records(batch(records(20), 20), RULES._replace(max_message_bytes=100))


def test_compacted_topic_reports_exactly_the_keyless_records():
    payload = b"".join(record(i, None if i % 10 == 3 else b"k%d" % i, b"v") for i in range(100))
    with pytest.raises(RecordValidationError) as refused:
        validate_records(batch(payload, 100), RULES._replace(compact=True))
    assert refused.value.errno == 87
    assert [index for index, _ in refused.value.record_errors] == list(range(3, 100, 10))
    assert "Compacted topic cannot accept message without key" in refused.value.record_errors[0][1]
    assert "10 record errors" in str(refused.value)


def test_compacted_topic_accepts_keyed_records_and_other_topics_keyless_ones():
    validate_records(batch(records(5), 5), RULES._replace(compact=True))
    validate_records(batch(records(5, key=None), 5), RULES)


# --- bombs: one record or many, every codec; the cost must stay within the bounds ---------------------------

BOMB_SIZE = 256 << 20  # what the bombs declare; the bounds below are far smaller


def _many_records_bomb(codec: int) -> bytes:
    # 100 KB records: each under max.message.bytes, together far over message.max.decompressed.bytes
    one = record(0, b"k", bytes(100_000))
    count = (32 << 20) // len(one)
    payload = b"".join(record(i, b"k", bytes(100_000)) for i in range(count))
    return batch(compress(codec, payload) if codec != SNAPPY else xerial_snappy(payload), count, codec=codec)


def _peak_while(data: bytes, rules: RecordRules, error, match: str | None, *, inline: bool = False) -> int:
    tracemalloc.start()
    try:
        with pytest.raises(error, match=match):
            validate_records(data, rules, inline=inline)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_one_record_bomb_stops_at_max_message_bytes(codec):
    data = one_record_bomb(codec, BOMB_SIZE)
    rules = RULES._replace(max_message_bytes=max(1 << 20, len(data)))
    peak = _peak_while(data, rules, MessageSizeTooLargeError, "max.message.bytes|message.max.decompressed.bytes")
    # the record's 256 MiB never materialise: at most the record bound, a chunk (a snappy block), the input
    assert peak < rules.max_message_bytes + 2 * max(CHUNK, 1 << 20) + 2 * len(data), peak


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_many_records_bomb_stops_at_message_max_decompressed_bytes(codec):
    data = _many_records_bomb(codec)
    rules = RULES._replace(max_message_bytes=max(1 << 20, len(data)), max_decompressed_bytes=4 << 20)
    peak = _peak_while(data, rules, MessageSizeTooLargeError, "message.max.decompressed.bytes=4194304")
    assert peak < (4 << 20) + 2 * max(CHUNK, 1 << 20) + 2 * len(data), peak


def test_snappy_block_declaring_more_than_the_bound_is_refused_before_decompressing():
    block = bytes([0x80, 0x80, 0x80, 0x80, 0x10]) + b"\x00" * 10  # unsigned varint preamble: 4 GiB
    peak = _peak_while(batch(block, 1, codec=SNAPPY), RULES, MessageSizeTooLargeError,
                       "message.max.decompressed.bytes")
    assert peak < 1 << 20


def test_large_inputs_go_to_a_thread_and_inline_checks_stop_at_the_threshold():
    assert not costs_a_thread(batch(records(10), 10))
    many = INLINE_BYTES // 15  # records(n) are ~17 bytes each
    assert costs_a_thread(batch(records(many), many))
    small = batch(compress(ZSTD, records(10)), 10, codec=ZSTD)
    assert validate_records(small, RULES, inline=True)
    # 5 KB on the wire, 32 MiB inside: found out after THREAD_THRESHOLD bytes, not after the bound
    bomb = _many_records_bomb(ZSTD)
    assert not costs_a_thread(bomb)
    peak = _peak_while(bomb, RULES, MoveToThread, None, inline=True)
    assert peak < THREAD_THRESHOLD + 2 * CHUNK + 2 * len(bomb)


def test_inline_check_of_a_big_snappy_block_moves_to_a_thread_before_decompressing():
    payload = b"".join(record(i, b"k", bytes(200)) for i in range(3000))  # 600 KB in one raw block, as
    data = batch(compress(SNAPPY, payload), 3000, codec=SNAPPY)  # librdkafka writes it
    assert not costs_a_thread(data)
    peak = _peak_while(data, RULES, MoveToThread, None, inline=True)
    assert peak < len(payload) // 2, peak
    validate_records(data, RULES)


def test_more_records_than_records_count_are_refused_once_passed_not_after_the_bound():
    empty = record(0, None, b"")
    payload = empty * ((64 << 20) // len(empty))
    data = batch(compress(ZSTD, payload), 1000, codec=ZSTD)
    peak = _peak_while(data, RULES, InvalidRecordError, "more records than its recordsCount")
    assert peak < RULES.max_message_bytes + 2 * CHUNK + 2 * len(data)
