"""PartitionLog: one partition's segments, offsets, retention and recovery.

Theory of operation: a partition directory holds segments named by base
offset (see `segment.py`). The last segment is *active* and takes appends; the
others are sealed (fsynced, final time-index entry written). `append` assigns
offsets from the log end offset, stamps them into a copy of the producer's
bytes (`stamp_batches`) and writes that copy to the active segment in one
`write`, rolling to a new segment first when the active one is full, too old
or would overflow 32-bit relative offsets. `read` returns `FileRegion`s of
whole batches (one per segment touched) for zero-copy `os.sendfile`.

Opening a directory recovers the active segment (full CRC scan, truncating a
torn or corrupt tail) and any sealed segment whose indexes are missing or
inconsistent; other sealed segments are adopted from their indexes with a
short tail scan.  ``recover_tail=False`` adopts the active segment that way
too (recovering it only when its indexes do not check out): for an exact copy
of a live log's files (a log-dir move), whose tail cannot be torn, so a move
costs no scan of the active segment on the event loop.  Leftover `.cleaned`,
`.deleted` and `.tmp` files are removed. The log start offset lives in the
`log-start-offset` checkpoint because DeleteRecords can move it inside a
segment.

Compaction (`cleaner.py`) replaces a run of sealed segments with one segment
written under `.cleaned` names, through `replace_segments`, in Kafka's crash-safe
order: rename the new files to `.swap` (the commit point: a `.swap` `.log` is
complete and fsynced), unlink the old segments, rename the new files to their
plain names. Opening a directory completes an interrupted swap: every plain
segment file with a base offset inside the swap segment's offset range is one
it replaces and is deleted, then the swap files take their plain names (the
indexes rebuilt). Old segments past the swap segment's last offset (their
records were all compacted away) survive such a crash; they hold only records
that later offsets supersede, so the log still reads as a valid compaction of
the original, and the next clean removes them.

Retention by time and size applies when `cleanup_policy` contains `delete`,
as in Kafka; a `compact`-only log only loses segments below its start offset.

Descriptors: on its own, a log's active segment holds its `.log`, `.index` and
`.timeindex` open; sealed segments hold nothing but the few most recently read
(`OPEN_INACTIVE_SEGMENTS` of them, an LRU) — so a partition costs at most
`FDS_PER_PARTITION` descriptors however many segments it has. A broker also
passes every log one shared `OpenSegments` (`open_segments=`): then all
segments, active ones included, hold files only while among the broker's most
recently used too, so its storage descriptors stay under that LRU's capacity
times `FILES_PER_SEGMENT` whatever the partition count (an idle partition
holds none; an append or read reopens what was let go). Loading opens segments one
at a time for the same reason.

Deleted segments (retention, DeleteRecords, truncation) are unlinked at once,
but the log keeps their `.log` file for `file_delete_delay_ms`; a `FileRegion`
handed out before holds the file itself until it is sent, whatever the delay.
The log lets go of them at a later `append`, `maybe_roll`, `enforce_retention`
or `close`.

Threading: a PartitionLog is single-threaded — the broker calls it only from
its asyncio event-loop thread, so it has no lock. Time comes from the injected
`now_ms` clock.
"""

from __future__ import annotations

import logging
import os
import re
import resource
import shutil
import time
from bisect import bisect_right
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Mapping, NamedTuple

from kafka.errors import CorruptRecordError, KafkaStorageError, OffsetOutOfRangeError

from broker_sim.config import TOPIC_CONFIGS, parse_topic_config
from broker_sim.config import topic_config_default as _default
from broker_sim.storage.batch import INT32_MAX, TIMESTAMP_TYPE_MASK, BatchHeader, stamp_batches
from broker_sim.storage.checkpoint import fsync_directory, read_checkpoint, write_checkpoint
from broker_sim.storage.segment import FILES_PER_SEGMENT, FileRegion, LogSegment, OpenSegments
from broker_sim.storage.txn_index import AbortedTxn

__all__ = ["AppendInfo", "FileRegion", "LogConfig", "PartitionLog", "shared_open_segments"]

