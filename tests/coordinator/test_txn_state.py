"""The transaction state table, driven directly (as h11's tests drive its state tables)."""
from __future__ import annotations

import itertools

import pytest

from broker_sim.coordinator.txn_state import (
    ALLOWED_TRANSITIONS, BY_STATUS, COMPLETE_ABORT, COMPLETE_COMMIT, DEAD, EMPTY, ONGOING, PREPARE_ABORT,
    PREPARE_COMMIT, PREPARE_EPOCH_FENCE, STATUS, IllegalStateTransition, TxnState, check_transition, parse_state,
)

LEGAL = [(source, target) for target, sources in ALLOWED_TRANSITIONS.items() for source in sources]
ILLEGAL = [(s, t) for s, t in itertools.product(TxnState, TxnState) if (s, t) not in LEGAL]


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


@pytest.mark.parametrize("source,target", LEGAL, ids=lambda s: str(s))
def test_every_legal_transition_is_allowed(source, target):
    assert check_transition(source, target) is target


@pytest.mark.parametrize("source,target", ILLEGAL, ids=lambda s: str(s))
def test_every_other_transition_raises(source, target):
    with pytest.raises(IllegalStateTransition, match=f"from {source} to {target}"):
        check_transition(source, target)


def test_a_commit_cannot_turn_into_an_abort_once_prepared():
    with pytest.raises(IllegalStateTransition):
        check_transition(PREPARE_COMMIT, PREPARE_ABORT)


def test_status_bytes_are_kafkas_transaction_state_ids():
    assert [STATUS[s] for s in (EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT, DEAD,
                                PREPARE_EPOCH_FENCE)] == list(range(8))
    assert all(BY_STATUS[STATUS[state]] is state for state in TxnState)


def test_state_names_parse_as_list_transactions_spells_them():
    assert parse_state("Ongoing") is ONGOING
    assert parse_state("CompleteAbort") is COMPLETE_ABORT
    assert parse_state("nonsense") is None
    assert str(PREPARE_EPOCH_FENCE) == "PrepareEpochFence"
