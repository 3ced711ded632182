"""Group configs and client-metrics subscriptions (broker_sim/resource_configs.py), the client telemetry core
(server/client_metrics.py) and their entity-config storage: unit tests, no sockets, an injected clock.

The differential tests (tests/conformance/test_telemetry_and_features.py) compare the answers with Kafka's; these
pin the parts a scenario against a shared Kafka cannot reach: the broker's bounds changing what a group config may
be, the accessor the group coordinator reads, a subscription id computed as Kafka computes it, expiry, the LRU
bound, a closed connection's instance, and the names stored in files and znodes."""
from __future__ import annotations

import uuid

import pytest

from broker_sim.config import BrokerConfig
from broker_sim.resource_configs import (
    GroupConfig, ResourceConfigError, group_config, validate_client_metrics, validate_group_configs,
)
from broker_sim.security.entity_configs import FileEntityConfigs, _entity_name, config_path
from broker_sim.server import client_metrics
from broker_sim.server.client_metrics import ClientMetricsManager, TelemetryError


def test_group_config_is_the_override_else_the_brokers_default(tmp_path):
    store = FileEntityConfigs(tmp_path)
    broker = BrokerConfig({"group.consumer.session.timeout.ms": "50000"})
    assert group_config(store, "g", broker) == GroupConfig(50000, 5000)
    store.alter("groups", "g", {"consumer.heartbeat.interval.ms": "6000"})
    assert group_config(store, "g", broker) == GroupConfig(50000, 6000)
    assert group_config(store, "other", BrokerConfig()) == GroupConfig(45000, 5000)


def test_group_bounds_are_the_brokers():
    """consumer.session.timeout.ms=10000 is refused with Kafka's defaults and accepted once the broker's
    group.consumer.min.session.timeout.ms allows it; the session must exceed the heartbeat."""
    with pytest.raises(ResourceConfigError, match="must be greater than or equal to "
                                                  "group.consumer.min.session.timeout.ms") as refused:
        validate_group_configs("g", {"consumer.session.timeout.ms": "10000"}, BrokerConfig())
    assert refused.value.errno == 40
    lowered = BrokerConfig({"group.consumer.min.session.timeout.ms": "6000"})
    assert validate_group_configs("g", {"consumer.session.timeout.ms": "10000"}, lowered)[
        "consumer.session.timeout.ms"] == 10000
    with pytest.raises(ResourceConfigError, match="consumer.session.timeout.ms must be greater than "
                                                  "consumer.heartbeat.interval.ms"):
        validate_group_configs("g", {"consumer.session.timeout.ms": "6000", "consumer.heartbeat.interval.ms":
                                     "6000"}, lowered)


def test_client_metrics_match_patterns_are_javas_split():
    for bad in ("client_id=", "=x", "client_id=a=b", "nope=1"):
        with pytest.raises(ResourceConfigError, match="Illegal client matching pattern"):
            validate_client_metrics("s", {"match": bad})


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def test_subscription_id_and_metric_order_are_kafkas(tmp_path):
    """Kafka 4.1 answered subscription id 1628621433 for this instance id and subscription (measured)."""
    clock = Clock()
    store = FileEntityConfigs(tmp_path)
    store.alter("client-metrics", "s", {"metrics": "org.apache.kafka.producer.,org.apache.kafka.consumer.",
                                        "interval.ms": "1000", "match": "client_id=probe.*"})
    manager = ClientMetricsManager(store, 1 << 20, now_ms=clock)
    instance = uuid.UUID("12345678-1234-1234-1234-123456789abc")
    got = manager.get_subscriptions(instance, {"client_id": "probe"})
    assert (got.subscription_id, got.interval_ms, got.metrics) == (
        1628621433, 1000, ["org.apache.kafka.producer.", "org.apache.kafka.consumer."])
    other = manager.get_subscriptions(None, {"client_id": "someone"})
    assert (other.interval_ms, other.metrics) == (300_000, [])


def test_throttling_and_expiry_follow_the_clock(tmp_path):
    clock = Clock()
    manager = ClientMetricsManager(FileEntityConfigs(tmp_path), 1 << 20, now_ms=clock)
    first = manager.get_subscriptions(None, {})
    with pytest.raises(TelemetryError) as throttled:
        manager.get_subscriptions(first.instance_id, {})
    assert throttled.value.error.errno == 89
    clock.now += 300_000
    assert manager.get_subscriptions(first.instance_id, {}).subscription_id == first.subscription_id
    manager.push(first.instance_id, first.subscription_id, False, 0, b"x", {})
    clock.now += 3 * 300_000  # forgotten: the next push is a new instance's first, not throttled
    manager.push(first.instance_id, first.subscription_id, False, 0, b"x", {})


