#!/usr/bin/env bash
# Every kind of install in a fresh virtualenv (`pip install .`, `pip install -e .`, a built wheel), each followed by
# a Spark job run from outside the checkout; the suite runs the first two.
#   bash ci/stress_install.sh [extra pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
export PYLOG_INSTALL_MODES="${PYLOG_INSTALL_MODES:-install,editable,wheel}"
export PYTHONUNBUFFERED=1
PYTHON="${PYTHON:-$(bash ci/setup.sh | tail -n 1)}"
export PYSPARK_PYTHON="$PYTHON"
exec "$PYTHON" -m pytest -q -p no:cacheprovider tests/packaging/test_install.py "$@"
