"""The coordinator's offsets and durability: commit rules, fetch, delete, expiry, and replay of __consumer_offsets."""
from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from broker_sim.coordinator.group.coordinator import (
    GROUP_ID_NOT_FOUND, GROUP_SUBSCRIBED_TO_TOPIC, ILLEGAL_GENERATION, INVALID_SESSION_TIMEOUT, NON_EMPTY_GROUP,
    NOT_COORDINATOR, OFFSET_METADATA_TOO_LARGE, UNKNOWN_TOPIC_OR_PARTITION, GroupCoordinator,
)
from broker_sim.coordinator.group.metadata import (
    MEMBER_ID_REQUIRED, NONE, REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID, GroupConfig,
)
from broker_sim.coordinator.group.records import CommittedOffset, GroupKey, OffsetKey, decode_key, record_to_json
from broker_sim.coordinator.group.service import GroupService
from broker_sim.coordinator.group.state import COMPLETING_REBALANCE, EMPTY, STABLE
from broker_sim.coordinator.internal_topic import partition_for, read_partition

from group_helpers import join_request, subscription

RETENTION_MS = 7 * 24 * 3_600_000


def commit(coordinator, group="g", *, member="", generation=-1, offsets=(("events", 0, 10),), metadata=""):
    commits = [(t, p, CommittedOffset(o, metadata=metadata)) for t, p, o in offsets]
    return coordinator.commit_offsets(group, member, None, generation, commits)


def fetched(coordinator, group="g", partitions=None):
    error, offsets = coordinator.fetch_offsets(group, partitions)
    assert error == NONE
    return {(t, p): (v.offset if v else None) for t, parts in offsets.items() for p, v in parts.items()}


def stable_member(coordinator, group="g", topics=("events",)) -> tuple[str, int]:
    """One member joined and synced; returns (member id, generation)."""
    request = join_request(protocols=(("range", subscription(*topics)),))
    [(_, first)] = coordinator.join(group, request, coordinator.new_ticket())
    assert first.error == MEMBER_ID_REQUIRED
    request = join_request(first.member_id, protocols=request.protocols)
    [(_, joined)] = coordinator.join(group, request, coordinator.new_ticket())
    [(_, synced)] = coordinator.sync(group, joined.member_id, None, joined.generation_id, None, None,
                                     {joined.member_id: b"assignment"}, coordinator.new_ticket())
    assert synced.error == NONE
    return joined.member_id, joined.generation_id


def test_simple_commit_creates_the_group_and_is_fetched_back(make_coordinator):
    coordinator = make_coordinator()
    assert commit(coordinator, offsets=[("events", 0, 10), ("events", 1, 20)], metadata="m") == {
        ("events", 0): NONE, ("events", 1): NONE}
    assert coordinator.groups["g"].state is EMPTY
    assert fetched(coordinator) == {("events", 0): 10, ("events", 1): 20}
    assert fetched(coordinator, partitions=[("events", [0, 3])]) == {("events", 0): 10, ("events", 3): None}
    _, offsets = coordinator.fetch_offsets("g", None)
    assert offsets["events"][0].metadata == "m"


def test_fetch_of_an_unknown_group_is_empty_not_an_error(make_coordinator):
    coordinator = make_coordinator()
    assert fetched(coordinator, "nobody", [("events", [0])]) == {("events", 0): None}
    assert fetched(coordinator, "nobody") == {}


def test_commit_with_a_generation_to_an_unknown_group_is_illegal_generation(make_coordinator):
    coordinator = make_coordinator()
    assert commit(coordinator, member="m", generation=3) == {("events", 0): ILLEGAL_GENERATION}
    assert "g" not in coordinator.groups


