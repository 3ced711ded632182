"""SASL listeners: PLAIN and SCRAM-SHA-256/512 over SASL_PLAINTEXT and SASL_SSL with every Kafka client,
refusals that do not tell users apart, SCRAM users managed over the wire (KIP-554), re-authentication (KIP-368).

One broker has a PLAINTEXT, a SASL_PLAINTEXT and a SASL_SSL listener; PLAIN users come from the listeners'
JAAS configs, SCRAM users from ``add_scram`` (pylog-broker --add-scram) and AlterUserScramCredentials.
"""
from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import stat
import subprocess
import time
import uuid

from pathlib import Path

import jsonschema
import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import Producer as ConfluentProducer
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import ScramMechanism, UserScramCredentialDeletion, UserScramCredentialUpsertion
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

import broker_sim
from broker_sim.config import ConfigError
from broker_sim.local.certificates import CertificateAuthority
from broker_sim.protocol.client import ConnectionClosed
from broker_sim.security import sasl
from broker_sim.security.scram import CredentialError, ScramCredential, parse_add_scram
from broker_sim.server.broker import Broker
from broker_sim.testing.requirements import missing
from tests.integration.kafka_wire import WireClient

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
USERS = {"PLAIN": ("alice", "alice-secret"), "SCRAM-SHA-256": ("bob", "bob-secret"),
         "SCRAM-SHA-512": ("carol", "carol-secret")}
MECHANISMS = list(USERS)


@pytest.fixture(scope="module")
def ca(tmp_path_factory):
    return CertificateAuthority(tmp_path_factory.mktemp("sasl-ca"))


@pytest.fixture(scope="module")
def sasl_broker(ca, tmp_path_factory):
    server = ca.issue("broker")
    config = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
              "ssl.keystore.location": server.keystore, "group.initial.rebalance.delay.ms": "0",
              "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
              "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
              "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS}
    with Broker(tmp_path_factory.mktemp("sasl-data"), config=config,
                add_scram=["SCRAM-SHA-256=[name=bob,password=bob-secret]",
                           "SCRAM-SHA-512=[name=carol,password=carol-secret]"]) as broker:
        yield broker


def _topic() -> str:
    return f"sasl-{uuid.uuid4().hex[:10]}"


def _principals(broker, listener: str) -> set[str]:
    return {c.principal for c in broker.connections if c.listener == listener}


