"""SSL listeners: every Kafka client over TLS, mutual TLS principals, and bad certificates refused.

A throwaway CA (broker_sim.local.certificates) issues the broker's and the clients' certificates.  The broker has a
PLAINTEXT and an SSL listener side by side; clients bootstrap on the SSL one and must be sent back to it.
"""
from __future__ import annotations

import asyncio
import shutil
import socket
import ssl
import subprocess
import time
import uuid

import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import Producer as ConfluentProducer
from kafka import KafkaConsumer, KafkaProducer

from broker_sim.config import BrokerConfig, ConfigError
from broker_sim.local.certificates import CertificateAuthority
from broker_sim.security.tls import PrincipalMapper, server_context, subject_name
from broker_sim.server.broker import Broker

FAST = {"group.initial.rebalance.delay.ms": "0"}


@pytest.fixture(scope="module")
def ca(tmp_path_factory):
    return CertificateAuthority(tmp_path_factory.mktemp("ca"))


@pytest.fixture(scope="module")
def tls_broker(ca):
    """SSL listener asking for (not requiring) client certificates, next to a PLAINTEXT one."""
    server = ca.issue("broker")
    config = dict(FAST, **{"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
                           "ssl.keystore.location": server.keystore, "ssl.truststore.location": ca.truststore,
                           "ssl.client.auth": "requested",
                           "ssl.principal.mapping.rules": "RULE:^CN=([^,]*),O=pylog$/$1/L,DEFAULT"})
    with Broker(config=config) as broker:
        yield broker


def _topic() -> str:
    return f"tls-{uuid.uuid4().hex[:10]}"


def _principals(broker) -> set[str]:
    return {c.principal for c in broker.connections if c.listener == "SSL"}


def test_kafka_python_produces_and_consumes_over_tls_and_is_sent_back_to_the_ssl_listener(tls_broker, ca):
    bootstrap, topic = tls_broker.bootstrap_servers_for("SSL"), _topic()
    tls = dict(security_protocol="SSL", ssl_cafile=ca.truststore)
    producer = KafkaProducer(bootstrap_servers=bootstrap, **tls)
    for i in range(50):
        producer.send(topic, f"v{i}".encode())
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=10000, group_id="tls-group", **tls)
    assert [m.value for m in consumer] == [f"v{i}".encode() for i in range(50)]
    consumer.close()


def test_confluent_kafka_with_a_client_certificate_gets_its_mapped_principal(tls_broker, ca):
    """librdkafka over TLS with a client certificate: the connection's principal is the certificate's
    subject through ssl.principal.mapping.rules (CN=alice,O=pylog -> alice).
    Mutation: principal_of ignoring the mapper -> User:CN=alice,O=pylog."""
    alice = ca.issue("Alice")
    bootstrap, topic = tls_broker.bootstrap_servers_for("SSL"), _topic()
    tls = {"bootstrap.servers": bootstrap, "security.protocol": "SSL", "ssl.ca.location": ca.truststore,
           "ssl.certificate.location": alice.certificate, "ssl.key.location": alice.key}
    producer = ConfluentProducer(tls)
    for i in range(20):
        producer.produce(topic, f"c{i}".encode())
    assert producer.flush(30) == 0
    assert "User:alice" in _principals(tls_broker)
    consumer = ConfluentConsumer(dict(tls, **{"group.id": "rdkafka-tls", "auto.offset.reset": "earliest"}))
    consumer.subscribe([topic])
    got, deadline = [], time.monotonic() + 30
    while len(got) < 20 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got.append(message.value())
    consumer.close()
    assert got == [f"c{i}".encode() for i in range(20)]


def test_principal_mapping_rules_can_be_set_per_listener(ca, tmp_path):
    """listener.name.<l>.ssl.principal.mapping.rules rewrites the subjects of that listener only; the other
    SSL listener keeps the broker-wide rules.  Mutation: one mapper for every listener -> the same principal
    on both."""
    server, bob = ca.issue("broker"), ca.issue("Bob")
    config = dict(FAST, **{"listeners": "INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
                           "listener.security.protocol.map": "INTERNAL:SSL,EXTERNAL:SSL",
                           "inter.broker.listener.name": "INTERNAL",
                           "ssl.keystore.location": server.keystore, "ssl.truststore.location": ca.truststore,
                           "ssl.client.auth": "required",
                           "ssl.principal.mapping.rules": "RULE:^CN=([^,]*),O=pylog$/$1/L,DEFAULT",
                           "listener.name.external.ssl.principal.mapping.rules": "RULE:^CN=([^,]*),.*$/ext-$1/U"})
    with Broker(config=config, data_dir=tmp_path / "data") as broker:
        principals = {}
        for listener in ("INTERNAL", "EXTERNAL"):
            producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers_for(listener), security_protocol="SSL",
                                     ssl_cafile=ca.truststore, ssl_certfile=bob.certificate, ssl_keyfile=bob.key)
            producer.send(_topic(), b"x").get(30)
            principals[listener] = {c.principal for c in broker.connections if c.listener == listener}
            producer.close()
    assert principals == {"INTERNAL": {"User:bob"}, "EXTERNAL": {"User:EXT-BOB"}}


