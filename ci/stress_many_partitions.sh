#!/usr/bin/env bash
# Thousands of partitions on one broker (issue 22): the partitions benchmark at 1,000 and 10,000 partitions
# (create, idle CPU, RSS, all-topic Metadata, restart; each on a fresh broker process), then 2 brokers with
# RF=2 and 5,000 partitions, idle CPU with and without fetch sessions. Prints the JSON and exits non-zero if
# any measurement failed (a refused topic, a restart that did not serve every partition, an ISR that did not
# fill). ci/stress_partitions.sh is the other "partitions": network partitions between containers.
#   bash ci/stress_many_partitions.sh [COUNTS] [SESSIONS_PARTITIONS] [IDLE_S]
set -euo pipefail
cd "$(dirname "$0")/.."
COUNTS="${1:-1000,10000}"
SESSIONS="${2:-5000}"
IDLE_S="${3:-10}"
export PYTHONUNBUFFERED=1
PYTHON="${PYTHON:-$(bash ci/setup.sh | tail -n 1)}"
REPORT="${PYLOG_MANY_PARTITIONS_REPORT:-/tmp/pylog-many-partitions.json}"
"$PYTHON" -m broker_sim.bench.partitions --partition-counts "$COUNTS" --sessions-partitions "$SESSIONS" \
  --idle-s "$IDLE_S" --output "$REPORT"
"$PYTHON" - "$REPORT" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
failed = [name for name, result in {**report["results"], "fetch_sessions": report.get("fetch_sessions", {})}.items()
          if "error" in result]
print(json.dumps({"failed": failed}))
sys.exit(1 if failed else 0)
PY
