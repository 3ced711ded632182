"""The classic consumer group's states and the moves allowed between them.

Theory of operation: a group is always in exactly one ``GroupState``.  The
table ``ALLOWED_TRANSITIONS`` (target state -> the states it may be entered
from) is Kafka's ``GroupMetadata.validPreviousStates``, copied as data so the
whole state machine can be read in one place and tested row by row:

* ``Empty``: no members; offsets may still be committed and fetched.
* ``PreparingRebalance``: a rebalance started; the coordinator holds JoinGroup
  responses until every known member rejoined or the rebalance timeout passed.
* ``CompletingRebalance``: JoinGroup answered (the leader got every member's
  metadata); waiting for the leader's SyncGroup with the assignment.
* ``Stable``: assignment handed out; members heartbeat.
* ``Dead``: deleted (DeleteGroups, or every offset of an Empty group expired);
  the group object is about to be dropped.

``ClassicGroup`` changes state only through ``state_machine.check_transition``
with this table.
"""
from __future__ import annotations

from broker_sim.coordinator.state_machine import State


class GroupState(State):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


# the states as module names, in the enum's order
EMPTY, PREPARING_REBALANCE, COMPLETING_REBALANCE, STABLE, DEAD = GroupState

# target state -> states it may be entered from (Kafka's validPreviousStates)
ALLOWED_TRANSITIONS: dict[GroupState, frozenset[GroupState]] = {
    PREPARING_REBALANCE: frozenset({STABLE, COMPLETING_REBALANCE, EMPTY}),
    COMPLETING_REBALANCE: frozenset({PREPARING_REBALANCE}),
    STABLE: frozenset({COMPLETING_REBALANCE}),
    EMPTY: frozenset({PREPARING_REBALANCE}),
    DEAD: frozenset({STABLE, PREPARING_REBALANCE, COMPLETING_REBALANCE, EMPTY, DEAD}),
}

# states in which a join, leave or session expiry starts a new rebalance (Kafka's canRebalance)
CAN_REBALANCE = ALLOWED_TRANSITIONS[PREPARING_REBALANCE]


def parse_state(name: str) -> GroupState | None:
    """The state named ``name`` (case-insensitive, as ListGroups' states filter), None when there is none."""
    lowered = name.lower()
    for state in GroupState:
        if state.value.lower() == lowered:
            return state
    return None
