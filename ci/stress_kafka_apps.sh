#!/usr/bin/env bash
# Java applications under faults, on broker_sim and on Apache Kafka: a Kafka Streams exactly_once_v2 application
# and a Connect worker (exactly-once source, file sink), each SIGKILLed mid-run and restarted; the output must hold
# every record exactly once (tests/kafka/test_streams_connect.py; the suite runs a short variant on broker_sim).
#   bash ci/stress_kafka_apps.sh [extra pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
export PYLOG_STRESS_KAFKA_APPS=1
export PYTHONUNBUFFERED=1
exec "${PYTHON:-python}" -m pytest tests/kafka/test_streams_connect.py -q -p no:benchmark "$@"
