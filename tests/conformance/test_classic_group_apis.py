"""Consumer groups (the classic protocol), compared with Apache Kafka: FindCoordinator, JoinGroup, SyncGroup,
Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, DescribeGroups, ListGroups, DeleteGroups and OffsetDelete,
their error paths at every version broker_sim serves (KIP-848's ConsumerGroupHeartbeat is issue #39).

Member ids are per broker (``<client id>-<uuid>``), so answers carry whether a member id is set or is the
leader's, never the id itself.
"""
from __future__ import annotations

import threading
import uuid

import pytest
from kafka.protocol.admin import DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.consumer import (
    HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, OffsetCommitRequest, OffsetDeleteRequest,
    OffsetFetchRequest, SyncGroupRequest,
)
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription
from kafka.protocol.metadata import FindCoordinatorRequest

from differential import Scenario, create_topic

SESSION_MS = 10_000
Protocol = JoinGroupRequest.JoinGroupRequestProtocol
CommitTopic = OffsetCommitRequest.OffsetCommitRequestTopic
CommitPartition = CommitTopic.OffsetCommitRequestPartition


def _subscription(*topics: str) -> bytes:
    return bytes(ConsumerProtocolSubscription(version=0, topics=list(topics), user_data=None).encode())


def _coordinator(peer, group: str) -> None:
    peer.settled(lambda: FindCoordinatorRequest[3](key=group, key_type=0))


def _join_request(version, group, member_id="", *, instance=None, session_ms=SESSION_MS, protocol_type="consumer",
                  protocols=None, rebalance_ms=SESSION_MS):
    return JoinGroupRequest[version](
        group_id=group, session_timeout_ms=session_ms, rebalance_timeout_ms=rebalance_ms, member_id=member_id,
        group_instance_id=instance, protocol_type=protocol_type,
        protocols=[Protocol(name="range", metadata=_subscription("t"))] if protocols is None else protocols,
        reason=None)


def _joined(answer, member_id: str | None = None) -> dict:
    """A JoinGroup answer without its per-broker ids."""
    return {"error": answer.error_code, "generation": answer.generation_id,
            "has_member_id": bool(answer.member_id), "leader": bool(answer.leader) and answer.leader == answer.member_id,
            "protocol_type": getattr(answer, "protocol_type", None), "protocol": answer.protocol_name,
            "members": len(answer.members), "same_member": member_id is None or answer.member_id == member_id,
            "skip_assignment": getattr(answer, "skip_assignment", None)}


def _join(peer, group, version=7, **kwargs):
    """Join as a new member (answering MEMBER_ID_REQUIRED on v4+): the final JoinGroup answer."""
    _coordinator(peer, group)
    answer = peer.settled(lambda: _join_request(version, group, **kwargs))
    if answer.error_code == 79:  # MEMBER_ID_REQUIRED
        kwargs["member_id"] = answer.member_id
        answer = peer.call(_join_request(version, group, **kwargs))
    return answer


def _sync(peer, group, joined, version=5, *, generation=None, member_id=None, protocol_type="consumer",
          protocol_name="range", assignment=b"assigned"):
    member_id = joined.member_id if member_id is None else member_id
    return peer.call(SyncGroupRequest[version](
        group_id=group, generation_id=joined.generation_id if generation is None else generation,
        member_id=member_id, group_instance_id=None, protocol_type=protocol_type, protocol_name=protocol_name,
        assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=member_id, assignment=assignment)]))


def _stable(peer, group, topics=("t",)):
    """A group of one member, joined and synced: its JoinGroup answer."""
    joined = _join(peer, group, protocols=[Protocol(name="range", metadata=_subscription(*topics))])
    assert _sync(peer, group, joined).error_code == 0
    return joined


def _heartbeat(peer, group, member_id, generation, version=4, instance=None):
    return peer.call(HeartbeatRequest[version](group_id=group, generation_id=generation, member_id=member_id,
                                               group_instance_id=instance)).error_code