def _kafka_python(protocol: str, mechanism: str, ca, user=None, password=None) -> dict:
    default_user, default_password = USERS[mechanism]
    options = dict(security_protocol=protocol, sasl_mechanism=mechanism,
                   sasl_plain_username=user or default_user, sasl_plain_password=password or default_password)
    if protocol == "SASL_SSL":
        options["ssl_cafile"] = ca.truststore
    return options


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python_produces_and_consumes_with_each_mechanism(sasl_broker, ca, protocol, mechanism):
    """kafka-python authenticates with PLAIN / SCRAM-SHA-256 / SCRAM-SHA-512 on both SASL listeners, is sent
    back to the listener it came in on, and its connections carry the authenticated principal."""
    bootstrap, topic = sasl_broker.bootstrap_servers_for(protocol), _topic()
    options = _kafka_python(protocol, mechanism, ca)
    producer = KafkaProducer(bootstrap_servers=bootstrap, **options)
    for i in range(20):
        producer.send(topic, f"v{i}".encode())
    producer.flush(30)
    assert f"User:{USERS[mechanism][0]}" in _principals(sasl_broker, protocol)
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=20000, group_id=f"g-{topic}", **options)
    got = []
    for message in consumer:  # ends at the 20th record, or empty-handed after 20 s
        got.append(message.value)
        if len(got) == 20:
            break
    consumer.close()
    assert got == [f"v{i}".encode() for i in range(20)]


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_kafka_produces_and_consumes_with_each_mechanism(sasl_broker, ca, protocol, mechanism):
    user, password = USERS[mechanism]
    topic = _topic()
    conf = {"bootstrap.servers": sasl_broker.bootstrap_servers_for(protocol), "security.protocol": protocol,
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}
    if protocol == "SASL_SSL":
        conf["ssl.ca.location"] = ca.truststore
    producer = ConfluentProducer(conf)
    for i in range(20):
        producer.produce(topic, f"c{i}".encode())
    assert producer.flush(30) == 0
    consumer = ConfluentConsumer(dict(conf, **{"group.id": f"g-{topic}", "auto.offset.reset": "earliest"}))
    consumer.subscribe([topic])
    got, deadline = [], time.monotonic() + 30
    while len(got) < 20 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got.append(message.value())
    consumer.close()
    assert got == [f"c{i}".encode() for i in range(20)]


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_aiokafka_produces_and_consumes(sasl_broker, ca, protocol, mechanism):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    user, password = USERS[mechanism]
    bootstrap, topic = sasl_broker.bootstrap_servers_for(protocol), _topic()

    async def roundtrip():
        options = dict(bootstrap_servers=bootstrap, security_protocol=protocol, sasl_mechanism=mechanism,
                       sasl_plain_username=user, sasl_plain_password=password)
        if protocol == "SASL_SSL":
            options["ssl_context"] = create_ssl_context(cafile=ca.truststore)
        producer = AIOKafkaProducer(**options)
        await producer.start()
        try:
            for i in range(10):
                await producer.send_and_wait(topic, f"a{i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, auto_offset_reset="earliest", group_id=f"g-{topic}", **options)
        await consumer.start()
        try:
            got = []
            async with asyncio.timeout(30):
                async for message in consumer:
                    got.append(message.value)
                    if len(got) == 10:
                        break
            return got
        finally:
            await consumer.stop()

    assert asyncio.run(roundtrip()) == [f"a{i}".encode() for i in range(10)]


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kcat_produces_and_consumes(sasl_broker, ca, protocol, mechanism):
    kcat = shutil.which("kcat")
    if kcat is None:
        missing("kcat", "kcat is not installed (Debian package kcat; ci/setup.sh installs it)")
    user, password = USERS[mechanism]
    topic = _topic()
    common = ["-b", sasl_broker.bootstrap_servers_for(protocol), "-X", f"security.protocol={protocol}",
              "-X", f"sasl.mechanism={mechanism}", "-X", f"sasl.username={user}", "-X", f"sasl.password={password}"]
    if protocol == "SASL_SSL":
        common += ["-X", f"ssl.ca.location={ca.truststore}"]
    subprocess.run([kcat, *common, "-P", "-t", topic], input=b"k1\nk2\nk3\n", check=True, timeout=60)
    out = subprocess.run([kcat, *common, "-C", "-t", topic, "-o", "beginning", "-e", "-q"], check=True,
                         capture_output=True, timeout=60)
    assert out.stdout.split() == [b"k1", b"k2", b"k3"]


# --- refusals ------------------------------------------------------------------------------------

def _authenticate(client: WireClient, mechanism: str, tokens_for, version: int = 1):
    """SaslHandshake + SaslAuthenticate over the wire; returns the last SaslAuthenticate response."""
    client.call(ApiVersionsRequest[3](client_software_name="t", client_software_version="1"))
    handshake = client.call(SaslHandshakeRequest[version](mechanism=mechanism))
    assert handshake.error_code == 0, handshake
    steps = tokens_for
    token = next(steps)
    while True:
        response = client.call(SaslAuthenticateRequest[2](auth_bytes=token))
        if response.error_code:
            return response
        try:
            token = steps.send(bytes(response.auth_bytes))
        except StopIteration:
            return response


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_wrong_password_and_unknown_user_get_the_same_refusal_then_the_connection_closes(sasl_broker, mechanism):
    """SASL_AUTHENTICATION_FAILED with a message, then the connection ends; an unknown user is refused with the
    same message as a wrong password, after the same exchange (SCRAM: the server-first message of an unknown
    user carries a salt that is the same on every attempt, as a real user's).
    Mutation: ScramServer failing an unknown user at the first message -> the exchange lengths differ."""
    bootstrap = sasl_broker.bootstrap_servers_for("SASL_PLAINTEXT")
    user, _ = USERS[mechanism]
    answers = {}
    for who, password in ((user, "wrong"), ("nobody-" + uuid.uuid4().hex[:6], "whatever")):
        with WireClient(bootstrap) as client:
            exchange = sasl.SaslLogin(mechanism, who, password).exchange()
            response = _authenticate(client, mechanism, exchange)
            assert response.error_code == 58  # SASL_AUTHENTICATION_FAILED
            answers[who == user] = response.error_message
            with pytest.raises(ConnectionClosed):
                client.call(MetadataRequest[12](topics=[], allow_auto_topic_creation=False,
                                                include_topic_authorized_operations=False))
    assert answers[True] == answers[False]
    assert "invalid" in answers[True].lower()


def test_an_unknown_scram_user_sees_a_stable_salt(sasl_broker):
    bootstrap = sasl_broker.bootstrap_servers_for("SASL_PLAINTEXT")
    salts = []
    for _ in range(2):
        with WireClient(bootstrap) as client:
            client.call(SaslHandshakeRequest[1](mechanism="SCRAM-SHA-256"))
            first = client.call(SaslAuthenticateRequest[2](auth_bytes=b"n,,n=ghost,r=abcdef"))
            assert first.error_code == 0
            attributes = dict(item.split("=", 1) for item in bytes(first.auth_bytes).decode().split(","))
            assert attributes["r"].startswith("abcdef") and int(attributes["i"]) == 4096
            salts.append(attributes["s"])
    assert salts[0] == salts[1]


def test_kafka_python_reports_a_wrong_password(sasl_broker, ca):
    from kafka.errors import KafkaError
    with pytest.raises(KafkaError):
        KafkaProducer(bootstrap_servers=sasl_broker.bootstrap_servers_for("SASL_PLAINTEXT"), max_block_ms=3000,
                      bootstrap_timeout_ms=3000,
                      **_kafka_python("SASL_PLAINTEXT", "SCRAM-SHA-256", ca, password="wrong"))


def test_confluent_kafka_reports_an_authentication_error(sasl_broker):
    from confluent_kafka import KafkaError
    errors = []
    producer = ConfluentProducer({"bootstrap.servers": sasl_broker.bootstrap_servers_for("SASL_PLAINTEXT"),
                                  "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                                  "sasl.username": "alice", "sasl.password": "wrong",
                                  "error_cb": errors.append})
    deadline = time.monotonic() + 20
    while not any(e.code() == KafkaError._AUTHENTICATION for e in errors) and time.monotonic() < deadline:
        producer.poll(0.2)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
    assert any("Invalid username or password" in e.str() for e in errors), errors


def test_requests_before_authentication_close_the_connection(sasl_broker):
    """Only ApiVersions, SaslHandshake and SaslAuthenticate are served before SASL completes."""
    with WireClient(sasl_broker.bootstrap_servers_for("SASL_PLAINTEXT")) as client:
        versions = client.call(ApiVersionsRequest[3](client_software_name="t", client_software_version="1"))
        assert versions.error_code == 0
        with pytest.raises(ConnectionClosed):
            client.call(MetadataRequest[12](topics=None, allow_auto_topic_creation=False,
                                            include_topic_authorized_operations=False))


def test_an_unsupported_mechanism_is_answered_with_the_enabled_ones(sasl_broker):
    with WireClient(sasl_broker.bootstrap_servers_for("SASL_PLAINTEXT")) as client:
        handshake = client.call(SaslHandshakeRequest[1](mechanism="GSSAPI"))
        assert handshake.error_code == 33  # UNSUPPORTED_SASL_MECHANISM
        assert set(handshake.mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}


def test_sasl_handshake_v0_exchanges_bare_tokens(sasl_broker):
    """KIP-43: after SaslHandshake v0 the tokens travel size-prefixed, without Kafka headers."""
    with WireClient(sasl_broker.bootstrap_servers_for("SASL_PLAINTEXT")) as client:
        assert client.call(SaslHandshakeRequest[0](mechanism="SCRAM-SHA-256")).error_code == 0
        steps = sasl.SaslLogin("SCRAM-SHA-256", "bob", "bob-secret").exchange()
        token = next(steps)
        while True:
            client.send_bytes(len(token).to_bytes(4, "big") + token)
            answer = client.recv_frame()
            try:
                token = steps.send(answer)
            except StopIteration:
                break
        response = client.call(MetadataRequest[12](topics=None, allow_auto_topic_creation=False,
                                                   include_topic_authorized_operations=False))
        assert response.brokers


def test_plaintext_listener_answers_sasl_handshake_illegal_state(sasl_broker):
    with WireClient(sasl_broker.bootstrap_servers_for("PLAINTEXT")) as client:
        assert client.call(SaslHandshakeRequest[1](mechanism="PLAIN")).error_code == 34  # ILLEGAL_SASL_STATE


# --- SCRAM users over the wire (KIP-554) and on disk ------------------------------------------------

def test_scram_users_are_created_described_and_deleted_through_the_admin_api(sasl_broker, ca):
    """AlterUserScramCredentials creates a user a client can log in as at once; Describe lists its mechanisms
    and iterations; deleting the credential refuses the next login.  The store is the data dir's file,
    readable by the broker's user only."""
    admin = KafkaAdminClient(bootstrap_servers=sasl_broker.bootstrap_servers_for("SASL_PLAINTEXT"),
                             **_kafka_python("SASL_PLAINTEXT", "SCRAM-SHA-256", ca))
    try:
        errors = admin.alter_user_scram_credentials([
            UserScramCredentialUpsertion("dave", ScramMechanism.SCRAM_SHA_512, "dave-secret", iterations=8192)])
        assert errors == {"dave": None}
        described = admin.describe_user_scram_credentials(["dave", "bob", "nobody"])
        assert [(i["mechanism"], i["iterations"]) for i in described["dave"]["credential_infos"]] == [
            (ScramMechanism.SCRAM_SHA_512, 8192)]
        assert described["bob"]["error"] is None and described["nobody"]["error"] is not None
        options = dict(security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-512",
                       sasl_plain_username="dave", sasl_plain_password="dave-secret")
        producer = KafkaProducer(bootstrap_servers=sasl_broker.bootstrap_servers_for("SASL_PLAINTEXT"), **options)
        producer.send(_topic(), b"x").get(30)
        producer.close()
        path = sasl_broker.data_dir / "security" / "entity-configs.json"
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert "dave-secret" not in path.read_text()
        schema = json.loads((Path(broker_sim.__file__).parent / "schemas" / "entity-configs.json").read_text())
        jsonschema.validate(json.loads(path.read_text()), schema)
        assert admin.alter_user_scram_credentials([
            UserScramCredentialDeletion("dave", ScramMechanism.SCRAM_SHA_512)]) == {"dave": None}
        with WireClient(sasl_broker.bootstrap_servers_for("SASL_PLAINTEXT")) as client:
            response = _authenticate(client, "SCRAM-SHA-512",
                                     sasl.SaslLogin("SCRAM-SHA-512", "dave", "dave-secret").exchange())
            assert response.error_code == 58
    finally:
        admin.close()


def test_alter_refuses_out_of_range_iterations_and_missing_deletions(sasl_broker, ca):
    admin = KafkaAdminClient(bootstrap_servers=sasl_broker.bootstrap_servers_for("SASL_PLAINTEXT"),
                             **_kafka_python("SASL_PLAINTEXT", "SCRAM-SHA-256", ca))
    try:
        errors = admin.alter_user_scram_credentials([
            UserScramCredentialUpsertion("erin", ScramMechanism.SCRAM_SHA_256, "pw", iterations=1000),
            UserScramCredentialDeletion("frank", ScramMechanism.SCRAM_SHA_256)])
        assert "1000" in str(errors["erin"]) and "does not exist" in str(errors["frank"])
    finally:
        admin.close()


def test_credentials_survive_a_restart(ca, tmp_path):
    config = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0"}
    with Broker(tmp_path, config=config, add_scram=["SCRAM-SHA-256=[name=gina,password=gina-secret]"]):
        pass
    with Broker(tmp_path, config=config) as broker:
        with WireClient(broker.bootstrap_servers) as client:
            response = _authenticate(client, "SCRAM-SHA-256",
                                     sasl.SaslLogin("SCRAM-SHA-256", "gina", "gina-secret").exchange())
            assert response.error_code == 0


# --- re-authentication (KIP-368) -------------------------------------------------------------------

def test_sessions_expire_and_can_be_renewed_on_the_same_connection(tmp_path):
    """With connections.max.reauth.ms, SaslAuthenticate tells the session lifetime; re-authenticating as the
    same user renews it, as another user is refused, and an expired session's next request closes it."""
    lifetime_s = 2.0
    config = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "connections.max.reauth.ms": str(int(lifetime_s * 1000))}
    scram = ["SCRAM-SHA-256=[name=hana,password=hana-secret]", "SCRAM-SHA-256=[name=ivan,password=ivan-secret]"]
    metadata = MetadataRequest[12](topics=None, allow_auto_topic_creation=False,
                                   include_topic_authorized_operations=False)

    def sleep_until(moment: float) -> None:
        time.sleep(max(0.0, moment - time.monotonic()))

    with Broker(tmp_path, config=config, add_scram=scram) as broker:
        with WireClient(broker.bootstrap_servers) as client:
            response = _authenticate(client, "SCRAM-SHA-256",
                                     sasl.SaslLogin("SCRAM-SHA-256", "hana", "hana-secret").exchange())
            first_ends_by = time.monotonic() + response.session_lifetime_ms / 1000   # the broker's clock began earlier
            assert 0 < response.session_lifetime_ms <= lifetime_s * 1000
            sleep_until(first_ends_by - lifetime_s / 2)
            renewing = time.monotonic()
            renewed = _authenticate(client, "SCRAM-SHA-256",
                                    sasl.SaslLogin("SCRAM-SHA-256", "hana", "hana-secret").exchange())
            assert renewed.error_code == 0 and renewed.session_lifetime_ms > lifetime_s * 1000 * 0.5
            renewed_lasts_until = renewing + renewed.session_lifetime_ms / 1000   # the broker's clock began later
            renewed_ends_by = time.monotonic() + renewed.session_lifetime_ms / 1000
            sleep_until(first_ends_by + 0.05)   # measured: past the first session's end ...
            assert time.monotonic() < renewed_lasts_until - 0.05, "renewal too late to test the renewed session"
            assert client.call(metadata).brokers   # ... inside the renewed one
            sleep_until(renewed_ends_by + 0.05)
            with pytest.raises(ConnectionClosed):   # past the renewed session's end: the next request closes it
                client.call(metadata)
        with WireClient(broker.bootstrap_servers) as client:
            assert _authenticate(client, "SCRAM-SHA-256",
                                 sasl.SaslLogin("SCRAM-SHA-256", "hana", "hana-secret").exchange()).error_code == 0
            other = _authenticate(client, "SCRAM-SHA-256",
                                  sasl.SaslLogin("SCRAM-SHA-256", "ivan", "ivan-secret").exchange())
            assert other.error_code == 58 and "change principals" in other.error_message


