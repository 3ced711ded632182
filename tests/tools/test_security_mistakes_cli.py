"""A ``pylog`` command with the wrong security settings fails within its connect timeout, naming the cause and the
``--command-config`` property to change, instead of "cannot connect ... check --bootstrap-server"."""
import time

import pytest

from tests.tools.test_cli import pylog

TIMEOUT_MS = 10_000  # --connect-timeout-ms's default: kafka-python's clients give up only then
GOOD = ("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.username=admin\n"
        "sasl.password=admin-secret\nssl.truststore.location={ca}\n")


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    from broker_sim.testing.secured import SecuredBroker

    with SecuredBroker(tmp_path_factory.mktemp("tools-mistakes")) as broker:
        yield broker


def _topics_list(secured, tmp_path, properties: str):
    path = tmp_path / "client.properties"
    path.write_text(properties.format(ca=secured.ca_file))
    started = time.monotonic()
    result = pylog(secured, "--command-config", str(path), "topics", "list")
    return result, time.monotonic() - started


@pytest.mark.parametrize("properties, expected", [
    ("", ["is a SASL_SSL listener", "security.protocol=PLAINTEXT", "set security.protocol=SASL_SSL",
          "ssl.truststore.location", "sasl.jaas.config", "--command-config"]),
    (GOOD.replace("SASL_SSL", "SASL_PLAINTEXT"), ["is a SASL_SSL listener", "set security.protocol=SASL_SSL"]),
    (GOOD.replace("ssl.truststore.location={ca}\n", ""),
     ["TLS handshake", "not signed by a CA this client trusts", "ssl.truststore.location"]),
    (GOOD.replace("SCRAM-SHA-512", "PLAIN"),
     ["does not enable SASL mechanism PLAIN", "SCRAM-SHA-256, SCRAM-SHA-512", "sasl.mechanism"]),
    (GOOD.replace("admin-secret", "wrong"), ["SASL SCRAM-SHA-512 login of user 'admin'", "sasl.jaas.config"]),
], ids=["plaintext", "sasl-plaintext", "no-ca", "mechanism", "password"])
def test_a_security_mistake_fails_at_once_with_its_cause(secured, tmp_path, properties, expected):
    result, took = _topics_list(secured, tmp_path, properties)
    assert result.status == 1, result.out
    assert took < TIMEOUT_MS / 1000 / 2, f"took {took:.1f} s: {result.err}"
    for words in expected:
        assert words in result.err, result.err
    assert "check --bootstrap-server" not in result.err


def test_the_right_settings_still_work(secured, tmp_path):
    result, _ = _topics_list(secured, tmp_path, GOOD)
    assert result.status == 0, result.err


def test_tls_to_a_plaintext_broker_is_told_it_is_plaintext(pylog_broker, secured, tmp_path):
    path = tmp_path / "client.properties"
    path.write_text(GOOD.format(ca=secured.ca_file))
    result = pylog(pylog_broker, "--command-config", str(path), "topics", "list")
    assert result.status == 1 and "is a PLAINTEXT listener" in result.err, result.err
    assert "set security.protocol=PLAINTEXT" in result.err


@pytest.mark.parametrize("argv, needs, grant", [
    (["produce", "tm-topic", "--value", "v"], "WRITE on TOPIC tm-topic", "--operation WRITE --topic tm-topic"),
    (["topics", "describe", "tm-topic"], "DESCRIBE on TOPIC tm-topic", "--operation DESCRIBE --topic tm-topic"),
    (["groups", "describe", "tm-group"], "DESCRIBE on GROUP tm-group", "--operation DESCRIBE --group tm-group"),
    (["acls", "list"], "DESCRIBE on the CLUSTER", "--operation DESCRIBE --cluster"),
], ids=["produce", "topics-describe", "groups-describe", "acls-list"])
def test_an_authorization_failure_names_the_principal_and_the_acl_to_grant(secured, tmp_path, argv, needs, grant):
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError

    admin = KafkaAdminClient(**secured.kafka_python())
    try:
        admin.create_topics([NewTopic("tm-topic", 1, 1)])
    except TopicAlreadyExistsError:
        pass
    finally:
        admin.close()
    secured.add_user("nobody", "nobody-secret")
    path = tmp_path / "nobody.properties"
    path.write_text(GOOD.replace("username=admin", "username=nobody").replace("sasl.username=admin",
                                                                              "sasl.username=nobody")
                    .replace("admin-secret", "nobody-secret").format(ca=secured.ca_file))
    result = pylog(secured, "--command-config", str(path), *argv)
    assert result.status == 1
    assert f"User:nobody needs {needs}" in result.err, result.err
    assert f"pylog acls add --allow-principal User:nobody {grant}" in result.err, result.err
