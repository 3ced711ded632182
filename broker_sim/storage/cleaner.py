"""Log compaction: keep the latest record of every key (Kafka's LogCleaner / Cleaner).

Theory of operation: a log whose `cleanup.policy` contains `compact` is split
at its *first dirty offset* (the end of the last clean, from the checkpoint
below) into a clean head and a dirty tail. The *cleanable* part of the tail
ends at the first uncleanable offset: the base of the active segment, of the
first segment reaching the high watermark, or of the first segment holding
records younger than `min.compaction.lag.ms`, whichever is lowest, so the
active segment is never touched. A pass runs when the dirty share of the
cleanable bytes is above `min.cleanable.dirty.ratio` (Kafka compares with
`>`), when the oldest dirty record is older than `max.compaction.lag.ms`, or
when tombstones kept by an earlier pass have reached their delete horizon.

A pass (`plan` -> `build` -> `commit`):

1. `build` decodes every record of the dirty range (as Kafka reads them:
   `validator.batch_keys`, the one definition of a record; aiokafka's reader
   took the attributes byte for a varint, so a rebuilt batch could give a
   record another key and value) into a map key -> latest offset, then rewrites every sealed segment
   from the log start to the first uncleanable offset, grouped into runs that
   fit `segment.bytes`, each run into one `<base>.log.cleaned` segment (with
   indexes) at the base offset of its first segment. A record survives when
   no later offset in the map has its key; unkeyed records are dropped (Kafka
   counts them as invalid: produce rejects them on compacted topics). A
   tombstone (null value) survives its first pass and every pass until
   `delete.retention.ms` after that first pass (Kafka's delete horizon).
   Offsets never change: a batch whose records all survive is copied byte for
   byte; a partly surviving batch is rebuilt (its records by `validator.read_batch`) with its base offset,
   lastOffsetDelta, producer id/epoch, base sequence, leader epoch, codec and
   timestamp type, so its last sequence number is unchanged (Kafka's
   `MemoryRecords.filterTo`); a batch with no survivor disappears. Kept as-is:
   control batches and transactional batches (not used to supersede anything
   either, so an aborted write never deletes older data). The last batch of
   every producer in `producer_last_offsets` is filtered like any other but
   never dropped, so idempotent producer state (rebuilt from the log on
   restart) survives compaction: when none of its records survives, it is
   kept as an *empty batch*, its 61-byte header with recordsCount 0 (Kafka's
   `BatchRetention.RETAIN_EMPTY` and `DefaultRecordBatch.writeEmptyHeader`):
   base offset, lastOffsetDelta (so the last sequence, baseSequence +
   lastOffsetDelta, is unchanged), leader epoch, producer id/epoch, base
   sequence, timestamp type, maxTimestamp; codec none, baseTimestamp -1. No
   superseded record stays behind, so consumers see one record per key.
   Recovery, producer-state rebuild, fetch and follower appends accept such
   batches; produce still refuses a client batch without records. An empty
   batch that is no longer its producer's last goes at the next pass, as in
   Kafka. A run that is a single segment with nothing dropped or rewritten is
   not rewritten.
2. `commit` swaps each rewritten run in with `PartitionLog.replace_segments`
   (crash-safe: `.cleaned` -> `.swap` -> plain names, see `log.py`) and then
   writes the checkpoint.

`build` reads only sealed segments, through descriptors it opened in
`plan`, and writes only `.cleaned` files, so it may run in a worker thread
(`clean_log_async`) while the event loop keeps serving produce and fetch;
`plan` and `commit` run on the loop thread. `commit` swaps nothing if
retention, DeleteRecords, truncation or close changed the segments meanwhile.

Checkpoint: `cleaner-offset-checkpoint` in the partition directory (Kafka
keeps one per log dir), a `checkpoint.py` file whose entries are
``<end offset> <cleaned at ms> <tombstones kept>``, ascending: each pass
cleaned the offsets from the previous entry's end to its end for the first
time at `cleaned at`; the last end is the first dirty offset. A tombstone's
delete horizon is the `cleaned at` of the entry covering it plus
`delete.retention.ms`. Entries left with no tombstones merge into the next
one (a later time only delays removal), so the file stays short. A missing or
unreadable checkpoint means "nothing clean yet": safe, it only delays
tombstone removal and re-reads the log.
"""

