#!/usr/bin/env bash
# Benchmark pylog's broker against Tansu and print ONE JSON document on stdout.
#
#   ci/bench.sh                              # 1,000,000 x 100 B records, 3 alternating rounds
#   ci/bench.sh --records 100000 --rounds 1  # any `pylog bench` option passes through
#   PYLOG_VENV=.venv ci/bench.sh --output bench.json   # set up and run in a virtualenv
#
# Progress and per-workload summaries go to stderr. This is a measurement, never
# a pass/fail test: the JSON records workload errors and skipped brokers, and
# the exit status is non-zero only for bad options or a crash of the tool itself.
# See `pylog bench --help` and broker_sim/bench/runner.py for what is measured.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="$(bash ci/setup.sh | tail -n 1)"
exec "$PYTHON" -m broker_sim.tools.cli bench "$@"
