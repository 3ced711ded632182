"""Kafka's Java clients, through Kafka's own test tools, on broker_sim and on Apache Kafka.

1. ``kafka-producer-perf-test`` (acks=all) then ``kafka-consumer-perf-test`` on the same topic, brokers taken in
   turn: both exit 0 and count every record; their records/s are printed beside each other.
2. ``kafka-verifiable-producer`` (idempotent, acks=-1) while the broker is restarted under it, then
   ``kafka-verifiable-consumer`` (classic group, from the earliest offset): every acknowledged value is consumed
   once, at the partition and offset its acknowledgement named.
3. Transactions as Kafka's system tests check them: ``TransactionalMessageCopier`` copies an input topic into an
   output topic in transactions (consumed offsets committed in each, a third of them aborted on purpose) while
   the broker is restarted; a read_committed verifiable consumer of the output sees each input value exactly
   once, and a read_uncommitted reader of it sees the aborted copies too (so the filter was tested).

A restart on broker_sim SIGKILLs a ``python -m broker_sim`` process and starts it again on its port and data
directory; on Kafka it stops a node of its own (controlled shutdown) and starts it again with the same ports and
log directory. The clients ride over the downtime with their retries (``delivery.timeout.ms`` 120 s).
``ci/stress_kafka_clients.sh`` (``PYLOG_STRESS_KAFKA_CLIENTS=1``) runs more records, more restarts and three
perf rounds per broker.
"""
from __future__ import annotations

import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from broker_sim.local.kafka import java_command, run_tool
from broker_sim.testing.waiting import wait_until

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "integration"))

from client_helpers import BrokerProcess, free_port  # noqa: E402

STRESS = os.environ.get("PYLOG_STRESS_KAFKA_CLIENTS", "") == "1"
PERF_RECORDS = 200_000 if STRESS else 50_000
PERF_ROUNDS = 3 if STRESS else 1
VERIFIABLE_RECORDS = 30_000 if STRESS else 6_000   # at PRODUCE_RATE, a restart lands with ~3 s of sends left
# the copier reads input produced before it starts, at full speed (~20k records/s): enough that the rest after
# half of it outlasts the progress poll (0.2 s) and the kill, so the restart lands while it copies
COPIED_RECORDS = 60_000 if STRESS else 20_000
PRODUCE_RATE = 1_000   # records/s: every restart (Kafka: ~4 s each with its controlled shutdown) lands while the producer runs
RESTARTS = 3 if STRESS else 1
DOWNTIME_S = 2.0
DEADLINE_S = 300 if STRESS else 90
# the verifiable producer sets retries=0 unless its config says otherwise; these are the producer's own defaults
# but for a delivery timeout long enough for the restarts
CLIENT_RETRIES = {"retries": "2147483647", "delivery.timeout.ms": "120000"}
_PRODUCER_RATE = re.compile(r"(\d+) records sent, ([\d.]+) records/sec")


# --------------------------------------------------------------------------- brokers

class RestartableBroker:
    """broker_sim in its own process, or an Apache Kafka node of this test's: ``restart()`` takes it down for
    ``DOWNTIME_S`` and brings it back on the same address and data."""

    def __init__(self, kind: str, server) -> None:
        self.kind = kind
        self.server = server
        self.bootstrap_servers = server.bootstrap_servers

    def restart(self) -> None:
        if self.kind == "pylog":
            self.server.kill()
            time.sleep(DOWNTIME_S)
            self.server.start()
        else:
            self.server.stop()
            time.sleep(DOWNTIME_S)
            self.server.restart(1)

    def log_tail(self) -> str:
        path = self.server.log_path if self.kind == "pylog" else self.server.log_path(1)
        return path.read_text(errors="replace")[-3000:]


