"""Kafka's LogValidator for client appends: every record checked, nothing re-encoded.

Theory of operation: a Produce request's records are stored byte-for-byte, so
whatever the broker acknowledges is what every consumer will later parse. A
batch whose CRC is valid can still lie inside (a record count the records do
not match, record lengths that overrun, an unknown codec, garbage in place of
zstd), and would make the partition unreadable once acknowledged. So, like
Kafka's ``LogValidator`` for ``AppendOrigin.CLIENT``, each batch of a client
append is checked at three levels before anything is written:

1. the header (``batch.parse_batches``: framing, magic 2, CRC32C, recordsCount
   = lastOffsetDelta + 1), then its size against ``max.message.bytes``, the
   codec (0-4), a sequence number wherever a producer id is (control batches
   are refused by ``Partition.append_records`` for every origin);
2. compressed batches are decompressed *streaming*, a chunk at a time, into
   one buffer that may not grow past ``message.max.decompressed.bytes`` (a
   pylog addition: Kafka has no such bound and trusts the JVM heap), while the
   record lengths seen so far are checked against ``max.message.bytes`` as
   soon as the buffer is bigger than that limit; a decompression bomb
   therefore costs at most the smaller bound plus one chunk, never its
   declared size;
3. the records are walked once per batch by ``_records.scan`` (C, this
   package's extension: ~11-22 ns a record, no Python object per record),
   which answers only the timestamp range and the null keys; a batch it does
   not accept, or whose rules need the records themselves, is walked again
   with aiokafka's compiled reader (~150 ns a record), which names the error:
   every length, varint, key/value/header size must be consistent and
   the last record must end exactly at the batch (or decompressed) end, the
   number of records must be recordsCount, the offset deltas 0, 1, 2, ...
   (Kafka rewrites a compressed batch whose inner offsets are off; pylog does
   not re-encode, so it refuses them), and on a compacted topic every record
   needs a key; with ``message.timestamp.type=CreateTime`` every record's
   timestamp (and the batch header's first and max timestamps, which the log
   rolls and expires segments by) must lie within
   ``message.timestamp.before.max.ms`` before and
   ``message.timestamp.after.max.ms`` after the broker's clock (Kafka 4's
   KIP-937 bounds; -1, no timestamp, passes).

Errors, as Kafka answers them: CORRUPT_MESSAGE for a broken batch frame, CRC,
codec or compressed stream; INVALID_RECORD for records that do not parse or
break a rule; MESSAGE_TOO_LARGE for a batch or record over its bound;
INVALID_TIMESTAMP for a timestamp out of bounds. Rules about single records
(keys, timestamps) raise :class:`RecordValidationError`, which lists
every offending record's index in its batch: ProduceResponse v8+ carries them
as KIP-467 ``record_errors`` so a client fails only those records.

The reader of step 3 may read up to a varint (10 bytes) beyond a lying last
record before its bounds check fires, so it always walks a private copy that
ends in zero padding; the copy costs far less than the walk.

Recompression (the topic's ``compression.type``, as Kafka's LogValidator):
``producer`` keeps each batch as the producer compressed it; ``uncompressed``,
``gzip``, ``snappy``, ``lz4`` or ``zstd`` re-encode every data batch whose codec
differs (control batches are never compressed), after the checks above.  The
records -- offset deltas, timestamps, keys, values, headers -- and the batch's
producer id, epoch, base sequence and transactional flag are kept, so
idempotence and transactions see the same batch; the new batches' headers come
from decoding just their headers, so nothing is parsed twice.

Records the broker writes itself (coordinators, Kafka's
``AppendOrigin.COORDINATOR``) pass only :func:`check_batch_sizes`, the same
max.message.bytes rule; a follower's replicated batches pass nothing here, as
in Kafka.

Nothing here does I/O or keeps state: :func:`validate_records` may run on any
thread. ``ReplicaManager.append_records`` checks inputs over INLINE_BYTES (1 MiB
with the compiled walk of ``_records.c``, else 256 KB) on a thread
(:func:`costs_a_thread`) and smaller ones inline, where a compressed batch that
turns out to decompress past 256 KB raises :class:`MoveToThread` to be checked
again on a thread, as does a re-encoding of more than INLINE_REENCODE_RECORDS
records or INLINE_REENCODE_BYTES decompressed bytes (its cost is the records',
not the wire's): no request holds the event loop for more than ~1 ms.
"""
from __future__ import annotations

