"""An unknown SCRAM user's server-first message must look like a real user's everywhere it can be asked: the
same salt on every listener, on every broker of a cluster and after a restart (a real user's salt never
changes), and the iteration count the real users have. A prober comparing two answers, or seeing 4096 where
the cluster's users have 8192, would otherwise tell real users from unknown ones."""
from __future__ import annotations

import base64

import pytest
from kazoo.client import KazooClient

from broker_sim.config import BrokerConfig
from broker_sim.security import sasl
from broker_sim.security.entity_configs import FileEntityConfigs, ZkEntityConfigs
from broker_sim.security.scram import ScramCredential


def server_first(credentials, listener: str, mechanism: str, user: str) -> dict[str, str]:
    """The attributes (r, s, i) of the server-first message a listener with ``credentials`` answers."""
    config = BrokerConfig({"listeners": f"{listener}://127.0.0.1:0",
                           "listener.security.protocol.map": f"{listener}:SASL_PLAINTEXT"})
    listener_sasl = sasl.SaslListener.from_config(config, listener, credentials)
    answer = sasl.ScramServer(listener_sasl, mechanism).evaluate(f"n,,n={user},r=clientnonce".encode()).decode()
    return dict(item.split("=", 1) for item in answer.split(","))


def store_users(credentials, iterations: int) -> None:
    for index in range(3):
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            credential = ScramCredential.generate(mechanism, "secret", iterations)
            credentials.alter("users", f"real-{index}", {mechanism: credential.to_text()})


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_an_unknown_users_salt_is_stable_across_listeners_and_restarts(tmp_path, mechanism):
    credentials = FileEntityConfigs(tmp_path)
    store_users(credentials, 8192)
    first = server_first(credentials, "CLIENTS", mechanism, "nobody")
    other_listener = server_first(credentials, "INTERNAL", mechanism, "nobody")
    restarted = server_first(FileEntityConfigs(tmp_path), "CLIENTS", mechanism, "nobody")
    assert first["s"] == other_listener["s"] == restarted["s"]
    assert len(base64.b64decode(first["s"])) == 24  # as long as a real salt
    assert first["i"] == restarted["i"] == "8192"  # the real users' count, not 4096
    assert server_first(credentials, "CLIENTS", mechanism, "somebody-else")["s"] != first["s"]
    assert server_first(FileEntityConfigs(tmp_path / "other"), "CLIENTS", mechanism, "nobody")["s"] != first["s"]
    real = server_first(credentials, "CLIENTS", mechanism, "real-0")
    assert real["i"] == "8192" and real["s"] != first["s"]


def test_an_unknown_users_salt_is_the_same_on_every_broker_of_a_cluster(zookeeper):
    clients = [KazooClient(hosts=zookeeper.connect_string, timeout=10) for _ in range(3)]
    try:
        for client in clients:
            client.start(timeout=20)
        brokers = [ZkEntityConfigs(client) for client in clients[:2]]
        store_users(brokers[0], 8192)
        answers = [server_first(b, "SASL", "SCRAM-SHA-256", "nobody") for b in brokers]
        restarted = server_first(ZkEntityConfigs(clients[2]), "SASL", "SCRAM-SHA-256", "nobody")
        assert answers[0]["s"] == answers[1]["s"] == restarted["s"]
        assert answers[0]["i"] == restarted["i"] == "8192"
    finally:
        for client in clients:
            client.stop()
            client.close()


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_user_with_a_minority_iteration_count_does_not_stand_out_from_unknown_names(tmp_path, mechanism):
    """Nine users at 4096 iterations and one at 8192: unknown names answer 8192 about as often as one user in
    ten does, so seeing 8192 for a name says no more about whether it exists than seeing 4096 (with one count
    for every unknown name, the 8192 user was the only name ever to answer 8192)."""
    credentials = FileEntityConfigs(tmp_path)
    for index in range(9):
        credentials.alter("users", f"usual-{index}", {mechanism: ScramCredential.generate(
            mechanism, "secret", 4096).to_text()})
    credentials.alter("users", "odd", {mechanism: ScramCredential.generate(mechanism, "secret", 8192).to_text()})
    assert server_first(credentials, "CLIENTS", mechanism, "odd")["i"] == "8192"
    assert server_first(credentials, "CLIENTS", mechanism, "usual-0")["i"] == "4096"
    probes = [server_first(credentials, "CLIENTS", mechanism, f"probe-{n}")["i"] for n in range(2000)]
    share = probes.count("8192") / len(probes)
    assert set(probes) == {"4096", "8192"}
    assert 0.07 < share < 0.13, f"{share:.3f} of unknown names answer 8192, one real user in ten does"
    again = [server_first(FileEntityConfigs(tmp_path), "INTERNAL", mechanism, f"probe-{n}")["i"] for n in range(50)]
    assert again == probes[:50], "an unknown name's iteration count changed between listeners or a restart"
