"""``pylog schemas`` against a broker serving the Schema Registry.

The tool speaks only Confluent's REST API, so these tests run the real command line (in-process through
``main`` for most, one subprocess for the installed entry point, the environment default and exit codes)
against a fresh broker with ``schema.registry.listeners``: ids and versions are exact.
"""
import contextlib
import io
import json
import os
import subprocess
import sys

import pytest

from broker_sim.tools.cli import main


from schema_samples import CUSTOMER, INCOMPATIBLE, ORDER, V1, V2

PROTO = 'syntax = "proto3";\npackage acme;\n\nmessage Ping {\n  int64 id = 1;\n}\n'
JSON_SCHEMA = json.dumps({"title": "Ping", "type": "object", "properties": {"id": {"type": "integer"}}})


class Result:
    def __init__(self, status: int, out: str, err: str):
        self.status, self.out, self.err = status, out, err

    @property
    def json(self):
        return json.loads(self.out)


@pytest.fixture
def url(pylog_schema_registry_url):
    return pylog_schema_registry_url


@pytest.fixture
def files(tmp_path):
    """Write schema files: ``files("v1.avsc", V1)`` -> its path."""
    def write(name: str, text: str) -> str:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return str(path)
    return write


def pylog(url: str, *argv: str) -> Result:
    """``pylog schemas ACTION --url URL ARGS...`` in-process; usage errors give status 2 (argparse's message,
    written to sys.stderr, is captured too)."""
    action, *rest = argv
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            status = main(["schemas", action, "--url", url, *rest], stdout=out, stderr=err)
    except SystemExit as exc:
        status = exc.code
    return Result(status, out.getvalue(), err.getvalue())


def test_register_get_and_list(url, files):
    v1, v2 = files("v1.avsc", V1), files("v2.avsc", V2)
    assert pylog(url, "register", "events-value", "--schema-file", v1).json["id"] == 1
    assert pylog(url, "register", "events-value", "--schema-file", v1).json["id"] == 1   # identical: same id
    assert pylog(url, "register", "events-value", "--schema-file", v2).json["id"] == 2
    assert pylog(url, "register", "pings-value", "--schema-file", files("ping.proto", PROTO)).json["id"] == 3
    assert pylog(url, "register", "pongs-value", "--schema-file", files("pong.schema", JSON_SCHEMA),
                 "--type", "json").json["id"] == 4

    latest = pylog(url, "get", "events-value").json
    assert {k: latest[k] for k in ("subject", "version", "id", "schema")} == {
        "subject": "events-value", "version": 2, "id": 2, "schema": V2}
    first = pylog(url, "get", "events-value", "--version", "1").json
    assert (first["version"], first["id"], first["schema"]) == (1, 1, V1)
    assert pylog(url, "get", "--id", "3").json["schemaType"] == "PROTOBUF"
    assert pylog(url, "get", "--id", "4").json["schemaType"] == "JSON"
    assert pylog(url, "get", "--id", "1").json["schema"] == V1

    listing = pylog(url, "list")
    assert listing.status == 0
    assert listing.out.splitlines() == [
        "SUBJECT       VERSIONS  LATEST  ID  TYPE",
        "events-value  1,2       2       2   AVRO",
        "pings-value   1         1       3   PROTOBUF",
        "pongs-value   1         1       4   JSON",
    ]
    assert pylog(url, "list", "--prefix", "p", "--format", "json").json == [
        {"subject": "pings-value", "versions": [1], "latest_version": 1, "id": 3, "schema_type": "PROTOBUF",
         "deleted": False},
        {"subject": "pongs-value", "versions": [1], "latest_version": 1, "id": 4, "schema_type": "JSON",
         "deleted": False},
    ]


