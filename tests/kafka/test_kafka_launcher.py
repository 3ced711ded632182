"""Apache Kafka as a peer in the suite: the launcher (broker_sim.local.kafka) and the fixtures built on it.

These prove the oracle itself works: a KRaft node that real clients use, a three-node cluster that survives a
SIGKILL of a partition leader, Kafka's tools run from the cached jars, and ``any_broker`` giving the same test
both brokers.
"""
from __future__ import annotations

import uuid

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic

from broker_sim.local.kafka import TOOLS, run_tool


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _roundtrip(bootstrap: str, topic: str, count: int = 20, partitions: int = 1, replicas: int = 1) -> list[bytes]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    try:
        admin.create_topics([NewTopic(topic, partitions, replicas)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=10)
    for i in range(count):
        producer.send(topic, f"m{i}".encode())
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=10000, enable_auto_commit=False)
    values = []
    try:
        for record in consumer:   # ends after consumer_timeout_ms without a record
            values.append(record.value)
            if len(values) == count:
                break
    finally:
        consumer.close()
    return values


def test_kafka_broker_is_apache_kafka_serving_real_clients(kafka_broker):
    """The session's node answers as Apache Kafka 4 does (ApiVersions lists KIP-848's ConsumerGroupHeartbeat,
    which pylog lacks) and carries records end to end."""
    from kafka.protocol.metadata import ApiVersionsRequest

    from broker_sim.protocol.client import WireConnection

    with WireConnection.connect(kafka_broker.host, kafka_broker.port, timeout_s=10) as connection:
        versions = connection.call(ApiVersionsRequest[3](client_software_name="pylog-test",
                                                         client_software_version="1"), timeout_s=10)
    assert versions.error_code == 0
    assert 68 in {api.api_key for api in versions.api_keys}   # ConsumerGroupHeartbeat
    topic = _topic("launcher")
    assert sorted(_roundtrip(kafka_broker.bootstrap_servers, topic)) == sorted(f"m{i}".encode() for i in range(20))


def test_any_broker_runs_on_both(any_broker):
    """The same client code gives the same records on pylog and on Kafka."""
    assert any_broker.kind in ("pylog", "kafka")
    topic = _topic(f"both-{any_broker.kind}")
    assert _roundtrip(any_broker.bootstrap_servers, topic, count=5) == [f"m{i}".encode() for i in range(5)]


def test_kafka_tools_run_from_the_cached_jars(kafka_broker):
    """Every tool the suite names resolves to a class in the jars (a tool's --help exits without a broker)."""
    topic = _topic("tools")
    run_tool("kafka-topics", "--bootstrap-server", kafka_broker.bootstrap_servers, "--create", "--topic", topic,
             "--partitions", "3").check()
    listed = run_tool("kafka-topics", "--bootstrap-server", kafka_broker.bootstrap_servers, "--list").check()
    assert topic in listed.stdout.split()
    missing = run_tool("kafka-topics", "--bootstrap-server", kafka_broker.bootstrap_servers, "--describe",
                       "--topic", _topic("absent"))
    assert missing.returncode != 0 and "does not exist" in missing.output
    assert len(TOOLS) >= 18


def test_kafka_broker_factory_applies_configs(kafka_broker_factory):
    """A node started with a config of the test's own reports it back (kafka-configs --describe --all)."""
    server = kafka_broker_factory(config={"log.retention.ms": "123456789"})
    described = run_tool("kafka-configs", "--bootstrap-server", server.bootstrap_servers, "--entity-type", "brokers",
                         "--entity-name", "1", "--describe", "--all").check()
    assert "log.retention.ms=123456789 sensitive=false synonyms={STATIC_BROKER_CONFIG:log.retention.ms=123456789" \
        in described.stdout


@pytest.mark.slow
def test_kafka_cluster_survives_the_leader_being_killed(kafka_cluster):
    """Three KRaft nodes replicate: after a SIGKILL of a partition's leader another node leads and the
    acknowledged records are all there; the killed node rejoins the ISR after a restart."""
    topic = _topic("cluster")
    assert len(_roundtrip(kafka_cluster.bootstrap_servers, topic, count=50, replicas=3)) == 50
    kafka_cluster.wait_for_full_isr(topic, 1)
    leader = kafka_cluster.leader_of(topic, 0)
    kafka_cluster.kill(leader)
    new_leader = kafka_cluster.wait_for(
        lambda md: (lambda p: p.leader if p and p.leader not in (-1, leader) else None)(md.partitions.get((topic, 0))),
        timeout_s=60, what="a new leader", topics=[topic])
    assert new_leader != leader
    consumer = KafkaConsumer(topic, bootstrap_servers=kafka_cluster.bootstrap_servers, auto_offset_reset="earliest",
                             consumer_timeout_ms=10000, enable_auto_commit=False)
    try:
        assert len([r for _, r in zip(range(50), consumer)]) == 50
    finally:
        consumer.close()
    kafka_cluster.restart(leader)
    kafka_cluster.wait_for_full_isr(topic, 1, timeout_s=90)
