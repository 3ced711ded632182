"""Every advertised version of every group API, over the wire, through one member's whole life.

For each version v, each API is spoken at v clamped into its served range
(Kafka 4 removed OffsetCommit v0-1 and OffsetFetch v0), so the loop covers
every version ApiVersions advertises: the
request decodes on the broker and the response decodes in kafka-python.
It runs on broker_sim and on Apache Kafka (``any_broker``): a group coordinator
Kafka is still loading answers COORDINATOR_NOT_AVAILABLE / LOAD_IN_PROGRESS for a
moment, which ``GroupWire.settled`` retries as clients do.
"""
from __future__ import annotations

import time
import uuid

import pytest
from kafka.protocol.admin import DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import (
    HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, OffsetCommitRequest, OffsetDeleteRequest,
    OffsetFetchRequest, SyncGroupRequest,
)
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription
from kafka.protocol.metadata import FindCoordinatorRequest

from broker_sim.protocol.apis import APIS
from client_helpers import create_topic
from kafka_wire import WireClient

GROUP_APIS = [ApiKey.FindCoordinator, ApiKey.JoinGroup, ApiKey.SyncGroup, ApiKey.Heartbeat, ApiKey.LeaveGroup,
              ApiKey.OffsetCommit, ApiKey.OffsetFetch, ApiKey.DescribeGroups, ApiKey.ListGroups,
              ApiKey.DeleteGroups, ApiKey.OffsetDelete]
TOP = max(APIS[key].max_version for key in GROUP_APIS)
# coordinator load in progress, not available, not coordinator
SETTLING = frozenset({14, 15, 16})


class GroupWire:
    def __init__(self, client: WireClient, version: int) -> None:
        self.client, self.v = client, version

    def settled(self, cls, timeout: float = 20, **fields):
        """``call`` again while the answer's top-level (or first coordinator's) code says "not yet"."""
        deadline = time.monotonic() + timeout
        while True:
            version, response = self.call(cls, **fields)
            code = (response.coordinators[0].error_code if getattr(response, "coordinators", None)
                    else response.error_code)
            if code not in SETTLING or time.monotonic() >= deadline:
                return version, response
            time.sleep(0.1)

    def call(self, cls, **fields):
        spec = APIS[cls.API_KEY]
        version = max(spec.min_version, min(self.v, spec.max_version))
        correlation_id, data = self.client.encode(cls[version](**fields))
        self.client.send_bytes(data)
        response = spec.response.decode(self.client.recv_frame(), version=version, header=True)
        assert response.header.correlation_id == correlation_id
        return version, response


# the advertised ranges are checked on the wire against the README: test_api_versions_table.py


class Wire(WireClient):
    """A wire client with the test's own topic (2 partitions) and names: the Kafka node is the session's."""

    def __init__(self, broker) -> None:
        super().__init__(broker.bootstrap_servers)
        self.tag = uuid.uuid4().hex[:8]
        self.topic = f"events-{self.tag}"
        self.node_id = broker.server.broker_id if broker.kind == "pylog" else broker.server.node_id
        self.subscription = bytes(ConsumerProtocolSubscription(version=0, topics=[self.topic],
                                                               user_data=None).encode())

    def name(self, prefix: str) -> str:
        return f"{prefix}-{self.tag}"


@pytest.fixture
def wire(any_broker):
    with Wire(any_broker) as client:
        create_topic(any_broker.bootstrap_servers, client.topic, 2)
        yield client


