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
"""

from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_right
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
        self._keys = array("q")
        self._values = array("q")
        self.problem: str | None = None
        self._file = open(path, "ab", buffering=0)  # noqa: SIM115 - owned until close()
        self._load()

    def _load(self) -> None:
        data = self.path.read_bytes()
        if len(data) % self._entry.size:
            self.problem = f"{self.path.name}: length {len(data)} is not a multiple of {self._entry.size}"
            return
        for raw in self._entry.iter_unpack(data):
            key, value = self._from_file(raw)
            problem = self._out_of_order(key, value)
            if problem:
                self.problem = f"{self.path.name}: entry {len(self._keys)}: {problem}"
                self._keys = array("q")
                self._values = array("q")
                return
            self._keys.append(key)
            self._values.append(value)

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
        for key, value in entries:
            self._keys.append(key)
            self._values.append(value)
        self._file.write(data)

    def _truncate_entries(self, count: int) -> None:
        del self._keys[count:]
        del self._values[count:]
        os.ftruncate(self._file.fileno(), count * self._entry.size)

    def reset(self) -> None:
        """Drop every entry (before a rebuild)."""
        self._truncate_entries(0)
        self.problem = None

    def flush(self) -> None:
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()

    def delete(self) -> None:
        self._file.close()
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
