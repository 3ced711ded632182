"""The one way a coordinator's state changes: a move checked against its state machine's table.

Theory of operation: each state machine keeps its own table as data —
``group.state`` and ``txn.state``, both Kafka's ``validPreviousStates``: target
state -> the states it may be entered from — so a machine can be read in one
place and tested row by row.  ``check_transition(table, current, target)`` is
the only way a coordinator changes a state: it returns ``target`` when the
table allows ``current -> target`` and raises ``IllegalStateTransition``
otherwise (a coordinator bug, never a client error).  ``State`` is the base of
the machines' enums: a state prints as its Kafka name.
"""
from __future__ import annotations

import enum
from typing import Mapping, TypeVar

S = TypeVar("S", bound="State")


class State(str, enum.Enum):
    """A state whose value is its name in Kafka's APIs and records."""

    def __str__(self) -> str:
        return self.value


class IllegalStateTransition(RuntimeError):
    """A state change the table does not allow."""


def check_transition(table: Mapping[S, frozenset[S]], current: S, target: S) -> S:
    """Return ``target`` when ``table`` allows ``current -> target``; raise IllegalStateTransition otherwise."""
    if current not in table[target]:
        raise IllegalStateTransition(f"{type(target).__name__} cannot move from {current} to {target}")
    return target
