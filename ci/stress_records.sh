#!/usr/bin/env bash
# Record-parser differential stress: N fuzzed record batches (default 100000) read by Kafka's own parser (one
# JVM, tests/conformance/java/RecordOracle.java), the broker's validator and the connector's compiled,
# per-record and pure read paths; fails on any disagreement (tests/conformance/test_record_parsers.py).
#   bash ci/stress_records.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
export PYLOG_STRESS_RECORDS="${1:-100000}" PYLOG_REQUIRE_KAFKA=1 PYTHONUNBUFFERED=1
PYTHON="${PYTHON:-$(bash ci/setup.sh | tail -n 1)}"
exec "$PYTHON" -m pytest tests/conformance/test_record_parsers.py -k fuzzed_batches -q -p no:cacheprovider --timeout 0
