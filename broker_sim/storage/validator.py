"""Kafka's LogValidator for client appends: every record checked, nothing re-encoded.

Theory of operation: a Produce request's records are stored byte-for-byte, so
whatever the broker acknowledges is what every consumer will later parse. A
batch whose CRC is valid can still lie inside (a record count the records do
not match, record lengths that overrun, an unknown codec, garbage in place of
zstd), and would make the partition unreadable once acknowledged. So, like
Kafka's ``LogValidator`` for ``AppendOrigin.CLIENT``, each batch of a client
append is checked at three levels before anything is written:

0. the request's records as Kafka's KafkaApis reads them (:func:`check_produce_records`): whole batches only,
   exactly one, magic 2, no zstd below Produce v7;
1. the header: its size against ``max.message.bytes``, the CRC32C, recordsCount = lastOffsetDelta + 1 (>= 1),
   baseOffset 0, the codec (0-4), a sequence number wherever a producer id is (control batches are refused by
   ``Partition.append_records`` for every origin);
2. compressed batches are decompressed *streaming*, a chunk at a time, into
   one buffer that may not grow past ``message.max.decompressed.bytes`` (a
   pylog addition: Kafka has no such bound and trusts the JVM heap), while the
   record lengths seen so far are checked against ``max.message.bytes`` as
   soon as the buffer is bigger than that limit; a decompression bomb
   therefore costs at most the smaller bound plus one chunk, never its
   declared size;
3. the records are walked once per batch by ``_records.scan`` (C, this package's extension: ~11-22 ns a
   record, no Python object per record), which reads them as Kafka 4.1's ``DefaultRecord`` does and answers
   the timestamp range, the null keys and whether the offset deltas are 0, 1, 2, ...; what it refuses (or
   every batch, without the extension) goes to its pure twin ``walk_records`` of
   :mod:`broker_sim.protocol.records` (the one definition of a record, which the connector reads by too), the
   same rules in Python, which raises Kafka's error for it. The rules then: an uncompressed batch's offset
   deltas are not checked (Kafka does not); a compressed batch kept in its codec with deltas off is
   UNKNOWN_SERVER_ERROR (Kafka 4.1 fails rebuilding it); on a compacted topic every record needs a key; with
   ``message.timestamp.type=CreateTime`` every record's timestamp must lie within
   ``message.timestamp.before.max.ms`` before and ``message.timestamp.after.max.ms`` after the broker's clock
   (Kafka 4's KIP-937 bounds; -1, no timestamp, passes; a LogAppendTime batch's records all have its
   maxTimestamp), and the stored header gets the records' largest timestamp as its maxTimestamp, as Kafka's
   ``setMaxTimestamp`` (a client's LogAppendTime flag is cleared); a LogAppendTime topic refuses a client's
   LogAppendTime batch.

Errors, as Kafka answers them: CORRUPT_MESSAGE for a broken batch frame or CRC; UNKNOWN_SERVER_ERROR for an
unknown codec, a compressed stream that does not decompress and a record length that is not a varint (Kafka
throws no ApiException there); INVALID_RECORD for records that do not parse or break a rule;
MESSAGE_TOO_LARGE for a batch or record over its bound; RECORD_LIST_TOO_LARGE past ``segment.bytes``;
INVALID_TIMESTAMP for a timestamp out of bounds. Rules about single records
(keys, timestamps) raise :class:`RecordValidationError`, which lists
every offending record's index in its batch: ProduceResponse v8+ carries them
as KIP-467 ``record_errors`` so a client fails only those records.

Recompression (the topic's ``compression.type``, as Kafka's LogValidator):
``producer`` keeps each batch as the producer compressed it; ``uncompressed``,
``gzip``, ``snappy``, ``lz4`` or ``zstd`` re-encode every data batch whose codec
differs (control batches are never compressed), after the checks above.  The
records -- offset deltas, timestamps, keys, values, headers (their keys decoded as Java's String decodes them
and written back in UTF-8, as Kafka does) -- and the batch's
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

from broker_sim.protocol.records import (
    WANT_HEADERS, WANT_KEYS, WANT_OFFSETS, WANT_TIMESTAMPS, WANT_VALUES, VarintTooLong, java_long, java_utf8,
    read_varint, walk_records)
from broker_sim.storage.batch import (
    ATTRIBUTES_OFFSET, COMPRESSION_MASK, CONTROL_MASK, HEADER_SIZE, LOG_OVERHEAD, MAGIC_OFFSET, TRANSACTIONAL_MASK,
    BatchHeader, decode_header, parse_batches, verify_batch)

try:  # the compiled walk (setup.py builds it; optional): without it every batch takes its pure twin
    from broker_sim.storage._records import scan as _scan
except ImportError:  # pragma: no cover - a build without a C compiler
    _scan = None

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
# Kafka's LegacyRecord.RECORD_OVERHEAD_V0: the smallest batchLength ByteBufferLogInputStream reads on from
MIN_BATCH_LENGTH = 14
# the attribute bits Kafka's DefaultRecordBatch.computeAttributes keeps when it rewrites a header: the codec,
# transactional, control and delete-horizon bits (the timestamp type is set anew; unknown bits are dropped)
KAFKA_ATTRIBUTES = COMPRESSION_MASK | TRANSACTIONAL_MASK | CONTROL_MASK | 0x40
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
    log_append_time: bool = False  # message.timestamp.type=LogAppendTime: the broker stamps the time
    segment_bytes: int | None = None  # segment.bytes: the most one append may hold (None: no bound)


def rules_for(config, max_decompressed_bytes: int, now_ms: int | None = None) -> RecordRules:
    """The rules of a log with ``config`` (a storage.log.LogConfig), its timestamp bounds taken around ``now_ms``
    (the broker's clock; None: no timestamp bounds)."""
    timestamps = None
    if now_ms is not None and config.message_timestamp_type == "CreateTime":
        timestamps = (now_ms - config.message_timestamp_before_max_ms, now_ms + config.message_timestamp_after_max_ms)
    return RecordRules(config.compact, config.max_message_bytes, max_decompressed_bytes,
                       TARGET_CODECS.get(config.compression_type), timestamps,
                       config.message_timestamp_type == "LogAppendTime", config.segment_bytes)


class ValidRecords(NamedTuple):
    """Records that passed :func:`validate_records`, as they are to be stored, with their batch headers."""

    records: bytes
    batches: list[BatchHeader]


class RecordValidationError(Errors.InvalidRecordError):
    """INVALID_RECORD naming the offending records: ``record_errors`` is [(index in its batch, message)]."""

    shown = True  # Kafka's response carries its message (the only refusal of records that has one)

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
        batches = parse_batches(records, verify_crc=False)
    view = memoryview(records)
    reencoded = [b for b in batches if rules.codec is not None and not b.is_control and b.compression != rules.codec]
    if inline and (sum(b.record_count for b in reencoded) > INLINE_REENCODE_RECORDS
                   or sum(b.record_count for b in batches) > INLINE_RECORDS):
        raise MoveToThread
    decompressed = 0
    stored = []
    for batch in batches:
        _check_header(view, batch, rules)
        size, header = _check_records(view[batch.position:batch.position + batch.size], batch, rules, inline,
                                      inspect)
        decompressed += size
        stored.append(header)
    valid = ValidRecords(records, stored)
    if reencoded:
        if inline and decompressed > INLINE_REENCODE_BYTES:
            raise MoveToThread
        valid = _recompress(view, stored, rules)
    if rules.segment_bytes is not None and len(valid.records) > rules.segment_bytes:
        raise Errors.RecordListTooLargeError(
            f"{len(valid.records)} bytes of records are larger than segment.bytes={rules.segment_bytes}")
    return valid


def check_batch_sizes(batches: list[BatchHeader], max_message_bytes: int) -> None:
    """The max.message.bytes rule alone, for records the broker writes itself (MessageSizeTooLargeError)."""
    for batch in batches:
        _check_size(batch, max_message_bytes)


def _check_size(batch: BatchHeader, max_message_bytes: int) -> None:
    if batch.size > max_message_bytes:
        raise Errors.MessageSizeTooLargeError(
            f"batch at byte {batch.position}: {batch.size} bytes is larger than max.message.bytes={max_message_bytes}")


def _check_header(view: memoryview, batch: BatchHeader, rules: RecordRules) -> None:
    where = f"batch at byte {batch.position}"
    _check_size(batch, rules.max_message_bytes)
    verify_batch(view, batch.position, batch)  # the CRC, then recordsCount against lastOffsetDelta
    if batch.base_offset != 0:
        raise Errors.InvalidRecordError(f"{where}: the baseOffset of a client's record batch should be 0, but it "
                                        f"is {batch.base_offset}")
    if batch.compression not in CODECS:
        # CompressionType.forId throws IllegalArgumentException, no ApiException: Kafka answers UNKNOWN_SERVER_ERROR
        raise Errors.UnknownError(f"{where}: unknown compression type id: {batch.compression}")
    if batch.has_producer_id and batch.base_sequence < 0:
        raise Errors.InvalidRecordError(
            f"{where}: invalid sequence number {batch.base_sequence} with producer id {batch.producer_id}")


def check_produce_records(records, version: int) -> ValidRecords:
    """The records of one partition of a Produce request of ``version`` that Kafka would append, and their
    batches, read as Kafka's KafkaApis reads
    them before any log sees them (``ByteBufferLogInputStream``, then ``ProduceRequest.validateRecords``):

    1. batches are read while a batch's first 12 bytes are there: a batchLength below 14 is CORRUPT_MESSAGE, so
       is a magic outside 0-2 ("Invalid magic found in record"); a batch that runs past the end ends the reading,
       and its bytes, like any shorter tail, are dropped (Kafka appends only the whole batches it read);
    2. there must be exactly one batch, of magic 2 (INVALID_RECORD), and no zstd below Produce v7
       (UNSUPPORTED_COMPRESSION_TYPE);
    the CRC and the record count are :func:`validate_records`' (Kafka's log checks them).
    """
    view = memoryview(records)
    end, position, found = len(view), 0, []
    while end - position >= LOG_OVERHEAD:
        (length,) = _INT32.unpack_from(view, position + 8)
        if length < MIN_BATCH_LENGTH:
            raise Errors.CorruptRecordError(f"batch at byte {position}: record size {length} is less than the "
                                            f"minimum record overhead ({MIN_BATCH_LENGTH})")
        if end - position < LOG_OVERHEAD + 5:
            break
        magic = view[position + MAGIC_OFFSET]
        if magic > 2:  # a signed byte in Kafka: 128-255 are negative
            raise InvalidMagicError(f"Invalid magic found in record: {magic if magic < 128 else magic - 256}")
        if end - position < LOG_OVERHEAD + length:
            break
        found.append((position, magic))
        position += LOG_OVERHEAD + length
    if not found:
        raise Errors.InvalidRecordError(f"Produce requests with version {version} must have at least one record "
                                        f"batch per partition")
    if found[0][1] != 2:
        raise Errors.InvalidRecordError(f"Produce requests with version {version} are only allowed to contain "
                                        f"record batches with magic version 2")
    if version < 7 and view[ATTRIBUTES_OFFSET + 1] & COMPRESSION_MASK == 4:
        raise Errors.UnsupportedCompressionTypeError(
            f"Produce requests with version {version} are not allowed to use ZStandard compression")
    if len(found) > 1:
        raise Errors.InvalidRecordError(f"Produce requests with version {version} are only allowed to contain "
                                        f"exactly one record batch per partition")
    return ValidRecords(view[:position], parse_batches(view[:position], verify_crc=False))


class InvalidMagicError(Errors.CorruptRecordError):
    """CORRUPT_MESSAGE for a magic Kafka does not know, the one such refusal whose message Kafka sends."""

    shown = True


def _recompress(view: memoryview, batches: list[BatchHeader], rules: RecordRules) -> ValidRecords:
    """The records with every data batch in ``rules.codec``, and the headers of what came out.

    As Kafka's ``LogValidator.buildRecordsAndAssignOffsets``, the records get offset deltas 0, 1, 2, ... and
    attributes 0. A re-encoded batch larger than max.message.bytes is refused (MessageSizeTooLargeError), as
    Kafka's UnifiedLog re-validates sizes after re-compression: 1.4 KB of zstd may hold 31 MB of records.
    """
    from kafka.record.default_records import DefaultRecordBatchBuilder

    codec = rules.codec
    out = bytearray()
    headers = []
    for header in batches:
        raw = view[header.position:header.position + header.size]
        if header.is_control or header.compression == codec:
            headers.append(header._replace(position=len(out)))
            out += raw
            continue
        records = memoryview(_decompressed_copy(raw, header, rules, False))[HEADER_SIZE:-PADDING] \
            if header.compression else raw[HEADER_SIZE:]
        keys, values, deltas, record_headers = walk_records(
            records, header.record_count, WANT_KEYS | WANT_VALUES | WANT_TIMESTAMPS | WANT_HEADERS,
            compressed=bool(header.compression))[4:8]
        builder = DefaultRecordBatchBuilder(
            magic=2, compression_type=codec, is_transactional=header.is_transactional,
            producer_id=header.producer_id, producer_epoch=header.producer_epoch,
            base_sequence=header.base_sequence, batch_size=2**31 - 1)
        for index, (key, value, delta, pairs) in enumerate(zip(keys, values, deltas, record_headers)):
            timestamp = header.max_timestamp if header.timestamp_type else java_long(header.base_timestamp + delta)
            builder.append(index, timestamp=timestamp, key=key, value=value,
                           headers=[(java_utf8(k), v) for k, v in pairs])
        built = builder.build()
        if len(built) > rules.max_message_bytes:
            raise Errors.MessageSizeTooLargeError(
                f"batch at byte {header.position}: {len(built)} bytes once re-encoded to "
                f"{CODECS[codec]} (compression.type) is larger than max.message.bytes={rules.max_message_bytes}")
        headers.append(decode_header(built, 0, len(out), len(built)))
        out += built
    return ValidRecords(bytes(out), headers)


def _check_records(data: memoryview, batch: BatchHeader, rules: RecordRules, inline: bool,
                   inspect) -> tuple[int, BatchHeader]:
    """Walk every record of one batch (``data`` is exactly the batch) as Kafka's LogValidator does; returns its
    records' decompressed size and its header as Kafka stores it (the max timestamp Kafka sets).

    The walk (:func:`_scan_records`) answers the timestamp range, the count of null keys and whether the offset
    deltas are 0, 1, 2, ...; only when a rule is broken is it asked again for what names the offending records.
    """
    if batch.compression:
        copy = _decompressed_copy(data, batch, rules, inline)
        records = memoryview(copy)[HEADER_SIZE:len(copy) - PADDING]
    else:
        records = data[HEADER_SIZE:]
    where = f"batch at byte {batch.position}"
    want = (WANT_KEYS if inspect is not None and inspect.keys else 0) | (
        WANT_VALUES if inspect is not None and inspect.values else 0)
    low, high, null_keys, in_order, keys, values = _scan_records(records, batch, rules, want)[:6]
    if not in_order and batch.compression and rules.codec in (None, batch.compression):
        # Kafka 4.1 then rebuilds the batch from the records its in-place walk read without keys and values,
        # which throws (UnsupportedOperationException): UNKNOWN_SERVER_ERROR
        raise Errors.UnknownError(f"{where}: a compressed batch whose offset deltas are not 0, 1, 2, ...")
    errors = []  # (index, message, a timestamp error): Kafka's per-record errors, in record order
    if rules.compact and null_keys:
        if keys is None:
            keys = _scan_records(records, batch, rules, WANT_KEYS)[4]
        errors += [(index, "Compacted topic cannot accept message without key", False)
                   for index, key in enumerate(keys) if key is None]
    if batch.timestamp_type:  # Kafka reads every record's timestamp of a LogAppendTime batch as its maxTimestamp
        low = high = batch.max_timestamp
    else:
        low, high = batch.base_timestamp + low, batch.base_timestamp + high
        if java_long(low) != low or java_long(high) != high:  # some timestamp wraps, as Java's long sum does
            stamps = [java_long(batch.base_timestamp + delta)
                      for delta in _scan_records(records, batch, rules, WANT_TIMESTAMPS)[6]]
            low, high = min(stamps), max(stamps)
    if _timestamps_refused(batch, rules, low, high):
        errors += _timestamp_errors(records, batch, rules)
    if errors:
        _raise_record_errors(errors)
    if inspect is not None and not batch.is_control:
        inspect(batch, keys, values)
    return len(records), _stored_header(batch, rules, high)


def _stored_header(batch: BatchHeader, rules: RecordRules, max_timestamp: int) -> BatchHeader:
    """The header Kafka stores for a client batch of a CreateTime log: ``setMaxTimestamp(CREATE_TIME, the
    records' largest timestamp)``, which, when that differs from the header, rewrites the attributes as Kafka
    computes them (codec, transactional, control, delete horizon; timestamp type CreateTime, unknown bits
    dropped) and the max timestamp (the CRC then recomputed by ``batch.stamp_batches``)."""
    max_timestamp = max(max_timestamp, -1)  # Kafka's maximum starts at NO_TIMESTAMP
    if rules.log_append_time or (batch.max_timestamp == max_timestamp and not batch.timestamp_type):
        return batch
    return batch._replace(attributes=batch.attributes & KAFKA_ATTRIBUTES, max_timestamp=max_timestamp)


def _timestamps_refused(batch: BatchHeader, rules: RecordRules, low: int, high: int) -> bool:
    """True when some record of the batch breaks LogValidator.validateTimestamp (its records' timestamps
    between ``low`` and ``high``)."""
    if batch.is_control:
        return False
    if rules.log_append_time:
        return bool(batch.timestamp_type)
    if batch.timestamp_type and batch.max_timestamp == -1:
        return True
    return rules.timestamps is not None and not (rules.timestamps[0] <= low and high <= rules.timestamps[1])


def _timestamp_errors(records, batch: BatchHeader, rules: RecordRules) -> list[tuple[int, str, bool]]:
    """Kafka's INVALID_TIMESTAMP record errors of the batch, naming each record."""
    deltas = _scan_records(records, batch, rules, WANT_TIMESTAMPS)[6]
    errors = []
    for index, delta in enumerate(deltas):
        timestamp = batch.max_timestamp if batch.timestamp_type else java_long(batch.base_timestamp + delta)
        if not rules.log_append_time and timestamp != -1:
            low, high = rules.timestamps or (-2**63, 2**63 - 1)
            if not low <= timestamp <= high:
                errors.append((index, f"Timestamp {timestamp} of message with offset {batch.base_offset + index} "
                                      f"is out of range. The timestamp should be within [{low}, {high}]", True))
        elif batch.timestamp_type:
            errors.append((index, "Invalid timestamp type in message. Producer should not set timestamp type to "
                                  "LogAppendTime.", True))
    return errors


def _raise_record_errors(errors: list[tuple[int, str, bool]]) -> None:
    """Kafka's LogValidator.processRecordErrors: INVALID_TIMESTAMP when any record's timestamp is refused,
    else INVALID_RECORD, each naming every refused record."""
    named = [(index, message) for index, message, _ in errors]
    if any(timestamp for *_, timestamp in errors):
        raise TimestampOutOfRangeError("One or more records have been rejected due to invalid timestamp", named)
    raise RecordValidationError.of(named)


def _scan_records(records, batch: BatchHeader, rules: RecordRules, want: int) -> tuple:
    """The compiled walk's answer for a batch's records; where it refuses them (or is not built), its pure twin
    :func:`walk_records`, which raises Kafka's error for them (or accepts what only Kafka's partial walk of a
    compressed batch kept in its codec accepts)."""
    scanned = _scan(records, batch.record_count, want) if _scan is not None else None
    if scanned is None:
        compressed = bool(batch.compression)
        try:
            scanned = walk_records(records, batch.record_count, want, compressed=compressed,
                                   partial=compressed and rules.codec in (None, batch.compression))
        except (Errors.InvalidRecordError, Errors.UnknownError) as exc:
            raise type(exc)(f"batch at byte {batch.position}: {exc.args[0]}") from None
    return scanned


class StoredRecord(NamedTuple):
    """One record of a stored batch, as Kafka reads it."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list  # (key as Java decodes it, value bytes or None)


# a stored batch is read whole: no bound but the batch's own
_READ_RULES = RecordRules(compact=False, max_message_bytes=2**31 - 1, max_decompressed_bytes=2**31 - 1)


def read_batch(data) -> list[StoredRecord]:
    """The records of one whole v2 batch (``data``: its bytes, header included) as Kafka reads them: by the
    compiled walk, or its pure twin (the one definition of a record, broker_sim.protocol.records), never by
    kafka-python's or aiokafka's record readers, which take the attributes byte for a varint. For the broker's
    own readers of stored batches (the log cleaner, the coordinators' and the registry's loaders). Raises
    CorruptRecordError (framing), UnknownError (a codec's stream) or InvalidRecordError for what Kafka refuses.
    """
    batch, keys, values, deltas, headers, offsets = _walk_stored(
        data, WANT_KEYS | WANT_VALUES | WANT_TIMESTAMPS | WANT_HEADERS | WANT_OFFSETS)
    if batch.timestamp_type:
        timestamps = [batch.max_timestamp] * len(keys)
    else:
        timestamps = _plus(batch.base_timestamp, deltas)
    return [StoredRecord(offset, timestamp, key, value, [(java_utf8(k), v) for k, v in pairs] if pairs else [])
            for offset, timestamp, key, value, pairs in zip(_plus(batch.base_offset, offsets), timestamps, keys,
                                                             values, headers)]


def batch_keys(data, values: bool = False) -> tuple[list, list | None, list[int]]:
    """(keys, values or None unless ``values``, offsets) of the records of one whole v2 batch, as
    :func:`read_batch` reads them (without building a record each)."""
    batch, keys, values_, _, _, offsets = _walk_stored(data, WANT_KEYS | WANT_OFFSETS | (WANT_VALUES if values else 0))
    return keys, values_, _plus(batch.base_offset, offsets)


def _plus(base: int, deltas: list) -> list[int]:
    """``base`` + each delta, in Java longs (as Kafka adds a record's delta to its batch's base)."""
    if not deltas:
        return []
    low, high = base + min(deltas), base + max(deltas)
    if java_long(low) == low and java_long(high) == high:
        return [base + delta for delta in deltas]
    return [java_long(base + delta) for delta in deltas]


def _walk_stored(data, want: int) -> tuple:
    """(header, keys, values, timestamp deltas, headers, offset deltas) of a stored batch (lists where asked)."""
    view = memoryview(data)
    batch = decode_header(view, 0, 0, len(view))
    if batch.record_count == 0:  # Kafka's iterator reads nothing of a batch that claims no records
        return batch, [], [], [], [], []
    if batch.compression:
        if batch.compression not in CODECS:
            raise Errors.UnknownError(f"unknown compression type id: {batch.compression}")
        copy = _decompressed_copy(view[:batch.size], batch, _READ_RULES, False)
        records = memoryview(copy)[HEADER_SIZE:len(copy) - PADDING]
    else:
        records = view[HEADER_SIZE:batch.size]
    scanned = _scan(records, batch.record_count, want) if _scan is not None else None
    if scanned is None:
        scanned = walk_records(records, batch.record_count, want, compressed=bool(batch.compression))
    return (batch, *scanned[4:])


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
        # lz4.frame raises RuntimeError for a corrupt frame. Kafka's decompressing streams throw a KafkaException,
        # no ApiException: UNKNOWN_SERVER_ERROR (not CORRUPT_MESSAGE, which the Java client would retry)
        raise Errors.UnknownError(f"{where}: {codec} data is corrupt: {exc}") from None
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
                length, after = read_varint(out, cursor, end)
            except VarintTooLong:
                raise Errors.UnknownError(f"{self.where}: a record length is not a varint of at most 5 bytes") from None
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
    declared = 0
    for shift, byte in zip(range(0, 35, 7), bytes(block[:5])):  # an unsigned varint, all its bits kept
        declared |= (byte & 0x7F) << shift
        if byte < 0x80:
            break
    else:
        raise EOFError("snappy block length is not a varint of at most 5 bytes")
    reserve(declared)
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


def decompressed_size(compression: int, data, max_bytes: int) -> int:
    """How many bytes ``data`` decompresses to with a RecordBatch codec (1 gzip, 2 snappy, 3 lz4, 4 zstd), the
    output dropped as it comes (client telemetry payloads: nothing else reads them here).  Raises
    ``Errors.MessageSizeTooLargeError`` once more than ``max_bytes`` came out (at most one more chunk is
    decompressed), ``Errors.CorruptRecordError`` for a stream that is not valid for its codec."""
    _import_codecs()
    total = 0

    def reserve(size: int) -> None:
        if total + size > max_bytes:
            raise _OverBudget
    try:
        for piece in _DECOMPRESSORS[compression](memoryview(data), reserve):
            reserve(len(piece))
            total += len(piece)
    except _OverBudget:
        raise Errors.MessageSizeTooLargeError(f"the payload decompresses to more than {max_bytes} bytes") from None
    except (zlib.error, zstandard.ZstdError, RuntimeError, cramjam.DecompressionError, EOFError, ValueError) as exc:
        raise Errors.CorruptRecordError(f"the payload is not valid {CODECS[compression]} data: {exc}") from None
    return total
