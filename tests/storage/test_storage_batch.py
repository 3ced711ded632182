"""RecordBatch v2 header parsing, validation and stamping."""

from __future__ import annotations

import struct

import pytest
from kafka.errors import CorruptRecordError, InvalidRecordError, UnsupportedForMessageFormatError
from kafka.record.default_records import DefaultRecordBatch

from broker_sim.storage.batch import HEADER_SIZE, increment_sequence, parse_batches, stamp_batches

CODECS = [0, 1, 2, 3, 4]  # none, gzip, snappy, lz4, zstd


@pytest.mark.parametrize("compression", CODECS)
def test_parse_reads_every_header_field_of_real_batches(batches, compression):
    first = batches.build(batches.values(3), timestamps=[10, 30, 20], compression=compression)
    second = batches.build(
        batches.values(4), timestamp=40, compression=compression, producer_id=9, producer_epoch=2, base_sequence=7
    )
    headers = parse_batches(first + second)
    assert [h.position for h in headers] == [0, len(first)]
    assert [h.size for h in headers] == [len(first), len(second)]
    a, b = headers
    assert (a.base_offset, a.record_count, a.last_offset_delta, a.magic) == (0, 3, 2, 2)
    assert (a.base_timestamp, a.max_timestamp) == (10, 30)
    assert a.compression == compression and b.compression == compression
    assert not a.has_producer_id and a.last_sequence == -1
    assert (b.producer_id, b.producer_epoch, b.base_sequence, b.last_sequence) == (9, 2, 7, 10)
    assert b.timestamp_type == 0 and not b.is_control and not b.is_transactional


def test_parse_accepts_memoryview_and_bytearray(batches):
    data = batches.build(batches.values(2))
    assert parse_batches(memoryview(data)) == parse_batches(bytearray(data)) == parse_batches(data)


def test_flipped_bit_in_a_record_is_a_crc_error(batches):
    data = bytearray(batches.build(batches.values(2)))
    data[-3] ^= 0x10
    with pytest.raises(CorruptRecordError, match="CRC32C mismatch") as info:
        parse_batches(data)
    assert info.value.errno == 2


def test_crc_is_not_checked_when_disabled(batches):
    data = bytearray(batches.build(batches.values(2)))
    data[-3] ^= 0x10
    assert len(parse_batches(data, verify_crc=False)) == 1


@pytest.mark.parametrize("cut", [1, 10, 30, HEADER_SIZE + 1])
def test_truncated_buffer_is_corrupt(batches, cut):
    data = batches.build(batches.values(2)) * 2
    with pytest.raises(CorruptRecordError):
        parse_batches(data[: len(data) // 2 + cut] if cut > 60 else data[:-cut])


def test_empty_buffer_is_corrupt():
    with pytest.raises(CorruptRecordError):
        parse_batches(b"")


def test_batch_length_smaller_than_header_is_corrupt(batches):
    data = bytearray(batches.build([b"a"]))
    struct.pack_into(">i", data, 8, 20)
    with pytest.raises(CorruptRecordError, match="smaller than the v2 header"):
        parse_batches(data)


def test_magic_1_is_unsupported(batches):
    data = bytearray(batches.build([b"a"]))
    data[16] = 1
    with pytest.raises(UnsupportedForMessageFormatError) as info:
        parse_batches(data)
    assert info.value.errno == 43


def _set_crc_covered_int(data: bytearray, position: int, value: int) -> None:
    from crc32c import crc32c

    struct.pack_into(">i", data, position, value)
    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))


def test_record_count_disagreeing_with_last_offset_delta_is_invalid(batches):
    data = bytearray(batches.build(batches.values(3)))
    _set_crc_covered_int(data, 57, 5)
    with pytest.raises(InvalidRecordError) as info:
        parse_batches(data)
    assert info.value.errno == 87


def test_zero_record_count_is_invalid(batches):
    data = bytearray(batches.build(batches.values(1)))
    _set_crc_covered_int(data, 57, 0)
    with pytest.raises(InvalidRecordError):
        parse_batches(data)


def _empty_header(base_offset=5, last_offset_delta=3, producer_id=7, producer_epoch=1, base_sequence=10) -> bytes:
    """What Kafka's DefaultRecordBatch.writeEmptyHeader writes (and the cleaner keeps): no records."""
    from crc32c import crc32c

    from broker_sim.storage.batch import HEADER

    data = bytearray(HEADER_SIZE)
    HEADER.pack_into(data, 0, base_offset, HEADER_SIZE - 12, 0, 2, 0, 0, last_offset_delta, -1, 1_000,
                     producer_id, producer_epoch, base_sequence, 0)
    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    return bytes(data)


def test_an_empty_batch_is_refused_from_clients_but_accepted_from_a_log(batches):
    """Produce refuses recordsCount 0 (Kafka's LogValidator); a log's (compacted) batches may have no records."""
    with pytest.raises(InvalidRecordError):
        parse_batches(_empty_header())
    (empty,) = parse_batches(_empty_header(), stored=True)
    assert (empty.base_offset, empty.last_offset, empty.record_count, empty.last_sequence) == (5, 8, 0, 13)
    assert list(DefaultRecordBatch(_empty_header())) == []
    data = bytearray(batches.build(batches.values(3)))
    _set_crc_covered_int(data, 57, 2)  # compacted: fewer records than offsets
    assert parse_batches(data, stored=True)[0].record_count == 2
    for count in (4, -1):  # more records than offsets, or a negative count, are never valid
        _set_crc_covered_int(data, 57, count)
        with pytest.raises(InvalidRecordError):
            parse_batches(data, stored=True)
    corrupt = bytearray(_empty_header())
    corrupt[30] ^= 1
    with pytest.raises(CorruptRecordError):
        parse_batches(corrupt, stored=True)


def test_stamp_assigns_sequential_offsets_and_leader_epoch_keeping_crc_valid(batches):
    data = bytearray(batches.build(batches.values(3)) + batches.build(batches.values(2), compression=1))
    headers = parse_batches(data)
    stamp_batches(data, headers, 100, 7)
    stamped = parse_batches(data)
    assert [(h.base_offset, h.last_offset, h.partition_leader_epoch) for h in stamped] == [(100, 102, 7), (103, 104, 7)]
    second = DefaultRecordBatch(bytes(data[headers[1].position :]))
    assert [r.offset for r in second] == [103, 104]


def test_stamp_with_log_append_time_sets_type_and_max_timestamp_and_recomputes_crc(batches):
    data = bytearray(batches.build(batches.values(2), timestamps=[5, 6], compression=3))
    headers = parse_batches(data)
    stamp_batches(data, headers, 0, 1, log_append_time_ms=99_999)
    (stamped,) = parse_batches(data)  # verifies the CRC
    assert stamped.timestamp_type == 1 and stamped.max_timestamp == 99_999 and stamped.base_timestamp == 5
    assert [r.timestamp for r in DefaultRecordBatch(bytes(data))] == [99_999, 99_999]


def test_sequence_wraps_to_zero_after_int32_max():
    assert increment_sequence(2**31 - 1, 1) == 0
    assert increment_sequence(2**31 - 2, 3) == 1
    assert increment_sequence(5, 3) == 8


def test_last_sequence_of_a_batch_crossing_int32_max(batches):
    data = batches.build(batches.values(3), producer_id=1, producer_epoch=0, base_sequence=2**31 - 2)
    (header,) = parse_batches(data)
    assert header.last_sequence == 0
