"""TLS identity on real inter-broker connections (issue 24, item 5): two brokers with a real ZooKeeper replicate
over an SSL inter-broker listener; the follower's fetcher is the TLS client.

* a certificate for another host name is refused with ``ssl.endpoint.identification.algorithm=https`` and
  accepted with it empty;
* an expired certificate and one from another CA are refused even with the host name check off.

A refusal is seen as it happens (the fetcher logs the certificate's verification failure), and the follower
then holds none of the leader's records; an acceptance is seen as the follower catching up.
"""
from __future__ import annotations

import logging
import time
import uuid

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from broker_sim.local.certificates import CertificateAuthority
from broker_sim.server.broker import Broker

SCENARIOS = [  # (certificate, ssl.endpoint.identification.algorithm, replicates?)
    ("wrong-name", "https", False),
    ("wrong-name", "", True),
    ("expired", "", False),
    ("other-ca", "", False),
]
RECORDS = 20


class Refusals(logging.Handler):
    """Records of the replication package that report a certificate verification failure."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "certificate verify failed" in message.lower():
            self.seen.append(message)


def _wait(condition, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout_s} s: {what}")


@pytest.mark.parametrize("certificate,algorithm,replicates", SCENARIOS,
                         ids=[f"{c}-{a or 'no-name-check'}" for c, a, _ in SCENARIOS])
def test_an_inter_broker_certificate_is_checked_by_the_follower(zookeeper, tmp_path, certificate, algorithm,
                                                                 replicates):
    ca = CertificateAuthority(tmp_path / "ca")
    issuer = CertificateAuthority(tmp_path / "other", name="other CA") if certificate == "other-ca" else ca
    keystore = issuer.issue("broker", hosts=("wrong.example",) if certificate == "wrong-name" else ("localhost",),
                            expired=certificate == "expired").keystore
    config = {"listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
              "advertised.listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://localhost:0",
              "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SSL",
              "inter.broker.listener.name": "INTERNAL",
              "listener.name.internal.ssl.keystore.location": keystore,
              "listener.name.internal.ssl.truststore.location": ca.truststore,
              "listener.name.internal.ssl.endpoint.identification.algorithm": algorithm,
              "zookeeper.connect": f"{zookeeper.connect_string}/tls-{uuid.uuid4().hex[:8]}",
              "zookeeper.session.timeout.ms": "3000", "replica.fetch.wait.max.ms": "200",
              "replica.fetch.backoff.ms": "100", "offsets.topic.num.partitions": "1",
              "transaction.state.log.num.partitions": "1", "controlled.shutdown.timeout.ms": "3000"}
    refusals = Refusals()
    watched = logging.getLogger("broker_sim.replication")
    level = watched.level
    watched.addHandler(refusals)
    watched.setLevel(logging.DEBUG)
    brokers = []
    try:
        for broker_id in (1, 2):
            brokers.append(Broker(tmp_path / f"b{broker_id}", broker_id=broker_id, config=config).start())
        _wait(lambda: all(len(b.metadata.brokers) == 2 for b in brokers), 30, "the brokers see each other")
        admin = KafkaAdminClient(bootstrap_servers=brokers[0].bootstrap_servers)
        try:
            admin.create_topics([NewTopic("replicated", 1, 2)])
        finally:
            admin.close()
        state = _wait(lambda: brokers[0].metadata.partition_states.get(("replicated", 0)), 30, "a leader")
        by_id = {b.broker_id: b for b in brokers}
        leader, follower = by_id[state.leader], by_id[3 - state.leader]
        _wait(lambda: (leader.replicas.partitions.get(("replicated", 0)) is not None
                       and leader.replicas.partitions[("replicated", 0)].is_leader), 30, "the leader leads")
        producer = KafkaProducer(bootstrap_servers=leader.bootstrap_servers, acks=1)
        for i in range(RECORDS):
            producer.send("replicated", str(i).encode()).get(timeout=30)
        producer.close()

        def follower_end() -> int:
            partition = follower.replicas.partitions.get(("replicated", 0))
            return partition.log.log_end_offset if partition is not None else 0
        if replicates:
            _wait(lambda: follower_end() == RECORDS, 30, "the follower caught up")
            assert not refusals.seen, refusals.seen
        else:
            _wait(lambda: refusals.seen, 30, "the follower's fetcher refusing the leader's certificate")
            assert follower_end() == 0, "a follower that refused the certificate holds records"
    finally:
        watched.removeHandler(refusals)
        watched.setLevel(level)
        for broker in reversed(brokers):
            broker.stop()