def _commit(peer, group, offsets, version=8, *, generation=-1, member_id="", metadata=""):
    """{(topic, partition): error} of an OffsetCommit."""
    by_topic: dict[str, list] = {}
    for (topic, partition), offset in offsets.items():
        by_topic.setdefault(topic, []).append(CommitPartition(
            partition_index=partition, committed_offset=offset, committed_leader_epoch=-1, commit_timestamp=-1,
            committed_metadata=metadata))
    answer = peer.settled(lambda: OffsetCommitRequest[version](
        group_id=group, generation_id_or_member_epoch=generation, member_id=member_id, group_instance_id=None,
        retention_time_ms=-1, topics=[CommitTopic(name=t, partitions=ps) for t, ps in by_topic.items()]))
    return [p.error_code for t in answer.topics for p in t.partitions]


# --- FindCoordinator ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", range(7))
def test_find_coordinator(pair, version):
    """A group's and a transactional id's coordinator at v0-3 (one key), v4+ (batched); an unknown key type
    is INVALID_REQUEST; v6's share key type (KIP-932) where share groups are off."""
    def run(peer):
        group = peer.name("g")
        if version >= 4:
            def keys(key_type, *names):
                answer = peer.settled(lambda: FindCoordinatorRequest[version](key_type=key_type,
                                                                              coordinator_keys=list(names)))
                return [(c.key in names, c.error_code, c.node_id >= 0) for c in answer.coordinators]
            found = {"groups": keys(0, group, peer.name("g")), "txn": keys(1, peer.name("x")),
                     "bad_type": [c[:2] for c in keys(7, group)]}
            if version >= 6:   # a share-partition key: "group:topic-id:partition"
                found["share"] = [c[:2] for c in keys(2, f"{group}:{uuid.uuid4()}:0")]
            return found
        answer = peer.settled(lambda: FindCoordinatorRequest[version](key=group, key_type=0))
        found = {"group": (answer.error_code, answer.node_id >= 0)}
        if version >= 1:
            found["txn"] = peer.settled(lambda: FindCoordinatorRequest[version](key=peer.name("x"),
                                                                                 key_type=1)).error_code
            found["bad_type"] = peer.call(FindCoordinatorRequest[version](key=group, key_type=7)).error_code
        return found
    pair.compare(Scenario(f"FindCoordinator v{version}", run))


# --- JoinGroup ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", range(10))
def test_join_group_as_a_new_member(pair, version):
    """An unknown member joins: v4+ first gets MEMBER_ID_REQUIRED with its id, then joins with it; the group's
    first generation has it as leader."""
    def run(peer):
        group = peer.name("g")
        _coordinator(peer, group)
        first = peer.settled(lambda: _join_request(version, group))
        answers = {"first": _joined(first)}
        if first.error_code == 79:
            answers["second"] = _joined(peer.call(_join_request(version, group, member_id=first.member_id)),
                                        first.member_id)
        return answers
    pair.compare(Scenario(f"JoinGroup v{version} new member", run))


@pytest.mark.parametrize("version", [5, 7, 8, 9])
def test_join_group_static_member(pair, version):
    """A group.instance.id joins at once (no MEMBER_ID_REQUIRED); the same instance id joining again replaces the
    member, whose old member id is then FENCED_INSTANCE_ID. The rejoining member led the Stable group: before v9
    its answer names the old leader (it must not reassign); from v9 it leads, with the members and
    skip_assignment (KIP-814)."""
    def run(peer):
        group = peer.name("g")
        _coordinator(peer, group)
        first = peer.settled(lambda: _join_request(version, group, instance="i-1"))
        sync = peer.call(SyncGroupRequest[5](
            group_id=group, generation_id=first.generation_id, member_id=first.member_id, group_instance_id="i-1",
            protocol_type="consumer", protocol_name="range", assignments=[]))
        again = peer.call(_join_request(version, group, instance="i-1"))
        return {"first": _joined(first), "sync": sync.error_code,
                "again": {**_joined(again), "new_id": again.member_id != first.member_id},
                "old_heartbeat": _heartbeat(peer, group, first.member_id, first.generation_id, instance="i-1"),
                "new_heartbeat": _heartbeat(peer, group, again.member_id, again.generation_id, instance="i-1"),
                "wrong_instance": _heartbeat(peer, group, again.member_id, again.generation_id, instance="i-2")}
    pair.compare(Scenario(f"JoinGroup v{version} static member", run))


