"""Coordinator answers wait for the ISR: the shells hand what their core appended to ``isr_wait`` and answer
once it returns; ``IsrWait`` waits on the high watermarks of the partitions this broker still leads.

No sockets and no sleeps: the ISR is a fake that the test opens.
"""
from __future__ import annotations

import asyncio
import logging

import kafka.errors as Errors
import pytest

from broker_sim.coordinator.group.metadata import NONE, GroupConfig, SyncResult
from broker_sim.coordinator.group.records import CommittedOffset
from broker_sim.coordinator.group.service import GroupService
from broker_sim.coordinator.group.state import PREPARING_REBALANCE
from broker_sim.coordinator.isr_wait import IsrWait
from broker_sim.coordinator.txn.coordinator import TxnConfig
from broker_sim.coordinator.txn.service import TxnService

from group_helpers import REBALANCE_MS, join_request
from test_txn_coordinator import EVENTS, TIMEOUT_MS, Ids
from test_txn_coordinator import markers  # noqa: F401 (a fixture)


class GatedIsr:
    """An ``isr_wait`` that records what it is asked to wait for and returns once the test opens it."""

    def __init__(self, opened: bool = False) -> None:
        self.seen: list[dict] = []
        self.opened = opened
        self._open: asyncio.Event | None = None

    async def __call__(self, appended) -> None:
        self.seen.append(dict(appended))
        if not self.opened:
            self._open = self._open or asyncio.Event()
            await self._open.wait()

    def open(self) -> None:
        self.opened = True
        if self._open is not None:
            self._open.set()


class FakePartition:
    topic, index = "__transaction_state", 0

    def __init__(self, *, leader: bool = True, high_watermark: int = 0, fails: Exception | None = None) -> None:
        self.is_leader = leader
        self.high_watermark = high_watermark
        self.fails = fails
        self.waited: list[tuple[int, float]] = []

    async def wait_for_high_watermark(self, offset: int, timeout_s: float) -> None:
        self.waited.append((offset, timeout_s))
        if self.fails is not None:
            raise self.fails
        self.high_watermark = offset


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_isr_wait_waits_only_for_partitions_behind():
    behind, caught_up = FakePartition(high_watermark=3), FakePartition(high_watermark=9)
    assert asyncio.run(IsrWait(2.5)({behind: 7, caught_up: 9})) == NONE
    assert behind.waited == [(7, 2.5)] and behind.high_watermark == 7
    assert caught_up.waited == []


def test_an_append_behind_on_a_partition_led_elsewhere_now_is_not_a_success():
    """The new leader may have truncated it away: the answer must send the client to the new coordinator."""
    behind, moved = FakePartition(high_watermark=3), FakePartition(leader=False, high_watermark=2)
    assert asyncio.run(IsrWait(2.5)({behind: 7, moved: 4})) == Errors.NotLeaderForPartitionError.errno
    replicated_before_it_moved = FakePartition(leader=False, high_watermark=4)
    assert asyncio.run(IsrWait(2.5)({replicated_before_it_moved: 4})) == NONE


def test_a_failed_isr_wait_is_logged_and_answers_its_error(caplog):
    late = FakePartition(fails=Errors.RequestTimedOutError("high watermark 3 did not reach 7"))
    with caplog.at_level(logging.WARNING, logger="broker_sim.coordinator.isr_wait"):
        assert asyncio.run(IsrWait(1.0)({late: 7})) == Errors.RequestTimedOutError.errno
    assert any("not replicated to the ISR within 1 s" in r.getMessage() for r in caplog.records)


class FailingIsr(GatedIsr):
    """An ``isr_wait`` that reports ``error`` for every wait with something in it."""

    def __init__(self, error: int) -> None:
        super().__init__(opened=True)
        self.error = error

    async def __call__(self, appended) -> int:
        await super().__call__(appended)
        return self.error if appended else NONE


