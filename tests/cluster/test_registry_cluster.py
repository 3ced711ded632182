"""The Schema Registry of a 3-broker cluster: one writer (the leader of ``_schemas``-0), forwarding, failover.

Registrations go through all three brokers at once while the writer is SIGKILLed: every answered
registration survives with its id, ids stay unique, and every broker answers reads alike afterwards.
"""
from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request

import pytest
from broker_sim.testing.waiting import wait_until

pytestmark = pytest.mark.cluster

V1 = "application/vnd.schemaregistry.v1+json"


def call(method: str, url: str, body: dict | None = None, timeout: float = 30.0) -> tuple[int, object]:
    request = urllib.request.Request(url, data=json.dumps(body).encode() if body is not None else None,
                                     method=method, headers={"Content-Type": V1})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def schema(name: str) -> str:
    return json.dumps({"type": "record", "name": name, "fields": [{"name": "a", "type": "string"}]})


def registry_state(url: str) -> dict:
    status, subjects = call("GET", url + "/subjects")
    assert status == 200, subjects
    state = {}
    for subject in subjects:
        status, latest = call("GET", f"{url}/subjects/{subject}/versions/latest")
        state[subject] = (status, latest.get("id"), latest.get("version"))
    return state


def test_each_broker_serves_the_registry_and_forwards_writes_to_the_writer(healthy_cluster):
    cluster = healthy_cluster
    urls = {b: cluster.schema_registry_url(b) for b in cluster.broker_ids}
    assert all(urls.values())
    # the first registration creates _schemas; until its leader is elected clients are told to retry (50004)
    wait_until(lambda: call("POST", urls[0] + "/subjects/first-value/versions", {"schema": schema("First")})[0] == 200,
               timeout_s=60, what="the first registration", interval_s=0.2)
    states = cluster.wait_for_full_isr("_schemas", 1)
    writer = states[0].leader
    assert sorted(states[0].replicas) == cluster.broker_ids
    from confluent_kafka.admin import AdminClient, ConfigResource

    resource = ConfigResource(ConfigResource.Type.TOPIC, "_schemas")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    described = admin.describe_configs([resource])[resource].result(30)
    assert described["cleanup.policy"].value == "compact"
    assert described["min.insync.replicas"].value == "2"  # replication factor 3
    follower = next(b for b in cluster.broker_ids if b != writer)
    status, answer = call("POST", urls[follower] + "/subjects/forwarded-value/versions", {"schema": schema("Fwd")})
    assert status == 200, answer
    # at once on every broker: a follower that has not replicated it yet asks the writer
    for url in urls.values():
        status, fetched = call("GET", f"{url}/schemas/ids/{answer['id']}")
        assert status == 200 and json.loads(fetched["schema"])["name"] == "Fwd", fetched
    # and each from its own replay of _schemas soon after
    for url in urls.values():
        wait_until(lambda url=url: "forwarded-value" in registry_state(url), timeout_s=10, what=f"{url} replaying",
                   interval_s=0.2)


