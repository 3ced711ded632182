"""The loop monitor counts and logs stalls above its threshold, and sees a real blocking call on a live loop."""
from __future__ import annotations

import asyncio
import logging
import time

from broker_sim.server.loop_monitor import LoopMonitor


def test_stalls_above_the_threshold_are_counted_and_logged_at_most_once_a_second(caplog):
    now = [100.0]
    monitor = LoopMonitor(warn_ms=100, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="broker_sim.server.loop_monitor"):
        monitor.record(30)
        monitor.record(150)
        monitor.record(400)      # same second: counted, not logged
        now[0] += 1.5
        monitor.record(120)
    assert monitor.stalls == 3 and monitor.max_lag_ms == 400
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, lines
    assert lines[0].startswith("event loop blocked for 150 ms")
    assert lines[1].startswith("event loop blocked for 400 ms")  # the worst one since the last line


def test_a_blocking_call_on_the_loop_is_measured():
    monitor = LoopMonitor(interval_s=0.01, warn_ms=100)

    async def scenario():
        task = asyncio.ensure_future(monitor.run())
        await asyncio.sleep(0.05)
        time.sleep(0.3)  # what a handler computing on the loop does to everyone else
        await asyncio.sleep(0.05)
        task.cancel()

    asyncio.run(scenario())
    assert monitor.stalls >= 1 and monitor.max_lag_ms >= 250
