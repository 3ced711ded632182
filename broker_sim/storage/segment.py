"""One log segment: `<base offset:020d>.log` plus its `.index`, `.timeindex` and `.txnindex`.

Theory of operation: a segment holds the batches for a contiguous range of
offsets starting at its base offset, stored exactly as they will be served.
Appends are one unbuffered `write` per produce call, so once `append` returns
the bytes are in the page cache and survive the death of the process.

Finding an offset: the sparse offset index gives a batch boundary at or before
it, then batch headers are scanned forward with `os.pread` of 64 KiB chunks
(only the 61-byte headers are decoded; large batches are skipped by their
length). Reads return a `FileRegion` (file, position, size) of whole batches so
the network layer can `os.sendfile` them.

Index maintenance copies Kafka's `LogSegment.append`: for each batch, if more
than `index_interval_bytes` were appended since the last entry, the batch gets
an offset-index entry (its last offset -> its position) and the time index
gets (largest timestamp so far, last offset of the batch that carried it) when
that timestamp grew. When a segment stops being active (`seal`) the final
(max timestamp, offset) is appended to the time index, so a sealed segment's
largest timestamp is the last time-index entry and reopening it needs only a
short scan from the last offset-index entry to the end.

`recover()` is the single repair path: it rescans the whole `.log`, checking
each batch's framing, CRC32C, record count and offset order, truncates the
file at the first torn or corrupt batch and rebuilds both indexes. A batch
may hold fewer records than offsets: the cleaner keeps a compacted batch's
base offset and lastOffsetDelta, as Kafka does, so its last sequence number
survives; it may even hold none (recordsCount 0, the 61-byte header the
cleaner keeps for an idempotent producer's fully superseded last batch).

The `.txnindex` (aborted transactions whose ABORT marker is in this segment,
see `txn_index.py`) exists only once a transaction was aborted here; it is
written by the partition, not by `append`, and rebuilt by the partition's
producer-state replay rather than by `recover()`.

The cleaner writes a segment under temporary names (`<base>.log.cleaned`,
...) by passing `suffix`, and `rename_files` moves it to `.swap` and finally
to the plain names.

Files of segments that are not active are held only while used, like Kafka's
lazy indexes: `make_inactive(open_segments)` hands the segment to its log's
`OpenSegments`, a small LRU of recently read segments; an evicted segment
`release_files()`: its index columns are dropped and its `.log` file object is
let go. The next read reopens it (the `file` property). Letting go is not
closing: a `FileRegion` handed to the network holds the same `SegmentFile`, and
the descriptor closes when its last holder drops it, so a pending `sendfile`
never finds it closed under it.

Time-based rolling (decided by PartitionLog) measures age from Kafka's
`rollingBasedTimestamp`: the first batch's max timestamp when the segment has
one, else `created_ms`, the clock when the segment object was created or loaded.
"""

from __future__ import annotations

import io
import os
from collections import OrderedDict
from pathlib import Path
from typing import Iterator, NamedTuple

from kafka.errors import (
    CorruptRecordError,
    InvalidRecordError,
    KafkaStorageError,
    UnsupportedForMessageFormatError,
)

from broker_sim.storage.batch import HEADER_SIZE, INT32_MAX, BatchHeader, decode_header, verify_batch
from broker_sim.storage.index import OffsetIndex, TimeIndex
from broker_sim.storage.txn_index import TransactionIndex

# Header scans read this much per pread: a few index intervals of small batches.
_HEADER_SCAN_CHUNK = 64 * 1024
# Recovery reads whole batches to check their CRC; big reads keep the syscall count low.
_RECOVERY_SCAN_CHUNK = 4 * 1024 * 1024

# Descriptors an open segment may hold: its `.log`, and its `.index` and `.timeindex` while appended to
# (the `.txnindex` is opened per write).
FILES_PER_SEGMENT = 3

_BAD_BATCH = (CorruptRecordError, InvalidRecordError, UnsupportedForMessageFormatError)


