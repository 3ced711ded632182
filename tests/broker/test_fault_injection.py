"""Faults on demand (broker.faults, unavailable(), restart()) seen by real clients (kafka-python)."""
from __future__ import annotations

import logging
import socket
import time

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from broker_sim.server import faults as server_faults
from broker_sim.testing.data import read
from broker_sim.testing.faults import delay, down, inject, restart


def _topic(broker, name: str, partitions: int = 1) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        admin.close()


def _produce(broker, topic: str, keys, **config) -> None:
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, enable_idempotence=True, acks="all",
                             retries=20, retry_backoff_ms=20, **config)
    try:
        for key in keys:
            producer.send(topic, key=key.encode(), value=b"v", partition=0)
        producer.flush(20)
    finally:
        producer.close()


def _keys(broker, topic: str) -> list[str]:
    """Partition 0's keys up to its end (the LSO), read_committed: no idle wait after the last record."""
    return [record["key"].decode() for record in read(broker, topic, timeout_s=20) if record["partition"] == 0]


def _exactly_once(keys: list[str], expected: list[str]) -> None:
    lost = sorted(set(expected) - set(keys))
    duplicated = sorted(k for k in set(keys) if keys.count(k) > 1)
    assert not lost and not duplicated and len(keys) == len(expected), (lost, duplicated)


def test_idempotent_producer_survives_not_leader_on_partition_0_and_each_record_lands_once(pylog_broker, caplog):
    _topic(pylog_broker, "nl", 2)
    with caplog.at_level(logging.WARNING, logger="broker_sim.server.faults"):
        rule = inject(pylog_broker, "Produce", error="NOT_LEADER_OR_FOLLOWER", count=3, topic="nl", partition=0)
        expected = [f"k{i}" for i in range(50)]
        _produce(pylog_broker, "nl", expected)
        assert rule.wait_injected(3, timeout_s=5) == 3
    _exactly_once(_keys(pylog_broker, "nl"), expected)
    injected = [i for i in pylog_broker.faults.injected if i.rule is rule]
    assert [i.parts for i in injected] == [("nl-0",)] * 3 and injected[0].error == "NOT_LEADER_OR_FOLLOWER"
    assert any("fault injected: Produce v" in r.message and "nl-0 -> NOT_LEADER_OR_FOLLOWER (1 of 3)" in r.message
               for r in caplog.records)
    assert not pylog_broker.faults.rules  # spent rules go


def test_not_leader_refuses_the_append_of_the_matched_partition_only(pylog_broker):
    """Kafka's leader check comes first: a refused partition's records are not written (no retries here)."""
    _topic(pylog_broker, "refused", 2)
    inject(pylog_broker, "Produce", error="NOT_LEADER_OR_FOLLOWER", count=None, topic="refused", partition=0)
    producer = KafkaProducer(bootstrap_servers=pylog_broker.bootstrap_servers, retries=0, acks=1, linger_ms=20)
    first = producer.send("refused", key=b"a", value=b"v", partition=0)
    second = producer.send("refused", key=b"b", value=b"v", partition=1)
    producer.flush(10)
    with pytest.raises(Exception, match="NotLeader"):
        first.get(5)
    assert second.get(5).offset == 0
    producer.close()
    pylog_broker.faults.clear()
    assert _keys(pylog_broker, "refused") == []


def test_request_timed_out_is_answered_after_the_append(pylog_broker):
    """Kafka's acks=all timeout: written, not confirmed (a producer without retries sees the error)."""
    _topic(pylog_broker, "written")
    inject(pylog_broker, "Produce", error="REQUEST_TIMED_OUT", count=1, topic="written")
    producer = KafkaProducer(bootstrap_servers=pylog_broker.bootstrap_servers, retries=0, acks=1)
    sent = producer.send("written", key=b"a", value=b"v", partition=0)
    with pytest.raises(Exception, match="RequestTimedOut"):
        sent.get(5)
    producer.close()
    assert _keys(pylog_broker, "written") == ["a"]


def test_request_timed_out_after_append_is_deduplicated_by_the_idempotent_producer(pylog_broker):
    _topic(pylog_broker, "timeout")
    rule = inject(pylog_broker, "Produce", error="REQUEST_TIMED_OUT", count=2, topic="timeout")
    expected = [f"k{i}" for i in range(30)]
    _produce(pylog_broker, "timeout", expected)
    assert rule.injected == 2
    _exactly_once(_keys(pylog_broker, "timeout"), expected)


def test_a_fetch_delay_shows_in_the_consumers_timing(pylog_broker):
    _topic(pylog_broker, "slow")
    _produce(pylog_broker, "slow", ["a"])
    delay(pylog_broker, "Fetch", ms=400, count=1)
    started = time.monotonic()
    consumer = KafkaConsumer(bootstrap_servers=pylog_broker.bootstrap_servers, auto_offset_reset="earliest",
                             consumer_timeout_ms=5000)
    consumer.assign([TopicPartition("slow", 0)])
    assert next(iter(consumer)).key == b"a"
    took = time.monotonic() - started
    consumer.close()
    assert took >= 0.4
    assert pylog_broker.faults.injected[-1].delay_ms == 400


def test_fetch_error_on_a_partition_carries_no_records_and_the_consumer_retries(pylog_broker):
    _topic(pylog_broker, "fe")
    _produce(pylog_broker, "fe", ["a", "b"])
    rule = inject(pylog_broker, "Fetch", error="NOT_LEADER_OR_FOLLOWER", count=2, topic="fe", partition=0)
    assert _keys(pylog_broker, "fe") == ["a", "b"]
    assert rule.injected == 2