import struct
import zlib
from typing import NamedTuple, Protocol

import kafka.errors as Errors

from broker_sim.storage.batch import (
    ATTRIBUTES_OFFSET, HEADER_SIZE, BatchHeader, COMPRESSION_MASK, decode_header, parse_batches)

try:  # the compiled walk (setup.py builds it; optional): without it every batch takes aiokafka's reader
    from broker_sim.storage._records import scan as _scan, varint as _varint
except ImportError:  # pragma: no cover - a build without a C compiler
    _scan = None

    def _varint(buf, position: int) -> tuple[int, int]:
        """A zigzag varint at ``buf[position]`` and the position after it (aiokafka's, imported when used)."""
        from aiokafka.record._crecords.cutil import decode_varint_cython

        return decode_varint_cython(buf, position)

# Output bytes asked of a decompressor per step: the most a bomb can get past a bound.
CHUNK = 256 * 1024
# Zero bytes after the walked copy, so the reader's overrun of a lying record stays inside the copy.
PADDING = 16
_ZEROS = bytes(PADDING)
CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
# a topic's compression.type -> the codec id batches are re-encoded to (``producer``: none, keep them)
TARGET_CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
# xerial snappy framing (Java's SnappyOutputStream, kafka-python): magic, version, compatible version, then
# [int32 length][raw snappy block]...; librdkafka writes one raw block without it.
XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER_SIZE = 16
_INT32 = struct.Struct(">i")
# Validating 256 KB of uncompressed records takes ~0.5 ms (measured: 100-byte records, ~200 ns each) and a
# thread hand-off ~70 us; inputs above this are checked on a thread so the event loop keeps serving the other
# connections, while smaller ones are not slowed by the hand-off. For compressed batches the same bound
# applies to their decompressed size, which is known only while decompressing (a 5 KB bomb may hold 32 MiB
# of records): an inline check stops at it and the caller starts over on a thread.
THREAD_THRESHOLD = 256 * 1024
# Re-encoding (compression.type) rebuilds every record in Python, ~10 us each (measured: 30,000 empty records,
# 18 KB of zstd, took 0.3-0.55 s to re-encode), and compresses what it rebuilt: an inline check re-encodes only
# batches this small in records and decompressed bytes (~1 ms), and hands anything bigger to a thread.  The
# cost is judged by what the records are, never by their size on the wire.
INLINE_REENCODE_RECORDS = 64
# The walk alone is ~150 ns a record: 256 KB of 7-byte records is 37,000 of them (~6 ms); an inline check
# walks at most this many (their batches' recordsCount; a lower count than the records is refused by the walk).
INLINE_RECORDS = 8192
INLINE_REENCODE_BYTES = 64 * 1024
# Inputs up to INLINE_BYTES on the wire are checked inline. With the compiled walk (_records.scan, ~11-22 ns a
# record, measured) 1 MiB of 100-byte records costs ~0.25 ms (CRC 50 us, walk 130-200 us), less than a thread
# hand-off costs the event loop in GIL switches (measured with librdkafka's 1 MB batches: the pool's submit and
# worker were half the broker's samples); a thread also gets no more done while the loop holds the GIL.
if _scan is not None:
    INLINE_BYTES = 1 << 20
    INLINE_RECORDS = 32768  # ~0.7 ms of the smallest records
else:
    INLINE_BYTES = THREAD_THRESHOLD


