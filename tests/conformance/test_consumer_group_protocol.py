"""KIP-848's ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69), compared with Apache Kafka 4.1 request by
request: the refusals and their messages, a member's life (join, steady heartbeats, leave), two members handing
partitions over (revocation before assignment: no partition owned twice), static members leaving with epoch -2
and coming back, OffsetCommit v9 / OffsetFetch v9 checked against member epochs, regex subscriptions, and how the
other group APIs see a consumer-protocol group (ListGroups types, DescribeGroups, an empty classic group turned
into a consumer group with its offsets).

Which member gets which partition is the assignor's choice, and Kafka's uniform assignor follows Java hash-map
order: answers compare how many partitions each member has, which partitions the group covers and that no partition
is owned twice, never the exact split. Topic ids are per broker and are compared through the topic they name.
Group names, member ids and topic names are per peer and appear in messages as ``<group>`` / ``<topic>``.
"""
from __future__ import annotations

import time

from kafka.protocol.admin import DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.consumer import OffsetCommitRequest, OffsetFetchRequest
from kafka.protocol.metadata import MetadataRequest

from broker_sim.protocol.messages import ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest
from differential import Scenario, create_topic

Heartbeat = ConsumerGroupHeartbeatRequest
TopicPartitions = Heartbeat.TopicPartitions
REBALANCE_TIMEOUT_MS = 30_000


def _topic_ids(peer, *names: str) -> dict:
    """topic id -> the topic's role name (as the scenario calls it)."""
    answer = peer.call(MetadataRequest[12](topics=[MetadataRequest.MetadataRequestTopic(name=n, topic_id=None)
                                                   for n in names],
                                           allow_auto_topic_creation=False,
                                           include_topic_authorized_operations=False))
    return {t.topic_id: t.name for t in answer.topics}


class Member:
    """One consumer-protocol member driven by hand: its id, epoch and owned partitions as a client keeps them."""

    def __init__(self, peer, group: str, member_id: str, topics: list[str] | None = None, regex: str | None = None,
                 instance_id: str | None = None, assignor: str | None = None, version: int = 1) -> None:
        self.peer, self.group, self.member_id = peer, group, member_id
        self.topics, self.regex, self.instance_id, self.assignor = topics, regex, instance_id, assignor
        self.version = version
        self.epoch = 0
        self.owned: dict = {}   # topic id -> partitions

    def request(self, epoch: int | None = None, **overrides):
        epoch = self.epoch if epoch is None else epoch
        joining = epoch == 0
        fields = dict(group_id=self.group, member_id=self.member_id, member_epoch=epoch,
                      instance_id=self.instance_id, rack_id=None,
                      rebalance_timeout_ms=REBALANCE_TIMEOUT_MS if joining else -1,
                      subscribed_topic_names=self.topics if joining else None,
                      server_assignor=self.assignor if joining else None,
                      topic_partitions=[] if joining else [TopicPartitions(topic_id=t, partitions=sorted(p))
                                                           for t, p in self.owned.items()])
        if self.version >= 1:
            fields["subscribed_topic_regex"] = self.regex if joining else None
        fields.update(overrides)
        return Heartbeat[self.version](**fields)

    def beat(self, epoch: int | None = None, **overrides):
        """Send a heartbeat; take the answer's epoch and assignment as a client does (it revokes at once)."""
        answer = _call(self.peer, self.request(epoch, **overrides))
        if answer.error_code == 0:
            self.epoch = answer.member_epoch
            if answer.assignment is not None:
                self.owned = {t.topic_id: set(t.partitions) for t in answer.assignment.topic_partitions}
        return answer

    def partitions(self, names: dict) -> list:
        return sorted((names.get(t, "?"), p) for t, parts in self.owned.items() for p in parts)


COORDINATOR_SETTLING = {14, 15, 16}   # COORDINATOR_LOAD_IN_PROGRESS, _NOT_AVAILABLE, NOT_COORDINATOR


def _call(peer, request):
    """``request``'s answer once the coordinator is ready (Kafka loads a new __consumer_offsets partition for a
    moment after FindCoordinator named it, answering NOT_COORDINATOR meanwhile; clients retry)."""
    return peer.settled(lambda: request, codes=COORDINATOR_SETTLING)