@pytest.mark.parametrize("version", [0, 4, 7])
def test_join_group_session_timeout_bounds(pair, version):
    """Session timeouts outside group.min/max.session.timeout.ms (6000, 1800000): INVALID_SESSION_TIMEOUT."""
    def run(peer):
        group = peer.name("g")
        _coordinator(peer, group)
        return {timeout: _joined(peer.settled(lambda: _join_request(version, group, session_ms=timeout)))
                for timeout in (5999, 1_800_001)}
    pair.compare(Scenario(f"JoinGroup v{version} session timeouts", run))


def test_join_group_inconsistent_protocols(pair):
    """An empty protocol type, no protocols, or a protocol type or protocols the group's members do not share:
    INCONSISTENT_GROUP_PROTOCOL."""
    def run(peer):
        group = peer.name("g")
        _coordinator(peer, group)
        answers = {"empty_type": _joined(peer.settled(lambda: _join_request(7, peer.name("g"), protocol_type=""))),
                   "no_protocols": _joined(peer.settled(lambda: _join_request(7, peer.name("g"), protocols=[])))}
        _stable(peer, group)
        answers["other_type"] = _joined(peer.call(_join_request(3, group, protocol_type="connect")))
        answers["other_protocol"] = _joined(peer.call(_join_request(
            3, group, protocols=[Protocol(name="roundrobin", metadata=b"")])))
        return answers
    pair.compare(Scenario("JoinGroup inconsistent protocols", run))


# --- SyncGroup, Heartbeat -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", range(6))
def test_sync_group_errors(pair, version):
    """SyncGroup of the wrong generation (ILLEGAL_GENERATION), an unknown member (UNKNOWN_MEMBER_ID), v5+ a
    protocol type or name other than the group's (INCONSISTENT_GROUP_PROTOCOL); the leader's own: its
    assignment."""
    def run(peer):
        group = peer.name("g")
        joined = _join(peer, group)

        def sync(**kwargs):
            answer = _sync(peer, group, joined, version, **kwargs)
            return (answer.error_code, bytes(answer.assignment).decode(errors="replace"),
                    getattr(answer, "protocol_type", None), getattr(answer, "protocol_name", None))
        answers = {"wrong_generation": sync(generation=joined.generation_id + 1),
                   "unknown_member": sync(member_id="nobody")}
        if version >= 5:
            answers["wrong_type"] = sync(protocol_type="connect")
            answers["wrong_name"] = sync(protocol_name="roundrobin")
        answers["leader"] = sync()
        answers["again"] = sync(assignment=b"ignored")
        answers["unknown_group"] = _sync(peer, peer.name("g"), joined, version).error_code
        return answers
    pair.compare(Scenario(f"SyncGroup v{version} errors", run))


@pytest.mark.parametrize("version", range(5))
def test_heartbeat_errors(pair, version):
    """Heartbeat of the current member: NONE; wrong generation ILLEGAL_GENERATION; unknown member or group
    UNKNOWN_MEMBER_ID; while a new member's join rebalances the group: REBALANCE_IN_PROGRESS."""
    def run(peer):
        group = peer.name("g")
        joined = _stable(peer, group)
        member, generation = joined.member_id, joined.generation_id
        answers = {"ok": _heartbeat(peer, group, member, generation, version),
                   "wrong_generation": _heartbeat(peer, group, member, generation + 1, version),
                   "unknown_member": _heartbeat(peer, group, "nobody", generation, version),
                   "unknown_group": _heartbeat(peer, peer.name("g"), member, generation, version)}
        other = peer.connect()
        held = {}
        # the second member's join is held until the first rejoins or leaves (on a connection of its own)
        joiner = threading.Thread(target=lambda: held.update(answer=other.call(
            _join_request(3, group), timeout_s=20)))
        joiner.start()
        try:
            answers["rebalancing"] = peer.settled(lambda: HeartbeatRequest[version](
                group_id=group, generation_id=generation, member_id=member, group_instance_id=None),
                codes={0}, timeout_s=10).error_code
            left = peer.call(LeaveGroupRequest[3](group_id=group, members=[
                LeaveGroupRequest.MemberIdentity(member_id=member, group_instance_id=None, reason=None)]))
            answers["left"] = [m.error_code for m in left.members]
        finally:
            joiner.join(25)
            other.close()
        answers["second_join"] = _joined(held["answer"])
        return answers
    pair.compare(Scenario(f"Heartbeat v{version} errors", run))