def test_transaction_writes_the_isr_did_not_get_are_answered_not_coordinator(state_topic, markers, clock):
    """Kafka's appendTransactionToLog: NOT_LEADER_OR_FOLLOWER -> NOT_COORDINATOR, a timeout ->
    COORDINATOR_NOT_AVAILABLE; a success here let a client commit a transaction the next coordinator lacked."""
    isr = GatedIsr(opened=True)
    service = TxnService(TxnConfig(state_partitions=3), state_topic, markers, clock=clock, next_producer_id=Ids(),
                         partition_exists=lambda t, p: t == "events", isr_wait=isr)
    service.startup()
    not_coordinator = Errors.NotCoordinatorError.errno

    async def scenario():
        init = await service.init_producer_id("tx", TIMEOUT_MS)
        service.isr_wait = FailingIsr(Errors.NotLeaderForPartitionError.errno)
        added = await service.add_partitions("tx", init.producer_id, init.producer_epoch, EVENTS)
        assert added == dict.fromkeys(EVENTS, not_coordinator)
        # a retry from the same state appends nothing, yet still waits for the unreplicated Ongoing record
        service.isr_wait = timed_out = FailingIsr(Errors.RequestTimedOutError.errno)
        retried = await service.add_partitions("tx", init.producer_id, init.producer_epoch, EVENTS)
        partition = state_topic.partition(service.partition_of("tx"))
        assert timed_out.seen == [{partition: partition.log_end_offset}]
        assert retried == dict.fromkeys(EVENTS, Errors.CoordinatorNotAvailableError.errno)
        assert await service.end_transaction("tx", init.producer_id, init.producer_epoch, True) == \
            Errors.CoordinatorNotAvailableError.errno
        refused = await service.init_producer_id("other", TIMEOUT_MS)
        assert refused.error == Errors.CoordinatorNotAvailableError.errno and refused.producer_id < 0

    asyncio.run(scenario())


def test_an_offset_commit_the_isr_did_not_get_answers_its_error(offsets_topic, clock):
    service = GroupService(GroupConfig(offsets_partitions=3), offsets_topic, clock=clock,
                           partition_exists=lambda t, p: True,
                           isr_wait=FailingIsr(Errors.NotLeaderForPartitionError.errno))
    commits = [("events", 0, CommittedOffset(10)), ("events", 1, CommittedOffset(4))]
    answer = asyncio.run(service.commit_offsets("g", "", None, -1, commits))
    assert answer == {("events", 0): Errors.NotCoordinatorError.errno, ("events", 1): Errors.NotCoordinatorError.errno}
    service.isr_wait = FailingIsr(Errors.RequestTimedOutError.errno)
    assert asyncio.run(service.delete_offsets("g", [("events", 0)])) == (
        Errors.RequestTimedOutError.errno, {("events", 0): Errors.RequestTimedOutError.errno})


def test_an_offset_commit_is_answered_only_once_the_isr_has_its_records(offsets_topic, clock):
    isr = GatedIsr()
    service = GroupService(GroupConfig(offsets_partitions=3), offsets_topic, clock=clock,
                           partition_exists=lambda t, p: True, isr_wait=isr)

    async def scenario():
        commit = asyncio.ensure_future(service.commit_offsets("g", "", None, -1, [("events", 0, CommittedOffset(10))]))
        await _settle()
        assert not commit.done()
        partition = offsets_topic.partition(service.partition_of("g"))
        assert isr.seen == [{partition: partition.log_end_offset}] and partition.log_end_offset == 1
        isr.open()
        return await commit

    assert asyncio.run(scenario()) == {("events", 0): NONE}


def test_a_held_sync_is_answered_once_the_isr_has_the_group_record(offsets_topic, clock):
    isr = GatedIsr(opened=True)
    service = GroupService(GroupConfig(offsets_partitions=3), offsets_topic, clock=clock,
                           partition_exists=lambda t, p: True, isr_wait=isr)

    async def scenario():
        joined = await service.join_group("g", join_request(v4=False))
        isr.opened = False
        sync = asyncio.ensure_future(service.sync_group("g", joined.member_id, None, joined.generation_id, None, None,
                                                        {joined.member_id: b"assignment"}))
        await _settle()
        assert not sync.done()
        partition = offsets_topic.partition(service.partition_of("g"))
        assert isr.seen[-1] == {partition: partition.log_end_offset}  # the group's metadata record
        isr.open()
        return await sync

    synced = asyncio.run(scenario())
    assert (synced.error, synced.assignment) == (NONE, b"assignment")


