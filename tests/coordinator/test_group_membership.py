"""Group membership: joins, syncs, heartbeats, leaves and timers, on ``ClassicGroup`` with an injected time."""
from __future__ import annotations

import itertools

from broker_sim.coordinator.group.metadata import (
    COORDINATOR_NOT_AVAILABLE, FENCED_INSTANCE_ID, ILLEGAL_GENERATION, INCONSISTENT_GROUP_PROTOCOL,
    MEMBER_ID_REQUIRED, NONE, REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID, ClassicGroup, GroupConfig, JoinResult,
    SyncResult,
)
from broker_sim.coordinator.group.state import COMPLETING_REBALANCE, EMPTY, PREPARING_REBALANCE, STABLE

from group_helpers import REBALANCE_MS, SESSION_MS, START_MS, join_request, subscription

tickets = itertools.count(1)


class Harness:
    """Drives one group; ``replies`` collects every answer by ticket, as the async layer would deliver them."""

    def __init__(self, **config) -> None:
        self.now = START_MS
        self.group = ClassicGroup("g", self.now, GroupConfig(**config))
        self.replies: dict[int, JoinResult | SyncResult] = {}
        self.held: dict[str, int] = {}  # member id -> ticket of its latest JoinGroup

    def _take(self, outcome) -> None:
        for ticket, result in outcome.replies:
            assert ticket not in self.replies, f"ticket {ticket} answered twice"
            self.replies[ticket] = result

    def join(self, member_id="", **kwargs) -> int:
        ticket = next(tickets)
        self._take(self.group.join(join_request(member_id, **kwargs), ticket, self.now))
        return ticket

    def join_new(self, **kwargs) -> str:
        """The v4+ two-step join of a new member; returns its member id (the rejoin may still be waiting)."""
        first = self.join(**kwargs)
        assert self.replies[first].error == MEMBER_ID_REQUIRED
        member_id = self.replies[first].member_id
        self.held[member_id] = self.join(member_id, **kwargs)
        return member_id

    def sync(self, member_id, generation=None, assignments=None, instance_id=None) -> int:
        ticket = next(tickets)
        generation = self.group.generation_id if generation is None else generation
        self._take(self.group.sync(member_id, instance_id, generation, None, None, assignments or {}, ticket,
                                   self.now))
        return ticket

    def heartbeat(self, member_id, instance_id=None, generation=None) -> int:
        generation = self.group.generation_id if generation is None else generation
        return self.group.heartbeat(member_id, instance_id, generation, self.now)

    def leave(self, *members):
        errors, outcome = self.group.leave(list(members), self.now)
        self._take(outcome)
        return errors

    def advance(self, ms: int) -> None:
        self.now += ms
        self._take(self.group.poll(self.now))

    def stable_group(self, count: int, **join_kwargs) -> list[str]:
        """``count`` members that joined one by one and synced; returns their ids, leader first."""
        members = []
        for _ in range(count):
            member_id = self.join_new(**join_kwargs)
            members.append(member_id)
            rejoins = {m: self.join(m, **join_kwargs) for m in members[:-1]}
            rejoins[member_id] = self.held[member_id]
            assert all(self.replies[t].error == NONE for t in rejoins.values())
            leader = self.group.leader_id
            syncs = [self.sync(m) for m in members if m != leader]
            syncs.append(self.sync(leader, assignments={m: m.encode() for m in members}))
            assert all(self.replies[t].error == NONE for t in syncs)
        assert self.group.state is STABLE
        return members


def test_single_member_join_sync_and_heartbeat():
    h = Harness()
    first = h.join()
    assert h.replies[first].error == MEMBER_ID_REQUIRED
    member_id = h.replies[first].member_id
    assert member_id.startswith("client-")
    assert h.group.members == {} and member_id in h.group.pending_members

    second = h.join(member_id)
    result = h.replies[second]
    assert (result.error, result.generation_id, result.leader_id, result.protocol_name) == (NONE, 1, member_id, "range")
    assert [m.member_id for m in result.members] == [member_id]
    assert result.members[0].metadata == subscription("events")
    assert h.group.state is COMPLETING_REBALANCE

    sync = h.sync(member_id, assignments={member_id: b"all of it"})
    assert h.replies[sync] == SyncResult(NONE, "consumer", "range", b"all of it")
    assert h.group.state is STABLE
    assert h.heartbeat(member_id) == NONE


