"""Java applications on broker_sim: a Kafka Streams exactly-once application and a Connect worker.

Kafka Streams (``java/EosCount.java``, compiled against Kafka's jars by the test) copies an input topic and
counts per key with ``exactly_once_v2``: its output, read read_committed, must hold every input record once and
the exact count per key. A Connect worker in distributed mode with exactly-once source support runs Kafka's
FileStreamSource (a file's lines into a topic) and FileStreamSink (the topic back into a file): every line
once, in order, and the sink's file equal to the source's.

In the suite each runs once on broker_sim without faults. ``ci/stress_kafka_apps.sh`` (``PYLOG_STRESS_KAFKA_APPS=1``)
runs them on broker_sim and on Apache Kafka, with more records and a SIGKILL of the application's JVM in the
middle, then a restart that must finish the work exactly once.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from pathlib import Path

import pytest

from broker_sim.local.kafka import compile_java, java_command
from broker_sim.local.zookeeper import free_port

STRESS = os.environ.get("PYLOG_STRESS_KAFKA_APPS", "") == "1"
BROKERS = ["pylog", "kafka"] if STRESS else ["pylog"]
RECORDS = 60_000 if STRESS else 5_000
KEYS = 37
DEADLINE_S = 240 if STRESS else 120
JAVA_SOURCES = Path(__file__).parent / "java"


@pytest.fixture(params=BROKERS)
def broker(request):
    """broker_sim (a fresh in-process broker) or, in the stress variant, also the session's Apache Kafka."""
    from broker_sim.testing.pytest_plugin import AnyBroker

    if request.param == "pylog":
        return AnyBroker("pylog", request.getfixturevalue("pylog_broker"))
    return AnyBroker("kafka", request.getfixturevalue("kafka_broker"))


@pytest.fixture(scope="module")
def streams_classes(tmp_path_factory):
    from broker_sim.testing.requirements import require_kafka

    require_kafka()
    return compile_java([JAVA_SOURCES / "EosCount.java"], tmp_path_factory.mktemp("streams-classes"))


def _create_topics(bootstrap: str, *names: str, partitions: int = 3) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(n, partitions, 1) for n in names]).values():
        future.result(30)


def _produce(bootstrap: str, topic: str, values) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in values:
        producer.produce(topic, key=f"k{i % KEYS}".encode(), value=str(i).encode())
        producer.poll(0)
    assert producer.flush(60) == 0