@pytest.fixture(params=["pylog", "kafka"])
def broker(request, tmp_path):
    from broker_sim.testing.pytest_plugin import TEST_CONFIG
    from broker_sim.testing.requirements import require_kafka

    require_kafka()
    if request.param == "kafka":
        yield RestartableBroker("kafka", request.getfixturevalue("kafka_broker_factory")())
        return
    process = BrokerProcess(tmp_path / "pylog-data", free_port(), {**TEST_CONFIG, "schema.registry.listeners": ""})
    try:
        yield RestartableBroker("pylog", process.start())
    finally:
        process.kill()


def _create_topics(bootstrap: str, *names: str, partitions: int = 3) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(n, partitions, 1) for n in names]).values():
        future.result(30)


# --------------------------------------------------------------------------- JVM processes

class JavaTool:
    """One of Kafka's tools in its own process group: stdout (JSON lines) to a file, stderr to another."""

    def __init__(self, main_class: str, args: list[str], directory: Path, name: str) -> None:
        self.stdout_path, self.stderr_path = directory / f"{name}.out", directory / f"{name}.err"
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            self.process = subprocess.Popen(java_command(main_class, args), stdout=out, stderr=err,
                                            stdin=subprocess.DEVNULL, start_new_session=True)

    def events(self) -> list[dict]:
        """The JSON objects printed so far (a line cut by a read in the middle of its write is left out)."""
        events = []
        for line in self.stdout_path.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                try:
                    events.append(json.loads(line))
                except ValueError:
                    pass
        return events

    def wait(self, timeout_s: float) -> list[dict]:
        """Its events once it exited 0; AssertionError with its output if it failed or ran past ``timeout_s``."""
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.stop()
            raise AssertionError(f"still running after {timeout_s:g} s; {self.describe()}")
        assert self.process.returncode == 0, f"exited {self.process.returncode}; {self.describe()}"
        return self.events()

    def wait_for(self, what: str, predicate, timeout_s: float) -> None:
        """Until ``predicate(events)`` holds; fails at once if the process exits first, either way with its output."""
        def reached() -> bool:
            if predicate(self.events()):
                return True
            if self.process.poll() is not None:
                raise AssertionError(f"exited {self.process.returncode} before {what}")
            return False

        try:
            wait_until(reached, timeout_s=timeout_s, what=what, interval_s=0.2, retry_on=())
        except AssertionError as failure:
            raise AssertionError(f"{failure}; {self.describe()}") from None

    def describe(self) -> str:
        return (f"stdout ends:\n{self.stdout_path.read_text(errors='replace')[-1500:]}\n"
                f"stderr ends:\n{self.stderr_path.read_text(errors='replace')[-3000:]}")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)


def _properties(path: Path, settings: dict[str, str]) -> str:
    path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    return str(path)


def _verifiable_producer(broker, topic: str, count: int, directory: Path, rate: int = PRODUCE_RATE) -> JavaTool:
    config = _properties(directory / "producer.properties", {"enable.idempotence": "true", **CLIENT_RETRIES})
    return JavaTool("org.apache.kafka.tools.VerifiableProducer",
                    ["--bootstrap-server", broker.bootstrap_servers, "--topic", topic, "--max-messages", str(count),
                     "--acks", "-1", "--throughput", str(rate), "--producer.config", config],
                    directory, "producer")


def _acked(events: list[dict]) -> dict[str, tuple[int, int]]:
    """value -> (partition, offset) of every acknowledged send; fails on a send error or a value acked twice."""
    errors = [e for e in events if e.get("name") == "producer_send_error"]
    assert not errors, errors[:5]
    acked: dict[str, tuple[int, int]] = {}
    for event in events:
        if event.get("name") == "producer_send_success":
            assert event["value"] not in acked, event
            acked[event["value"]] = (event["partition"], event["offset"])
    return acked


def _acked_count(events: list[dict]) -> int:
    return sum(1 for e in events if e.get("name") == "producer_send_success")


