"""Both coordinators' state tables through the one transition check, driven row by row (as h11's tests drive
its state tables): every move a table allows succeeds, every other move raises."""
from __future__ import annotations

import itertools

import pytest

from broker_sim.coordinator.group import state as group_state
from broker_sim.coordinator.state_machine import IllegalStateTransition, check_transition
from broker_sim.coordinator.txn import state as txn_state

MACHINES = [(group_state.GroupState, group_state.ALLOWED_TRANSITIONS),
            (txn_state.TxnState, txn_state.ALLOWED_TRANSITIONS)]


def moves(legal: bool) -> list:
    return [pytest.param(table, source, target, id=f"{states.__name__}:{source}->{target}")
            for states, table in MACHINES for source, target in itertools.product(states, states)
            if (source in table[target]) is legal]


@pytest.mark.parametrize("states,table", MACHINES, ids=[states.__name__ for states, _ in MACHINES])
def test_every_state_has_a_row(states, table):
    assert set(table) == set(states)


@pytest.mark.parametrize("table,source,target", moves(legal=True))
def test_every_legal_transition_is_allowed(table, source, target):
    assert check_transition(table, source, target) is target


@pytest.mark.parametrize("table,source,target", moves(legal=False))
def test_every_other_transition_raises(table, source, target):
    with pytest.raises(IllegalStateTransition, match=f"{type(target).__name__} cannot move from {source} to {target}"):
        check_transition(table, source, target)


def test_states_print_as_their_kafka_names():
    assert str(group_state.COMPLETING_REBALANCE) == "CompletingRebalance"
    assert str(txn_state.PREPARE_EPOCH_FENCE) == "PrepareEpochFence"
    assert f"{txn_state.ONGOING}" == "Ongoing"
