"""The containers' own logic that needs no Docker engine: what PylogClusterContainers' ``wait_for`` counts as
done, and how PylogContainer pins the host ports it publishes.

Mutation: ``wait_for`` back to ``if value:`` -> the broker-0 test timed out ("leader: not within 10 s"), as
test_an_isolated_leader_is_fenced_and_truncated_and_no_acks_all_write_is_lost did in CI whenever the
controller moved leadership to broker 0 (its predicate returns the new leader's id, and 0 is falsy).
"""
from __future__ import annotations

import pytest

from broker_sim.testing.containers import PylogClusterContainers


def _answers(*values):
    queue = list(values)

    def predicate():
        value = queue.pop(0) if len(queue) > 1 else queue[0]
        if isinstance(value, Exception):
            raise value
        return value
    return predicate


def test_wait_for_returns_broker_id_0_as_local_cluster_does():
    """None and False mean "not yet"; anything else is the answer, broker id 0 included (LocalCluster's rule)."""
    cluster = PylogClusterContainers(brokers=3)  # not started: wait_for needs no container
    assert cluster.wait_for(_answers(None, False, OSError("in transition"), 0), timeout_s=10, what="leader",
                            interval_s=0.01) == 0
    assert cluster.wait_for(_answers(None, {"leader": 0}), timeout_s=10, what="state", interval_s=0.01) == {"leader": 0}


def test_wait_for_times_out_naming_the_last_value_and_error():
    cluster = PylogClusterContainers(brokers=3)
    with pytest.raises(TimeoutError, match=r"leadership: not within 0.05 s \(last value: False\)"):
        cluster.wait_for(lambda: False, timeout_s=0.05, what="leadership", interval_s=0.01)
    with pytest.raises(TimeoutError, match=r"last value: None, last error: no broker"):
        cluster.wait_for(_answers(OSError("no broker")), timeout_s=0.05, what="leadership", interval_s=0.01)


class _NoDockerClient:
    """testcontainers' DockerClient stand-in: a PylogContainer is built and configured, never started."""

    def __init__(self, **kwargs) -> None:
        pass


@pytest.fixture
def unstarted(monkeypatch):
    from testcontainers.core import container as testcontainers_container

    from broker_sim.testing.containers import PylogContainer

    monkeypatch.setattr(testcontainers_container, "DockerClient", _NoDockerClient)
    return PylogContainer


def test_a_pinned_schema_registry_port_is_published_on_loopback_and_known_before_the_start(unstarted):
    """schema_registry_port=, with_schema_registry(port=) and testcontainers' with_bind_ports(8081, ...) all
    publish the registry's 8081 on 127.0.0.1:<port>, and get_schema_registry_url() names it without Docker."""
    for container in (unstarted(schema_registry_port=18081), unstarted().with_schema_registry(port=18081),
                      unstarted().with_bind_ports("8081/tcp", 18081)):
        assert container.ports[8081] == ("127.0.0.1", 18081) and "8081/tcp" not in container.ports
        assert container.get_schema_registry_port() == 18081
        assert container.get_schema_registry_url() == "http://127.0.0.1:18081"
    assert unstarted().ports[8081] == ("127.0.0.1", None)   # default: ephemeral, asked of Docker once started
    broker = unstarted().with_bind_ports(9092, 19092)
    assert broker.ports[9092] == ("127.0.0.1", 19092) and broker.get_bootstrap_server() == "127.0.0.1:19092"
    assert "PLAINTEXT://127.0.0.1:19092" in broker.start_script()   # what it advertises


@pytest.mark.parametrize("port", [0, 70000, "http", True])
def test_a_schema_registry_port_that_is_no_port_is_refused_naming_the_option(unstarted, port):
    with pytest.raises(ValueError, match=r"schema_registry_port=.*expected a port number 1-65535, or None"):
        unstarted(schema_registry_port=port)
