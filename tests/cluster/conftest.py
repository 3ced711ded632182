"""Cluster tests: a real ZooKeeper (Debian's jar) and broker processes on 127.0.0.1.

``cluster`` is one 3-broker LocalCluster per test module (starting one costs a
few seconds), with the fast-failover settings; ``healthy_cluster`` is the same
cluster, healed (every broker running and answering) before and after the
test, for tests that kill or pause brokers. The module's cluster must stop
cleanly (every broker exits 0 on SIGTERM). Without the ZooKeeper jar or java
every test here that needs a cluster is skipped, naming what to install.
"""
from __future__ import annotations

import itertools
import re

import pytest
from cluster_helpers import start_cluster

_topic_numbers = itertools.count()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    running = start_cluster(tmp_path_factory.mktemp("cluster"))
    try:
        yield running
    finally:
        statuses = running.stop_all()
    unclean = {b: status for b, status in statuses.items() if status not in (0, None)}
    assert not unclean, (f"brokers did not exit cleanly on SIGTERM (exit statuses {unclean}, -9 = killed after "
                         f"{running.stop_timeout_s:g} s); logs: "
                         + ", ".join(str(running.log_path(b)) for b in unclean))


@pytest.fixture
def healthy_cluster(cluster):
    cluster.heal(wait=True)
    yield cluster
    cluster.heal(wait=True)


@pytest.fixture
def topic_name(request):
    """A topic name unique within the module's cluster."""
    return f"{re.sub(r'[^a-zA-Z0-9._-]+', '-', request.node.name)[:80]}-{next(_topic_numbers)}"
