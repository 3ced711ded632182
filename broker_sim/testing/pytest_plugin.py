"""pytest plugin shipped with pylog (entry point ``pytest11``): broker fixtures for users' tests.

Install pylog and write::

    def test_roundtrip(pylog_broker):
        producer = KafkaProducer(bootstrap_servers=pylog_broker.bootstrap_servers)
        ...

``pylog_broker`` is a fresh in-process broker for each test, on 127.0.0.1 and
an ephemeral port, with its data in pytest's ``tmp_path``; it is stopped when
the test ends.  ``pylog_broker_factory`` starts brokers with configs of your
choice (``pylog_broker_factory(config={"num.partitions": 3})``).  Both serve a
Schema Registry on an ephemeral port (``broker.schema_registry_url``;
``pylog_schema_registry_url`` is ``pylog_broker``'s; give
``schema.registry.listeners=""`` to turn it off).  ``pylog_secured_broker``
(needs ``cryptography``, in ``pylog[test]``) is a broker with a throwaway CA, one SASL_SSL listener,
SCRAM users and ACLs enforced (``broker_sim.testing.secured.SecuredBroker``: ``kafka_python()``,
``confluent()``, ``spark_options()`` give each client's settings; ``add_user`` and ``allow`` go
through the admin API; its Schema Registry is on, https with Basic auth: ``schema_registry()``), so users
test their secured pipelines locally.

The pipeline test kit (``pip install "pylog[testing]"``; docs/testing.md): ``pylog_spark`` is a session's
SparkSession set up for tests (``broker_sim.testing.spark``; ``pylog_spark_config`` to override its static
confs, ``pylog_spark_factory`` for sessions with runtime confs, ``pylog_spark_connect`` through a local Spark
Connect server), ``pylog_topics`` the topics a ``@pytest.mark.pylog_topics(...)`` names, created on
``pylog_broker``; ``pylog_faults`` injects Kafka errors, delays and disconnects into ``pylog_broker``'s answers
and takes it down or restarts it (``broker_sim.testing.faults``); ``pylog_clock`` and ``pylog_clocked_broker``
are a broker clock the test moves and a broker on it with its periodic checks every 100 ms
(``broker_sim.testing.timing``). Seeding, reading, running queries and assertions are functions of
``broker_sim.testing``.

With Docker (``pip install "pylog[containers]"`` and the images from ``bash ci/build_image.sh``):
``pylog_container`` is one broker container for the whole session (``.get_bootstrap_server()``) and
``pylog_topic`` a fresh topic name per test on it; ``pylog_container_factory`` starts containers of your
own for one test, with broker configs and pinned host ports for the broker and its Schema Registry
(``pylog_container_factory(config={"num.partitions": 3}, port=19092, schema_registry_port=18081)``; the
container's ``get_schema_registry_url()`` is ``http://127.0.0.1:18081``); ``pylog_cluster_containers`` is
ZooKeeper and three broker containers with kill/pause/partition faults (``broker_sim.testing.containers``),
one per module.
They skip, naming why, when no Docker engine answers — unless ``PYLOG_REQUIRE_DOCKER=1`` or ``CI=true``,
where they fail instead.

Apache Kafka itself, for tests that must hold on Kafka too (``python -m broker_sim.local.kafka fetch`` gets
its jars; ``broker_sim.local.kafka``): ``kafka_broker`` is one KRaft node for the whole session (tests share it,
so give topics and groups names of their own), ``kafka_broker_factory(config={...})`` starts nodes with configs
of your choice for one test, and ``kafka_cluster`` is three nodes (each a broker and a controller) for one
module, with kill/pause/restart. ``any_broker`` runs a test twice, on a fresh ``pylog_broker`` and on
``kafka_broker`` (``any_broker.kind`` is ``"pylog"`` or ``"kafka"``): what passes on both is Kafka's behaviour.
Without Kafka's jars they skip, naming how to get them (fail under ``CI=true`` or ``PYLOG_REQUIRE_KAFKA=1``).

The in-process fixtures set ``group.initial.rebalance.delay.ms`` to 0 unless you give it, as
Kafka's own test harness does: the broker's default (Kafka's 3000) makes a new
group wait 3 s for more members before its first rebalance, which saves
rebalances in production but costs every group test 3 s.

kafka-python 3.x loads its message schemas with ``importlib.resources``'
legacy ``read_text``, which warns once per schema: some 200
DeprecationWarnings on every import of ``kafka``, which the broker (and any
test that talks to it) does. ``pytest_configure`` filters exactly those two
messages, as attributed to kafka-python's loader and to the legacy function
it calls; every other warning reaches the user as before, and ``-W`` or a
user's own ``filterwarnings`` still wins over these ini-level filters.
"""
from __future__ import annotations