class RecordRules(NamedTuple):
    """What a partition accepts from clients, and how it stores it."""

    compact: bool  # cleanup.policy has compact: every record needs a key
    max_message_bytes: int  # max.message.bytes: a batch's size, and a record's uncompressed size
    max_decompressed_bytes: int  # message.max.decompressed.bytes: a compressed batch's records, decompressed
    codec: int | None = None  # compression.type's codec id (TARGET_CODECS); None: keep the producer's
    timestamps: tuple[int, int] | None = None  # (earliest, latest) record timestamp accepted; None: any


def rules_for(config, max_decompressed_bytes: int, now_ms: int | None = None) -> RecordRules:
    """The rules of a log with ``config`` (a storage.log.LogConfig), its timestamp bounds taken around ``now_ms``
    (the broker's clock; None: no timestamp bounds)."""
    timestamps = None
    if now_ms is not None and config.message_timestamp_type == "CreateTime":
        timestamps = (now_ms - config.message_timestamp_before_max_ms, now_ms + config.message_timestamp_after_max_ms)
    return RecordRules(config.compact, config.max_message_bytes, max_decompressed_bytes,
                       TARGET_CODECS.get(config.compression_type), timestamps)


class ValidRecords(NamedTuple):
    """Records that passed :func:`validate_records`, as they are to be stored, with their batch headers."""

    records: bytes
    batches: list[BatchHeader]


class RecordValidationError(Errors.InvalidRecordError):
    """INVALID_RECORD naming the offending records: ``record_errors`` is [(index in its batch, message)]."""

    def __init__(self, message: str, record_errors: list[tuple[int, str]]):
        super().__init__(message)
        self.record_errors = record_errors

    @classmethod
    def of(cls, record_errors: list[tuple[int, str]]) -> RecordValidationError:
        """The error with Kafka's message for them (ProduceResponse's error_message shows the first three)."""
        shown = ", ".join(f"RecordError(batchIndex={index}, message='{message}')"
                          for index, message in record_errors[:3])
        return cls(f"One or more records have been rejected due to {len(record_errors)} record errors in total, "
                   f"and only showing the first three errors at most: [{shown}]", record_errors)


class TimestampOutOfRangeError(RecordValidationError):
    """INVALID_TIMESTAMP naming the records timestamped outside message.timestamp.before/after.max.ms."""

    errno = Errors.InvalidTimestampError.errno
    message = Errors.InvalidTimestampError.message


class RecordInspector(Protocol):
    """A further check of a client's records, fed by :func:`validate_records`' own walk of them."""

    keys: bool  # wants every record's key
    values: bool  # wants every record's value

    def __call__(self, batch: BatchHeader, keys: list | None, values: list | None) -> None:
        """One data batch that passed: its records' keys and values (None where not wanted), in order."""


class MoveToThread(Exception):
    """An inline check met a compressed batch that decompresses past THREAD_THRESHOLD: redo it on a thread."""


def costs_a_thread(records) -> bool:
    """True when checking ``records`` inline would hold the event loop for more than ~0.5 ms."""
    return len(records) > INLINE_BYTES


def validate_records(records, rules: RecordRules, batches: list[BatchHeader] | None = None, *,
                     inline: bool = False, inspect: RecordInspector | None = None) -> ValidRecords:
    """Check a client's records for one partition as Kafka's LogValidator does, then re-encode them to
    ``rules.codec`` where they differ; returns what to store and its batch headers.

    ``batches``: the headers from ``parse_batches(records)`` when the caller
    already has them. ``inline``: the caller is the event loop, so raise
    :class:`MoveToThread` rather than decompress more than THREAD_THRESHOLD.
    ``inspect``: given each data batch that passed, with the keys and values it wants, on whatever thread
    validates, so a further check of the records (``ReplicaManager.record_check``) costs no second
    decompression and no second walk (measured: a walk of its own costs it 3x more than these lists).
    Raises CorruptRecordError, InvalidRecordError (:class:`RecordValidationError`
    for per-record rules) and MessageSizeTooLargeError.
    """
    if batches is None:
        batches = parse_batches(records)
    view = memoryview(records)
    reencoded = [b for b in batches if rules.codec is not None and not b.is_control and b.compression != rules.codec]
    if inline and (sum(b.record_count for b in reencoded) > INLINE_REENCODE_RECORDS
                   or sum(b.record_count for b in batches) > INLINE_RECORDS):
        raise MoveToThread
    decompressed = 0
    for batch in batches:
        _check_header(batch, rules)
        decompressed += _check_records(view[batch.position:batch.position + batch.size], batch, rules, inline,
                                       inspect)
    if reencoded:
        if inline and decompressed > INLINE_REENCODE_BYTES:
            raise MoveToThread
        return _recompress(view, batches, rules)
    return ValidRecords(records, batches)


