"""Hostile-client fixtures: a broker in its own process, so a test can measure its memory, see it
survive (or not), and restart it on the same data directory.

The raw-frame client is ``tests/integration/kafka_wire.py`` (kafka-python's schema classes over a
plain socket); the normal-traffic checks are in ``hostile.py`` beside this file.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "integration"))

from client_helpers import BrokerProcess, free_port  # noqa: E402


@pytest.fixture
def hostile_broker(tmp_path):
    """Start ``python -m broker_sim`` processes (``start(config=None, data_dir=None)``); SIGKILLed at teardown.

    ``restart(broker)`` stops one with SIGTERM (it must exit 0) and starts it again on the same data
    directory and port, returning the new process: the "and a restart succeeds" half of every test.
    """
    started: list[BrokerProcess] = []

    def start(config=None, data_dir=None, port=None) -> BrokerProcess:
        broker = BrokerProcess(Path(data_dir or tmp_path / "data"), port or free_port(), dict(config or {}))
        started.append(broker)
        return broker.start()

    def restart(broker: BrokerProcess) -> BrokerProcess:
        status = broker.terminate()
        assert status == 0, f"broker exited with {status} on SIGTERM: {broker.log_path.read_text()[-3000:]}"
        return start(broker.config, broker.data_dir, broker.port)

    start.restart = restart
    yield start
    for broker in started:
        broker.kill()
