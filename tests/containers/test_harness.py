"""PylogClusterContainers' own logic that needs no Docker engine: what ``wait_for`` counts as done.

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