def test_members_commit_with_their_generation_and_only_they_may_while_the_group_is_active(make_coordinator):
    coordinator = make_coordinator()
    member, generation = stable_member(coordinator)
    assert commit(coordinator, member=member, generation=generation) == {("events", 0): NONE}
    assert commit(coordinator) == {("events", 0): UNKNOWN_MEMBER_ID}  # a simple consumer, group not Empty
    assert commit(coordinator, member=member, generation=generation - 1) == {("events", 0): ILLEGAL_GENERATION}
    assert commit(coordinator, member="stranger", generation=generation) == {("events", 0): UNKNOWN_MEMBER_ID}


def test_commit_while_completing_rebalance_is_rebalance_in_progress(make_coordinator):
    coordinator = make_coordinator()
    request = join_request(v4=False)
    [(_, joined)] = coordinator.join("g", request, coordinator.new_ticket())
    assert coordinator.groups["g"].state is COMPLETING_REBALANCE
    assert commit(coordinator, member=joined.member_id, generation=joined.generation_id) == {
        ("events", 0): REBALANCE_IN_PROGRESS}


def test_per_partition_errors_for_unknown_partitions_and_oversized_metadata(make_coordinator):
    coordinator = make_coordinator(offset_metadata_max_bytes=8)
    result = commit(coordinator, offsets=[("events", 0, 1), ("events", 9, 1), ("missing", 0, 1)])
    assert result == {("events", 0): NONE, ("events", 9): UNKNOWN_TOPIC_OR_PARTITION,
                      ("missing", 0): UNKNOWN_TOPIC_OR_PARTITION}
    assert commit(coordinator, metadata="x" * 9) == {("events", 0): OFFSET_METADATA_TOO_LARGE}
    assert fetched(coordinator) == {("events", 0): 1}


def test_session_timeout_bounds(make_coordinator):
    coordinator = make_coordinator()
    for session in (5999, 1_800_001):
        [(_, result)] = coordinator.join("g", join_request(session_ms=session), coordinator.new_ticket())
        assert result.error == INVALID_SESSION_TIMEOUT


def test_commits_are_appended_to_the_groups_partition_before_returning(make_coordinator, offsets_topic):
    coordinator = make_coordinator()
    commit(coordinator)
    partition = offsets_topic.partition(partition_for("g", 3))
    assert partition.log_end_offset == 1
    others = [p for i, p in offsets_topic.partitions.items() if i != partition.index]
    assert all(p.log_end_offset == 0 for p in others)


def test_replay_rebuilds_offsets_and_groups_with_their_members_as_kafka_does(make_coordinator, offsets_topic):
    coordinator = make_coordinator()
    member, generation = stable_member(coordinator, "active")
    commit(coordinator, "active", member=member, generation=generation, offsets=[("events", 2, 7)])
    commit(coordinator, "simple", offsets=[("other", 1, 5)])
    commit(coordinator, "simple", offsets=[("other", 1, 6)])  # the last value wins
    commit(coordinator, "deleted")
    assert coordinator.delete_groups(["deleted"]) == {"deleted": NONE}

    offsets_topic.reopen()
    restarted = make_coordinator()
    assert set(restarted.groups) == {"active", "simple"}
    active = restarted.groups["active"]
    # Kafka's ClassicGroup.fromRecord: Stable with the stored members, protocol, leader and assignments
    assert (active.state, active.generation_id, active.protocol_type, active.protocol_name, active.leader_id,
            list(active.members)) == (STABLE, generation, "consumer", "range", member, [member])
    assert active.members[member].assignment == b"assignment"
    assert restarted.groups["simple"].state is EMPTY
    assert fetched(restarted, "active") == {("events", 2): 7}
    assert fetched(restarted, "simple") == {("other", 1): 6}
    # the member carries on in its generation: no rebalance because the coordinator restarted
    assert restarted.heartbeat("active", member, None, generation) == NONE
    assert commit(restarted, "active", member=member, generation=generation) == {("events", 0): NONE}
    assert commit(restarted, "active", member=member, generation=generation + 1) == {("events", 0): ILLEGAL_GENERATION}


