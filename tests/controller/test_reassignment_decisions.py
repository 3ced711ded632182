"""Reassignment (KIP-455) decisions and codecs without ZooKeeper, and the KIP-73 throttle quota with a manual clock."""
from __future__ import annotations

import json
import uuid
from pathlib import Path

import jsonschema
import kafka.errors as Errors
import pytest

from broker_sim.config import BrokerConfig, ConfigError, LONG_MAX, validate_topic_configs
from broker_sim.controller import zk_layout as L
from broker_sim.controller.cluster_state import NO_LEADER, PartitionState
from broker_sim.controller.reassignment import (
    Reassignment, ReassignmentError, completion_state, of, plan, with_partitions, without_unassigned)
from broker_sim.replication.throttle import ByteRateQuota, ReplicationThrottles
from broker_sim.testing.clock import ManualClock

E = 9
SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "broker_sim" / "schemas" /
                     "zookeeper-layout.json").read_text())


def test_reassign_to_is_kafkas_target_first_full_set():
    r = Reassignment((1, 2, 3)).reassign_to([4, 2, 5])
    assert r == Reassignment((4, 2, 5, 1, 3), adding=(4, 5), removing=(1, 3))
    assert r.origin == (2, 1, 3) and r.target == (4, 2, 5) and r.in_progress
    # a new target for a running reassignment starts from the same origin
    again = r.reassign_to([6, 1])
    assert again == Reassignment((6, 1, 2, 3), adding=(6,), removing=(2, 3)) and again.origin == (1, 2, 3)


def test_plan_refuses_what_kafka_refuses_and_cancels_back_to_the_origin():
    current = Reassignment((1, 2))
    for target, error in (([], "Empty replica list"), ([3, 3], "Duplicate replica ids"),
                          ([-1, 2], "Invalid broker id"), ([1, 7], "not alive")):
        with pytest.raises(ReassignmentError, match=error) as caught:
            plan(current, target, live={1, 2, 3})
        assert caught.value.error is Errors.InvalidReplicationAssignmentError
    with pytest.raises(ReassignmentError) as caught:
        plan(current, None, live={1, 2, 3})
    assert caught.value.error is Errors.NoReassignmentInProgressError
    moving = plan(current, [3, 2], live={1, 2, 3})
    assert moving == Reassignment((3, 2, 1), (3,), (1,))
    assert plan(moving, None, live={1, 2, 3}) == Reassignment((2, 1))  # cancel: the origin, nothing pending


def test_completion_waits_for_every_target_in_the_isr_then_moves_leadership_to_a_target():
    moving = Reassignment((3, 2, 1), (3,), (1,))
    state = PartitionState(1, 4, (1, 2), 2, zk_version=5)
    assert completion_state(state, moving, {1, 2, 3}, E) == (None, False)  # 3 not in sync yet
    synced = PartitionState(1, 4, (1, 2, 3), 2, zk_version=6)
    assert completion_state(synced, moving, {1, 2, 3}, E) == (PartitionState(3, 5, (2, 3), E), True)
    assert completion_state(synced, moving, {1, 2}, E) == (PartitionState(2, 5, (2, 3), E), True)  # 3 shutting down
    done = PartitionState(3, 5, (2, 3), E)
    assert completion_state(done, moving, {1, 2, 3}, E) == (None, True)  # state written: only the assignment left


def test_a_state_naming_dropped_brokers_is_corrected():
    assert without_unassigned(PartitionState(5, 3, (5, 1, 2), 1), (1, 2), {1, 2}, E) == PartitionState(1, 4, (1, 2), E)
    assert without_unassigned(PartitionState(1, 3, (1, 5), 1), (1, 2), {1, 2}, E) == PartitionState(1, 4, (1,), E)
    assert without_unassigned(PartitionState(1, 3, (1, 2), 1), (1, 2), {1, 2}, E) is None
    offline = without_unassigned(PartitionState(5, 3, (5,), 1), (1, 2), {1, 2}, E)
    assert offline == PartitionState(NO_LEADER, 4, (5,), E)
    assert without_unassigned(offline, (1, 2), {1, 2}, E) is None  # no epoch bump loop


