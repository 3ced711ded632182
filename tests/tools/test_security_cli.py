"""``pylog users``, ``pylog acls`` and ``--command-config`` against a secured broker (SASL_SSL, ACLs enforced)."""
import json

from tests.tools.test_cli import pylog

ADMIN_PROPERTIES = """# what kafka-acls.sh --command-config takes
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\
    username="admin" password="admin-secret";
ssl.truststore.location={ca}
ssl.truststore.type=PEM
"""


def _config(tmp_path, secured, text=ADMIN_PROPERTIES):
    path = tmp_path / "client.properties"
    path.write_text(text.format(ca=secured.ca_file))
    return str(path)


def test_users_and_acls_round_trip_through_the_command_line(pylog_secured_broker, tmp_path):
    secured = pylog_secured_broker
    admin = _config(tmp_path, secured)
    added = pylog(secured, "--command-config", admin, "users", "add", "alice", "--password", "alice-secret",
                  "--iterations", "8192")
    assert added.status == 0, added.err
    listed = pylog(secured, "--command-config", admin, "users", "list", "--format", "json")
    assert {"user": "alice", "mechanism": "SCRAM-SHA-512", "iterations": 8192} in json.loads(listed.out)

    acl = pylog(secured, "--command-config", admin, "acls", "add", "--allow-principal", "User:alice",
                "--operation", "read", "--operation", "DESCRIBE", "--topic", "events-", "--resource-pattern-type",
                "prefixed")
    assert acl.status == 0, acl.err
    rows = json.loads(pylog(secured, "--command-config", admin, "acls", "list", "--principal", "User:alice",
                            "--format", "json").out)
    assert {(r["operation"], r["pattern_type"], r["name"]) for r in rows} == {
        ("READ", "PREFIXED", "events-"), ("DESCRIBE", "PREFIXED", "events-")}

    # alice's own properties file: she may list topics, but not manage ACLs
    alice = tmp_path / "alice.properties"
    alice.write_text(f"security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.username=alice\n"
                     f"sasl.password=alice-secret\nssl.ca.location={secured.ca_file}\n")
    refused = pylog(secured, "--command-config", str(alice), "acls", "list")
    assert refused.status == 1 and "ClusterAuthorizationFailed" in refused.err

    removed = pylog(secured, "--command-config", admin, "acls", "remove", "--allow-principal", "User:alice",
                    "--operation", "READ", "--topic", "events-", "--resource-pattern-type", "prefixed")
    assert removed.status == 0 and "READ" in removed.out
    assert pylog(secured, "--command-config", admin, "users", "remove", "alice").status == 0
    assert "alice" not in pylog(secured, "--command-config", admin, "users", "list").out


def test_a_bad_command_config_names_the_file_and_the_problem(pylog_secured_broker, tmp_path):
    secured = pylog_secured_broker
    bad = _config(tmp_path, secured, "security.protocol=SASL_SSL\nthis line has no separator\n")
    result = pylog(secured, "--command-config", bad, "users", "list")
    assert result.status == 1 and "line 2 is not key=value" in result.err
    unknown = _config(tmp_path, secured, "sasl.kerberos.service.name=kafka\n")
    assert "sasl.kerberos.service.name is not a client setting" in pylog(
        secured, "--command-config", unknown, "users", "list").err
    missing = pylog(secured, "--command-config", str(tmp_path / "nope.properties"), "users", "list")
    assert missing.status == 1 and "cannot read it" in missing.err


def test_quotas_set_and_describe(pylog_broker):
    assert pylog(pylog_broker, "quotas", "set", "--client-id", "etl", "--producer-byte-rate", "1048576").status == 0
    assert pylog(pylog_broker, "quotas", "set", "--user-default", "--request-percentage", "25").status == 0
    rows = json.loads(pylog(pylog_broker, "quotas", "describe", "--format", "json").out)
    assert {"user": "", "client_id": "etl", "producer_byte_rate": 1048576.0} in rows
    assert {"user": "<default>", "client_id": "", "request_percentage": 25.0} in rows
    text = pylog(pylog_broker, "quotas", "describe", "--client-id", "etl").out
    assert "etl" in text and "1048576" in text
    assert pylog(pylog_broker, "quotas", "set", "--client-id", "etl", "--remove", "producer_byte_rate").status == 0
    assert "etl" not in pylog(pylog_broker, "quotas", "describe").out
    refused = pylog(pylog_broker, "quotas", "set", "--client-id", "etl", "--producer-byte-rate", "-1")
    assert refused.status == 1 and "positive" in refused.err
    assert pylog(pylog_broker, "quotas", "set", "--producer-byte-rate", "5").status == 1  # no entity named