def test_transaction_requests_are_answered_once_the_isr_has_the_state_record(state_topic, markers, clock):
    isr = GatedIsr(opened=True)
    service = TxnService(TxnConfig(state_partitions=3), state_topic, markers, clock=clock, next_producer_id=Ids(),
                         partition_exists=lambda t, p: t == "events", isr_wait=isr)
    service.startup()

    async def scenario():
        refused = await service.init_producer_id("tx", 0)  # an invalid timeout: nothing written, nothing to wait for
        assert refused.error and isr.seen == [{}]
        init = await service.init_producer_id("tx", TIMEOUT_MS)
        partition = state_topic.partition(service.partition_of("tx"))
        assert isr.seen[-1] == {partition: partition.log_end_offset}
        await service.add_partitions("tx", init.producer_id, init.producer_epoch, EVENTS)
        assert isr.seen[-1] == {partition: partition.log_end_offset}
        isr.opened = False
        end = asyncio.ensure_future(service.end_transaction("tx", init.producer_id, init.producer_epoch, True))
        await _settle()
        assert not end.done()
        assert isr.seen[-1] == {partition: partition.log_end_offset}  # PrepareCommit, then CompleteCommit
        isr.open()
        return await end

    assert asyncio.run(scenario()) == NONE


# --- group records the ISR did not get: Kafka's storeGroup callback with an error -------------------------------
COORDINATOR_NOT_AVAILABLE = Errors.CoordinatorNotAvailableError.errno
NOT_COORDINATOR = Errors.NotCoordinatorError.errno


def group_service(offsets_topic, clock, isr_wait) -> GroupService:
    return GroupService(GroupConfig(offsets_partitions=3), offsets_topic, clock=clock,
                        partition_exists=lambda t, p: True, isr_wait=isr_wait)


async def two_members(service: GroupService, group: str = "g"):
    """A leader and a follower joined ``group``'s generation 2; their JoinGroup answers, leader first."""
    first = await service.join_group(group, join_request(v4=False))  # generation 1, alone
    second = asyncio.ensure_future(service.join_group(group, join_request(client_id="c2", v4=False)))
    await _settle()
    leader = await service.join_group(group, join_request(first.member_id))
    return leader, await second


def test_a_sync_whose_group_record_the_isr_did_not_get_fails_every_waiting_member_and_rebalances(offsets_topic,
                                                                                                 clock):
    """Kafka's doSyncGroup: the leader's assignment is stored before anyone hears it; a failed store answers
    every waiting member the mapped error (a timeout: COORDINATOR_NOT_AVAILABLE) and the group rebalances."""
    service = group_service(offsets_topic, clock, GatedIsr(opened=True))

    async def scenario():
        leader, follower = await two_members(service)
        assert (leader.generation_id, follower.generation_id) == (2, 2) and leader.leader_id == leader.member_id
        service.isr_wait = FailingIsr(Errors.RequestTimedOutError.errno)
        waiting = asyncio.ensure_future(service.sync_group("g", follower.member_id, None, 2, None, None, {}))
        await _settle()
        assert not waiting.done()  # the follower waits for the leader's assignment
        assigned = await service.sync_group("g", leader.member_id, None, 2, None, None,
                                            {leader.member_id: b"l", follower.member_id: b"f"})
        group = service.groups["g"]
        lost = (assigned, await waiting, str(group.state), [m.assignment for m in group.members.values()],
                service.heartbeat("g", follower.member_id, None, 2))
        # the ISR works again: the rebalance it started completes, and this time the assignment is told
        service.isr_wait = GatedIsr(opened=True)
        rejoin = asyncio.ensure_future(service.join_group("g", join_request(leader.member_id)))
        await _settle()
        joined = await service.join_group("g", join_request(follower.member_id, client_id="c2"))
        waiting = asyncio.ensure_future(service.sync_group("g", follower.member_id, None, 3, None, None, {}))
        await _settle()
        assigned = await service.sync_group("g", leader.member_id, None, 3, None, None,
                                            {leader.member_id: b"l3", follower.member_id: b"f3"})
        return lost, (await rejoin, joined), (assigned, await waiting)

    lost, rejoined, synced = asyncio.run(scenario())
    assert lost == (SyncResult(COORDINATOR_NOT_AVAILABLE), SyncResult(COORDINATOR_NOT_AVAILABLE),
                    "PreparingRebalance", [b"", b""], Errors.RebalanceInProgressError.errno)
    assert [(r.error, r.generation_id) for r in rejoined] == [(NONE, 3), (NONE, 3)]
    assert [(s.error, s.assignment) for s in synced] == [(NONE, b"l3"), (NONE, b"f3")]


