"""Waiting in a test: poll a condition until it holds, within a deadline, and fail saying what never happened.

``wait_until`` calls the predicate, returns its first truthy value, and sleeps ``interval_s`` between calls,
never past the deadline. A predicate that raises is called again (a broker still starting refuses
connections); on timeout the AssertionError names ``what``, the timeout and the last value or exception,
chained. A predicate call that blocks is not cut short: give it its own timeout.
"""
from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")


def wait_until(predicate: Callable[[], T], *, timeout_s: float, what: str, interval_s: float = 0.1,
               retry_on: tuple[type[BaseException], ...] = (Exception,)) -> T:
    """Poll ``predicate()`` until it returns a truthy value, and return that value.

    1. The predicate is called at least once, and again every ``interval_s`` until ``timeout_s`` has passed.
    2. An exception of a ``retry_on`` type counts as "not yet"; any other propagates at once
       (``retry_on=()``: a predicate's AssertionError fails the wait at once).
    3. On timeout: AssertionError "<what>: not reached within <timeout> s; last value: ..." (or "last
       exception: ...", chained as its ``__cause__``).
    """
    if not timeout_s >= 0:
        raise ValueError(f"wait_until: timeout_s must be a number of seconds >= 0, got {timeout_s!r}")
    if not interval_s > 0:
        raise ValueError(f"wait_until: interval_s must be a number of seconds > 0, got {interval_s!r}")
    deadline = time.monotonic() + timeout_s
    while True:
        error = None
        try:
            value = predicate()
        except retry_on as exc:
            value, error = None, exc
        else:
            if value:
                return value
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            last = f"last exception: {error!r}" if error is not None else f"last value: {value!r}"
            raise AssertionError(f"{what}: not reached within {timeout_s:g} s; {last}") from error
        time.sleep(min(interval_s, remaining))
