#!/usr/bin/env bash
# Stress partition reassignment: ROUNDS times (default 3), grow a fresh 3-broker cluster to 5 and drain broker 0
# with `pylog reassign` / `pylog cluster decommission` while idempotent acks=all producers and read_committed
# consumers run for SECONDS (default 60), then the Jepsen checker (tests/cluster/test_reassignment_workload.py;
# the suite runs the same for 14 s), plus the SIGKILL-mid-reassignment, cancel and throttle tests once per round.
# Exits non-zero on the first failing round; each round prints the checker's summary as a JSON line.
#   bash ci/stress_reassign.sh [ROUNDS] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${1:-3}"
export PYLOG_REASSIGN_WORKLOAD_S="${2:-60}"
export PYTHONUNBUFFERED=1
PYTHON="${PYTHON:-$(bash ci/setup.sh | tail -n 1)}"
for round in $(seq 1 "$ROUNDS"); do
    echo "== round $round of $ROUNDS (${PYLOG_REASSIGN_WORKLOAD_S} s of load)"
    PYTHONPATH="$PWD" "$PYTHON" -m pytest -q -s -p no:cacheprovider \
        tests/cluster/test_reassignment_workload.py tests/cluster/test_reassignment.py \
        | grep -E '^\{|passed|failed|error' || { echo "round $round failed"; exit 1; }
done