def test_a_member_that_syncs_after_the_leader_waits_for_the_record_with_its_assignment(offsets_topic, clock):
    """A follower's SyncGroup that comes once the group is Stable reads the assignment the leader's record holds:
    it waits for the group's partition up to its log end, and is not told NONE when the ISR did not get it."""
    service = group_service(offsets_topic, clock, GatedIsr(opened=True))

    async def scenario():
        leader, follower = await two_members(service)
        assigned = await service.sync_group("g", leader.member_id, None, 2, None, None,
                                            {leader.member_id: b"l", follower.member_id: b"f"})
        assert assigned == SyncResult(NONE, "consumer", "range", b"l")
        service.isr_wait = isr = FailingIsr(Errors.NotLeaderForPartitionError.errno)
        late = await service.sync_group("g", follower.member_id, None, 2, None, None, {})
        return isr.seen, late

    seen, late = asyncio.run(scenario())
    partition = offsets_topic.partition(service.partition_of("g"))
    assert seen == [{partition: partition.log_end_offset}] and partition.log_end_offset == 1
    assert late == SyncResult(NOT_COORDINATOR)
    assert service.groups["g"].state is PREPARING_REBALANCE


def test_a_leave_group_whose_record_the_isr_did_not_get_answers_its_error(offsets_topic, clock):
    """The last member leaves: the Empty group's record is written; Kafka's new coordinator fails the whole
    LeaveGroup with the write's error (handleOperationException), here NOT_COORDINATOR for a moved leader."""
    service = group_service(offsets_topic, clock, GatedIsr(opened=True))

    async def stable_member(group: str) -> str:
        joined = await service.join_group(group, join_request(v4=False))
        synced = await service.sync_group(group, joined.member_id, None, joined.generation_id, None, None,
                                          {joined.member_id: b"a"})
        assert synced.error == NONE
        return joined.member_id

    async def scenario():
        g, h = await stable_member("g"), await stable_member("h")
        left = await service.leave_group("g", [(g, None)])
        service.isr_wait = isr = FailingIsr(Errors.NotLeaderForPartitionError.errno)
        return left, await service.leave_group("h", [(h, None)]), isr.seen

    left, lost, seen = asyncio.run(scenario())
    assert left == (NONE, [NONE])
    assert lost == (NOT_COORDINATOR, [NOT_COORDINATOR])
    partition = offsets_topic.partition(service.partition_of("h"))
    assert seen[-1] == {partition: partition.log_end_offset}  # the Empty group's record


