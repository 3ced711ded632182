"""Event-loop stall detection: how long the broker's loop went without running anything else.

Theory of operation: every request, timer and connection of a broker shares one
asyncio loop, so a request that computes for 2 s (a decompression, a big
CreateTopics, a compaction check) freezes every client for 2 s.  The monitor
sleeps ``interval_s`` in a loop and measures how much later than asked it woke
up: that overshoot is the longest the loop was busy with something else in
that window.  Overshoots above ``warn_ms`` are counted and logged at WARNING
(at most one line a second, with the largest stall seen meanwhile), so a stall
shows in the broker log with its size; ``max_lag_ms`` and ``stalls`` are there
for tests, the soak and metrics.  Cost: one timer wake-up per ``interval_s``.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable

log = logging.getLogger(__name__)


class LoopMonitor:
    def __init__(self, *, interval_s: float = 0.05, warn_ms: float = 100.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.interval_s = interval_s
        self.warn_ms = warn_ms
        self._clock = clock
        self.max_lag_ms = 0.0
        self.stalls = 0
        self._unlogged_worst = 0.0
        self._last_log = float("-inf")

    def record(self, lag_ms: float) -> None:
        """Account for one wake-up ``lag_ms`` later than asked (called by ``run``; tests call it directly)."""
        self.max_lag_ms = max(self.max_lag_ms, lag_ms)
        if lag_ms < self.warn_ms:
            return
        self.stalls += 1
        self._unlogged_worst = max(self._unlogged_worst, lag_ms)
        now = self._clock()
        if now - self._last_log >= 1.0:
            log.warning("event loop blocked for %.0f ms (over %.0f ms %d time(s) since start)",
                        self._unlogged_worst, self.warn_ms, self.stalls)
            self._last_log = now
            self._unlogged_worst = 0.0

    async def run(self) -> None:
        while True:
            started = self._clock()
            await asyncio.sleep(self.interval_s)
            self.record(max(0.0, (self._clock() - started - self.interval_s) * 1000.0))
