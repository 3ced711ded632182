"""Integration fixtures: a broker subprocess for kill/restart tests (the plugin gives in-process ones), and
names of a test's own for the tests that also run on the session's shared Apache Kafka node (``any_broker``)."""
from __future__ import annotations

import uuid

import pytest

from client_helpers import BrokerProcess, free_port


@pytest.fixture
def broker_process(tmp_path):
    """Start ``python -m broker_sim`` processes; every one still running is SIGKILLed at teardown."""
    started: list[BrokerProcess] = []

    def start(config=None, data_dir=None, port=None) -> BrokerProcess:
        directory = data_dir or tmp_path / "data"
        broker = BrokerProcess(directory, port or free_port(), dict(config or {}))
        started.append(broker)
        return broker.start()

    yield start
    for broker in started:
        broker.kill()


@pytest.fixture
def unique():
    """``unique("events")`` is a name no other test uses: Kafka's node is shared by the whole session, so topics,
    groups and transactional ids a test creates there must be its own."""
    return lambda prefix: f"{prefix}-{uuid.uuid4().hex[:8]}"
