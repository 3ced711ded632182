"""The KIP-848 consumer group core (broker_sim/coordinator/group/consumer_group.py, assignors.py) without I/O but the
coordinator's own __consumer_offsets: the assignors' balance and stickiness, a coordinator restart that resumes
every member at its epoch, session and rebalance timeouts fencing members, a failed write leaving no trace, and
the records' layout (Kafka's record types).

The end-to-end behaviour, compared with Apache Kafka, is in tests/conformance/test_consumer_group_protocol.py and
tests/kafka/test_consumer_protocol.py."""
from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

import pytest

from broker_sim.coordinator.group.assignors import range_assign, uniform_assign
from broker_sim.coordinator.group.consumer_group import ConsumerGroup, HeartbeatRequest, MemberState
from broker_sim.coordinator.group.coordinator import GroupCoordinator
from broker_sim.coordinator.group.metadata import GroupConfig
from broker_sim.coordinator.group.records import decode_key
from broker_sim.coordinator.internal_topic import read_partition

A, B = uuid.UUID(int=1), uuid.UUID(int=2)


@dataclass(frozen=True)
class Info:
    name: str
    topic_id: uuid.UUID
    partitions: int


TOPICS = {"events": Info("events", A, 6), "other": Info("other", B, 2)}


@pytest.fixture
def coordinator(offsets_topic, clock):
    def make() -> GroupCoordinator:
        made = GroupCoordinator(GroupConfig(offsets_partitions=3, consumer_session_timeout_ms=6000,
                                            consumer_heartbeat_interval_ms=500), offsets_topic, clock=clock,
                                partition_exists=lambda t, p: t in TOPICS and p < TOPICS[t].partitions,
                                topics=lambda: TOPICS)
        made.startup()
        return made

    return make


def join(coordinator, member: str, topics=("events",), instance=None, regex=None):
    return coordinator.consumer_group_heartbeat("g", HeartbeatRequest(
        member, 0, instance_id=instance, rebalance_timeout_ms=10_000,
        subscribed_topic_names=tuple(topics) if regex is None else None, subscribed_topic_regex=regex, owned=()))


def beat(coordinator, member: str, epoch: int, owned: dict):
    return coordinator.consumer_group_heartbeat("g", HeartbeatRequest(
        member, epoch, owned=tuple((t, tuple(sorted(p))) for t, p in owned.items())))


def converge(coordinator, members: dict[str, list]):
    """Heartbeat each member (epoch, owned) until nothing changes; members: id -> [epoch, owned]."""
    for _ in range(10):
        changed = False
        for member_id, state in members.items():
            answer = beat(coordinator, member_id, *state)
            assert answer.error == 0, answer
            owned = answer.assignment if answer.assignment is not None else state[1]
            if [answer.member_epoch, owned] != state:
                changed = True
            state[:] = [answer.member_epoch, dict(owned)]
        if not changed:
            return


# --- assignors -------------------------------------------------------------------------------------------

def _counts(assignment):
    return sorted(sum(len(p) for p in parts.values()) for parts in assignment.values())


def test_uniform_balances_and_moves_only_what_a_joiner_takes():
    subs = {m: frozenset({A}) for m in ("m1", "m2")}
    first = uniform_assign(subs, {A: 6}, {})
    assert _counts(first) == [3, 3]
    grown = uniform_assign({**subs, "m3": frozenset({A})}, {A: 6}, first)
    assert _counts(grown) == [2, 2, 2]
    for member in ("m1", "m2"):   # sticky: what each keeps it had before
        assert grown[member][A] <= first[member][A]
    covered = [p for parts in grown.values() for p in parts[A]]
    assert sorted(covered) == list(range(6))


def test_uniform_with_different_subscriptions_gives_each_topic_to_its_subscribers_and_balances():
    subs = {"m1": frozenset({A}), "m2": frozenset({A, B}), "m3": frozenset({B})}
    assignment = uniform_assign(subs, {A: 6, B: 2}, {})
    assert set(assignment["m1"]) == {A} and set(assignment["m3"]) <= {B}
    assert sorted(p for m in assignment.values() for p in m.get(A, ())) == list(range(6))
    assert max(_counts(assignment)) - min(_counts(assignment)) <= 2


def test_range_gives_contiguous_ranges_in_member_order():
    assignment = range_assign({"b": frozenset({A}), "a": frozenset({A})}, {A: 5}, {})
    assert assignment["a"][A] == frozenset({0, 1, 2}) and assignment["b"][A] == frozenset({3, 4})


# --- the coordinator ------------------------------------------------------------------------------------------

