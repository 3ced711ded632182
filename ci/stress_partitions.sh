#!/usr/bin/env bash
# Network partitions between broker containers, N rounds (default 5) of SECONDS of faults each (default 180):
# each round is a fresh ZooKeeper + 3-broker PylogClusterContainers cluster under the partition nemesis
# (isolate a leader, isolate a follower, split ZooKeeper from the brokers, a bridge; heal after each), then
# the zombie-leader test; one JSON line per round (rounds, faults by kind, acknowledged, anomalies, recovery
# time per kind) in $PYLOG_PARTITION_REPORT (default /tmp/pylog-partitions.jsonl). Exits non-zero if a round
# fails.
#   bash ci/stress_partitions.sh [N] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${1:-5}"
export PYLOG_PARTITION_SECONDS="${2:-180}"
export PYLOG_PARTITION_REPORT="${PYLOG_PARTITION_REPORT:-/tmp/pylog-partitions.jsonl}"
export PYTHONUNBUFFERED=1 PYLOG_SETUP_DOCKER=1 PYLOG_REQUIRE_DOCKER=1
PYTHON="${PYTHON:-$(bash ci/setup.sh | tail -n 1)}"
: > "$PYLOG_PARTITION_REPORT"
failed=0
for round in $(seq 1 "$ROUNDS"); do
  echo "stress_partitions: round $round of $ROUNDS ($PYLOG_PARTITION_SECONDS s of faults)" >&2
  PYLOG_NEMESIS_SEED="$round$(date +%s)" "$PYTHON" -m pytest -q -p no:cacheprovider tests/containers/test_partitions.py \
    -o "timeout=$(( PYLOG_PARTITION_SECONDS + 900 ))" || failed=$(( failed + 1 ))
done
cat "$PYLOG_PARTITION_REPORT"
echo "{\"rounds\": $ROUNDS, \"failed\": $failed}"
[ "$failed" = 0 ]
