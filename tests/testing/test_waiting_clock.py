"""The kit's wait_until (bounded poll, failures that say what never happened) and ManualClock (time that moves
only when the test moves it)."""
from __future__ import annotations

import time

import pytest

from broker_sim.testing.clock import ManualClock
from broker_sim.testing.waiting import wait_until


def test_wait_until_returns_the_first_truthy_value_of_the_predicate():
    answers = iter([None, 0, [], {"leader": 2}, {"leader": 3}])
    assert wait_until(lambda: next(answers), timeout_s=5, what="a leader", interval_s=0.01) == {"leader": 2}


def test_a_predicate_that_raises_is_retried_until_it_answers():
    calls = []

    def starting_broker():
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionRefusedError("still starting")
        return "up"

    assert wait_until(starting_broker, timeout_s=5, what="the broker", interval_s=0.01) == "up"
    assert len(calls) == 3


def test_the_timeout_names_what_and_the_last_value():
    with pytest.raises(AssertionError, match=r"^3 committed rows: not reached within 0.05 s; last value: \[\]$"):
        wait_until(lambda: [], timeout_s=0.05, what="3 committed rows", interval_s=0.01)


def test_the_timeout_names_and_chains_the_last_exception():
    def refused():
        raise ConnectionRefusedError("port 9092")

    with pytest.raises(AssertionError, match=r"the broker: not reached within 0.05 s; last exception: "
                                             r"ConnectionRefusedError\('port 9092'\)") as failure:
        wait_until(refused, timeout_s=0.05, what="the broker", interval_s=0.01)
    assert isinstance(failure.value.__cause__, ConnectionRefusedError)


def test_exceptions_outside_retry_on_fail_the_wait_at_once():
    def query_failed():
        raise AssertionError("the query died")

    started = time.monotonic()
    with pytest.raises(AssertionError, match="the query died"):
        wait_until(query_failed, timeout_s=30, what="a batch", retry_on=(OSError,))
    assert time.monotonic() - started < 1


def test_the_wait_never_sleeps_past_its_deadline():
    started = time.monotonic()
    with pytest.raises(AssertionError):
        wait_until(lambda: False, timeout_s=0.3, what="never", interval_s=10)
    assert 0.3 <= time.monotonic() - started < 0.5


@pytest.mark.parametrize("option, value", [("timeout_s", -1), ("interval_s", 0)])
def test_a_bad_timeout_or_interval_is_refused_naming_it(option, value):
    kwargs = {"timeout_s": 1, "interval_s": 0.1, option: value}
    with pytest.raises(ValueError, match=f"{option} must be .* got {value}"):
        wait_until(lambda: True, what="x", **kwargs)


def test_the_manual_clock_stands_still_until_advanced():
    clock = ManualClock(start_ms=5_000)
    time.sleep(0.02)
    assert clock() == clock.now_ms() == 5_000 and clock.now_s() == 5.0
    assert clock.advance(ms=250) == 5_250
    assert clock.advance(seconds=0.57) == 5_820   # to the millisecond, not truncated
    assert clock.advance(minutes=1, hours=1) == 5_820 + 3_660_000
    time.sleep(0.02)
    assert clock() == 3_665_820


def test_the_manual_clock_never_goes_back_and_starts_at_a_valid_time():
    clock = ManualClock()
    with pytest.raises(ValueError, match="never goes back"):
        clock.advance(seconds=-1)
    assert clock() == 1_000_000
    with pytest.raises(ValueError, match="start_ms must be an int of milliseconds >= 0, got 1.5"):
        ManualClock(start_ms=1.5)
