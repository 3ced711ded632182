"""LeaderEpochCache: which leader epoch started at which offset, in `leader-epoch-checkpoint`.

Theory of operation: every time a broker becomes leader of a partition with a
new epoch it records (epoch, log end offset). Followers and consumers ask
"where did epoch E end?" (OffsetForLeaderEpoch) to detect divergent logs; the
answer is the start offset of the next higher epoch, or the log end offset for
the latest epoch. Entries are kept strictly increasing in both epoch and start
offset, as in Kafka's `LeaderEpochFileCache`.

The file is Kafka's checkpoint format (version 0, a count, then one
"epoch start_offset" line per entry) replaced atomically on every change. The
cache is owned by the partition and, like PartitionLog, used from one thread.

A checkpoint that cannot be read (malformed, entries not increasing, not a
file) is logged and rebuilt from the log: every batch carries the epoch of the
leader that appended it, and Kafka's segment recovery assigns epochs from
those batches the same way (`LogSegment.recover`).
"""

from __future__ import annotations

import logging
import os
from bisect import bisect_right
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from broker_sim.storage.checkpoint import read_checkpoint, write_checkpoint

if TYPE_CHECKING:
    from broker_sim.storage.log import PartitionLog

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
_VERSION = 0
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
logger = logging.getLogger(__name__)


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class LeaderEpochCache:
    def __init__(self, directory: str | os.PathLike, rebuild_from: PartitionLog | None = None) -> None:
        """Read the checkpoint; an unreadable one is rebuilt from `rebuild_from`'s batches (or starts empty)."""
        self.path = Path(directory) / LEADER_EPOCH_CHECKPOINT
        try:
            self._entries = _read_entries(self.path)
        except ValueError as e:
            logger.warning("%s: unreadable leader epoch checkpoint (%s); rebuilding it from the log", self.path, e)
            self._entries = []
            if rebuild_from is not None:
                for batch in rebuild_from.iter_batches():
                    if batch.partition_leader_epoch > self.latest_epoch:
                        self._entries.append(EpochEntry(batch.partition_leader_epoch, batch.base_offset))
            self._persist()

    @property
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        """The latest epoch, or -1 when none was assigned."""
        return self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset`; returns whether the cache changed.

        Only an epoch above the latest is added; entries whose start offset is
        not below the new one are dropped first so offsets stay monotonic.
        """
        if epoch < 0 or start_offset < 0 or epoch <= self.latest_epoch:
            return False
        self._entries = [entry for entry in self._entries if entry.start_offset < start_offset]
        self._entries.append(EpochEntry(epoch, start_offset))
        self._persist()
        return True

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (epoch, end offset) for a requested epoch, as in Kafka.

        - requested == latest: (epoch, log_end_offset);
        - otherwise the start offset of the first higher epoch, paired with the
          largest known epoch <= the requested one — or with the requested
          epoch itself when it is below every known epoch;
        - (-1, -1) when it is -1, above every known epoch, or the cache is empty.
        """
        if epoch == UNDEFINED_EPOCH or not self._entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if epoch == self.latest_epoch:
            return epoch, log_end_offset
        epochs = [entry.epoch for entry in self._entries]
        higher = bisect_right(epochs, epoch)
        if higher == len(self._entries):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return epoch, self._entries[0].start_offset
        return self._entries[higher - 1].epoch, self._entries[higher].start_offset

    def truncate_from_end(self, end_offset: int) -> None:
        """The log was truncated to `end_offset`: drop epochs starting at or after it."""
        kept = [entry for entry in self._entries if entry.start_offset < end_offset]
        if len(kept) != len(self._entries):
            self._entries = kept
            self._persist()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log start moved to `start_offset`: drop older epochs, keeping the one in force there.

        That epoch's start offset is raised to `start_offset`.
        """
        older = [entry for entry in self._entries if entry.start_offset <= start_offset]
        if not older or (len(older) == 1 and older[0].start_offset == start_offset):
            return
        self._entries = [EpochEntry(older[-1].epoch, start_offset), *self._entries[len(older) :]]
        self._persist()

    def clear(self) -> None:
        """Forget every epoch (the log was emptied and restarted at the leader's log start)."""
        if self._entries:
            self._entries = []
            self._persist()

    def _persist(self) -> None:
        write_checkpoint(self.path, _VERSION, [f"{entry.epoch} {entry.start_offset}" for entry in self._entries])


def _read_entries(path: Path) -> list[EpochEntry]:
    """The checkpoint's entries; raises ValueError for a file that is not a valid epoch checkpoint."""
    entries = []
    for line in read_checkpoint(path, _VERSION) or []:
        epoch, start_offset = line.split()  # ValueError when not two fields
        entry = EpochEntry(int(epoch), int(start_offset))
        if entry.epoch < 0 or entry.start_offset < 0 or (
                entries and (entry.epoch <= entries[-1].epoch or entry.start_offset < entries[-1].start_offset)):
            raise ValueError(f"entry {line!r} does not follow {entries[-1:]} with increasing epochs and offsets")
        entries.append(entry)
    return entries
