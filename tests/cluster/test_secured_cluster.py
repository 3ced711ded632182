"""A secured 3-broker ZooKeeper cluster: brokers replicate over an authenticated (SASL SCRAM) inter-broker
listener; SCRAM users and ACLs created through one broker apply on the others at once; a broker with a wrong
inter-broker credential cannot replicate (it never gets a record and leaves the ISR).

Each broker has a SASL_PLAINTEXT listener (inter-broker and clients) and a PLAINTEXT one that LocalCluster's
own metadata polling uses; User:ANONYMOUS is granted DESCRIBE on topics so that polling sees them.
"""
from __future__ import annotations

import json
import time

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import ACL, ACLOperation, ACLPermissionType, NewTopic, ResourcePattern, ResourceType
from kafka.admin import ScramMechanism, UserScramCredentialUpsertion
from kafka.errors import TopicAuthorizationFailedError

from cluster_helpers import start_cluster

JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" '
        'password="{}";')
SECURED = {
    "listeners": "PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:0",
    "inter.broker.listener.name": "SASL_PLAINTEXT",
    "sasl.enabled.mechanisms": "SCRAM-SHA-256",
    "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": JAAS.format("admin-secret"),
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "super.users": "User:admin",
    "replica.lag.time.max.ms": "3000",
}
ADMIN = "SCRAM-SHA-256=[name=admin,password=admin-secret]"


def _sasl_addresses(cluster) -> dict[int, str]:
    """{broker id: its SASL_PLAINTEXT address} from the registrations in ZooKeeper."""
    found = {}
    for broker_id in cluster.broker_ids:
        data, _ = cluster._zk.get(f"/brokers/ids/{broker_id}")
        for endpoint in json.loads(data)["endpoints"]:
            if endpoint.startswith("SASL_PLAINTEXT://"):
                found[broker_id] = endpoint[len("SASL_PLAINTEXT://"):]
    return found


def _login(user: str, password: str) -> dict:
    return dict(security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256", sasl_plain_username=user,
                sasl_plain_password=password)


@pytest.fixture(scope="module")
def secured_cluster(tmp_path_factory):
    from broker_sim.local.cluster import LocalCluster

    started = start_cluster(tmp_path_factory.mktemp("secured-probe"), brokers=1)  # skips without ZooKeeper
    started.stop_all()
    cluster = LocalCluster(tmp_path_factory.mktemp("secured"), brokers=3, configs=SECURED, broker_args=[
        "--add-scram", ADMIN]).start()
    try:
        admin = KafkaAdminClient(bootstrap_servers=_sasl_addresses(cluster)[0], **_login("admin", "admin-secret"))
        admin.create_acls([ACL("User:ANONYMOUS", "*", ACLOperation.DESCRIBE, ACLPermissionType.ALLOW,
                               ResourcePattern(ResourceType.TOPIC, "*"))])  # LocalCluster's metadata polling
        admin.close()
        yield cluster
    finally:
        cluster.stop_all()


def test_users_acls_and_replication_across_a_secured_cluster(secured_cluster, tmp_path):
    cluster = secured_cluster
    sasl = _sasl_addresses(cluster)
    assert sorted(sasl) == [0, 1, 2]
    via = {b: KafkaAdminClient(bootstrap_servers=sasl[b], **_login("admin", "admin-secret")) for b in (0, 1)}
    try:
        via[0].create_topics([NewTopic("secured", 2, 3)])
        # inter-broker replication over SASL: every follower joins the ISR
        cluster.wait_for_full_isr("secured", 2, timeout_s=60)
        # a SCRAM user created through broker 0 ...
        assert via[0].alter_user_scram_credentials([
            UserScramCredentialUpsertion("alice", ScramMechanism.SCRAM_SHA_256, "alice-secret")]) == {"alice": None}
        alice_on_2 = dict(bootstrap_servers=sasl[2], **_login("alice", "alice-secret"))
        # ... logs in on broker 2 at once; without an ACL it may not write
        producer = KafkaProducer(**alice_on_2, acks="all", enable_idempotence=False, retries=0, max_block_ms=10000)
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send("secured", b"refused", partition=0).get(15)
        # an ACL created through broker 1 applies on every broker (leaders are spread over all three)
        via[1].create_acls([ACL("User:alice", "*", op, ACLPermissionType.ALLOW,
                                ResourcePattern(ResourceType.TOPIC, "secured"))
                            for op in (ACLOperation.WRITE, ACLOperation.READ)])
        deadline = time.monotonic() + 15
        while True:
            try:
                for partition in (0, 1):
                    producer.send("secured", f"v{partition}".encode(), partition=partition).get(15)
                break
            except TopicAuthorizationFailedError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)  # the other brokers' watches fire within moments
        producer.close()
    finally:
        for admin in via.values():
            admin.close()
    consumer = KafkaConsumer("secured", **alice_on_2, group_id=None, auto_offset_reset="earliest",
                             consumer_timeout_ms=10000, enable_auto_commit=False)
    got = sorted(m.value for m in consumer)
    consumer.close()
    assert got == [b"v0", b"v1"]