# --- LeaveGroup ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", range(6))
def test_leave_group(pair, version):
    """A member leaves (v0-2: one member id; v3+: a batch, unknown members and instance ids answered per
    member); an unknown group: UNKNOWN_MEMBER_ID."""
    def run(peer):
        group = peer.name("g")
        joined = _stable(peer, group)
        if version < 3:
            return {"unknown": peer.call(LeaveGroupRequest[version](group_id=group, member_id="nobody")).error_code,
                    "member": peer.call(LeaveGroupRequest[version](group_id=group,
                                                                   member_id=joined.member_id)).error_code,
                    "unknown_group": peer.call(LeaveGroupRequest[version](group_id=peer.name("g"),
                                                                          member_id="x")).error_code}
        Member = LeaveGroupRequest.MemberIdentity
        answer = peer.call(LeaveGroupRequest[version](group_id=group, members=[
            Member(member_id=joined.member_id, group_instance_id=None, reason="done"),
            Member(member_id="nobody", group_instance_id=None, reason=None),
            Member(member_id="", group_instance_id="no-such-instance", reason=None)]))
        unknown_group = peer.call(LeaveGroupRequest[version](group_id=peer.name("g"), members=[
            Member(member_id="x", group_instance_id=None, reason=None)]))
        return {"error": answer.error_code,
                "members": [(m.member_id == joined.member_id, m.group_instance_id, m.error_code)
                            for m in answer.members],
                "unknown_group": (unknown_group.error_code, [m.error_code for m in unknown_group.members])}
    pair.compare(Scenario(f"LeaveGroup v{version}", run))


# --- OffsetCommit / OffsetFetch -----------------------------------------------------------------------------------

@pytest.mark.parametrize("version", range(2, 10))
def test_offset_commit(pair, version):
    """A simple commit (generation -1, no member) creates the group; an unknown topic or partition is
    UNKNOWN_TOPIC_OR_PARTITION; metadata over offset.metadata.max.bytes (4096) OFFSET_METADATA_TOO_LARGE; a
    member's commit of the wrong generation ILLEGAL_GENERATION, of a group that does not exist too; a simple
    commit to a group with members UNKNOWN_MEMBER_ID."""
    def run(peer):
        topic = create_topic(peer, partitions=2)
        group, simple = peer.name("g"), peer.name("g")
        _coordinator(peer, simple)
        answers = {"simple": _commit(peer, simple, {(topic, 0): 5, (topic, 1): 7}, version),
                   "unknown": _commit(peer, simple, {(topic, 9): 1, (peer.name("none"), 0): 1}, version),
                   "metadata_4096": _commit(peer, simple, {(topic, 0): 6}, version, metadata="m" * 4096),
                   "metadata_4097": _commit(peer, simple, {(topic, 0): 6}, version, metadata="m" * 4097),
                   "no_such_group": _commit(peer, peer.name("g"), {(topic, 0): 1}, version, generation=3,
                                            member_id="x")}
        joined = _stable(peer, group)
        answers["member"] = _commit(peer, group, {(topic, 0): 1}, version, generation=joined.generation_id,
                                    member_id=joined.member_id)
        answers["wrong_generation"] = _commit(peer, group, {(topic, 0): 1}, version,
                                              generation=joined.generation_id + 1, member_id=joined.member_id)
        answers["unknown_member"] = _commit(peer, group, {(topic, 0): 1}, version,
                                            generation=joined.generation_id, member_id="nobody")
        answers["not_a_member"] = _commit(peer, group, {(topic, 0): 1}, version)
        fetched = peer.call(OffsetFetchRequest[7](group_id=simple, require_stable=False, topics=[
            OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=[0, 1])]))
        answers["fetched"] = [(p.committed_offset, p.metadata, p.error_code) for t in fetched.topics
                              for p in t.partitions]
        return answers
    pair.compare(Scenario(f"OffsetCommit v{version}", run))


