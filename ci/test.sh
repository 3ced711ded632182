#!/usr/bin/env bash
# Set up (ci/setup.sh) and run the whole test suite.  Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
# the container tests need Docker and the images: setup installs/starts dockerd and builds them
export PYLOG_SETUP_DOCKER=1
# and the Spark drivers' class archive (tests/spark_cds.py)
export PYLOG_SETUP_SPARK_CDS=1
[ "${CI:-}" = true ] && export PYLOG_REQUIRE_DOCKER=1 PYLOG_REQUIRE_ZOOKEEPER=1
PYTHON="$(bash ci/setup.sh | tail -n 1)"
export PYSPARK_PYTHON="$PYTHON"
export PYTHONUNBUFFERED=1
# Two workers (pytest-xdist), each taking whole files (their module fixtures start once): on two cores the suite's
# waits (timeouts, JVM starts, subprocess drivers) overlap with the other worker's work. Files go out in collection
# order, which puts the long ones first (tests/conftest.py), not xdist's most-tests-first. PYLOG_TEST_WORKERS=0
# runs it in one process; each worker has its own SparkSession.
WORKERS="${PYLOG_TEST_WORKERS:-2}"
PARALLEL=()
[ "$WORKERS" != 0 ] && PARALLEL=(-n "$WORKERS" --dist loadfile --no-loadscope-reorder)
exec "$PYTHON" -m pytest tests "${PARALLEL[@]}" "$@"