def test_compat_exit_status_says_whether_a_schema_fits(url, files):
    pylog(url, "register", "events-value", "--schema-file", files("v1.avsc", V1))
    fits = pylog(url, "compat", "events-value", "--schema-file", files("v2.avsc", V2))
    assert (fits.status, fits.json["is_compatible"]) == (0, True)
    misfit = pylog(url, "compat", "events-value", "--schema-file", files("bad.avsc", INCOMPATIBLE), "--verbose")
    assert (misfit.status, misfit.json["is_compatible"]) == (1, False)
    assert misfit.json["messages"][0] == (
        "{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'owner' at path '/fields/1' in the "
        "new schema has no default value and is missing in the old schema', additionalInfo:'owner'}")
    assert misfit.json["messages"][1:2] == ["{oldSchemaVersion: 1}"]
    assert pylog(url, "compat", "events-value", "--schema-file", files("bad.avsc", INCOMPATIBLE),
                 "--version", "1").status == 1
    refused = pylog(url, "register", "events-value", "--schema-file", files("bad.avsc", INCOMPATIBLE))
    assert refused.status == 2
    assert refused.err.startswith('pylog: error: 40901 Schema being registered is incompatible with an earlier '
                                  'schema for subject "events-value"')
    # as Confluent's CompatibilityResource: a version of a subject that does not exist is a version not found
    assert pylog(url, "compat", "nope", "--schema-file", files("v1.avsc", V1), "--version", "1").err == \
        "pylog: error: 40402 Version 1 not found.\n"


def test_registry_errors_print_code_and_message_and_exit_2(url, files):
    missing = pylog(url, "get", "nope")
    assert (missing.status, missing.out, missing.err) == (2, "", "pylog: error: 40401 Subject 'nope' not found.\n")
    pylog(url, "register", "events-value", "--schema-file", files("v1.avsc", V1))
    assert pylog(url, "get", "events-value", "--version", "9").err == "pylog: error: 40402 Version 9 not found.\n"
    assert pylog(url, "get", "--id", "42").err == "pylog: error: 40403 Schema 42 not found\n"
    invalid = pylog(url, "register", "events-value", "--schema-file", files("bad.avsc", '{"type": "recrod"}'))
    assert invalid.status == 2 and invalid.err.startswith("pylog: error: 42201 ")
    unreadable = pylog(url, "register", "events-value", "--schema-file", "/nonexistent/x.avsc")
    assert (unreadable.status, unreadable.err) == (
        2, "pylog: error: --schema-file /nonexistent/x.avsc: cannot read it: No such file or directory\n")
    usage = pylog(url, "get", "events-value", "--version", "0")
    assert usage.status == 2 and "expected a version number >= 1 or 'latest'" in usage.err


def test_delete_soft_then_permanent(url, files):
    pylog(url, "register", "events-value", "--schema-file", files("v1.avsc", V1))
    pylog(url, "register", "events-value", "--schema-file", files("v2.avsc", V2))
    assert pylog(url, "delete", "events-value", "--version", "1").json == 1
    assert pylog(url, "list", "--format", "json").json[0]["versions"] == [2]
    assert pylog(url, "list", "--deleted", "--format", "json").json[0]["versions"] == [1, 2]
    assert pylog(url, "delete", "events-value", "--version", "1", "--permanent").json == 1
    assert pylog(url, "delete", "events-value", "--permanent").err == (
        "pylog: error: 40405 Subject 'events-value' was not deleted first before being permanently deleted\n")
    assert pylog(url, "delete", "events-value").json == [2]
    assert pylog(url, "list").out.splitlines() == ["SUBJECT  VERSIONS  LATEST  ID  TYPE"]
    assert pylog(url, "list", "--deleted").out.splitlines() == [
        "SUBJECT       VERSIONS  LATEST  ID  TYPE  DELETED",
        "events-value  2         2       2   AVRO  yes",
    ]
    assert pylog(url, "delete", "events-value", "--permanent").json == [2]
    assert pylog(url, "list", "--deleted", "--format", "json").json == []


def test_config_show_set_delete(url, files):
    pylog(url, "register", "events-value", "--schema-file", files("v1.avsc", V1))
    assert pylog(url, "config").json == {"compatibilityLevel": "BACKWARD"}
    assert pylog(url, "config", "events-value").json == {"compatibilityLevel": "BACKWARD"}   # the global one
    assert pylog(url, "config", "events-value", "--set", "none").json == {"compatibility": "NONE"}
    assert pylog(url, "config", "events-value").json == {"compatibilityLevel": "NONE"}
    assert pylog(url, "register", "events-value", "--schema-file", files("bad.avsc", INCOMPATIBLE)).json["id"] == 2
    assert pylog(url, "config", "events-value", "--delete").json == {"compatibilityLevel": "NONE"}
    assert pylog(url, "config", "events-value").json == {"compatibilityLevel": "BACKWARD"}
    assert pylog(url, "config", "--set", "FULL_TRANSITIVE").json == {"compatibility": "FULL_TRANSITIVE"}
    assert pylog(url, "config").json == {"compatibilityLevel": "FULL_TRANSITIVE"}
    assert pylog(url, "config", "--set", "SIDEWAYS").status == 2   # argparse: not a level


