"""The transaction state table: Kafka's, and what only transactions have (every move is tested in
test_state_machines)."""
from __future__ import annotations

import pytest

from broker_sim.coordinator.state_machine import IllegalStateTransition, check_transition
from broker_sim.coordinator.txn.state import (
    ALLOWED_TRANSITIONS, BY_STATUS, COMPLETE, COMPLETE_ABORT, COMPLETE_COMMIT, DEAD, EMPTY, ONGOING, PREPARE_ABORT,
    PREPARE_COMMIT, PREPARE_EPOCH_FENCE, PREPARING, STATUS, TxnState, parse_state,
)


def test_table_is_kafkas_valid_previous_states():
    assert ALLOWED_TRANSITIONS == {
        EMPTY: {EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT},
        ONGOING: {ONGOING, EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT},
        PREPARE_COMMIT: {ONGOING},
        PREPARE_ABORT: {ONGOING, PREPARE_EPOCH_FENCE},
        COMPLETE_COMMIT: {PREPARE_COMMIT},
        COMPLETE_ABORT: {PREPARE_ABORT},
        DEAD: {EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT},
        PREPARE_EPOCH_FENCE: {ONGOING},
    }


def test_preparing_and_complete_states_split_the_ones_with_markers_pending_from_the_idle_ones():
    assert PREPARING == {PREPARE_COMMIT, PREPARE_ABORT, PREPARE_EPOCH_FENCE}
    assert COMPLETE == {EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT}
    assert not PREPARING & COMPLETE


def test_a_commit_cannot_turn_into_an_abort_once_prepared():
    with pytest.raises(IllegalStateTransition):
        check_transition(ALLOWED_TRANSITIONS, PREPARE_COMMIT, PREPARE_ABORT)


def test_status_bytes_are_kafkas_transaction_state_ids():
    assert [STATUS[s] for s in (EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT, DEAD,
                                PREPARE_EPOCH_FENCE)] == list(range(8))
    assert all(BY_STATUS[STATUS[state]] is state for state in TxnState)


def test_state_names_parse_as_list_transactions_spells_them():
    assert parse_state("Ongoing") is ONGOING
    assert parse_state("CompleteAbort") is COMPLETE_ABORT
    assert parse_state("nonsense") is None
    assert str(PREPARE_EPOCH_FENCE) == "PrepareEpochFence"
