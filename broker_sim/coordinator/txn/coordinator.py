"""The transaction coordinator: every transactional id this broker coordinates, without I/O of its own.

Theory of operation: ``TxnCoordinator`` is the synchronous core behind
InitProducerId (with a transactional id), AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn, ListTransactions and DescribeTransactions (Kafka's
``TransactionCoordinator`` + ``TransactionStateManager``).  It keeps one
``TxnMetadata`` per transactional id and moves it through ``txn.state``'s
table.  Every change is written to ``__transaction_state`` (Kafka's record
format, ``txn.records``) *before* it is applied in memory and answered, so
a failed write leaves the old state and the client retries; the asyncio
layer, ``txn.service.TxnService``, answers once the ISR has the write.

A transaction ends in two logged steps, as in Kafka: ``PrepareCommit`` /
``PrepareAbort`` is written, then markers are written to every partition of
the transaction through the ``MarkerWriter`` seam, then ``CompleteCommit`` /
``CompleteAbort`` is written.  On a single node the writer appends to the
local partitions synchronously, so EndTxn answers with the transaction
complete; when a marker cannot be written the transaction stays in its
Prepare state, requests for it get CONCURRENT_TRANSACTIONS, and
``retry_markers`` (the service's timer) tries again.  A broker that restarts
with a transaction in a Prepare state completes it the same way on load.

Fencing: InitProducerId for an id bumps its epoch (a new producer id once
the epoch is exhausted); older epochs get PRODUCER_FENCED (INVALID_PRODUCER_EPOCH
on versions before the error existed — the handlers map it).  When the id has
an Ongoing transaction, the coordinator first fences it (``PrepareEpochFence``:
epoch + 1), aborts it with the fenced epoch, so the markers fence the old
instance in every partition it wrote to, then bumps again for the new
instance.  ``abort_timed_out`` does the same fence-and-abort for Ongoing
transactions older than their timeout.

Time comes from the injected ``clock``.  Runs on the broker's event loop thread.
"""
from __future__ import annotations

import dataclasses
import logging
import re
from dataclasses import dataclass, field
from typing import Callable, Iterable, Protocol

import kafka.errors as Errors

from broker_sim.coordinator.group.records import OFFSETS_TOPIC
from broker_sim.coordinator.internal_topic import InternalTopic, InternalTopicOwner, read_partition
from broker_sim.coordinator.state_machine import check_transition
from broker_sim.coordinator.txn.records import (
    TRANSACTION_STATE_TOPIC, StoredTxn, decode_key, decode_value, encode_key, encode_value,
)
from broker_sim.coordinator.txn.state import (
    ALLOWED_TRANSITIONS, COMPLETE, COMPLETE_ABORT, COMPLETE_COMMIT, DEAD, EMPTY, ONGOING, PREPARE_ABORT,
    PREPARE_COMMIT, PREPARE_EPOCH_FENCE, PREPARING, TxnState,
)

log = logging.getLogger(__name__)

NONE = 0
NOT_COORDINATOR = Errors.NotCoordinatorError.errno
COORDINATOR_NOT_AVAILABLE = Errors.CoordinatorNotAvailableError.errno
CONCURRENT_TRANSACTIONS = Errors.ConcurrentTransactionsError.errno
INVALID_REQUEST = Errors.InvalidRequestError.errno
INVALID_TRANSACTION_TIMEOUT = Errors.InvalidTransactionTimeoutError.errno
INVALID_PRODUCER_ID_MAPPING = Errors.InvalidProducerIdMappingError.errno
INVALID_PRODUCER_EPOCH = Errors.InvalidProducerEpochError.errno
PRODUCER_FENCED = Errors.ProducerFencedError.errno
INVALID_TXN_STATE = Errors.InvalidTxnStateError.errno
UNKNOWN_TOPIC_OR_PARTITION = Errors.UnknownTopicOrPartitionError.errno
OPERATION_NOT_ATTEMPTED = Errors.OperationNotAttemptedError.errno
TRANSACTIONAL_ID_NOT_FOUND = Errors.TransactionalIdNotFoundError.errno
TRANSACTION_ABORTABLE = Errors.TransactionAbortableError.errno
INVALID_REGULAR_EXPRESSION = 128  # kafka-python names no error for it

