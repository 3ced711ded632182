"""One partition's replica state on this broker (Kafka's ``Partition``).

Theory of operation: a ``Partition`` owns the partition's log, its idempotent
producer state and its leader-epoch cache, and keeps the two offsets that
matter to clients apart: the log end offset (next offset to assign) and the
high watermark (offsets below it are committed; consumers are served only up
to it).  On a single node the in-sync replica set is just this broker, so the
high watermark follows the log end offset on every append; the replication
issue widens ``update_high_watermark`` to the minimum over the ISR.

Appends validate first (leadership, min.insync.replicas for acks=-1, producer
sequences; a client's records were already checked one by one by
``storage/validator.py``, called by ``ReplicaManager.append_records`` because it
may run off the event loop when large, which is why that check is not here;
the broker's own records get the validator's size rule) and return errors as
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

Replication (Kafka's ZooKeeper-era ``Partition``): a partition is either the
*leader* (takes produce, serves consumers and followers) or a *follower*
(copies the leader's log through the replica fetcher).  A new ``Partition``
is the leader of a one-replica ISR, so a single node behaves as before.

* ``make_leader(state, replicas)`` adopts the controller's leader epoch (the
  epochs cache records where it starts), the ISR and its ZooKeeper version;
  the other replicas' log end offsets are unknown until they fetch.
* The leader learns each follower's log end offset from its fetch offset
  (``update_follower_fetch``).  The high watermark is the minimum log end
  offset over the ISR (the leader included) and never moves back while this
  broker leads.  A follower is *caught up* when it fetched from the leader's
  log end offset (Kafka's ``lastCaughtUpTimeMs`` rule, which also credits a
  fetch that reached the log end offset of the previous fetch).
* ISR changes are requests: ``maybe_shrink_isr`` (a follower not caught up
  for ``replica.lag.time.max.ms``) and expansion (a non-ISR follower reached
  the high watermark and the start of the current leader epoch) call the
  injected async ``isr_writer(partition, new_isr)`` -- a conditional
  ZooKeeper write -- and only its answer changes the in-memory ISR (Kafka's
  ZooKeeper-era order).  ``None`` means refused: the state moved on and the
  controller's next decision will arrive through ``make_leader`` or
  ``make_follower``.  One write is in flight at a time.
* The leader remembers the high watermark its last answer to each follower
  carried: ``follower_needs_high_watermark`` makes the fetch handler answer a
  follower at once when it moved since (followers serve consumers up to the
  high watermark they know, KIP-392); ``in_sync_followers`` lists the
  read-replica candidates for ``replication/replica_selector.py``.
* ``wait_for_high_watermark`` is the acks=all purgatory: futures completed
  when the high watermark moves, the ISR changes or leadership is lost.
  Fetch long polls wait on ``wait_for_append`` futures, completed on appends
  *and* high watermark moves (a consumer sees new data only when it commits).
* ``make_follower(state, replicas)`` stops produce (``NotLeaderOrFollowerError``
  naming the leader) and fails acks=all waiters.  The fetcher then truncates
  (``truncate_to``: log, epochs cache, producer state reloaded from a snapshot
  <= the new end plus a replay, transaction index, high watermark) and appends
  the leader's batches unchanged (``append_as_follower``: same offsets and
  batch leader epochs; the epochs cache, producer state and aborted-transaction
  index are updated from the batches exactly as on the leader), taking the
  leader's high watermark (``set_follower_high_watermark``) and log start offset
  (``follow_log_start_offset``).
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Awaitable, Callable, Optional

import kafka.errors as Errors

from broker_sim.controller.cluster_state import NO_LEADER, PartitionState
from broker_sim.storage.batch import BatchHeader, parse_batches
from broker_sim.storage.leader_epoch import LeaderEpochCache
from broker_sim.storage.log import LogConfig, PartitionLog
from broker_sim.storage.segment import OpenSegments
from broker_sim.storage.producer_state import ProducerStateManager, in_sequence
from broker_sim.storage.txn_index import COMMIT, CONTROL_VALUE, AbortedTxn, build_control_batch, control_type
from broker_sim.storage.validator import check_batch_sizes

if TYPE_CHECKING:
    from broker_sim.storage.cleaner import CleanResult

log = logging.getLogger(__name__)
IsrWriter = Callable[["Partition", tuple], Awaitable[Optional[PartitionState]]]
UNKNOWN_OFFSET = -1


@dataclass
class AppendResult:
    base_offset: int
    log_append_time: int
    log_start_offset: int
    duplicate: bool = False
    last_offset: int = -1  # offset of the last record appended (or of the original, for a duplicate)


@dataclass
class ReplicaState:
    """What the leader knows of one follower (Kafka's ``Replica``)."""
    log_end_offset: int = UNKNOWN_OFFSET  # its fetch offset; unknown until it fetches
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    last_fetch_leader_leo: int = UNKNOWN_OFFSET  # our log end offset at its previous fetch
    last_sent_high_watermark: int = UNKNOWN_OFFSET  # the high watermark our last answer to it carried


class Partition:
    def __init__(self, topic: str, index: int, directory: Path, config: LogConfig, *,
                 broker_id: int, now_ms: Callable[[], int], isr_writer: IsrWriter | None = None,
                 open_segments: OpenSegments | None = None) -> None:
        self.topic = topic
        self.index = index
        self.broker_id = broker_id
        self._now_ms = now_ms
        self.isr_writer = isr_writer
        self._open_segments = open_segments
        self.log = PartitionLog(directory, config, now_ms=now_ms, open_segments=open_segments)
        self.epochs = LeaderEpochCache(directory, rebuild_from=self.log)
        self.producers = ProducerStateManager(directory)
        self._load_producer_state()
        self.leader_epoch = max(self.epochs.latest_epoch, 0)
        if self.epochs.latest_epoch < 0:
            self.epochs.assign(self.leader_epoch, self.log.log_end_offset)
        self.high_watermark = self.log.log_end_offset
        # replica state: a new partition leads a one-replica ISR (the single-node broker)
        self.is_leader = True
        self.leader_id = broker_id
        self.replicas: list[int] = [broker_id]
        self.isr: tuple[int, ...] = (broker_id,)
        self.zk_version = -1
        self.leader_epoch_start_offset = self.epochs.entries[-1].start_offset if self.epochs.entries else 0
        self._remote: dict[int, ReplicaState] = {}
        self._pending_isr: tuple[int, ...] | None = None
        self.isr_update_task: asyncio.Task | None = None
        self._append_waiters: list[asyncio.Future] = []
        self._hw_waiters: list[asyncio.Future] = []
        # counters read by the metrics endpoint (server/metrics.py); plain ints on the hot path
        self.bytes_in = self.messages_in = self.bytes_out = 0
        self.isr_shrinks = self.isr_expands = 0

    def now_ms(self) -> int:
        """The broker's clock as this partition reads it (a client's record timestamps are checked against it)."""
        return self._now_ms()

    def __repr__(self) -> str:
        return f"Partition({self.topic}-{self.index})"

    def _load_producer_state(self) -> None:
        """Producer state from the newest snapshot plus a replay; the aborted-transaction index rebuilt with it."""
        replayed_from, completed = self.producers.load(self.log, self._control_type_of)
        self.log.truncate_txn_indexes(replayed_from)
        for done, first_unstable in completed:
            if done.aborted and done.first_offset is not None:
                self.log.append_aborted_txn(AbortedTxn(
                    done.producer_id, done.first_offset, done.last_offset,
                    first_unstable if first_unstable is not None else done.last_offset + 1))
        self._segments_at_last_snapshot = len(self.log.segments)

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    # -- high watermark ----------------------------------------------------------------

    def update_high_watermark(self) -> None:
        """Leader: HW = max(HW, min log end offset over the ISR); a single-node ISR makes it the LEO.

        The ISR here is Kafka's *maximal* ISR (KIP-497): while a write adding a follower is in flight that
        follower counts already (a shrink counts only once written, so the larger set holds until then): the
        controller may elect it from the new ISR the moment ZooKeeper has it.
        """
        if not self.is_leader:
            return
        low = self.log.log_end_offset
        pending = self._pending_isr
        for replica in self.isr if not pending else set(self.isr) | set(pending):
            if replica == self.broker_id:
                continue
            state = self._remote.get(replica)
            if state is None or state.log_end_offset < 0:
                return  # an ISR member that has not fetched yet holds the HW where it is
            low = min(low, state.log_end_offset)
        if low > self.high_watermark:
            self._set_high_watermark(low)

    def _set_high_watermark(self, value: int) -> None:
        if value != self.high_watermark:
            self.high_watermark = value
            self._wake_waiters()
            self._wake_hw_waiters()

    @property
    def last_stable_offset(self) -> int:
        """Offsets below this are decided: no open transaction starts below it (<= the high watermark)."""
        first_unstable = self.producers.first_unstable_offset()
        return self.high_watermark if first_unstable is None else min(first_unstable, self.high_watermark)

    def _control_type_of(self, header) -> int:
        return control_type(self.log.read_bytes(header.base_offset, header.size, max_offset=header.next_offset))

    # -- leadership --------------------------------------------------------------------

    def _check_leader(self) -> None:
        if not self.is_leader:
            leader = (f"broker {self.leader_id}" if self.leader_id != NO_LEADER
                      else "no broker (leader election pending)")
            raise Errors.NotLeaderForPartitionError(
                f"broker {self.broker_id} is not the leader of {self.topic}-{self.index} "
                f"(leader epoch {self.leader_epoch}: the leader is {leader})")

    def make_leader(self, state: PartitionState, replicas: list[int]) -> bool:
        """Lead at ``state.leader_epoch`` with ISR ``state.isr``; False when already leading at that epoch.

        Already leading at that epoch: only the ISR, its ZooKeeper version and
        the replica list are adopted (the controller changed the ISR).
        """
        now = self._now_ms()
        self.replicas = list(replicas) or [self.broker_id]
        self.zk_version = state.zk_version
        if self.is_leader and self.leader_epoch == state.leader_epoch:
            self.isr = tuple(state.isr)
            for replica in self.replicas:
                if replica != self.broker_id and replica not in self._remote:
                    self._remote[replica] = ReplicaState(last_caught_up_ms=now if replica in self.isr else 0)
            self.update_high_watermark()
            self._wake_hw_waiters()
            return False
        self.is_leader = True
        self.leader_id = self.broker_id
        self.leader_epoch = state.leader_epoch
        self.epochs.assign(state.leader_epoch, self.log.log_end_offset)
        # where this epoch starts in our log: now, or earlier when we led it before a restart
        entries = self.epochs.entries
        led_before = entries and entries[-1].epoch == state.leader_epoch
        self.leader_epoch_start_offset = entries[-1].start_offset if led_before else self.log.log_end_offset
        self.isr = tuple(state.isr)
        # Kafka resets followers' state; ISR members count as caught up at the election
        self._remote = {replica: ReplicaState(last_caught_up_ms=now if replica in self.isr else 0)
                        for replica in self.replicas if replica != self.broker_id}
        self._pending_isr = None
        self.high_watermark = min(self.high_watermark, self.log.log_end_offset)
        self.update_high_watermark()
        self._wake_waiters()
        return True

    def make_follower(self, state: PartitionState, replicas: list[int]) -> bool:
        """Follow ``state.leader``; True when the leader or epoch changed (the caller (re)starts fetching).

        Produce is refused from now on and acks=all waiters fail with
        NOT_LEADER_OR_FOLLOWER.
        """
        changed = self.is_leader or self.leader_id != state.leader or self.leader_epoch != state.leader_epoch
        self.is_leader = False
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.isr = tuple(state.isr)
        self.replicas = list(replicas)
        self.zk_version = state.zk_version
        self._remote = {}
        self._pending_isr = None
        if self.isr_update_task is not None and not self.isr_update_task.done():
            self.isr_update_task.cancel()
        self._wake_hw_waiters()  # they see is_leader False and fail
        self._wake_waiters()  # long polls re-read and get NOT_LEADER_OR_FOLLOWER
        return changed

    # -- leader side: followers, ISR ---------------------------------------------------

    def update_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: int) -> None:
        """A follower fetched from ``fetch_offset``: that is its log end offset (leader only).

        Advances the high watermark and requests an ISR expansion for a
        non-ISR follower that caught up. Raises NotLeaderOrFollowerError when
        this broker does not lead or ``replica_id`` is not a replica.
        """
        self._check_leader()
        state = self._remote.get(replica_id)
        if state is None:
            raise Errors.NotLeaderForPartitionError(
                f"broker {replica_id} is not a replica of {self.topic}-{self.index} (replicas {self.replicas})")
        leader_leo = self.log.log_end_offset
        if fetch_offset >= leader_leo:
            state.last_caught_up_ms = max(state.last_caught_up_ms, now_ms)
        elif state.last_fetch_leader_leo >= 0 and fetch_offset >= state.last_fetch_leader_leo:
            state.last_caught_up_ms = max(state.last_caught_up_ms, state.last_fetch_ms)
        state.log_end_offset = fetch_offset
        state.last_fetch_leader_leo = leader_leo
        state.last_fetch_ms = now_ms
        self.update_high_watermark()
        if (replica_id not in self.isr and self._pending_isr is None
                and fetch_offset >= self.high_watermark and fetch_offset >= self.leader_epoch_start_offset):
            self._request_isr(tuple(sorted(set(self.isr) | {replica_id})))

    def follower_needs_high_watermark(self, replica_id: int) -> bool:
        """The high watermark moved past what we last told follower ``replica_id``: answer its fetch now (a
        follower serves consumers up to the high watermark it knows, KIP-392)."""
        state = self._remote.get(replica_id)
        return self.is_leader and state is not None and self.high_watermark > state.last_sent_high_watermark

    def high_watermark_sent(self, replica_id: int) -> None:
        """Our answer to follower ``replica_id``'s fetch carries the current high watermark."""
        state = self._remote.get(replica_id)
        if state is not None:
            state.last_sent_high_watermark = self.high_watermark

    def in_sync_followers(self, now_ms: int) -> list[tuple[int, int, int]]:
        """(broker, log end offset, ms since last caught up) of the ISR followers that fetched since the
        election (the read-replica candidates of KIP-392)."""
        return [(replica, state.log_end_offset, max(0, now_ms - state.last_caught_up_ms))
                for replica, state in sorted(self._remote.items())
                if replica in self.isr and state.log_end_offset >= 0]

    def follower_log_end_offset(self, replica_id: int) -> int:
        """What the leader knows of a follower's log end offset (-1: not fetched since the election)."""
        state = self._remote.get(replica_id)
        return state.log_end_offset if state is not None else UNKNOWN_OFFSET

    def out_of_sync_replicas(self, now_ms: int, lag_ms: int) -> list[int]:
        """ISR followers neither at our log end offset nor caught up within ``lag_ms`` (Kafka's rule)."""
        leader_leo = self.log.log_end_offset
        out = []
        for replica in self.isr:
            if replica == self.broker_id:
                continue
            state = self._remote.get(replica)
            if state is None:
                out.append(replica)
            elif state.log_end_offset != leader_leo and now_ms - state.last_caught_up_ms > lag_ms:
                out.append(replica)
        return out

    def maybe_shrink_isr(self, now_ms: int, lag_ms: int) -> bool:
        """Request that lagging followers leave the ISR; returns whether a change was requested."""
        if not self.is_leader or self._pending_isr is not None:
            return False
        lagging = self.out_of_sync_replicas(now_ms, lag_ms)
        if not lagging:
            return False
        log.info("%s: shrinking ISR %s: %s not caught up for %d ms (leader LEO %d, HW %d)", self, self.isr,
                 lagging, lag_ms, self.log.log_end_offset, self.high_watermark)
        self._request_isr(tuple(r for r in self.isr if r not in lagging))
        return True

    def _request_isr(self, new_isr: tuple[int, ...]) -> None:
        self._pending_isr = new_isr
        self.isr_update_task = asyncio.get_running_loop().create_task(self._write_isr(new_isr, self.leader_epoch))

    async def _write_isr(self, new_isr: tuple[int, ...], epoch: int) -> None:
        try:
            if self.isr_writer is None:
                state: PartitionState | None = PartitionState(self.broker_id, epoch, new_isr, -1, self.zk_version + 1)
            else:
                state = await self.isr_writer(self, new_isr)
        except asyncio.CancelledError:
            raise
        except Exception:  # a failed write leaves the ISR as it is; the next check asks again
            log.exception("%s: writing ISR %s failed", self, new_isr)
            state = None
        finally:
            if self._pending_isr == new_isr:
                self._pending_isr = None
        if state is None:
            log.info("%s: ISR change to %s refused (zk version %d moved on); waiting for the controller",
                     self, new_isr, self.zk_version)
            return
        if not self.is_leader or self.leader_epoch != epoch or state.leader_epoch != epoch:
            return
        log.info("%s: ISR %s -> %s (zk version %d)", self, self.isr, tuple(state.isr), state.zk_version)
        if len(state.isr) < len(self.isr):
            self.isr_shrinks += 1
        elif len(state.isr) > len(self.isr):
            self.isr_expands += 1
        self.isr = tuple(state.isr)
        self.zk_version = state.zk_version
        for replica in self.isr:
            if replica != self.broker_id and replica not in self._remote:
                self._remote[replica] = ReplicaState()
        self.update_high_watermark()
        self._wake_hw_waiters()

    async def wait_for_high_watermark(self, offset: int, timeout_s: float, *, min_isr: int = 1) -> None:
        """acks=all: return once the high watermark reaches ``offset`` with at least ``min_isr`` in sync.

        Raises RequestTimedOutError after ``timeout_s``, NotLeaderOrFollowerError
        when leadership is lost, NotEnoughReplicasAfterAppendError when the HW
        got there with the ISR below ``min_isr``.
        """
        epoch = self.leader_epoch
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout_s, 0.0)
        while True:
            if not self.is_leader or self.leader_epoch != epoch:
                raise Errors.NotLeaderForPartitionError(
                    f"broker {self.broker_id} lost the leadership of {self.topic}-{self.index} (epoch {epoch}) "
                    f"before offset {offset - 1} was replicated")
            if self.high_watermark >= offset:
                if len(self.isr) < min_isr:
                    raise Errors.NotEnoughReplicasAfterAppendError(
                        f"{self.topic}-{self.index}: records up to offset {offset - 1} are in the log, but the ISR "
                        f"{list(self.isr)} is smaller than min.insync.replicas={min_isr}")
                return
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise Errors.RequestTimedOutError(
                    f"{self.topic}-{self.index}: high watermark {self.high_watermark} did not reach {offset} within "
                    f"{timeout_s * 1000:.0f} ms (ISR {list(self.isr)}, waiting for "
                    f"{[r for r in self.isr if r != self.broker_id and self.follower_log_end_offset(r) < offset]})")
            future = loop.create_future()
            self._hw_waiters.append(future)
            try:
                await asyncio.wait([future], timeout=remaining)
            finally:
                if not future.done():
                    future.cancel()

    def _wake_hw_waiters(self) -> None:
        waiters, self._hw_waiters = self._hw_waiters, []
        for future in waiters:
            if not future.done():
                future.set_result(None)

    # -- leader side: appends ----------------------------------------------------------

    def append_records(self, records: bytes, *, batches: list[BatchHeader] | None = None,
                       from_coordinator: bool = False, required_acks: int = 1) -> AppendResult:
        """Append a produce request's records (or a coordinator's) for this partition, as its leader.

        ``batches``: the headers ``storage.validator.validate_records`` returned
        for client records, which it has checked record by record (Kafka's
        ``AppendOrigin.CLIENT``); without them the records are the broker's
        own: only their batch headers are parsed and their sizes checked
        (``check_batch_sizes``).
        ``from_coordinator``: records a coordinator writes on a producer's
        behalf (transactional offset commits carry the producer id and epoch
        but no sequence numbers), so sequences are not checked (Kafka's
        ``AppendOrigin.COORDINATOR``).
        ``required_acks``: -1 refuses the append while the ISR is smaller than
        the log's min.insync.replicas (Kafka's ``appendRecordsToLeader``).

        Raises kafka.errors exceptions (NotLeaderOrFollowerError, NotEnoughReplicasError,
        CorruptRecordError, MessageSizeTooLargeError, InvalidRecordError,
        OutOfOrderSequenceNumberError, InvalidProducerEpochError, ...).
        """
        self._check_leader()
        if required_acks == -1:
            min_isr = self.log.config.min_insync_replicas
            if len(self.isr) < min_isr:
                raise Errors.NotEnoughReplicasError(
                    f"{self.topic}-{self.index} has {len(self.isr)} in-sync replica"
                    f"{'s' if len(self.isr) != 1 else ''} {list(self.isr)}, fewer than "
                    f"min.insync.replicas={min_isr}")
        if batches is None:
            batches = parse_batches(records)
            check_batch_sizes(batches, self.log.config.max_message_bytes)
        previous = {}  # producer id -> its previous batch in this request
        for batch in batches:
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
                                            duplicate=True, last_offset=duplicate.last_offset)
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
        self.bytes_in += len(records)
        self.messages_in += info.last_offset - info.first_offset + 1
        self._appended()
        return AppendResult(info.first_offset, info.log_append_time, self.log.log_start_offset,
                            last_offset=info.last_offset)

    def write_txn_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                         commit: bool) -> int:
        """Append a COMMIT or ABORT marker ending ``producer_id``'s transaction here; returns its offset.

        Raises NotLeaderOrFollowerError, InvalidProducerEpochError (the producer
        has a newer epoch here) and TransactionCoordinatorFencedError (a newer
        coordinator wrote markers).
        """
        self._check_leader()
        self.producers.check_marker(producer_id, producer_epoch, coordinator_epoch)
        data = build_control_batch(producer_id, producer_epoch, coordinator_epoch, commit, self._now_ms())
        (batch,) = parse_batches(data)
        info = self.log.append(data, [batch], leader_epoch=self.leader_epoch)
        done = self.producers.update(batch, info.first_offset,
                                     info.log_append_time if info.log_append_time >= 0 else batch.max_timestamp,
                                     control_type=COMMIT if commit else 0, coordinator_epoch=coordinator_epoch)
        if done.aborted and done.first_offset is not None:
            first_unstable = self.producers.first_unstable_offset()
            self.log.append_aborted_txn(AbortedTxn(
                producer_id, done.first_offset, info.first_offset,
                first_unstable if first_unstable is not None else info.first_offset + 1))
        self._appended()
        return info.first_offset

    def _appended(self) -> None:
        if len(self.log.segments) != self._segments_at_last_snapshot:
            # Kafka snapshots producer state on every roll, bounding the replay on restart
            self.producers.take_snapshot(self.log.log_end_offset)
            self._segments_at_last_snapshot = len(self.log.segments)
        self.update_high_watermark()
        self._wake_waiters()

    # -- follower side -----------------------------------------------------------------

    def append_as_follower(self, records: bytes) -> int:
        """Append the leader's batches unchanged (offsets, leader epochs, timestamps); returns the new LEO.

        Updates the epochs cache from the batches' leader epochs, the producer
        state, and the aborted-transaction index from control batches, as the
        leader did. Raises NotLeaderOrFollowerError on the leader and
        CorruptRecordError for bad or out-of-order batches.
        """
        if self.is_leader:
            raise Errors.NotLeaderForPartitionError(
                f"{self.topic}-{self.index}: broker {self.broker_id} leads it and takes no replicated records")
        # the leader's log, not a client's batches: compacted ones (fewer records than offsets, or none) pass
        batches = parse_batches(records, stored=True)
        self.log.append_as_follower(records, batches)
        view = memoryview(records)
        for batch in batches:
            if batch.partition_leader_epoch > self.epochs.latest_epoch:
                self.epochs.assign(batch.partition_leader_epoch, batch.base_offset)
            if not batch.has_producer_id:
                continue
            kind, coordinator_epoch = None, -1
            if batch.is_control:
                data = bytes(view[batch.position:batch.position + batch.size])
                kind, coordinator_epoch = _control_marker(data)
            done = self.producers.update(batch, batch.base_offset, batch.max_timestamp,
                                         control_type=kind, coordinator_epoch=coordinator_epoch)
            if done is not None and done.aborted and done.first_offset is not None:
                first_unstable = self.producers.first_unstable_offset()
                self.log.append_aborted_txn(AbortedTxn(
                    done.producer_id, done.first_offset, done.last_offset,
                    first_unstable if first_unstable is not None else done.last_offset + 1))
        if len(self.log.segments) != self._segments_at_last_snapshot:
            self.producers.take_snapshot(self.log.log_end_offset)
            self._segments_at_last_snapshot = len(self.log.segments)
        self._wake_waiters()
        return self.log.log_end_offset

    def set_follower_high_watermark(self, leader_high_watermark: int) -> None:
        """Follower: HW = min(the leader's HW, our LEO)."""
        if self.is_leader:
            return
        self._set_high_watermark(max(min(leader_high_watermark, self.log.log_end_offset), 0))

    def follow_log_start_offset(self, leader_log_start_offset: int) -> None:
        """Follower: move our log start up to the leader's when it moved forward (retention, DeleteRecords)."""
        if leader_log_start_offset <= self.log.log_start_offset:
            return
        if leader_log_start_offset > self.log.log_end_offset:
            return  # the fetcher handles a log entirely below the leader's start (truncate_fully_and_start_at)
        start = self.log.delete_records_before(leader_log_start_offset)
        self.epochs.truncate_from_start(start)
        self.producers.truncate_head(start)

    def truncate_to(self, offset: int) -> None:
        """Drop everything from ``offset`` on: log, epochs, producer state (snapshot + replay), txn index, HW.

        When ``offset`` >= the log end offset the log stays, but the epoch cache
        still drops entries starting at the log end, as Kafka's
        ``UnifiedLog.truncateTo`` does: this broker may have become leader (an
        entry at its log end) and died before appending, and keeping that epoch
        would make it announce an epoch the new leader never saw.
        """
        if offset >= self.log.log_end_offset:
            self.epochs.truncate_from_end(self.log.log_end_offset)
            return
        log.info("%s: truncating from log end offset %d to %d", self, self.log.log_end_offset, offset)
        self.log.truncate_to(offset)
        self.epochs.truncate_from_end(self.log.log_end_offset)
        self._load_producer_state()
        self.high_watermark = min(self.high_watermark, self.log.log_end_offset)
        self._wake_waiters()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Empty the log and restart it at ``offset`` (our log ends below the leader's log start)."""
        log.info("%s: log end offset %d is below the leader's log start offset %d: restarting the log there",
                 self, self.log.log_end_offset, offset)
        self.log.truncate_fully_and_start_at(offset)
        self.epochs.clear()
        self.producers.delete_snapshots()
        self._load_producer_state()
        self.high_watermark = offset
        self._wake_waiters()

    # -- reads ---------------------------------------------------------------------------

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of aborted transactions overlapping ``[fetch_offset, upper_bound)``."""
        return [(entry.producer_id, entry.first_offset)
                for entry in self.log.collect_aborted_txns(fetch_offset, upper_bound)]

    def aborted_transactions_of_read(self, fetch_offset: int, regions, max_bytes: int, *,
                                     min_one_batch: bool) -> list[tuple[int, int]]:
        """(producer id, first offset) of the aborted transactions a read_committed fetch of ``regions`` (what
        ``read`` returned for ``max_bytes``) lists: those overlapping ``fetch_offset`` up to Kafka's upper bound,
        the next offset index entry after the bytes read, else the next segment's base offset, else the log end
        (``PartitionLog.aborted_txns_upper_bound``), so a transaction aborted past the LSO may be listed too."""
        if not regions:
            return []
        upper_bound = self.log.aborted_txns_upper_bound(regions[0], max_bytes, self.last_stable_offset,
                                                        min_one_batch)
        return self.aborted_transactions(fetch_offset, upper_bound)

    async def clean(self) -> CleanResult | None:
        """One log-cleaner pass (compaction) when the policy and dirty ratio call for it; see storage/cleaner.py.

        Like Kafka's, the cleaner stops at the last stable offset: segments holding open transactions wait.
        """
        from broker_sim.storage.cleaner import clean_log_async  # at the first cleaner pass, not at a start

        last_offsets = {pid: entry.last_offset for pid, entry in self.producers.producers.items()}
        return await clean_log_async(self.log, self._now_ms(), high_watermark=self.last_stable_offset,
                                     producer_last_offsets=last_offsets)

    def wait_for_append(self) -> asyncio.Future:
        """A future completed by the next append or high watermark move (fetch long polls)."""
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
        # one segment per fetch, as Kafka's LocalLog.read (the next fetch reads the next segment)
        regions = self.log.read(offset, max_bytes, max_offset=limit, min_one_batch=min_one_batch, one_segment=True)
        self.bytes_out += sum(region.size for region in regions)
        return regions

    def read_for_replica(self, offset: int, max_bytes: int, *, min_one_batch: bool):
        """File regions from ``offset`` up to the log end offset, for a follower (raises OffsetOutOfRangeError)."""
        return self.log.read(offset, max_bytes, min_one_batch=min_one_batch, one_segment=True)

    def check_leader_epoch(self, current: int) -> None:
        """Raise when a client's leader epoch differs from ours (-1: the client does not say)."""
        if current >= 0 and current != self.leader_epoch:
            error = Errors.FencedLeaderEpochError if current < self.leader_epoch else Errors.UnknownLeaderEpochError
            raise error(f"{self.topic}-{self.index}: leader epoch {current} of the request, "
                        f"{self.leader_epoch} on the broker")

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self.epochs.end_offset_for(epoch, self.log.log_end_offset)

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords on the leader (Kafka's ``Partition.deleteRecordsOnLeader``): the new log start offset.

        Refused with POLICY_VIOLATION when the topic's cleanup.policy has no ``delete`` (a compacted log, such
        as ``_schemas`` or ``__consumer_offsets``, keeps the last record of every key; deleting its head would
        drop state that no later record restores)."""
        self._check_leader()
        if not self.log.config.delete:
            raise Errors.PolicyViolationError(
                f"Records of partition {self.topic}-{self.index} can not be deleted due to the configured policy")
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
        """Delete segments past retention (never beyond the high watermark); returns segments deleted.

        Followers do not apply retention themselves: they follow the leader's log start offset.
        """
        if not self.is_leader:
            self.producers.remove_expired(self._now_ms(), producer_expiration_ms)
            return 0
        deleted = self.log.enforce_retention(high_watermark=self.high_watermark)
        if deleted:
            self.epochs.truncate_from_start(self.log.log_start_offset)
            self.producers.truncate_head(self.log.log_start_offset)
        self.producers.remove_expired(self._now_ms(), producer_expiration_ms)
        return deleted

    def relocate(self, directory: Path) -> None:
        """Serve this replica from ``directory``, an exact copy of its current one (AlterReplicaLogDirs, on the
        event loop): the log, epochs and producer state are reopened there, the replication state stays, and
        the old log is closed (regions already handed out keep its files until sent)."""
        old = (self.log, self.epochs, self.producers)
        new_log = PartitionLog(directory, old[0].config, now_ms=self._now_ms, open_segments=self._open_segments,
                               recover_tail=False)  # an exact copy: no scan of the active segment on the loop
        try:
            self.log, self.epochs, self.producers = (new_log, LeaderEpochCache(directory, rebuild_from=new_log),
                                                     ProducerStateManager(directory))
            self._load_producer_state()
        except BaseException:  # still served from the old files
            self.log, self.epochs, self.producers = old
            new_log.close()
            raise
        old[0].close()

    def close(self) -> None:
        if self.isr_update_task is not None and not self.isr_update_task.done():
            self.isr_update_task.cancel()
        self.is_leader = False  # acks=all waiters fail with NOT_LEADER_OR_FOLLOWER; the client retries elsewhere
        self._wake_hw_waiters()
        self._wake_waiters()
        self.producers.take_snapshot(self.log.log_end_offset)
        self.log.close()


def _control_marker(batch: bytes) -> tuple[int, int]:
    """(type, coordinator epoch) of a whole, uncompressed control batch's marker record."""
    from aiokafka.record.default_records import DefaultRecordBatch  # at the first marker: aiokafka's ~17 ms import

    kind = control_type(batch)
    for record in DefaultRecordBatch(bytes(batch)):
        value = record.value
        return kind, (CONTROL_VALUE.unpack_from(value)[1] if value and len(value) >= CONTROL_VALUE.size else -1)
    raise Errors.CorruptRecordError("control batch without a record")
