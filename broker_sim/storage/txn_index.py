"""Transaction markers and the aborted-transaction index (Kafka's control batches and `.txnindex`).

Theory of operation: a transaction ends in every partition it wrote to with a
*control batch* written by the broker on the coordinator's behalf: attributes
with the transactional and control bits, the producer's id and epoch, no
sequence, and one record whose key is ``version int16, type int16`` (0 ABORT,
1 COMMIT) and whose value is ``version int16, coordinator epoch int32``.
`build_control_batch` makes one; `control_type` reads the type back.

Consumers in ``read_committed`` filter aborted records themselves: a fetch
answer lists the aborted transactions ``(producer id, first offset)`` that
overlap the returned range, and the client drops that producer's batches from
the first offset up to its ABORT marker.  The broker finds those transactions
in the *transaction index*: one `<base offset:020d>.txnindex` file next to each
segment, holding an entry per transaction aborted by a marker in that segment.
Like Kafka's, the file is created on the first entry and is derived data: the
partition rebuilds entries from the log when it replays producer state at
start (`truncate_to` drops entries the replay will add again).

Entry layout, Kafka's ``AbortedTxn`` (34 bytes, big-endian)::

    version            int16  0
    producer_id        int64  producer whose transaction was aborted
    first_offset       int64  offset of the transaction's first batch in this partition
    last_offset        int64  offset of the ABORT marker
    last_stable_offset int64  the partition's last stable offset once the marker was written

Owned by its `LogSegment` (single-threaded, like the segment).
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import NamedTuple

from crc32c import crc32c
from kafka.errors import CorruptRecordError

from broker_sim.storage.batch import ATTRIBUTES_OFFSET, CONTROL_MASK, CRC_OFFSET

ENTRY = struct.Struct(
    ">"
    "h"  # version: always 0
    "q"  # producer id
    "q"  # first offset of the aborted transaction
    "q"  # last offset: the ABORT marker
    "q"  # last stable offset after the marker
)
ENTRY_VERSION = 0

ABORT, COMMIT = 0, 1
CONTROL_KEY = struct.Struct(">hh")  # version, type
CONTROL_VALUE = struct.Struct(">hi")  # version, coordinator epoch
_ATTRIBUTES = struct.Struct(">h")
_CRC = struct.Struct(">I")


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def build_control_batch(producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                        timestamp_ms: int) -> bytes:
    """One control batch holding a COMMIT or ABORT marker (offset 0; the log assigns the real one)."""
    from kafka.record.default_records import DefaultRecordBatchBuilder  # kafka-python's records: when first used

    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True, producer_id=producer_id,
                                        producer_epoch=producer_epoch, base_sequence=-1, batch_size=2**31 - 1)
    builder.append(0, timestamp=timestamp_ms, key=CONTROL_KEY.pack(0, COMMIT if commit else ABORT),
                   value=CONTROL_VALUE.pack(0, coordinator_epoch), headers=[])
    data = bytearray(builder.build())
    # kafka-python builds client batches only: set the control bit and re-sign the batch
    (attributes,) = _ATTRIBUTES.unpack_from(data, ATTRIBUTES_OFFSET)
    _ATTRIBUTES.pack_into(data, ATTRIBUTES_OFFSET, attributes | CONTROL_MASK)
    _CRC.pack_into(data, CRC_OFFSET, crc32c(memoryview(data)[ATTRIBUTES_OFFSET:]))
    return bytes(data)


def control_type(batch: bytes) -> int:
    """ABORT or COMMIT, read from the key of a whole, uncompressed control batch's record."""
    from kafka.record.default_records import DefaultRecordBatch

    for record in DefaultRecordBatch(bytes(batch)):
        return record.type
    raise CorruptRecordError("control batch without a record")


class TransactionIndex:
    """The `.txnindex` file of one segment; see the module docstring."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: list[AbortedTxn] = []
        if path.exists():
            data = path.read_bytes()
            usable = len(data) - len(data) % ENTRY.size  # a torn last entry is dropped (rebuilt by replay)
            for position in range(0, usable, ENTRY.size):
                version, *fields = ENTRY.unpack_from(data, position)
                if version != ENTRY_VERSION:
                    break
                self._entries.append(AbortedTxn(*fields))
            if usable != len(data) or len(self._entries) * ENTRY.size != usable:
                self._rewrite()

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def entries(self) -> tuple[AbortedTxn, ...]:
        return tuple(self._entries)

    def append(self, entry: AbortedTxn) -> None:
        """Add an entry (markers arrive in offset order); the file is created on the first one."""
        if self._entries and entry.last_offset <= self._entries[-1].last_offset:
            raise ValueError(f"{self.path.name}: aborted txn ending at {entry.last_offset} is not after "
                             f"{self._entries[-1].last_offset}")
        with open(self.path, "ab", buffering=0) as f:
            f.write(ENTRY.pack(ENTRY_VERSION, *entry))
        self._entries.append(entry)

    def collect(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """Entries overlapping ``[fetch_offset, upper_bound)``, and whether no later segment can add any.

        Kafka's ``collectAbortedTxns``: an entry whose last stable offset reaches
        ``upper_bound`` proves that every transaction overlapping the range
        has ended by then, so later segments need not be searched.
        """
        found = []
        for entry in self._entries:
            if entry.last_offset >= fetch_offset and entry.first_offset < upper_bound:
                found.append(entry)
            if entry.last_stable_offset >= upper_bound:
                return found, True
        return found, False

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose marker is at or after ``offset``."""
        kept = [entry for entry in self._entries if entry.last_offset < offset]
        if len(kept) != len(self._entries):
            self._entries = kept
            self._rewrite()

    def _rewrite(self) -> None:
        if not self._entries:
            self.path.unlink(missing_ok=True)
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_bytes(b"".join(ENTRY.pack(ENTRY_VERSION, *entry) for entry in self._entries))
        os.replace(tmp, self.path)

    def flush(self) -> None:
        if self._entries and self.path.exists():
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def rename(self, path: Path) -> None:
        if self.path.exists():
            os.replace(self.path, path)
        self.path = path

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)
