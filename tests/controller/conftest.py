"""Fixtures of the ZooKeeper control-plane tests: one real ZooKeeper server per test module.

Skipped with the reason when Debian's ``zookeeper`` package (the jar) or java is missing.
"""
from __future__ import annotations

import time
import uuid

import pytest

from broker_sim.controller.zookeeper_server import ZooKeeperServer, zookeeper_available


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory):
    reason = zookeeper_available()
    if reason:
        pytest.skip(reason)
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"), tick_ms=500)
    server.start(timeout=60)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def zk_connect(zookeeper):
    """A connect string with a fresh chroot per test, so tests of a module share the server, not state."""
    return f"{zookeeper.connect_string}/t{uuid.uuid4().hex[:12]}"


def _wait_until(condition, timeout_s: float = 20.0, interval_s: float = 0.02, message: str = ""):
    """Poll ``condition`` until it returns a truthy value (returned) or fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"condition not met within {timeout_s} s: {message or condition}")
        time.sleep(interval_s)


@pytest.fixture
def wait_until():
    """The bounded poll helper (tests take it as a fixture: conftest modules are not importable by name)."""
    return _wait_until