LOG_START_OFFSET_CHECKPOINT = "log-start-offset"
_CHECKPOINT_VERSION = 0
_SEGMENT_LOG = re.compile(r"^(\d{20})\.log$")
_SEGMENT_INDEX = re.compile(r"^(\d{20})\.(index|timeindex|txnindex)$")
_SEGMENT_FILE = re.compile(r"^(\d{20})\.(log|index|timeindex|txnindex)$")
_SWAP_LOG = re.compile(r"^(\d{20})\.log\.swap$")
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
_LEFTOVER_SUFFIXES = (CLEANED_SUFFIX, ".deleted", ".tmp")
# Sealed segments kept open after a read: a consumer reading a lagging partition moves through
# one segment at a time, so two cover it and its neighbour.
OPEN_INACTIVE_SEGMENTS = 2
# Worst case per partition with its own LRU: the active segment's three files plus the open inactive `.log`s.
FDS_PER_PARTITION = FILES_PER_SEGMENT + OPEN_INACTIVE_SEGMENTS


# The derived partition limit (max.broker.partitions=-1) budgets one descriptor of storage's half of the
# open-file limit per partition: with the shared LRU an idle partition holds none, and the LRU (that same half,
# FILES_PER_SEGMENT descriptors per segment) keeps a third of the partitions' active segments open at most.
DESCRIPTORS_PER_PARTITION = 1


def storage_descriptors(open_files: int | None = None) -> int:
    """Storage's share of the (soft) open-file limit: half; the other half is the connections' (max.connections)."""
    if open_files is None:
        open_files = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if open_files == resource.RLIM_INFINITY or open_files >= 2**32:
        return 2**31 - 1
    return open_files // 2