import pytest

from broker_sim.testing.data import MARKER as TOPICS_MARKER, pylog_topics
from broker_sim.testing.faults import pylog_faults
from broker_sim.testing.spark import (pylog_spark, pylog_spark_config, pylog_spark_connect, pylog_spark_connect_url,
                                      pylog_spark_factory)

# fixtures defined beside the code they drive, offered by this plugin
KIT_FIXTURES = (pylog_topics, pylog_faults, pylog_spark, pylog_spark_config, pylog_spark_factory,
                pylog_spark_connect_url, pylog_spark_connect)

TEST_CONFIG = {"group.initial.rebalance.delay.ms": "0"}
# the in-process fixtures' brokers serve a Schema Registry too (Broker.schema_registry_url), on any free port
REGISTRY_CONFIG = {"schema.registry.listeners": "http://127.0.0.1:0"}

KAFKA_PYTHON_WARNINGS = (
    "ignore:read_text is deprecated:DeprecationWarning:kafka.protocol.schemas.load_json",
    "ignore:open_text is deprecated:DeprecationWarning:importlib.resources._legacy",
)


def pytest_configure(config):
    for line in KAFKA_PYTHON_WARNINGS:
        config.addinivalue_line("filterwarnings", line)
    config.addinivalue_line("markers", TOPICS_MARKER)


@pytest.fixture
def pylog_broker_factory(tmp_path_factory):
    from broker_sim.server.broker import Broker

    started = []

    def start(config=None, data_dir=None, **kwargs):
        directory = data_dir or tmp_path_factory.mktemp("pylog-broker")
        config = {**TEST_CONFIG, **REGISTRY_CONFIG, **(config or {})}
        broker = Broker(directory, host="127.0.0.1", port=0, config=config, **kwargs).start()
        started.append(broker)
        return broker

    yield start
    for broker in started:
        broker.stop()


@pytest.fixture
def pylog_broker(pylog_broker_factory):
    return pylog_broker_factory()


@pytest.fixture
def pylog_clock():
    """A broker clock this test moves (``broker_sim.testing.timing.BrokerClock``): ``advance(minutes=5)``."""
    from broker_sim.testing.timing import BrokerClock

    return BrokerClock()


@pytest.fixture
def pylog_clocked_broker(pylog_broker_factory, pylog_clock):
    """A ``pylog_broker`` whose time is ``pylog_clock`` and whose periodic checks run every 100 ms
    (``timing.FAST_TIMERS``): retention, transaction timeouts, session and offset expiry follow an advance
    within about a second."""
    from broker_sim.testing.timing import clocked_broker

    return clocked_broker(pylog_broker_factory, pylog_clock)


@pytest.fixture
def pylog_schema_registry_url(pylog_broker):
    """The Schema Registry URL of ``pylog_broker`` (``http://127.0.0.1:<port>``)."""
    return pylog_broker.schema_registry_url


@pytest.fixture
def pylog_secured_broker(tmp_path_factory):
    from broker_sim.testing.secured import SecuredBroker

    secured = SecuredBroker(tmp_path_factory.mktemp("pylog-secured")).start()
    yield secured
    secured.stop()


def _require_docker() -> None:
    from broker_sim.testing.containers import docker_unavailable
    from broker_sim.testing.requirements import missing

    reason = docker_unavailable()
    if reason:
        missing("docker", reason)


@pytest.fixture(scope="session")
def pylog_container():
    """One pylog broker container for the session (testcontainers; ports published on 127.0.0.1)."""
    _require_docker()
    from broker_sim.testing.containers import PylogContainer

    container = PylogContainer(configs=TEST_CONFIG).start()
    try:
        yield container
    finally:
        container.stop()


