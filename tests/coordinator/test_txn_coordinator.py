"""The transaction coordinator core: InitProducerId, AddPartitions, EndTxn, fencing, timeouts and reload.

No sockets and no sleeps: ``__transaction_state`` is real partitions in
tmp_path (``state_topic``), markers go to a recording fake, and time moves
only when a test advances the clock.
"""
from __future__ import annotations

import asyncio

import pytest

from broker_sim.coordinator.group.records import OFFSETS_TOPIC
from broker_sim.coordinator.internal_topic import read_partition
from broker_sim.coordinator.txn.coordinator import (
    CONCURRENT_TRANSACTIONS, INVALID_PRODUCER_EPOCH, INVALID_PRODUCER_ID_MAPPING, INVALID_TRANSACTION_TIMEOUT,
    INVALID_REGULAR_EXPRESSION, INVALID_TXN_STATE, MAX_EPOCH, NONE, OPERATION_NOT_ATTEMPTED, PRODUCER_FENCED,
    TRANSACTIONAL_ID_NOT_FOUND, UNKNOWN_TOPIC_OR_PARTITION, TxnConfig, TxnCoordinator, TxnDescription,
)
from broker_sim.coordinator.txn.records import decode_key, decode_value
from broker_sim.coordinator.txn.service import TxnService
from broker_sim.coordinator.txn.state import (
    COMPLETE_ABORT, COMPLETE_COMMIT, EMPTY, ONGOING, PREPARE_ABORT, PREPARE_COMMIT,
)

TIMEOUT_MS = 60_000
NOT_LEADER = 6
EVENTS = [("events", 0), ("events", 1)]


class RecordingMarkers:
    """Remembers every marker asked for; partitions in ``failing`` answer NOT_LEADER."""

    def __init__(self) -> None:
        self.written: list[tuple[int, int, bool, tuple[str, int]]] = []
        self.failing: set[tuple[str, int]] = set()

    def write_markers(self, producer_id, producer_epoch, coordinator_epoch, commit, partitions):
        results = {}
        for tp in partitions:
            if tp in self.failing:
                results[tp] = NOT_LEADER
            else:
                self.written.append((producer_id, producer_epoch, commit, tp))
                results[tp] = NONE
        return results


class Ids:
    def __init__(self) -> None:
        self.next = 1000

    def __call__(self) -> int:
        self.next += 1
        return self.next


@pytest.fixture
def markers():
    return RecordingMarkers()


@pytest.fixture
def make(state_topic, markers, clock):
    ids = Ids()

    def build(**config) -> TxnCoordinator:
        coordinator = TxnCoordinator(TxnConfig(state_partitions=3, **config), state_topic, markers, clock=clock,
                                     next_producer_id=ids,
                                     partition_exists=lambda t, p: t in ("events", OFFSETS_TOPIC) and 0 <= p < 2)
        coordinator.startup()
        return coordinator

    return build


@pytest.fixture
def coordinator(make):
    return make()


def _stored(topic, txn_id):
    """The last TransactionLogValue written for ``txn_id`` (None: tombstone)."""
    last = "missing"
    for index in range(topic.count):
        for _, key, value in read_partition(topic.partition(index)):
            if decode_key(key) == txn_id:
                last = decode_value(value) if value is not None else None
    return last


def _open_txn(coordinator, txn_id="tx", partitions=EVENTS):
    result = coordinator.init_producer_id(txn_id, TIMEOUT_MS)
    assert result.error == NONE
    errors = coordinator.add_partitions(txn_id, result.producer_id, result.producer_epoch, partitions)
    assert set(errors.values()) == {NONE}
    return result.producer_id, result.producer_epoch


# --- InitProducerId --------------------------------------------------------------------------

def test_first_init_allocates_a_producer_id_at_epoch_zero_and_logs_it_empty(coordinator, state_topic):
    result = coordinator.init_producer_id("tx", TIMEOUT_MS)
    assert (result.error, result.producer_epoch) == (NONE, 0)
    stored = _stored(state_topic, "tx")
    assert (stored.producer_id, stored.producer_epoch, stored.state, stored.timeout_ms) == (
        result.producer_id, 0, EMPTY, TIMEOUT_MS)