def test_three_members_held_until_the_initial_delay_and_the_leaders_assignment():
    h = Harness(initial_rebalance_delay_ms=3000)
    ids = [h.join_new() for _ in range(3)]
    waiting = [h.held[m] for m in ids]
    assert all(t not in h.replies for t in waiting) and h.group.state is PREPARING_REBALANCE

    h.advance(3000)  # members kept arriving during the first delay: Kafka waits one more delay
    assert all(t not in h.replies for t in waiting)
    h.advance(3000)
    results = [h.replies[t] for t in waiting]
    assert {r.generation_id for r in results} == {1} and {r.error for r in results} == {NONE}
    leader = ids[0]
    assert {r.leader_id for r in results} == {leader}
    by_member = {r.member_id: r for r in results}
    assert [m.member_id for m in by_member[leader].members] == ids
    assert by_member[ids[1]].members == () and by_member[ids[2]].members == ()

    follower_syncs = [h.sync(ids[1]), h.sync(ids[2])]
    assert all(t not in h.replies for t in follower_syncs)  # held until the leader syncs
    leader_sync = h.sync(leader, assignments={m: f"part-of-{m}".encode() for m in ids})
    assert h.replies[leader_sync].assignment == f"part-of-{leader}".encode()
    assert h.replies[follower_syncs[0]].assignment == f"part-of-{ids[1]}".encode()
    assert h.replies[follower_syncs[1]].assignment == f"part-of-{ids[2]}".encode()
    assert h.group.state is STABLE


def test_v3_clients_join_without_member_id_required():
    h = Harness()
    ticket = h.join(v4=False)
    assert h.replies[ticket].error == NONE and h.replies[ticket].generation_id == 1


def test_a_member_id_never_used_expires_after_the_session_timeout():
    h = Harness()
    h.join()
    assert len(h.group.pending_members) == 1
    h.advance(SESSION_MS)
    assert h.group.pending_members == {}


def test_a_new_member_triggers_a_rebalance_that_waits_for_every_known_member():
    h = Harness()
    a, b = h.stable_group(2)
    c = h.join_new()
    held_c = h.held[c]
    assert h.group.state is PREPARING_REBALANCE and held_c not in h.replies
    assert h.heartbeat(a) == REBALANCE_IN_PROGRESS
    held_a = h.join(a)
    assert held_a not in h.replies
    held_b = h.join(b)
    assert {h.replies[t].generation_id for t in (held_a, held_b, held_c)} == {3}
    assert h.group.state is COMPLETING_REBALANCE


def test_rebalance_timeout_removes_members_that_did_not_rejoin():
    h = Harness()
    long_session = {"session_ms": 2 * REBALANCE_MS}  # b's session outlasts the rebalance
    a, b = h.stable_group(2, **long_session)
    c = h.join_new(**long_session)
    held_a = h.join(a, **long_session)
    h.advance(REBALANCE_MS - 1)
    assert held_a not in h.replies
    h.advance(1)
    assert h.replies[held_a].error == NONE and h.replies[h.held[c]].error == NONE
    assert list(h.group.members) == [a, c]
    assert h.heartbeat(b) == UNKNOWN_MEMBER_ID


