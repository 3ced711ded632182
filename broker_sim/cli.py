"""``pylog-broker`` / ``python -m broker_sim``: one broker in the foreground, or ``cluster``: a local cluster.

    pylog-broker --data-dir /tmp/pylog --port 9092                      # one broker (broker_sim.server.cli)
    pylog-broker cluster --brokers 3 --data-dir /tmp/pylog-cluster      # ZooKeeper + 3 brokers (broker_sim.local)

The dispatch lives here, above both, so that the server never imports the local cluster launcher; the launcher
is imported only for ``cluster``, so a broker process starts without it. Run as the program (no *argv*), a
broker's process also defers the ``__init__`` of kafka-python and aiokafka (``broker_sim/lazy_packages.py``):
the broker uses only their leaf modules, and their ``__init__`` imports their whole clients. It also fixes glibc's
malloc thresholds for the process (``broker_sim.server.cli.tune_malloc``: no page faults for each request's buffers).
"""
from __future__ import annotations

import sys
from typing import Sequence

from broker_sim.lazy_packages import defer_client_packages
from broker_sim.server.cli import main as broker_main, tune_malloc


def main(argv: Sequence[str] | None = None) -> int:
    program = argv is None  # this process is pylog-broker (or python -m broker_sim), not a caller's
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["cluster"]:
        from broker_sim.local.cluster import main as cluster_main
        return cluster_main(argv[1:], prog="pylog-broker cluster")
    if program:
        defer_client_packages()
        # once serving: ctypes and the call cost ~8 ms of a ~280 ms start; the requests' buffers come after
        return broker_main(argv, when_serving=tune_malloc)
    return broker_main(argv)


if __name__ == "__main__":
    sys.exit(main())
