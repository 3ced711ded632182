"""The asyncio layer of the group coordinator: held requests as futures, answers after the ISR, the timer.

Theory of operation: ``GroupService`` is a ``GroupCoordinator`` whose JoinGroup
and SyncGroup can be awaited.  Each held request gets a ticket and a future;
every reply the core returns — from this request, from another member's
request that completed the rebalance, or from the timer — resolves the
future of its ticket, together with what the core appended to
``__consumer_offsets`` on the way (``take_appended``).  Every request that
writes (JoinGroup, SyncGroup, LeaveGroup, OffsetCommit, TxnOffsetCommit,
OffsetDelete, DeleteGroups) is answered only once ``isr_wait`` saw the ISR
have those records (``coordinator.isr_wait``; nothing waits on a single node).
``run_timer`` calls ``poll`` every 100 ms (sessions, rebalance timeouts, the
initial delay) and ``expire_offsets`` every
``offsets.retention.check.interval.ms``.  ``close`` answers every held request
with NOT_COORDINATOR, which sends clients looking for the coordinator again.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable

from broker_sim.coordinator.group.coordinator import NOT_COORDINATOR, GroupCoordinator
from broker_sim.coordinator.group.metadata import JoinRequest, JoinResult, Reply, SyncResult
from broker_sim.coordinator.isr_wait import answered_once_replicated, no_wait

log = logging.getLogger(__name__)
POLL_INTERVAL_S = 0.1


class GroupService(GroupCoordinator):
    def __init__(self, *args, retention_check_interval_ms: int = 600_000,
                 isr_wait: Callable[[dict], Awaitable[None]] = no_wait, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.retention_check_interval_ms = retention_check_interval_ms
        self.isr_wait = isr_wait
        self._waiting: dict[int, tuple[asyncio.Future, object]] = {}

    async def join_group(self, group_id: str, request: JoinRequest) -> JoinResult:
        ticket, future = self._hold(JoinResult(NOT_COORDINATOR, request.member_id))
        self.deliver(self.join(group_id, request, ticket))
        return await self._answer(future)

    async def sync_group(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int,
                         protocol_type: str | None, protocol_name: str | None,
                         assignments: dict[str, bytes]) -> SyncResult:
        ticket, future = self._hold(SyncResult(NOT_COORDINATOR))
        self.deliver(self.sync(group_id, member_id, group_instance_id, generation_id, protocol_type, protocol_name,
                               assignments, ticket))
        return await self._answer(future)

    async def leave_group(self, group_id: str, members: list[tuple[str, str | None]]) -> tuple[int, list[int]]:
        error, errors, replies = self.leave(group_id, members)
        await self.isr_wait(self.deliver(replies))
        return error, errors

    commit_offsets = answered_once_replicated(GroupCoordinator.commit_offsets)
    commit_txn_offsets = answered_once_replicated(GroupCoordinator.commit_txn_offsets)
    delete_offsets = answered_once_replicated(GroupCoordinator.delete_offsets)
    delete_groups = answered_once_replicated(GroupCoordinator.delete_groups)

    def unload_partition(self, index: int) -> list[Reply]:
        replies = super().unload_partition(index)
        self.deliver(replies)
        return replies

    def deliver(self, replies: list[Reply]) -> dict[object, int]:
        """Resolve the held requests that ``replies`` answer; returns the appends they wait for.

        Those are the core's appends since they were last taken: the ones that led to these replies.
        """
        appended = self.take_appended()
        for ticket, result in replies:
            future, _ = self._waiting.pop(ticket, (None, None))
            if future is not None and not future.done():
                future.set_result((result, appended))
        return appended

    async def run_timer(self) -> None:
        """Poll the groups forever (cancel the task to stop)."""
        next_expiry = self.clock() + self.retention_check_interval_ms
        while True:
            await asyncio.sleep(POLL_INTERVAL_S)
            try:
                self.deliver(self.poll())
                if self.clock() >= next_expiry:
                    next_expiry = self.clock() + self.retention_check_interval_ms
                    expired = self.expire_offsets()
                    if expired:
                        log.info("expired %d committed offsets", expired)
            except Exception:  # the timer must keep running; the next pass retries
                log.exception("group coordinator timer failed")

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

    async def _answer(self, future: asyncio.Future):
        """A held request's reply, once the ISR has what was appended before it was given."""
        result, appended = await future
        await self.isr_wait(appended)
        return result
