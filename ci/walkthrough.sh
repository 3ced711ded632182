#!/usr/bin/env bash
# A new user's walkthrough: set up (ci/setup.sh), then port a typical Kafka job to pylog, crash it, restart it
# from its checkpoint and prove its output exact (ci/walkthrough.py). Exit status non-zero if the proof fails.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="$(bash ci/setup.sh | tail -n 1)"
export PYSPARK_PYTHON="$PYTHON"
export PYTHONUNBUFFERED=1
exec "$PYTHON" ci/walkthrough.py "$@"