from __future__ import annotations

import asyncio
import logging
import os
import struct
from bisect import bisect_right
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Mapping, NamedTuple

from crc32c import crc32c
from kafka.errors import KafkaStorageError

from broker_sim.storage.batch import (
    ATTRIBUTES_OFFSET,
    CONTROL_MASK,
    CRC_OFFSET,
    HEADER,
    HEADER_SIZE,
    INT32_MAX,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    decode_header,
    parse_batches,
)
from broker_sim.storage.checkpoint import read_checkpoint, write_checkpoint
from broker_sim.storage.log import CLEANED_SUFFIX, PartitionLog
from broker_sim.storage.segment import LogSegment, segment_file_name
from broker_sim.storage.validator import batch_keys, read_batch

__all__ = ["CLEANER_CHECKPOINT", "CleanResult", "CleanedRange", "clean_log", "clean_log_async"]

logger = logging.getLogger(__name__)

CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
_CHECKPOINT_VERSION = 0
_READ_CHUNK = 1 << 20
_WRITE_CHUNK = 1 << 20
_CRC_FIELD = struct.Struct(">I")


class CleanedRange(NamedTuple):
    """One checkpoint entry: offsets up to `end_offset` (exclusive) were first cleaned at `cleaned_ms`."""

    end_offset: int
    cleaned_ms: int
    tombstones: int


@dataclass
class CleanResult:
    """What one pass did; `bytes_*` cover the segments from the log start to `end_offset`."""

    partition: str
    first_dirty_offset: int
    end_offset: int
    bytes_before: int
    bytes_after: int
    records_removed: int
    segments_before: int
    segments_after: int


def read_cleaner_checkpoint(directory: Path) -> list[CleanedRange]:
    """The checkpoint's entries, [] when missing or unreadable (re-cleaning from the start is safe)."""
    path = directory / CLEANER_CHECKPOINT
    try:
        entries = read_checkpoint(path, _CHECKPOINT_VERSION) or []
        return [CleanedRange(*(int(field) for field in entry.split())) for entry in entries]
    except (ValueError, TypeError) as e:
        logger.warning("%s: ignoring unreadable cleaner checkpoint: %s", path, e)
        return []


def write_cleaner_checkpoint(directory: Path, ranges: list[CleanedRange]) -> None:
    write_checkpoint(
        directory / CLEANER_CHECKPOINT,
        _CHECKPOINT_VERSION,
        [f"{r.end_offset} {r.cleaned_ms} {r.tombstones}" for r in ranges],
    )


@dataclass
class _Group:
    segments: list[LogSegment]
    new: LogSegment | None = None
    removed: int = 0
    changed: bool = False  # some batch was dropped or rewritten


@dataclass
class _Plan:
    log: PartitionLog
    now: int
    first_dirty: int
    end: int
    history: list[CleanedRange]
    dirty: list[LogSegment]
    groups: list[_Group]
    producer_last_offsets: Mapping[int, int]
    delete_retention_ms: int
    descriptors: dict[int, int] = field(default_factory=dict)  # id(segment) -> our O_RDONLY descriptor
    tombstones: list[int] = field(default_factory=list)  # kept per history entry, plus one for this pass

    def close(self) -> None:
        for fd in self.descriptors.values():
            os.close(fd)
        self.descriptors.clear()


def clean_log(
    log: PartitionLog,
    now_ms: int,
    *,
    high_watermark: int | None = None,
    producer_last_offsets: Mapping[int, int] | None = None,
) -> CleanResult | None:
    """Run one pass on the calling thread; returns None when the log needs none.

    `producer_last_offsets` maps producer id -> last offset of its last batch
    (their batches are kept whole). Raises KafkaStorageError (and OSError)
    when reading or writing fails; the log is then unchanged.
    """
    plan = _plan(log, now_ms, high_watermark, producer_last_offsets or {})
    if plan is None:
        return None
    _build_or_discard(plan)
    return _commit(plan)


