"""A test's missing external dependency (ZooKeeper, Docker, Apache Kafka, Spark's Kafka connector): a skip
here, a failure where it must run.

A bare ``pytest`` on a machine without Debian's ``zookeeper`` package skips
the cluster tests with a reason naming what to install.  Under ``CI=true``, or
with ``PYLOG_REQUIRE_<NAME>=1`` (``PYLOG_REQUIRE_ZOOKEEPER``, ``PYLOG_REQUIRE_DOCKER``,
``PYLOG_REQUIRE_KAFKA``, ``PYLOG_REQUIRE_SPARK_KAFKA``), the same test fails instead: a green run must not
hide that the strongest tests never ran.
"""
from __future__ import annotations

import os

import pytest

_TRUE = ("1", "true", "yes", "on")


def required(name: str) -> bool:
    """True when a missing ``name`` must fail the test: CI=true or PYLOG_REQUIRE_<NAME> set."""
    flag = os.environ.get(f"PYLOG_REQUIRE_{name.upper()}", "")
    return flag.strip().lower() in _TRUE or os.environ.get("CI", "").strip().lower() in _TRUE


def missing(name: str, reason: str):
    """Skip (or fail, when ``required(name)``) a test that needs ``name``, naming why it is missing."""
    if required(name):
        pytest.fail(f"{reason} (a missing {name} fails the test under CI=true or PYLOG_REQUIRE_{name.upper()}=1)",
                    pytrace=False)
    pytest.skip(reason)


def require_zookeeper() -> None:
    """Skip or fail (see ``missing``) unless a ZooKeeper server can be started here."""
    from broker_sim.local.zookeeper import zookeeper_available

    reason = zookeeper_available()
    if reason:
        missing("zookeeper", f"no ZooKeeper for cluster tests: {reason}")


def require_kafka() -> None:
    """Skip or fail (see ``missing``) unless Apache Kafka's jars and java are here (``ci/setup.sh`` fetches them)."""
    from broker_sim.local.kafka import kafka_available

    reason = kafka_available()
    if reason:
        missing("kafka", f"no Apache Kafka to compare with: {reason}")


def require_spark_kafka() -> None:
    """Skip or fail (see ``missing``) unless Spark's own Kafka connector is fetched (``ci/setup.sh`` does it)."""
    from broker_sim.local.spark_kafka import spark_kafka_available

    reason = spark_kafka_available()
    if reason:
        missing("spark_kafka", f"no Spark Kafka connector to compare with: {reason}")