def test_a_restarted_coordinator_resumes_every_member_at_its_epoch_with_its_partitions(coordinator, offsets_topic):
    first = coordinator()
    members = {m: [0, {}] for m in ("m1", "m2")}
    for member_id in members:
        answer = join(first, member_id)
        members[member_id] = [answer.member_epoch, dict(answer.assignment or {})]
    converge(first, members)
    group = first.groups["g"]
    assert group.state.value == "Stable" and _counts({m: s[1] for m, s in members.items()}) == [3, 3]
    again = coordinator()   # a new coordinator over the same __consumer_offsets (a broker restart)
    restored = again.groups["g"]
    assert isinstance(restored, ConsumerGroup) and restored.state.value == "Stable"
    assert (restored.group_epoch, restored.assignment_epoch) == (group.group_epoch, group.assignment_epoch)
    for member_id, (epoch, owned) in members.items():
        member = restored.members[member_id]
        assert (member.member_epoch, member.assigned, member.state) == (epoch, owned, MemberState.STABLE)
        answer = beat(again, member_id, epoch, owned)   # the members go on as if nothing happened
        assert answer.error == 0 and answer.member_epoch == epoch and answer.assignment is None


def test_a_member_that_stops_heartbeating_is_fenced_at_its_session_timeout(coordinator, clock):
    made = coordinator()
    members = {"m1": [0, {}], "m2": [0, {}]}
    for member_id in members:
        answer = join(made, member_id)
        members[member_id] = [answer.member_epoch, dict(answer.assignment or {})]
    converge(made, members)
    clock.advance(ms=5000)
    beat(made, "m1", *members["m1"])   # only m1 keeps heartbeating
    clock.advance(ms=1500)
    made.poll(["g"])
    assert list(made.groups["g"].members) == ["m1"]
    converge(made, {"m1": members["m1"]})
    assert sum(len(p) for p in members["m1"][1].values()) == 6


def test_a_member_that_does_not_revoke_within_its_rebalance_timeout_is_fenced(coordinator, clock):
    made = coordinator()
    answer = join(made, "m1")
    owned = dict(answer.assignment)
    join(made, "m2")
    answer = beat(made, "m1", 1, owned)   # asked to revoke three partitions
    assert made.groups["g"].members["m1"].state is MemberState.UNREVOKED_PARTITIONS
    for _ in range(3):   # it goes on heartbeating, but never gives them up
        clock.advance(ms=4000)
        beat(made, "m1", 1, owned)
        beat(made, "m2", 2, {})
        made.poll(["g"])
    assert "m1" not in made.groups["g"].members


def test_a_heartbeat_whose_records_are_not_written_changes_nothing(coordinator, offsets_topic, monkeypatch):
    made = coordinator()
    join(made, "m1")
    group = made.groups["g"]
    before = group.snapshot()
    monkeypatch.setattr(made, "append", lambda *args, **kwargs: 15)   # COORDINATOR_NOT_AVAILABLE
    answer = join(made, "m2")
    assert answer.error == 15 and answer.member_id is None   # the error alone, as Kafka answers a failed write
    assert group.snapshot() == before and "m2" not in group.members


def test_the_records_are_kafkas_consumer_group_record_types(coordinator, offsets_topic):
    made = coordinator()
    join(made, "m1", instance="i-1")
    beat(made, "m1", -1, {})
    types = [struct.unpack(">h", key[:2])[0] for p in offsets_topic.partitions.values()
             for _, key, _ in read_partition(p)]
    # member metadata (5), current assignment (8), group epoch (3), target member (7) and epoch (6), ...
    assert {3, 5, 6, 7, 8} <= set(types)
    assert all(decode_key(key) is not None for p in offsets_topic.partitions.values()
               for _, key, _ in read_partition(p))


def test_the_records_match_the_documented_format(coordinator, offsets_topic):
    import json
    from pathlib import Path

    from broker_sim.coordinator.group.records import record_to_json

    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((Path(__file__).parents[2] / "broker_sim" / "schemas" / "consumer-offsets.json").read_text())
    made = coordinator()
    join(made, "m1", instance="i-1")
    join(made, "m2", regex="ev.*")
    beat(made, "m1", -1, {})
    docs = [record_to_json(key, value) for p in offsets_topic.partitions.values() for _, key, value in read_partition(p)]
    assert {d["key"]["type"] for d in docs} >= {"ConsumerGroupMetadata", "ConsumerGroupRegularExpression",
                                                "ConsumerGroupCurrentMemberAssignment"}
    for doc in docs:
        jsonschema.validate(doc, schema)