def test_delete_groups_only_empty_ones(make_coordinator):
    coordinator = make_coordinator()
    stable_member(coordinator, "busy")
    commit(coordinator, "idle")
    assert coordinator.delete_groups(["busy", "idle", "nobody"]) == {
        "busy": NON_EMPTY_GROUP, "idle": NONE, "nobody": GROUP_ID_NOT_FOUND}
    assert fetched(coordinator, "idle") == {}
    assert coordinator.describe("idle").state == "Dead"


def test_offset_delete_refuses_topics_an_active_consumer_group_subscribes_to(make_coordinator):
    coordinator = make_coordinator()
    member, generation = stable_member(coordinator, topics=("events",))
    commit(coordinator, member=member, generation=generation, offsets=[("events", 0, 1), ("other", 0, 2)])
    error, results = coordinator.delete_offsets("g", [("events", 0), ("other", 0), ("missing", 0)])
    assert error == NONE
    assert results == {("events", 0): GROUP_SUBSCRIBED_TO_TOPIC, ("other", 0): NONE,
                       ("missing", 0): UNKNOWN_TOPIC_OR_PARTITION}
    assert fetched(coordinator) == {("events", 0): 1}
    assert coordinator.delete_offsets("nobody", [("events", 0)]) == (GROUP_ID_NOT_FOUND, {})


def test_offsets_of_a_group_empty_past_retention_expire_and_the_group_goes(make_coordinator, clock, offsets_topic):
    coordinator = make_coordinator()
    member, generation = stable_member(coordinator)
    commit(coordinator, member=member, generation=generation)
    coordinator.leave("g", [(member, None)])
    assert coordinator.groups["g"].state is EMPTY
    clock.advance(ms=RETENTION_MS - 1)
    assert coordinator.expire_offsets() == 0
    clock.advance(ms=1)
    assert coordinator.expire_offsets() == 1
    assert "g" not in coordinator.groups
    partition = offsets_topic.partition(partition_for("g", 3))
    tail = list(partition.log.iter_batches())[-1]
    assert tail.record_count == 2  # tombstones: the offset and the group
    offsets_topic.reopen()
    assert "g" not in make_coordinator().groups


def test_offsets_of_a_stable_group_do_not_expire(make_coordinator, clock):
    coordinator = make_coordinator()
    member, generation = stable_member(coordinator)
    commit(coordinator, member=member, generation=generation)
    clock.advance(ms=RETENTION_MS * 2)
    coordinator.heartbeat("g", member, None, generation)
    assert coordinator.expire_offsets() == 0


