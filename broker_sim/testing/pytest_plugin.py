"""pytest plugin shipped with pylog (entry point ``pytest11``): broker fixtures for users' tests.

Install pylog and write::

    def test_roundtrip(pylog_broker):
        producer = KafkaProducer(bootstrap_servers=pylog_broker.bootstrap_servers)
        ...

``pylog_broker`` is a fresh in-process broker for each test, on 127.0.0.1 and
an ephemeral port, with its data in pytest's ``tmp_path``; it is stopped when
the test ends.  ``pylog_broker_factory`` starts brokers with configs of your
choice (``pylog_broker_factory(config={"num.partitions": 3})``).

Both set ``group.initial.rebalance.delay.ms`` to 0 unless you give it, as
Kafka's own test harness does: the broker's default (Kafka's 3000) makes a new
group wait 3 s for more members before its first rebalance, which saves
rebalances in production but costs every group test 3 s.

kafka-python 3.x loads its message schemas with ``importlib.resources``'
legacy ``read_text``, which warns once per schema: some 200
DeprecationWarnings on every import of ``kafka``, which the broker (and any
test that talks to it) does. ``pytest_configure`` filters exactly those two
messages, as attributed to kafka-python's loader and to the legacy function
it calls; every other warning reaches the user as before, and ``-W`` or a
user's own ``filterwarnings`` still wins over these ini-level filters.
"""
from __future__ import annotations

import pytest

TEST_CONFIG = {"group.initial.rebalance.delay.ms": "0"}

KAFKA_PYTHON_WARNINGS = (
    "ignore:read_text is deprecated:DeprecationWarning:kafka.protocol.schemas.load_json",
    "ignore:open_text is deprecated:DeprecationWarning:importlib.resources._legacy",
)


def pytest_configure(config):
    for line in KAFKA_PYTHON_WARNINGS:
        config.addinivalue_line("filterwarnings", line)


@pytest.fixture
def pylog_broker_factory(tmp_path_factory):
    from broker_sim.server.broker import Broker

    started = []

    def start(config=None, data_dir=None, **kwargs):
        directory = data_dir or tmp_path_factory.mktemp("pylog-broker")
        config = {**TEST_CONFIG, **(config or {})}
        broker = Broker(directory, host="127.0.0.1", port=0, config=config, **kwargs).start()
        started.append(broker)
        return broker

    yield start
    for broker in started:
        broker.stop()


@pytest.fixture
def pylog_broker(pylog_broker_factory):
    return pylog_broker_factory()
