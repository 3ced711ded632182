"""RecordBatch v2 headers: parse, validate and stamp, without decoding records.

Theory of operation: the broker stores batches byte-for-byte as producers send
them. On the produce path it only needs each batch's 61-byte header — to check
the framing, the CRC32C and the record count — and then rewrites the two
fields the CRC does not cover (base offset, partition leader epoch). Records
are never decoded here, so the cost per batch is one `struct.unpack_from` plus
one C-speed CRC over a zero-copy memoryview slice.

`LogAppendTime` topics are the one case that touches CRC-covered bytes: like
Kafka's `DefaultRecordBatch.setMaxTimestamp`, the timestamp-type attribute bit
and `maxTimestamp` are rewritten and the CRC recomputed; `baseTimestamp` and
the records are left alone (readers use `maxTimestamp` for every record of a
LogAppendTime batch).

Positions in `BatchHeader` are byte positions in whatever buffer or file the
header was read from; offsets are absolute.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from crc32c import crc32c
from kafka.errors import CorruptRecordError, InvalidRecordError, UnsupportedForMessageFormatError

HEADER = struct.Struct(
    ">"
    "q"  # @0  baseOffset: offset of the first record; rewritten by the broker
    "i"  # @8  batchLength: bytes after this field, so the batch is batchLength + 12 bytes
    "i"  # @12 partitionLeaderEpoch: leader epoch at append; rewritten, outside the CRC
    "b"  # @16 magic: record format version, always 2 here
    "I"  # @17 crc: CRC32C of bytes 21..end of the batch
    "h"  # @21 attributes: bits 0-2 codec, 3 timestamp type, 4 transactional, 5 control
    "i"  # @23 lastOffsetDelta: last record's offset minus baseOffset
    "q"  # @27 baseTimestamp: timestamp of the first record (CreateTime)
    "q"  # @35 maxTimestamp: largest record timestamp, or the LogAppendTime
    "q"  # @43 producerId: idempotent/transactional producer id, -1 if none
    "h"  # @51 producerEpoch: epoch of that producer id, -1 if none
    "i"  # @53 baseSequence: sequence number of the first record, -1 if none
    "i"  # @57 recordsCount: number of records in the batch
)
HEADER_SIZE = HEADER.size  # 61
# baseOffset + batchLength: the part of the header every log entry starts with.
LOG_OVERHEAD = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35

_OFFSET_FIELD = struct.Struct(">q")
_EPOCH_FIELD = struct.Struct(">i")
_CRC_FIELD = struct.Struct(">I")
_ATTRIBUTES_FIELD = struct.Struct(">h")

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20

INT32_MAX = 2**31 - 1


class BatchHeader(NamedTuple):
    """The parsed 61-byte header of one RecordBatch v2."""

    position: int
    base_offset: int
    size: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        """0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd."""
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 CreateTime, 1 LogAppendTime."""
        return 1 if self.attributes & TIMESTAMP_TYPE_MASK else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        """Sequence number of the last record; wraps to 0 after 2**31-1 like Kafka, -1 without sequence."""
        if self.base_sequence < 0:
            return -1
        return increment_sequence(self.base_sequence, self.last_offset_delta)


def increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's `DefaultRecordBatch.incrementSequence`: int32 sequences wrap to 0, not negative."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def decode_header(buf, offset: int, position: int, available: int) -> BatchHeader:
    """Header of the batch at `buf[offset:]`, checking framing but not the CRC.

    `position` is what the header records as its position (file or buffer
    position of `buf[offset]`), `available` how many bytes exist from there on.
    Raises CorruptRecordError for truncation or an impossible length and
    UnsupportedForMessageFormatError for magic != 2.
    """
    if available < LOG_OVERHEAD + 5:
        raise CorruptRecordError(f"batch at byte {position}: truncated, only {available} bytes left")
    magic = buf[offset + MAGIC_OFFSET]
    if magic != 2:
        raise UnsupportedForMessageFormatError(
            f"batch at byte {position}: magic {magic}, only RecordBatch v2 (magic 2) is supported"
        )
    if available < HEADER_SIZE:
        raise CorruptRecordError(f"batch at byte {position}: truncated header, only {available} bytes left")
    fields = HEADER.unpack_from(buf, offset)
    size = fields[1] + LOG_OVERHEAD
    if size < HEADER_SIZE:
        raise CorruptRecordError(
            f"batch at byte {position}: batchLength {fields[1]} is smaller than the v2 header"
        )
    if size > available:
        raise CorruptRecordError(
            f"batch at byte {position}: batchLength {fields[1]} runs past the end ({available} bytes left)"
        )
    return BatchHeader(position, fields[0], size, *fields[2:])