def check_batch_sizes(batches: list[BatchHeader], max_message_bytes: int) -> None:
    """The max.message.bytes rule alone, for records the broker writes itself (MessageSizeTooLargeError)."""
    for batch in batches:
        _check_size(batch, max_message_bytes)


def _check_size(batch: BatchHeader, max_message_bytes: int) -> None:
    if batch.size > max_message_bytes:
        raise Errors.MessageSizeTooLargeError(
            f"batch at byte {batch.position}: {batch.size} bytes is larger than max.message.bytes={max_message_bytes}")


def _check_header(batch: BatchHeader, rules: RecordRules) -> None:
    where = f"batch at byte {batch.position}"
    _check_size(batch, rules.max_message_bytes)
    if batch.compression not in CODECS:
        raise Errors.CorruptRecordError(f"{where}: unknown compression type id: {batch.compression}")
    if batch.has_producer_id and batch.base_sequence < 0:
        raise Errors.InvalidRecordError(
            f"{where}: invalid sequence number {batch.base_sequence} with producer id {batch.producer_id}")


def _recompress(view: memoryview, batches: list[BatchHeader], rules: RecordRules) -> ValidRecords:
    """The records with every data batch in ``rules.codec``, and the headers of what came out.

    A re-encoded batch larger than max.message.bytes is refused (MessageSizeTooLargeError), as Kafka's
    UnifiedLog re-validates sizes after re-compression: 1.4 KB of zstd may hold 31 MB of records.
    """
    codec = rules.codec
    out = bytearray()
    headers = []
    for header in batches:
        raw = view[header.position:header.position + header.size]
        if header.is_control or header.compression == codec:
            headers.append(header._replace(position=len(out)))
            out += raw
            continue
        from kafka.record.default_records import DefaultRecordBatch as RecordBatchReader, DefaultRecordBatchBuilder

        builder = DefaultRecordBatchBuilder(
            magic=2, compression_type=codec, is_transactional=header.is_transactional,
            producer_id=header.producer_id, producer_epoch=header.producer_epoch,
            base_sequence=header.base_sequence, batch_size=2**31 - 1)
        for record in RecordBatchReader(bytes(raw)):
            builder.append(record.offset - header.base_offset, timestamp=record.timestamp, key=record.key,
                           value=record.value, headers=record.headers)
        built = builder.build()
        if len(built) > rules.max_message_bytes:
            raise Errors.MessageSizeTooLargeError(
                f"batch at byte {header.position}: {len(built)} bytes once re-encoded to "
                f"{CODECS[codec]} (compression.type) is larger than max.message.bytes={rules.max_message_bytes}")
        headers.append(decode_header(built, 0, len(out), len(built)))
        out += built
    return ValidRecords(bytes(out), headers)