def _read_committed(bootstrap: str, topic: str, idle_s: float = 3.0) -> list[tuple[str | None, str]]:
    """Every record of ``topic`` a read_committed consumer sees until ``idle_s`` pass without one."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:8]}",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    try:
        metadata = consumer.list_topics(topic, timeout=30).topics[topic]
        consumer.assign([TopicPartition(topic, p, 0) for p in metadata.partitions])
        records, quiet_since = [], time.monotonic()
        while time.monotonic() - quiet_since < idle_s:
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            key = message.key()
            records.append((key.decode() if key is not None else None, message.value().decode()))
            quiet_since = time.monotonic()
        return records
    finally:
        consumer.close()


def _wait_for(what: str, predicate, timeout_s: float, process: subprocess.Popen | None = None, log: Path | None = None):
    deadline = time.monotonic() + timeout_s
    while True:
        result = predicate()
        if result:
            return result
        if process is not None and process.poll() is not None:
            raise AssertionError(f"{what}: the process exited with {process.returncode}; "
                                 f"log:\n{log.read_text()[-3000:] if log else ''}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s:g} s; log:\n{log.read_text()[-3000:] if log else ''}")
        time.sleep(0.5)


def _spawn(command: list[str], log: Path) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)


def _end(process: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
    if process.poll() is None:
        os.killpg(process.pid, sig)
        try:
            process.wait(40)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


def test_kafka_streams_exactly_once_counts_every_record_once(broker, streams_classes, tmp_path):
    """Kafka Streams with exactly_once_v2 (transactions, a changelog, group rebalances): the copied topic holds
    each input record once and the last count per key is the number of inputs with that key — in the stress
    variant across a SIGKILL of the application and its restart."""
    tag = uuid.uuid4().hex[:8]
    source, copied, counts = f"streams-in-{tag}", f"streams-copied-{tag}", f"streams-counts-{tag}"
    _create_topics(broker.bootstrap_servers, source, copied, counts)
    _produce(broker.bootstrap_servers, source, range(RECORDS // 2))
    command = java_command("EosCount", [broker.bootstrap_servers, f"eos-{tag}", source, copied, counts,
                                        str(tmp_path / "state"), str(DEADLINE_S + 60)],
                           extra_classpath=[streams_classes], heap="384m")
    log = tmp_path / "streams.log"
    app = _spawn(command, log)
    try:
        if STRESS:   # kill -9 once some of the first half is through, then start the same application again
            _wait_for("a third of the records copied",
                      lambda: len(_read_committed(broker.bootstrap_servers, copied, 1.0)) >= RECORDS // 6,
                      DEADLINE_S, app, log)
            _end(app, signal.SIGKILL)
            app = _spawn(command, log)
        _produce(broker.bootstrap_servers, source, range(RECORDS // 2, RECORDS))
        _wait_for("every record copied",
                  lambda: len(_read_committed(broker.bootstrap_servers, copied, 1.0)) >= RECORDS, DEADLINE_S, app, log)
        time.sleep(1.0)   # a commit interval for the last counts
        copies = Counter(value for _, value in _read_committed(broker.bootstrap_servers, copied))
        assert sorted(int(v) for v in copies) == list(range(RECORDS))
        assert max(copies.values()) == 1, [v for v, n in copies.items() if n > 1][:10]
        final: dict[str, str] = {}
        for key, value in _read_committed(broker.bootstrap_servers, counts):
            final[key] = value
        expected = Counter(f"k{i % KEYS}" for i in range(RECORDS))
        assert {k: int(v) for k, v in final.items()} == dict(expected)
    finally:
        _end(app)


def _rest(port: int, method: str, path: str, body: dict | None = None):
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        text = response.read().decode()
        return json.loads(text) if text else None


def _rest_up(port: int) -> bool:
    try:
        return "version" in (_rest(port, "GET", "/") or {})
    except (OSError, urllib.error.URLError, ValueError):
        return False


def test_connect_distributed_exactly_once_source_and_sink(broker, tmp_path):
    """A Connect worker (distributed mode: its config, offset and status topics, a group) with exactly-once
    source support moves a file's lines into a topic once each and in order, and a sink connector writes them
    back to a file — in the stress variant across a SIGKILL of the worker and its restart."""
    from broker_sim.testing.requirements import require_kafka

    require_kafka()
    tag = uuid.uuid4().hex[:8]
    topic = f"connect-lines-{tag}"
    _create_topics(broker.bootstrap_servers, topic, partitions=1)
    source_file, sink_file = tmp_path / "source.txt", tmp_path / "sink.txt"
    lines = [f"line-{i}" for i in range(RECORDS)]
    source_file.write_text("\n".join(lines[:RECORDS // 2]) + "\n")
    port = free_port()
    worker = tmp_path / "worker.properties"
    worker.write_text("\n".join([
        f"bootstrap.servers={broker.bootstrap_servers}", f"group.id=connect-{tag}",
        "key.converter=org.apache.kafka.connect.storage.StringConverter",
        "value.converter=org.apache.kafka.connect.storage.StringConverter",
        f"offset.storage.topic=connect-offsets-{tag}", f"config.storage.topic=connect-configs-{tag}",
        f"status.storage.topic=connect-status-{tag}", "offset.storage.replication.factor=1",
        "config.storage.replication.factor=1", "status.storage.replication.factor=1",
        "offset.storage.partitions=3", "status.storage.partitions=1", "offset.flush.interval.ms=500",
        "exactly.once.source.support=enabled", f"listeners=http://127.0.0.1:{port}",
        "rest.advertised.host.name=127.0.0.1", "plugin.discovery=only_scan", ""]))
    command = java_command("org.apache.kafka.connect.cli.ConnectDistributed", [str(worker)], heap="384m")
    log = tmp_path / "connect.log"
    process = _spawn(command, log)
    try:
        _wait_for("Connect's REST API", lambda: _rest_up(port), DEADLINE_S, process, log)
        _rest(port, "POST", "/connectors", {"name": f"file-source-{tag}", "config": {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector", "tasks.max": "1",
            "file": str(source_file), "topic": topic, "exactly.once.support": "required"}})
        _rest(port, "POST", "/connectors", {"name": f"file-sink-{tag}", "config": {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector", "tasks.max": "1",
            "file": str(sink_file), "topics": topic}})
        if STRESS:
            _wait_for("some lines in the topic",
                      lambda: len(_read_committed(broker.bootstrap_servers, topic, 1.0)) >= RECORDS // 6,
                      DEADLINE_S, process, log)
            _end(process, signal.SIGKILL)
            process = _spawn(command, log)
            _wait_for("Connect's REST API after the restart", lambda: _rest_up(port), DEADLINE_S, process, log)
        with open(source_file, "a") as f:
            f.write("\n".join(lines[RECORDS // 2:]) + "\n")
        _wait_for("every line in the topic",
                  lambda: len(_read_committed(broker.bootstrap_servers, topic, 1.0)) >= RECORDS, DEADLINE_S,
                  process, log)
        assert [value for _, value in _read_committed(broker.bootstrap_servers, topic)] == lines
        _wait_for("the sink's file complete",
                  lambda: sink_file.exists() and len(sink_file.read_text().splitlines()) >= RECORDS,
                  DEADLINE_S, process, log)
        written = sink_file.read_text().splitlines()
        assert set(written) == set(lines)            # every line reached the sink's file
        if not STRESS:                               # at-least-once: a restarted sink may write a line again
            assert written == lines
    finally:
        _end(process)