async def clean_log_async(
    log: PartitionLog,
    now_ms: int,
    *,
    high_watermark: int | None = None,
    producer_last_offsets: Mapping[int, int] | None = None,
) -> CleanResult | None:
    """`clean_log` with the reading and writing in a worker thread; call from the log's event loop.

    Cancelling it abandons the pass once the worker is done with its files.
    """
    plan = _plan(log, now_ms, high_watermark, producer_last_offsets or {})
    if plan is None:
        return None
    worker = asyncio.ensure_future(asyncio.to_thread(_build_or_discard, plan))
    try:
        await asyncio.shield(worker)
    except asyncio.CancelledError:
        worker.add_done_callback(lambda _: _discard(plan))
        raise
    return _commit(plan)


# -- plan (event loop thread) ----------------------------------------------


def _plan(log: PartitionLog, now: int, high_watermark: int | None, producer_last_offsets) -> _Plan | None:
    config = log.config
    if not config.compact or log.closed:
        return None
    sealed = list(log.segments[:-1])
    start = log.log_start_offset
    history = [r for r in read_cleaner_checkpoint(log.directory) if start < r.end_offset <= log.log_end_offset]
    first_dirty = history[-1].end_offset if history else start

    end = log.active_segment.base_offset
    for segment in sealed:
        if high_watermark is not None and segment.next_offset > high_watermark:
            end = min(end, segment.base_offset)
            break
    if config.min_compaction_lag_ms > 0:
        for segment in sealed:
            if segment.next_offset > first_dirty and segment.largest_timestamp() > now - config.min_compaction_lag_ms:
                end = min(end, segment.base_offset)
                break

    dirty = [s for s in sealed if s.next_offset > first_dirty and s.base_offset < end]
    dirty_bytes = sum(s.size for s in dirty)
    clean_bytes = sum(s.size for s in sealed if start < s.next_offset <= first_dirty)
    ratio = dirty_bytes / (dirty_bytes + clean_bytes) if dirty_bytes else 0.0
    oldest = min((_first_timestamp(s) for s in dirty if s.size), default=None)
    overdue = oldest is not None and now - oldest > config.max_compaction_lag_ms
    tombstones_due = any(r.tombstones and r.cleaned_ms + config.delete_retention_ms <= now for r in history)
    if not ((dirty_bytes and (ratio > config.min_cleanable_dirty_ratio or overdue)) or tombstones_due):
        return None

    upper = max(end, first_dirty)
    to_clean = [s for s in sealed if s.base_offset < upper and s.next_offset > start]
    if not to_clean:
        return None
    plan = _Plan(
        log, now, first_dirty, upper, history, dirty if end > first_dirty else [], _group(to_clean, config.segment_bytes),
        dict(producer_last_offsets), config.delete_retention_ms,
    )  # fmt: skip
    plan.tombstones = [0] * (len(history) + 1)
    try:
        for segment in to_clean:
            plan.descriptors[id(segment)] = os.open(segment.log_path, os.O_RDONLY)
    except OSError:
        plan.close()
        raise
    return plan


def _first_timestamp(segment: LogSegment) -> int:
    first = segment.first_batch_timestamp
    return first if first is not None and first >= 0 else segment.largest_timestamp()


def _group(segments: list[LogSegment], max_bytes: int) -> list[_Group]:
    """Kafka's groupSegmentsBySize: consecutive runs within `max_bytes` and int32 relative offsets."""
    groups = [_Group([segments[0]])]
    size = segments[0].size
    for segment in segments[1:]:
        first = groups[-1].segments[0]
        if size + segment.size <= max_bytes and segment.next_offset - 1 - first.base_offset <= INT32_MAX:
            groups[-1].segments.append(segment)
            size += segment.size
        else:
            groups.append(_Group([segment]))
            size = segment.size
    return groups


# -- build (any thread) ------------------------------------------------------


def _build_or_discard(plan: _Plan) -> None:
    """`_build`, removing its files when it fails; closes the plan's descriptors either way."""
    try:
        _build(plan)
    except BaseException:
        _discard(plan)
        raise
    finally:
        plan.close()


