"""Client quotas: AlterClientQuotas / DescribeClientQuotas (KIP-546), throttle_time_ms in responses, the
connection muted for that long (KIP-219), and a real client reporting the throttle.

Whether a throttled producer or consumer lands within ±20 % of its quota is a figure of
``pylog bench --workload security`` (its "quotas" part), not an assertion here.
"""
from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer as ConfluentProducer
from kafka.protocol.admin import AlterClientQuotasRequest, DescribeClientQuotasRequest
from kafka.protocol.metadata import MetadataRequest

from broker_sim.protocol.client import ConnectionClosed
from broker_sim.security import quotas
from broker_sim.security.entity_configs import FileEntityConfigs
from broker_sim.security.quotas import FETCH, PRODUCE, QuotaManager, Rate
from broker_sim.server.broker import Broker
from tests.integration.kafka_wire import WireClient, fetch_request, metadata, produce_request, record_batch

Entity = AlterClientQuotasRequest.EntryData.EntityData
Op = AlterClientQuotasRequest.EntryData.OpData


@pytest.fixture
def broker(tmp_path):
    with Broker(tmp_path, config={"group.initial.rebalance.delay.ms": "0"}) as running:
        yield running


def _alter(broker, entity: dict, ops: dict, remove=()):
    with WireClient(broker.bootstrap_servers) as client:
        response = client.call(AlterClientQuotasRequest[1](entries=[AlterClientQuotasRequest.EntryData(
            entity=[Entity(entity_type=k, entity_name=v) for k, v in entity.items()],
            ops=[Op(key=k, value=float(v), remove=False) for k, v in ops.items()]
            + [Op(key=k, value=0.0, remove=True) for k in remove])], validate_only=False))
    return response.entries[0]


def _describe(broker, components, strict=False):
    Component = DescribeClientQuotasRequest.ComponentData
    with WireClient(broker.bootstrap_servers) as client:
        response = client.call(DescribeClientQuotasRequest[1](components=[
            Component(entity_type=t, match_type=m, match=v) for t, m, v in components], strict=strict))
    assert response.error_code == 0, response
    return {tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
            for entry in response.entries}


def test_quotas_are_stored_described_and_removed(broker):
    assert _alter(broker, {"client-id": "app"}, {"producer_byte_rate": 1024}).error_code == 0
    assert _alter(broker, {"user": None}, {"consumer_byte_rate": 2048}).error_code == 0  # the default user
    assert _alter(broker, {"user": "alice", "client-id": "app"}, {"request_percentage": 12.5}).error_code == 0
    everything = _describe(broker, [])
    assert everything[(("client-id", "app"),)] == {"producer_byte_rate": 1024.0}
    assert everything[(("user", None),)] == {"consumer_byte_rate": 2048.0}
    assert everything[(("user", "alice"), ("client-id", "app"))] == {"request_percentage": 12.5}
    only_alice = _describe(broker, [("user", 0, "alice")])
    assert list(only_alice) == [(("user", "alice"), ("client-id", "app"))]
    assert _describe(broker, [("user", 0, "alice")], strict=True) == {}
    assert _alter(broker, {"client-id": "app"}, {}, remove=["producer_byte_rate"]).error_code == 0
    assert (("client-id", "app"),) not in _describe(broker, [])


def test_bad_quotas_are_refused_naming_the_problem(broker):
    unknown = _alter(broker, {"client-id": "app"}, {"bytes_per_fortnight": 1})
    assert unknown.error_code == 42 and "bytes_per_fortnight" in unknown.error_message  # INVALID_REQUEST
    negative = _alter(broker, {"client-id": "app"}, {"producer_byte_rate": -5})
    assert negative.error_code == 42 and "positive" in negative.error_message
    ip_key_on_client = _alter(broker, {"client-id": "app"}, {"connection_creation_rate": 5})
    assert ip_key_on_client.error_code == 42 and "connection_creation_rate" in ip_key_on_client.error_message
    byte_rate_on_ip = _alter(broker, {"ip": "10.0.0.1"}, {"producer_byte_rate": 5})
    assert byte_rate_on_ip.error_code == 42 and "producer_byte_rate" in byte_rate_on_ip.error_message
    ip_with_user = _alter(broker, {"ip": "10.0.0.1", "user": "alice"}, {"connection_creation_rate": 5})
    assert ip_with_user.error_code == 42 and "IP entity" in ip_with_user.error_message
    not_an_ip = _alter(broker, {"ip": "ten.zero"}, {"connection_creation_rate": 5})
    assert not_an_ip.error_code == 42 and "ten.zero" in not_an_ip.error_message


def test_ip_connection_creation_quotas_are_stored_described_and_enforced(broker):
    """As Kafka (KIP-612): an IP's connection_creation_rate is stored under ips/<ip>, described by IP, and a new
    connection that takes the IP's rate over it is refused (closed at once).
    Mutation: ConnectionQuotas._over_rate always None -> every connection of the burst is served."""
    assert _alter(broker, {"ip": "127.0.0.1"}, {"connection_creation_rate": 1}).error_code == 0
    assert _describe(broker, [("ip", 0, "127.0.0.1")]) == {(("ip", "127.0.0.1"),): {"connection_creation_rate": 1.0}}
    served = 0
    for _ in range(15):  # 1 per second over Kafka's 10 s minimum window: the first ~10 fit, then refusals
        try:
            with WireClient(broker.bootstrap_servers) as client:
                metadata(client, [])
                served += 1
        except (ConnectionClosed, OSError):
            pass
    assert 1 <= served < 15  # the broker is this test's own: 127.0.0.1 stays throttled for a while


