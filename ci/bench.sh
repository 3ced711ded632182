#!/usr/bin/env bash
# Benchmark pylog's broker against Tansu and print ONE JSON document on stdout.
#
#   ci/bench.sh                              # 1,000,000 x 100 B records, 3 alternating rounds
#   ci/bench.sh --records 100000 --rounds 1  # any `pylog bench` option passes through
#   PYLOG_VENV=.venv ci/bench.sh --output bench.json   # set up and run in a virtualenv
#   PYLOG_BENCH_RDKAFKA=0 ci/bench.sh        # without librdkafka's rdkafka_performance workloads
#
# Progress and per-workload summaries go to stderr. This is a measurement, never
# a pass/fail test: the JSON records workload errors and skipped brokers, and
# the exit status is non-zero only for bad options or a crash of the tool itself.
# See `pylog bench --help` and broker_sim/bench/runner.py for what is measured.
# The throughput workload also runs rdkafka_performance, built once by ci/build_rdkafka_perf.sh (never by
# ci/setup.sh or ci/test.sh: the test suite does not need it); a failed build only leaves those workloads out.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="$(bash ci/setup.sh | tail -n 1)"
extra=()
if [ "${PYLOG_BENCH_RDKAFKA:-1}" != 0 ] && [[ " $* " != *" --workload "* || " $* " == *" --workload throughput "* ]] \
   && [[ " $* " != *" --rdkafka-performance "* ]]; then
  if perf="$(PYTHON="$PYTHON" bash ci/build_rdkafka_perf.sh | tail -n 1)" && [ -x "$perf" ]; then
    extra=(--rdkafka-performance "$perf")
  else
    echo "ci/bench.sh: rdkafka_performance could not be built; its workloads are left out" >&2
  fi
fi
exec "$PYTHON" -m broker_sim.tools.cli bench "${extra[@]}" "$@"