def _build(plan: _Plan) -> None:
    offset_map = _offset_map(plan)
    directory = plan.log.directory
    interval = plan.log.config.index_interval_bytes
    ends = [r.end_offset for r in plan.history]
    for group in plan.groups:
        base = group.segments[0].base_offset
        for suffix in (".log", ".index", ".timeindex"):
            (directory / segment_file_name(base, suffix + CLEANED_SUFFIX)).unlink(missing_ok=True)
        new = LogSegment(directory, base, index_interval_bytes=interval, now_ms=plan.now, suffix=CLEANED_SUFFIX)
        group.new = new
        out = bytearray()
        for segment in group.segments:
            for header, data in _read_batches(plan.descriptors[id(segment)], segment.size, segment.log_path):
                kept, removed = _retain(plan, offset_map, ends, header, data)
                group.removed += removed
                group.changed = group.changed or kept is not data
                if kept is not None:
                    out += kept
                    if len(out) >= _WRITE_CHUNK:
                        _write(new, out)
                        out = bytearray()
        _write(new, out)
        if len(group.segments) == 1 and not group.changed:
            _delete(new)
            group.new = None
        else:
            new.seal()


def _offset_map(plan: _Plan) -> dict[bytes, int]:
    """Key -> offset of its last record in [first dirty, end), transactional and control batches excluded;
    records read as Kafka reads them (``validator.batch_keys``: the one definition of a record)."""
    offsets: dict[bytes, int] = {}
    for segment in plan.dirty:
        for header, data in _read_batches(plan.descriptors[id(segment)], segment.size, segment.log_path):
            if header.is_control or header.is_transactional:
                continue
            if header.last_offset < plan.first_dirty or header.base_offset >= plan.end:
                continue
            keys, _, record_offsets = batch_keys(data)
            for key, offset in zip(keys, record_offsets):
                if key is not None and plan.first_dirty <= offset < plan.end:
                    offsets[key] = offset
    return offsets


def _retain(plan: _Plan, offset_map, ends: list[int], header: BatchHeader, data: bytes) -> tuple[bytes | None, int]:
    """(bytes to keep of this batch or None, records removed); `data` itself when the batch stays as it is."""
    if header.is_control or header.is_transactional:
        return data, 0
    last_offsets = plan.producer_last_offsets
    last_of_producer = header.has_producer_id and last_offsets.get(header.producer_id) == header.last_offset
    if header.record_count == 0:
        # an empty header kept by an earlier pass: it stays while it is still its producer's last batch
        return (data if last_of_producer else None), 0
    keys, values, offsets = batch_keys(data, values=True)  # the records as Kafka reads them
    kept = []
    for index, (key, value, offset) in enumerate(zip(keys, values, offsets)):
        if key is None or offset_map.get(key, -1) > offset:
            continue
        if value is None:
            entry = bisect_right(ends, offset)
            first_cleaned = plan.history[entry].cleaned_ms if entry < len(ends) else plan.now
            if first_cleaned + plan.delete_retention_ms <= plan.now:
                continue
            plan.tombstones[entry] += 1
        kept.append(index)
    if len(kept) == len(keys):
        return data, 0
    if not kept:
        # Kafka's BatchRetention.RETAIN_EMPTY: the producer's last batch stays as a header without records,
        # so its sequence numbers (and epoch) survive a restart that rebuilds producer state from the log
        return (_empty_header(header) if last_of_producer else None), len(keys)
    records = read_batch(data)
    return _rebuild(header, [records[index] for index in kept]), len(keys) - len(kept)


def _empty_header(header: BatchHeader) -> bytes:
    """The batch's 61-byte header with recordsCount 0, as Kafka's `DefaultRecordBatch.writeEmptyHeader`.

    Kept: base offset, lastOffsetDelta (so the offsets and the last sequence
    number, baseSequence + lastOffsetDelta, are unchanged), partition leader
    epoch, producer id, epoch and base sequence, the timestamp type, the
    transactional and control flags, and maxTimestamp. As in Kafka, the codec
    becomes none (there is nothing to compress) and baseTimestamp -1
    (NO_TIMESTAMP: there is no first record).
    """
    data = bytearray(HEADER_SIZE)
    HEADER.pack_into(
        data, 0, header.base_offset, HEADER_SIZE - LOG_OVERHEAD, header.partition_leader_epoch, 2, 0,
        header.attributes & (TIMESTAMP_TYPE_MASK | TRANSACTIONAL_MASK | CONTROL_MASK), header.last_offset_delta,
        -1, header.max_timestamp, header.producer_id, header.producer_epoch, header.base_sequence, 0,
    )  # fmt: skip
    _CRC_FIELD.pack_into(data, CRC_OFFSET, crc32c(memoryview(data)[ATTRIBUTES_OFFSET:]))
    return bytes(data)