@pytest.mark.parametrize("version", range(1, 10))
def test_offset_fetch(pair, version):
    """Committed offsets back, -1 for partitions without one and for a group that does not exist (no error);
    v2+ all topics (topics null); v8+ several groups in one request; v9 a member id and epoch."""
    def run(peer):
        topic = create_topic(peer, partitions=2)
        group, unknown = peer.name("g"), peer.name("g")
        _coordinator(peer, group)
        _commit(peer, group, {(topic, 0): 42}, metadata="meta")
        Topic = OffsetFetchRequest.OffsetFetchRequestTopic

        def offsets(topics):
            return sorted((t.name == topic, p.partition_index, p.committed_offset, p.metadata, p.error_code)
                          for t in topics for p in t.partitions)
        if version >= 8:
            Group = OffsetFetchRequest.OffsetFetchRequestGroup
            GroupTopic = Group.OffsetFetchRequestTopics
            answer = peer.call(OffsetFetchRequest[version](require_stable=False, groups=[
                Group(group_id=group, topics=[GroupTopic(name=topic, partition_indexes=[0, 1])]),
                Group(group_id=unknown, topics=[GroupTopic(name=topic, partition_indexes=[0])]),
                Group(group_id=group, topics=None)]))
            found = [(g.group_id == group, g.error_code, offsets(g.topics)) for g in answer.groups]
            if version >= 9:   # KIP-848's member id and epoch, given to a classic group and a missing one
                answer = peer.call(OffsetFetchRequest[version](require_stable=False, groups=[
                    Group(group_id=g, member_id="someone", member_epoch=3,
                          topics=[GroupTopic(name=topic, partition_indexes=[0])]) for g in (group, unknown)]))
                found.append([(g.group_id == group, g.error_code, offsets(g.topics)) for g in answer.groups])
            return found
        fields = {"require_stable": False} if version >= 7 else {}
        answers = {}
        for name, group_id, topics in (("named", group, [Topic(name=topic, partition_indexes=[0, 1])]),
                                       ("unknown_group", unknown, [Topic(name=topic, partition_indexes=[0])])) + (
                ((("all", group, None),) if version >= 2 else ())):
            answer = peer.call(OffsetFetchRequest[version](group_id=group_id, topics=topics, **fields))
            answers[name] = (getattr(answer, "error_code", None), offsets(answer.topics))
        return answers
    pair.compare(Scenario(f"OffsetFetch v{version}", run))


# --- DescribeGroups / ListGroups / DeleteGroups / OffsetDelete ----------------------------------------------------

@pytest.mark.parametrize("version", range(7))
def test_describe_groups(pair, version):
    """A Stable group with its member (client id, host, metadata, assignment), an Empty one, one that does not
    exist (Dead: no error before v6, GROUP_ID_NOT_FOUND and Kafka's message from v6, KIP-1043)."""
    def run(peer):
        topic = create_topic(peer)
        stable, empty = peer.name("g"), peer.name("g")
        joined = _stable(peer, stable)
        _coordinator(peer, empty)
        _commit(peer, empty, {(topic, 0): 1})
        missing = peer.name("g")
        answer = peer.call(DescribeGroupsRequest[version](groups=[stable, empty, missing],
                                                          include_authorized_operations=False))
        # by group: Kafka answers in the order of its coordinator shards, not the request's
        roles = {stable: "stable", empty: "empty", missing: "missing"}
        return {roles[g.group_id]: {
                    "error": g.error_code, "message": (getattr(g, "error_message", None) or "").replace(missing, "<id>"),
                    "state": g.group_state, "protocol_type": g.protocol_type,
                    "protocol": g.protocol_data, "operations": getattr(g, "authorized_operations", None),
                    "members": [(m.member_id == joined.member_id, m.client_id, m.client_host,
                                 bytes(m.member_metadata).hex(), bytes(m.member_assignment).hex(),
                                 getattr(m, "group_instance_id", None)) for m in g.members]}
                for g in answer.groups}
    pair.compare(Scenario(f"DescribeGroups v{version}", run))


