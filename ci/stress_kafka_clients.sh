#!/usr/bin/env bash
# Kafka's Java clients through Kafka's own test tools, on broker_sim and on Apache Kafka: the perf tools with
# 200k records, three rounds alternating brokers (medians printed), and the verifiable idempotent producer and
# transactional copier with more records and three broker restarts while they run; every acknowledged value
# consumed once (tests/kafka/test_java_clients.py; the suite runs a short variant).
#   bash ci/stress_kafka_clients.sh [extra pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
export PYLOG_STRESS_KAFKA_CLIENTS=1
export PYTHONUNBUFFERED=1
exec "${PYTHON:-python}" -m pytest tests/kafka/test_java_clients.py -q -s -p no:benchmark "$@"