def test_ids_stay_unique_and_answered_registrations_survive_a_sigkilled_writer(healthy_cluster):
    cluster = healthy_cluster
    urls = {b: cluster.schema_registry_url(b) for b in cluster.broker_ids}
    wait_until(lambda: call("POST", urls[0] + "/subjects/warmup-value/versions",
                            {"schema": schema("Warmup")})[0] == 200,
               timeout_s=60, what="a registration", interval_s=0.2)
    cluster.wait_for_full_isr("_schemas", 1)
    writer = cluster.leader_of("_schemas", 0)
    answered: dict[str, int] = {}  # subject -> the id it was answered with
    answered_at: list[float] = []
    failures: list = []
    lock = threading.Lock()
    stop = threading.Event()
    killed = threading.Event()

    def client(broker_id: int) -> None:
        number = 0
        while not stop.is_set() and number < 60:
            subject = f"c{broker_id}-{number}-value"
            body = {"schema": schema(f"C{broker_id}N{number}")}
            deadline = time.monotonic() + 60
            while not stop.is_set() and time.monotonic() < deadline:
                targets = [b for b in cluster.broker_ids if b != writer] if killed.is_set() else [broker_id]
                url = urls[broker_id if broker_id in targets else targets[number % len(targets)]]
                try:
                    status, answer = call("POST", f"{url}/subjects/{subject}/versions", body, timeout=20)
                except OSError as exc:  # the killed broker's own clients
                    status, answer = 0, repr(exc)
                if status == 200:
                    with lock:
                        answered[subject] = answer["id"]
                        answered_at.append(time.monotonic())
                    break
                if status and status < 500:
                    failures.append((subject, status, answer))
                    break
                time.sleep(0.2)  # 500 / 50003 / 50004: the writer is moving; retry as clients do
            number += 1

    threads = [threading.Thread(target=client, args=(b,), daemon=True) for b in cluster.broker_ids]
    for thread in threads:
        thread.start()
    wait_until(lambda: len(answered) >= 15, timeout_s=60, what="registrations before the kill", interval_s=0.2)
    cluster.kill(writer)
    killed_at = time.monotonic()
    killed.set()
    survivors = [b for b in cluster.broker_ids if b != writer]
    before_kill = len(answered)
    wait_until(lambda: len(answered) >= before_kill + 30, timeout_s=90, what="registrations after the kill",
               interval_s=0.2)
    stop.set()
    for thread in threads:
        thread.join(90)
    assert not failures, failures[:5]
    new_writer = cluster.leader_of("_schemas", 0)
    assert new_writer in survivors
    # another broker writes within the ZooKeeper session timeout (3 s here) plus an election and a retry
    resumed = min(t for t in answered_at if t > killed_at + 0.5)
    assert resumed - killed_at < 3.0 + 7.0, resumed - killed_at

    ids = list(answered.values())
    assert len(set(ids)) == len(ids), "two distinct schemas were answered with one id"
    # every answered registration is there, with its id, on every live broker; all brokers agree
    def agreed():
        states = [registry_state(urls[b]) for b in survivors]
        if any(state != states[0] for state in states):
            return None
        return states[0]
    state = wait_until(agreed, timeout_s=30, what="the surviving brokers agreeing", interval_s=0.2)
    for subject, schema_id in answered.items():
        assert state.get(subject) == (200, schema_id, 1), (subject, schema_id, state.get(subject))
    served_ids = [entry[1] for entry in state.values()]
    assert len(set(served_ids)) == len(served_ids)

    # the killed broker comes back, replays _schemas and answers the same
    cluster.heal(wait=True)
    wait_until(lambda: registry_state(urls[writer]) == registry_state(urls[new_writer]), timeout_s=60,
               what="the restarted broker agreeing", interval_s=0.2)
    status, again = call("POST", urls[writer] + "/subjects/after-value/versions", {"schema": schema("After")})
    assert status == 200 and again["id"] not in ids


def test_a_secured_cluster_forwards_https_writes_with_the_clients_credentials(tmp_path):
    """https with the brokers' PEM keystore, Basic auth against SCRAM users and ACLs, checked on the broker a
    client calls and again on the writer the write is forwarded to (with the client's Authorization)."""
    pytest.importorskip("cryptography")
    import base64
    import ssl

    from kafka import KafkaAdminClient
    from kafka.admin import ACL, ACLOperation, ACLPermissionType, ResourcePattern, ResourceType
    from kafka.admin import ScramMechanism, UserScramCredentialUpsertion

    from broker_sim.local.certificates import CertificateAuthority
    from broker_sim.local.cluster import LocalCluster
    from cluster_helpers import CLUSTER_CONFIGS, zookeeper_missing

    if zookeeper_missing():
        pytest.skip(zookeeper_missing())
    ca = CertificateAuthority(tmp_path / "ca")
    jaas = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="admin-secret";'
    configs = {**CLUSTER_CONFIGS,
               "listeners": "PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:0",
               "inter.broker.listener.name": "SASL_PLAINTEXT", "sasl.enabled.mechanisms": "SCRAM-SHA-256",
               "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": jaas,
               "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:admin",
               "ssl.keystore.location": ca.issue("broker").keystore, "ssl.truststore.location": ca.truststore,
               "schema.registry.listeners": "https://127.0.0.1:0"}
    cluster = LocalCluster(tmp_path / "cluster", brokers=2, configs=configs,
                           broker_args=["--add-scram", "SCRAM-SHA-256=[name=admin,password=admin-secret]"]).start()
    try:
        urls = {}
        for broker_id in cluster.broker_ids:
            data, _ = cluster._zk.get(f"/brokers/ids/{broker_id}")
            urls[broker_id] = json.loads(data)["pylog_schema_registry_url"]
        assert all(url.startswith("https://127.0.0.1:") for url in urls.values())
        sasl = next(e for e in json.loads(cluster._zk.get("/brokers/ids/0")[0])["endpoints"]
                    if e.startswith("SASL_PLAINTEXT://"))[len("SASL_PLAINTEXT://"):]
        admin = KafkaAdminClient(bootstrap_servers=sasl, security_protocol="SASL_PLAINTEXT",
                                 sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="admin",
                                 sasl_plain_password="admin-secret")
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion("eve", ScramMechanism.SCRAM_SHA_256,
                                                                        "eve-secret")])
        admin.create_acls([ACL("User:ANONYMOUS", "*", ACLOperation.DESCRIBE, ACLPermissionType.ALLOW,
                               ResourcePattern(ResourceType.TOPIC, "*"))])  # LocalCluster's metadata polling
        admin.close()
        context = ssl.create_default_context(cafile=ca.truststore)

        def secured_call(method, url, body=None, user=None, password=None):
            headers = {"Content-Type": V1}
            if user:
                headers["Authorization"] = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
            request = urllib.request.Request(url, data=json.dumps(body).encode() if body is not None else None,
                                             method=method, headers=headers)
            try:
                with urllib.request.urlopen(request, timeout=30, context=context) as response:
                    return response.status, json.loads(response.read())
            except urllib.error.HTTPError as error:
                return error.code, json.loads(error.read() or b"{}")

        for url in urls.values():
            assert secured_call("GET", url + "/subjects")[0] == 401
        wait_until(lambda: secured_call("POST", urls[0] + "/subjects/admin-value/versions", {"schema": schema("A")},
                                        "admin", "admin-secret")[0] == 200,
                   timeout_s=60, what="a first registration", interval_s=0.2)
        writer = cluster.leader_of("_schemas", 0)
        other = next(b for b in cluster.broker_ids if b != writer)
        status, answer = secured_call("POST", urls[other] + "/subjects/fwd-value/versions", {"schema": schema("F")},
                                      "admin", "admin-secret")
        assert status == 200, answer
        # eve has no ACL: denied on the broker she calls (and would be on the writer)
        status, answer = secured_call("POST", urls[other] + "/subjects/eve-value/versions", {"schema": schema("E")},
                                      "eve", "eve-secret")
        assert (status, answer.get("error_code")) == (403, 40301), answer
        status, answer = secured_call("POST", urls[other] + "/subjects/eve-value/versions", {"schema": schema("E")},
                                      "eve", "wrong")
        assert (status, answer.get("error_code")) == (401, 40101), answer
    finally:
        cluster.stop_all()