def _renamed(path: Path, old_suffix: str, new_suffix: str) -> Path:
    if not path.name.endswith(old_suffix):
        raise KafkaStorageError(f"{path} does not end with {old_suffix!r}")
    target = path.with_name(path.name[: len(path.name) - len(old_suffix)] + new_suffix)
    os.replace(path, target)
    return target


class SegmentFile(io.FileIO):
    """A `.log` opened for reading and appending, shared by its segment and the regions read from it.

    Closed explicitly by `LogSegment.close()`, else when the last holder lets it go.
    """

    def __init__(self, path: Path, *, create: bool) -> None:
        super().__init__(path, "ab+", opener=None if create else _open_existing)

    def __del__(self) -> None:
        self.close()


def _open_existing(path: str, flags: int) -> int:
    # A released segment reopens only the file it had: recreating a vanished one would hide the loss.
    return os.open(path, flags & ~os.O_CREAT)


class OpenSegments:
    """The segments whose files are open: at most `capacity`, the most recently used.

    Either one log's own LRU of its inactive segments, or one LRU `shared` by every log of a broker, active
    segments included (`PartitionLog(open_segments=...)`), so that the broker's storage descriptors are
    bounded by `capacity * FILES_PER_SEGMENT` however many partitions it hosts. A log's own LRU given a
    `shared` one passes every use and forget on to it: a segment is released by whichever evicts it first.
    `used` is called on every access to a managed segment's file; going over the capacity releases the least
    recently used one (releasing twice is harmless). Single-threaded, like the log.
    """

    def __init__(self, capacity: int, shared: OpenSegments | None = None) -> None:
        self.capacity = capacity
        self.shared = shared
        self._lru: OrderedDict[int, LogSegment] = OrderedDict()

    def __len__(self) -> int:
        return len(self._lru)

    def used(self, segment: LogSegment) -> None:
        if self.shared is not None:
            self.shared.used(segment)
        key = id(segment)
        if key in self._lru:
            self._lru.move_to_end(key)
            return
        self._lru[key] = segment
        while len(self._lru) > self.capacity:
            _, evicted = self._lru.popitem(last=False)
            evicted.release_files()

    def forget(self, segment: LogSegment) -> None:
        self._lru.pop(id(segment), None)
        if self.shared is not None:
            self.shared.forget(segment)


class FileRegion(NamedTuple):
    """Whole batches at `position`..`position + size` of a segment's `.log` (for os.sendfile)."""

    file: SegmentFile
    position: int
    size: int


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