def test_reinit_bumps_the_epoch_of_the_same_producer_id(coordinator):
    first = coordinator.init_producer_id("tx", TIMEOUT_MS)
    second = coordinator.init_producer_id("tx", TIMEOUT_MS)
    assert (second.producer_id, second.producer_epoch) == (first.producer_id, 1)
    assert coordinator.init_producer_id("other", TIMEOUT_MS).producer_id != first.producer_id


@pytest.mark.parametrize("timeout_ms", [0, -1, 900_001])
def test_timeouts_outside_1_to_transaction_max_timeout_ms_are_refused(coordinator, timeout_ms):
    assert coordinator.init_producer_id("tx", timeout_ms).error == INVALID_TRANSACTION_TIMEOUT


def test_an_exhausted_epoch_moves_to_a_new_producer_id(coordinator):
    first = coordinator.init_producer_id("tx", TIMEOUT_MS)
    coordinator.transactions["tx"].producer_epoch = MAX_EPOCH - 1
    bumped = coordinator.init_producer_id("tx", TIMEOUT_MS)
    assert bumped.producer_id != first.producer_id and bumped.producer_epoch == 0
    assert coordinator.transactions["tx"].previous_producer_id == first.producer_id


def test_kip360_bump_with_the_current_epoch_and_retry_of_a_lost_answer(coordinator):
    first = coordinator.init_producer_id("tx", TIMEOUT_MS)
    bumped = coordinator.init_producer_id("tx", TIMEOUT_MS, first.producer_id, first.producer_epoch)
    assert bumped.producer_epoch == first.producer_epoch + 1
    # the producer never saw the answer and asks again with its old epoch: same answer, no second bump
    again = coordinator.init_producer_id("tx", TIMEOUT_MS, first.producer_id, first.producer_epoch)
    assert (again.error, again.producer_epoch) == (NONE, bumped.producer_epoch)


def test_kip360_bump_naming_another_producer_or_a_stale_epoch_is_fenced(coordinator):
    first = coordinator.init_producer_id("tx", TIMEOUT_MS)
    coordinator.init_producer_id("tx", TIMEOUT_MS)
    coordinator.init_producer_id("tx", TIMEOUT_MS)
    assert coordinator.init_producer_id("tx", TIMEOUT_MS, first.producer_id + 77, 0).error == PRODUCER_FENCED
    assert coordinator.init_producer_id("tx", TIMEOUT_MS, first.producer_id, 0).error == PRODUCER_FENCED


# --- AddPartitionsToTxn ------------------------------------------------------------------------

def test_adding_partitions_starts_the_transaction_durably(coordinator, state_topic, clock):
    pid, epoch = _open_txn(coordinator)
    txn = coordinator.transactions["tx"]
    assert (txn.state, txn.partitions, txn.start_ms) == (ONGOING, set(EVENTS), clock.now_ms())
    stored = _stored(state_topic, "tx")
    assert (stored.state, stored.partitions) == (ONGOING, frozenset(EVENTS))


def test_adding_an_unknown_partition_fails_the_whole_request(coordinator):
    result = coordinator.init_producer_id("tx", TIMEOUT_MS)
    errors = coordinator.add_partitions("tx", result.producer_id, result.producer_epoch,
                                        [("events", 0), ("nope", 0)])
    assert errors == {("events", 0): OPERATION_NOT_ATTEMPTED, ("nope", 0): UNKNOWN_TOPIC_OR_PARTITION}
    assert coordinator.transactions["tx"].state is EMPTY