@pytest.mark.parametrize("v", range(TOP + 1))
def test_a_members_life_at_every_version(wire, v):
    w = GroupWire(wire, v)
    group, other, events, subscription = wire.name(f"wire-{v}"), wire.name("other"), wire.topic, wire.subscription

    version, found = w.settled(FindCoordinatorRequest, key=group, key_type=0, coordinator_keys=[group, other])
    coordinators = found.coordinators if version >= 4 else [found]
    if version >= 4 and coordinators[1].error_code in SETTLING:
        version, found = w.settled(FindCoordinatorRequest, key=other, key_type=0, coordinator_keys=[other, group])
        coordinators = found.coordinators
    assert [c.error_code for c in coordinators] == [0] * (2 if version >= 4 else 1)
    assert coordinators[0].node_id == wire.node_id

    join = dict(group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000, group_instance_id=None,
                protocol_type="consumer", protocols=[JoinGroupRequest.JoinGroupRequestProtocol(
                    name="range", metadata=subscription)], reason=None)
    version, joined = w.settled(JoinGroupRequest, member_id="", **join)
    if version >= 4:
        assert joined.error_code == 79  # MEMBER_ID_REQUIRED
        version, joined = w.call(JoinGroupRequest, member_id=joined.member_id, **join)
    assert (joined.error_code, joined.generation_id, joined.protocol_name) == (0, 1, "range")
    assert joined.leader == joined.member_id and [m.metadata for m in joined.members] == [subscription]
    member, generation = joined.member_id, joined.generation_id
    who = dict(group_id=group, generation_id=generation, member_id=member, group_instance_id=None)

    _, synced = w.call(SyncGroupRequest, protocol_type="consumer", protocol_name="range", **who, assignments=[
        SyncGroupRequest.SyncGroupRequestAssignment(member_id=member, assignment=b"assigned")])
    assert (synced.error_code, synced.assignment) == (0, b"assigned")
    assert w.call(HeartbeatRequest, **who)[1].error_code == 0

    Topic = OffsetCommitRequest.OffsetCommitRequestTopic
    commit = dict(group_id=group, generation_id_or_member_epoch=generation if v >= 1 else -1,
                  member_id=member if v >= 1 else "", group_instance_id=None, retention_time_ms=-1,
                  topics=[Topic(name=events, partitions=[Topic.OffsetCommitRequestPartition(
                      partition_index=1, committed_offset=42, committed_leader_epoch=0, commit_timestamp=-1,
                      committed_metadata="meta")])])
    _, committed = w.call(OffsetCommitRequest, **commit)
    # v0 has no member id: a commit from outside an active group is refused
    assert committed.topics[0].partitions[0].error_code == (25 if v == 0 else 0)

    _, described = w.call(DescribeGroupsRequest, groups=[group], include_authorized_operations=False)
    d = described.groups[0]
    assert (d.error_code, d.group_state, d.protocol_type, d.protocol_data) == (0, "Stable", "consumer", "range")
    assert [(m.member_id, m.member_metadata, m.member_assignment) for m in d.members] == [
        (member, subscription, b"assigned")]

    version, listed = w.call(ListGroupsRequest, states_filter=["stable"], types_filter=[])
    assert (group, "consumer") in [(g.group_id, g.protocol_type) for g in listed.groups]
    if version >= 4:
        assert {g.group_state for g in listed.groups} == {"Stable"}

    version, left = w.call(LeaveGroupRequest, group_id=group, member_id=member, members=[
        LeaveGroupRequest.MemberIdentity(member_id=member, group_instance_id=None, reason=None)])
    assert left.error_code == 0
    if version >= 3:
        assert [(m.member_id, m.error_code) for m in left.members] == [(member, 0)]
    if v == 0:  # the group is Empty now: a simple commit is accepted
        assert w.call(OffsetCommitRequest, **commit)[1].topics[0].partitions[0].error_code == 0

    FetchTopic = OffsetFetchRequest.OffsetFetchRequestTopic
    version, fetched = w.call(
        OffsetFetchRequest, group_id=group, require_stable=True,
        topics=[FetchTopic(name=events, partition_indexes=[0, 1])],
        groups=[OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group, topics=[
            OffsetFetchRequest.OffsetFetchRequestGroup.OffsetFetchRequestTopics(name=events,
                                                                               partition_indexes=[0, 1])])])
    topics = fetched.groups[0].topics if version >= 8 else fetched.topics
    partitions = {p.partition_index: p for p in topics[0].partitions}
    assert (partitions[0].committed_offset, partitions[0].error_code) == (-1, 0)
    assert (partitions[1].committed_offset, partitions[1].metadata) == (42, "meta")
    if version >= 5:  # the leader epoch is committed from OffsetCommit v6 on
        assert partitions[1].committed_leader_epoch == (0 if v >= 6 else -1)

    if v == 0:
        _, deleted_offsets = w.call(OffsetDeleteRequest, group_id=group, topics=[
            OffsetDeleteRequest.OffsetDeleteRequestTopic(name=events, partitions=[
                OffsetDeleteRequest.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(partition_index=1)])])
        assert deleted_offsets.error_code == 0 and deleted_offsets.topics[0].partitions[0].error_code == 0

    never = wire.name("never-existed")
    _, deleted = w.call(DeleteGroupsRequest, groups_names=[group, never])
    assert sorted((r.group_id, r.error_code) for r in deleted.results) == sorted([(group, 0), (never, 69)])


def test_find_coordinator_for_a_transactional_id_names_this_broker(wire):
    txn_id = wire.name("tx")
    version, found = GroupWire(wire, 4).settled(FindCoordinatorRequest, key=txn_id, key_type=1,
                                                coordinator_keys=[txn_id])
    assert (found.coordinators[0].error_code, found.coordinators[0].node_id) == (0, wire.node_id)


def test_offset_fetch_of_all_topics_with_null(wire):
    w = GroupWire(wire, 7)
    group = wire.name("nulls")
    w.settled(FindCoordinatorRequest, key=group, key_type=0, coordinator_keys=[group])
    Topic = OffsetCommitRequest.OffsetCommitRequestTopic
    w.call(OffsetCommitRequest, group_id=group, generation_id_or_member_epoch=-1, member_id="",
           group_instance_id=None, topics=[Topic(name=wire.topic, partitions=[
               Topic.OffsetCommitRequestPartition(partition_index=0, committed_offset=3, committed_leader_epoch=-1,
                                                  committed_metadata=None)])])
    _, fetched = w.call(OffsetFetchRequest, group_id=group, topics=None, require_stable=False)
    assert [(t.name, [(p.partition_index, p.committed_offset, p.metadata) for p in t.partitions])
            for t in fetched.topics] == [(wire.topic, [(0, 3, "")])]