def test_mode_show_set_delete(url, files):
    v1 = files("v1.avsc", V1)
    pylog(url, "register", "events-value", "--schema-file", v1)
    assert pylog(url, "mode").json == {"mode": "READWRITE"}
    assert pylog(url, "mode", "events-value", "--set", "readonly").json == {"mode": "READONLY"}
    assert pylog(url, "mode", "events-value").json == {"mode": "READONLY"}
    refused = pylog(url, "register", "events-value", "--schema-file", files("v2.avsc", V2))
    assert refused.status == 2 and refused.err.startswith("pylog: error: 42205 ")
    assert pylog(url, "mode", "events-value", "--delete").json == {"mode": "READONLY"}
    assert pylog(url, "register", "events-value", "--schema-file", files("v2.avsc", V2)).json["id"] == 2
    assert pylog(url, "mode", "--set", "IMPORT").err.startswith("pylog: error: 42205 ")
    assert pylog(url, "mode", "--set", "IMPORT", "--force").json == {"mode": "IMPORT"}
    assert pylog(url, "mode", "--set", "READWRITE").json == {"mode": "READWRITE"}
    assert pylog(url, "mode", "--delete").err == \
        "pylog: error: mode --delete needs a SUBJECT (the global mode can only be --set)\n"


def test_references_and_normalize(url, files):
    assert pylog(url, "register", "customer-value", "--schema-file", files("customer.avsc", CUSTOMER)).json["id"] == 1
    order = files("order.avsc", ORDER)
    assert pylog(url, "register", "order-value", "--schema-file", order).err.startswith("pylog: error: 42201 ")
    assert pylog(url, "register", "order-value", "--schema-file", order,
                 "--reference", "com.acme.Customer=customer-value:1").json["id"] == 2
    assert pylog(url, "get", "order-value").json["references"] == [
        {"name": "com.acme.Customer", "subject": "customer-value", "version": 1}]
    assert pylog(url, "compat", "order-value", "--schema-file", order,
                 "--reference", "com.acme.Customer=customer-value:1").status == 0
    # normalize orders Protobuf fields by number: the two files are one schema then, two without it
    shuffled = files("shuffled.proto", 'syntax = "proto3"; package acme;\n'
                                       'message Ping { string note = 2; int64 id = 1; }')
    in_order = files("in-order.proto", 'syntax = "proto3"; package acme;\n'
                                       'message Ping { int64 id = 1; string note = 2; }')
    assert pylog(url, "register", "pings-value", "--schema-file", shuffled, "--normalize").json["id"] == 3
    assert pylog(url, "register", "pings-value", "--schema-file", in_order, "--normalize").json["id"] == 3
    assert pylog(url, "list", "--prefix", "pings", "--format", "json").json[0]["versions"] == [1]
    assert pylog(url, "register", "pongs-value", "--schema-file", shuffled).json["id"] == 4


