"""The asyncio layer of the group coordinator: held requests as futures, answers after the ISR, the timer.

Theory of operation: ``GroupService`` is a ``GroupCoordinator`` whose JoinGroup
and SyncGroup can be awaited.  Each held request gets a ticket and a future;
every reply the core returns — from this request, from another member's
request that completed the rebalance, or from the timer — resolves the
future of its ticket, together with what the core appended to
``__consumer_offsets`` on the way (``take_appended``; a SyncGroup's, also its
group's partition up to its log end, so a member that syncs after the leader
waits for the record that holds its assignment).  Every request that writes
(JoinGroup, SyncGroup, LeaveGroup, OffsetCommit, TxnOffsetCommit, OffsetDelete,
DeleteGroups) is answered only once ``isr_wait`` saw the ISR have those records
(``coordinator.isr_wait``; nothing waits on a single node).  A wait that fails
is answered as Kafka answers a failed write of the group record, with its error
mapped by ``GROUP_APPEND_ERRORS``: a JoinGroup or SyncGroup that would have
said NONE gets the error (``unstored``), every member whose SyncGroup waited on
the leader's assignment too, and the core drops that assignment and rebalances
again (``assignment_not_stored``); a LeaveGroup gets it as its top-level error.
``run_timer`` is Kafka's timer: a heap of each group's next deadline (a
session, a pending member id, the initial delay or the rebalance timeout
ending: ``ClassicGroup.next_deadline_ms``), pushed whenever a request may have
made one earlier (JoinGroup, SyncGroup, LeaveGroup, a partition loaded); it
sleeps until the earliest and polls just the groups that are due, one at a
time (a group's replies wait for its own appends, not another's), so a member
expires at its deadline (a DeleteGroups sent right after it finds the group
empty) and an idle coordinator costs nothing however many groups it holds.
Heartbeats only move deadlines later: the timer then finds nothing due and
sleeps until the new one.  It also runs ``expire_offsets`` every
``offsets.retention.check.interval.ms`` (no answer waits for its tombstones).
``close`` answers every held request with NOT_COORDINATOR, which sends
clients looking for the coordinator again.
"""
from __future__ import annotations

import asyncio
import heapq
import logging
from typing import Awaitable, Callable

from broker_sim.coordinator.group.consumer_group import HeartbeatAnswer, HeartbeatRequest
from broker_sim.coordinator.group.coordinator import NOT_COORDINATOR, GroupCoordinator
from broker_sim.coordinator.group.metadata import NONE, JoinRequest, JoinResult, Reply, SyncResult
from broker_sim.coordinator.isr_wait import answered_once_replicated, no_wait

log = logging.getLogger(__name__)
RETRY_AFTER_FAILURE_S = 0.1  # a pass of the timer that failed is retried this much later, not at once