def _check_records(data: memoryview, batch: BatchHeader, rules: RecordRules, inline: bool, inspect) -> int:
    """Walk every record of one batch (``data`` is exactly the batch); returns its records' decompressed size.

    The compiled :func:`_scan` walks the records once per batch and answers with what the rules need (the
    timestamp range, the count of null keys); whenever it does not accept them, or a rule needs the records
    themselves (an ``inspect`` that wants keys or values, a key missing on a compacted topic, a timestamp out
    of bounds, a client's LogAppendTime batch), aiokafka's reader walks them again and names what is wrong.
    """
    if batch.compression:
        copy = _decompressed_copy(data, batch, rules, inline)
        size = len(copy) - PADDING
        records = memoryview(copy)[HEADER_SIZE:size]
    else:
        copy = None
        size = len(data)
        records = data[HEADER_SIZE:]
    wants_records = inspect is not None and (inspect.keys or inspect.values)
    if _scan is not None and not wants_records and _scanned_ok(records, batch, rules):
        if inspect is not None and not batch.is_control:
            inspect(batch, None, None)
        return size - HEADER_SIZE
    if copy is None:
        copy = b"".join((data, _ZEROS))
    where = f"batch at byte {batch.position}"
    keys = [] if rules.compact or (inspect is not None and inspect.keys) else None
    values = [] if inspect is not None and inspect.values else None
    timestamps = [] if rules.timestamps is not None and not batch.is_control else None
    from aiokafka.errors import CorruptRecordException  # aiokafka's client comes with it: ~75 ms, when needed
    from aiokafka.record._crecords import DefaultRecordBatch

    try:
        offsets = _walk(DefaultRecordBatch(memoryview(copy)[:size]), keys, values, timestamps)
    except (CorruptRecordException, ValueError) as exc:  # ValueError: a varint longer than 10 bytes
        raise Errors.InvalidRecordError(f"{where}: {exc}") from None
    if offsets != list(range(batch.base_offset, batch.base_offset + batch.record_count)):
        first_bad = next(index for index, offset in enumerate(offsets) if offset != batch.base_offset + index)
        raise Errors.InvalidRecordError(
            f"{where}: record {first_bad} has offset delta {offsets[first_bad] - batch.base_offset}, "
            f"expected {first_bad} (offset deltas must be 0, 1, 2, ...)")
    if timestamps is not None:  # the records named first; then the header, which may lie about them
        _check_timestamps(timestamps, batch, rules.timestamps)
        _check_header_timestamps(batch, rules.timestamps)
    if rules.compact:
        keyless = [index for index, key in enumerate(keys) if key is None]
        if keyless:
            message = "Compacted topic cannot accept message without key"
            raise RecordValidationError.of([(index, message) for index in keyless])
    if inspect is not None and not batch.is_control:
        inspect(batch, keys if inspect.keys else None, values)
    return size - HEADER_SIZE


def _scanned_ok(records: memoryview, batch: BatchHeader, rules: RecordRules) -> bool:
    """True when the compiled walk accepts the records and every rule holds by what it answered (the header's
    timestamps checked here); False sends the batch to the reference walk."""
    scanned = _scan(records, batch.record_count)
    if scanned is None:
        return False
    low_delta, high_delta, null_keys = scanned
    if rules.compact and null_keys:
        return False
    bounds = rules.timestamps
    if bounds is None or batch.is_control:
        return True
    base = batch.base_timestamp
    if batch.timestamp_type or not (bounds[0] <= base + low_delta and base + high_delta <= bounds[1]):
        return False
    _check_header_timestamps(batch, bounds)
    return True


def _out_of_range(timestamp: int, offset: int, bounds: tuple[int, int]) -> str:
    """Kafka's message for a timestamp outside its bounds."""
    return (f"Timestamp {timestamp} of message with offset {offset} is out of range. The timestamp should be within "
            f"[{bounds[0]}, {bounds[1]}]")


def _check_header_timestamps(batch: BatchHeader, bounds: tuple[int, int]) -> None:
    """The header's first and max timestamps (the log rolls and expires segments by them) within ``bounds``."""
    for timestamp in (batch.base_timestamp, batch.max_timestamp):
        if timestamp != -1 and not bounds[0] <= timestamp <= bounds[1]:
            raise TimestampOutOfRangeError(
                f"batch at byte {batch.position}: {_out_of_range(timestamp, batch.base_offset, bounds)}", [])