def _answer(answer, peer, group: str, names: dict | None = None, members: dict | None = None) -> dict:
    """A heartbeat answer as comparable data: assignment by topic role, ids and names by role."""
    message = answer.error_message
    if message:
        message = message.replace(group, "<group>")
        for member_id, role in (members or {}).items():
            message = message.replace(member_id, f"<{role}>")
    assignment = None
    if answer.assignment is not None:
        assignment = sorted(((names or {}).get(t.topic_id, "?"), sorted(t.partitions))
                            for t in answer.assignment.topic_partitions)
    return {"error": answer.error_code, "message": message,
            "member_id": (members or {}).get(answer.member_id, answer.member_id),
            "epoch": answer.member_epoch, "interval": answer.heartbeat_interval_ms, "assignment": assignment}


def _describe(peer, group: str, names: dict, members: dict) -> dict:
    answer = _call(peer, ConsumerGroupDescribeRequest[1](group_ids=[group], include_authorized_operations=False))
    (described,) = answer.groups
    if described.error_code:
        return {"error": described.error_code, "message": (described.error_message or "").replace(group, "<group>")}

    def parts(assignment):
        return sorted((names.get(t.topic_id, t.topic_name), p) for t in assignment.topic_partitions
                      for p in t.partitions)

    return {"error": 0, "state": described.group_state, "epoch": described.group_epoch,
            "assignment_epoch": described.assignment_epoch, "assignor": described.assignor_name,
            "members": sorted(({"member": members.get(m.member_id, m.member_id), "instance": m.instance_id,
                                "epoch": m.member_epoch, "client_id": m.client_id,
                                "subscribed": sorted(names.get(n, n) for n in m.subscribed_topic_names),
                                "regex": m.subscribed_topic_regex, "owned": len(parts(m.assignment)),
                                "target": len(parts(m.target_assignment)), "type": m.member_type}
                               for m in described.members), key=lambda d: d["member"])}


def _find_coordinator(peer, group: str) -> None:
    """FindCoordinator until the group's coordinator is ready, as a client asks before its first heartbeat
    (Kafka creates __consumer_offsets then, and answers NOT_COORDINATOR to a heartbeat before)."""
    from kafka.protocol.metadata import FindCoordinatorRequest

    peer.settled(lambda: FindCoordinatorRequest[4](key_type=0, coordinator_keys=[group]), codes={14, 15, 16})


def _group(peer) -> str:
    group = peer.name("g")
    _find_coordinator(peer, group)
    return group


# Kafka's group coordinator learns of a new topic from its metadata image a moment after CreateTopics answered;
# a member joining before that is assigned nothing at first (and more epochs follow): the scenarios wait
METADATA_PROPAGATION_S = 1.0


def _group_and_topic(peer, partitions: int = 3):
    """A new group and topic; ``names`` maps the topic's id and name to its role "t"."""
    topic = create_topic(peer, "cg", partitions=partitions)
    names = {t: "t" for t in _topic_ids(peer, topic)} | {topic: "t"}
    group = _group(peer)
    time.sleep(METADATA_PROPAGATION_S)
    return group, topic, names


def _converge(members: list[Member], rounds: int = 20, pause_s: float = 0.0) -> None:
    """Heartbeat every member in turn until none's epoch or assignment changes for a whole round."""
    for _ in range(rounds):
        before = [(m.epoch, {t: frozenset(p) for t, p in m.owned.items()}) for m in members]
        for m in members:
            m.beat()
        after = [(m.epoch, {t: frozenset(p) for t, p in m.owned.items()}) for m in members]
        if before == after:
            return
        if pause_s:
            time.sleep(pause_s)


# --- the request's own checks ---------------------------------------------------------------------------

def _refusals(peer):
    group, topic, names = _group_and_topic(peer)
    m = Member(peer, group, "member-a", topics=[topic])
    cases = {
        "empty member id (v1)": m.request(member_id=""),
        "empty group id": m.request(group_id=""),
        "empty instance id": m.request(instance_id=""),
        "empty rack id": m.request(rack_id=""),
        "no rebalance timeout on join": m.request(rebalance_timeout_ms=-1),
        "owned partitions on join": m.request(topic_partitions=None),
        "nothing subscribed on join": m.request(subscribed_topic_names=None),
        "epoch -3": m.request(-3),
        "static leave without instance id": m.request(-2),
        "unknown assignor": m.request(server_assignor="sticky"),
        "invalid regex": m.request(subscribed_topic_names=None, subscribed_topic_regex="cg-("),
        "epoch 5 of a group that does not exist": m.request(5),
        "leave of a group that does not exist": m.request(-1),
    }
    return {case: _answer(_call(peer, request), peer, group, names) for case, request in cases.items()}