def test_requests_with_another_producer_id_or_an_old_epoch_are_refused(coordinator):
    result = coordinator.init_producer_id("tx", TIMEOUT_MS)
    coordinator.init_producer_id("tx", TIMEOUT_MS)
    assert coordinator.add_partitions("tx", result.producer_id, 0, EVENTS) == dict.fromkeys(EVENTS, PRODUCER_FENCED)
    assert coordinator.add_partitions("tx", 4242, 1, EVENTS) == dict.fromkeys(EVENTS, INVALID_PRODUCER_ID_MAPPING)
    assert coordinator.add_partitions("unknown", 4242, 1, EVENTS) == dict.fromkeys(
        EVENTS, INVALID_PRODUCER_ID_MAPPING)


def test_verify_partition_accepts_only_partitions_of_the_ongoing_transaction(coordinator):
    pid, epoch = _open_txn(coordinator, partitions=[("events", 0)])
    assert coordinator.verify_partition("tx", pid, epoch, "events", 0) == NONE
    assert coordinator.verify_partition("tx", pid, epoch, "events", 1) == INVALID_TXN_STATE
    assert coordinator.verify_partition("tx", pid, epoch - 1, "events", 0) == INVALID_PRODUCER_EPOCH
    assert coordinator.verify_partition("tx", pid + 1, epoch, "events", 0) == INVALID_TXN_STATE


def test_verification_can_be_switched_off(make):
    coordinator = make(partition_verification=False)
    assert coordinator.verify_partition("nobody", 1, 0, "events", 0) == NONE


def test_add_offsets_adds_the_groups_offsets_partition(coordinator):
    result = coordinator.init_producer_id("tx", TIMEOUT_MS)
    assert coordinator.add_offsets("tx", result.producer_id, result.producer_epoch, "group", 1) == NONE
    assert coordinator.transactions["tx"].partitions == {(OFFSETS_TOPIC, 1)}


# --- EndTxn --------------------------------------------------------------------------------------

def test_commit_writes_commit_markers_to_every_partition_then_completes(coordinator, markers, state_topic):
    pid, epoch = _open_txn(coordinator)
    assert coordinator.end_transaction("tx", pid, epoch, commit=True) == NONE
    assert markers.written == [(pid, epoch, True, tp) for tp in EVENTS]
    txn = coordinator.transactions["tx"]
    assert (txn.state, txn.partitions) == (COMPLETE_COMMIT, set())
    assert _stored(state_topic, "tx").state is COMPLETE_COMMIT


def test_abort_writes_abort_markers(coordinator, markers):
    pid, epoch = _open_txn(coordinator)
    assert coordinator.end_transaction("tx", pid, epoch, commit=False) == NONE
    assert markers.written == [(pid, epoch, False, tp) for tp in EVENTS]
    assert coordinator.transactions["tx"].state is COMPLETE_ABORT


def test_end_txn_retries_and_mismatches(coordinator):
    pid, epoch = _open_txn(coordinator)
    coordinator.end_transaction("tx", pid, epoch, commit=True)
    assert coordinator.end_transaction("tx", pid, epoch, commit=True) == NONE  # a retry
    assert coordinator.end_transaction("tx", pid, epoch, commit=False) == INVALID_TXN_STATE
    fresh = coordinator.init_producer_id("fresh", TIMEOUT_MS)
    assert coordinator.end_transaction("fresh", fresh.producer_id, fresh.producer_epoch, True) == INVALID_TXN_STATE


def test_a_new_transaction_starts_after_a_completed_one(coordinator, markers):
    pid, epoch = _open_txn(coordinator)
    coordinator.end_transaction("tx", pid, epoch, commit=True)
    assert coordinator.add_partitions("tx", pid, epoch, [("events", 1)]) == {("events", 1): NONE}
    assert coordinator.transactions["tx"].partitions == {("events", 1)}


