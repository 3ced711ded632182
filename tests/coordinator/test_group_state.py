"""The group state table, driven directly (as h11's tests drive its state tables)."""
from __future__ import annotations

import itertools

import pytest

from broker_sim.coordinator.group_state import (
    ALLOWED_TRANSITIONS, COMPLETING_REBALANCE, DEAD, EMPTY, PREPARING_REBALANCE, STABLE, GroupState,
    IllegalStateTransition, check_transition, parse_state,
)

LEGAL = [(source, target) for target, sources in ALLOWED_TRANSITIONS.items() for source in sources]
ILLEGAL = [(s, t) for s, t in itertools.product(GroupState, GroupState) if (s, t) not in LEGAL]


def test_table_is_kafkas_valid_previous_states():
    assert ALLOWED_TRANSITIONS == {
        PREPARING_REBALANCE: {STABLE, COMPLETING_REBALANCE, EMPTY},
        COMPLETING_REBALANCE: {PREPARING_REBALANCE},
        STABLE: {COMPLETING_REBALANCE},
        EMPTY: {PREPARING_REBALANCE},
        DEAD: {STABLE, PREPARING_REBALANCE, COMPLETING_REBALANCE, EMPTY, DEAD},
    }


@pytest.mark.parametrize("source,target", LEGAL, ids=lambda s: str(s))
def test_every_legal_transition_is_allowed(source, target):
    assert check_transition(source, target) is target


@pytest.mark.parametrize("source,target", ILLEGAL, ids=lambda s: str(s))
def test_every_other_transition_raises(source, target):
    with pytest.raises(IllegalStateTransition, match=f"from {source} to {target}"):
        check_transition(source, target)


def test_a_stable_group_cannot_skip_to_completing_rebalance():
    with pytest.raises(IllegalStateTransition):
        check_transition(STABLE, COMPLETING_REBALANCE)


def test_state_names_parse_case_insensitively_as_list_groups_filters_do():
    assert parse_state("stable") is STABLE
    assert parse_state("PreparingRebalance") is PREPARING_REBALANCE
    assert parse_state("nonsense") is None
    assert str(COMPLETING_REBALANCE) == "CompletingRebalance"