def test_assignment_znode_round_trips_adding_and_removing_and_matches_the_schema():
    topic_id = uuid.uuid4()
    base = L.TopicAssignment(topic_id, ((1, 2), (2, 3)))
    moved = with_partitions(base, {1: Reassignment((4, 2, 3), (4,), (3,))})
    data = L.encode_topic_assignment(moved.topic_id, moved.replicas, moved.adding, moved.removing)
    assert json.loads(data)["adding_replicas"] == {"1": [4]} and json.loads(data)["removing_replicas"] == {"1": [3]}
    decoded = L.decode_topic_assignment("t", data)
    assert decoded == moved and of(decoded, 1).target == (4, 2) and not of(decoded, 0).in_progress
    finished = with_partitions(decoded, {1: Reassignment((4, 2))})
    assert finished.adding == {} and finished.removing == {}
    with pytest.raises(L.LayoutError, match="adding_replicas"):
        L.decode_topic_assignment("t", data.replace(b'"adding_replicas":{"1"', b'"adding_replicas":{"7"'))
    schemas = {z["name"]: z for z in SCHEMA["znodes"]}
    request = L.encode_reassign_partitions({("t", 1): [4, 2], ("u", 0): [1]})
    jsonschema.validate(json.loads(request), schemas["reassign_partitions"]["payload"])
    assert schemas["reassign_partitions"]["path"] == L.REASSIGN_PARTITIONS == "/admin/reassign_partitions"
    assert L.decode_reassign_partitions(request) == {("t", 1): (4, 2), ("u", 0): (1,)}
    with pytest.raises(L.LayoutError, match="lacks topic"):
        L.decode_reassign_partitions(b'{"version":1,"partitions":[{"topic":"t"}]}')


def test_throttled_replicas_configs_are_validated():
    validate_topic_configs({"leader.replication.throttled.replicas": "0:1, 1:2",
                            "follower.replication.throttled.replicas": "*"})
    with pytest.raises(ConfigError, match="'0-1' is not partition:broker"):
        validate_topic_configs({"follower.replication.throttled.replicas": "0-1"})


def test_a_quota_holds_the_configured_rate_with_at_most_one_window_of_burst():
    clock, rate = ManualClock(start_ms=100_000), [1000]
    quota = ByteRateQuota(lambda: rate[0], lambda: 1.0, clock.now_s)
    assert quota.exceeded()  # no credit at start
    clock.advance(seconds=5.0)  # idle: credit capped at one window (1000 bytes), not 5000
    assert not quota.exceeded()
    quota.record(1500)
    assert quota.exceeded() and quota.wait_s() == pytest.approx(0.5)
    clock.advance(seconds=0.5)
    assert quota.exceeded()  # exactly back to zero credit
    clock.advance(seconds=0.01)
    assert not quota.exceeded()
    moved, start = 0, clock.now_s()  # a copy that takes 100 bytes whenever allowed moves 1000 bytes/s
    while clock.now_s() < start + 10:
        if not quota.exceeded():
            quota.record(100)
            moved += 100
        clock.advance(seconds=0.01)
    assert 9000 <= moved <= 11100
    rate[0] = LONG_MAX  # unlimited (the default): never exceeded, still counted
    assert not quota.exceeded() and quota.wait_s() == 0.0


def test_throttled_replicas_name_the_broker_that_throttles():
    throttles = ReplicationThrottles(BrokerConfig(), broker_id=2)
    throttles.set_topic("t", {"leader.replication.throttled.replicas": "0:2,1:3",
                              "follower.replication.throttled.replicas": "*"})
    assert throttles.leader_throttled("t", 0) and not throttles.leader_throttled("t", 1)
    assert throttles.follower_throttled("t", 5) and not throttles.follower_throttled("u", 0)
    throttles.set_topic("t", {})
    assert not throttles.leader_throttled("t", 0) and not throttles.follower_throttled("t", 5)
