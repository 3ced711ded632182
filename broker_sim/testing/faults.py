"""Faults on demand for tests: Kafka errors, delays, disconnects, an unavailable or restarted broker.

Theory of operation: thin keyword-argument wrappers over the in-process broker's own hooks
(``broker.faults``, ``broker.unavailable``, ``broker.restart``; semantics per API and error in
``broker_sim/server/faults.py``), so a test reads as what it does::

    rule = inject(broker, "Produce", error="NOT_LEADER_OR_FOLLOWER", count=3, topic="out", partition=0)
    delay(broker, "Fetch", ms=200)
    with down(broker, seconds=3): ...
    restart(broker)
    rule.wait_injected(3, timeout_s=10)

The broker's code runs; only the chosen answers change, each injection logged at WARNING by
``broker_sim.server.faults`` and kept in ``broker.faults.injected``.  The ``pylog_faults`` fixture gives
these functions bound to ``pylog_broker`` and clears the rules when the test ends.
"""
from __future__ import annotations

from contextlib import contextmanager

import pytest

__all__ = ["inject", "delay", "disconnect", "down", "restart", "clear", "Faults", "pylog_faults"]


def inject(broker, api, *, error=None, count: int | None = 1, delay_ms: int = 0, topic: str | None = None,
           partition: int | None = None, client_id: str | None = None):
    """Answer the next ``count`` matching ``api`` requests (None: until ``.remove()``) with ``error``.

    Returns the rule: ``.remove()``, ``.wait_injected(n, timeout_s)``, ``.injected``.  ValueError names an
    unknown API or error name and the choices."""
    return broker.faults.add(api, error=error, count=count, delay_ms=delay_ms, topic=topic, partition=partition,
                             client_id=client_id)


def delay(broker, api, *, ms: int, count: int | None = None, topic: str | None = None,
          partition: int | None = None, client_id: str | None = None):
    """Answer matching ``api`` requests ``ms`` milliseconds later (the broker keeps serving others)."""
    return broker.faults.add(api, delay_ms=ms, count=count, topic=topic, partition=partition, client_id=client_id)


def disconnect(broker, api, *, count: int | None = 1, topic: str | None = None, partition: int | None = None,
               client_id: str | None = None):
    """Close the connection instead of answering the next ``count`` matching ``api`` requests."""
    return broker.faults.add(api, disconnect=True, count=count, topic=topic, partition=partition,
                             client_id=client_id)


@contextmanager
def down(broker, seconds: float | None = None):
    """The broker refuses connections (every open one closed) inside the block, or for ``seconds`` from now
    when given (the block may end sooner; it serves again at the end of the block at the latest)."""
    spell = broker.unavailable(seconds)
    try:
        yield spell
    finally:
        spell.end()


def restart(broker, timeout: float = 30.0):
    """Stop and start the broker on the same data dir and ports; records, offsets and producer state kept."""
    return broker.restart(timeout)


def clear(broker) -> None:
    """Remove every fault rule of the broker."""
    broker.faults.clear()


class Faults:
    """The functions above bound to one broker (what ``pylog_faults`` yields)."""

    def __init__(self, broker) -> None:
        self.broker = broker

    def inject(self, api, **kwargs):
        return inject(self.broker, api, **kwargs)

    def delay(self, api, **kwargs):
        return delay(self.broker, api, **kwargs)

    def disconnect(self, api, **kwargs):
        return disconnect(self.broker, api, **kwargs)

    def down(self, seconds: float | None = None):
        return down(self.broker, seconds)

    def restart(self, timeout: float = 30.0):
        return restart(self.broker, timeout)

    def clear(self) -> None:
        clear(self.broker)

    @property
    def injected(self) -> list:
        """Every ``Injection`` so far (api, version, parts, error, delay_ms, disconnect, rule)."""
        return self.broker.faults.injected


@pytest.fixture
def pylog_faults(pylog_broker):
    """``Faults`` of ``pylog_broker``; the rules are removed when the test ends."""
    faults = Faults(pylog_broker)
    yield faults
    faults.clear()
