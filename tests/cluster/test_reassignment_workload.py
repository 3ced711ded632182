"""Grow a cluster 3 -> 5 brokers and drain one, under load, checked by the Jepsen-style checker.

The workload (``broker_sim.testing.jepsen_workload``: idempotent acks=all producers, read_committed
consumers) runs against an RF=3 topic while a "nemesis" that breaks nothing reshapes the cluster with the
operator's tools: ``LocalCluster.add_broker()`` twice, ``pylog reassign --generate`` over all five brokers,
``--execute`` and ``--verify`` until complete, then ``pylog cluster decommission`` of one original broker.  The
checker then requires no acknowledged record lost, none read twice, order kept and the replicas identical,
and the test that the new brokers host replicas and the drained one hosts none (its logs deleted).
``PYLOG_REASSIGN_WORKLOAD_S`` lengthens the run (``ci/stress_reassign.sh``).
"""
from __future__ import annotations

import io
import json
import os
import threading
import time

from cluster_helpers import start_cluster

from broker_sim.testing.jepsen_checker import check
from broker_sim.testing.jepsen_workload import WorkloadOptions, run_workload
from broker_sim.tools import cli

DURATION_S = float(os.environ.get("PYLOG_REASSIGN_WORKLOAD_S", "14"))
STEP_TIMEOUT_S = 90.0


class ReshapeNemesis(threading.Thread):
    """Grows the cluster by two brokers, spreads the topic over all of them, then drains broker 0."""

    def __init__(self, cluster, options, stop, clock, events, rng) -> None:
        super().__init__(name="reassign-nemesis", daemon=True)
        self.cluster, self.options, self.stop_event, self.clock, self.events = cluster, options, stop, clock, events
        self.failure: BaseException | None = None
        self.work_dir = cluster.data_dir / "reassign-plans"

    def _log(self, event: dict) -> None:
        self.events.append({"t": self.clock(), **event})

    def _pylog(self, *args: str) -> tuple[int, str]:
        out, err = io.StringIO(), io.StringIO()
        status = cli.main(["--bootstrap-server", self.cluster.bootstrap_servers, *args], stdout=out, stderr=err)
        return status, out.getvalue() + err.getvalue()

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # noqa: BLE001 - reported by the workload
            self.failure = exc
            self._log({"error": f"{type(exc).__name__}: {exc}"})

    def _run(self) -> None:
        self.work_dir.mkdir(exist_ok=True)
        # both phases run even past the workload's end: it waits for the nemesis while its producers keep writing
        self.stop_event.wait(DURATION_S / 5)
        self._log({"fault": "grow", "brokers": [self.cluster.add_broker(), self.cluster.add_broker()]})
        topics = self.work_dir / "topics.json"
        topics.write_text(json.dumps({"version": 1, "topics": [{"topic": self.options.topic}]}))
        status, text = self._pylog("reassign", "--generate", "--topics-to-move-json-file", str(topics),
                                   "--broker-list", ",".join(map(str, self.cluster.broker_ids)))
        assert status == 0, text
        proposed = self.work_dir / "proposed.json"
        proposed.write_text(text.strip().splitlines()[-1])
        status, text = self._pylog("reassign", "--execute", "--reassignment-json-file", str(proposed))
        assert status == 0, text
        deadline = time.monotonic() + STEP_TIMEOUT_S
        while True:
            status, text = self._pylog("reassign", "--verify", "--reassignment-json-file", str(proposed))
            if status == 0:
                break
            assert status == 3 and time.monotonic() < deadline, text
            time.sleep(0.5)
        self._log({"reassigned": json.loads(proposed.read_text())["partitions"]})
        self.stop_event.wait(DURATION_S / 5)
        self._log({"fault": "decommission", "broker": 0})
        status, text = self._pylog("cluster", "decommission", "--broker", "0", "--timeout-s", str(STEP_TIMEOUT_S))
        assert status == 0, text
        self._log({"decommissioned": 0, "report": text.strip().splitlines()[-1]})


def test_grow_to_five_brokers_then_drain_one_under_load(tmp_path):
    cluster = start_cluster(tmp_path / "cluster", brokers=3)
    try:
        options = WorkloadOptions(topic="reshaped", partitions=3, replication_factor=3, min_insync_replicas=2,
                                  producers=2, duration_s=DURATION_S, rate_per_producer=100.0,
                                  message_timeout_ms=30_000, heal_timeout_s=60.0)
        history = run_workload(cluster, options, nemesis_factory=ReshapeNemesis)
        result = check(history)
        print(json.dumps({k: result[k] for k in ("valid", "acked", "read", "faults", "acked_per_fault_window",
                                                 "replicas_compared")}))
        assert result["valid"], json.dumps(result, indent=1)[:4000]
        assert [e["fault"] for e in history.events if e.get("fault")] == ["grow", "decommission"]
        assert any("decommissioned" in e for e in history.events)
        metadata = cluster.metadata(["reshaped"])
        hosting = {b for (t, _), p in metadata.partitions.items() if t == "reshaped" for b in p.replicas}
        assert {3, 4} <= hosting and 0 not in hosting
        assert all(len(p.replicas) == 3 for p in metadata.partitions.values())
        assert not list((cluster.broker_data_dir(0)).glob("reshaped-*"))  # the drained broker deleted its logs
    finally:
        cluster.stop_all()
