"""The administrator's leader elections (ElectLeaders) as pure decisions: Kafka's per-partition outcomes."""
from __future__ import annotations

import kafka.errors as Errors

from broker_sim.controller.cluster_state import NO_LEADER, PartitionState
from broker_sim.controller.election import ElectionType, decide_election

PREFERRED, UNCLEAN = ElectionType.PREFERRED, ElectionType.UNCLEAN


def test_preferred_moves_leadership_to_the_first_replica_in_sync():
    state = PartitionState(2, 4, (2, 1, 3), 7)
    new, outcome = decide_election(PREFERRED, state, [1, 2, 3], {1, 2, 3}, {1, 2, 3}, 9)
    assert outcome == (None, None)
    assert new == PartitionState(1, 5, (2, 1, 3), 9)


def test_preferred_outcomes_without_an_election():
    leading = PartitionState(1, 4, (1, 2), 7)
    assert decide_election(PREFERRED, leading, [1, 2], {1, 2}, {1, 2}, 9)[1][0] is Errors.ElectionNotNeededError
    out_of_sync = PartitionState(2, 4, (2,), 7)
    new, (error, message) = decide_election(PREFERRED, out_of_sync, [1, 2], {1, 2}, {1, 2}, 9)
    assert new is None and error is Errors.PreferredLeaderNotAvailableError and "not in the ISR" in message
    new, (error, message) = decide_election(PREFERRED, PartitionState(2, 4, (2, 1), 7), [1, 2], {2}, {2}, 9)
    assert error is Errors.PreferredLeaderNotAvailableError and "not live" in message
    new, (error, message) = decide_election(PREFERRED, PartitionState(2, 4, (2, 1), 7), [1, 2], {1, 2}, {2}, 9)
    assert error is Errors.PreferredLeaderNotAvailableError and "shutting down" in message
    assert decide_election(PREFERRED, None, [], {1}, {1}, 9)[1][0] is Errors.UnknownTopicOrPartitionError


def test_unclean_elects_a_live_replica_of_a_leaderless_partition():
    offline = PartitionState(NO_LEADER, 6, (1,), 7)
    new, outcome = decide_election(UNCLEAN, offline, [1, 2, 3], {2, 3}, {2, 3}, 9)
    assert outcome == (None, None) and new == PartitionState(2, 7, (2,), 9)
    in_sync_first = PartitionState(NO_LEADER, 6, (1, 3), 7)
    new, _ = decide_election(UNCLEAN, in_sync_first, [1, 2, 3], {2, 3}, {2, 3}, 9)
    assert new == PartitionState(3, 7, (3,), 9)
    assert decide_election(UNCLEAN, offline, [1, 2], set(), set(), 9)[1][0] is Errors.EligibleLeadersNotAvailableError
    led = PartitionState(3, 6, (3,), 7)
    assert decide_election(UNCLEAN, led, [1, 2, 3], {3}, {3}, 9)[1][0] is Errors.ElectionNotNeededError
