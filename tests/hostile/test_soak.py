"""The short variant of ci/stress_hostile.sh: every attack of the catalogue twice against one broker
process with normal acks=all traffic and a SIGTERM restart in between; no crash, no failed restart, every
acknowledged normal record at its offset."""
from __future__ import annotations

import json

import pytest

from broker_sim.testing.hostile_soak import ATTACKS, SoakOptions, run_soak

pytestmark = pytest.mark.slow


def test_short_hostile_soak_leaves_the_broker_serving_and_the_data_intact(tmp_path):
    # two passes through the catalogue (about 20 s each when the broker answers promptly), capped at 1.5 minutes
    report = run_soak(SoakOptions(minutes=4, passes=2, baseline_s=3, restart_every_s=15, seed=7,
                                  work_dir=str(tmp_path / "soak")))
    summary = {k: v for k, v in report.items() if k != "crash_logs"}
    assert report["valid"], json.dumps(report, indent=2)[-6000:]
    assert report["attacks"] == {attack.__name__: 2 for attack in ATTACKS}, summary
    assert report["restarts"] >= 1 and report["normal_acknowledged"] > 100, summary
