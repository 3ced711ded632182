#!/usr/bin/env bash
# Set up (ci/setup.sh) and run the whole test suite.  Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="$(bash ci/setup.sh | tail -n 1)"
export PYSPARK_PYTHON="$PYTHON"
export PYTHONUNBUFFERED=1
exec "$PYTHON" -m pytest tests "$@"