@pytest.mark.parametrize("version", range(6))
def test_list_groups(pair, version):
    """Groups with their protocol type (v4+ state, filtered by states case-insensitively; v5+ type, filtered by
    types case-insensitively, an unknown type matching nothing)."""
    def run(peer):
        topic = create_topic(peer)
        stable, empty = peer.name("g"), peer.name("g")
        _stable(peer, stable)
        _coordinator(peer, empty)
        _commit(peer, empty, {(topic, 0): 1})
        names = {stable: "stable", empty: "empty"}

        def listed(states=None, types=None):
            fields = {"states_filter": states or []} if version >= 4 else {}
            answer = peer.call(ListGroupsRequest[version](**fields, types_filter=types or []))
            return answer.error_code, sorted((names[g.group_id], g.protocol_type, getattr(g, "group_state", None),
                                              getattr(g, "group_type", None))
                                             for g in answer.groups if g.group_id in names)
        answers = {"all": listed()}
        if version >= 4:
            answers.update(stable=listed(["stable"]), both=listed(["Empty", "Stable"]), bogus=listed(["Bogus"]))
        if version >= 5:
            answers.update(classic=listed(types=["Classic"]), consumer=listed(types=["consumer"]),
                           share=listed(types=["share"]), streams=listed(types=["streams"]),
                           either=listed(types=["CONSUMER", "classic"]), padded=listed(types=[" classic"]),
                           unknown=listed(types=["bogus"]),
                           stable_classic=listed(["Stable"], ["classic"]))
        return answers
    pair.compare(Scenario(f"ListGroups v{version}", run))


@pytest.mark.parametrize("version", range(3))
def test_delete_groups(pair, version):
    """A group with members: NON_EMPTY_GROUP; one that does not exist: GROUP_ID_NOT_FOUND; an Empty group with
    offsets: deleted (its offsets gone)."""
    def run(peer):
        topic = create_topic(peer)
        stable, empty, missing = peer.name("g"), peer.name("g"), peer.name("g")
        _stable(peer, stable)
        _coordinator(peer, empty)
        _commit(peer, empty, {(topic, 0): 1})
        answer = peer.call(DeleteGroupsRequest[version](groups_names=[stable, empty, missing]))
        fetched = peer.call(OffsetFetchRequest[7](group_id=empty, require_stable=False, topics=[
            OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])]))
        roles = {stable: "stable", empty: "empty", missing: "missing"}  # Kafka's order is its shards'
        return {"deleted": {roles[r.group_id]: r.error_code for r in answer.results},
                "offsets_after": [p.committed_offset for t in fetched.topics for p in t.partitions]}
    pair.compare(Scenario(f"DeleteGroups v{version}", run))


def test_offset_delete(pair):
    """OffsetDelete of a topic the Stable group subscribes to: GROUP_SUBSCRIBED_TO_TOPIC; of another topic: NONE;
    an unknown group: GROUP_ID_NOT_FOUND; a group of another protocol type with members: NON_EMPTY_GROUP."""
    def run(peer):
        subscribed, other = create_topic(peer), create_topic(peer)
        group = peer.name("g")
        joined = _stable(peer, group, topics=(subscribed,))
        _commit(peer, group, {(subscribed, 0): 3, (other, 0): 4}, generation=joined.generation_id,
                member_id=joined.member_id)

        def delete(group_id, topics):
            Topic = OffsetDeleteRequest.OffsetDeleteRequestTopic
            answer = peer.call(OffsetDeleteRequest[0](group_id=group_id, topics=[
                Topic(name=t, partitions=[Topic.OffsetDeleteRequestPartition(partition_index=0)]) for t in topics]))
            return answer.error_code, [(t.name == subscribed, p.error_code) for t in answer.topics
                                       for p in t.partitions]
        connect = peer.name("g")
        _join(peer, connect, protocol_type="connect")
        return {"mixed": delete(group, [subscribed, other]), "unknown_group": delete(peer.name("g"), [other]),
                "connect_group": delete(connect, [other]),
                "unknown_topic": delete(group, [peer.name("none")])}
    pair.compare(Scenario("OffsetDelete", run))