def test_unwritten_markers_keep_the_transaction_preparing_until_a_retry_succeeds(coordinator, markers):
    pid, epoch = _open_txn(coordinator)
    markers.failing = {("events", 1)}
    assert coordinator.end_transaction("tx", pid, epoch, commit=True) == NONE
    txn = coordinator.transactions["tx"]
    assert (txn.state, txn.partitions) == (PREPARE_COMMIT, {("events", 1)})
    assert coordinator.end_transaction("tx", pid, epoch, commit=True) == CONCURRENT_TRANSACTIONS
    assert coordinator.add_partitions("tx", pid, epoch, EVENTS) == dict.fromkeys(EVENTS, CONCURRENT_TRANSACTIONS)
    assert coordinator.init_producer_id("tx", TIMEOUT_MS).error == CONCURRENT_TRANSACTIONS
    markers.failing = set()
    coordinator.retry_markers()
    assert txn.state is COMPLETE_COMMIT
    assert [m[3] for m in markers.written] == [("events", 0), ("events", 1)]


# --- fencing ----------------------------------------------------------------------------------------

def test_a_new_instance_fences_the_zombie_and_aborts_its_open_transaction(coordinator, markers):
    pid, epoch = _open_txn(coordinator)
    result = coordinator.init_producer_id("tx", TIMEOUT_MS)
    assert (result.error, result.producer_id, result.producer_epoch) == (NONE, pid, epoch + 2)
    # the abort markers carry the fencing epoch, so every partition the zombie wrote to refuses it
    assert markers.written == [(pid, epoch + 1, False, tp) for tp in EVENTS]
    assert coordinator.transactions["tx"].state is EMPTY
    assert coordinator.add_partitions("tx", pid, epoch, EVENTS) == dict.fromkeys(EVENTS, PRODUCER_FENCED)
    assert coordinator.end_transaction("tx", pid, epoch, commit=True) == PRODUCER_FENCED


def test_fencing_answers_concurrent_transactions_while_abort_markers_are_pending(coordinator, markers):
    _open_txn(coordinator)
    markers.failing = {("events", 0)}
    assert coordinator.init_producer_id("tx", TIMEOUT_MS).error == CONCURRENT_TRANSACTIONS
    markers.failing = set()
    coordinator.retry_markers()
    assert coordinator.init_producer_id("tx", TIMEOUT_MS).error == NONE


# --- timeouts and expiry ---------------------------------------------------------------------------------

def test_a_transaction_older_than_its_timeout_is_aborted_and_its_producer_fenced(coordinator, markers, clock):
    pid, epoch = _open_txn(coordinator)
    clock.advance(ms=TIMEOUT_MS)
    assert coordinator.abort_timed_out() == []  # not older than its timeout yet
    clock.advance(ms=1)
    assert coordinator.abort_timed_out() == ["tx"]
    assert markers.written == [(pid, epoch + 1, False, tp) for tp in EVENTS]
    txn = coordinator.transactions["tx"]
    assert (txn.state, txn.producer_epoch) == (COMPLETE_ABORT, epoch + 1)
    assert coordinator.end_transaction("tx", pid, epoch, commit=True) == PRODUCER_FENCED
    assert coordinator.init_producer_id("tx", TIMEOUT_MS).producer_epoch == epoch + 2


def test_idle_transactional_ids_expire_with_a_tombstone(make, state_topic, clock):
    coordinator = make(id_expiration_ms=1000)
    pid, epoch = _open_txn(coordinator, "busy")
    coordinator.init_producer_id("idle", TIMEOUT_MS)
    clock.advance(ms=1000)
    assert coordinator.expire_transactional_ids() == ["idle"]
    assert "idle" not in coordinator.transactions and "busy" in coordinator.transactions
    assert _stored(state_topic, "idle") is None


# --- reload -----------------------------------------------------------------------------------------------

def test_reload_restores_ids_and_an_ongoing_transaction_can_still_commit(make, state_topic, markers):
    pid, epoch = _open_txn(make())
    state_topic.reopen()
    reloaded = make()
    txn = reloaded.transactions["tx"]
    assert (txn.producer_id, txn.producer_epoch, txn.state, txn.partitions) == (pid, epoch, ONGOING, set(EVENTS))
    assert reloaded.end_transaction("tx", pid, epoch, commit=True) == NONE
    assert txn.state is COMPLETE_COMMIT