def test_session_expiry_removes_a_silent_member_and_rebalances():
    h = Harness()
    a, b = h.stable_group(2)
    h.advance(SESSION_MS // 2)
    assert h.heartbeat(a) == NONE
    h.advance(SESSION_MS // 2)  # b's session is over; a's is not
    assert list(h.group.members) == [a]
    assert h.group.state is PREPARING_REBALANCE
    assert h.heartbeat(a) == REBALANCE_IN_PROGRESS
    rejoin = h.join(a)
    assert h.replies[rejoin].generation_id == 3 and [m.member_id for m in h.replies[rejoin].members] == [a]


def test_the_leader_leaving_hands_leadership_to_the_next_member():
    h = Harness()
    a, b, c = h.stable_group(3)
    assert h.leave((a, None)) == [NONE]
    assert h.group.leader_id == b and h.group.state is PREPARING_REBALANCE
    held = [h.join(b), h.join(c)]
    assert {h.replies[t].leader_id for t in held} == {b}


def test_the_last_member_leaving_empties_the_group_with_a_new_generation():
    h = Harness()
    (a,) = h.stable_group(1)
    assert h.leave((a, None)) == [NONE]
    assert h.group.state is EMPTY and h.group.generation_id == 2 and h.group.members == {}


def test_batched_leave_reports_each_member():
    h = Harness()
    a, b = h.stable_group(2, instance_id=None)
    errors = h.leave((a, None), ("nobody", None), ("", "unknown-instance"))
    assert errors == [NONE, UNKNOWN_MEMBER_ID, UNKNOWN_MEMBER_ID]


def test_sync_errors():
    h = Harness()
    a, b = h.stable_group(2)
    assert h.replies[h.sync(a, generation=1)].error == ILLEGAL_GENERATION
    assert h.replies[h.sync("stranger")].error == UNKNOWN_MEMBER_ID
    h.join_new()
    assert h.replies[h.sync(a)].error == REBALANCE_IN_PROGRESS


def test_a_rebalance_during_completing_rebalance_releases_held_followers():
    h = Harness(initial_rebalance_delay_ms=0)
    a, b = h.stable_group(2)
    h.join_new()
    held = [h.join(a), h.join(b)]
    assert h.group.state is COMPLETING_REBALANCE and all(h.replies[t].error == NONE for t in held)
    follower_sync = h.sync(b)
    assert follower_sync not in h.replies
    h.join_new()  # yet another member
    assert h.replies[follower_sync].error == REBALANCE_IN_PROGRESS


def test_heartbeat_errors():
    h = Harness()
    (a,) = h.stable_group(1)
    assert h.heartbeat(a, generation=0) == ILLEGAL_GENERATION
    assert h.heartbeat("stranger") == UNKNOWN_MEMBER_ID
    h.group.mark_dead(h.now)
    assert h.heartbeat(a) == COORDINATOR_NOT_AVAILABLE


def test_static_member_rejoin_replaces_the_member_without_a_rebalance_and_fences_the_old_id():
    h = Harness()
    first = h.join(instance_id="i-1")  # static members get their id at once, no MEMBER_ID_REQUIRED
    a = h.replies[first].member_id
    h.sync(a, instance_id="i-1", assignments={a: b"a"})
    second = h.join(instance_id="i-2")
    h.join(a, instance_id="i-1")
    b = h.replies[second].member_id
    h.sync(b, instance_id="i-2")
    h.sync(a, instance_id="i-1", assignments={a: b"a", b: b"b"})
    assert h.group.state is STABLE and h.group.leader_id == a
    generation = h.group.generation_id

    rejoin = h.join(instance_id="i-1")  # a restarted process: same instance id, no member id
    result = h.replies[rejoin]
    assert result.error == NONE and result.member_id != a
    assert result.generation_id == generation and h.group.state is STABLE
    assert result.leader_id == a and result.members == ()  # the old leader id: it does not reassign
    new_a = result.member_id
    assert h.group.leader_id == new_a
    assert h.heartbeat(a, instance_id="i-1") == FENCED_INSTANCE_ID
    assert h.heartbeat(new_a, instance_id="i-1") == NONE
    assert h.heartbeat(b, instance_id="i-2") == NONE
    assert h.replies[h.sync(new_a, instance_id="i-1")].assignment == b"a"


def test_static_member_rejoining_with_another_protocol_rebalances():
    h = Harness()
    first = h.join(instance_id="i-1")
    member = h.replies[first].member_id
    h.sync(member, instance_id="i-1", assignments={member: b"x"})
    rejoin = h.join(instance_id="i-1", protocols=(("roundrobin", b""), ("range", b"")))
    assert rejoin in h.replies  # a lone member: the rebalance completes at once
    assert h.replies[rejoin].protocol_name == "roundrobin" and h.replies[rejoin].generation_id == 2


def test_protocol_selection_by_votes_among_protocols_every_member_supports():
    h = Harness(initial_rebalance_delay_ms=1000)
    h.join_new(protocols=(("range", b""), ("roundrobin", b""), ("sticky", b"")))
    h.join_new(protocols=(("roundrobin", b""), ("range", b"")))
    h.join_new(protocols=(("roundrobin", b""), ("range", b"")))
    assert h.group.select_protocol() == "roundrobin"


def test_protocol_vote_ties_go_to_the_first_member_in_join_order():
    h = Harness(initial_rebalance_delay_ms=1000)
    h.join_new(protocols=(("range", b""), ("roundrobin", b"")))
    h.join_new(protocols=(("roundrobin", b""), ("range", b"")))
    assert h.group.select_protocol() == "range"


def test_a_member_without_a_common_protocol_is_refused():
    h = Harness()
    h.stable_group(1)
    ticket = h.join(protocols=(("cooperative-sticky", b""),))
    assert h.replies[ticket].error == INCONSISTENT_GROUP_PROTOCOL


def test_a_retried_join_during_completing_rebalance_gets_the_same_answer():
    h = Harness()
    a = h.join_new()
    first = h.replies[h.held[a]]
    again = h.join(a)
    assert h.replies[again] == first and h.group.generation_id == 1
