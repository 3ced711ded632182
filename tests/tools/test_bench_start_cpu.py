"""``pylog bench --workload start`` reports the CPU time a start ran beside its wall time (bench/start.py)."""
from __future__ import annotations

import os
import subprocess
import sys
import time

from broker_sim.bench.start import _summary, cpu_ms


def test_cpu_ms_counts_the_time_a_process_ran_on_a_cpu_not_the_time_it_waited():
    before = cpu_ms(os.getpid())
    started = time.thread_time()
    while time.thread_time() - started < 0.2:  # this thread 200 ms on a CPU, however long that takes on a busy machine
        pass
    time.sleep(0.3)  # waiting: not counted
    ran = cpu_ms(os.getpid()) - before
    assert 195 <= ran < 280, ran


def test_cpu_ms_of_a_process_that_is_gone_is_unknown():
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    assert cpu_ms(process.pid) is None


def test_the_summary_gives_cpu_medians_and_ratios_beside_the_wall_times():
    wall = {"pylog": [300.0, 310.0, 900.0], "baseline": [400.0, 420.0, 410.0], "floor": [60.0, 70.0, 65.0]}
    cpu = {"pylog": [200.0, 210.0, 205.0], "baseline": [250.0, 260.0, 255.0], "floor": [40.0, 41.0, 41.0]}
    summary = _summary(wall, [], cpu)
    assert summary["pylog"]["start_ms"] == 310.0 and summary["pylog"]["cpu_ms"] == 205.0
    assert summary["pylog"]["cpu_samples"] == cpu["pylog"]
    assert summary["cpu_ratio_to_baseline"] == round(205 / 255, 3)
    assert summary["cpu_ratio_to_floor"] == 5.0
    assert summary["ratio_to_baseline"] == round(310 / 410, 3)
    assert "cpu_ms" not in _summary(wall, [], {name: [] for name in wall})["pylog"]  # not Linux: wall only