def partition_limit(open_files: int) -> int:
    """max.broker.partitions when set to -1 (KIP-578's config): what `storage_descriptors` allows."""
    return max(1, storage_descriptors(open_files) // DESCRIPTORS_PER_PARTITION)


def shared_open_segments(storage_descriptors: int) -> OpenSegments:
    """A broker-wide LRU of open segments holding at most `storage_descriptors` descriptors (at least 8 segments)."""
    return OpenSegments(max(8, min(storage_descriptors, 2**20) // FILES_PER_SEGMENT))

log = logging.getLogger(__name__)
# Kafka 4's test-only topic config: a segment size below segment.bytes' minimum (which it overrides).
INTERNAL_SEGMENT_BYTES = "internal.segment.bytes"


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class LogConfig:
    """Per-partition log settings (Kafka's ``LogConfig``), built from ``config.TOPIC_CONFIGS``: each field is
    the row that names it, with that row's default and parser; comments give the broker / topic names."""

    segment_bytes: int = _default("segment.bytes")  # log.segment.bytes / segment.bytes (or internal.segment.bytes)
    segment_ms: int = _default("segment.ms")  # log.roll.ms / segment.ms
    retention_ms: int = _default("retention.ms")  # log.retention.ms / retention.ms (-1 = forever)
    retention_bytes: int = _default("retention.bytes")  # log.retention.bytes / retention.bytes (-1 = unlimited)
    index_interval_bytes: int = _default("index.interval.bytes")  # log.index.interval.bytes / index.interval.bytes
    flush_interval_messages: int = _default("flush.messages")  # fsync after this many messages since the last flush
    flush_interval_ms: int = _default("flush.ms")  # fsync when the last flush is this old at an append
    message_timestamp_type: str = _default("message.timestamp.type")  # CreateTime or LogAppendTime
    # CreateTime records more than these before / after the broker's clock are refused (storage.validator)
    message_timestamp_before_max_ms: int = _default("message.timestamp.before.max.ms")
    message_timestamp_after_max_ms: int = _default("message.timestamp.after.max.ms")
    max_message_bytes: int = _default("max.message.bytes")  # message.max.bytes / max.message.bytes
    file_delete_delay_ms: int = _default("file.delete.delay.ms")  # keep deleted segments' descriptors open this long
    cleanup_policy: str = _default("cleanup.policy")  # "delete", "compact" or "compact,delete"
    delete_retention_ms: int = _default("delete.retention.ms")  # how long tombstones survive
    min_cleanable_dirty_ratio: float = _default("min.cleanable.dirty.ratio")  # log.cleaner.min.cleanable.ratio
    min_compaction_lag_ms: int = _default("min.compaction.lag.ms")  # log.cleaner.min.compaction.lag.ms
    max_compaction_lag_ms: int = _default("max.compaction.lag.ms")  # log.cleaner.max.compaction.lag.ms
    compression_type: str = _default("compression.type")  # producer, or the codec batches are re-encoded to
    min_insync_replicas: int = _default("min.insync.replicas")  # replicas an acks=all append needs in sync

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy.split(",")

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy.split(",")

    @classmethod
    def from_topic_configs(cls, configs: Mapping[str, str]) -> LogConfig:
        """The defaults overridden by the topic-level configs that set a field; other keys are ignored.

        Raises ConfigError (a ValueError) naming the key and value of an invalid setting.
        """
        values = {}
        for key, value in configs.items():
            row = TOPIC_CONFIGS.get(key)
            if row is not None and row.field is not None:
                values[row.field] = parse_topic_config(key, value)
        internal_segment_bytes = parse_topic_config(INTERNAL_SEGMENT_BYTES, configs.get(INTERNAL_SEGMENT_BYTES, ""))
        if internal_segment_bytes is not None:  # Kafka's LogConfig.segmentSize(): the internal override wins
            values["segment_bytes"] = internal_segment_bytes
        return cls(**values)


class AppendInfo(NamedTuple):
    first_offset: int
    last_offset: int
    log_append_time: int  # -1 with CreateTime
    max_timestamp: int
    offset_of_max_timestamp: int  # last offset of the first batch carrying max_timestamp


class PartitionLog:
    """The segments of one partition directory; see the module docstring."""

    def __init__(
        self, directory: str | os.PathLike, config: LogConfig, *, now_ms: Callable[[], int] = wall_clock_ms,
        open_segments: OpenSegments | None = None, recover_tail: bool = True,
    ) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.config = config
        self._now_ms = now_ms
        self._segments: list[LogSegment] = []
        # this log's own LRU holds its inactive segments' files; a broker-wide one, when given, every segment's,
        # the active one's too (without it the active segment keeps its files)
        self._shared_lru = open_segments
        self._open_segments = OpenSegments(OPEN_INACTIVE_SEGMENTS, shared=open_segments)
        self._base_offsets: list[int] = []
        self._closing: list[tuple[int, LogSegment]] = []
        self._log_start_offset = 0
        self._unflushed_messages = 0
        self._last_flush_ms = now_ms()
        self._closed = False
        self.recovered_bytes_truncated = 0
        self._load(recover_tail)

    # -- loading ---------------------------------------------------------------

    def _load(self, recover_tail: bool) -> None:
        now = self._now_ms()
        for path in list(self.directory.iterdir()):
            if path.name.endswith(_LEFTOVER_SUFFIXES):
                path.unlink()
        swaps = sorted(int(m.group(1)) for path in self.directory.iterdir() if (m := _SWAP_LOG.match(path.name)))
        for base in swaps:
            self._complete_swap(base, now)
        bases = []
        for path in self.directory.iterdir():
            if path.name.endswith(SWAP_SUFFIX):
                path.unlink()  # an index renamed to .swap before its .log was: the swap never committed
            elif match := _SEGMENT_LOG.match(path.name):
                bases.append(int(match.group(1)))
        for path in self.directory.iterdir():
            match = _SEGMENT_INDEX.match(path.name)
            if match and int(match.group(1)) not in bases:
                path.unlink()
        bases.sort()
        segments = []
        for base in bases:
            if segments:
                sealed = segments[-1]
                problem = sealed.load()
                if problem is not None:
                    log.warning("%s: %s; rebuilding its indexes", sealed.log_path, problem)
                    self.recovered_bytes_truncated += sealed.recover()
                sealed.make_inactive(self._open_segments)
            segments.append(self._new_segment(base, now))
        if segments and (recover_tail or segments[-1].load() is not None):
            self.recovered_bytes_truncated += segments[-1].recover()
        checkpointed = self._read_log_start_offset()
        if not segments:
            segments = [self._new_segment(checkpointed, now)]
        self._set_segments(segments)
        self._log_start_offset = max(checkpointed, segments[0].base_offset)
        if self._log_start_offset > self.log_end_offset:
            # The tail holding the start offset was lost; never hand out offsets below it again.
            self._truncate_fully_and_start_at(self._log_start_offset)

    def _complete_swap(self, base: int, now: int) -> None:
        """Finish `replace_segments` after a crash: the `.swap` segment at `base` replaces what it overlaps."""
        swap = LogSegment(
            self.directory, base, index_interval_bytes=self.config.index_interval_bytes, now_ms=now, suffix=SWAP_SUFFIX
        )
        try:
            swap.recover()
            end = max(swap.next_offset, base + 1)
            for path in list(self.directory.iterdir()):
                match = _SEGMENT_FILE.match(path.name)
                if match and base <= int(match.group(1)) < end:
                    path.unlink()
            swap.rename_files(SWAP_SUFFIX, "")
        finally:
            swap.close()
        fsync_directory(self.directory)

    def _read_log_start_offset(self) -> int:
        path = self.directory / LOG_START_OFFSET_CHECKPOINT
        try:
            entries = read_checkpoint(path, _CHECKPOINT_VERSION)
            return int(entries[0]) if entries else 0
        except (ValueError, IndexError) as e:  # as Kafka's LogManager: reset to the first segment's base offset
            log.warning("%s: unreadable log start offset checkpoint (%s); using the first segment's base offset",
                        path, e)
            path.unlink(missing_ok=True)  # a missing checkpoint means the same; the next start is quiet
            return 0

    def _write_log_start_offset(self) -> None:
        write_checkpoint(self.directory / LOG_START_OFFSET_CHECKPOINT, _CHECKPOINT_VERSION, [str(self._log_start_offset)])

    def _new_segment(self, base_offset: int, now: int) -> LogSegment:
        segment = LogSegment(
            self.directory, base_offset, index_interval_bytes=self.config.index_interval_bytes, now_ms=now
        )
        if self._shared_lru is not None:
            segment.make_active(self._shared_lru)
        return segment

    def _set_segments(self, segments: list[LogSegment]) -> None:
        self._segments = segments
        self._base_offsets = [segment.base_offset for segment in segments]

    # -- state -----------------------------------------------------------------

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return tuple(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def size_in_bytes(self) -> int:
        return sum(segment.size for segment in self._segments)

    # -- append ----------------------------------------------------------------

    def append(self, records, batches: list[BatchHeader], *, leader_epoch: int) -> AppendInfo:
        """Assign offsets to `batches` (parse_batches output for `records`), stamp and store them.

        Returns the offsets assigned and the timestamps the producer should
        see. The records' rules (max.message.bytes among them) were checked by
        ``storage/validator.py`` on the way in. Raises KafkaStorageError when
        the write fails.
        """
        if not batches:
            raise CorruptRecordError("append of a record set without batches")
        config = self.config
        now = self._now_ms()
        self._close_expired(now)
        first_offset = self.log_end_offset
        last_offset = first_offset + sum(batch.last_offset_delta + 1 for batch in batches) - 1
        log_append_time = now if config.message_timestamp_type == "LogAppendTime" else None
        incoming_timestamp = log_append_time if log_append_time is not None else max(b.max_timestamp for b in batches)
        if self._should_roll(len(records), last_offset, incoming_timestamp, now):
            self._roll()
        data = bytearray(records)
        stamp_batches(data, batches, first_offset, leader_epoch, log_append_time)

        # Headers as they will sit in the active segment file, for its indexes.
        active = self.active_segment
        file_start = active.size
        stamped = []
        offset = first_offset
        max_timestamp = -1
        offset_of_max_timestamp = first_offset
        messages = 0
        for b in batches:
            if log_append_time is None:
                header = BatchHeader(file_start + b.position, offset, b.size, leader_epoch, *b[4:])
            else:
                header = BatchHeader(
                    file_start + b.position, offset, b.size, leader_epoch, b.magic, b.crc,
                    b.attributes | TIMESTAMP_TYPE_MASK, b.last_offset_delta, b.base_timestamp, log_append_time,
                    b.producer_id, b.producer_epoch, b.base_sequence, b.record_count,
                )  # fmt: skip
            if header.max_timestamp > max_timestamp:
                max_timestamp = header.max_timestamp
                offset_of_max_timestamp = offset + b.last_offset_delta
            stamped.append(header)
            offset += b.last_offset_delta + 1
            messages += b.record_count
        active.append(data, stamped)

        self._unflushed_messages += messages
        if (
            self._unflushed_messages >= config.flush_interval_messages
            or now - self._last_flush_ms >= config.flush_interval_ms
        ):
            self._flush(now)
        return AppendInfo(
            first_offset,
            last_offset,
            -1 if log_append_time is None else log_append_time,
            max_timestamp,
            offset_of_max_timestamp,
        )

    def append_as_follower(self, records, batches: list[BatchHeader]) -> AppendInfo:
        """Store a leader's batches as they are: offsets, leader epochs and timestamps already stamped.

        The follower's side of replication (Kafka's ``appendAsFollower``): no
        offset assignment and no stamping, so the follower's log is
        byte-identical to the leader's. Offsets must be increasing and start
        at or after the log end offset (a compacted leader may leave gaps).
        Raises CorruptRecordError otherwise and KafkaStorageError when the
        write fails.
        """
        if not batches:
            raise CorruptRecordError("append of a record set without batches")
        expected = self.log_end_offset
        for batch in batches:
            if batch.base_offset < expected:
                raise CorruptRecordError(
                    f"follower append to {self.directory.name}: batch at offset {batch.base_offset} is below "
                    f"the next expected offset {expected} (log end offset {self.log_end_offset})"
                )
            expected = batch.next_offset
        now = self._now_ms()
        self._close_expired(now)
        last_offset = batches[-1].last_offset
        incoming_timestamp = max(b.max_timestamp for b in batches)
        if self._should_roll(len(records), last_offset, incoming_timestamp, now):
            self._roll()
        active = self.active_segment
        file_start = active.size
        stamped = [b._replace(position=file_start + b.position) for b in batches]
        max_timestamp = -1
        offset_of_max_timestamp = batches[0].base_offset
        for header in stamped:
            if header.max_timestamp > max_timestamp:
                max_timestamp = header.max_timestamp
                offset_of_max_timestamp = header.last_offset
        active.append(records, stamped)
        self._unflushed_messages += sum(b.record_count for b in batches)
        if (
            self._unflushed_messages >= self.config.flush_interval_messages
            or now - self._last_flush_ms >= self.config.flush_interval_ms
        ):
            self._flush(now)
        return AppendInfo(batches[0].base_offset, last_offset, -1, max_timestamp, offset_of_max_timestamp)

    def _should_roll(self, incoming_bytes: int, last_offset: int, incoming_timestamp: int, now: int) -> bool:
        """Kafka's shouldRoll: full, too old, or relative offsets would overflow int32.

        Age is Kafka's `timeWaitedForRoll`: the incoming batches' max timestamp
        minus the first batch's, so a producer replaying old CreateTime data
        does not roll a segment per append; the clock is used only when the
        segment has no timestamp yet.
        """
        active = self.active_segment
        if active.size == 0:
            return False
        if active.first_batch_timestamp is not None and active.first_batch_timestamp >= 0:
            waited = incoming_timestamp - active.first_batch_timestamp
        else:
            waited = now - active.created_ms
        return (
            active.size + incoming_bytes > self.config.segment_bytes
            or waited > self.config.segment_ms
            or last_offset - active.base_offset > INT32_MAX
        )

    def _roll(self) -> LogSegment:
        active = self.active_segment
        active.seal()
        segment = self._new_segment(active.next_offset, self._now_ms())
        if segment.size:
            segment.close()
            raise KafkaStorageError(f"cannot roll: {segment.log_path} already exists and is not empty")
        fsync_directory(self.directory)
        active.make_inactive(self._open_segments)
        self._set_segments([*self._segments, segment])
        return segment

    def maybe_roll(self) -> bool:
        """Roll the active segment if it is non-empty and older than segment_ms; returns whether it rolled.

        "Older" here means both its first timestamp and its creation (or
        load) are more than segment_ms before the clock.

        Also closes descriptors of deleted segments whose delay passed and
        fsyncs when flush_interval_ms has elapsed, so a periodic background
        call keeps both going when no appends arrive.
        """
        now = self._now_ms()
        self._close_expired(now)
        if self._unflushed_messages and now - self._last_flush_ms >= self.config.flush_interval_ms:
            self._flush(now)
        active = self.active_segment
        # Both the data and the segment file must be old: data timestamps alone would roll a
        # segment of replayed historical records on every call.
        age = min(now - active.rolling_timestamp(), now - active.created_ms)
        if active.size and age > self.config.segment_ms:
            self._roll()
            return True
        return False

    # -- read ------------------------------------------------------------------

    def _check_offset(self, offset: int) -> None:
        if offset < self._log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is outside [{self._log_start_offset}, {self.log_end_offset}] "
                f"of {self.directory.name}"
            )

    def _segment_position(self, offset: int) -> int:
        """Index in the segment list of the segment that would hold `offset`."""
        return max(bisect_right(self._base_offsets, offset) - 1, 0)

    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_batch: bool = True,
        one_segment: bool = False,
    ) -> list[FileRegion]:
        """Regions of whole batches from the one containing `offset`.

        Stops before any batch reaching `max_offset` (exclusive; e.g. the high
        watermark) and before exceeding `max_bytes`, except that
        `min_one_batch` returns a first batch of any size. One region per
        segment touched; `one_segment` stops after the first segment that has
        data, as Kafka's ``LocalLog.read`` serves a fetch. Returns [] at the log
        end or at `max_offset`; raises OffsetOutOfRangeError below the log
        start or beyond the log end.
        """
        self._check_offset(offset)
        if offset == self.log_end_offset or (max_offset is not None and offset >= max_offset):
            return []
        regions: list[FileRegion] = []
        remaining = max_bytes
        for segment in self._segments[self._segment_position(offset) :]:
            if segment.next_offset <= offset:
                continue
            region, stopped = segment.read(
                offset, remaining, max_offset=max_offset, min_one_batch=min_one_batch and not regions
            )
            if region is not None:
                regions.append(region)
                remaining -= region.size
            if stopped or (one_segment and regions):
                break
            offset = segment.next_offset
        return regions

    def aborted_txns_upper_bound(self, region: FileRegion, max_bytes: int, max_offset: int, min_one_batch: bool) -> int:
        """Where Kafka's ``addAbortedTransactions`` stops looking for aborted transactions after a read of one
        segment's `region`: the offset of the first index entry at or after the end of the bytes Kafka would have
        read (it reads `max_bytes`, at least the first batch under `min_one_batch`, cut at the position of
        `max_offset`, so its last batch may be partial), else the next segment's base offset, else the log end."""
        for i, segment in enumerate(self._segments):
            if segment.file is region.file:
                break
        else:
            return self.log_end_offset
        limit = segment.size
        for header in segment.batches_from(max_offset):
            if header.base_offset >= max_offset:
                limit = header.position
            break
        wanted = max(max_bytes, next(segment._scan(region.position)).size) if min_one_batch else max_bytes
        bound = segment.offset_index.upper_bound_offset(region.position + min(limit - region.position, wanted))
        if bound is not None:
            return bound
        return self._segments[i + 1].base_offset if i + 1 < len(self._segments) else self.log_end_offset

    def read_bytes(
        self, offset: int, max_bytes: int, *, max_offset: int | None = None, min_one_batch: bool = True
    ) -> bytes:
        """`read`, with the regions' bytes copied out (for TLS listeners and tests)."""
        regions = self.read(offset, max_bytes, max_offset=max_offset, min_one_batch=min_one_batch)
        return b"".join(os.pread(region.file.fileno(), region.size, region.position) for region in regions)

    def iter_batches(self, start_offset: int | None = None) -> Iterator[BatchHeader]:
        """Headers from the batch containing `start_offset` (default: the log start) to the end.

        Offsets are absolute; positions are within each batch's segment file.
        Do not modify the log while iterating.
        """
        offset = self._log_start_offset if start_offset is None else start_offset
        for segment in self._segments[self._segment_position(offset) :]:
            yield from segment.batches_from(offset)

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after the log start with timestamp >= `timestamp_ms`.

        ListOffsets semantics, exact to the record: the matching batch is
        decoded. Returns None when no record qualifies.
        """
        for segment in self._segments:
            if segment.size and segment.max_timestamp >= timestamp_ms and segment.next_offset > self._log_start_offset:
                found = segment.find_offset_by_timestamp(timestamp_ms, self._log_start_offset)
                if found is not None:
                    return found
        return None

    def max_timestamp_and_offset(self) -> tuple[int, int] | None:
        """(timestamp, offset) of the first record with the largest timestamp (ListOffsets -3), None if empty."""
        best = None
        for segment in self._segments:
            if segment.size and segment.next_offset > self._log_start_offset:
                if best is None or segment.max_timestamp > best.max_timestamp:
                    best = segment
        if best is None:
            return None
        header = best.batch_with_last_offset(best.offset_of_max_timestamp)
        if header is not None:
            found = best.record_at_or_after(header, best.max_timestamp, self._log_start_offset)
            if found is not None:
                return found[1], found[0]
        return best.max_timestamp, best.offset_of_max_timestamp

    # -- aborted transactions --------------------------------------------------

    def append_aborted_txn(self, entry: AbortedTxn) -> None:
        """Record a transaction aborted by the marker at `entry.last_offset` in that segment's `.txnindex`."""
        self._segments[self._segment_position(entry.last_offset)].txn_index.append(entry)

    def collect_aborted_txns(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping `[fetch_offset, upper_bound)` (Kafka's `collectAbortedTransactions`).

        An ABORT marker is never below the transaction it ends, so the search
        starts at the segment holding `fetch_offset`.
        """
        found: list[AbortedTxn] = []
        for segment in self._segments[self._segment_position(fetch_offset) :]:
            entries, complete = segment.txn_index.collect(fetch_offset, upper_bound)
            found.extend(entries)
            if complete:
                break
        return found

    def truncate_txn_indexes(self, offset: int) -> None:
        """Drop aborted-transaction entries whose marker is at or after `offset` (before a replay re-adds them)."""
        for segment in self._segments:
            if segment.next_offset > offset or segment is self.active_segment:
                segment.txn_index.truncate_to(offset)

    # -- deletion --------------------------------------------------------------

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to `offset` and drop segments wholly below it.

        Returns the new log start offset. Raises OffsetOutOfRangeError when
        `offset` is beyond the log end offset.
        """
        if offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"cannot delete records before {offset}: beyond log end offset {self.log_end_offset} "
                f"of {self.directory.name}"
            )
        if offset > self._log_start_offset:
            self._log_start_offset = offset
            self._delete_prefix(lambda segment: segment.next_offset <= offset, include_active=False)
            self._write_log_start_offset()
        return self._log_start_offset

    def enforce_retention(self, *, high_watermark: int | None = None) -> int:
        """Delete the oldest segments that break retention_ms or retention_bytes; returns how many.

        A segment is only deletable when all of it is below `high_watermark`
        (when given). Time and size limits apply only with the `delete`
        cleanup policy. An active segment that is itself expired and non-empty is
        rolled first so it can go too, as Kafka does.
        """
        now = self._now_ms()
        config = self.config
        deleted = 0
        if config.delete and config.retention_ms >= 0:
            deleted += self._delete_prefix(
                lambda segment: now - segment.largest_timestamp() > config.retention_ms,
                include_active=True,
                high_watermark=high_watermark,
            )
        if config.delete and config.retention_bytes >= 0:
            excess = self.size_in_bytes - config.retention_bytes

            def over_size(segment: LogSegment) -> bool:
                nonlocal excess
                if excess - segment.size >= 0:
                    excess -= segment.size
                    return True
                return False

            deleted += self._delete_prefix(over_size, include_active=True, high_watermark=high_watermark)
        deleted += self._delete_prefix(
            lambda segment: segment.next_offset <= self._log_start_offset, include_active=False
        )
        self._close_expired(now)
        return deleted

    def _delete_prefix(
        self,
        deletable: Callable[[LogSegment], bool],
        *,
        include_active: bool,
        high_watermark: int | None = None,
    ) -> int:
        """Delete the longest run of oldest segments satisfying `deletable`; returns how many."""
        count = 0
        for segment in self._segments:
            is_active = segment is self.active_segment
            if (is_active and (not include_active or segment.size == 0)) or (
                high_watermark is not None and segment.next_offset > high_watermark
            ):
                break
            if not deletable(segment):
                break
            count += 1
        if not count:
            return 0
        if count == len(self._segments):
            self._roll()
        doomed = self._segments[:count]
        self._set_segments(self._segments[count:])
        self._dispose(doomed)
        new_start = max(self._log_start_offset, self._segments[0].base_offset)
        if new_start != self._log_start_offset:
            self._log_start_offset = new_start
            self._write_log_start_offset()
        return count

    def _dispose(self, segments: list[LogSegment]) -> None:
        """Unlink deleted segments now; close their descriptors after file_delete_delay_ms."""
        now = self._now_ms()
        for segment in segments:
            self._open_segments.forget(segment)
            segment.close_indexes()
            segment.unlink()
            self._closing.append((now + self.config.file_delete_delay_ms, segment))
        fsync_directory(self.directory)
        self._close_expired(now)

    def _close_expired(self, now: int) -> None:
        if not self._closing:
            return
        keep = []
        for deadline, segment in self._closing:
            if deadline <= now:
                segment.release_files()
            else:
                keep.append((deadline, segment))
        self._closing = keep

    # -- compaction ------------------------------------------------------------

    def replace_segments(self, old: list[LogSegment], new: LogSegment) -> None:
        """Put `new` in place of `old`, a run of sealed segments starting at `new.base_offset`.

        `new` is a sealed segment written under `.cleaned` names holding a
        subset of `old`'s batches at their original offsets. Crash-safe in
        Kafka's order (see the module docstring); old descriptors stay open
        for file_delete_delay_ms like other deleted segments. Raises
        KafkaStorageError when `old` is not such a run of the current segments.
        """
        try:
            start = next(i for i, segment in enumerate(self._segments) if segment is old[0])
        except StopIteration:
            raise KafkaStorageError(f"{old[0]!r} is no longer a segment of {self.directory.name}") from None
        end = start + len(old)
        if (
            end >= len(self._segments)
            or any(a is not b for a, b in zip(self._segments[start:end], old))
            or new.base_offset != old[0].base_offset
            or new.next_offset > old[-1].next_offset
        ):
            raise KafkaStorageError(f"cannot replace {old!r} of {self.directory.name} with {new!r}")
        for segment in old:  # the cleaner keeps markers and transactional batches, so their entries stay true
            for entry in segment.txn_index.entries:
                new.txn_index.append(entry)
        new.rename_files(CLEANED_SUFFIX, SWAP_SUFFIX)
        fsync_directory(self.directory)
        self._set_segments([*self._segments[:start], new, *self._segments[end:]])
        self._dispose(old)
        new.rename_files(SWAP_SUFFIX, "")
        fsync_directory(self.directory)
        new.make_inactive(self._open_segments)

    # -- truncation (replication) ----------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Drop every batch containing an offset >= `offset`; no-op when `offset` >= the log end.

        The batch containing `offset` is dropped whole, so the new log end is
        the first offset of that batch. Truncating below the first segment
        empties the log and restarts it at `offset`, like Kafka.
        """
        if offset >= self.log_end_offset:
            return
        if offset < self._segments[0].base_offset:
            self._truncate_fully_and_start_at(offset)
            return
        keep = self._segment_position(offset) + 1
        doomed = self._segments[keep:]
        self._set_segments(self._segments[:keep])
        self._dispose(doomed)
        self.active_segment.make_active(self._shared_lru)
        self.active_segment.truncate_to(offset)
        if offset < self._log_start_offset:
            self._log_start_offset = offset
            self._write_log_start_offset()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop every segment and restart the log empty at `offset` (a follower behind the leader's log start)."""
        self._truncate_fully_and_start_at(offset)

    def _truncate_fully_and_start_at(self, offset: int) -> None:
        doomed = self._segments
        self._set_segments([])
        self._dispose(doomed)
        self._set_segments([self._new_segment(offset, self._now_ms())])
        fsync_directory(self.directory)
        self._log_start_offset = offset
        self._write_log_start_offset()

    # -- lifecycle -------------------------------------------------------------

    def _flush(self, now: int) -> None:
        self.active_segment.flush()
        self._unflushed_messages = 0
        self._last_flush_ms = now

    def flush(self) -> None:
        """fsync the active segment and its indexes (sealed segments were fsynced when rolled)."""
        self._flush(self._now_ms())

    def close(self) -> None:
        """Flush and close every file; reopening recovers only the active segment."""
        if self._closed:
            return
        self._closed = True
        self.active_segment.seal()
        for segment in self._segments:
            segment.close()
        for _, segment in self._closing:
            segment.close()
        self._closing = []

    def delete(self) -> None:
        """Close and remove the whole partition directory (topic deletion)."""
        self.close()
        shutil.rmtree(self.directory, ignore_errors=True)