def test_the_instance_cache_is_bounded_and_a_closed_connection_forgets(tmp_path, monkeypatch):
    monkeypatch.setattr(client_metrics, "CACHE_MAX_SIZE", 8)
    clock = Clock()
    manager = ClientMetricsManager(FileEntityConfigs(tmp_path), 1 << 20, now_ms=clock)
    for _ in range(50):
        manager.get_subscriptions(None, {})
    assert len(manager._instances) == 8

    class Connection:
        closed = False
    connection = Connection()
    got = manager.get_subscriptions(None, {}, connection)
    connection.closed = True  # Kafka's disconnect listener drops the instance: no throttling after a reconnect
    assert manager.get_subscriptions(got.instance_id, {}, Connection()).instance_id == got.instance_id


def test_a_decompression_bomb_is_telemetry_too_large_and_corrupt_data_invalid_record(tmp_path):
    import zstandard

    clock = Clock()
    manager = ClientMetricsManager(FileEntityConfigs(tmp_path), 1 << 20, now_ms=clock, max_decompressed=1 << 20)
    bomb = zstandard.ZstdCompressor().compress(b"\0" * (64 << 20))
    assert len(bomb) < 1 << 20
    for payload, code in ((bomb, 118), (b"\0" * 64, 87)):
        got = manager.get_subscriptions(None, {})
        with pytest.raises(TelemetryError) as refused:
            manager.push(got.instance_id, got.subscription_id, False, 4, payload, {})
        assert refused.value.error.errno == code


def test_group_and_subscription_names_survive_a_restart_and_encode_in_znodes(tmp_path):
    store = FileEntityConfigs(tmp_path)
    store.alter("groups", "a/b", {"consumer.session.timeout.ms": "50000"})
    store.alter("client-metrics", "..", {"interval.ms": "1000"})
    reopened = FileEntityConfigs(tmp_path)
    assert reopened.get("groups", "a/b") == {"consumer.session.timeout.ms": "50000"}
    assert reopened.get("client-metrics", "..") == {"interval.ms": "1000"}
    assert config_path("groups", "a/b.c") == "/config/groups/a%2Fb%2Ec"
    assert config_path("client-metrics", "..") == "/config/client-metrics/%2E%2E"
    assert _entity_name("groups", "a%2Fb%2Ec") == "a/b.c" and _entity_name("users", "a%2F") == "a%2F"


def test_group_and_subscription_configs_reach_every_broker_through_zookeeper(zookeeper):
    """A group id with ``/`` and a subscription named ``..`` stored through one broker's ZooKeeper store are read
    by another's watch under the same names (their znodes URL-encoded), and a third store started later loads
    them; the znode is Kafka's ``{"version":1,"config":{...}}``."""
    import json
    import time

    from kazoo.client import KazooClient

    from broker_sim.security.entity_configs import ZkEntityConfigs

    clients = [KazooClient(hosts=zookeeper.connect_string, timeout=10) for _ in range(3)]
    try:
        for client in clients[:2]:
            client.start(timeout=20)
        first, second = ZkEntityConfigs(clients[0]), ZkEntityConfigs(clients[1])
        first.alter("groups", "team/a", {"consumer.session.timeout.ms": "50000"})
        first.alter("client-metrics", "..", {"interval.ms": "1000"})
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and (not second.get("groups", "team/a") or
                                               not second.get("client-metrics", "..")):
            time.sleep(0.05)
        assert second.get("groups", "team/a") == {"consumer.session.timeout.ms": "50000"}
        assert second.get("client-metrics", "..") == {"interval.ms": "1000"}
        data, _ = clients[0].get("/config/groups/team%2Fa")
        assert json.loads(data) == {"version": 1, "config": {"consumer.session.timeout.ms": "50000"}}
        clients[2].start(timeout=20)
        later = ZkEntityConfigs(clients[2])
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and set(later.entities("groups")) != {"team/a"}:
            time.sleep(0.05)
        assert set(later.entities("groups")) == {"team/a"} and set(later.entities("client-metrics")) == {".."}
        second.alter("groups", "team/a", {}, ["consumer.session.timeout.ms"])
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and first.get("groups", "team/a"):
            time.sleep(0.05)
        assert first.get("groups", "team/a") == {}
    finally:
        for client in clients:
            client.stop()
            client.close()
