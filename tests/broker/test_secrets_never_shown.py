"""Secrets are never shown (issue 24, item 4): DescribeConfigs (raw and kafka-python), the ``pylog`` and
``pylog-broker`` command lines, the broker's log at DEBUG and /metrics never carry a sensitive value.

Sensitive, as Kafka's PASSWORD-type configs and pylog's ``ConfigDef(sensitive=True)`` rows: ``sasl.jaas.config``
(broker-wide and listener-prefixed: its passwords and PLAIN users' ``user_<name>`` passwords),
``ssl.keystore.key``, ``ssl.key.password``, ``ssl.keystore.certificate.chain``, ``ssl.truststore.certificates``
(broker-wide and listener-prefixed); SCRAM credentials (``--add-scram`` passwords, those set over the wire, the
stored salt and keys); passwords a client tried and failed with; and (no pylog config: refused by name)
``ssl.keystore.password`` / ``ssl.truststore.password``.  Every value is a distinct marker string, looked
for everywhere; the markers of the PEM values are lines of their base64 bodies.
"""
from __future__ import annotations

import contextlib
import io
import logging
import urllib.request

import pytest
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.protocol.admin import (
    DescribeConfigsRequest, DescribeUserScramCredentialsRequest, IncrementalAlterConfigsRequest,
)

from broker_sim.config import BROKER_CONFIGS, ConfigError
from broker_sim.local.certificates import CertificateAuthority
from broker_sim.security.sasl import SaslLogin
from broker_sim.server.broker import Broker
from tests.broker.test_sasl import _authenticate
from tests.integration.kafka_wire import WireClient
from tests.tools.test_cli import pylog

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule required"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule required"
SECRETS = {name: f"S3cret-{name}-7f3a" for name in (  # each looked for without its last 4 characters
    "admin", "alice", "bob", "listener-admin", "key-password", "listener-key-password", "scram-admin",
    "scram-carol", "tried", "cli-typo", "add-scram-typo", "config-typo", "jaas-typo", "dynamic", "client-props")}


def _pem_body(pem: str) -> list[str]:
    """Lines of a PEM's base64 bodies (what would show if the value leaked)."""
    return [line for line in pem.splitlines() if line and not line.startswith("-----") and len(line) > 40][:3]


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    directory = tmp_path_factory.mktemp("secrets-pki")
    ca = CertificateAuthority(directory)
    broker_wide = ca.issue("broker", password=SECRETS["key-password"], file_name="broker")
    listener = ca.issue("broker", password=SECRETS["listener-key-password"], file_name="listener")
    read = {name: open(path).read() for name, path in (
        ("chain", broker_wide.certificate), ("key", broker_wide.key), ("listener-chain", listener.certificate),
        ("listener-key", listener.key), ("ca", ca.truststore))}
    return ca, read


@pytest.fixture(scope="module")
def secured(pki, tmp_path_factory):
    ca, pem = pki
    s = SECRETS
    config = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", "metrics.port": "0",
        "inter.broker.listener.name": "SSL",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:admin",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256", "schema.registry.listeners": "",
        "sasl.jaas.config": f'{PLAIN} username="admin" password="{s["admin"]}" user_admin="{s["admin"]}" '
                            f'user_alice="{s["alice"]}";',
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            f'{PLAIN} username="admin" password="{s["listener-admin"]}" user_admin="{s["listener-admin"]}" '
            f'user_bob="{s["bob"]}";',
        "ssl.keystore.certificate.chain": pem["chain"], "ssl.keystore.key": pem["key"],
        "ssl.key.password": s["key-password"], "ssl.truststore.certificates": pem["ca"],
        "listener.name.ssl.ssl.keystore.certificate.chain": pem["listener-chain"],
        "listener.name.ssl.ssl.keystore.key": pem["listener-key"],
        "listener.name.ssl.ssl.key.password": s["listener-key-password"],
    }
    scram = [f"SCRAM-SHA-256=[name=admin,password={s['scram-admin']}]"]
    return tmp_path_factory.mktemp("secrets-data"), config, scram