class LogSegment:
    """A `.log` file and its two indexes; owned and serialized by its PartitionLog."""

    def __init__(
        self, directory: Path, base_offset: int, *, index_interval_bytes: int, now_ms: int, suffix: str = ""
    ) -> None:
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.created_ms = now_ms
        self.log_path = directory / segment_file_name(base_offset, ".log" + suffix)
        index_path = directory / segment_file_name(base_offset, ".index" + suffix)
        time_index_path = directory / segment_file_name(base_offset, ".timeindex" + suffix)
        self.indexes_missing = not (index_path.exists() and time_index_path.exists())
        # Unbuffered append mode: every write goes straight to the kernel.
        self._file: SegmentFile | None = SegmentFile(self.log_path, create=True)
        self.open_segments: OpenSegments | None = None  # set while inactive: its files are then held on demand
        self._unlinked = False
        self.size = os.fstat(self._file.fileno()).st_size
        self.offset_index = OffsetIndex(index_path, base_offset)
        self.time_index = TimeIndex(time_index_path, base_offset)
        self.txn_index = TransactionIndex(directory / segment_file_name(base_offset, ".txnindex" + suffix))
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset
        self.first_batch_timestamp: int | None = None
        self._bytes_since_index_entry = 0

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path.name}, size={self.size}, next_offset={self.next_offset})"

    # -- files held on demand --------------------------------------------------

    @property
    def file(self) -> SegmentFile:
        """The `.log` file, reopened if it was released; raises KafkaStorageError when that fails."""
        file = self._file
        if file is None:
            if self._unlinked:
                raise KafkaStorageError(f"{self.log_path} was deleted")
            try:
                file = self._file = SegmentFile(self.log_path, create=False)
            except OSError as e:
                raise KafkaStorageError(f"{self.log_path}: cannot reopen: {e}") from e
        if self.open_segments is not None:
            self.open_segments.used(self)
        return file

    @property
    def files_open(self) -> bool:
        return self._file is not None

    def make_inactive(self, open_segments: OpenSegments) -> None:
        """The segment stops taking appends: from now on its files are held only while recently read."""
        self.open_segments = open_segments
        self.offset_index.close()
        self.time_index.close()
        if self._file is not None:
            open_segments.used(self)

    def make_active(self, shared: OpenSegments | None = None) -> None:
        """The segment takes appends (it is new, or truncation made it the last one): hold its files, or, with a
        broker-wide `shared` LRU, keep them only while there like every other segment's (appends reopen them)."""
        if self.open_segments is not None:
            self.open_segments.forget(self)
        self.open_segments = shared
        self.file  # noqa: B018 - reopened now, so appends never find it released

    def release_files(self) -> None:
        """Let the `.log` file go (regions still holding it keep it open) and drop the index columns."""
        self._file = None
        self.offset_index.release()
        self.time_index.release()

    # -- loading and recovery -------------------------------------------------

    def load(self) -> str | None:
        """Adopt a sealed segment's state from its indexes; returns why recovery is needed, or None.

        Scans only from the last offset-index entry to the end of the file.
        """
        if self.indexes_missing:
            return "index files missing"
        problem = self.offset_index.problem or self.time_index.problem
        if problem:
            return problem
        last_offset, position = self.offset_index.last_entry()
        if position > 0 or len(self.offset_index):
            if position >= self.size:
                return f"index points at byte {position} past the end ({self.size})"
            header = self._header_at(position)
            if header is None or header.last_offset != last_offset:
                return f"index entry ({last_offset}, {position}) does not match a batch"
        self.max_timestamp, self.offset_of_max_timestamp = self.time_index.last_entry()
        time_offset = self.offset_of_max_timestamp
        try:
            self._adopt_tail(position)
        except _BAD_BATCH as e:
            return str(e)
        if time_offset >= max(self.next_offset, self.base_offset + 1):
            return f"time index offset {time_offset} beyond the segment end {self.next_offset}"
        return None

    def _adopt_tail(self, position: int) -> None:
        """Update next offset, max timestamp and index spacing from the batches at `position`.. end."""
        self.next_offset = self.base_offset
        for header in self._scan(position):
            self.next_offset = header.next_offset
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp = header.max_timestamp
                self.offset_of_max_timestamp = header.last_offset
        self._bytes_since_index_entry = self.size - position
        first = self._header_at(0) if self.size else None
        self.first_batch_timestamp = first.max_timestamp if first else None

    def recover(self) -> int:
        """Rescan the whole `.log`, truncate at the first bad batch, rebuild the indexes.

        Returns the number of bytes truncated. Batch sizes are deliberately not
        bounded by max.message.bytes (Kafka's recovery does not either): lowering
        that config must not turn valid data into "corruption".
        """
        self.offset_index.reset()
        self.time_index.reset()
        self.indexes_missing = False
        self.next_offset = self.base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = self.base_offset
        self.first_batch_timestamp = None
        self._bytes_since_index_entry = 0
        valid_end = 0
        headers = []
        try:
            for header in self._scan(0, verify=True):
                if header.base_offset < self.next_offset:
                    raise CorruptRecordError(
                        f"batch at byte {header.position}: base offset {header.base_offset} "
                        f"below the expected {self.next_offset}"
                    )
                if header.last_offset - self.base_offset > INT32_MAX:
                    raise CorruptRecordError(
                        f"batch at byte {header.position}: offset {header.last_offset} does not fit "
                        f"segment {self.base_offset}"
                    )
                headers.append(header)
                self.next_offset = header.next_offset
                valid_end = header.position + header.size
                if len(headers) >= 1024:
                    self._track(headers)
                    headers = []
        except _BAD_BATCH:
            pass
        self._track(headers)
        truncated = self.size - valid_end
        if truncated:
            os.ftruncate(self.file.fileno(), valid_end)
            self.size = valid_end
        self._append_final_time_entry()
        return truncated

    # -- appending -------------------------------------------------------------

    def append(self, data, headers: list[BatchHeader]) -> None:
        """Write `data` (stamped batches) at the end of the file in one write and index it.

        `headers` describe the batches in `data` as they will be in the file:
        positions from the current end of the file on, offsets assigned.
        """
        self._write(data)
        self._track(headers)

    def _write(self, data) -> None:
        view = memoryview(data)
        fd = self.file.fileno()
        written = 0
        try:
            while written < len(view):
                written += os.write(fd, view[written:])
        except OSError as e:
            # A partial write would leave a torn batch; cut it off so the file stays valid.
            os.ftruncate(fd, self.size)
            raise KafkaStorageError(f"{self.log_path}: write failed: {e}") from e
        self.size += written

    def _track(self, headers: list[BatchHeader]) -> None:
        """Fold appended batches (file positions) into offsets, timestamps and the indexes."""
        if not headers:
            return
        if self.first_batch_timestamp is None:
            self.first_batch_timestamp = headers[0].max_timestamp
        offset_entries = []
        time_entries = []
        last_time_entry = self.time_index.last_entry()[0] if len(self.time_index) else None
        for header in headers:
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp = header.max_timestamp
                self.offset_of_max_timestamp = header.last_offset
            if self._bytes_since_index_entry > self.index_interval_bytes:
                offset_entries.append((header.last_offset, header.position))
                if last_time_entry is None or self.max_timestamp > last_time_entry:
                    time_entries.append((self.max_timestamp, self.offset_of_max_timestamp))
                    last_time_entry = self.max_timestamp
                self._bytes_since_index_entry = 0
            self._bytes_since_index_entry += header.size
        self.next_offset = headers[-1].next_offset
        self.offset_index.append_entries(offset_entries)
        self.time_index.append_entries(time_entries)

    def _append_final_time_entry(self) -> None:
        if self.size and self.max_timestamp >= 0 and self.time_index.accepts(self.max_timestamp):
            self.time_index.append_entries([(self.max_timestamp, self.offset_of_max_timestamp)])

    def seal(self) -> None:
        """The segment stops being active: record its max timestamp and make it durable."""
        self._append_final_time_entry()
        self.flush()

    # -- reading ---------------------------------------------------------------

    def _header_at(self, position: int) -> BatchHeader | None:
        data = os.pread(self.file.fileno(), HEADER_SIZE, position)
        try:
            return decode_header(data, 0, position, self.size - position)
        except _BAD_BATCH:
            return None

    def _scan(self, position: int, *, verify: bool = False) -> Iterator[BatchHeader]:
        """Headers of the batches from `position` to the end; raises on a torn or corrupt batch."""
        file = self.file  # held while the generator lives: an eviction meanwhile must not close it
        fd = file.fileno()
        end = self.size
        chunk = _RECOVERY_SCAN_CHUNK if verify else _HEADER_SCAN_CHUNK
        buf = b""
        buf_start = position
        while position < end:
            offset = position - buf_start
            if offset + HEADER_SIZE > len(buf):
                buf = os.pread(fd, chunk, position)
                buf_start = position
                offset = 0
            header = decode_header(buf, offset, position, end - position)
            if verify:
                if offset + header.size > len(buf):
                    buf = os.pread(fd, max(chunk, header.size), position)
                    buf_start = position
                    offset = 0
                verify_batch(buf, offset, header, stored=True)
            yield header
            position += header.size

    def batches_from(self, start_offset: int) -> Iterator[BatchHeader]:
        """Headers from the batch containing `start_offset` (or the next one) to the end."""
        _, position = self.offset_index.lookup(start_offset)
        try:
            for header in self._scan(position):
                if header.last_offset >= start_offset:
                    yield header
        except _BAD_BATCH as e:
            raise KafkaStorageError(f"{self.log_path}: {e}") from e

    def read(
        self, start_offset: int, max_bytes: int, *, max_offset: int | None = None, min_one_batch: bool = True
    ) -> tuple[FileRegion | None, bool]:
        """Whole batches from the one containing `start_offset`.

        Stops before a batch ending at or beyond `max_offset` and before
        exceeding `max_bytes` — unless `min_one_batch`, which admits a first
        batch of any size. Returns (region or None, whether a limit stopped the
        read before the end of the segment).
        """
        start = None
        size = 0
        stopped = False
        for header in self.batches_from(start_offset):
            if start is None:
                start = header.position
            if max_offset is not None and header.next_offset > max_offset:
                stopped = True
                break
            if size + header.size > max_bytes and not (size == 0 and min_one_batch):
                stopped = True
                break
            size += header.size
        if not size:
            return None, stopped
        return FileRegion(self.file, start, size), stopped

    def find_offset_by_timestamp(self, timestamp: int, start_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after `start_offset` with timestamp >= `timestamp`."""
        _, indexed_offset = self.time_index.lookup(timestamp)
        for header in self.batches_from(max(indexed_offset, start_offset)):
            if header.max_timestamp < timestamp or header.last_offset < start_offset:
                continue
            found = self.record_at_or_after(header, timestamp, start_offset)
            if found is not None:
                return found
        return None

    def record_at_or_after(self, header: BatchHeader, timestamp: int, start_offset: int) -> tuple[int, int] | None:
        """Decode one batch (as Kafka reads it: ``validator.read_batch``, the one definition of a record): (offset,
        timestamp) of its first record >= both bounds, or None."""
        from broker_sim.storage.validator import read_batch

        data = os.pread(self.file.fileno(), header.size, header.position)
        for record in read_batch(data):
            if record.offset >= start_offset and record.timestamp >= timestamp:
                return record.offset, record.timestamp
        return None

    def batch_with_last_offset(self, last_offset: int) -> BatchHeader | None:
        for header in self.batches_from(last_offset):
            return header if header.last_offset == last_offset else None
        return None

    def largest_timestamp(self) -> int:
        """Kafka's `largestTimestamp`: max record timestamp, or the file's mtime when there is none."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return int(os.stat(self.log_path).st_mtime * 1000)

    def rolling_timestamp(self) -> int:
        return self.first_batch_timestamp if self.first_batch_timestamp is not None else self.created_ms

    # -- truncation and lifecycle ---------------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Drop batches whose last offset >= `offset` (the batch containing it goes too); returns bytes removed."""
        position = self.size
        for header in self.batches_from(offset):
            position = header.position
            break
        removed = self.size - position
        if not removed:
            return 0
        os.ftruncate(self.file.fileno(), position)
        self.size = position
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self.max_timestamp, self.offset_of_max_timestamp = self.time_index.last_entry()
        self.first_batch_timestamp = None
        self._adopt_tail(self.offset_index.last_entry()[1])
        return removed

    def flush(self) -> None:
        os.fsync(self.file.fileno())
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def close_indexes(self) -> None:
        self.offset_index.close()
        self.time_index.close()

    def close(self) -> None:
        if self.open_segments is not None:
            self.open_segments.forget(self)
        self.close_indexes()
        if self._file is not None:
            self._file.close()
            self._file = None

    def rename_files(self, old_suffix: str, new_suffix: str) -> None:
        """Kafka's `changeFileSuffixes`: rename the three files; open descriptors stay valid.

        The `.log` goes last: its name alone decides how a restart treats the
        segment (see `PartitionLog`), indexes are rebuilt whenever in doubt.
        """
        for index in (self.offset_index, self.time_index):
            index.path = _renamed(index.path, old_suffix, new_suffix)
        txn_path = self.txn_index.path
        self.txn_index.rename(txn_path.with_name(txn_path.name[: len(txn_path.name) - len(old_suffix)] + new_suffix))
        self.log_path = _renamed(self.log_path, old_suffix, new_suffix)

    def unlink(self) -> None:
        """Remove the files; an open `.log` descriptor stays usable until `close()` or `release_files()`."""
        self._unlinked = True
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()
        self.log_path.unlink(missing_ok=True)
