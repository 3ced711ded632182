"""Idempotent-producer state of one partition (Kafka's ProducerStateManager).

Theory of operation: for every producer id seen in the partition we keep its
epoch and the metadata of its last five batches (sequence range, offsets,
timestamp). Before an append the broker calls `check` for each batch with a
producer id:

- epoch below the current one -> InvalidProducerEpochError (Kafka >= 2.7);
- same epoch and the same (first, last) sequence as a cached batch ->
  `DuplicateBatch` with the *original* offsets: the broker answers success
  without appending again;
- same epoch: the first sequence must follow the last one (int32 wrap to 0),
  else OutOfOrderSequenceNumberError;
- higher epoch: the first sequence must be 0, else OutOfOrderSequenceNumberError;
- unknown producer id: any sequence is accepted. This is current Kafka
  (since 2.5, KIP-360): "If there is no current producer epoch (possibly
  because all producer records have been deleted due to retention or the
  DeleteRecords API) accept writes with any sequence number".
  UnknownProducerIdError is the pre-2.5 behaviour and is not raised.

After the append succeeded the broker calls `update` with the offsets it got.
Control batches (transaction markers) only have their epoch checked, and end
the producer's open transaction: `update` then returns a `CompletedTxn`.

Transactions: a producer's first transactional batch after a marker opens a
transaction at that batch's offset (`current_txn_first_offset`); its marker
closes it.  `first_unstable_offset` is the lowest offset of any open
transaction: the partition's last stable offset (LSO) is that, or the high
watermark when nothing is open.

State is rebuilt on start by `load`: the newest valid snapshot at or below the
log end offset, then the log's batches from that offset replayed; `load`
returns the replay's start and the transactions its markers completed, from
which the partition rebuilds its aborted-transaction index.

Snapshot file `<log end offset:020d>.snapshot` — UTF-8 JSON, described by
`schemas/producer-snapshot.json`::

    {"version": 1,
     "crc32c": <CRC32C of the compact JSON encoding of "data">,
     "data": {"log_end_offset": 120,
              "producers": [{"producer_id": 7, "epoch": 0, "last_timestamp": 1700000000000,
                             "coordinator_epoch": -1, "current_txn_first_offset": null,
                             "batches": [{"first_seq": 0, "last_seq": 9, "first_offset": 100,
                                          "last_offset": 109, "max_timestamp": 1700000000000}]}]}}

The CRC is over `json.dumps(data, sort_keys=True, separators=(",", ":"))`
encoded as UTF-8. Snapshots are written to a temporary file, fsynced and
renamed; the latest two are kept. Single-threaded, like PartitionLog.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Callable, Mapping, NamedTuple

from crc32c import crc32c
from kafka.errors import InvalidProducerEpochError, OutOfOrderSequenceNumberError, TransactionCoordinatorFencedError

from broker_sim.storage.batch import INT32_MAX, BatchHeader
from broker_sim.storage.checkpoint import fsync_directory

if TYPE_CHECKING:
    from broker_sim.storage.log import PartitionLog

SNAPSHOT_VERSION = 1
_SNAPSHOT_NAME = re.compile(r"^(\d{20})\.snapshot$")
_SNAPSHOTS_KEPT = 2
logger = logging.getLogger(__name__)


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    max_timestamp: int


class DuplicateBatch(NamedTuple):
    """A retried batch already in the log: answer with these original values."""

    first_offset: int
    last_offset: int
    max_timestamp: int


class CompletedTxn(NamedTuple):
    """A transaction ended by the marker at `last_offset`; `first_offset` None: it wrote nothing here."""

    producer_id: int
    first_offset: int | None
    last_offset: int
    aborted: bool


@dataclass
class ProducerEntry:
    producer_id: int
    epoch: int
    batches: deque[BatchMetadata]
    last_timestamp: int = -1
    coordinator_epoch: int = -1
    current_txn_first_offset: int | None = None

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, first_seq: int, last_seq: int) -> DuplicateBatch | None:
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return DuplicateBatch(batch.first_offset, batch.last_offset, batch.max_timestamp)
        return None


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class ProducerStateManager:
    """Producer id -> ProducerEntry for one partition directory; see the module docstring."""

    def __init__(self, directory: str | os.PathLike, *, max_batches_per_producer: int = 5) -> None:
        self.directory = Path(directory)
        self.max_batches_per_producer = max_batches_per_producer
        self._producers: dict[int, ProducerEntry] = {}
        self._ongoing: dict[int, int] = {}  # producer id -> first offset of its open transaction

    @property
    def producers(self) -> Mapping[int, ProducerEntry]:
        return MappingProxyType(self._producers)

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction, None when none is open."""
        return min(self._ongoing.values()) if self._ongoing else None

    def ongoing_transactions(self) -> Mapping[int, int]:
        """Producer id -> first offset of its open transaction."""
        return MappingProxyType(self._ongoing)

    # -- validation and update -------------------------------------------------

    def check(self, batch: BatchHeader) -> DuplicateBatch | None:
        """Validate a client batch before append; returns the original batch when it is a retry.

        Raises InvalidProducerEpochError and OutOfOrderSequenceNumberError.
        """
        if batch.producer_id < 0:
            return None
        entry = self._producers.get(batch.producer_id)
        if entry is None:
            return None
        if batch.producer_epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"producer {batch.producer_id}: epoch {batch.producer_epoch} is older than the current {entry.epoch}"
            )
        if batch.is_control:
            return None
        if batch.producer_epoch == entry.epoch:
            duplicate = entry.find_duplicate(batch.base_sequence, batch.last_sequence)
            if duplicate is not None:
                return duplicate
            if not in_sequence(entry.last_seq, batch.base_sequence):
                raise OutOfOrderSequenceNumberError(
                    f"producer {batch.producer_id} epoch {entry.epoch}: sequence {batch.base_sequence} "
                    f"does not follow {entry.last_seq}"
                )
        elif batch.base_sequence != 0:
            raise OutOfOrderSequenceNumberError(
                f"producer {batch.producer_id}: new epoch {batch.producer_epoch} must start at sequence 0, "
                f"got {batch.base_sequence}"
            )
        return None

    def check_epoch(self, producer_id: int, producer_epoch: int) -> None:
        """Raise InvalidProducerEpochError when ``producer_epoch`` is older than the producer's current one.

        The only check for what a coordinator writes on a producer's behalf (markers, transactional offsets).
        """
        entry = self._producers.get(producer_id)
        if entry is not None and producer_epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"producer {producer_id}: epoch {producer_epoch} is older than the current {entry.epoch}")

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> None:
        """Validate a transaction marker before it is written (Kafka's ``appendEndTxnMarker`` checks).

        Raises InvalidProducerEpochError for an epoch older than the producer's
        and TransactionCoordinatorFencedError for a marker from an older coordinator.
        """
        self.check_epoch(producer_id, producer_epoch)
        entry = self._producers.get(producer_id)
        if entry is not None and coordinator_epoch < entry.coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"marker for producer {producer_id}: coordinator epoch {coordinator_epoch} is older than "
                f"{entry.coordinator_epoch}")

    def update(self, batch: BatchHeader, first_offset: int, append_time_or_max_ts: int, *,
               control_type: int | None = None, coordinator_epoch: int = -1) -> CompletedTxn | None:
        """Record a batch appended at `first_offset` (its LogAppendTime, or max timestamp with CreateTime).

        For a control batch `control_type` is its marker's type (0 ABORT, 1
        COMMIT); the transaction it ends is returned.
        """
        if batch.producer_id < 0:
            return None
        entry = self._producers.get(batch.producer_id)
        if entry is None:
            entry = ProducerEntry(batch.producer_id, batch.producer_epoch, deque(maxlen=self.max_batches_per_producer))
            self._producers[batch.producer_id] = entry
        if batch.producer_epoch != entry.epoch:
            entry.epoch = batch.producer_epoch
            entry.batches.clear()
        entry.last_timestamp = append_time_or_max_ts
        if batch.is_control:
            completed = CompletedTxn(batch.producer_id, entry.current_txn_first_offset, first_offset,
                                     aborted=control_type == 0)
            entry.current_txn_first_offset = None
            if coordinator_epoch >= 0:
                entry.coordinator_epoch = coordinator_epoch
            self._ongoing.pop(batch.producer_id, None)
            return completed
        entry.batches.append(
            BatchMetadata(
                batch.base_sequence,
                batch.last_sequence,
                first_offset,
                first_offset + batch.last_offset_delta,
                append_time_or_max_ts,
            )
        )
        if batch.is_transactional and entry.current_txn_first_offset is None:
            entry.current_txn_first_offset = first_offset
            self._ongoing[batch.producer_id] = first_offset
        return None

    def truncate_head(self, log_start_offset: int) -> None:
        """Forget producers whose last batch is below the log start (their records are gone), as Kafka does."""
        gone = [pid for pid, entry in self._producers.items() if entry.last_offset < log_start_offset]
        for pid in gone:
            del self._producers[pid]
            self._ongoing.pop(pid, None)

    def remove_expired(self, now_ms: int, expiration_ms: int) -> None:
        """Forget producers idle for longer than `expiration_ms` (producer.id.expiration.ms) without an open txn."""
        gone = [
            pid
            for pid, entry in self._producers.items()
            if entry.current_txn_first_offset is None and now_ms - entry.last_timestamp >= expiration_ms
        ]
        for pid in gone:
            del self._producers[pid]

    # -- snapshots -------------------------------------------------------------

    def _snapshot_path(self, offset: int) -> Path:
        return self.directory / f"{offset:020d}.snapshot"

    def snapshot_offsets(self) -> list[int]:
        """Offsets of the snapshot files present, ascending."""
        offsets = []
        for path in self.directory.iterdir():
            match = _SNAPSHOT_NAME.match(path.name)
            if match:
                offsets.append(int(match.group(1)))
        return sorted(offsets)

    def take_snapshot(self, log_end_offset: int) -> None:
        """Persist the current state as of `log_end_offset`; keeps the latest two snapshots."""
        data = {
            "log_end_offset": log_end_offset,
            "producers": [
                {
                    "producer_id": entry.producer_id,
                    "epoch": entry.epoch,
                    "last_timestamp": entry.last_timestamp,
                    "coordinator_epoch": entry.coordinator_epoch,
                    "current_txn_first_offset": entry.current_txn_first_offset,
                    "batches": [batch._asdict() for batch in entry.batches],
                }
                for entry in self._producers.values()
            ],
        }
        document = {"version": SNAPSHOT_VERSION, "crc32c": crc32c(_canonical(data)), "data": data}
        path = self._snapshot_path(log_end_offset)
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "wb", buffering=0) as f:
            f.write(json.dumps(document, separators=(",", ":")).encode())
            os.fsync(f.fileno())
        os.replace(tmp, path)
        for offset in self.snapshot_offsets()[:-_SNAPSHOTS_KEPT]:
            self._snapshot_path(offset).unlink(missing_ok=True)
        fsync_directory(self.directory)

    def delete_snapshots(self) -> None:
        """Remove every snapshot file (the log was emptied; nothing in them describes it any more)."""
        for offset in self.snapshot_offsets():
            self._snapshot_path(offset).unlink(missing_ok=True)
        fsync_directory(self.directory)

    def _read_snapshot(self, path: Path) -> dict[int, ProducerEntry]:
        """Producers of a snapshot file; raises ValueError when it is corrupt."""
        try:
            document = json.loads(path.read_bytes())
            if document["version"] != SNAPSHOT_VERSION:
                raise ValueError(f"unknown version {document['version']!r}")
            data = document["data"]
            if crc32c(_canonical(data)) != document["crc32c"]:
                raise ValueError("CRC32C mismatch")
            producers = {}
            for item in data["producers"]:
                entry = ProducerEntry(
                    int(item["producer_id"]),
                    int(item["epoch"]),
                    deque(
                        (BatchMetadata(**batch) for batch in item["batches"]),
                        maxlen=self.max_batches_per_producer,
                    ),
                    int(item["last_timestamp"]),
                    int(item["coordinator_epoch"]),
                    item["current_txn_first_offset"],
                )
                producers[entry.producer_id] = entry
            return producers
        except (KeyError, TypeError, AttributeError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(f"{path.name}: malformed snapshot: {e!r}") from e

    def load(self, log: PartitionLog, read_control_type: Callable[[BatchHeader], int] | None = None
             ) -> tuple[int, list[tuple[CompletedTxn, int | None]]]:
        """Rebuild the state: newest valid snapshot <= the log end offset, then replay the log after it.

        Snapshots beyond the log end (the log was truncated) and corrupt
        snapshots are deleted. Producers wholly below the log start are dropped.
        Returns the offset the replay started from and the transactions its
        markers completed, each with the first unstable offset right after
        it (markers' types come from `read_control_type`; without it every
        marker counts as a commit).
        """
        self._producers = {}
        log_end_offset = log.log_end_offset
        replay_from = None
        for offset in reversed(self.snapshot_offsets()):
            path = self._snapshot_path(offset)
            if offset > log_end_offset:
                path.unlink()
                continue
            try:
                self._producers = self._read_snapshot(path)
            except ValueError as e:
                # as Kafka's loadFromSnapshot: drop it and rebuild from an older snapshot or the whole log
                logger.warning("%s: ignoring producer state snapshot: %s", self.directory, e)
                path.unlink(missing_ok=True)
                continue
            replay_from = offset
            break
        self._ongoing = {pid: entry.current_txn_first_offset for pid, entry in self._producers.items()
                         if entry.current_txn_first_offset is not None}
        completed = []
        for batch in log.iter_batches(replay_from):
            if batch.producer_id >= 0 and (replay_from is None or batch.base_offset >= replay_from):
                kind = read_control_type(batch) if batch.is_control and read_control_type is not None else None
                done = self.update(batch, batch.base_offset, batch.max_timestamp, control_type=kind)
                if done is not None:
                    completed.append((done, self.first_unstable_offset()))
        self.truncate_head(log.log_start_offset)
        return (replay_from if replay_from is not None else log.log_start_offset), completed


def _canonical(data: object) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":")).encode()