def _rebuild(header: BatchHeader, records) -> bytes:
    """A batch of `records` with every header field of `original` except the record count, CRC and length.

    Timestamps: CreateTime batches get the surviving records' first and max
    timestamps (as Kafka's filterTo); LogAppendTime batches keep theirs.
    """
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(
        2, header.compression, int(header.is_transactional), header.producer_id, header.producer_epoch,
        header.base_sequence, 2**31 - 1,
    )  # fmt: skip
    for record in records:
        builder.append(record.offset - header.base_offset, record.timestamp, record.key, record.value, record.headers)
    data = bytearray(builder.build())
    fields = list(HEADER.unpack_from(data, 0))
    fields[0] = header.base_offset
    fields[2] = header.partition_leader_epoch
    fields[5] = header.attributes
    fields[6] = header.last_offset_delta
    if header.timestamp_type == 1:
        fields[7], fields[8] = header.base_timestamp, header.max_timestamp
    HEADER.pack_into(data, 0, *fields)
    _CRC_FIELD.pack_into(data, CRC_OFFSET, crc32c(memoryview(data)[ATTRIBUTES_OFFSET:]))
    return bytes(data)


def _read_batches(fd: int, size: int, path: Path) -> Iterator[tuple[BatchHeader, bytes]]:
    """(header, bytes) of every batch in the first `size` bytes of the file open at `fd`."""
    position = 0
    buf = b""
    buf_start = 0
    while position < size:
        offset = position - buf_start
        if offset + HEADER_SIZE > len(buf):
            buf, buf_start, offset = _pread(fd, HEADER_SIZE, position, size, path), position, 0
        try:
            header = decode_header(buf, offset, position, size - position)
        except Exception as e:
            raise KafkaStorageError(f"{path}: {e}") from e
        if offset + header.size > len(buf):
            buf, buf_start, offset = _pread(fd, header.size, position, size, path), position, 0
        yield header, bytes(buf[offset : offset + header.size])
        position += header.size


def _pread(fd: int, needed: int, position: int, size: int, path: Path) -> bytes:
    data = os.pread(fd, min(max(_READ_CHUNK, needed), size - position), position)
    if len(data) < min(needed, size - position):
        raise KafkaStorageError(f"{path}: short read at byte {position}")
    return data


def _write(segment: LogSegment, data: bytearray) -> None:
    if not data:
        return
    start = segment.size
    headers = [h._replace(position=h.position + start) for h in parse_batches(data, verify_crc=False)]
    segment.append(data, headers)


def _delete(segment: LogSegment) -> None:
    segment.close_indexes()
    segment.unlink()
    segment.file.close()


def _discard(plan: _Plan) -> None:
    for group in plan.groups:
        if group.new is not None:
            _delete(group.new)
            group.new = None


# -- commit (event loop thread) ------------------------------------------------


def _commit(plan: _Plan) -> CleanResult | None:
    log = plan.log
    bytes_before = sum(s.size for g in plan.groups for s in g.segments)
    segments_before = sum(len(g.segments) for g in plan.groups)
    if log.closed:
        _discard(plan)
        return None
    try:
        for group in plan.groups:
            if group.new is not None:
                log.replace_segments(group.segments, group.new)
                group.new = None
    except KafkaStorageError as e:
        # The log changed under us (retention, DeleteRecords, truncation): the next pass starts over.
        logger.info("%s: clean abandoned: %s", plan.log.directory.name, e)
        _discard(plan)
        return None
    write_cleaner_checkpoint(log.directory, _new_history(plan))
    bytes_after = sum(s.size for s in log.segments if s.base_offset < plan.end and s.next_offset > log.log_start_offset)
    return CleanResult(
        log.directory.name,
        plan.first_dirty,
        plan.end,
        bytes_before,
        bytes_after,
        sum(g.removed for g in plan.groups),
        segments_before,
        len(plan.groups),
    )


def _new_history(plan: _Plan) -> list[CleanedRange]:
    """Entries after this pass: ranges still holding tombstones, and the new end."""
    history = [r._replace(tombstones=n) for r, n in zip(plan.history, plan.tombstones)]
    if plan.end > plan.first_dirty or not history:
        history.append(CleanedRange(plan.end, plan.now, plan.tombstones[-1]))
    kept = [r for r in history[:-1] if r.tombstones]
    return [*kept, history[-1]]
