"""A secured broker's Schema Registry: https with the broker's PEM keystore, HTTP Basic against its PLAIN and
SCRAM users, and ACLs on subjects and on the registry's global config and mode (denied by default)."""
from __future__ import annotations

import base64
import io
import json
import socket
import ssl
import urllib.error
import urllib.request

import pytest

pytest.importorskip("cryptography")

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient  # noqa: E402
from confluent_kafka.schema_registry.error import SchemaRegistryError  # noqa: E402

from broker_sim.local.certificates import CertificateAuthority  # noqa: E402
from broker_sim.server.broker import Broker  # noqa: E402
from broker_sim.tools.cli import main as pylog_main  # noqa: E402
from registry_process import http  # noqa: E402

ADMIN, ADMIN_PASSWORD = "admin", "admin-secret"
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
SCHEMA = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "string"}]})


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    directory = tmp_path_factory.mktemp("registry-secured")
    ca = CertificateAuthority(directory / "ca")
    config = {"listeners": "SASL_SSL://127.0.0.1:0", "ssl.keystore.location": ca.issue("broker").keystore,
              "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
              "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
              "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": f"User:{ADMIN}",
              "schema.registry.listeners": "https://127.0.0.1:0"}
    scram = ["SCRAM-SHA-256=[name=bob,password=bob-secret]", f"SCRAM-SHA-512=[name={ADMIN},password={ADMIN_PASSWORD}]"]
    broker = Broker(directory / "data", config=config, add_scram=scram).start()
    admin_properties = directory / "admin.properties"
    admin_properties.write_text(f"security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.username={ADMIN}\n"
                                f"sasl.password={ADMIN_PASSWORD}\nssl.ca.location={ca.truststore}\n")
    broker.ca_file = ca.truststore
    broker.admin_properties = str(admin_properties)
    yield broker
    broker.stop()


def client(broker, user: str, password: str) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": broker.schema_registry_url, "ssl.ca.location": broker.ca_file,
                                 "basic.auth.user.info": f"{user}:{password}", "max.retries": 0})


def request(broker, method: str, path: str, body: dict | None = None, user: str | None = None,
            password: str = "") -> tuple[int, dict]:
    headers = {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()} if user else {}
    context = ssl.create_default_context(cafile=broker.ca_file)
    status, raw = http(method, broker.schema_registry_url + path,
                       json.dumps(body).encode() if body is not None else None, headers, context=context)
    return status, json.loads(raw) if raw else {}


def acls(broker, *args: str) -> None:
    out = io.StringIO()
    assert pylog_main(["--bootstrap-server", broker.bootstrap_servers, "--command-config", broker.admin_properties,
                       "acls", *args], stdout=out, stderr=out) == 0, out.getvalue()


def test_https_with_the_brokers_certificate_and_basic_auth_of_a_super_user(secured):
    assert secured.schema_registry_url.startswith("https://127.0.0.1:")
    schema_id = client(secured, ADMIN, ADMIN_PASSWORD).register_schema("admin-value", Schema(SCHEMA, "AVRO"))
    # stored as Confluent stores it: the canonical form (compact, Java's Schema.toString)
    assert client(secured, ADMIN, ADMIN_PASSWORD).get_schema(schema_id).schema_str == json.dumps(
        json.loads(SCHEMA), separators=(",", ":"))
    port = int(secured.schema_registry_url.rsplit(":", 1)[1])
    with pytest.raises(ssl.SSLError):  # the broker's certificate, from the broker's CA only
        ssl.create_default_context().wrap_socket(socket.create_connection(("127.0.0.1", port)),
                                                 server_hostname="127.0.0.1")


def test_no_or_wrong_credentials_get_401_with_confluents_body_and_are_counted(secured):
    failed = secured.schema_registry.authenticator.failures
    context = ssl.create_default_context(cafile=secured.ca_file)
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(secured.schema_registry_url + "/subjects", context=context, timeout=10)
    assert missing.value.code == 401
    assert missing.value.headers["WWW-Authenticate"].startswith("Basic realm=")
    assert json.loads(missing.value.read())["error_code"] == 40101
    for user, password in (("alice", "wrong"), ("bob", "wrong"), ("nobody", "x"), (ADMIN, "")):
        status, body = request(secured, "GET", "/subjects", user=user, password=password)
        assert (status, body["error_code"]) == (401, 40101), (user, body)
    with pytest.raises(SchemaRegistryError) as refused:
        client(secured, "bob", "not-bob").get_subjects()
    assert refused.value.http_status_code == 401
    assert secured.schema_registry.authenticator.failures >= failed + 6
    exposition = secured.metrics.exposition().decode()
    counted = [line for line in exposition.splitlines()
               if line.startswith("pylog_schema_registry_failed_authentication_total ")]
    assert counted and float(counted[0].split()[1]) >= failed + 6


