"""One session-scoped local[2] SparkSession for every Spark test (the kit's ``pylog_spark``, as ``spark``), and
the brokers the tests run on.

``broker`` runs a test twice: on a fresh in-process broker_sim and on the session's Apache Kafka node
(``kafka_broker``), where a test passes only if the connector works against Kafka itself. Kafka's node is
shared by every test of a worker, so a test names its topics and groups with ``broker.name(base)`` (unique per
test, on both brokers alike). Kafka has no Schema Registry: on Kafka, ``broker.schema_registry_url`` is that of
a broker_sim started for its registry only, the data staying on Kafka.
"""
from __future__ import annotations

import os
import sys
import uuid

import pytest

os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable


def _spark_kafka_jars() -> str:
    """Spark's own Kafka connector for the shared session (format("kafka") beside format("pylog")), if fetched."""
    from broker_sim.local.spark_kafka import SparkKafkaUnavailable, spark_kafka_jars

    try:
        return ",".join(spark_kafka_jars())
    except SparkKafkaUnavailable:
        return ""   # the spark_kafka fixture skips (or fails under CI=true) the tests that need it


@pytest.fixture(scope="session")
def pylog_spark_config():
    """The kit's session, plus Spark's own Kafka connector (when fetched) for format("kafka") tests."""
    jars = _spark_kafka_jars()
    return {"spark.jars": jars} if jars else {}


@pytest.fixture(scope="session")
def spark(pylog_spark):
    """The suite's name for ``pylog_spark``."""
    return pylog_spark


@pytest.fixture
def spark_kafka(spark):
    """The shared session, for a test that also runs Spark's own ``format("kafka")``: skipped (failed under
    CI=true) when ``python -m broker_sim.local.spark_kafka fetch`` has not fetched the connector."""
    from broker_sim.testing.requirements import require_spark_kafka

    require_spark_kafka()
    return spark


class SparkBroker:
    """The broker one run of a test talks to: ``kind`` ("pylog" or "kafka"), ``bootstrap_servers``,
    ``schema_registry_url`` and ``name(base)``."""

    def __init__(self, kind: str, server, request) -> None:
        self.kind = kind
        self.server = server
        self.bootstrap_servers = server.bootstrap_servers
        self._request = request
        self._suffix = uuid.uuid4().hex[:8]

    def name(self, base: str) -> str:
        """``base`` made unique to this test: a topic, group or transactional id no other test uses."""
        return f"{base}-{self._suffix}"

    @property
    def schema_registry_url(self) -> str:
        if self.kind == "pylog":
            return self.server.schema_registry_url
        return self._request.getfixturevalue("pylog_broker").schema_registry_url

    def __repr__(self) -> str:
        return f"SparkBroker({self.kind}, {self.bootstrap_servers})"


@pytest.fixture(params=["pylog", "kafka"])
def broker(request):
    """The test runs twice: on a fresh ``pylog_broker`` and on the session's ``kafka_broker``."""
    server = request.getfixturevalue("pylog_broker" if request.param == "pylog" else "kafka_broker")
    return SparkBroker(request.param, server, request)
