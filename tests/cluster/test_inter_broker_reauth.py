"""KIP-368 on the inter-broker listener: with connections.max.reauth.ms, a follower's fetcher logs in again on
its connection before its SASL session ends, as Kafka's clients do, so the leader never closes a follower's
connection for an expired session and acks=all produces never wait for a reconnect (librdkafka's suite saw
~46 closes per broker and a ~1 s stall after each: replica.fetch.backoff.ms)."""
from __future__ import annotations

import re
import time

from confluent_kafka import Producer

import pytest
from cluster_helpers import create_topic, zookeeper_missing

SESSION_MS = 2000
JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" '
        'password="admin-secret";')
CONFIGS = {
    "listeners": "PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:0",
    "inter.broker.listener.name": "SASL_PLAINTEXT",
    "sasl.enabled.mechanisms": "SCRAM-SHA-256",
    "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": JAAS,
    "connections.max.reauth.ms": str(SESSION_MS),
    "offsets.topic.replication.factor": "2", "transaction.state.log.replication.factor": "2",
}
EXPIRED = re.compile(r"SASL session of .* expired")


def test_followers_re_authenticate_before_their_session_ends(tmp_path):
    from broker_sim.local.cluster import LocalCluster

    reason = zookeeper_missing()
    if reason:
        pytest.skip(f"no ZooKeeper for cluster tests: {reason}")
    cluster = LocalCluster(tmp_path, brokers=2, configs=CONFIGS,
                           broker_args=["--add-scram", "SCRAM-SHA-256=[name=admin,password=admin-secret]"]).start()
    try:
        create_topic(cluster.bootstrap_servers, "reauth", partitions=2, replication_factor=2,
                     configs={"min.insync.replicas": "2"})
        cluster.wait_for_full_isr("reauth", 2, timeout_s=60)
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 0,
                             "message.timeout.ms": 30000})
        latencies, errors = [], []

        def delivered(err, _msg, sent=None):
            (errors.append(err) if err else latencies.append(time.monotonic() - sent))

        ends = time.monotonic() + 5 * SESSION_MS / 1000  # five sessions of every follower connection
        index = 0
        while time.monotonic() < ends:
            producer.produce("reauth", b"v%d" % index, partition=index % 2,
                             on_delivery=lambda err, msg, sent=time.monotonic(): delivered(err, msg, sent))
            producer.poll(0.05)
            index += 1
        assert producer.flush(30) == 0
        del producer
        closes = {b: len(EXPIRED.findall(cluster.log_path(b).read_text(errors="replace"))) for b in cluster.broker_ids}
        print(f"\n{len(latencies)} acks=all produces: max {max(latencies) * 1000:.0f} ms, "
              f"expired-session closes per broker {closes}")
        assert not errors, errors[:3]
        assert closes == {b: 0 for b in cluster.broker_ids}, closes
        # a close per session would stall every partition ~1 s every 2 s: most produces would wait. A loaded
        # machine can hold up a few produces (the test's own polls included), so the bound is on the 75th
        # percentile, not the slowest one (which has measured 1.0 s with no close under two-worker load).
        p75 = sorted(latencies)[len(latencies) * 3 // 4]
        assert p75 < 0.5, f"a quarter of the acks=all produces waited {p75:.3f} s or more"
    finally:
        statuses = cluster.stop_all()
    assert all(status in (0, None) for status in statuses.values()), statuses