def test_aiokafka_over_tls(tls_broker, ca):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    bootstrap, topic = tls_broker.bootstrap_servers_for("SSL"), _topic()

    async def roundtrip():
        context = create_ssl_context(cafile=ca.truststore)
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, security_protocol="SSL", ssl_context=context)
        await producer.start()
        try:
            for i in range(10):
                await producer.send_and_wait(topic, f"a{i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, security_protocol="SSL",
                                    ssl_context=context, auto_offset_reset="earliest")
        await consumer.start()
        try:
            got = []
            while len(got) < 10:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 30)
                got += [m.value for records in batch.values() for m in records]
            return got
        finally:
            await consumer.stop()

    assert asyncio.run(roundtrip()) == [f"a{i}".encode() for i in range(10)]


def test_kcat_over_tls(tls_broker, ca):
    kcat = shutil.which("kcat")
    if kcat is None:
        from broker_sim.testing.requirements import missing
        missing("kcat", "kcat is not installed (Debian package kcat; ci/setup.sh installs it)")
    bootstrap, topic = tls_broker.bootstrap_servers_for("SSL"), _topic()
    tls = ["-b", bootstrap, "-X", "security.protocol=ssl", "-X", f"ssl.ca.location={ca.truststore}"]
    subprocess.run([kcat, *tls, "-P", "-t", topic], input=b"k1\nk2\nk3\n", check=True, timeout=60)
    out = subprocess.run([kcat, *tls, "-C", "-t", topic, "-o", "beginning", "-e", "-q"], check=True,
                         timeout=60, capture_output=True).stdout
    assert out.split() == [b"k1", b"k2", b"k3"]


def test_a_client_that_does_not_trust_the_broker_ca_is_refused_and_the_broker_serves_on(tls_broker, ca, tmp_path):
    other = CertificateAuthority(tmp_path / "other")
    with pytest.raises(ssl.SSLCertVerificationError):
        _tls_connect(tls_broker, other)
    # a plaintext Kafka request on the TLS port is not a handshake: the broker ends that connection
    port = int(tls_broker.bootstrap_servers_for("SSL").rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        raw.sendall(b"\x00\x00\x00\x10" + b"\x00" * 16)
        raw.settimeout(15)
        received = b""
        while chunk := raw.recv(1024):
            received += chunk
        assert not received.startswith(b"\x00\x00"), "answered a Kafka frame on a TLS port"
    producer = KafkaProducer(bootstrap_servers=tls_broker.bootstrap_servers_for("SSL"), security_protocol="SSL",
                             ssl_cafile=ca.truststore)
    producer.send(_topic(), b"still serving").get(timeout=30)
    producer.close()


def _tls_connect(broker, ca, cert=None):
    context = ssl.create_default_context(cafile=ca.truststore)
    if cert is not None:
        context.load_cert_chain(cert.certificate, cert.key)
    port = int(broker.bootstrap_servers_for("SSL").rsplit(":", 1)[1])
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    wrapped = context.wrap_socket(raw, server_hostname="localhost")
    # TLS 1.3 reports a refused client certificate after the handshake: read to see the alert
    wrapped.settimeout(5)
    try:
        data = wrapped.recv(1)
    except socket.timeout:
        data = None  # still open: accepted
    wrapped.close()
    return data


def test_mutual_tls_required_refuses_no_certificate_an_expired_one_and_another_cas(ca, tmp_path):
    """ssl.client.auth=required: only a valid certificate from the truststore's CA gets in.
    Mutation: verify_mode CERT_OPTIONAL for required -> the certificate-less client was accepted."""
    server = ca.issue("broker")
    config = dict(FAST, **{"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": server.keystore,
                           "ssl.truststore.location": ca.truststore, "ssl.client.auth": "required"})
    stranger = CertificateAuthority(tmp_path / "stranger").issue("mallory")
    with Broker(config=config) as broker:
        for cert in (None, ca.issue("old", expired=True), stranger):
            try:
                data = _tls_connect(broker, ca, cert)
            except (ssl.SSLError, ConnectionError):
                continue  # refused during the handshake
            assert data == b"", f"a client with {cert} was accepted"
        assert _tls_connect(broker, ca, ca.issue("bob")) is None
        carol = ca.issue("carol")
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, security_protocol="SSL",
                                 ssl_cafile=ca.truststore, ssl_certfile=carol.certificate, ssl_keyfile=carol.key)
        producer.send(_topic(), b"mtls").get(timeout=30)
        assert {c.principal for c in broker.connections} == {"User:CN=carol,O=pylog"}
        producer.close()


