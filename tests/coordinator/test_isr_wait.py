"""Coordinator answers wait for the ISR: the shells hand what their core appended to ``isr_wait`` and answer
once it returns; ``IsrWait`` waits on the high watermarks of the partitions this broker still leads.

No sockets and no sleeps: the ISR is a fake that the test opens.
"""
from __future__ import annotations

import asyncio
import logging

import kafka.errors as Errors

from broker_sim.coordinator.group.metadata import NONE, GroupConfig
from broker_sim.coordinator.group.records import CommittedOffset
from broker_sim.coordinator.group.service import GroupService
from broker_sim.coordinator.isr_wait import IsrWait
from broker_sim.coordinator.txn.coordinator import TxnConfig
from broker_sim.coordinator.txn.service import TxnService

from group_helpers import join_request
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