def test_a_heartbeat_kafka_refuses_is_refused_with_its_error_and_message(pair):
    answers = pair.compare(Scenario("refusals", _refusals))
    assert answers["empty member id (v1)"]["error"] == 42 and answers["unknown assignor"]["error"] == 112
    assert answers["invalid regex"]["error"] == 128


# --- one member ------------------------------------------------------------------------------------------

def _one_member(peer):
    group, topic, names = _group_and_topic(peer)
    roles = {"member-a": "a"}
    m = Member(peer, group, "member-a", topics=[topic])
    steps = {"join": _answer(m.beat(), peer, group, names, roles)}
    steps["steady"] = _answer(m.beat(), peer, group, names, roles)
    steps["describe"] = _describe(peer, group, names, roles)
    steps["unknown member"] = _answer(Member(peer, group, "member-x", topics=[topic]).beat(3), peer, group, names,
                                      {"member-x": "x"})
    steps["greater epoch"] = _answer(m.beat(m.epoch + 5), peer, group, names, roles)
    steps["rejoin with epoch 0 while a member"] = _answer(m.beat(0), peer, group, names, roles)
    listed = peer.call(ListGroupsRequest[5](states_filter=[], types_filter=["consumer"]))
    steps["listed"] = [(g.group_state, g.group_type, g.protocol_type) for g in listed.groups if g.group_id == group]
    classic = peer.call(DescribeGroupsRequest[6](groups=[group], include_authorized_operations=False)).groups[0]
    steps["DescribeGroups"] = (classic.error_code, (classic.error_message or "").replace(group, "<group>"),
                               classic.group_state)
    steps["leave"] = _answer(m.beat(-1), peer, group, names, roles)
    steps["after leave"] = _describe(peer, group, names, roles)
    return steps


def test_one_member_joins_gets_every_partition_heartbeats_and_leaves_as_on_kafka(pair):
    steps = pair.compare(Scenario("one member", _one_member, ignore=("describe.members.*.client_id",)))
    assert steps["join"]["epoch"] == 1 and steps["join"]["assignment"] == [["t", [0, 1, 2]]]
    assert steps["steady"]["assignment"] is None and steps["after leave"]["state"] == "Empty"


# --- two members hand partitions over ------------------------------------------------------------------------

def _handover(peer):
    group, topic, names = _group_and_topic(peer, partitions=4)
    roles = {"member-a": "a", "member-b": "b"}
    a = Member(peer, group, "member-a", topics=[topic])
    b = Member(peer, group, "member-b", topics=[topic])
    steps = {"a joins": _answer(a.beat(), peer, group, names, roles)}
    joined = b.beat()
    steps["b joins"] = {"epoch": joined.member_epoch, "partitions": len(b.partitions(names))}
    revoking = a.beat()
    steps["a is asked to revoke"] = {"epoch": revoking.member_epoch, "partitions": len(a.partitions(names))}
    _converge([a, b])
    owned = a.partitions(names) + b.partitions(names)
    steps["converged"] = {"epochs": (a.epoch, b.epoch), "counts": sorted((len(a.partitions(names)),
                                                                          len(b.partitions(names)))),
                          "covered": sorted(owned), "owned twice": len(owned) - len(set(owned))}
    steps["describe"] = _describe(peer, group, names, roles)
    steps["b leaves"] = _answer(b.beat(-1), peer, group, names, roles)
    _converge([a])
    steps["a alone"] = a.partitions(names)
    return steps


def test_a_second_member_gets_its_share_only_once_the_first_revoked_it(pair):
    steps = pair.compare(Scenario("handover", _handover, ignore=("describe.members.*.client_id",)))
    assert steps["b joins"] == {"epoch": 2, "partitions": 0}   # its partitions are still the first member's
    assert steps["a is asked to revoke"] == {"epoch": 1, "partitions": 2}
    assert steps["converged"]["counts"] == [2, 2] and steps["converged"]["owned twice"] == 0
    assert len(steps["a alone"]) == 4


# --- static members ----------------------------------------------------------------------------------------