class GroupService(GroupCoordinator):
    def __init__(self, *args, retention_check_interval_ms: int = 600_000,
                 isr_wait: Callable[[dict], Awaitable[int]] = no_wait, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.retention_check_interval_ms = retention_check_interval_ms
        self.isr_wait = isr_wait
        self._waiting: dict[int, tuple[asyncio.Future, object]] = {}
        self._deadlines: list[tuple[int, str]] = []  # heap of (deadline ms, group id); see the module docstring
        self._scheduled: dict[str, int] = {}  # group id -> the deadline its live heap entry has
        self._wake: asyncio.Event | None = None  # set when the earliest deadline moved earlier

    def _schedule(self, group_id: str) -> None:
        """Push the group's next deadline when it is earlier than the one it has in the heap."""
        deadline = self.next_deadline_ms(group_id)
        if deadline is None or self._scheduled.get(group_id, deadline + 1) <= deadline:
            return
        self._scheduled[group_id] = deadline
        heapq.heappush(self._deadlines, (deadline, group_id))
        if self._wake is not None and self._deadlines[0] == (deadline, group_id):
            self._wake.set()

    def _due_groups(self, now_ms: int) -> list[str]:
        """Pop the groups whose deadline has come (entries a later push superseded are dropped)."""
        due = []
        while self._deadlines and self._deadlines[0][0] <= now_ms:
            deadline, group_id = heapq.heappop(self._deadlines)
            if self._scheduled.get(group_id) == deadline:
                del self._scheduled[group_id]
                due.append(group_id)
        return due

    def load_partition(self, partition) -> int:
        loaded = super().load_partition(partition)
        for group_id in list(self.groups):
            self._schedule(group_id)
        return loaded

    async def join_group(self, group_id: str, request: JoinRequest) -> JoinResult:
        ticket, future = self._hold(JoinResult(NOT_COORDINATOR, request.member_id))
        self.deliver(self.join(group_id, request, ticket))
        self._schedule(group_id)
        return (await self._answer(future))[0]

    async def sync_group(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int,
                         protocol_type: str | None, protocol_name: str | None,
                         assignments: dict[str, bytes]) -> SyncResult:
        ticket, future = self._hold(SyncResult(NOT_COORDINATOR))
        self.deliver(self.sync(group_id, member_id, group_instance_id, generation_id, protocol_type, protocol_name,
                               assignments, ticket), group_id)
        self._schedule(group_id)
        result, lost = await self._answer(future)
        if lost:  # the assignment this answer gave may be lost: Kafka's storeGroup callback with an error
            self.deliver(self.assignment_not_stored(group_id, generation_id))
            self._schedule(group_id)
        return result

    async def leave_group(self, group_id: str, members: list[tuple[str, str | None]]) -> tuple[int, list[int]]:
        error, errors, replies = self.leave(group_id, members)
        self._schedule(group_id)
        lost = await self.isr_wait(self.deliver(replies))
        if lost:  # Kafka's new coordinator fails the whole LeaveGroup when its write fails
            lost = self.GROUP_APPEND_ERRORS.get(lost, lost)
            return lost, [lost] * len(errors)
        return error, errors

    async def consumer_group_heartbeat(self, group_id: str, request: HeartbeatRequest) -> HeartbeatAnswer:
        """A KIP-848 heartbeat, answered once the ISR has the group's records (a write it did not get is
        answered with the error, as Kafka's runtime fails the write operation)."""
        answer = super().consumer_group_heartbeat(group_id, request)
        self._schedule(group_id)
        error = await self.isr_wait(self.take_awaited(group_id))
        if error and answer.error == NONE:
            return HeartbeatAnswer(self.GROUP_APPEND_ERRORS.get(error, error))
        return answer

    # a write the ISR did not get is answered with its error, per partition or group (Kafka's storeOffsets)
    commit_offsets = answered_once_replicated(GroupCoordinator.commit_offsets,
                                              lambda answer, error: dict.fromkeys(answer, error))
    commit_txn_offsets = answered_once_replicated(GroupCoordinator.commit_txn_offsets,
                                                  lambda answer, error: dict.fromkeys(answer, error))
    delete_offsets = answered_once_replicated(GroupCoordinator.delete_offsets,
                                              lambda answer, error: (error, dict.fromkeys(answer[1], error)))
    delete_groups = answered_once_replicated(GroupCoordinator.delete_groups,
                                             lambda answer, error: dict.fromkeys(answer, error))

    def expire_offsets(self) -> int:
        expired = super().expire_offsets()
        self.take_appended()  # tombstones no request waits for: not left for the next answer to wait on (and fail)
        return expired

    def unload_partition(self, index: int) -> list[Reply]:
        replies = super().unload_partition(index)
        self.deliver(replies)
        return replies

    def deliver(self, replies: list[Reply], group_id: str | None = None) -> dict[object, int]:
        """Resolve the held requests that ``replies`` answer; returns the appends they wait for.

        Those are the core's appends since they were last taken: the ones that led to these replies; with
        ``group_id``, also that group's partition up to its log end (``take_awaited``).
        """
        appended = self.take_awaited(group_id)
        for ticket, result in replies:
            future, _ = self._waiting.pop(ticket, (None, None))
            if future is not None and not future.done():
                future.set_result((result, appended))
        return appended

    async def run_timer(self) -> None:
        """Poll each group at its deadlines, forever (cancel the task to stop)."""
        self._wake = asyncio.Event()
        for group_id in list(self.groups):
            self._schedule(group_id)
        next_expiry = self.clock() + self.retention_check_interval_ms
        while True:
            now = self.clock()
            until = min(next_expiry, self._deadlines[0][0]) if self._deadlines else next_expiry
            if until > now:
                try:
                    await asyncio.wait_for(self._wake.wait(), (until - now) / 1000)
                except asyncio.TimeoutError:
                    pass
                self._wake.clear()
            due = self._due_groups(self.clock())
            try:
                for group_id in due:  # one group at a time: its replies wait for its own appends only
                    self.deliver(self.poll([group_id]))
                if self.clock() >= next_expiry:
                    next_expiry = self.clock() + self.retention_check_interval_ms
                    expired = self.expire_offsets()
                    if expired:
                        log.info("expired %d committed offsets", expired)
            except Exception:  # the timer must keep running; the next pass retries, a moment later
                log.exception("group coordinator timer failed")
                await asyncio.sleep(RETRY_AFTER_FAILURE_S)
            finally:
                for group_id in due:
                    self._schedule(group_id)

    def close(self) -> None:
        waiting, self._waiting = self._waiting, {}
        for future, on_close in waiting.values():
            if not future.done():
                future.set_result((on_close, {}))

    def _hold(self, on_close) -> tuple[int, asyncio.Future]:
        ticket = self.new_ticket()
        future = asyncio.get_running_loop().create_future()
        self._waiting[ticket] = (future, on_close)
        return ticket, future

    async def _answer(self, future: asyncio.Future) -> tuple[JoinResult | SyncResult, int]:
        """A held request's reply once the ISR has what was appended before it was given, and NONE; when the
        wait failed, a success becomes the append's error (``unstored``), returned second too."""
        result, appended = await future
        error = await self.isr_wait(appended)
        if not error or result.error != NONE:
            return result, NONE
        error = self.GROUP_APPEND_ERRORS.get(error, error)
        return self.unstored(result, error), error