def test_a_broker_with_a_wrong_inter_broker_password_cannot_replicate(secured_cluster, tmp_path):
    """Broker 3 joins ZooKeeper with a wrong password for the inter-broker listener: the leader refuses its
    follower fetches, it gets no record and leaves the ISR after replica.lag.time.max.ms."""
    from broker_sim.server.broker import Broker

    cluster = secured_cluster
    config = {**SECURED, "zookeeper.connect": cluster.zookeeper_connect, "broker.id": 3,
              "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
              "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": JAAS.format("wrong-secret"),
              "zookeeper.session.timeout.ms": "6000", "controlled.shutdown.enable": "false"}
    with Broker(tmp_path / "broker-3", config=config):
        sasl = _sasl_addresses(cluster)
        admin = KafkaAdminClient(bootstrap_servers=sasl[0], **_login("admin", "admin-secret"))
        try:
            from kafka.admin import NewTopic as Topic
            admin.create_topics([Topic("outsider", replica_assignments={0: [0, 3]})])
        finally:
            admin.close()
        producer = KafkaProducer(bootstrap_servers=sasl[0], **_login("admin", "admin-secret"), acks=1)
        for i in range(10):
            producer.send("outsider", f"o{i}".encode()).get(15)
        producer.close()
        states = cluster.wait_for(lambda md: (md.partitions.get(("outsider", 0)) if md.partitions.get(
            ("outsider", 0)) is not None and list(md.partitions[("outsider", 0)].isr) == [0] else None),
            timeout_s=30, what="broker 3 out of the ISR of outsider-0", topics=["outsider"])
        assert list(states.isr) == [0]
        segments = list((tmp_path / "broker-3" / "outsider-0").glob("*.log"))
        assert sum(s.stat().st_size for s in segments) == 0, "broker 3 replicated records without logging in"


def test_quotas_set_through_one_broker_apply_on_the_others(secured_cluster):
    """AlterClientQuotas on broker 0 lands in ZooKeeper /config/clients; broker 2 describes it at once and
    throttles a producer over it."""
    from kafka.protocol.admin import AlterClientQuotasRequest, DescribeClientQuotasRequest

    from broker_sim.security.sasl import SaslLogin
    from tests.broker.test_sasl import _authenticate
    from tests.integration.kafka_wire import WireClient, produce_request, record_batch
    import tests.broker.test_quotas  # noqa: F401  (registers the quota response classes with the wire client)

    sasl = _sasl_addresses(secured_cluster)
    entry = AlterClientQuotasRequest.EntryData

    def logged_in(address):
        client = WireClient(address)
        assert _authenticate(client, "SCRAM-SHA-256",
                             SaslLogin("SCRAM-SHA-256", "admin", "admin-secret").exchange()).error_code == 0
        return client

    with logged_in(sasl[0]) as client:
        altered = client.call(AlterClientQuotasRequest[1](entries=[entry(
            entity=[entry.EntityData(entity_type="client-id", entity_name="pylog-integration")],
            ops=[entry.OpData(key="producer_byte_rate", value=9000.0, remove=False)])], validate_only=False))
        assert altered.entries[0].error_code == 0
    deadline = time.monotonic() + 10
    with logged_in(sasl[2]) as client:
        while True:
            described = client.call(DescribeClientQuotasRequest[1](components=[], strict=False))
            if any(v.key == "producer_byte_rate" for e in described.entries for v in e.values):
                break
            assert time.monotonic() < deadline, "broker 2 never saw the quota set through broker 0"
            time.sleep(0.2)
    with logged_in(sasl[2]) as client:
        # super users are throttled too (Kafka exempts only the inter-broker principal); 100 KB over 9 KB/s
        answer = client.call(produce_request("quota-secured", 0, record_batch([b"q" * 100_000])))
        assert answer.throttle_time_ms > 0