def test_bad_tls_configs_fail_the_start_naming_the_config(ca, tmp_path):
    server = ca.issue("broker", password="s3cret")
    other = ca.issue("other")
    base = {"listeners": "SSL://127.0.0.1:0"}
    mismatched = tmp_path / "mismatched.pem"
    mismatched.write_text(open(server.certificate).read() + open(other.key).read())
    cases = [
        ({}, "ssl.keystore.location"),
        ({"ssl.keystore.location": str(tmp_path / "missing.pem")}, "missing.pem"),
        ({"ssl.keystore.location": server.keystore}, "ssl.key.password"),
        ({"ssl.keystore.location": server.keystore, "ssl.key.password": "wrong"}, "ssl.key.password"),
        ({"ssl.keystore.location": str(mismatched)}, "key matches the certificate"),
        ({"ssl.keystore.location": other.keystore, "ssl.keystore.type": "JKS"}, "ssl.keystore.type=JKS"),
        ({"ssl.keystore.location": other.keystore, "ssl.client.auth": "required"}, "ssl.truststore.location"),
        ({"ssl.keystore.location": other.keystore, "ssl.enabled.protocols": "TLSv1"}, "ssl.enabled.protocols"),
        ({"ssl.keystore.location": other.keystore, "ssl.cipher.suites": "NOPE"}, "ssl.cipher.suites"),
        ({"ssl.keystore.location": other.keystore, "ssl.principal.mapping.rules": "RULE:x"},
         "ssl.principal.mapping.rules"),
    ]
    for extra, named in cases:
        with pytest.raises(ConfigError) as raised:
            Broker(tmp_path / "data", config=dict(base, **extra))
        assert named in str(raised.value), (extra, str(raised.value))
    # an encrypted key with its password loads; per-listener settings override the broker-wide ones
    Broker(tmp_path / "data", config=dict(base, **{"ssl.keystore.location": server.keystore,
                                                   "listener.name.ssl.ssl.key.password": "s3cret"}))


def test_principal_mapping_rules_follow_kafkas_sslprincipalmapper():
    mapper = PrincipalMapper("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=.*$/$1@$2/L,DEFAULT")
    assert mapper.map("CN=kafka-svc,OU=ServiceUsers,O=Acme") == "kafka-svc"
    assert mapper.map("CN=Duke,OU=JavaSoft,O=Sun Microsystems") == "duke@javasoft"
    assert mapper.map("CN=plain") == "CN=plain"
    assert PrincipalMapper("RULE:^CN=(.*)$/$1/U").map("CN=bob") == "BOB"
    assert subject_name({"subject": ((("countryName", "US"),), (("organizationName", "A, Inc"),),
                                     (("commonName", "x"),))}) == "CN=x,O=A\\, Inc,C=US"


def test_tls_context_minimum_version_follows_ssl_enabled_protocols(ca):
    server = ca.issue("broker")
    context = server_context(BrokerConfig({"ssl.keystore.location": server.keystore,
                                           "ssl.enabled.protocols": "TLSv1.3"}), "SSL")
    assert context.minimum_version == ssl.TLSVersion.TLSv1_3


def test_a_cluster_replicates_over_an_ssl_inter_broker_listener(ca, tmp_path):
    """Followers and the controller's peers talk TLS with host name verification and client certificates
    (ssl.client.auth=required on the inter-broker listener): replication works, and every inter-broker
    connection arrived on the SSL listener with the broker certificate's principal.
    Mutation: BrokerClient without ssl= -> followers never fetch, the acks=all produce times out."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    from broker_sim.local.zookeeper import ZooKeeperServer
    from broker_sim.testing.requirements import require_zookeeper
    require_zookeeper()
    server = ca.issue("broker")
    config = {"listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
              "advertised.listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://localhost:0",
              "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SSL",
              "inter.broker.listener.name": "INTERNAL",
              "listener.name.internal.ssl.keystore.location": server.keystore,
              "listener.name.internal.ssl.truststore.location": ca.truststore,
              "listener.name.internal.ssl.client.auth": "required",
              "zookeeper.session.timeout.ms": "3000", "replica.fetch.wait.max.ms": "200",
              "offsets.topic.num.partitions": "1", "transaction.state.log.num.partitions": "1",
              "controlled.shutdown.timeout.ms": "5000"}
    with ZooKeeperServer(tmp_path / "zk", tick_ms=500).start(timeout=60) as zk:
        brokers = []
        try:
            for broker_id in (1, 2):
                brokers.append(Broker(tmp_path / f"b{broker_id}", broker_id=broker_id,
                                      config=dict(config, **{"zookeeper.connect": zk.connect_string})).start())
            deadline = time.monotonic() + 30
            while any(len(b.metadata.brokers) < 2 for b in brokers):
                assert time.monotonic() < deadline, "the brokers did not see each other"
                time.sleep(0.05)
            admin = KafkaAdminClient(bootstrap_servers=brokers[0].bootstrap_servers)
            admin.create_topics([NewTopic("secure-replicated", 1, 2, topic_configs={"min.insync.replicas": "2"})])
            admin.close()
            producer = KafkaProducer(bootstrap_servers=brokers[1].bootstrap_servers, acks="all",
                                     request_timeout_ms=20000)
            for i in range(20):
                producer.send("secure-replicated", str(i).encode()).get(timeout=60)
            producer.close()
            inter = [c for b in brokers for c in b.connections if c.inter_broker]
            assert inter and {(c.listener, c.principal) for c in inter} == {("INTERNAL", "User:CN=broker,O=pylog")}
        finally:
            for broker in reversed(brokers):
                broker.stop()