MAX_EPOCH = 32767
NO_PRODUCER_ID = -1
NO_EPOCH = -1


def epoch_exhausted(epoch: int) -> bool:
    """Kafka's ``isEpochExhausted``: one more bump must stay below Short.MAX_VALUE (fencing needs a spare)."""
    return epoch >= MAX_EPOCH - 1


@dataclass(frozen=True)
class TxnConfig:
    """The broker configs the coordinator reads (Kafka's names in ``broker_sim.config``)."""

    state_partitions: int = 50
    max_timeout_ms: int = 900_000
    id_expiration_ms: int = 604_800_000
    partition_verification: bool = True


@dataclass
class TxnMetadata:
    """One transactional id (Kafka's ``TransactionMetadata``)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = EMPTY
    partitions: set[tuple[str, int]] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    previous_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_EPOCH  # the epoch before the last bump: a lost InitProducerId answer's retry

    def stored(self) -> StoredTxn:
        return StoredTxn(self.producer_id, self.producer_epoch, self.timeout_ms, self.state,
                         frozenset(self.partitions), self.last_update_ms, self.start_ms, self.previous_producer_id)

    @classmethod
    def restored(cls, transactional_id: str, stored: StoredTxn) -> "TxnMetadata":
        return cls(transactional_id, stored.producer_id, stored.producer_epoch, stored.timeout_ms, stored.state,
                   set(stored.partitions), stored.start_ms, stored.last_update_ms, stored.previous_producer_id)


@dataclass(frozen=True)
class InitResult:
    error: int
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_EPOCH


@dataclass(frozen=True)
class TxnDescription:
    """One id as DescribeTransactions answers it; with an error, Kafka leaves every other field unset (0)."""
    transactional_id: str
    error: int
    state: str = ""
    timeout_ms: int = 0
    start_ms: int = 0
    producer_id: int = 0
    producer_epoch: int = 0
    partitions: tuple[tuple[str, int], ...] = ()


class MarkerWriter(Protocol):
    """Writes a transaction's COMMIT/ABORT markers (WriteTxnMarkers; local partitions on a single node)."""

    def write_markers(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                      partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """Error code per partition; NONE or UNKNOWN_TOPIC_OR_PARTITION (gone for good) count as done."""


class TxnCoordinator(InternalTopicOwner):
    TOPIC = TRANSACTION_STATE_TOPIC
    # Kafka's TransactionStateManager: append errors as transaction APIs answer them
    APPEND_ERRORS = {
        Errors.UnknownTopicOrPartitionError.errno: COORDINATOR_NOT_AVAILABLE,
        Errors.NotEnoughReplicasError.errno: COORDINATOR_NOT_AVAILABLE,
        Errors.NotEnoughReplicasAfterAppendError.errno: COORDINATOR_NOT_AVAILABLE,
        Errors.RequestTimedOutError.errno: COORDINATOR_NOT_AVAILABLE,
        Errors.NotLeaderForPartitionError.errno: NOT_COORDINATOR,
        Errors.KafkaStorageError.errno: NOT_COORDINATOR,
    }

    def __init__(self, config: TxnConfig, topic: InternalTopic, markers: MarkerWriter, *,
                 clock: Callable[[], int], next_producer_id: Callable[[], int],
                 partition_exists: Callable[[str, int], bool]) -> None:
        super().__init__(topic, clock)
        self.config = config
        self.markers = markers
        self.next_producer_id = next_producer_id
        self.partition_exists = partition_exists
        self.transactions: dict[str, TxnMetadata] = {}

    @property
    def default_partitions(self) -> int:
        return self.config.state_partitions

    def load_partition(self, partition) -> int:
        """Rebuild the transactional ids kept in one partition and finish their interrupted commits and aborts.

        Returns the number of ids loaded.  A record that cannot be decoded
        (unknown key version, truncated value, unknown status) or that names an
        id of another partition is logged with its offset and skipped.
        """
        stored: dict[str, StoredTxn | None] = {}
        for offset, raw_key, raw_value in read_partition(partition):
            try:
                transactional_id = decode_key(raw_key)
                if self.partition_of(transactional_id) != partition.index:
                    raise ValueError(f"transactional id {transactional_id!r} belongs to partition "
                                     f"{self.partition_of(transactional_id)}")
                stored[transactional_id] = decode_value(raw_value) if raw_value is not None else None
            except ValueError as exc:
                log.warning("%s-%d: skipping the record at offset %d: %s", TRANSACTION_STATE_TOPIC,
                            partition.index, offset, exc)
        loaded = [TxnMetadata.restored(txn_id, value) for txn_id, value in stored.items()
                  if value is not None and value.state is not DEAD]
        for txn in loaded:
            self.transactions[txn.transactional_id] = txn
        self.loaded.add(partition.index)
        log.info("loaded %d transactional ids from %s-%d", len(loaded), TRANSACTION_STATE_TOPIC, partition.index)
        for txn in loaded:
            if txn.state in (PREPARE_COMMIT, PREPARE_ABORT):
                self._send_markers(txn)
        return len(loaded)

    def unload_partition(self, index: int) -> None:
        """Forget the ids of a partition this broker no longer leads."""
        self.loaded.discard(index)
        for txn_id in [t for t in self.transactions if self.partition_of(t) == index]:
            del self.transactions[txn_id]

    def find_coordinator(self, transactional_id: str) -> int:
        self.ensure_topic()
        return NONE if self.is_coordinator(transactional_id) else NOT_COORDINATOR

    def coordinator_epoch(self, transactional_id: str) -> int:
        """Kafka's coordinator epoch: the leader epoch of the id's ``__transaction_state`` partition."""
        return self.topic.partition(self.partition_of(transactional_id)).leader_epoch

    # --- InitProducerId -----------------------------------------------------------------
    def init_producer_id(self, transactional_id: str, timeout_ms: int, expected_producer_id: int = NO_PRODUCER_ID,
                         expected_epoch: int = NO_EPOCH) -> InitResult:
        """A producer id and epoch for a transactional producer; fences every older instance of the id.

        ``expected_*`` are InitProducerId v3+'s fields (KIP-360): a producer
        resuming after an abortable error names its current id and epoch.
        """
        if not transactional_id:
            return InitResult(INVALID_REQUEST)
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return InitResult(INVALID_TRANSACTION_TIMEOUT)
        error = self._coordinator_error(transactional_id)
        if error:
            return InitResult(error)
        now = self.clock()
        txn = self.transactions.get(transactional_id)
        if txn is None:
            txn = TxnMetadata(transactional_id, self.next_producer_id(), NO_EPOCH, timeout_ms, EMPTY,
                              last_update_ms=now)
            self.transactions[transactional_id] = txn  # durable once the Empty state below is written
            result = self._bump(txn, timeout_ms, None, now)
            if result.error:
                del self.transactions[transactional_id]
            return result
        expected = (expected_producer_id, expected_epoch) if expected_producer_id >= 0 else None
        if expected is not None and not (txn.producer_epoch == NO_EPOCH or expected[0] == txn.producer_id
                                         or (expected[0] == txn.previous_producer_id
                                             and epoch_exhausted(expected[1]))):
            return InitResult(PRODUCER_FENCED)
        if txn.state in PREPARING:
            return InitResult(CONCURRENT_TRANSACTIONS)
        if txn.state is ONGOING:
            error = self._fence_and_abort(txn)
            if error:
                return InitResult(error)
            if txn.state is not COMPLETE_ABORT:
                return InitResult(CONCURRENT_TRANSACTIONS)  # markers still to write: the client retries
        return self._bump(txn, timeout_ms, expected, now)

    def _bump(self, txn: TxnMetadata, timeout_ms: int, expected: tuple[int, int] | None, now: int) -> InitResult:
        """Kafka's ``prepareIncrementProducerEpoch`` + the Empty state written: the new instance's id and epoch."""
        if expected is not None and expected[1] != NO_EPOCH and expected[1] != txn.producer_epoch:
            if expected[1] == txn.last_producer_epoch or (expected[0] == txn.previous_producer_id
                                                          and epoch_exhausted(expected[1])):
                return InitResult(NONE, txn.producer_id, txn.producer_epoch)  # retry of a bump we already made
            return InitResult(PRODUCER_FENCED)
        changes = dict(state=EMPTY, timeout_ms=timeout_ms, partitions=set(), start_ms=-1, last_update_ms=now)
        if epoch_exhausted(txn.producer_epoch):
            changes.update(producer_id=self.next_producer_id(), producer_epoch=0,
                           previous_producer_id=txn.producer_id, last_producer_epoch=NO_EPOCH)
        else:
            changes.update(producer_epoch=txn.producer_epoch + 1, last_producer_epoch=txn.producer_epoch)
        error = self._transit(txn, **changes)
        if error:
            return InitResult(error)
        return InitResult(NONE, txn.producer_id, txn.producer_epoch)

    # --- AddPartitionsToTxn / AddOffsetsToTxn ---------------------------------------------
    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: list[tuple[str, int]], *, verify_only: bool = False) -> dict[tuple[str, int], int]:
        """Error code per partition; the partitions are part of the transaction (durably) on success.

        ``verify_only`` (AddPartitionsToTxn v4+, a partition leader asking before a transactional write) only
        checks they already are: TRANSACTION_ABORTABLE for a partition that is not (KIP-890), so the producer
        aborts rather than writes outside its transaction.
        """
        missing = [tp for tp in partitions if not self.partition_exists(*tp)]
        if missing:
            return {tp: UNKNOWN_TOPIC_OR_PARTITION if tp in missing else OPERATION_NOT_ATTEMPTED for tp in partitions}
        txn, error = self._check_producer(transactional_id, producer_id, producer_epoch)
        if not error and txn.state in PREPARING:
            error = CONCURRENT_TRANSACTIONS
        if not error and verify_only:
            return {tp: NONE if tp in txn.partitions else TRANSACTION_ABORTABLE for tp in partitions}
        if not error and not (txn.state is ONGOING and txn.partitions.issuperset(partitions)):
            now = self.clock()
            error = self._transit(txn, state=ONGOING, partitions=txn.partitions | set(partitions),
                                  start_ms=txn.start_ms if txn.state is ONGOING else now, last_update_ms=now)
        return {tp: error for tp in partitions}

    def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str,
                    offsets_partition: int) -> int:
        """AddOffsetsToTxn: the group's ``__consumer_offsets`` partition joins the transaction."""
        if not group_id:
            return Errors.InvalidGroupIdError.errno
        tp = (OFFSETS_TOPIC, offsets_partition)
        txn, error = self._check_producer(transactional_id, producer_id, producer_epoch)
        if not error and txn.state in PREPARING:
            error = CONCURRENT_TRANSACTIONS
        if not error and not (txn.state is ONGOING and tp in txn.partitions):
            now = self.clock()
            error = self._transit(txn, state=ONGOING, partitions=txn.partitions | {tp},
                                  start_ms=txn.start_ms if txn.state is ONGOING else now, last_update_ms=now)
        return error

    def verify_partition(self, transactional_id: str, producer_id: int, producer_epoch: int, topic: str,
                         partition: int) -> int:
        """Whether a transactional produce (or offset commit) may write to a partition (KIP-890 verification).

        NONE when the id's Ongoing transaction includes the partition; INVALID_PRODUCER_EPOCH for an
        older epoch; INVALID_TXN_STATE otherwise.  Ids another broker coordinates are not checked here.
        """
        if not self.config.partition_verification or not self.is_coordinator(transactional_id):
            return NONE
        txn = self.transactions.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return INVALID_TXN_STATE
        if producer_epoch != txn.producer_epoch:
            return INVALID_PRODUCER_EPOCH
        return NONE if txn.state is ONGOING and (topic, partition) in txn.partitions else INVALID_TXN_STATE

    # --- EndTxn ----------------------------------------------------------------------------
    def end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool) -> int:
        """Commit or abort the id's transaction: Prepare state logged, markers written, Complete state logged."""
        txn, error = self._check_producer(transactional_id, producer_id, producer_epoch)
        if error:
            return error
        wanted = COMPLETE_COMMIT if commit else COMPLETE_ABORT
        preparing = PREPARE_COMMIT if commit else PREPARE_ABORT
        if txn.state is ONGOING:
            error = self._transit(txn, state=preparing, last_update_ms=self.clock())
            if not error:
                self._send_markers(txn)
            return error
        if txn.state is wanted:
            return NONE  # a retry of an EndTxn that completed
        if txn.state is preparing:
            return CONCURRENT_TRANSACTIONS
        return INVALID_TXN_STATE

    def _fence_and_abort(self, txn: TxnMetadata) -> int:
        """Fence an Ongoing transaction's producer (epoch + 1) and abort the transaction with that epoch."""
        if epoch_exhausted(txn.producer_epoch):
            # no epoch left to fence with: abort with the current one; the next bump gets a new producer id
            fenced_epoch = txn.producer_epoch
        else:
            fenced_epoch = txn.producer_epoch + 1
        check_transition(ALLOWED_TRANSITIONS, txn.state, PREPARE_EPOCH_FENCE)  # in memory only, as in Kafka
        check_transition(ALLOWED_TRANSITIONS, PREPARE_EPOCH_FENCE, PREPARE_ABORT)
        error = self._transit(txn, state=PREPARE_ABORT, producer_epoch=fenced_epoch,
                              last_producer_epoch=txn.producer_epoch, last_update_ms=self.clock(), checked=True)
        if not error:
            self._send_markers(txn)
        return error

    def _send_markers(self, txn: TxnMetadata) -> None:
        """Write the markers of a Prepare state; move to the Complete state once every partition has one."""
        commit = txn.state is PREPARE_COMMIT
        results = self.markers.write_markers(txn.producer_id, txn.producer_epoch,
                                             self.coordinator_epoch(txn.transactional_id), commit,
                                             sorted(txn.partitions))
        pending = {tp for tp, error in results.items() if error not in (NONE, UNKNOWN_TOPIC_OR_PARTITION)}
        if pending:
            log.warning("transaction %s: markers not written yet to %s; will retry", txn.transactional_id,
                        sorted(pending))
            txn.partitions = pending  # as Kafka's DescribeTransactions: only partitions still without markers
            return
        error = self._transit(txn, state=COMPLETE_COMMIT if commit else COMPLETE_ABORT, partitions=set(),
                              last_update_ms=self.clock())
        if error:
            log.warning("transaction %s: could not log its completion (error %d); will retry",
                        txn.transactional_id, error)

    # --- time-driven work -----------------------------------------------------------------------
    def abort_timed_out(self) -> list[str]:
        """Fence and abort every Ongoing transaction older than its timeout; returns the ids aborted."""
        now = self.clock()
        aborted = []
        for txn in list(self.transactions.values()):
            if txn.state is ONGOING and txn.start_ms + txn.timeout_ms < now and self.is_coordinator(
                    txn.transactional_id):
                log.info("aborting transaction %s of producer %d epoch %d: open for %d ms, timeout %d ms",
                         txn.transactional_id, txn.producer_id, txn.producer_epoch, now - txn.start_ms,
                         txn.timeout_ms)
                if not self._fence_and_abort(txn):
                    aborted.append(txn.transactional_id)
        return aborted

    def retry_markers(self) -> None:
        """Try again the markers of transactions stuck in a Prepare state (and log their completion)."""
        for txn in list(self.transactions.values()):
            if txn.state in (PREPARE_COMMIT, PREPARE_ABORT) and self.is_coordinator(txn.transactional_id):
                self._send_markers(txn)

    def expire_transactional_ids(self) -> list[str]:
        """Remove ids idle (no open transaction) for transactional.id.expiration.ms; returns the ids removed."""
        now = self.clock()
        expired = []
        for txn_id, txn in list(self.transactions.items()):
            if (txn.state in COMPLETE and now - txn.last_update_ms >= self.config.id_expiration_ms
                    and self.is_coordinator(txn_id)):
                check_transition(ALLOWED_TRANSITIONS, txn.state, DEAD)
                if not self._write(txn_id, None):
                    del self.transactions[txn_id]
                    expired.append(txn_id)
        return expired

    # --- admin ---------------------------------------------------------------------------------
    def list_transactions(self, states: Iterable[TxnState] = (), producer_ids: Iterable[int] = (),
                          min_duration_ms: int = -1, pattern: str | None = None
                          ) -> tuple[int, list[tuple[str, int, str]]]:
        """(error, [(transactional id, producer id, state)]) of the ids this broker coordinates, filtered as
        Kafka's ``listTransactionStates``: ``min_duration_ms`` keeps those whose last transaction started longer
        ago than that (whatever their state), ``pattern`` must match the whole id (an empty one matches every id;
        one that is no regular expression answers INVALID_REGULAR_EXPRESSION)."""
        wanted_states, wanted_ids = set(states), set(producer_ids)
        try:
            regex = re.compile(pattern) if pattern else None
        except re.error:
            return INVALID_REGULAR_EXPRESSION, []
        now = self.clock()
        return NONE, [(t.transactional_id, t.producer_id, str(t.state)) for _, t in sorted(self.transactions.items())
                      if self.is_coordinator(t.transactional_id)
                      and (not wanted_states or t.state in wanted_states)
                      and (not wanted_ids or t.producer_id in wanted_ids)
                      and (min_duration_ms < 0 or now - t.start_ms > min_duration_ms)
                      and (regex is None or regex.fullmatch(t.transactional_id))]

    def describe(self, transactional_id: str) -> TxnDescription:
        error = self._coordinator_error(transactional_id)
        txn = self.transactions.get(transactional_id)
        if not error and txn is None:
            error = TRANSACTIONAL_ID_NOT_FOUND
        if error:
            return TxnDescription(transactional_id, error)
        # the start time stays that of the last transaction once it completed, as in Kafka
        return TxnDescription(transactional_id, NONE, str(txn.state), txn.timeout_ms, txn.start_ms, txn.producer_id,
                              txn.producer_epoch, tuple(sorted(txn.partitions)))

    # --- helpers ----------------------------------------------------------------------------------
    def _coordinator_error(self, transactional_id: str) -> int:
        if not self.topic.exists():
            self.ensure_topic()
        return NONE if self.is_coordinator(transactional_id) else NOT_COORDINATOR

    def _check_producer(self, transactional_id: str, producer_id: int,
                        producer_epoch: int) -> tuple[TxnMetadata | None, int]:
        """The id's metadata, or the error Kafka answers a request naming this producer id and epoch."""
        if not transactional_id:
            return None, INVALID_REQUEST
        error = self._coordinator_error(transactional_id)
        if error:
            return None, error
        txn = self.transactions.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return None, INVALID_PRODUCER_ID_MAPPING
        if producer_epoch != txn.producer_epoch:
            return None, PRODUCER_FENCED
        return txn, NONE

    def _transit(self, txn: TxnMetadata, *, checked: bool = False, **changes) -> int:
        """Write ``txn`` with ``changes`` to the log, then apply them; NONE or the error to answer."""
        if not checked and "state" in changes:
            check_transition(ALLOWED_TRANSITIONS, txn.state, changes["state"])
        updated = dataclasses.replace(txn, **changes)
        error = self._write(txn.transactional_id, encode_value(updated.stored()))
        if not error:
            for name, value in changes.items():
                setattr(txn, name, value)
        return error

    def _write(self, transactional_id: str, value: bytes | None) -> int:
        """Append the id's record (``value`` None: its tombstone); NONE or the error to answer."""
        return self.append(transactional_id, [(encode_key(transactional_id), value)])
