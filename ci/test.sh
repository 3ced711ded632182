#!/usr/bin/env bash
# Set up (ci/setup.sh) and run the whole test suite.  Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
# the container tests need Docker and the images: setup installs/starts dockerd and builds them
export PYLOG_SETUP_DOCKER=1
# and the Spark drivers' class archive (broker_sim/testing/spark_cds.py)
export PYLOG_SETUP_SPARK_CDS=1
[ "${CI:-}" = true ] && export PYLOG_REQUIRE_DOCKER=1 PYLOG_REQUIRE_ZOOKEEPER=1 PYLOG_REQUIRE_KAFKA=1
PYTHON="$(bash ci/setup.sh | tail -n 1)"
export PYSPARK_PYTHON="$PYTHON"
export PYTHONUNBUFFERED=1
# Two pytest-xdist workers by default (PYLOG_TEST_WORKERS=0: one process), each taking whole files (their module
# fixtures start once), so on two cores the suite's waits (timeouts, JVM starts, subprocess drivers) overlap with
# the other worker's work: ~16 minutes instead of ~29. Files go out in collection order, which then puts the long
# ones first (tests/conftest.py), not xdist's most-tests-first. Each worker has its own SparkSession.
WORKERS="${PYLOG_TEST_WORKERS:-2}"
PARALLEL=()
[ "$WORKERS" != 0 ] && PARALLEL=(-n "$WORKERS" --dist loadfile --no-loadscope-reorder)
# pytest-benchmark (when a machine has it; the suite has no benchmark tests) would only warn that xdist disables it
PARALLEL+=(-p no:benchmark)
exec "$PYTHON" -m pytest tests "${PARALLEL[@]}" "$@"
