"""Hostile clients against client telemetry (KIP-714) and the group / client-metrics config resources: a client
that asks for subscriptions under 40,000 fresh instance ids, pushes a decompression bomb, or stores a huge or
broken value gets an error, the broker's memory stays bounded (the instance cache holds at most 16,384), it keeps
serving, and after a restart the configs that were accepted are still there and nothing else is."""
from __future__ import annotations

import uuid

import zstandard
from hostile import assert_alive, assert_serving, rss_bytes
from kafka.protocol.admin import DescribeConfigsRequest, IncrementalAlterConfigsRequest
from kafka_wire import WireClient

from broker_sim.protocol.messages import GetTelemetrySubscriptionsRequest, PushTelemetryRequest

IAC = IncrementalAlterConfigsRequest
GROUP, CLIENT_METRICS = 32, 16


def _alter(client, resource_type, name, configs):
    return client.call(IAC[1](resources=[IAC.AlterConfigsResource(
        resource_type=resource_type, resource_name=name, configs=[
            IAC.AlterConfigsResource.AlterableConfig(name=k, config_operation=0, value=v)
            for k, v in configs.items()])], validate_only=False)).responses[0].error_code


def _value(client, resource_type, name, key):
    answer = client.call(DescribeConfigsRequest[4](resources=[DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=resource_type, resource_name=name, configuration_keys=[key])], include_synonyms=False,
        include_documentation=False))
    return answer.results[0].configs[0].value


def test_instance_churn_bombs_and_huge_values_are_bounded(hostile_broker):
    broker = hostile_broker()
    group, sub = f"g/{uuid.uuid4().hex[:6]}", f"s-{uuid.uuid4().hex[:6]}"
    with WireClient(broker.bootstrap_servers, timeout=60) as client:
        before = rss_bytes(broker.process.pid)
        for _ in range(40_000):
            answer = client.call(GetTelemetrySubscriptionsRequest[0](client_instance_id=uuid.UUID(int=0)))
            assert answer.error_code == 0
        grown = rss_bytes(broker.process.pid) - before
        assert grown < 64 << 20, f"40,000 instances grew the broker by {grown} bytes"
        bomb = zstandard.ZstdCompressor(level=19).compress(b"\0" * (256 << 20))
        fresh = client.call(GetTelemetrySubscriptionsRequest[0](client_instance_id=uuid.uuid4()))
        assert client.call(PushTelemetryRequest[0](
            client_instance_id=fresh.client_instance_id, subscription_id=fresh.subscription_id, terminating=False,
            compression_type=4, metrics=bomb)).error_code == 118  # TELEMETRY_TOO_LARGE once decompressed
        assert _alter(client, GROUP, group, {"consumer.session.timeout.ms": "50000"}) == 0
        assert _alter(client, CLIENT_METRICS, sub, {"interval.ms": "1000", "metrics": "org.apache."}) == 0
        assert _alter(client, CLIENT_METRICS, sub, {"metrics": "x" * (1 << 20)}) == 40  # INVALID_CONFIG
        assert _alter(client, GROUP, group, {"consumer.session.timeout.ms": "9" * 100_000}) == 40
    assert_alive(broker)
    assert_serving(broker)
    broker = hostile_broker.restart(broker)
    with WireClient(broker.bootstrap_servers, timeout=60) as client:
        assert _value(client, GROUP, group, "consumer.session.timeout.ms") == "50000"
        assert _value(client, CLIENT_METRICS, sub, "metrics") == "org.apache."
    log = broker.log_path.read_text(errors="replace")
    assert "Traceback" not in log, log[-3000:]