def test_a_static_member_rejoining_is_not_told_its_new_id_when_the_isr_did_not_get_the_record(offsets_topic,
                                                                                              clock):
    """Kafka's updateStaticMemberAndRebalance: a static member that rejoins a Stable group is stored with its new
    member id; when that store fails, the JoinGroup gets the error and no member id."""
    service = group_service(offsets_topic, clock, GatedIsr(opened=True))

    async def scenario():
        joined = await service.join_group("g", join_request(instance_id="i", v4=False))
        synced = await service.sync_group("g", joined.member_id, "i", 1, None, None, {joined.member_id: b"a"})
        assert synced.error == NONE
        service.isr_wait = FailingIsr(Errors.RequestTimedOutError.errno)
        lost = await service.join_group("g", join_request(instance_id="i", v4=False))
        service.isr_wait = GatedIsr(opened=True)
        return lost, await service.join_group("g", join_request(instance_id="i", v4=False))

    lost, again = asyncio.run(scenario())
    assert (lost.error, lost.member_id) == (COORDINATOR_NOT_AVAILABLE, "")
    assert again.error == NONE and again.member_id and again.generation_id == 1


@pytest.mark.parametrize("raised, answered", [
    (Errors.NotEnoughReplicasError, COORDINATOR_NOT_AVAILABLE),  # fewer in-sync replicas than min.insync.replicas
    (Errors.MessageSizeTooLargeError, Errors.UnknownError.errno),  # not the offset commit's INVALID_COMMIT_OFFSET_SIZE
])
def test_a_sync_whose_group_record_was_not_appended_at_all_fails_and_rebalances(make_coordinator, offsets_topic,
                                                                                monkeypatch, raised, answered):
    coordinator = make_coordinator()
    [(_, joined)] = coordinator.join("g", join_request(v4=False), coordinator.new_ticket())

    def refuse(*args, **kwargs):
        raise raised("refused by the test")

    coordinator.ensure_topic()
    monkeypatch.setattr(offsets_topic.partition(coordinator.partition_of("g")), "append_records", refuse)
    replies = coordinator.sync("g", joined.member_id, None, joined.generation_id, None, None,
                               {joined.member_id: b"a"}, coordinator.new_ticket())
    assert [result for _, result in replies] == [SyncResult(answered)]
    group = coordinator.groups["g"]
    assert group.state is PREPARING_REBALANCE and [m.assignment for m in group.members.values()] == [b""]


def test_the_timer_answers_each_group_after_its_own_appends_only(offsets_topic, clock):
    """One pass of the timer completes group a's rebalance (nothing written) and empties group b (its record
    written): a's members do not wait for, nor fail with, b's record."""
    service = group_service(offsets_topic, clock, GatedIsr(opened=True))

    async def scenario():
        first = await service.join_group("a", join_request(v4=False))  # generation 1; never syncs, expires
        held = asyncio.ensure_future(service.join_group("a", join_request(client_id="c2", v4=False)))
        await service.join_group("b", join_request(v4=False))  # its one member expires: b becomes Empty
        await _settle()
        assert not held.done() and first.generation_id == 1
        clock.advance(ms=REBALANCE_MS)  # past both sessions and a's rebalance timeout
        service.isr_wait = FailingIsr(Errors.NotLeaderForPartitionError.errno)
        timer = asyncio.ensure_future(service.run_timer())
        try:
            return await asyncio.wait_for(held, 5)
        finally:
            timer.cancel()

    completed = asyncio.run(scenario())
    assert (completed.error, completed.generation_id) == (NONE, 2)
    assert str(service.groups["b"].state) == "Empty"


def test_expired_offsets_are_not_waited_for_by_the_next_answer(offsets_topic, clock):
    service = GroupService(GroupConfig(offsets_partitions=3, offsets_retention_ms=1000), offsets_topic,
                           clock=clock, partition_exists=lambda t, p: True, isr_wait=GatedIsr(opened=True))

    async def scenario():
        assert await service.commit_offsets("old", "", None, -1, [("events", 0, CommittedOffset(10))]) == {
            ("events", 0): NONE}
        clock.advance(ms=2000)
        assert service.expire_offsets() == 1
        service.isr_wait = FailingIsr(Errors.NotLeaderForPartitionError.errno)
        return await service.join_group("g", join_request(v4=False))

    assert asyncio.run(scenario()).error == NONE