def _two_free_ports_in_a_row() -> int:
    import socket

    for _ in range(50):
        with socket.socket() as first, socket.socket() as second:
            first.bind(("127.0.0.1", 0))
            port = first.getsockname()[1]
            try:
                second.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
            return port
    raise AssertionError("no two free ports in a row")


def test_the_foreground_cluster_command_serves_every_brokers_registry_on_the_pinned_ports(tmp_path):
    """``pylog-broker cluster --schema-registry-port N``: broker i's registry answers on N + i, and the
    command prints those URLs."""
    import subprocess
    import sys

    from cluster_helpers import zookeeper_missing

    if zookeeper_missing():
        pytest.skip(zookeeper_missing())
    pinned = _two_free_ports_in_a_row()
    process = subprocess.Popen([sys.executable, "-m", "broker_sim", "cluster", "--brokers", "2",
                                "--data-dir", str(tmp_path / "fg"), "--schema-registry-port", str(pinned)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().startswith("PYLOG_BOOTSTRAP_SERVERS=")
        line = process.stdout.readline()
        assert line.startswith("PYLOG_SCHEMA_REGISTRY_URL=http://127.0.0.1:"), line or process.stderr.read()
        urls = line.strip().split("=", 1)[1].split(",")  # every broker's, for clients to try in turn
        assert urls == [f"http://127.0.0.1:{pinned}", f"http://127.0.0.1:{pinned + 1}"]
        for url in urls:  # right after the start _schemas may have no leader yet: 50004, which clients retry
            assert wait_until(lambda url=url: call("GET", url + "/subjects") == (200, []), timeout_s=30,
                              what=f"{url} answering", interval_s=0.2)
        process.terminate()
        assert process.wait(60) == 0
        assert "schema registry http://127.0.0.1:" in process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()


def test_a_broker_without_a_replica_of_schemas_forwards_reads_too(tmp_path):
    from cluster_helpers import start_cluster

    cluster = start_cluster(tmp_path / "four", brokers=4)
    try:
        urls = {b: cluster.schema_registry_url(b) for b in cluster.broker_ids}
        first = wait_until(lambda: (lambda r: r[1] if r[0] == 200 else None)(
                               call("POST", urls[0] + "/subjects/four-value/versions", {"schema": schema("Four")})),
                           timeout_s=60, what="a first registration", interval_s=0.2)
        states = cluster.wait_for_full_isr("_schemas", 1)
        outsider = next(b for b in cluster.broker_ids if b not in states[0].replicas)
        assert len(states[0].replicas) == 3
        assert call("GET", urls[outsider] + "/subjects") == (200, ["four-value"])
        status, fetched = call("GET", f"{urls[outsider]}/schemas/ids/{first['id']}")
        assert status == 200 and json.loads(fetched["schema"])["name"] == "Four"
        status, second = call("POST", urls[outsider] + "/subjects/outsider-value/versions", {"schema": schema("Out")})
        assert status == 200 and second["id"] != first["id"]
    finally:
        cluster.stop_all()
