"""One partition's replica state on this broker (Kafka's ``Partition``).

Theory of operation: a ``Partition`` owns the partition's log, its idempotent
producer state and its leader-epoch cache, and keeps the two offsets that
matter to clients apart: the log end offset (next offset to assign) and the
high watermark (offsets below it are committed; consumers are served only up
to it).  On a single node the in-sync replica set is just this broker, so the
high watermark follows the log end offset on every append; the replication
issue widens ``update_high_watermark`` to the minimum over the ISR.

Appends validate first (CRC, sizes, producer sequences) and return errors as
kafka-python exceptions carrying Kafka error codes; a duplicate batch from an
idempotent producer is answered with the offsets it got the first time, as
Kafka does.  Fetch long-polls wait on ``wait_for_append`` futures, completed
on the next append (a purgatory keyed by partition).  All methods run on the
broker's event loop thread; no locks.

Transactions: ``write_txn_marker`` appends the COMMIT/ABORT control batch the
transaction coordinator asks for (``WriteTxnMarkers``); the producer state
tracks each producer's open transaction, and the *last stable offset* is the
first offset of the oldest open transaction, or the high watermark when none
is open.  ``read_committed`` reads stop there, and an aborted transaction gets
an entry in the segment's ``.txnindex`` so fetches can list the aborted
transactions they overlap (``aborted_transactions``).  At start the index is
rebuilt from the producer-state replay (see ``ProducerStateManager.load``).
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import kafka.errors as Errors
from aiokafka.record.default_records import DefaultRecordBatch

from broker_sim.storage.batch import parse_batches
from broker_sim.storage.cleaner import CleanResult, clean_log_async
from broker_sim.storage.leader_epoch import LeaderEpochCache
from broker_sim.storage.log import LogConfig, PartitionLog
from broker_sim.storage.producer_state import ProducerStateManager, in_sequence
from broker_sim.storage.txn_index import COMMIT, AbortedTxn, build_control_batch, control_type


@dataclass
class AppendResult:
    base_offset: int
    log_append_time: int
    log_start_offset: int
    duplicate: bool = False


class Partition:
    def __init__(self, topic: str, index: int, directory: Path, config: LogConfig, *,
                 broker_id: int, now_ms: Callable[[], int]) -> None:
        self.topic = topic
        self.index = index
        self.broker_id = broker_id
        self._now_ms = now_ms
        self.log = PartitionLog(directory, config, now_ms=now_ms)
        self.epochs = LeaderEpochCache(directory)
        self.producers = ProducerStateManager(directory)
        replayed_from, completed = self.producers.load(self.log, self._control_type_of)
        self.log.truncate_txn_indexes(replayed_from)
        for done, first_unstable in completed:
            if done.aborted and done.first_offset is not None:
                self.log.append_aborted_txn(AbortedTxn(
                    done.producer_id, done.first_offset, done.last_offset,
                    first_unstable if first_unstable is not None else done.last_offset + 1))
        self.leader_epoch = max(self.epochs.latest_epoch, 0)
        if self.epochs.latest_epoch < 0:
            self.epochs.assign(self.leader_epoch, self.log.log_end_offset)
        self.high_watermark = self.log.log_end_offset
        self._append_waiters: list[asyncio.Future] = []
        self._segments_at_last_snapshot = len(self.log.segments)

    def __repr__(self) -> str:
        return f"Partition({self.topic}-{self.index})"

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    def update_high_watermark(self) -> None:
        # single node: the ISR is {this broker}, so everything appended is committed
        self.high_watermark = self.log.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        """Offsets below this are decided: no open transaction starts below it (<= the high watermark)."""
        first_unstable = self.producers.first_unstable_offset()
        return self.high_watermark if first_unstable is None else min(first_unstable, self.high_watermark)

    def _control_type_of(self, header) -> int:
        return control_type(self.log.read_bytes(header.base_offset, header.size, max_offset=header.next_offset))

    def append_records(self, records: bytes, *, from_coordinator: bool = False) -> AppendResult:
        """Validate and append a produce request's records for this partition.

        ``from_coordinator``: records a coordinator writes on a producer's
        behalf (transactional offset commits carry the producer id and epoch
        but no sequence numbers), so sequences are not checked (Kafka's
        ``AppendOrigin.COORDINATOR``).

        Raises kafka.errors exceptions (CorruptRecordError, MessageSizeTooLargeError,
        InvalidRecordError, OutOfOrderSequenceNumberError, InvalidProducerEpochError, ...).
        """
        batches = parse_batches(records)
        if self.log.config.compact:
            self._check_keys(records, batches)
        limit = self.log.config.max_message_bytes
        previous = {}  # producer id -> its previous batch in this request
        for batch in batches:
            if batch.size > limit:
                raise Errors.MessageSizeTooLargeError(
                    f"batch of {batch.size} bytes at byte {batch.position} is larger than "
                    f"max.message.bytes={limit} of {self.topic}")
            if batch.is_control:
                raise Errors.InvalidRecordError(f"control batches are written by the broker, not produced "
                                                f"(batch at byte {batch.position})")
            if batch.has_producer_id and from_coordinator:
                self.producers.check_epoch(batch.producer_id, batch.producer_epoch)
            elif batch.has_producer_id:
                before = previous.get(batch.producer_id)
                if before is None:
                    duplicate = self.producers.check(batch)
                    if duplicate is not None:
                        # as Kafka: the original offsets and, where the broker stamps time, its original append time
                        append_time = (duplicate.max_timestamp
                                       if self.log.config.message_timestamp_type == "LogAppendTime" else -1)
                        return AppendResult(duplicate.first_offset, append_time, self.log.log_start_offset,
                                            duplicate=True)
                elif (batch.producer_epoch != before.producer_epoch
                      or not in_sequence(before.last_sequence, batch.base_sequence)):
                    raise Errors.OutOfOrderSequenceNumberError(
                        f"producer {batch.producer_id}: batch with sequence {batch.base_sequence} does not follow "
                        f"the one before it in the same request (last sequence {before.last_sequence})")
                previous[batch.producer_id] = batch
        info = self.log.append(records, batches, leader_epoch=self.leader_epoch)
        offset = info.first_offset
        for batch in batches:
            if batch.has_producer_id:
                self.producers.update(batch, offset,
                                      info.log_append_time if info.log_append_time >= 0 else batch.max_timestamp)
            offset += batch.last_offset_delta + 1
        self._appended()
        return AppendResult(info.first_offset, info.log_append_time, self.log.log_start_offset)

    def write_txn_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                         commit: bool) -> int:
        """Append a COMMIT or ABORT marker ending ``producer_id``'s transaction here; returns its offset.

        Raises InvalidProducerEpochError (the producer has a newer epoch here)
        and TransactionCoordinatorFencedError (a newer coordinator wrote markers).
        """
        self.producers.check_marker(producer_id, producer_epoch, coordinator_epoch)
        data = build_control_batch(producer_id, producer_epoch, coordinator_epoch, commit, self._now_ms())
        (batch,) = parse_batches(data)
        info = self.log.append(data, [batch], leader_epoch=self.leader_epoch)
        done = self.producers.update(batch, info.first_offset,
                                     info.log_append_time if info.log_append_time >= 0 else batch.max_timestamp,
                                     control_type=COMMIT if commit else 0, coordinator_epoch=coordinator_epoch)
        self.update_high_watermark()
        if done.aborted and done.first_offset is not None:
            self.log.append_aborted_txn(AbortedTxn(producer_id, done.first_offset, info.first_offset,
                                                   self.last_stable_offset))
        self._appended()
        return info.first_offset

    def _appended(self) -> None:
        if len(self.log.segments) != self._segments_at_last_snapshot:
            # Kafka snapshots producer state on every roll, bounding the replay on restart
            self.producers.take_snapshot(self.log.log_end_offset)
            self._segments_at_last_snapshot = len(self.log.segments)
        self.update_high_watermark()
        self._wake_waiters()

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of aborted transactions overlapping ``[fetch_offset, upper_bound)``."""
        return [(entry.producer_id, entry.first_offset)
                for entry in self.log.collect_aborted_txns(fetch_offset, upper_bound)]

    def _check_keys(self, records, batches) -> None:
        """Kafka's LogValidator: a compacted topic rejects records without a key (decodes the batches)."""
        for batch in batches:
            if batch.is_control:
                continue
            data = bytes(memoryview(records)[batch.position:batch.position + batch.size])
            if any(record.key is None for record in DefaultRecordBatch(data)):
                raise Errors.InvalidRecordError(
                    f"Compacted topic cannot accept message without key in topic partition {self.topic}-{self.index}.")

    async def clean(self) -> CleanResult | None:
        """One log-cleaner pass (compaction) when the policy and dirty ratio call for it; see storage/cleaner.py.

        Like Kafka's, the cleaner stops at the last stable offset: segments holding open transactions wait.
        """
        last_offsets = {pid: entry.last_offset for pid, entry in self.producers.producers.items()}
        return await clean_log_async(self.log, self._now_ms(), high_watermark=self.last_stable_offset,
                                     producer_last_offsets=last_offsets)

    def wait_for_append(self) -> asyncio.Future:
        future = asyncio.get_running_loop().create_future()
        if len(self._append_waiters) >= 32:
            # long polls that timed out leave cancelled futures behind on idle partitions
            self._append_waiters = [f for f in self._append_waiters if not f.done()]
        self._append_waiters.append(future)
        return future

    def _wake_waiters(self) -> None:
        waiters, self._append_waiters = self._append_waiters, []
        for future in waiters:
            if not future.done():
                future.set_result(None)

    def read(self, offset: int, max_bytes: int, *, min_one_batch: bool, read_committed: bool = False):
        """File regions of committed batches from ``offset`` (raises OffsetOutOfRangeError).

        ``read_committed`` stops at the last stable offset instead of the high watermark.
        """
        if offset > self.high_watermark:
            if offset <= self.log.log_end_offset:
                return []
            raise Errors.OffsetOutOfRangeError(
                f"fetch offset {offset} of {self.topic}-{self.index} is past the log end offset "
                f"{self.log.log_end_offset}")
        limit = self.last_stable_offset if read_committed else self.high_watermark
        return self.log.read(offset, max_bytes, max_offset=limit, min_one_batch=min_one_batch)

    def check_leader_epoch(self, current: int) -> None:
        """Raise when a client's leader epoch differs from ours (-1: the client does not say)."""
        if current >= 0 and current != self.leader_epoch:
            error = Errors.FencedLeaderEpochError if current < self.leader_epoch else Errors.UnknownLeaderEpochError
            raise error(f"{self.topic}-{self.index}: leader epoch {current} of the request, "
                        f"{self.leader_epoch} on the broker")

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self.epochs.end_offset_for(epoch, self.log.log_end_offset)

    def delete_records_before(self, offset: int) -> int:
        if offset == -1:
            offset = self.high_watermark
        if offset > self.high_watermark or offset < 0:
            raise Errors.OffsetOutOfRangeError(
                f"cannot delete records of {self.topic}-{self.index} before offset {offset}: "
                f"outside [0, high watermark {self.high_watermark}]")
        start = self.log.delete_records_before(offset)
        self.epochs.truncate_from_start(start)
        self.producers.truncate_head(start)
        return start

    def enforce_retention(self, producer_expiration_ms: int) -> int:
        """Delete segments past retention (never beyond the high watermark); returns segments deleted."""
        deleted = self.log.enforce_retention(high_watermark=self.high_watermark)
        if deleted:
            self.epochs.truncate_from_start(self.log.log_start_offset)
            self.producers.truncate_head(self.log.log_start_offset)
        self.producers.remove_expired(self._now_ms(), producer_expiration_ms)
        return deleted

    def close(self) -> None:
        self._wake_waiters()
        self.producers.take_snapshot(self.log.log_end_offset)
        self.log.close()