def test_command_config_and_environment(url, files, tmp_path):
    config = tmp_path / "registry.properties"
    config.write_text("# the registry client's names, as in confluent-kafka\n"
                      "schema.registry.basic.auth.user.info=alice:alice-secret\n"
                      "security.protocol=SASL_SSL\n", encoding="utf-8")
    pylog(url, "register", "events-value", "--schema-file", files("v1.avsc", V1))
    # an unsecured registry ignores the credentials; the file is read and the Kafka settings skipped
    assert pylog(url, "list", "--command-config", str(config), "--format", "json").json[0]["id"] == 1
    config.write_text("schema.registry.url.typo=1\n", encoding="utf-8")
    bad = pylog(url, "list", "--command-config", str(config))
    assert bad.status == 2 and bad.err.startswith(
        f"pylog: error: --command-config {config}: schema.registry.url.typo is not a schema registry client "
        "setting (known: basic.auth.user.info, ssl.ca.location")
    # the entry point in a process of its own, the URL from the environment
    env = {**os.environ, "PYLOG_SCHEMA_REGISTRY_URL": url}
    done = subprocess.run([sys.executable, "-m", "broker_sim.tools.cli", "schemas", "get", "events-value"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert (done.returncode, json.loads(done.stdout)["id"]) == (0, 1)
    done = subprocess.run([sys.executable, "-m", "broker_sim.tools.cli", "schemas", "get", "nope"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (2, "pylog: error: 40401 Subject 'nope' not found.\n")


def test_a_url_list_is_tried_in_turn(url, files):
    assert pylog(f"http://127.0.0.1:1,{url}", "register", "events-value",
                 "--schema-file", files("v1.avsc", V1)).json == {"id": 1}


def test_an_unreachable_registry_is_one_line_and_exit_2():
    result = pylog("http://127.0.0.1:1", "list")
    assert result.status == 2
    assert result.err.startswith("pylog: error: cannot reach a schema registry (http://127.0.0.1:1: ")
    assert result.err.endswith("; check --url or PYLOG_SCHEMA_REGISTRY_URL)\n")
    assert pylog("ftp://x", "list").err == (
        "pylog: error: --url 'ftp://x': expected http://HOST:PORT or https://HOST:PORT\n")


def test_a_secured_registry_over_https_with_basic_auth_and_acls(tmp_path, files):
    """``--command-config`` with confluent-kafka's names: the CA to trust and Basic credentials of a SASL user."""
    pytest.importorskip("cryptography")
    from broker_sim.testing.secured import ADMIN_PASSWORD, ADMIN_USER, SecuredBroker

    with SecuredBroker(tmp_path / "secured", config={"schema.registry.listeners": "https://127.0.0.1:0"}) as secured:
        url = secured.broker.schema_registry_url
        assert url.startswith("https://")
        secured.add_user("app", "app-secret")

        def properties(name: str, user: str, password: str) -> str:
            path = tmp_path / name
            path.write_text(f"schema.registry.basic.auth.user.info={user}:{password}\n"
                            f"schema.registry.ssl.ca.location={secured.ca_file}\n", encoding="utf-8")
            return str(path)

        admin = properties("admin.properties", ADMIN_USER, ADMIN_PASSWORD)
        app = properties("app.properties", "app", "app-secret")
        wrong = properties("wrong.properties", "app", "not-the-password")
        v1 = files("v1.avsc", V1)
        assert pylog(url, "register", "events-value", "--schema-file", v1, "--command-config", admin).json == {"id": 1}
        # no credentials, a wrong password: 401; a user without ACLs: 403 (denied by default)
        anonymous = files("ca.properties", f"ssl.ca.location={secured.ca_file}\n")
        assert pylog(url, "get", "events-value", "--command-config", anonymous).err.startswith("pylog: error: 40101 ")
        assert pylog(url, "get", "events-value", "--command-config", wrong).err.startswith("pylog: error: 40101 ")
        assert pylog(url, "get", "events-value", "--command-config", app).err.startswith("pylog: error: 40301 ")
        kafka_admin = files("kafka-admin.properties",
                            f"security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.username={ADMIN_USER}\n"
                            f"sasl.password={ADMIN_PASSWORD}\nssl.ca.location={secured.ca_file}\n")
        assert main(["--bootstrap-server", secured.bootstrap_servers, "--command-config", kafka_admin, "acls", "add",
                     "--allow-principal", "User:app", "--operation", "READ", "--subject", "events-",
                     "--resource-pattern-type", "prefixed"], stdout=io.StringIO()) == 0
        fetched = pylog(url, "get", "events-value", "--command-config", app)
        assert (fetched.status, fetched.json["id"]) == (0, 1)
        # the CA is needed: without it the server's certificate is not trusted
        untrusted = pylog(url, "list", "--command-config", files("creds.properties",
                                                                "basic.auth.user.info=admin:admin-secret\n"))
        assert untrusted.status == 2 and "CERTIFICATE_VERIFY_FAILED" in untrusted.err
