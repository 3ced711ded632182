#!/usr/bin/env bash
# Hostile-client soak: one broker process, normal acks=all traffic, a random hostile client attacking it
# back to back for MINUTES (default 10), SIGTERM restarts every 60 s; prints one JSON report (hostile requests
# sent, crashes, failed restarts, peak RSS, p50/p99 latency of the normal traffic before vs during, lost
# records) and exits non-zero unless crashes, failed restarts and lost records are all 0.
#   bash ci/stress_hostile.sh [MINUTES] [--seed N] [--restart-every-s S] [--config key=value ...]
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES="${1:-10}"
shift $(( $# > 0 ? 1 : 0 )) || true
export PYTHONUNBUFFERED=1
PYTHON="${PYTHON:-$(bash ci/setup.sh | tail -n 1)}"
exec "$PYTHON" -m broker_sim.testing.hostile_soak --minutes "$MINUTES" "$@"