def _consume(broker, topic: str, count: int, directory: Path, name: str, config: dict[str, str]) -> list[dict]:
    """The record_data events of a verifiable consumer (classic group, earliest) that stopped after ``count``."""
    settings = _properties(directory / f"{name}.properties", config)
    consumer = JavaTool("org.apache.kafka.tools.VerifiableConsumer",
                        ["--bootstrap-server", broker.bootstrap_servers, "--topic", topic,
                         "--group-id", f"{name}-{uuid.uuid4().hex[:8]}", "--group-protocol", "classic",
                         "--max-messages", str(count), "--reset-policy", "earliest", "--verbose",
                         "--consumer.config", settings], directory, name)
    try:
        events = consumer.wait(DEADLINE_S)
    finally:
        consumer.stop()
    assert sum(e["count"] for e in events if e.get("name") == "records_consumed") == count
    return [e for e in events if e.get("name") == "record_data"]


def _duplicates(values) -> list[str]:
    return [value for value, n in Counter(values).items() if n > 1]


def _restart_while(broker, tool: JavaTool, progress, total: int) -> None:
    """Restart ``broker`` RESTARTS times, each once ``progress(events)`` passed the next share of ``total``; the
    tool must still be running after each (or the restart tested nothing)."""
    for i in range(1, RESTARTS + 1):
        share = total * i // (RESTARTS + 1)
        tool.wait_for(f"{share} of {total} done", lambda events: progress(events) >= share, DEADLINE_S)
        broker.restart()
        assert tool.process.poll() is None, f"finished during restart {i}; {tool.describe()}"


# --------------------------------------------------------------------------- 1. perf tools

def _perf_round(bootstrap: str, topic: str) -> tuple[float, float, float]:
    """Producer records/s, consumer records/s (with its group join) and the consumer's fetch-only records/s."""
    produced = run_tool("kafka-producer-perf-test", "--topic", topic, "--num-records", str(PERF_RECORDS),
                        "--record-size", "100", "--throughput", "-1", "--producer-props",
                        f"bootstrap.servers={bootstrap}", "acks=all", timeout_s=DEADLINE_S).check()
    final = _PRODUCER_RATE.findall(produced.stdout)[-1]
    assert int(final[0]) == PERF_RECORDS, produced.stdout
    consumed = run_tool("kafka-consumer-perf-test", "--bootstrap-server", bootstrap, "--topic", topic,
                        "--messages", str(PERF_RECORDS), "--group", f"perf-{topic}", timeout_s=DEADLINE_S).check()
    header, row = consumed.stdout.strip().splitlines()[-2:]
    stats = dict(zip((h.strip() for h in header.split(",")), (v.strip() for v in row.split(","))))
    assert int(stats["data.consumed.in.nMsg"]) == PERF_RECORDS, consumed.output
    return float(final[1]), float(stats["nMsg.sec"]), float(stats["fetch.nMsg.sec"])


def test_perf_tools_produce_and_consume_every_record_on_both_brokers(pylog_broker, kafka_broker, capsys):
    """The producer perf test (acks=all) is acknowledged every record and the consumer perf test reads them all
    back, on broker_sim and on Kafka, rounds alternating between the two; the medians are printed."""
    rates: dict[str, list[tuple[float, float, float]]] = {"pylog": [], "kafka": []}
    for round_ in range(PERF_ROUNDS):
        for kind, server in (("pylog", pylog_broker), ("kafka", kafka_broker)):
            topic = f"perf-{round_}-{uuid.uuid4().hex[:8]}"
            _create_topics(server.bootstrap_servers, topic)
            rates[kind].append(_perf_round(server.bootstrap_servers, topic))
    with capsys.disabled():
        for kind, runs in rates.items():
            produce, consume, fetch = (statistics.median(column) for column in zip(*runs))
            print(f"\n{kind}: {PERF_RECORDS} records x {len(runs)}: producer-perf-test {produce:.0f} records/s, "
                  f"consumer-perf-test {consume:.0f} records/s ({fetch:.0f} fetching) [median]")


# --------------------------------------------------------------------------- 2. idempotent producer

