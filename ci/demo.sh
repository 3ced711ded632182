#!/usr/bin/env bash
# The main job: set up (ci/setup.sh), then run the demo pipeline on the embedded broker.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="$(bash ci/setup.sh | tail -n 1)"
export PYSPARK_PYTHON="$PYTHON"
exec "$PYTHON" ci/demo.py "$@"