def test_simple_group_offsets_expire_from_their_commit_time(make_coordinator, clock):
    coordinator = make_coordinator()
    commit(coordinator, offsets=[("events", 0, 1)])
    clock.advance(ms=RETENTION_MS // 2)
    commit(coordinator, offsets=[("events", 1, 1)])
    clock.advance(ms=RETENTION_MS // 2)
    assert coordinator.expire_offsets() == 1
    assert fetched(coordinator) == {("events", 1): 1}


def test_groups_of_an_unloaded_partition_are_not_coordinated_here(make_coordinator, offsets_topic):
    coordinator = make_coordinator()
    commit(coordinator)
    index = coordinator.partition_of("g")
    offsets_topic.led = {i for i in range(3) if i != index}  # leadership moved to another broker
    coordinator.unload_partition(index)
    assert "g" not in coordinator.groups
    assert coordinator.heartbeat("g", "m", None, 1) == NOT_COORDINATOR
    assert coordinator.fetch_offsets("g", None) == (NOT_COORDINATOR, {})
    assert coordinator.find_coordinator("g") == NOT_COORDINATOR
    offsets_topic.led = None  # and back: the partition is replayed
    assert coordinator.find_coordinator("g") == NONE
    assert fetched(coordinator) == {("events", 0): 10}


def test_list_and_describe(make_coordinator):
    coordinator = make_coordinator()
    member, _ = stable_member(coordinator, "a")
    commit(coordinator, "b")
    assert coordinator.list_groups() == [("a", "consumer", "Stable", "classic"), ("b", "", "Empty", "classic")]
    assert coordinator.list_groups([STABLE]) == [("a", "consumer", "Stable", "classic")]
    assert coordinator.list_groups(["stable"], ["consumer"]) == []   # the type filter: no KIP-848 group here
    described = coordinator.describe("a")
    assert (described.state, described.protocol_type, described.protocol) == ("Stable", "consumer", "range")
    assert [(m.member_id, m.client_host, m.assignment) for m in described.members] == [
        (member, "/127.0.0.1", b"assignment")]


def test_group_metadata_is_stored_after_each_completed_rebalance(make_coordinator, offsets_topic):
    coordinator = make_coordinator()
    stable_member(coordinator)
    partition = offsets_topic.partition(partition_for("g", 3))
    keys = [decode_key(key) for _, key, _ in read_partition(partition)]
    assert keys == [GroupKey("g")]
    commit(coordinator, member=coordinator.groups["g"].leader_id, generation=1)
    assert [decode_key(key) for _, key, _ in read_partition(partition)][-1] == OffsetKey("g", "events", 0)


def test_service_answers_held_joins_when_the_timer_completes_the_rebalance(offsets_topic, clock):
    service = GroupService(GroupConfig(offsets_partitions=3, initial_rebalance_delay_ms=3000), offsets_topic,
                           clock=clock, partition_exists=lambda t, p: True)

    async def scenario():
        joins = [asyncio.ensure_future(service.join_group("g", join_request(client_id=f"c{i}", v4=False)))
                 for i in range(2)]
        await asyncio.sleep(0)  # let both requests reach the coordinator
        assert not any(j.done() for j in joins)
        clock.advance(ms=3000)
        service.deliver(service.poll())
        clock.advance(ms=3000)  # the second member extended the initial delay once
        service.deliver(service.poll())
        return await asyncio.gather(*joins)

    results = asyncio.run(scenario())
    assert [r.generation_id for r in results] == [1, 1] and results[0].leader_id == results[0].member_id


def test_service_close_answers_held_requests_with_not_coordinator(offsets_topic, clock):
    service = GroupService(GroupConfig(offsets_partitions=3, initial_rebalance_delay_ms=3000), offsets_topic,
                           clock=clock, partition_exists=lambda t, p: True)

    async def scenario():
        join = asyncio.ensure_future(service.join_group("g", join_request(v4=False)))
        await asyncio.sleep(0)
        service.close()
        return await join

    assert asyncio.run(scenario()).error == NOT_COORDINATOR


def test_coordinator_is_a_plain_object_without_a_running_loop(offsets_topic, clock):
    coordinator = GroupCoordinator(GroupConfig(offsets_partitions=3), offsets_topic, clock=clock,
                                   partition_exists=lambda t, p: True)
    assert commit(coordinator) == {("events", 0): NONE}


def test_records_match_the_documented_format(make_coordinator, offsets_topic):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((Path(__file__).parents[2] / "broker_sim" / "schemas" / "consumer-offsets.json").read_text())
    coordinator = make_coordinator()
    member, generation = stable_member(coordinator)
    commit(coordinator, member=member, generation=generation, metadata="m")
    coordinator.leave("g", [(member, None)])
    assert coordinator.delete_groups(["g"]) == {"g": NONE}
    docs = [record_to_json(key, value) for p in offsets_topic.partitions.values()
            for _, key, value in read_partition(p)]
    assert [d["key"]["type"] for d in docs] == ["group_metadata", "offset_commit", "group_metadata",
                                                "offset_commit", "group_metadata"]
    for doc in docs:
        jsonschema.validate(doc, schema)
    docs[0]["value"]["members"][0]["session_timeout_ms"] = "ten seconds"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(docs[0], schema)