# --- configuration -------------------------------------------------------------------------------

def test_plain_without_users_fails_the_start_naming_the_config(tmp_path):
    with pytest.raises(ConfigError, match="listener.name.sasl_plaintext.plain.sasl.jaas.config"):
        Broker(tmp_path, config={"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN"})


def test_unsupported_mechanisms_fail_the_start(tmp_path):
    with pytest.raises(ConfigError, match="GSSAPI"):
        Broker(tmp_path, config={"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "GSSAPI"})


def test_add_scram_syntax():
    user, mechanism, credential = parse_add_scram('SCRAM-SHA-512=[name=admin,password="a,b=c",iterations=8192]')
    assert (user, mechanism, credential.iterations) == ("admin", "SCRAM-SHA-512", 8192)
    assert ScramCredential.from_text(credential.to_text()) == credential
    for bad in ("SCRAM-SHA-1=[name=a,password=b]", "SCRAM-SHA-256=[password=b]",
                "SCRAM-SHA-256=[name=a,password=b,iterations=10]", "SCRAM-SHA-256 name=a"):
        with pytest.raises(CredentialError):
            parse_add_scram(bad)


def test_jaas_parsing_reads_kafkas_syntax():
    module, options = sasl.parse_jaas(PLAIN_JAAS)
    assert module.endswith("PlainLoginModule") and options["user_alice"] == "alice-secret"
    assert sasl.jaas_credentials('org.apache.kafka.common.security.scram.ScramLoginModule required '
                                 'username="u" password="p\\"q";')[1:] == ("u", 'p"q')
    with pytest.raises(ConfigError):
        sasl.parse_jaas("not a jaas string")


def test_scram_credential_matches_rfc_7677_vector():
    """RFC 7677's SCRAM-SHA-256 example: user 'user', password 'pencil', salt W22ZaJ0SNY7soEsUEjb6gQ==, 4096."""
    credential = ScramCredential.generate("SCRAM-SHA-256", "pencil", 4096,
                                          base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="))
    listener = sasl.SaslListener("L", ("SCRAM-SHA-256",), {}, _OneUser("user", credential), 0, 0)
    server = sasl.ScramServer(listener, "SCRAM-SHA-256")
    server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    server._nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"  # the RFC's server nonce
    server._server_first = f"r={server._nonce},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    final = server.evaluate(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                            b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.user == "user"


class _OneUser:
    def __init__(self, name, credential):
        self.name, self.credential = name, credential

    def get(self, entity_type, name):
        return {"SCRAM-SHA-256": self.credential.to_text()} if name == self.name else {}


def test_a_big_frame_before_authentication_closes_the_connection(sasl_broker):
    """sasl.server.max.receive.size (512 KB): an unauthenticated client cannot make the broker hold a 100 MB
    request (socket.request.max.bytes); after authentication the usual limit applies again.
    Mutation: the SASL limit not applied -> the broker waits for the 50 MB body instead of closing."""
    with WireClient(sasl_broker.bootstrap_servers_for("SASL_PLAINTEXT")) as client:
        client.send_bytes((50 * 1024 * 1024).to_bytes(4, "big") + b"\x00" * 64)
        assert client.is_closed_by_peer(timeout=5)
    with WireClient(sasl_broker.bootstrap_servers_for("SASL_PLAINTEXT")) as client:
        login = sasl.SaslLogin("SCRAM-SHA-256", "bob", "bob-secret")
        response = _authenticate(client, "SCRAM-SHA-256", login.exchange())
        assert response.error_code == 0
        named = MetadataRequest.MetadataRequestTopic(name="x" * 200, topic_id=None)
        big = client.call(MetadataRequest[12](topics=[named] * 3000, allow_auto_topic_creation=False,
                                              include_topic_authorized_operations=False))
        assert len(big.topics) == 3000  # a ~600 KB request, over the pre-authentication limit, is served
