"""The controller's pure decisions (no ZooKeeper): Kafka's ZooKeeper-era leader election rules."""
from __future__ import annotations

from broker_sim.controller.cluster_state import NO_LEADER, PartitionState
from broker_sim.controller.zk_controller import elect_after_change, initial_state, preferred_state, shutdown_state

E = 7  # controller epoch


def test_initial_state_first_live_replica_leads():
    assert initial_state([3, 1, 2], {1, 2, 3}, E) == PartitionState(3, 0, (3, 1, 2), E)
    assert initial_state([3, 1, 2], {1, 2}, E) == PartitionState(1, 0, (1, 2), E)
    assert initial_state([3], {1, 2}, E) is None


def test_dead_leader_replaced_by_first_live_isr_member_in_assignment_order():
    s = PartitionState(1, 4, (1, 3, 2), 5, zk_version=9)
    assert elect_after_change(s, [1, 2, 3], {2, 3}, {2, 3}, False, E) == PartitionState(2, 5, (3, 2), E)


def test_dead_follower_leaves_the_isr_without_epoch_bump():
    s = PartitionState(1, 4, (1, 2, 3), 5, zk_version=9)
    assert elect_after_change(s, [1, 2, 3], {1, 3}, {1, 3}, False, E) == PartitionState(1, 4, (1, 3), E)
    assert elect_after_change(s, [1, 2, 3], {1, 2, 3}, {1, 2, 3}, False, E) is None


def test_no_live_isr_member_goes_offline_keeping_the_last_isr_member():
    s = PartitionState(1, 4, (1,), 5)
    assert elect_after_change(s, [1, 2], {2}, {2}, False, E) == PartitionState(NO_LEADER, 5, (1,), E)
    offline = PartitionState(NO_LEADER, 5, (1,), E)
    assert elect_after_change(offline, [1, 2], {2}, {2}, False, E) is None, "stays offline, no new epoch"
    assert elect_after_change(offline, [1, 2], {1, 2}, {1, 2}, False, E) == PartitionState(1, 6, (1,), E)


def test_unclean_election_takes_the_first_live_replica():
    s = PartitionState(1, 4, (1,), 5)
    assert elect_after_change(s, [3, 1, 2], {2, 3}, {2, 3}, True, E) == PartitionState(3, 5, (3,), E)
    offline = PartitionState(NO_LEADER, 5, (1,), E)
    assert elect_after_change(offline, [1, 2], {2}, {2}, True, E) == PartitionState(2, 6, (2,), E)


def test_brokers_shutting_down_are_not_elected():
    s = PartitionState(1, 4, (1, 2, 3), 5)
    assert elect_after_change(s, [1, 2, 3], {2, 3}, {3}, False, E) == PartitionState(3, 5, (3,), E)


def test_preferred_replica_takes_leadership_back_only_when_in_sync_and_eligible():
    s = PartitionState(2, 4, (2, 1), 5)
    assert preferred_state(s, [1, 2], {1, 2}, E) == PartitionState(1, 5, (2, 1), E)
    assert preferred_state(PartitionState(2, 4, (2,), 5), [1, 2], {1, 2}, E) is None
    assert preferred_state(s, [1, 2], {2}, E) is None
    assert preferred_state(PartitionState(1, 4, (1, 2), 5), [1, 2], {1, 2}, E) is None


def test_controlled_shutdown_moves_leadership_and_leaves_isrs():
    led = PartitionState(2, 4, (2, 1, 3), 5)
    assert shutdown_state(led, [2, 3, 1], 2, {1, 3}, E) == PartitionState(3, 5, (1, 3), E)
    followed = PartitionState(1, 4, (1, 2), 5, zk_version=3)
    assert shutdown_state(followed, [1, 2], 2, {1}, E) == PartitionState(1, 4, (1,), E)
    alone = PartitionState(2, 4, (2,), 5)
    assert shutdown_state(alone, [2, 1], 2, {1}, E) is None, "no in-sync replica to take over"
