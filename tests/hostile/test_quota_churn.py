"""Rotating client ids under a ``clients/<default>`` quota: each new client id gets its own rate (Kafka's
DefaultQuotaCallback), so a client that names a new id on every request makes the broker keep thousands of
rates. Recording one must cost O(1): the rates are kept in order of last use and idle ones dropped from the
front, not found by a scan of them all on every new id."""
from __future__ import annotations

import time

from broker_sim.security.entity_configs import FileEntityConfigs
from broker_sim.security.quotas import MAX_RATES, PRODUCE, QuotaManager


def test_rotating_client_ids_cost_constant_time_per_request(tmp_path):
    configs = FileEntityConfigs(tmp_path)
    configs.alter("clients", "<default>", {PRODUCE: "1048576"})
    now = [1000.0]
    manager = QuotaManager(configs, clock=lambda: now[0])

    def rotate(first: int, count: int) -> float:
        """Seconds to record one produce for each of ``count`` new client ids, 1 ms of clock apart."""
        started = time.perf_counter()
        for i in range(first, first + count):
            now[0] += 0.001
            assert manager.record(PRODUCE, "User:ANONYMOUS", f"rotating-{i}", 100) == 0
        return time.perf_counter() - started

    below = rotate(0, MAX_RATES)  # every one in use (within the 11 s window): nothing may be dropped yet
    beyond = rotate(MAX_RATES, 5_000)  # each new id meets MAX_RATES rates still in use
    per_id_below, per_id_beyond = below / MAX_RATES * 1e6, beyond / 5_000 * 1e6
    print(f"\nper new client id: {per_id_below:.1f} us below {MAX_RATES} rates, {per_id_beyond:.1f} us beyond")
    assert per_id_beyond < max(5 * per_id_below, 200), (per_id_below, per_id_beyond)  # main: ~2,500 us
    # the idle ones still go: past the window, the next new ids drop them, bounded again
    now[0] += 12.0
    rotate(20_000, 10)
    assert len(manager._rates) == 10