def test_coordinator_errors_refuse_before_the_handler_and_clients_retry(pylog_broker):
    _topic(pylog_broker, "grp")
    _produce(pylog_broker, "grp", ["a"])
    find = inject(pylog_broker, "FindCoordinator", error="COORDINATOR_NOT_AVAILABLE", count=2)
    join = inject(pylog_broker, "JoinGroup", error="COORDINATOR_LOAD_IN_PROGRESS", count=1)
    commit = inject(pylog_broker, "OffsetCommit", error="NOT_COORDINATOR", count=1, topic="grp")
    consumer = KafkaConsumer("grp", bootstrap_servers=pylog_broker.bootstrap_servers, group_id="g1",
                             auto_offset_reset="earliest", consumer_timeout_ms=4000, enable_auto_commit=False)
    assert [m.key for _, m in zip(range(1), consumer)] == [b"a"]
    for _ in range(3):
        try:
            consumer.commit()
            break
        except Exception:  # NOT_COORDINATOR: kafka-python rediscovers the coordinator; commit again
            time.sleep(0.2)
    assert consumer.committed(TopicPartition("grp", 0)) == 1
    consumer.close()
    assert (find.injected, join.injected, commit.injected) == (2, 1, 1)


def test_down_refuses_connections_then_serves_with_data_intact(pylog_broker):
    _topic(pylog_broker, "down")
    _produce(pylog_broker, "down", ["a"])
    with down(pylog_broker, seconds=0.5):
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", pylog_broker.port), 1).close()
        time.sleep(0.8)  # seconds=0.5: it serves again on its own
        socket.create_connection(("127.0.0.1", pylog_broker.port), 1).close()
    _produce(pylog_broker, "down", ["b"])
    assert _keys(pylog_broker, "down") == ["a", "b"]


def test_restart_keeps_records_committed_offsets_and_the_ports(pylog_broker):
    _topic(pylog_broker, "rs")
    _produce(pylog_broker, "rs", ["a", "b"])
    consumer = KafkaConsumer("rs", bootstrap_servers=pylog_broker.bootstrap_servers, group_id="rsg",
                             auto_offset_reset="earliest", consumer_timeout_ms=3000, enable_auto_commit=False)
    assert len([m for _, m in zip(range(2), consumer)]) == 2
    consumer.commit()
    consumer.close()
    bootstrap, registry = pylog_broker.bootstrap_servers, pylog_broker.schema_registry_url
    restart(pylog_broker)
    assert (pylog_broker.bootstrap_servers, pylog_broker.schema_registry_url) == (bootstrap, registry)
    assert pylog_broker.data_dir.exists()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id="rsg", enable_auto_commit=False)
    assert consumer.committed(TopicPartition("rs", 0)) == 2
    consumer.close()
    assert _keys(pylog_broker, "rs") == ["a", "b"]


def test_unknown_api_and_error_names_are_refused_naming_the_value_and_choices(pylog_broker):
    with pytest.raises(ValueError, match=r"api='Produse'.*choices: .*Produce"):
        inject(pylog_broker, "Produse", error="NOT_LEADER_OR_FOLLOWER")
    with pytest.raises(ValueError, match=r"error='NOT_A_LEADER'.*choices: .*NOT_LEADER_OR_FOLLOWER"):
        inject(pylog_broker, "Produce", error="NOT_A_LEADER")
    with pytest.raises(ValueError, match=r"count=0"):
        inject(pylog_broker, "Produce", error=6, count=0)
    with pytest.raises(ValueError, match=r"JoinGroup names no topics"):
        inject(pylog_broker, "JoinGroup", error="NOT_COORDINATOR", topic="x")
    with pytest.raises(ValueError, match=r"not supported for SaslAuthenticate.*disconnect"):
        inject(pylog_broker, "SaslAuthenticate", error="NOT_COORDINATOR")
    assert not pylog_broker.faults.rules


def test_a_rule_for_a_missing_topic_costs_nothing_and_breaks_nothing(pylog_broker):
    """Hostile: count=None filtered on a topic nobody uses, on every API that supports errors."""
    for key in server_faults.ERROR_APIS:
        if key in server_faults.REFUSED_WHOLE:
            continue
        inject(pylog_broker, key, error="NOT_LEADER_OR_FOLLOWER", count=None, topic="no-such-topic")
    _topic(pylog_broker, "fine")
    expected = [f"k{i}" for i in range(20)]
    _produce(pylog_broker, "fine", expected)
    consumer = KafkaConsumer("fine", bootstrap_servers=pylog_broker.bootstrap_servers, group_id="fg",
                             auto_offset_reset="earliest", consumer_timeout_ms=2000)
    assert sorted(m.key.decode() for _, m in zip(range(len(expected)), consumer)) == sorted(expected)
    consumer.commit()
    consumer.close()
    assert pylog_broker.faults.injected == []


def test_disconnect_closes_the_connection_and_the_client_reconnects(pylog_faults):
    _topic(pylog_faults.broker, "dc")
    rule = pylog_faults.disconnect("Produce", count=1, topic="dc")
    _produce(pylog_faults.broker, "dc", ["a", "b"])
    assert rule.injected == 1 and pylog_faults.injected[-1].disconnect
    _exactly_once(_keys(pylog_faults.broker, "dc"), ["a", "b"])
