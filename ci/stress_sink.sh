#!/usr/bin/env bash
# Stress the exactly-once sink: run the driver-crash / task-failure rounds many times (default 20).
#   bash ci/stress_sink.sh [ROUNDS] [extra pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${1:-20}"
shift || true
export PYLOG_SINK_FAULT_ROUNDS="$ROUNDS"
export PYTHONUNBUFFERED=1
exec "${PYTHON:-python}" -m pytest tests/spark/test_sink_faults.py -q "$@"