def _static(peer):
    group, topic, names = _group_and_topic(peer)
    roles = {"member-a": "a", "member-a2": "a2", "member-z": "z"}
    a = Member(peer, group, "member-a", topics=[topic], instance_id="instance-1")
    steps = {"join": _answer(a.beat(), peer, group, names, roles)}
    held = a.partitions(names)
    other = Member(peer, group, "member-z", topics=[topic], instance_id="instance-1")
    steps["same instance, other member, while held"] = _answer(other.beat(), peer, group, names, roles)
    steps["static leave"] = _answer(a.beat(-2), peer, group, names, roles)
    steps["describe while away"] = _describe(peer, group, names, roles)
    back = Member(peer, group, "member-a2", topics=[topic], instance_id="instance-1")
    steps["back under a new member id"] = _answer(back.beat(), peer, group, names, roles)
    steps["keeps its partitions"] = back.partitions(names) == held
    steps["old member id"] = _answer(a.beat(a.epoch if a.epoch > 0 else 1), peer, group, names, roles)
    return steps


def test_a_static_member_that_left_with_epoch_minus_2_comes_back_with_its_partitions(pair):
    steps = pair.compare(Scenario("static", _static, ignore=("describe while away.members.*.client_id",)))
    assert steps["same instance, other member, while held"]["error"] == 111
    assert steps["static leave"]["epoch"] == -2 and steps["keeps its partitions"] is True


# --- offsets with member epochs ---------------------------------------------------------------------------

def _offsets(peer):
    group, topic, names = _group_and_topic(peer)
    m = Member(peer, group, "member-a", topics=[topic])
    m.beat()
    Commit = OffsetCommitRequest.OffsetCommitRequestTopic
    Part = Commit.OffsetCommitRequestPartition

    def commit(version: int, member_id: str, epoch: int):
        answer = peer.call(OffsetCommitRequest[version](
            group_id=group, generation_id_or_member_epoch=epoch, member_id=member_id, group_instance_id=None,
            retention_time_ms=-1,
            topics=[Commit(name=topic, partitions=[Part(partition_index=0, committed_offset=5,
                                                        committed_leader_epoch=-1, committed_metadata="")])]))
        return [p.error_code for t in answer.topics for p in t.partitions]

    def fetch(member_id, epoch: int):
        Group = OffsetFetchRequest.OffsetFetchRequestGroup
        answer = peer.call(OffsetFetchRequest[9](groups=[Group(
            group_id=group, member_id=member_id, member_epoch=epoch,
            topics=[Group.OffsetFetchRequestTopics(name=topic, partition_indexes=[0])])], require_stable=False))
        (g,) = answer.groups
        return g.error_code, [(p.committed_offset, p.error_code) for t in g.topics for p in t.partitions]

    return {"v9 current epoch": commit(9, "member-a", m.epoch), "v9 stale epoch": commit(9, "member-a", m.epoch + 1),
            "v9 unknown member": commit(9, "member-x", 1), "v8 from a member": commit(8, "member-a", m.epoch),
            "v9 outside the group": commit(9, "", -1),
            "fetch as the member": fetch("member-a", m.epoch), "fetch stale": fetch("member-a", m.epoch + 3),
            "fetch unknown member": fetch("member-x", 1), "fetch as admin": fetch(None, -1)}


def test_offset_commits_and_fetches_are_checked_against_the_members_epoch(pair):
    answers = pair.compare(Scenario("offsets", _offsets))
    assert answers["v9 current epoch"] == [0] and answers["v9 stale epoch"] == [113]


# --- regex subscriptions, and an empty classic group converted --------------------------------------------

def _regex(peer):
    stem = peer.name("rx")
    first = create_topic(peer, "x", partitions=2)   # a topic the regex does not match
    matched = []
    for suffix in ("a", "b"):
        name = f"{stem}-{suffix}"
        from kafka.protocol.admin import CreateTopicsRequest
        peer.call(CreateTopicsRequest[4](topics=[CreateTopicsRequest.CreatableTopic(
            name=name, num_partitions=2, replication_factor=1, assignments=[], configs=[])], timeout_ms=10_000,
            validate_only=False))
        matched.append(name)
    names = {t: ("matched-" + n[-1] if n in matched else "other") for t, n in _topic_ids(peer, first, *matched).items()}
    group = _group(peer)
    time.sleep(METADATA_PROPAGATION_S)
    m = Member(peer, group, "member-a", regex=f"{stem}-.*")
    m.beat()
    deadline = time.monotonic() + 30
    while len(m.partitions(names)) < 4 and time.monotonic() < deadline:   # Kafka resolves regexes asynchronously
        time.sleep(0.2)
        m.beat()
    described = _describe(peer, group, names, {"member-a": "a"})
    for member in described.get("members", ()):
        member["regex"] = member["regex"].replace(stem, "<stem>")
    return {"partitions": m.partitions(names), "describe": described}


