"""Coordinator answers wait for the ISR: a reply goes out once the records behind it are replicated.

Theory of operation: Kafka's coordinators append to their internal topic with
acks=all and answer in the append's callback, so no client hears of state
that the partition's next leader could lack.  pylog's coordinators append
synchronously and remember where (``InternalTopicOwner.take_appended``:
partition -> its log end offset after the append); their asyncio shells
(``group.service``, ``txn.service``) hand that to their ``isr_wait`` before
they answer.  In a cluster that is an ``IsrWait``: it waits until each
partition this broker still leads has its high watermark at the offset, for
at most ``replica.socket.timeout.ms``.  A wait that fails is not a success:
as Kafka's append callbacks do, the answer becomes the append's error mapped
by the coordinator's ``APPEND_ERRORS`` (a lost leadership: NOT_COORDINATOR,
so the client finds the new coordinator, which may lack the record and must
be asked again; a timeout: COORDINATOR_NOT_AVAILABLE or REQUEST_TIMED_OUT).
On a single node it is ``no_wait``: the one replica is the whole ISR.

``answered_once_replicated(method, failed)`` is how a shell serves a core
method that appends: a coroutine that returns the core's answer once the ISR
has the append, or ``failed(answer, error)`` when it did not.  What it waits
for is ``take_awaited(key)``: the core's appends, and the key's partition up to
its log end, so an answer read from state an earlier, unreplicated append made
(a client's retry after a timeout) waits for that append too.
``high_watermarks_reached`` is the wait itself, also used by the transaction
markers.
"""
from __future__ import annotations

import asyncio
import functools
import logging
from typing import Callable, Hashable, TypeVar

import kafka.errors as Errors

from broker_sim.coordinator.internal_topic import NONE

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

    async def __call__(self, appended: dict[object, int]) -> int:
        """NONE once the ISR has every append; else the error of one that it may never have."""
        behind = {partition: end for partition, end in appended.items() if partition.high_watermark < end}
        for partition in behind:
            if not partition.is_leader:  # led elsewhere now: the new leader may have truncated the append away
                log.warning("coordinator write to %s-%d not replicated before its leadership moved",
                            partition.topic, partition.index)
                return Errors.NotLeaderForPartitionError.errno
        if not behind:
            return NONE
        failed = await high_watermarks_reached({p: (p, end) for p, end in behind.items()}, self.timeout_s)
        if not failed:
            return NONE
        log.warning("coordinator writes not replicated to the ISR within %.0f s: %r", self.timeout_s,
                    list(failed.values())[:3])
        return getattr(next(iter(failed.values())), "errno", None) or Errors.RequestTimedOutError.errno


async def no_wait(appended: dict[object, int]) -> int:
    """On a single node: its one replica is the whole ISR, which has every append already."""
    return NONE


def answered_once_replicated(method, failed: Callable[[object, int], object]):
    """A core method that appends, as its asyncio shell serves it: the answer once the ISR has the append, or
    ``failed(answer, error)`` with the append's error as the coordinator answers it (``APPEND_ERRORS``)."""
    @functools.wraps(method)
    async def serve(coordinator, *args, **kwargs):
        answer = method(coordinator, *args, **kwargs)
        error = await coordinator.isr_wait(coordinator.take_awaited(args[0] if args else None))
        if error:
            return failed(answer, coordinator.APPEND_ERRORS.get(error, error))
        return answer
    return serve
