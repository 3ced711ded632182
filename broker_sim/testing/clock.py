"""A clock that moves only when the test moves it, for the broker's sans-IO cores.

Storage, replication, the coordinators and the connector's pools read time through an injected callable
(``now_ms`` in milliseconds, or a ``clock`` in seconds). ``ManualClock`` is a ``BrokerClock`` whose wall clock
stands still: it starts at ``start_ms``, stays there, and moves only by ``advance`` (forward, to the
millisecond), so a test runs a timeout of minutes without sleeping and sees exactly the times it set.
Pass ``clock`` (or ``clock.now_ms``) where milliseconds are read and ``clock.now_s`` where seconds are.
For a running in-process broker, whose clients need time to pass on its own, use ``timing.BrokerClock``.
"""
from __future__ import annotations

from broker_sim.testing.timing import BrokerClock


class ManualClock(BrokerClock):
    """Milliseconds that only ``advance`` changes: ``clock()`` and ``clock.now_ms()`` read them, ``now_s`` too.

    ``advance(ms=..., seconds=..., minutes=..., hours=..., days=...)`` moves it forward by the sum and returns
    the new time in ms; a negative step is refused.
    """

    def __init__(self, start_ms: int = 1_000_000) -> None:
        if isinstance(start_ms, bool) or not isinstance(start_ms, int) or start_ms < 0:
            raise ValueError(f"ManualClock: start_ms must be an int of milliseconds >= 0, got {start_ms!r}")
        super().__init__(wall_ms=lambda: start_ms)

    def now_s(self) -> float:
        """The time in seconds (``now_ms() / 1000``), for cores that take a clock in seconds."""
        return self() / 1000
