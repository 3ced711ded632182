#!/usr/bin/env bash
# Stress the cluster: run the Jepsen-style nemesis workload ROUNDS times (default 5), each on a fresh
# 3-broker cluster (real ZooKeeper) for SECONDS of faults (default 60), printing each checker result
# as one JSON line and a summary; exits non-zero if any round is invalid.
#   bash ci/stress_cluster.sh [ROUNDS] [SECONDS] [--work-dir DIR] [--seed N] [--faults kill,pause,kill2,pause2]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${1:-5}"
SECONDS_PER_ROUND="${2:-${PYLOG_NEMESIS_SECONDS:-60}}"
shift $(( $# > 2 ? 2 : $# )) || true
export PYTHONUNBUFFERED=1
PYTHON="${PYTHON:-$(bash ci/setup.sh | tail -n 1)}"
exec "$PYTHON" -m broker_sim.testing.jepsen_workload --rounds "$ROUNDS" --seconds "$SECONDS_PER_ROUND" "$@"