def test_a_producer_over_its_quota_is_throttled_and_muted(broker):
    """Past producer_byte_rate the Produce answer carries throttle_time_ms, and the connection reads nothing
    more until it has passed: the next request's answer comes no sooner.
    Mutation: KafkaConnection.throttle not muting -> the next Metadata answers at once."""
    # 100 KB against 9 KB/s over Kafka's 10 s minimum window: 10 KB/s, 1.1 s of throttle
    assert _alter(broker, {"client-id": "pylog-integration"}, {"producer_byte_rate": 9_000}).error_code == 0
    batch = record_batch([b"x" * 100_000])
    with WireClient(broker.bootstrap_servers) as client:
        metadata(client, ["quota-topic"])
        first = client.call(produce_request("quota-topic", 0, batch))
        throttle = first.throttle_time_ms
        assert throttle > 0
        started = time.monotonic()
        client.call(MetadataRequest[12](topics=[], allow_auto_topic_creation=False,
                                        include_topic_authorized_operations=False))
        assert time.monotonic() - started >= throttle / 1000.0 * 0.8
    assert broker.quotas.throttled["producer_byte_rate"] >= 1


def test_a_consumer_over_its_quota_gets_throttle_time_in_its_fetch(broker):
    assert _alter(broker, {"client-id": None}, {"consumer_byte_rate": 10_000}).error_code == 0  # every client
    with WireClient(broker.bootstrap_servers) as client:
        metadata(client, ["fetch-quota"])
        assert client.call(produce_request("fetch-quota", 0, record_batch([b"y" * 200_000]))).responses
        response = client.call(fetch_request("fetch-quota", 0, 0))
        assert response.throttle_time_ms > 0


def test_request_percentage_throttles_a_busy_client(broker):
    assert _alter(broker, {"client-id": "pylog-integration"}, {"request_percentage": 0.001}).error_code == 0
    throttle = 0
    with WireClient(broker.bootstrap_servers) as client:
        for _ in range(200):  # until the first throttled answer (the connection is muted after it)
            throttle = client.call(MetadataRequest[12](topics=None, allow_auto_topic_creation=False,
                                                       include_topic_authorized_operations=False)).throttle_time_ms
            if throttle:
                break
    assert throttle > 0
    assert broker.quotas.throttled["request_percentage"] >= 1


def test_librdkafka_reports_the_broker_throttle(broker):
    assert _alter(broker, {"client-id": "throttled-app"}, {"producer_byte_rate": 50_000}).error_code == 0
    events = []
    producer = ConfluentProducer({"bootstrap.servers": broker.bootstrap_servers, "client.id": "throttled-app",
                                  "throttle_cb": lambda event: events.append(event.throttle_time),
                                  "linger.ms": 5})
    for _ in range(40):
        producer.produce("librdkafka-quota", b"z" * 20_000)
        producer.poll(0)
    assert producer.flush(60) == 0
    deadline = time.monotonic() + 10
    while not events and time.monotonic() < deadline:
        producer.poll(0.2)
    assert events and max(events) > 0


def test_rate_is_kafkas_sampled_rate():
    """11 one-second samples: the window is at least 10 s, so 1000 bytes at once measure 100 B/s."""
    rate = Rate(11, 1.0)
    rate.record(1000, now=100.0)
    assert rate.measure(100.0) == pytest.approx(100.0)
    rate.record(1000, now=112.0)  # the first sample has left the window
    assert rate.measure(112.0) == pytest.approx(100.0)


def test_a_default_quota_gives_each_client_id_its_own_rate(tmp_path):
    """clients/<default> = 1000 B/s: as Kafka's DefaultQuotaCallback, each client id is measured on its own,
    so a second client is not throttled for the first one's bytes; a named client id shares nothing with them.
    Mutation: one rate per matched entity (every default client on one rate) -> b is throttled."""

    configs = FileEntityConfigs(tmp_path)
    configs.alter("clients", "<default>", {PRODUCE: "1000"})
    manager = QuotaManager(configs, clock=lambda: 1000.0)
    assert manager.record(PRODUCE, "User:ANONYMOUS", "a", 10_000) == 0  # 10 kB over 10 s = the quota
    assert manager.record(PRODUCE, "User:ANONYMOUS", "a", 5_000) > 0
    assert manager.record(PRODUCE, "User:ANONYMOUS", "b", 10_000) == 0
    assert manager.record(PRODUCE, "User:alice", "b", 1) > 0  # client quotas ignore the user


def test_a_default_user_quota_is_per_user_and_a_named_one_is_shared_by_its_clients(tmp_path):

    configs = FileEntityConfigs(tmp_path)
    configs.alter("users", "<default>", {FETCH: "1000"})
    configs.alter("users", "carol", {FETCH: "1000"})
    manager = QuotaManager(configs, clock=lambda: 1000.0)
    assert manager.record(FETCH, "User:alice", "x", 10_000) == 0
    assert manager.record(FETCH, "User:bob", "x", 10_000) == 0  # alice's bytes are not bob's
    assert manager.record(FETCH, "User:carol", "x", 10_000) == 0
    assert manager.record(FETCH, "User:carol", "y", 1) > 0  # carol's clients share her quota


def test_idle_rates_are_dropped_so_client_ids_cannot_grow_memory(tmp_path, monkeypatch):
    monkeypatch.setattr(quotas, "MAX_RATES", 50)
    configs = FileEntityConfigs(tmp_path)
    configs.alter("clients", "<default>", {quotas.PRODUCE: "1000"})
    now = [0.0]
    manager = quotas.QuotaManager(configs, clock=lambda: now[0])
    for i in range(500):
        now[0] += 1.0
        manager.record(quotas.PRODUCE, "User:ANONYMOUS", f"client-{i}", 10)
    assert len(manager._rates) <= 50
