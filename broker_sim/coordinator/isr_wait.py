"""Coordinator answers wait for the ISR: a reply goes out once the records behind it are replicated.

Theory of operation: Kafka's coordinators append to their internal topic with
acks=all and answer in the append's callback, so no client hears of state
that the partition's next leader could lack.  pylog's coordinators append
synchronously and remember where (``InternalTopicOwner.take_appended``:
partition -> its log end offset after the append); their asyncio shells
(``group.service``, ``txn.service``) hand that to their ``isr_wait`` before
they answer.  In a cluster that is an ``IsrWait``: it waits until each
partition this broker still leads has its high watermark at the offset, for
at most ``replica.socket.timeout.ms``; a wait that fails (timeout, leadership
lost) is logged and the answer goes out.  On a single node it is ``no_wait``:
the one replica is the whole ISR.

``answered_once_replicated(method)`` is how a shell serves a core method that
appends: a coroutine that returns the core's answer once the ISR has the
append.  ``high_watermarks_reached`` is the wait itself, also used by the
transaction markers.
"""
from __future__ import annotations

import asyncio
import functools
import logging
from typing import Hashable, TypeVar

log = logging.getLogger(__name__)
K = TypeVar("K", bound=Hashable)


async def high_watermarks_reached(targets: dict[K, tuple[object, int]], timeout_s: float) -> dict[K, BaseException]:
    """Wait until each ``(partition, offset)``'s high watermark reaches the offset; what failed, by key."""
    outcomes = await asyncio.gather(*(partition.wait_for_high_watermark(offset, timeout_s)
                                      for partition, offset in targets.values()), return_exceptions=True)
    return {key: outcome for key, outcome in zip(targets, outcomes) if isinstance(outcome, BaseException)}


class IsrWait:
    """In a cluster: wait until the ISR has what a coordinator appended."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s

    async def __call__(self, appended: dict[object, int]) -> None:
        # a partition led elsewhere by now is no longer this coordinator's to answer for
        targets = {partition: (partition, end) for partition, end in appended.items()
                   if partition.is_leader and partition.high_watermark < end}
        if not targets:
            return
        failed = await high_watermarks_reached(targets, self.timeout_s)
        if failed:
            log.warning("coordinator writes not replicated to the ISR within %.0f s: %r", self.timeout_s,
                        list(failed.values())[:3])


async def no_wait(appended: dict[object, int]) -> None:
    """On a single node: its one replica is the whole ISR, which has every append already."""


def answered_once_replicated(method):
    """A core method that appends, as its asyncio shell serves it: the answer once the ISR has the append."""
    @functools.wraps(method)
    async def serve(coordinator, *args, **kwargs):
        answer = method(coordinator, *args, **kwargs)
        await coordinator.isr_wait(coordinator.take_appended())
        return answer
    return serve
