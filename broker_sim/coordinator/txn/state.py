"""A transactional id's states and the moves allowed between them (Kafka's ``TransactionState``).

Theory of operation: the transaction coordinator keeps one ``TxnState`` per
transactional id.  The table ``ALLOWED_TRANSITIONS`` (target state -> the
states it may be entered from) is Kafka's ``validPreviousStates`` as data:

* ``Empty``: a producer id and epoch are assigned, no transaction is open.
* ``Ongoing``: partitions (or a group's offsets) were added; the producer is writing.
* ``PrepareCommit`` / ``PrepareAbort``: EndTxn (or an abort by the coordinator)
  was logged; markers are being written to every partition of the transaction.
* ``CompleteCommit`` / ``CompleteAbort``: every marker is written; the next
  transaction may start.
* ``PrepareEpochFence``: a new producer instance took over (InitProducerId) or
  the transaction timed out while Ongoing: the epoch is bumped so the old
  instance is fenced, then the transaction is aborted.
* ``Dead``: the transactional id expired and was removed (tombstoned).

``STATUS`` gives each state's ``TransactionStatus`` int8 in the
``__transaction_state`` records.  The coordinator changes a state only through
``state_machine.check_transition`` with this table.
"""
from __future__ import annotations

from broker_sim.coordinator.state_machine import State


class TxnState(State):
    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    DEAD = "Dead"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"


# the states as module names, in the enum's order
(EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT, DEAD,
 PREPARE_EPOCH_FENCE) = TxnState

# TransactionStatus in TransactionLogValue (Kafka's TransactionState ids)
STATUS: dict[TxnState, int] = {
    EMPTY: 0, ONGOING: 1, PREPARE_COMMIT: 2, PREPARE_ABORT: 3, COMPLETE_COMMIT: 4, COMPLETE_ABORT: 5, DEAD: 6,
    PREPARE_EPOCH_FENCE: 7,
}
BY_STATUS: dict[int, TxnState] = {status: state for state, status in STATUS.items()}

# target state -> states it may be entered from (Kafka's validPreviousStates)
ALLOWED_TRANSITIONS: dict[TxnState, frozenset[TxnState]] = {
    EMPTY: frozenset({EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT}),
    ONGOING: frozenset({ONGOING, EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT}),
    PREPARE_COMMIT: frozenset({ONGOING}),
    PREPARE_ABORT: frozenset({ONGOING, PREPARE_EPOCH_FENCE}),
    COMPLETE_COMMIT: frozenset({PREPARE_COMMIT}),
    COMPLETE_ABORT: frozenset({PREPARE_ABORT}),
    DEAD: frozenset({EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT}),
    PREPARE_EPOCH_FENCE: frozenset({ONGOING}),
}

# states in which markers are being written: requests for the id get CONCURRENT_TRANSACTIONS
PREPARING = frozenset({PREPARE_COMMIT, PREPARE_ABORT, PREPARE_EPOCH_FENCE})
# states with no open transaction: a new one may start, the id may expire
COMPLETE = frozenset({EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT})


def parse_state(name: str) -> TxnState | None:
    """The state named ``name`` (as ListTransactions' state filters spell it), None when there is none."""
    for state in TxnState:
        if state.value == name:
            return state
    return None