def verify_batch(buf, offset: int, header: BatchHeader, *, stored: bool = False) -> None:
    """Check the CRC32C and record count of the batch whose header was decoded at `buf[offset:]`.

    Raises CorruptRecordError on a CRC mismatch and InvalidRecordError when
    recordsCount and lastOffsetDelta disagree (Kafka's LogValidator check).
    `stored`: the batch comes from a log (recovery, a follower's copy of the
    leader's log), where compaction leaves batches with fewer records than
    their offset range spans (`0 <= recordsCount <= lastOffsetDelta + 1`),
    down to none at all: the empty header the cleaner keeps for an idempotent
    producer's last batch (Kafka's `DefaultRecordBatch.writeEmptyHeader`).
    A client's batch (produce) must have exactly `lastOffsetDelta + 1` records.
    """
    computed = crc32c(memoryview(buf)[offset + ATTRIBUTES_OFFSET : offset + header.size])
    if computed != header.crc:
        raise CorruptRecordError(
            f"batch at byte {header.position}: CRC32C mismatch "
            f"(stored 0x{header.crc:08x}, computed 0x{computed:08x})"
        )
    if stored:
        if not 0 <= header.record_count <= header.last_offset_delta + 1:
            raise InvalidRecordError(
                f"batch at byte {header.position}: recordsCount {header.record_count} does not fit "
                f"lastOffsetDelta {header.last_offset_delta}"
            )
        return
    if header.record_count < 1:
        raise InvalidRecordError(f"batch at byte {header.position}: invalid record count {header.record_count}")
    if header.last_offset_delta != header.record_count - 1:
        raise InvalidRecordError(
            f"batch at byte {header.position}: lastOffsetDelta {header.last_offset_delta} "
            f"inconsistent with recordsCount {header.record_count}"
        )


def parse_batches(buf, *, verify_crc: bool = True, stored: bool = False) -> list[BatchHeader]:
    """Headers of the v2 batches making up `buf` exactly (a Produce request's records).

    Raises CorruptRecordError (truncation, bad batchLength, CRC mismatch, empty
    buffer), UnsupportedForMessageFormatError (magic != 2) and
    InvalidRecordError (recordsCount inconsistent with lastOffsetDelta).
    `stored` admits compacted batches, empty ones included (see `verify_batch`):
    for batches read from a log, never for a client's.
    """
    view = memoryview(buf)
    end = len(view)
    if end == 0:
        raise CorruptRecordError("record set is empty")
    headers = []
    position = 0
    while position < end:
        header = decode_header(view, position, position, end - position)
        if verify_crc:
            verify_batch(view, position, header, stored=stored)
        headers.append(header)
        position += header.size
    return headers


def stamp_batches(
    buf: bytearray,
    batches: list[BatchHeader],
    first_offset: int,
    leader_epoch: int,
    log_append_time_ms: int | None = None,
) -> None:
    """Assign offsets from `first_offset` and the leader epoch to `batches` in place in `buf`.

    Each batch gets the offsets following the previous one. When
    `log_append_time_ms` is given the batches become LogAppendTime batches
    with that maxTimestamp, and their CRC is recomputed. Otherwise a header
    whose attributes or maxTimestamp differ from the bytes in `buf` (the
    validator's, as Kafka's `setMaxTimestamp` sets them for a client batch
    whose header lies about its records) is written there, CRC recomputed.
    """
    offset = first_offset
    for batch in batches:
        position = batch.position
        _OFFSET_FIELD.pack_into(buf, position, offset)
        _EPOCH_FIELD.pack_into(buf, position + 12, leader_epoch)
        if log_append_time_ms is not None:
            _ATTRIBUTES_FIELD.pack_into(buf, position + ATTRIBUTES_OFFSET, batch.attributes | TIMESTAMP_TYPE_MASK)
            _OFFSET_FIELD.pack_into(buf, position + MAX_TIMESTAMP_OFFSET, log_append_time_ms)
            _restamp_crc(buf, position, batch.size)
        elif (_ATTRIBUTES_FIELD.unpack_from(buf, position + ATTRIBUTES_OFFSET)[0] != batch.attributes
              or _OFFSET_FIELD.unpack_from(buf, position + MAX_TIMESTAMP_OFFSET)[0] != batch.max_timestamp):
            _ATTRIBUTES_FIELD.pack_into(buf, position + ATTRIBUTES_OFFSET, batch.attributes)
            _OFFSET_FIELD.pack_into(buf, position + MAX_TIMESTAMP_OFFSET, batch.max_timestamp)
            _restamp_crc(buf, position, batch.size)
        offset += batch.last_offset_delta + 1


def _restamp_crc(buf: bytearray, position: int, size: int) -> None:
    crc = crc32c(memoryview(buf)[position + ATTRIBUTES_OFFSET : position + size])
    _CRC_FIELD.pack_into(buf, position + CRC_OFFSET, crc)

