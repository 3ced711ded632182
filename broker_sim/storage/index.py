"""Sparse offset and time indexes of one log segment, in Kafka's file formats.

Theory of operation: a segment's `.index` maps offsets to byte positions in
its `.log`, and its `.timeindex` maps timestamps to offsets. Both are sparse —
the segment adds an entry after every `index.interval.bytes` of appended
batches — so a lookup lands on a nearby batch boundary and the segment scans
batch headers forward from there.

The files hold Kafka's big-endian entries with offsets relative to the
segment's base offset. They are append-only (no preallocation, so there is no
zero-filled tail to trim) and mirrored in memory by `array('q')` columns that
`bisect` searches; the public API speaks absolute offsets. Entries are
appended in one write per produce call.

Indexes are derived data. Loading never raises: a malformed file (length not
a multiple of the entry size, entries out of order) is reported through
`problem`, and the owning segment rebuilds the index from its `.log`.

Files and memory are taken lazily, like Kafka's `LazyIndex`: the columns are
read from the file on first use and the file is opened for writing only when
an entry is appended or the index truncated. `release()` drops both (the file
always holds every entry, each append being written at once), so a segment
that is no longer active costs neither a descriptor nor memory until it is
read again.
"""

from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_left, bisect_right
from pathlib import Path

OFFSET_ENTRY = struct.Struct(
    ">"
    "i"  # relative offset: the indexed offset minus the segment's base offset
    "i"  # physical position: byte position in the .log of the batch holding that offset
)
TIME_ENTRY = struct.Struct(
    ">"
    "q"  # timestamp: largest timestamp appended to the segment so far
    "i"  # relative offset: offset (minus base offset) of the batch carrying that timestamp
)


class _SparseIndex:
    """Two parallel int64 columns backed by an append-only file of fixed-size entries."""

    _entry: struct.Struct

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._columns: tuple[array, array] | None = None
        self.problem: str | None = None
        self._file = None
        self._load()

    @property
    def _keys(self) -> array:
        return (self._columns or self._load())[0]

    @property
    def _values(self) -> array:
        return (self._columns or self._load())[1]

    def _load(self) -> tuple[array, array]:
        keys, values = self._columns = array("q"), array("q")
        self.problem = None
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return self._columns
        if len(data) % self._entry.size:
            self.problem = f"{self.path.name}: length {len(data)} is not a multiple of {self._entry.size}"
            return self._columns
        for raw in self._entry.iter_unpack(data):
            key, value = self._from_file(raw)
            problem = self._out_of_order(key, value)
            if problem:
                self.problem = f"{self.path.name}: entry {len(keys)}: {problem}"
                del keys[:], values[:]
                return self._columns
            keys.append(key)
            values.append(value)
        return self._columns

    def _writer(self):
        if self._file is None:
            self._file = open(self.path, "ab", buffering=0)  # noqa: SIM115 - owned until release()/close()
        return self._file

    def release(self) -> None:
        """Close the file and forget the columns; the next use reads them back from the file."""
        self.close()
        self._columns = None

    def _from_file(self, raw: tuple[int, int]) -> tuple[int, int]:
        raise NotImplementedError

    def _to_file(self, key: int, value: int) -> bytes:
        raise NotImplementedError

    def _out_of_order(self, key: int, value: int) -> str | None:
        raise NotImplementedError

    def __len__(self) -> int:
        return len(self._keys)

    def entries(self) -> list[tuple[int, int]]:
        """All entries as absolute (key, value) pairs."""
        return list(zip(self._keys, self._values))

    def append_entries(self, entries: list[tuple[int, int]]) -> None:
        """Append absolute (key, value) entries with a single write; caller guarantees the order."""
        if not entries:
            return
        data = b"".join(self._to_file(key, value) for key, value in entries)
        keys, values = self._keys, self._values
        for key, value in entries:
            keys.append(key)
            values.append(value)
        self._writer().write(data)

    def _truncate_entries(self, count: int) -> None:
        del self._keys[count:]
        del self._values[count:]
        os.ftruncate(self._writer().fileno(), count * self._entry.size)

    def reset(self) -> None:
        """Drop every entry (before a rebuild)."""
        self._truncate_entries(0)
        self.problem = None

    def flush(self) -> None:
        """fsync the file, creating it when no entry was written yet (a sealed segment has both indexes)."""
        os.fsync(self._writer().fileno())

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)


class OffsetIndex(_SparseIndex):
    """`.index`: offset -> position. Kafka indexes each chosen batch by its last offset."""

    _entry = OFFSET_ENTRY

    def _from_file(self, raw: tuple[int, int]) -> tuple[int, int]:
        return raw[0] + self.base_offset, raw[1]

    def _to_file(self, key: int, value: int) -> bytes:
        return OFFSET_ENTRY.pack(key - self.base_offset, value)

    def _out_of_order(self, key: int, value: int) -> str | None:
        if key < self.base_offset or value < 0:
            return f"negative relative offset or position ({key - self.base_offset}, {value})"
        if self._keys and (key <= self._keys[-1] or value <= self._values[-1]):
            return "offsets and positions must increase"
        return None

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the largest entry with offset <= `offset`, else (base_offset, 0)."""
        i = bisect_right(self._keys, offset)
        if i == 0:
            return self.base_offset, 0
        return self._keys[i - 1], self._values[i - 1]

    def last_entry(self) -> tuple[int, int]:
        if not self._keys:
            return self.base_offset, 0
        return self._keys[-1], self._values[-1]

    def upper_bound_offset(self, position: int) -> int | None:
        """Kafka's ``fetchUpperBoundOffset``: the offset of the first entry at or after `position`, else None."""
        i = bisect_left(self._values, position)
        return self._keys[i] if i < len(self._keys) else None

    def truncate_to(self, offset: int) -> None:
        """Remove entries for offsets >= `offset`."""
        self._truncate_entries(bisect_right(self._keys, offset - 1))


class TimeIndex(_SparseIndex):
    """`.timeindex`: max timestamp so far -> offset of the batch that carried it."""

    _entry = TIME_ENTRY

    def _from_file(self, raw: tuple[int, int]) -> tuple[int, int]:
        return raw[0], raw[1] + self.base_offset

    def _to_file(self, key: int, value: int) -> bytes:
        return TIME_ENTRY.pack(key, value - self.base_offset)

    def _out_of_order(self, key: int, value: int) -> str | None:
        if value < self.base_offset:
            return f"negative relative offset {value - self.base_offset}"
        if self._keys and (key <= self._keys[-1] or value < self._values[-1]):
            return "timestamps must increase and offsets must not decrease"
        return None

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the largest entry with timestamp <= `timestamp`, else (-1, base_offset).

        Every record before that offset has a smaller-or-equal timestamp, so a
        search for the first record >= `timestamp` can start at that offset.
        """
        i = bisect_right(self._keys, timestamp)
        if i == 0:
            return -1, self.base_offset
        return self._keys[i - 1], self._values[i - 1]

    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the last entry — the segment's max timestamp once it is sealed."""
        if not self._keys:
            return -1, self.base_offset
        return self._keys[-1], self._values[-1]

    def accepts(self, timestamp: int) -> bool:
        """Whether an entry with `timestamp` would extend the index (it must exceed the last one)."""
        return not self._keys or timestamp > self._keys[-1]

    def truncate_to(self, offset: int) -> None:
        """Remove entries for offsets >= `offset`."""
        count = len(self._values)
        while count and self._values[count - 1] >= offset:
            count -= 1
        self._truncate_entries(count)
