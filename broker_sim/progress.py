"""Periodic progress lines on stderr for long runs: ``pylog produce|consume --progress`` and the benchmarks.

Progress is shown when stderr is a terminal or when the user asks with
``--progress``; otherwise nothing is printed, so CI logs stay short. When
shown, a line is printed at most every ``interval_s`` seconds::

    produce events: 412,000 records (206,000/s)
    produce events: 1,000,000/1,000,000 records (203,500/s) done in 4.9 s
"""

import sys
import time
from typing import Callable, TextIO


def progress_wanted(forced: bool, stream: TextIO = sys.stderr) -> bool:
    """True if progress should be printed: forced, or *stream* is a terminal."""
    return forced or (hasattr(stream, "isatty") and stream.isatty())


class Progress:
    """Counts work done and reports it, rate-limited, on *stream*.

    ``update(done)`` is cheap enough to call once per record. ``finish(done)``
    prints a final line if any progress line was printed before.
    """

    def __init__(
        self,
        label: str,
        *,
        enabled: bool,
        total: int | None = None,
        interval_s: float = 2.0,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.label = label
        self.enabled = enabled
        self.total = total
        self.interval_s = interval_s
        self.stream = stream if stream is not None else sys.stderr
        self.clock = clock
        self.started = clock()
        self._next_report = self.started + interval_s
        self._printed = False

    def update(self, done: int) -> None:
        """Record that *done* units are complete; print if the interval passed."""
        if not self.enabled:
            return
        now = self.clock()
        if now >= self._next_report:
            self._next_report = now + self.interval_s
            self._print(done, now, suffix="")

    def finish(self, done: int) -> None:
        """Print the closing line (only if an earlier line was printed)."""
        if self.enabled and self._printed:
            now = self.clock()
            self._print(done, now, suffix=f" done in {now - self.started:.1f} s")

    def _print(self, done: int, now: float, suffix: str) -> None:
        elapsed = max(now - self.started, 1e-9)
        count = f"{done:,}/{self.total:,}" if self.total else f"{done:,}"
        print(f"{self.label}: {count} records ({done / elapsed:,.0f}/s){suffix}",
              file=self.stream, flush=True)
        self._printed = True
