"""Fixtures of the ZooKeeper control-plane tests: one real ZooKeeper server per test module.

Skipped with the reason when Debian's ``zookeeper`` package (the jar) or java is missing.
"""
from __future__ import annotations

import uuid

import pytest

from broker_sim.testing.waiting import wait_until


@pytest.fixture
def zk_connect(zookeeper):
    """A connect string with a fresh chroot per test, so tests of a module share the server, not state."""
    return f"{zookeeper.connect_string}/t{uuid.uuid4().hex[:12]}"


def _expire_session(client, connect: str, timeout_s: float = 20.0) -> None:
    """Make ZooKeeper expire ``client``'s session for real: a second client joins the session with its
    id and password and closes it; wait until ``client`` has seen LOST and is connected again."""
    from kazoo.client import KazooClient, KazooState
    lost = []
    listener = lambda state: lost.append(state) if state == KazooState.LOST else None  # noqa: E731
    client.add_listener(listener)
    session_id, password = client.client_id
    other = KazooClient(hosts=connect, client_id=(session_id, password), timeout=5)
    other.start(timeout=10)
    other.stop()
    other.close()
    try:
        wait_until(lambda: lost and client.connected and client.client_id[0] != session_id, timeout_s=timeout_s,
                   what="session expired and client reconnected", interval_s=0.02)
    finally:
        client.remove_listener(listener)


@pytest.fixture
def expire_session():
    return _expire_session


@pytest.fixture
def make_store(zk_connect, tmp_path):
    """Factory of started ZkMetadataStore "brokers" (registered with a fake endpoint), closed at teardown."""
    from broker_sim.controller.cluster_state import BrokerEndpoint
    from broker_sim.controller.zk_store import ZkMetadataStore
    stores = []

    def make(broker_id: int, register: bool = True, session_timeout_ms: int = 4000):
        store = ZkMetadataStore(zk_connect, broker_id, tmp_path / f"broker-{broker_id}-{len(stores)}",
                                session_timeout_ms=session_timeout_ms,
                                connection_timeout_ms=30000)   # 10 s has timed out on a loaded machine
        stores.append(store)
        store.start()
        if register:
            store.register_broker(BrokerEndpoint(broker_id, "127.0.0.1", 19000 + broker_id))
        return store

    yield make
    for store in stores:
        store.close()


@pytest.fixture
def make_broker(make_store):
    """Factory of (store, controller) "brokers": a registered ZkMetadataStore plus a started Controller
    sharing its client; controllers are closed before their stores at teardown."""
    from broker_sim.config import BrokerConfig
    from broker_sim.controller.zk_controller import Controller
    controllers = []

    def make(broker_id: int, **overrides):
        store = make_store(broker_id)
        settings = {"leader.imbalance.check.interval.seconds": 1, "auto.leader.rebalance.enable": False}
        settings.update(overrides)
        controller = Controller(store.zk, broker_id, BrokerConfig(settings)).start()
        controllers.append(controller)
        return store, controller

    yield make
    for controller in controllers:
        controller.close()