def test_plain_and_scram_users_authenticate_and_are_denied_by_default(secured):
    for user, password in (("alice", "alice-secret"), ("bob", "bob-secret")):
        status, body = request(secured, "POST", "/subjects/default-value/versions", {"schema": SCHEMA},
                               user=user, password=password)
        assert (status, body["error_code"]) == (403, 40301), body
        status, body = request(secured, "GET", "/config", user=user, password=password)
        assert (status, body["error_code"]) == (403, 40301), body
        status, body = request(secured, "GET", "/schemas/types", user=user, password=password)
        assert status == 200  # no resource: any authenticated principal


def test_subject_acls_allow_and_deny_per_subject_and_prefix(secured):
    acls(secured, "add", "--allow-principal", "User:alice", "--operation", "WRITE", "--operation", "READ",
         "--subject", "alice-", "--resource-pattern-type", "prefixed")
    acls(secured, "add", "--deny-principal", "User:alice", "--operation", "WRITE", "--subject", "alice-frozen-value")
    acls(secured, "add", "--allow-principal", "User:bob", "--operation", "READ", "--subject", "alice-shared-value")
    alice = client(secured, "alice", "alice-secret")
    shared = alice.register_schema("alice-shared-value", Schema(SCHEMA, "AVRO"))
    assert client(secured, "bob", "bob-secret").get_latest_version("alice-shared-value").schema_id == shared
    for subject in ("alice-frozen-value", "bob-value"):
        with pytest.raises(SchemaRegistryError) as denied:
            alice.register_schema(subject, Schema(SCHEMA, "AVRO"))
        assert (denied.value.http_status_code, denied.value.error_code) == (403, 40301), subject
    with pytest.raises(SchemaRegistryError) as denied:  # bob may read, not write
        client(secured, "bob", "bob-secret").register_schema("alice-shared-value", Schema(SCHEMA, "AVRO"))
    assert denied.value.http_status_code == 403
    # the listing shows only what the principal may see
    listed = request(secured, "GET", "/subjects", user="bob", password="bob-secret")[1]
    assert "alice-shared-value" in listed and "admin-value" not in listed
    rows = io.StringIO()
    assert pylog_main(["--bootstrap-server", secured.bootstrap_servers, "--command-config", secured.admin_properties,
                       "acls", "list", "--subject", "alice-", "--format", "json"], stdout=rows) == 0
    assert any(r["resource_type"] == "SUBJECT" and r["pattern_type"] == "PREFIXED" for r in json.loads(rows.getvalue()))


def test_registry_acls_guard_the_global_config_and_mode(secured):
    status, _ = request(secured, "GET", "/config", user="bob", password="bob-secret")
    assert status == 403
    acls(secured, "add", "--allow-principal", "User:bob", "--operation", "DESCRIBE_CONFIGS", "--registry")
    status, body = request(secured, "GET", "/config", user="bob", password="bob-secret")
    assert status == 200 and body["compatibilityLevel"] == "BACKWARD"
    status, _ = request(secured, "GET", "/mode", user="bob", password="bob-secret")
    assert status == 200
    status, body = request(secured, "PUT", "/config", {"compatibility": "NONE"}, user="bob", password="bob-secret")
    assert (status, body["error_code"]) == (403, 40301)
    status, body = request(secured, "PUT", "/mode", {"mode": "READONLY"}, user="bob", password="bob-secret")
    assert (status, body["error_code"]) == (403, 40301)
    acls(secured, "add", "--allow-principal", "User:bob", "--operation", "ALTER_CONFIGS", "--registry")
    status, body = request(secured, "PUT", "/config", {"compatibility": "FULL"}, user="bob", password="bob-secret")
    assert (status, body) == (200, {"compatibility": "FULL"})
    acls(secured, "remove", "--allow-principal", "User:bob", "--operation", "ALTER_CONFIGS", "--registry")
    status, _ = request(secured, "PUT", "/config", {"compatibility": "BACKWARD"}, user="bob", password="bob-secret")
    assert status == 403
    status, _ = request(secured, "PUT", "/config", {"compatibility": "BACKWARD"}, user=ADMIN, password=ADMIN_PASSWORD)
    assert status == 200
