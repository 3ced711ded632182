"""Conformance fixtures: ``pair`` is broker_sim and Apache Kafka side by side (tests/conformance/differential.py)."""
from __future__ import annotations

import pytest

from differential import Pair, Peer


@pytest.fixture(scope="module")
def pylog_module_broker(request, tmp_path_factory):
    """One in-process broker_sim for a module's scenarios (each names its topics and groups uniquely). A module
    whose answers name broker ids sets ``PYLOG_BROKER_ID = 1``, Kafka's node id, so replica lists and broker
    resources name the same broker."""
    from broker_sim.server.broker import Broker
    from broker_sim.testing.pytest_plugin import TEST_CONFIG

    broker_id = getattr(request.module, "PYLOG_BROKER_ID", None)
    extra = {} if broker_id is None else {"broker.id": str(broker_id)}
    broker = Broker(tmp_path_factory.mktemp("pylog-conformance"), host="127.0.0.1", port=0,
                    config={**TEST_CONFIG, "schema.registry.listeners": "", **extra}).start()
    yield broker
    broker.stop()


@pytest.fixture(scope="module")
def pair(pylog_module_broker, kafka_broker):
    both = Pair(Peer("pylog", pylog_module_broker.bootstrap_servers, pylog_module_broker),
                Peer("kafka", kafka_broker.bootstrap_servers, kafka_broker))
    yield both
    both.close()


@pytest.fixture
def fresh_pair(pylog_broker_factory, kafka_broker_factory):
    """``start(config)`` -> a Pair of brokers started for this test with the same broker configs."""
    started = []

    def start(config: dict | None = None) -> Pair:
        pylog = pylog_broker_factory(config={**(config or {}), "schema.registry.listeners": ""})
        kafka = kafka_broker_factory(config=config)
        both = Pair(Peer("pylog", pylog.bootstrap_servers, pylog), Peer("kafka", kafka.bootstrap_servers, kafka))
        started.append(both)
        return both

    yield start
    for both in started:
        both.close()