@pytest.fixture
def pylog_container_factory():
    """Start pylog broker containers for this test: ``start(config=None, port=None, schema_registry_port=None,
    **configs)``.

    ``config`` holds broker configs by Kafka's names (``{"num.partitions": 3}``), keyword arguments spell
    them with underscores (``num_partitions=3``); ``port`` pins the host port the broker is published on
    (127.0.0.1) and advertises, e.g. for a client configured ahead of the test, and ``schema_registry_port``
    the one its Schema Registry is published on (``get_schema_registry_url()``); None: ephemeral ports.
    Every container started is removed when the test ends, also one whose start failed.
    """
    _require_docker()
    from broker_sim.testing.containers import PylogContainer

    started = []

    def start(config: dict | None = None, port: int | None = None, schema_registry_port: int | None = None,
              **configs) -> PylogContainer:
        container = PylogContainer(host_port=port, schema_registry_port=schema_registry_port,
                                   configs={**TEST_CONFIG, **(config or {})}, **configs)
        started.append(container)
        return container.start()

    yield start
    errors = []
    for container in started:
        try:
            container.stop()
        except Exception as exc:  # noqa: BLE001 - remove the others, then report
            errors.append(f"{container.alias}: {exc}")
    if errors:
        raise RuntimeError(f"could not remove pylog containers: {errors}")


@pytest.fixture
def pylog_topic(request):
    """A topic name of this test's own (the session's container is shared)."""
    import re
    import uuid

    return f"{re.sub(r'[^A-Za-z0-9._-]', '-', request.node.name)[:180]}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def pylog_cluster_containers():
    """ZooKeeper and three pylog broker containers on a network of their own, healed and removed after."""
    _require_docker()
    from broker_sim.testing.containers import PylogClusterContainers

    cluster = PylogClusterContainers(brokers=3).start()
    try:
        yield cluster
    finally:
        cluster.stop()


def _require_kafka() -> None:
    from broker_sim.testing.requirements import require_kafka

    require_kafka()


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory):
    """One Apache Kafka node (KRaft, broker and controller) for the session: ``.bootstrap_servers``."""
    _require_kafka()
    from broker_sim.local.kafka import KafkaServer

    with KafkaServer(tmp_path_factory.mktemp("kafka-broker"), configs=TEST_CONFIG) as server:
        yield server


@pytest.fixture
def kafka_broker_factory(tmp_path_factory):
    """Start Apache Kafka nodes for this test: ``start(config=None)`` with broker configs by Kafka's names."""
    _require_kafka()
    from broker_sim.local.kafka import KafkaServer

    started = []

    def start(config: dict | None = None, **kwargs):
        server = KafkaServer(tmp_path_factory.mktemp("kafka-broker"), configs={**TEST_CONFIG, **(config or {})},
                             **kwargs)
        started.append(server)
        return server.start()

    yield start
    for server in started:
        server.stop_all()


@pytest.fixture(scope="module")
def kafka_cluster(tmp_path_factory):
    """Three Apache Kafka nodes (ids 1-3, each a broker and a KRaft voter) for one module."""
    _require_kafka()
    from broker_sim.local.kafka import KafkaCluster

    with KafkaCluster(tmp_path_factory.mktemp("kafka-cluster"), brokers=3, configs=TEST_CONFIG) as cluster:
        yield cluster


class AnyBroker:
    """One of the two brokers a test runs on: ``kind`` ("pylog" or "kafka") and its ``bootstrap_servers``."""

    def __init__(self, kind: str, server) -> None:
        self.kind = kind
        self.server = server
        self.bootstrap_servers = server.bootstrap_servers
        self.host, port = self.bootstrap_servers.split(",")[0].rsplit(":", 1)
        self.port = int(port)

    def __repr__(self) -> str:
        return f"AnyBroker({self.kind}, {self.bootstrap_servers})"


@pytest.fixture(params=["pylog", "kafka"])
def any_broker(request):
    """The test runs twice: on a fresh ``pylog_broker`` and on the session's ``kafka_broker``."""
    if request.param == "pylog":
        return AnyBroker("pylog", request.getfixturevalue("pylog_broker"))
    return AnyBroker("kafka", request.getfixturevalue("kafka_broker"))
