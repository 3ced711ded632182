"""Transactional offset commits in the group coordinator (TxnOffsetCommit).

Offsets committed in a transaction are written to ``__consumer_offsets`` as
part of it and stay pending until the marker: COMMIT applies them, ABORT
drops them; a reload replays the same rule from the log.
"""
from __future__ import annotations

from kafka.errors import InvalidProducerEpochError

from broker_sim.coordinator.group.coordinator import ILLEGAL_GENERATION, UNKNOWN_TOPIC_OR_PARTITION
from broker_sim.coordinator.group.metadata import NONE, UNKNOWN_MEMBER_ID
from broker_sim.coordinator.group.records import CommittedOffset

from test_group_offsets import stable_member

PID, EPOCH = 4000, 0


def txn_commit(coordinator, offset, *, group="g", pid=PID, epoch=EPOCH, member="", generation=-1,
               partition=("events", 0)):
    return coordinator.commit_txn_offsets(group, pid, epoch, member, None, generation,
                                          [(*partition, CommittedOffset(offset))])


def committed(coordinator, group="g", tp=("events", 0)):
    error, offsets = coordinator.fetch_offsets(group, [(tp[0], [tp[1]])])
    value = offsets[tp[0]][tp[1]]
    return None if value is None else value.offset


def marker(coordinator, offsets_topic, commit, *, group="g", pid=PID, epoch=EPOCH):
    """What the transaction coordinator's marker does: append it, then tell the group coordinator."""
    index = coordinator.partition_of(group)
    offsets_topic.partition(index).write_txn_marker(pid, epoch, 0, commit)
    coordinator.complete_txn_offsets(index, pid, commit)


def test_offsets_are_invisible_until_the_commit_marker(make_coordinator, offsets_topic):
    coordinator = make_coordinator()
    assert txn_commit(coordinator, 7) == {("events", 0): NONE}
    assert committed(coordinator) is None
    marker(coordinator, offsets_topic, commit=True)
    assert committed(coordinator) == 7


def test_offsets_of_an_aborted_transaction_are_dropped(make_coordinator, offsets_topic):
    coordinator = make_coordinator()
    txn_commit(coordinator, 5)
    marker(coordinator, offsets_topic, commit=True)
    txn_commit(coordinator, 9)
    marker(coordinator, offsets_topic, commit=False)
    assert committed(coordinator) == 5
    assert coordinator.groups["g"].pending_txn_offsets == {}


def test_a_marker_for_another_producer_leaves_pending_offsets_alone(make_coordinator, offsets_topic):
    coordinator = make_coordinator()
    txn_commit(coordinator, 5)
    txn_commit(coordinator, 6, pid=PID + 1, partition=("events", 1))
    marker(coordinator, offsets_topic, commit=True, pid=PID + 1)
    assert committed(coordinator) is None and committed(coordinator, tp=("events", 1)) == 6
    assert PID in coordinator.groups["g"].pending_txn_offsets


def test_reload_applies_committed_and_keeps_open_transactions_pending(make_coordinator, offsets_topic):
    coordinator = make_coordinator()
    txn_commit(coordinator, 3)
    marker(coordinator, offsets_topic, commit=True)
    txn_commit(coordinator, 4, pid=PID + 1, partition=("events", 1))
    marker(coordinator, offsets_topic, commit=False, pid=PID + 1)
    txn_commit(coordinator, 8, pid=PID + 2, partition=("events", 2))  # still open at the "restart"
    offsets_topic.reopen()
    reloaded = make_coordinator()
    assert committed(reloaded) == 3
    assert committed(reloaded, tp=("events", 1)) is None
    assert committed(reloaded, tp=("events", 2)) is None
    marker(reloaded, offsets_topic, commit=True, pid=PID + 2)
    assert committed(reloaded, tp=("events", 2)) == 8


def test_a_producer_naming_only_the_group_may_commit_while_members_are_active(make_coordinator):
    coordinator = make_coordinator()
    member, generation = stable_member(coordinator)
    assert txn_commit(coordinator, 1) == {("events", 0): NONE}
    assert txn_commit(coordinator, 1, member=member, generation=generation) == {("events", 0): NONE}
    assert txn_commit(coordinator, 1, member=member, generation=generation + 1) == {("events", 0): ILLEGAL_GENERATION}
    assert txn_commit(coordinator, 1, member="stranger", generation=generation) == {("events", 0): UNKNOWN_MEMBER_ID}
    assert txn_commit(coordinator, 1, partition=("nope", 0)) == {("nope", 0): UNKNOWN_TOPIC_OR_PARTITION}


def test_a_fenced_producer_cannot_commit_offsets(make_coordinator, offsets_topic):
    coordinator = make_coordinator()
    txn_commit(coordinator, 1)
    marker(coordinator, offsets_topic, commit=False, epoch=EPOCH + 1)  # the coordinator fenced epoch 0
    assert txn_commit(coordinator, 2) == {("events", 0): InvalidProducerEpochError.errno}


def test_a_group_with_only_pending_transactional_offsets_does_not_expire(make_coordinator, offsets_topic, clock):
    coordinator = make_coordinator(offsets_retention_ms=1000)
    txn_commit(coordinator, 7)
    clock.advance(ms=2000)
    coordinator.expire_offsets()
    assert "g" in coordinator.groups
    marker(coordinator, offsets_topic, commit=True)
    assert committed(coordinator) == 7


def test_a_plain_commit_after_a_pending_one_wins_when_the_transaction_commits(make_coordinator, offsets_topic):
    coordinator = make_coordinator()
    txn_commit(coordinator, 7)
    txn_commit(coordinator, 8, partition=("events", 1))
    assert coordinator.commit_offsets("g", "", None, -1, [("events", 0, CommittedOffset(20))]) == {("events", 0): NONE}
    marker(coordinator, offsets_topic, commit=True)
    # Kafka's completePendingTxnOffsetCommit: only an offset appended later replaces one
    assert (committed(coordinator), committed(coordinator, tp=("events", 1))) == (20, 8)
    txn_commit(coordinator, 30)  # appended after the plain commit: its commit wins
    marker(coordinator, offsets_topic, commit=True)
    assert committed(coordinator) == 30

    txn_commit(coordinator, 40)
    coordinator.commit_offsets("g", "", None, -1, [("events", 0, CommittedOffset(41))])
    offsets_topic.reopen()
    restarted = make_coordinator()  # the marker comes after the reload replayed both records
    index = restarted.partition_of("g")
    offsets_topic.partition(index).write_txn_marker(PID, EPOCH, 0, True)
    restarted.complete_txn_offsets(index, PID, True)
    assert committed(restarted) == 41
    offsets_topic.reopen()
    assert committed(make_coordinator()) == 41  # and a reload that reads the marker agrees