def _check_timestamps(timestamps: list[int], batch: BatchHeader, bounds: tuple[int, int]) -> None:
    """Every record's timestamp within ``bounds`` (-1: none, as Kafka skips it); the offending ones named."""
    low, high = bounds
    if not timestamps or (low <= min(timestamps) and max(timestamps) <= high):
        return
    bad = [(index, _out_of_range(timestamp, batch.base_offset + index, bounds))
           for index, timestamp in enumerate(timestamps) if timestamp != -1 and not low <= timestamp <= high]
    if bad:  # Kafka's LogValidator.processRecordErrors
        raise TimestampOutOfRangeError(f"One or more records have been rejected due to invalid timestamp: "
                                       f"{bad[0][1]}", bad)


def _walk(reader, keys: list | None, values: list | None, timestamps: list | None = None) -> list[int]:
    """The offsets of a batch's records, from one walk that also fills ``keys``, ``values`` and ``timestamps``
    when given (the records themselves are dropped as the walk goes: thousands kept alive would cost the
    garbage collector more than the walk)."""
    if timestamps is not None:
        keep_timestamp = timestamps.append
        if keys is None and values is None:
            return [keep_timestamp(record.timestamp) or record.offset for record in reader]
        offsets = []
        for record in reader:
            offsets.append(record.offset)
            keep_timestamp(record.timestamp)
            if keys is not None:
                keys.append(record.key)
            if values is not None:
                values.append(record.value)
        return offsets
    if keys is None and values is None:
        return [record.offset for record in reader]
    if values is None:
        keep_key = keys.append
        return [keep_key(record.key) or record.offset for record in reader]
    keep_value = values.append
    if keys is None:
        return [keep_value(record.value) or record.offset for record in reader]
    keep_key = keys.append
    return [keep_key(record.key) or keep_value(record.value) or record.offset for record in reader]


def _import_codecs() -> None:
    """Bind cramjam, lz4 and zstandard here at the first compressed batch (~5 ms to import: not at a start)."""
    global cramjam, lz4, zstandard
    import cramjam
    import lz4.frame
    import zstandard


def _decompressed_copy(data: memoryview, batch: BatchHeader, rules: RecordRules, inline: bool) -> bytearray:
    """The batch as if uncompressed (its header with codec 0, then the records), plus PADDING zero bytes.

    Raises CorruptRecordError when the stream is not valid for its codec,
    MessageSizeTooLargeError as soon as a bound is crossed, and MoveToThread
    (``inline``) past THREAD_THRESHOLD.
    """
    _import_codecs()
    out = bytearray(data[:HEADER_SIZE])
    struct.pack_into(">h", out, ATTRIBUTES_OFFSET, batch.attributes & ~COMPRESSION_MASK)
    bound = HEADER_SIZE + rules.max_decompressed_bytes
    sizes = _RecordSizes(batch, rules.max_message_bytes)
    codec = CODECS[batch.compression]
    where = f"batch at byte {batch.position}"
    def reserve(size: int) -> None:
        """Raise unless ``size`` more decompressed bytes stay within the bounds."""
        if len(out) + size > bound:
            raise _OverBudget
        if inline and len(out) + size > HEADER_SIZE + THREAD_THRESHOLD:
            raise MoveToThread

    try:
        for piece in _DECOMPRESSORS[batch.compression](data[HEADER_SIZE:], reserve):
            reserve(len(piece))
            out += piece
            sizes.check(out)
    except _OverBudget:
        raise Errors.MessageSizeTooLargeError(
            f"{where}: {codec} records decompress to more than "
            f"message.max.decompressed.bytes={rules.max_decompressed_bytes}") from None
    except (zlib.error, zstandard.ZstdError, RuntimeError, cramjam.DecompressionError, EOFError) as exc:
        # lz4.frame raises RuntimeError for a corrupt frame
        raise Errors.CorruptRecordError(f"{where}: {codec} data is corrupt: {exc}") from None
    out += _ZEROS
    return out


