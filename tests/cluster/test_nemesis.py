"""The Jepsen-style run: idempotent acks=all producers and read_committed consumers on a 3-broker
cluster (RF=3, min.insync.replicas=2, 3 partitions) while the nemesis SIGKILLs or SIGSTOPs the
current leader of a partition (sometimes the controller) every few seconds; then heal and check.

``PYLOG_NEMESIS_SECONDS`` sets the length of the faulty phase (default 30 s; ``ci/stress_cluster.sh``
runs 60 s rounds), ``PYLOG_NEMESIS_SEED`` the nemesis's random seed.
"""
from __future__ import annotations

import json
import os
import sys
import time

import pytest

from broker_sim.testing.jepsen_checker import check
from broker_sim.testing.jepsen_workload import WorkloadOptions, run_workload, workload_budget_s

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def nemesis_seconds() -> float:
    return float(os.environ.get("PYLOG_NEMESIS_SECONDS", "30"))


def nemesis_options(seed: int) -> WorkloadOptions:
    # every phase bounded (heal, flush, final read, replica sync) so the worst case fits the test's timeout
    return WorkloadOptions(topic="jepsen", partitions=3, replication_factor=3, min_insync_replicas=2,
                           producers=3, duration_s=nemesis_seconds(), seed=seed, heal_timeout_s=60.0,
                           message_timeout_ms=20_000, final_read_timeout_s=30.0, replica_sync_timeout_s=30.0,
                           log=lambda line: print(line, file=sys.stderr, flush=True))


# the run's own bounds plus the cluster fixture's start and stop: a slow run fails with the workload's
# message (which phase, which broker), never by the pytest-timeout kill
NEMESIS_TIMEOUT_S = int(workload_budget_s(nemesis_options(0)) + 120)


@pytest.mark.timeout(NEMESIS_TIMEOUT_S)
def test_acknowledged_writes_survive_leader_and_controller_faults(cluster, tmp_path):
    """The checker now also demands evidence (consumer observations of every partition, every replica's log,
    >= 10 acknowledged writes per fault window; tests/cluster/test_checker.py proves each rule on synthetic
    histories), so this run is valid only if it really exercised the cluster under faults."""
    seed = int(os.environ.get("PYLOG_NEMESIS_SEED", str(int(time.time()))))
    options = nemesis_options(seed)
    started = time.monotonic()
    history = run_workload(cluster, options)
    result = check(history)
    result["seed"] = seed
    result["duration_s"] = round(time.monotonic() - started, 1)
    (tmp_path / "history.json").write_text(history.to_json())
    document = json.dumps(result, indent=2)
    print(document)
    report_path = os.environ.get("PYLOG_NEMESIS_REPORT")
    if report_path:
        with open(report_path, "a") as report:
            report.write(json.dumps({**result, "history": str(tmp_path / "history.json")}) + "\n")

    assert result["faults"] >= max(1, int(options.duration_s // 15)), "the nemesis barely ran: " + json.dumps(
        history.events)
    assert result["valid"], (f"checker found problems {result['problems']}; history {tmp_path / 'history.json'}, "
                             f"broker logs under {cluster.data_dir}:\n{document}")