def test_idempotent_verifiable_producer_across_a_restart_every_acked_value_consumed_once(broker, tmp_path):
    """An idempotent producer (acks=-1) has every send acknowledged across the broker's restart, and a
    consumer reads each acknowledged value exactly once, at the partition and offset it was acknowledged at."""
    topic = f"verifiable-{uuid.uuid4().hex[:8]}"
    _create_topics(broker.bootstrap_servers, topic)
    producer = _verifiable_producer(broker, topic, VERIFIABLE_RECORDS, tmp_path)
    try:
        _restart_while(broker, producer, _acked_count, VERIFIABLE_RECORDS)
        events = producer.wait(DEADLINE_S)
    finally:
        producer.stop()
    acked = _acked(events)
    assert len(acked) == VERIFIABLE_RECORDS
    tool_data = [e for e in events if e.get("name") == "tool_data"]
    assert tool_data and tool_data[-1]["acked"] == tool_data[-1]["sent"] == VERIFIABLE_RECORDS, tool_data
    records = _consume(broker, topic, VERIFIABLE_RECORDS, tmp_path, "consumer", {})
    values = [r["value"] for r in records]
    assert _duplicates(values) == []
    assert {r["value"]: (r["partition"], r["offset"]) for r in records} == acked


# --------------------------------------------------------------------------- 3. transactions

def test_transactional_copy_across_a_restart_read_committed_sees_each_value_once(broker, tmp_path):
    """Kafka's TransactionalMessageCopier (group mode, KIP-447 group metadata, random aborts) copies every input
    value across the broker's restart; read_committed sees exactly the input values once each, read_uncommitted
    also the aborted copies."""
    tag = uuid.uuid4().hex[:8]
    source, copied = f"txn-in-{tag}", f"txn-out-{tag}"
    _create_topics(broker.bootstrap_servers, source, copied)
    producer = _verifiable_producer(broker, source, COPIED_RECORDS, tmp_path, rate=-1)
    try:
        acked = _acked(producer.wait(DEADLINE_S))
    finally:
        producer.stop()
    assert len(acked) == COPIED_RECORDS
    copier = JavaTool("org.apache.kafka.tools.TransactionalMessageCopier",
                      ["--broker-list", broker.bootstrap_servers, "--input-topic", source, "--input-partition", "0",
                       "--output-topic", copied, "--consumer-group", f"copier-{tag}", "--transactional-id",
                       f"copier-{tag}", "--transaction-size", "100", "--group-mode", "--use-group-metadata",
                       "--enable-random-aborts"], tmp_path, "copier")
    try:
        _restart_while(broker, copier, _copied_count, COPIED_RECORDS)
        progress = copier.wait(DEADLINE_S)
    finally:
        copier.stop()
    assert progress[-1]["stage"] == "ShutdownComplete" and progress[-1]["remaining"] == 0, progress[-3:]
    committed = _consume(broker, copied, COPIED_RECORDS, tmp_path, "read-committed",
                         {"isolation.level": "read_committed"})
    values = [r["value"] for r in committed]
    assert _duplicates(values) == []
    assert set(values) == set(acked)
    assert _read_uncommitted_count(broker.bootstrap_servers, copied) > COPIED_RECORDS


def _copied_count(events: list[dict]) -> int:
    return max((e.get("totalProcessed", 0) for e in events), default=0)


def _read_uncommitted_count(bootstrap: str, topic: str, idle_s: float = 2.0) -> int:
    """How many records of ``topic`` a read_uncommitted reader sees (aborted ones too, no control records)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"uncommitted-{uuid.uuid4().hex[:8]}",
                         "isolation.level": "read_uncommitted", "enable.auto.commit": False})
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        count, quiet_since, deadline = 0, time.monotonic(), time.monotonic() + DEADLINE_S
        while time.monotonic() - quiet_since < idle_s and time.monotonic() < deadline:
            batch = [m for m in consumer.consume(1000, 0.5) if not m.error()]
            if batch:
                count += len(batch)
                quiet_since = time.monotonic()
        return count
    finally:
        consumer.close()