def test_a_regex_subscription_gets_the_partitions_of_every_topic_it_matches(pair):
    # Kafka resolves a regex asynchronously: how many epochs that takes is timing
    answer = pair.compare(Scenario("regex", _regex, ignore=("describe.members.*.client_id", "describe.members.*.epoch",
                                                            "describe.epoch", "describe.assignment_epoch")))
    assert [t for t, _ in answer["partitions"]] == ["matched-a"] * 2 + ["matched-b"] * 2


def _converted(peer):
    group, topic, names = _group_and_topic(peer)
    Commit = OffsetCommitRequest.OffsetCommitRequestTopic
    Part = Commit.OffsetCommitRequestPartition
    committed = peer.call(OffsetCommitRequest[8](
        group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None, retention_time_ms=-1,
        topics=[Commit(name=topic, partitions=[Part(partition_index=1, committed_offset=7, committed_leader_epoch=-1,
                                                    committed_metadata="")])]))
    listed = peer.call(ListGroupsRequest[5](states_filter=[], types_filter=[]))
    before = [(g.group_type, g.group_state) for g in listed.groups if g.group_id == group]
    m = Member(peer, group, "member-a", topics=[topic])
    joined = _answer(m.beat(), peer, group, names, {"member-a": "a"})
    Group = OffsetFetchRequest.OffsetFetchRequestGroup
    fetched = peer.call(OffsetFetchRequest[9](groups=[Group(group_id=group, member_id="member-a", member_epoch=m.epoch,
                                                            topics=[Group.OffsetFetchRequestTopics(
                                                                name=topic, partition_indexes=[1])])],
                                              require_stable=False)).groups[0]
    listed = peer.call(ListGroupsRequest[5](states_filter=[], types_filter=[]))
    after = [(g.group_type, g.group_state) for g in listed.groups if g.group_id == group]
    return {"commit": [p.error_code for t in committed.topics for p in t.partitions], "before": before,
            "join": joined, "offset kept": [p.committed_offset for t in fetched.topics for p in t.partitions],
            "after": after}


def test_an_empty_classic_group_becomes_a_consumer_group_and_keeps_its_offsets(pair):
    answer = pair.compare(Scenario("converted", _converted))
    assert answer["before"] == [["classic", "Empty"]] and answer["offset kept"] == [7]


def _group_timing(peer):
    from kafka.protocol.admin import IncrementalAlterConfigsRequest

    group, topic, names = _group_and_topic(peer)
    Resource = IncrementalAlterConfigsRequest.AlterConfigsResource
    altered = peer.call(IncrementalAlterConfigsRequest[1](resources=[Resource(
        resource_type=32, resource_name=group, configs=[Resource.AlterableConfig(
            name="consumer.heartbeat.interval.ms", config_operation=0, value="7000")])], validate_only=False))
    _config_applied(peer, group, "consumer.heartbeat.interval.ms", "7000")
    joined = Member(peer, group, "member-a", topics=[topic]).beat()
    return {"alter": [r.error_code for r in altered.responses], "interval": joined.heartbeat_interval_ms}


def _config_applied(peer, group: str, key: str, value: str) -> None:
    """Until the group's config reads ``value``: Kafka's broker applies a config change from its metadata log a
    moment after the controller answered the alter."""
    from kafka.protocol.admin import DescribeConfigsRequest

    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        answer = peer.call(DescribeConfigsRequest[4](resources=[DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=32, resource_name=group, configuration_keys=[key])], include_synonyms=False,
            include_documentation=False))
        if [c.value for c in answer.results[0].configs] == [value]:
            return
        time.sleep(0.05)
    raise AssertionError(f"{peer.kind}: {key}={value} of group {group} not applied")


def test_a_groups_own_heartbeat_interval_is_what_its_members_are_told(pair):
    assert pair.compare(Scenario("group timing", _group_timing)) == {"alter": [0], "interval": 7000}
