"""The group state table: Kafka's, and what only groups have (every move is tested in test_state_machines)."""
from __future__ import annotations

import pytest

from broker_sim.coordinator.group.state import (
    ALLOWED_TRANSITIONS, CAN_REBALANCE, COMPLETING_REBALANCE, DEAD, EMPTY, PREPARING_REBALANCE, STABLE,
    parse_state,
)
from broker_sim.coordinator.state_machine import IllegalStateTransition, check_transition


def test_table_is_kafkas_valid_previous_states():
    assert ALLOWED_TRANSITIONS == {
        PREPARING_REBALANCE: {STABLE, COMPLETING_REBALANCE, EMPTY},
        COMPLETING_REBALANCE: {PREPARING_REBALANCE},
        STABLE: {COMPLETING_REBALANCE},
        EMPTY: {PREPARING_REBALANCE},
        DEAD: {STABLE, PREPARING_REBALANCE, COMPLETING_REBALANCE, EMPTY, DEAD},
    }


def test_a_rebalance_starts_from_the_states_that_may_enter_preparing_rebalance():
    assert CAN_REBALANCE == {STABLE, COMPLETING_REBALANCE, EMPTY}


def test_a_stable_group_cannot_skip_to_completing_rebalance():
    with pytest.raises(IllegalStateTransition):
        check_transition(ALLOWED_TRANSITIONS, STABLE, COMPLETING_REBALANCE)


def test_state_names_parse_case_insensitively_as_list_groups_filters_do():
    assert parse_state("stable") is STABLE
    assert parse_state("PreparingRebalance") is PREPARING_REBALANCE
    assert parse_state("nonsense") is None
    assert str(COMPLETING_REBALANCE) == "CompletingRebalance"