class _RecordSizes:
    """Refuses a record over max.message.bytes from the length prefixes of what is decompressed so far,
    and more records than recordsCount as soon as they are there.

    A record can only be that large once the buffer is, so batches smaller
    than the limit (nearly all) never pay for this walk (~200 ns a record).
    """

    def __init__(self, batch: BatchHeader, limit: int):
        self.limit = limit
        self.where = f"batch at byte {batch.position}"
        self.records_left = batch.record_count
        self.cursor = HEADER_SIZE

    def check(self, out: bytearray) -> None:
        if len(out) - HEADER_SIZE <= self.limit:
            return
        cursor, end = self.cursor, len(out)
        while cursor < end - 10:  # a whole varint is there
            if self.records_left == 0:
                raise Errors.InvalidRecordError(f"{self.where}: more records than its recordsCount")
            try:
                length, after = _varint(out, cursor)
            except ValueError:
                raise Errors.InvalidRecordError(f"{self.where}: record length is not a varint") from None
            if length > self.limit:
                raise Errors.MessageSizeTooLargeError(
                    f"{self.where}: a record of {length} bytes uncompressed is larger than "
                    f"max.message.bytes={self.limit}")
            if length < 0:
                return  # the record walk reports it
            cursor = after + length
            self.records_left -= 1
        self.cursor = cursor


# Each decompressor yields pieces of at most CHUNK bytes, except snappy: a block decompresses whole, so it
# first asks reserve() for the size its length preamble declares.

def _gzip(data: memoryview, reserve):
    while True:
        stream = zlib.decompressobj(wbits=31)
        while not stream.eof:
            piece = stream.decompress(data, CHUNK)
            data = stream.unconsumed_tail
            if not piece and not data:
                raise EOFError("gzip stream is truncated")
            yield piece
        data = stream.unused_data
        if not data:
            return  # a gzip file may hold several members, as Java's GZIPInputStream reads them


def _snappy(data: memoryview, reserve):
    if data[:len(XERIAL_MAGIC)] != XERIAL_MAGIC:
        yield _snappy_block(data, reserve)
        return
    position = XERIAL_HEADER_SIZE
    while position < len(data):
        if position + 4 > len(data):
            raise EOFError("xerial snappy block length is truncated")
        (length,) = _INT32.unpack_from(data, position)
        if length < 0 or position + 4 + length > len(data):
            raise EOFError(f"xerial snappy block of {length} bytes runs past the end")
        yield _snappy_block(data[position + 4:position + 4 + length], reserve)
        position += 4 + length


def _snappy_block(block: memoryview, reserve):
    """One raw snappy block, refused from its length preamble before anything is decompressed."""
    try:  # decoded from a padded copy: the preamble may claim to run past the block
        declared, _ = _varint(b"".join((block[:10], _ZEROS)), 0)
    except ValueError:
        raise EOFError("snappy block length is not a varint") from None
    # the preamble is an unsigned varint; _varint decodes zigzag, so undo it
    reserve(declared * 2 if declared >= 0 else -declared * 2 - 1)
    return cramjam.snappy.decompress_raw(bytes(block))


class _OverBudget(Exception):
    """The decompressed records would exceed message.max.decompressed.bytes."""


def _lz4(data: memoryview, reserve):
    stream = lz4.frame.LZ4FrameDecompressor()
    data = bytes(data)
    while not stream.eof:
        piece = stream.decompress(data, max_length=CHUNK)
        data = b""
        if not piece and stream.needs_input:
            raise EOFError("lz4 frame is truncated")
        yield piece
    if stream.unused_data:
        raise EOFError(f"{len(stream.unused_data)} bytes after the lz4 frame")


def _zstd(data: memoryview, reserve):
    reader = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True)
    while piece := reader.read(CHUNK):
        yield piece


_DECOMPRESSORS = {1: _gzip, 2: _snappy, 3: _lz4, 4: _zstd}