class Collected(logging.Handler):
    """Every record of pylog's loggers (``broker_sim.*``: the broker and the tools; kafka-python's own DEBUG log
    of the bytes it sends is not pylog's), formatted with its exception (what a log file would hold)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.startswith("broker_sim"):
            self.lines.append(self.format(record))


def _markers(pem: dict, stored: list[str]) -> dict[str, str]:
    found = {f"password {name}": value[:-4] for name, value in SECRETS.items()}  # a cut-off one leaks too
    for name in ("chain", "key", "listener-chain", "listener-key", "ca"):
        for i, line in enumerate(_pem_body(pem[name])):
            found[f"{name} PEM line {i}"] = line
    for i, text in enumerate(stored):  # SCRAM credentials as stored: salt=...,stored_key=...,server_key=...
        for field in text.split(","):
            key, _, value = field.partition("=")
            if key != "iterations" and len(value) > 8:
                found[f"stored SCRAM {i} {key}"] = value
    return found


def _shown(markers: dict[str, str], where: str, text: str) -> None:
    leaked = sorted(name for name, value in markers.items() if value in text)
    assert not leaked, f"{where} shows {leaked}"


def _login(broker: Broker, user: str, password: str) -> WireClient:
    client = WireClient(broker.bootstrap_servers_for("SASL_PLAINTEXT"))
    _authenticate(client, "PLAIN", SaslLogin("PLAIN", user, password).exchange())
    return client


def _properties(tmp_path, broker: Broker, password: str, name: str = "admin.properties", extra: str = "") -> str:
    path = tmp_path / name
    path.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                    f'sasl.jaas.config={PLAIN} username="admin" password="{password}";\n{extra}')
    return str(path)


class _Bootstrap:
    def __init__(self, address: str) -> None:
        self.bootstrap_servers = address


def test_no_sensitive_value_is_shown_by_describe_configs_the_clis_the_log_or_metrics(secured, pki, tmp_path):
    directory, config, scram = secured
    _, pem = pki
    sensitive = {name for name, row in BROKER_CONFIGS.items() if row.sensitive}
    collected = Collected()
    root = logging.getLogger()
    level = root.level
    root.addHandler(collected)
    root.setLevel(logging.DEBUG)
    texts: dict[str, str] = {}
    try:
        with Broker(directory, config=config, add_scram=scram) as broker:
            sasl = _Bootstrap(broker.bootstrap_servers_for("SASL_PLAINTEXT"))
            admin_properties = _properties(tmp_path, broker, SECRETS["listener-admin"])
            # DescribeConfigs raw: every broker config, with synonyms and documentation, and the listener ones
            with _login(broker, "admin", SECRETS["listener-admin"]) as client:
                resource = DescribeConfigsRequest.DescribeConfigsResource
                for keys in (None, sorted(sensitive) + [k for k in config if k.startswith("listener.name.")]
                             + ["ssl.keystore.password", "ssl.truststore.password"]):
                    described = client.call(DescribeConfigsRequest[4](
                        resources=[resource(resource_type=4, resource_name=str(broker.broker_id),
                                            configuration_keys=keys)],
                        include_synonyms=True, include_documentation=True))
                    texts[f"DescribeConfigs raw keys={keys is not None}"] = repr(described)
                    for entry in described.results[0].configs:
                        if entry.name in sensitive:
                            assert (entry.value, entry.is_sensitive) == (None, True), entry
                            assert all(s.value is None for s in entry.synonyms), entry
                    assert {e.name for e in described.results[0].configs} >= (sensitive if keys is None else set())
                # a dynamic change of a sensitive config (in Kafka's dynamic set: stored, not acted on) is
                # answered without echoing it, and described as a sensitive null afterwards
                Resource = IncrementalAlterConfigsRequest.AlterConfigsResource
                answer = client.call(IncrementalAlterConfigsRequest[1](resources=[Resource(
                    resource_type=4, resource_name=str(broker.broker_id), configs=[Resource.AlterableConfig(
                        name="sasl.jaas.config", config_operation=0,
                        value=f'{PLAIN} username="x" password="{SECRETS["dynamic"]}";')])], validate_only=False))
                texts["IncrementalAlterConfigs answer"] = repr(answer)
                described = client.call(DescribeConfigsRequest[4](
                    resources=[resource(resource_type=4, resource_name=str(broker.broker_id),
                                        configuration_keys=["sasl.jaas.config"])],
                    include_synonyms=True, include_documentation=False))
                texts["DescribeConfigs after the dynamic change"] = repr(described)
                for entry in described.results[0].configs:
                    assert (entry.value, entry.is_sensitive) == (None, True), entry
                    assert all(s.value is None for s in entry.synonyms), entry
                texts["DescribeUserScramCredentials"] = repr(client.call(
                    DescribeUserScramCredentialsRequest[0](users=None)))
            # a failed login with a password that is someone's secret
            with _login(broker, "alice", SECRETS["tried"]):
                pass
            # kafka-python
            admin = KafkaAdminClient(bootstrap_servers=sasl.bootstrap_servers, security_protocol="SASL_PLAINTEXT",
                                     sasl_mechanism="PLAIN", sasl_plain_username="admin",
                                     sasl_plain_password=SECRETS["listener-admin"])
            try:
                texts["kafka-python describe_configs"] = repr(admin.describe_configs(
                    [ConfigResource(ConfigResourceType.BROKER, str(broker.broker_id))]))
            finally:
                admin.close()
            # the pylog command line: users add / list, a bad properties file, a wrong password
            added = pylog(sasl, "--command-config", admin_properties, "users", "add", "carol", "--password",
                          SECRETS["scram-carol"], "--mechanism", "SCRAM-SHA-256")
            assert added.status == 0, added.err
            for fmt in ("text", "json"):
                listed = pylog(sasl, "--command-config", admin_properties, "users", "list", "--format", fmt)
                assert listed.status == 0 and "carol" in listed.out, listed
                texts[f"pylog users list {fmt}"] = listed.out + listed.err
            texts["pylog users add"] = added.out + added.err
            typo = _properties(tmp_path, broker, SECRETS["listener-admin"], "typo.properties",
                               f"sasl.password {SECRETS['cli-typo']}\n")
            bad = pylog(sasl, "--command-config", typo, "users", "list")
            assert bad.status != 0 and "line 4 is not key=value" in bad.err, bad
            texts["pylog with a properties line without ="] = bad.out + bad.err
            jaas_typo = tmp_path / "jaas.properties"
            jaas_typo.write_text(f'security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config={PLAIN} '
                                 f'username="admin" password="{SECRETS["jaas-typo"]} x;\n')  # unterminated
            unparsed = pylog(sasl, "--command-config", str(jaas_typo), "users", "list")
            assert unparsed.status != 0 and "sasl.jaas.config" in unparsed.err, unparsed
            texts["pylog with an unparsable sasl.jaas.config"] = unparsed.out + unparsed.err
            wrong = pylog(sasl, "--connect-timeout-ms", "3000", "--command-config",
                          _properties(tmp_path, broker, SECRETS["client-props"], "wrong"), "users", "list")
            assert wrong.status != 0, wrong
            texts["pylog with a wrong password"] = wrong.out + wrong.err
            with urllib.request.urlopen(f"http://127.0.0.1:{broker.metrics_port}/metrics", timeout=10) as response:
                texts["/metrics"] = response.read().decode()
            assert "kafka_server" in texts["/metrics"] or "pylog_" in texts["/metrics"]
            stored = [text for name, entity in broker.entity_configs.entities("users").items()
                      for mechanism, text in entity.items() if mechanism.startswith("SCRAM")]
            assert len(stored) >= 2, stored  # admin's (--add-scram) and carol's
    finally:
        root.removeHandler(collected)
        root.setLevel(level)
    # the command lines' own refusals of a bad argument
    from broker_sim.server.cli import main as broker_main
    for argv, what in ((["--add-scram", f"SCRAM-SHA-256=[name=x,pasword={SECRETS['add-scram-typo']}]"], "unknown"),
                       (["--add-scram", f"SCRAM-SHA-256=name:x password:{SECRETS['add-scram-typo']}"], "expected"),
                       (["--config", f"ssl.key.password:{SECRETS['config-typo']}"], "not key=value")):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            code = broker_main(["--data-dir", str(tmp_path / "never"), "--port", "0", *argv])
        assert code == 2 and what in err.getvalue(), err.getvalue()
        texts[f"pylog-broker {argv} refused"] = err.getvalue()
    with pytest.raises(ConfigError) as raised:  # a JAAS config that does not parse, holding passwords
        Broker(tmp_path / "bad-jaas", config={**config, "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                                              f'{PLAIN} user_admin="{SECRETS["jaas-typo"]} x;'})  # unterminated
    assert "sasl.jaas.config" in str(raised.value)
    texts["Broker() refusing a bad JAAS config"] = str(raised.value)
    # Kafka's dynamic configs pylog stores without acting on them: sensitive, so the DescribeConfigs checks above
    # answered them as nulls
    assert {"ssl.keystore.password", "ssl.truststore.password"} <= sensitive

    markers = _markers(pem, stored)
    texts["the broker's log at DEBUG"] = "\n".join(collected.lines)
    log = texts["the broker's log at DEBUG"]  # what the check reads did reach it
    assert "credential of user 'admin'" in log and "SASL authentication of" in log, log
    for where, text in texts.items():
        _shown(markers, where, text)
    assert {"sasl.jaas.config", "ssl.keystore.key", "ssl.key.password", "ssl.keystore.certificate.chain",
            "ssl.truststore.certificates"} <= sensitive