def test_reload_completes_a_commit_interrupted_between_prepare_and_complete(make, state_topic, markers):
    coordinator = make()
    pid, epoch = _open_txn(coordinator)
    markers.failing = set(EVENTS)
    coordinator.end_transaction("tx", pid, epoch, commit=True)
    assert coordinator.transactions["tx"].state is PREPARE_COMMIT
    state_topic.reopen()
    markers.failing = set()
    reloaded = make()
    assert reloaded.transactions["tx"].state is COMPLETE_COMMIT
    assert markers.written == [(pid, epoch, True, tp) for tp in EVENTS]


def test_an_ongoing_transaction_reloaded_still_times_out(make, state_topic, clock):
    _open_txn(make())
    state_topic.reopen()
    reloaded = make()
    clock.advance(ms=TIMEOUT_MS + 1)
    assert reloaded.abort_timed_out() == ["tx"]


# --- admin -------------------------------------------------------------------------------------------------

def test_list_and_describe(coordinator, clock):
    pid, epoch = _open_txn(coordinator, "b")
    other = coordinator.init_producer_id("a", TIMEOUT_MS)
    a, b = ("a", other.producer_id, "Empty"), ("b", pid, "Ongoing")
    assert coordinator.list_transactions() == (NONE, [a, b])
    assert coordinator.list_transactions(states=[ONGOING]) == (NONE, [b])
    assert coordinator.list_transactions(producer_ids=[other.producer_id]) == (NONE, [a])
    # Kafka's pattern matches the whole id (Java's Matcher.matches); an empty one matches every id
    assert coordinator.list_transactions(pattern="a") == (NONE, [a])
    assert coordinator.list_transactions(pattern="") == (NONE, [a, b])
    assert coordinator.list_transactions(pattern="(") == (INVALID_REGULAR_EXPRESSION, [])
    clock.advance(ms=500)
    # the duration filter keeps ids whose last transaction started more than that long ago; an id that never
    # started one (start -1) always passes it, as in Kafka
    assert coordinator.list_transactions(min_duration_ms=499) == (NONE, [a, b])
    assert coordinator.list_transactions(min_duration_ms=500) == (NONE, [a])
    described = coordinator.describe("b")
    assert (described.state, described.producer_id, described.producer_epoch, described.partitions,
            described.start_ms) == ("Ongoing", pid, epoch, tuple(EVENTS), clock.now_ms() - 500)
    assert coordinator.describe("a").start_ms == -1
    coordinator.end_transaction("b", pid, epoch, commit=True)
    assert coordinator.describe("b").start_ms == clock.now_ms() - 500, "a completed transaction keeps its start"
    assert coordinator.describe("nope") == TxnDescription("nope", TRANSACTIONAL_ID_NOT_FOUND)


def test_the_service_timer_pass_aborts_retries_markers_and_expires_ids(state_topic, markers, clock):
    service = TxnService(TxnConfig(state_partitions=3, id_expiration_ms=10 * TIMEOUT_MS), state_topic, markers,
                         clock=clock, next_producer_id=Ids(),
                         partition_exists=lambda t, p: t == "events", expiration_interval_ms=TIMEOUT_MS)
    service.startup()

    async def open_txn():  # the service's requests that write are coroutines
        init = await service.init_producer_id("late", TIMEOUT_MS)
        errors = await service.add_partitions("late", init.producer_id, init.producer_epoch, EVENTS)
        assert set(errors.values()) == {NONE}
        return init.producer_id, init.producer_epoch

    pid, epoch = asyncio.run(open_txn())
    markers.failing = {("events", 0)}
    clock.advance(ms=TIMEOUT_MS + 1)
    next_expiry = service.tick(clock.now_ms() + TIMEOUT_MS)
    assert service.transactions["late"].state is PREPARE_ABORT
    markers.failing = set()
    clock.advance(ms=10 * TIMEOUT_MS)
    service.tick(next_expiry)  # finishes the abort ...
    assert service.transactions["late"].state is COMPLETE_ABORT
    clock.advance(ms=10 * TIMEOUT_MS)
    service.tick(clock.now_ms())  # ... and the id, idle since, expires
    assert "late" not in service.transactions
