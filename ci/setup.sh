#!/usr/bin/env bash
# Install everything pylog needs on a fresh Debian machine: Debian packages (kcat, zookeeper),
# then pylog itself with its test and bench extras into the current interpreter
# (or into $PYLOG_VENV when set).  Safe to run again: it skips what is there.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -n "${PYLOG_VENV:-}" ]; then
  [ -x "$PYLOG_VENV/bin/python" ] || python3 -m venv "$PYLOG_VENV"
  PYTHON="$PYLOG_VENV/bin/python"
else
  PYTHON="${PYTHON:-$(command -v python3 || command -v python)}"
fi
# the interpreter itself, not a launcher such as a pyenv shim: callers export it as PYSPARK_PYTHON, and Spark's
# workers are given the fast SPARK_HOME (broker_sim/testing/spark_home.py) only when that is the running interpreter
PYTHON="$("$PYTHON" -c 'import sys; print(sys.executable)')"

need_apt=()
command -v kcat >/dev/null 2>&1 || need_apt+=(kcat)
# a real ZooKeeper for multi-broker clusters (pylog-broker cluster, tests/cluster)
[ -f /usr/share/java/zookeeper.jar ] || need_apt+=(zookeeper)
# Maven fetches Apache Kafka's jars from Maven Central (below) for the tests that compare pylog with Kafka
command -v mvn >/dev/null 2>&1 || need_apt+=(maven)
if [ ${#need_apt[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  echo "ci/setup.sh: installing Debian packages: ${need_apt[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq >/dev/null || echo "ci/setup.sh: apt-get update failed; trying the install anyway" >&2
  $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

check='import importlib.metadata as m, cryptography, testcontainers, kazoo, kafka, aiokafka, confluent_kafka, pyspark, hypothesis, pytest_timeout, xdist, crc32c, jsonschema, numpy, prometheus_client, avro, fastavro, proto_schema_parser, google.protobuf, authlib, grpc, grpc_status, yaml, pandas, zstandard; m.version("pylog")'
# and every requirement pyproject.toml declares (a dependency added since this machine was set up, at its version)
if ! (cd / && "$PYTHON" -c "$check") 2>/dev/null || ! "$PYTHON" ci/requirements_met.py test bench \
    || [ "${PYLOG_REINSTALL:-0}" = 1 ]; then
  echo "ci/setup.sh: installing pylog and its Python dependencies with $PYTHON" >&2
  "$PYTHON" -m pip install -q --disable-pip-version-check -e ".[test,bench]"
fi
# an install from another checkout (an editable one elsewhere) would test that code, not this
here="$(pwd -P)"
where="$(cd / && "$PYTHON" -c 'import broker_sim, os; print(os.path.dirname(os.path.dirname(os.path.realpath(broker_sim.__file__))))' 2>/dev/null || echo "a checkout that is gone")"
# Spark finds format("pylog") through pkgutil.iter_modules(), which does not see the import hook of editable
# installs made before pyproject.toml set package-dir: reinstall those so the checkout is a sys.path entry.
discoverable="$(cd / && "$PYTHON" -c 'import pkgutil; print(any(m.name == "pyspark_pylog" for m in pkgutil.iter_modules()))' 2>/dev/null || echo False)"
if [ "$where" != "$here" ] || [ "$discoverable" != True ]; then
  echo "ci/setup.sh: pointing the pylog install at $here (was $where; Spark-discoverable: $discoverable)" >&2
  "$PYTHON" -m pip install -q --disable-pip-version-check --no-deps -e .
fi
# The compiled Avro decoder (connector/typed/_avro_arrow.c) is built in place by editable installs; rebuild it
# when it is missing or older than its source, or the tests would check only the per-record fallback.
built="$(ls connector/typed/_avro_arrow*.so 2>/dev/null | head -n 1 || true)"
# and the validator's record walk (broker_sim/storage/_records.c), the source's record-batch decoder and the
# sink's encoder (connector/source/_records_arrow.c, connector/sink/_arrow_batches.c), the same way
stale=""
for c in broker_sim/storage/_records.c connector/source/_records_arrow.c connector/sink/_arrow_batches.c; do
  so="$(ls "${c%.c}"*.so 2>/dev/null | head -n 1 || true)"
  if [ -z "$so" ] || [ "$c" -nt "$so" ]; then stale="$c"; fi
done
if [ -z "$built" ] || [ connector/typed/_avro_arrow.c -nt "$built" ] || [ -n "$stale" ]; then
  echo "ci/setup.sh: building the C extensions in place" >&2
  "$PYTHON" -m pip install -q --disable-pip-version-check --no-deps -e .
fi
# Apache Kafka itself (broker_sim/local/kafka.py: jars from Maven Central into ~/.cache/pylog/kafka-<version>, a
# formatted KRaft directory and a class archive for fast starts; nothing when they are there): the oracle that
# tests/kafka, tests/conformance and the kafka_broker fixtures run against
(cd / && "$PYTHON" -m broker_sim.local.kafka fetch >/dev/null) \
  || { echo "ci/setup.sh: could not fetch Apache Kafka's jars (see above)" >&2; exit 1; }
# Spark's own Kafka connector (broker_sim/local/spark_kafka.py: the newest spark-sql-kafka-0-10 served that loads in
# the installed Spark, into ~/.cache/pylog/spark-sql-kafka; nothing when it is there): tests/spark runs
# format("kafka") beside format("pylog") on the same topics
(cd / && "$PYTHON" -m broker_sim.local.spark_kafka fetch >/dev/null) \
  || { echo "ci/setup.sh: could not fetch Spark's Kafka connector (see above)" >&2; exit 1; }
# Bytecode for the checkout's packages: with PYTHONDONTWRITEBYTECODE set (as on CI machines and in the image) every
# broker process, CLI call and Spark Python worker would otherwise compile them again (~0.2 s of CPU each start).
# A .pyc whose source changed since is ignored by Python, so this is only ever a cache.
"$PYTHON" -m compileall -q -j 0 broker_sim connector >/dev/null \
  || echo "ci/setup.sh: compileall failed (slower starts only)" >&2
# A class-data-sharing archive of Spark's driver JVM (broker_sim/testing/spark_cds.py; ~1.5 min once per JVM and Spark): the
# suite's Spark drivers map Spark's classes from it instead of loading them from jars, and start in half the time.
if [ "${PYLOG_SETUP_SPARK_CDS:-0}" = 1 ]; then   # ci/test.sh asks
  (cd / && "$PYTHON" -m broker_sim.testing.spark_cds) || echo "ci/setup.sh: no Spark class archive (slower Spark starts only)" >&2
fi
# Docker for the container tests (tests/containers, tests/spark/test_containers.py), when ci/test.sh asks:
# install Debian's docker.io (and debootstrap, for the local base image) if no engine answers, start dockerd
# if none runs (a running one is left alone), then build the images (ci/build_image.sh; cached after once).
if [ "${PYLOG_SETUP_DOCKER:-0}" = 1 ]; then
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  if ! docker info >/dev/null 2>&1; then
    need=()
    command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
    command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
    if [ ${#need[@]} -gt 0 ]; then
      echo "ci/setup.sh: installing Debian packages: ${need[*]}" >&2
      export DEBIAN_FRONTEND=noninteractive
      $SUDO apt-get update -qq >/dev/null || true
      $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
    fi
    if ! docker info >/dev/null 2>&1; then
      echo "ci/setup.sh: starting dockerd (log: /var/log/pylog-dockerd.log)" >&2
      $SUDO sh -c 'nohup dockerd > /var/log/pylog-dockerd.log 2>&1 &'
      for _ in $(seq 1 120); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
      docker info >/dev/null 2>&1 || { tail -20 /var/log/pylog-dockerd.log >&2; echo "ci/setup.sh: dockerd did not start" >&2; exit 1; }
    fi
  fi
  command -v debootstrap >/dev/null 2>&1 || { export DEBIAN_FRONTEND=noninteractive; $SUDO apt-get install -y -qq debootstrap >/dev/null; }
  PYTHON="$PYTHON" bash ci/build_image.sh
fi
echo "$PYTHON"
