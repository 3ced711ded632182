"""A Spark query on a secured broker: SASL_SSL with SCRAM-SHA-512, ACLs enforced, exactly-once end to end.

The query's user holds exactly the ACLs the README's table lists for a pylog source with group commits and
an exactly-once sink — no super user — so the test also proves that table complete.  Driver and executors
log in (the executors' raw Fetch and produce clients too); a wrong password fails the query with the
broker's refusal instead of hanging. Both tests run on broker_sim and on Apache Kafka (``secured``: the same
listener, users and ACLs on each).
"""
from __future__ import annotations

import contextlib
import tempfile
from types import SimpleNamespace

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import ACL, ACLOperation, ACLPermissionType, ACLResourcePatternType, NewTopic, ResourcePattern
from kafka.admin import ResourceType

from broker_sim.local.certificates import CertificateAuthority
from tests.spark.sink_helpers import read_topic

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"{}\" password=\"{}\";"
LITERAL, PREFIXED = ACLResourcePatternType.LITERAL, ACLResourcePatternType.PREFIXED

# (resource type, name, pattern, operation): what the README's "ACLs a Spark query needs" table lists
SPARK_ACLS = [
    (ResourceType.TOPIC, "sec-events", LITERAL, ACLOperation.READ),         # source: Metadata, ListOffsets, Fetch
    (ResourceType.GROUP, "pylog-", PREFIXED, ACLOperation.READ),            # source: offsets committed to its group
    (ResourceType.TOPIC, "sec-clean", LITERAL, ACLOperation.WRITE),         # sink: Produce
    (ResourceType.TRANSACTIONAL_ID, "pylog-sink-", PREFIXED, ACLOperation.WRITE),  # exactly-once sink
    (ResourceType.TOPIC, "__pylog_sink_log", LITERAL, ACLOperation.READ),   # exactly-once sink: its log
    (ResourceType.TOPIC, "__pylog_sink_log", LITERAL, ACLOperation.WRITE),
    (ResourceType.TOPIC, "__pylog_sink_log", LITERAL, ACLOperation.CREATE),
]


USERS = {"admin": "admin-secret", "spark": "spark-secret"}


@contextlib.contextmanager
def _secured_pylog(directory, ca):
    from broker_sim.server.broker import Broker

    config = {"listeners": "SASL_SSL://127.0.0.1:0", "ssl.keystore.location": ca.issue("broker").keystore,
              "sasl.enabled.mechanisms": "SCRAM-SHA-512", "authorizer.class.name": "AclAuthorizer",
              "super.users": "User:admin", "group.initial.rebalance.delay.ms": "0"}
    users = [f"SCRAM-SHA-512=[name={user},password={password}]" for user, password in USERS.items()]
    with Broker(directory, config=config, add_scram=users) as broker:
        yield broker.bootstrap_servers


@contextlib.contextmanager
def _secured_kafka(directory, ca):
    """Apache Kafka with the same SASL_SSL listener and authorizer; its PLAINTEXT listener (readiness, and the
    SCRAM users created through it) is User:ANONYMOUS, a super user, as is the KRaft controller's."""
    from kafka.admin import ScramMechanism, UserScramCredentialUpsertion

    from broker_sim.local.kafka import KafkaServer
    from broker_sim.local.zookeeper import free_port
    from broker_sim.testing.requirements import require_kafka

    require_kafka()
    server = KafkaServer(directory, configs={"group.initial.rebalance.delay.ms": "0"})
    secured_port, controller = free_port(), server.nodes[server.node_id].controller_port
    server.configs.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{{port}},SASL_SSL://127.0.0.1:{secured_port},"
                     f"CONTROLLER://127.0.0.1:{controller}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{{port}},SASL_SSL://127.0.0.1:{secured_port}",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": "org.apache.kafka.common.security.scram."
                                                                 "ScramLoginModule required;",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": ca.issue("broker").keystore,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin;User:ANONYMOUS"})
    with server:
        admin = KafkaAdminClient(bootstrap_servers=server.bootstrap_servers)
        try:
            errors = admin.alter_user_scram_credentials([
                UserScramCredentialUpsertion(user, ScramMechanism.SCRAM_SHA_512, password)
                for user, password in USERS.items()])
        finally:
            admin.close()
        assert not any(errors.values()), errors
        yield f"127.0.0.1:{secured_port}"


@pytest.fixture(scope="module", params=["pylog", "kafka"])
def secured(request, tmp_path_factory):
    """(broker, ca, the admin's kafka-python login): broker_sim's or Apache Kafka's SASL_SSL listener."""
    ca = CertificateAuthority(tmp_path_factory.mktemp("spark-ca"))
    start = _secured_pylog if request.param == "pylog" else _secured_kafka
    with start(tmp_path_factory.mktemp(f"spark-secured-{request.param}"), ca) as bootstrap:
        broker = SimpleNamespace(bootstrap_servers=bootstrap)
        login = dict(security_protocol="SASL_SSL", ssl_cafile=ca.truststore, sasl_mechanism="SCRAM-SHA-512",
                     sasl_plain_username="admin", sasl_plain_password="admin-secret")
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, **login)
        admin.create_topics([NewTopic("sec-events", 2, 1), NewTopic("sec-clean", 2, 1)])
        result = admin.create_acls([ACL("User:spark", "*", op, ACLPermissionType.ALLOW, ResourcePattern(rt, name, p))
                                    for rt, name, p, op in SPARK_ACLS])
        assert not result["failed"], result
        admin.close()
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, **login)
        for i in range(300):
            producer.send("sec-events", key=f"k{i}".encode(), value=f"{i}".encode(), partition=i % 2)
        producer.flush(30)
        producer.close()
        yield broker, ca, login


def _options(broker, ca, password="spark-secret") -> dict:
    return {"kafka.bootstrap.servers": broker.bootstrap_servers, "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "SCRAM-SHA-512", "kafka.ssl.truststore.location": ca.truststore,
            "kafka.sasl.jaas.config": SCRAM.format("spark", password)}


def test_a_query_reads_and_writes_exactly_once_over_sasl_ssl_with_only_its_acls(spark, secured):
    broker, ca, login = secured
    options = _options(broker, ca)
    checkpoint = tempfile.mkdtemp(prefix="pylog-secured-ckpt-")
    source = (spark.readStream.format("pylog").options(**options).option("subscribe", "sec-events")
              .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "100").load())
    query = (source.selectExpr("key", "concat('seen-', CAST(value AS STRING)) AS value")
             .writeStream.format("pylog").options(**options).option("topic", "sec-clean")
             .option("checkpointLocation", checkpoint).start())
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    assert query.exception() is None
    got = read_topic(broker.bootstrap_servers, "sec-clean", client_kwargs=login)
    assert sorted(r[2] for r in got) == sorted(f"seen-{i}".encode() for i in range(300))
    uncommitted = read_topic(broker.bootstrap_servers, "sec-clean", isolation="read_uncommitted", client_kwargs=login)
    assert len(uncommitted) == 300  # no duplicate was written, committed or not


def test_a_wrong_password_fails_the_batch_read_with_the_brokers_refusal(spark, secured):
    broker, ca, _ = secured
    with pytest.raises(Exception) as raised:
        (spark.read.format("pylog").options(**_options(broker, ca, password="wrong"))
         .option("subscribe", "sec-events").load().collect())
    assert "Authentication failed" in str(raised.value) or "SaslAuthenticationFailed" in str(raised.value)
