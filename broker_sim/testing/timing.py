"""Time in a test broker: a clock the test moves, and the broker's timers scaled down, so time-driven behaviour
(retention, transaction timeouts, session expiry, offset expiry, compaction lag) happens in a second, without
sleeping through its duration.

An in-process ``Broker`` reads time only through its ``now_ms`` callable (storage, replication, the group and
transaction coordinators, fetch sessions and the registry all take it). ``BrokerClock`` is such a callable:
the wall clock plus an offset the test moves forward with ``advance``. It never goes back and keeps running
between advances, so what needs time to pass on its own (long-poll fetches, request timeouts, clients'
heartbeats) still sees it pass. The broker's periodic checks run on the real clock, at the intervals of
its configs; ``FAST_TIMERS`` sets them to 100 ms, so a check comes soon after an advance. Clients keep their
own clocks (``session.timeout.ms``, ``request.timeout.ms``, ``transaction.timeout.ms`` run on the client's
wall time): a jump of the broker's clock looks to them as if the broker had been slow.

Per behaviour (fixtures ``pylog_clock`` and ``pylog_clocked_broker``, a broker with ``FAST_TIMERS`` and that
clock):

============================  =====================================================  ====================
behaviour                     what the test does                                     it happens within
============================  =====================================================  ====================
retention by time             topic ``retention.ms``; ``clock.advance(ms=...)``       ~1 s (one retention
(``retention.ms``)            past it: closed segments go, the active one rolls      pass; the log start
                              first as Kafka's does                                  offset moves)
retention by size             topic ``retention.bytes`` and a small ``segment.bytes``  ~1 s, no clock
transaction timeout           the producer's ``transaction.timeout.ms``; advance      ~0.1 s: aborted, the
                              past it                                                LSO moves, the
                                                                                     producer is fenced
consumer session expiry       the member's ``session.timeout.ms``; advance past it    ~0.1 s (the group
                                                                                     timer reads the clock
                                                                                     at every offsets
                                                                                     check): the member is
                                                                                     removed
initial rebalance delay       ``group.initial.rebalance.delay.ms`` (0 in every        no wait
                              pylog fixture, as Kafka's test harness sets it)
committed offset expiry       ``offsets.retention.minutes`` (at least 1); advance     ~0.1 s after the
                              past it while the group is empty                       group is empty
============================  =====================================================  ====================
"""
from __future__ import annotations

import threading
import time
from typing import Callable

# the broker's periodic checks, every 100 ms (Kafka's defaults: 5 min, 30 s, 10 s, 10 min, 15 s, 1 h, 10 min)
FAST_TIMERS = {
    "log.retention.check.interval.ms": "100",
    "log.initial.task.delay.ms": "0",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "100",
    "transaction.remove.expired.transaction.cleanup.interval.ms": "100",
    "offsets.retention.check.interval.ms": "100",
    "log.cleaner.backoff.ms": "100",
    "group.initial.rebalance.delay.ms": "0",
}


class BrokerClock:
    """Wall-clock milliseconds plus an offset that only ``advance`` changes (thread-safe, never backwards).

    Pass it as a broker's ``now_ms`` (``Broker(now_ms=clock)``; ``pylog_broker_factory(now_ms=clock)``).
    """

    def __init__(self, wall_ms: Callable[[], int] | None = None) -> None:
        self._wall_ms = wall_ms or (lambda: time.time_ns() // 1_000_000)
        self._offset_ms = 0
        self._lock = threading.Lock()

    def __call__(self) -> int:
        return self._wall_ms() + self._offset_ms

    def now_ms(self) -> int:
        return self()

    @property
    def offset_ms(self) -> int:
        """How far ahead of the wall clock this clock is."""
        return self._offset_ms

    def advance(self, *, ms: float = 0, seconds: float = 0, minutes: float = 0, hours: float = 0,
                days: float = 0) -> int:
        """Move the clock forward by the sum given; returns the new time in ms. A negative step is refused."""
        step = round(ms + 1000 * (seconds + 60 * (minutes + 60 * (hours + 24 * days))))
        if step < 0:
            raise ValueError(f"BrokerClock.advance: the clock never goes back (asked to move {step} ms)")
        with self._lock:
            self._offset_ms += step
        return self()


def clocked_broker(factory, clock: BrokerClock, config: dict | None = None, **kwargs):
    """A broker from ``factory`` (``pylog_broker_factory``) with ``FAST_TIMERS`` and ``clock`` as its time."""
    return factory(config={**FAST_TIMERS, **(config or {})}, now_ms=clock, **kwargs)
