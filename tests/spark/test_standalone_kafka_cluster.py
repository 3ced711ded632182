"""The production shape: a Spark standalone cluster streams format("pylog") through the exactly-once sink
against a 3-node Apache Kafka cluster, across a SIGKILL and restart of a partition leader.

A master and two workers (one core each) run as processes of their own (``spark-class``, 127.0.0.1); the
driver is tests/spark/standalone_job.py in a subprocess, with master ``spark://127.0.0.1:<port>``, so its
SparkContext does not meet the test session's local one. Both topics have replication factor 3 and
``min.insync.replicas=2``, as have Kafka's internal topics and the sink's log, so one node down leaves every
partition writable with acks=all. The nodes fence a silent peer after 3 s instead of Kafka's 9 s.

While the query is mid-stream (output begun, not complete), the leader of ``clean-0`` (the sink's first
partition) is SIGKILLed; the test waits until another node leads it, writes the rest of the input while the
node is down, and restarts it. The output, read read_committed, must hold every input row exactly once, and
the driver must stop without an error. The query must commit new output after the kill.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from broker_sim.local.zookeeper import free_port
from sink_helpers import read_topic, values_of
from spark_helpers import create_replicated_topics, kill_and_restart, produce_acks_all

pytestmark = [pytest.mark.spark, pytest.mark.slow]

JOB = Path(__file__).parent / "standalone_job.py"
SPARK_START_S = 90
RUN_DEADLINE_S = 240
FIRST, TOTAL = 600, 900
KAFKA_CONFIGS = {
    "min.insync.replicas": "2",
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "3000",
    "group.initial.rebalance.delay.ms": "0",
}
TOPIC_CONFIG = {"min.insync.replicas": "2"}


@pytest.fixture(scope="module")
def kafka_nodes(tmp_path_factory):
    from broker_sim.testing.requirements import require_kafka
    from broker_sim.local.kafka import KafkaCluster

    require_kafka()
    with KafkaCluster(tmp_path_factory.mktemp("kafka-3"), brokers=3, configs=KAFKA_CONFIGS) as cluster:
        yield cluster


class StandaloneSpark:
    """A Spark standalone master and ``workers`` workers on 127.0.0.1, each a process group of its own."""

    def __init__(self, directory: Path, workers: int = 2) -> None:
        import pyspark

        self.directory = directory
        self.spark_class = str(Path(pyspark.__file__).parent / "bin" / "spark-class")
        self.port, self.webui_port = free_port(), free_port()
        self.workers = workers
        self.processes: list[subprocess.Popen] = []

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _spawn(self, name: str, *args: str) -> None:
        env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_DAEMON_MEMORY": "256m",
               "SPARK_DAEMON_JAVA_OPTS": "-XX:TieredStopAtLevel=1", "SPARK_WORKER_DIR": str(self.directory / name),
               "PYSPARK_PYTHON": sys.executable}
        log = open(self.directory / f"{name}.log", "wb")
        with log:
            self.processes.append(subprocess.Popen([self.spark_class, *args], env=env, stdout=log,
                                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                                   start_new_session=True))

    def start(self) -> "StandaloneSpark":
        self._spawn("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                    "--port", str(self.port), "--webui-port", str(self.webui_port))
        for i in range(self.workers):
            self._spawn(f"worker-{i}", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                        "--webui-port", str(free_port()), "--cores", "1", "--memory", "1g", self.master_url)
        self._wait_for_workers()
        return self

    def _wait_for_workers(self) -> None:
        deadline = time.monotonic() + SPARK_START_S
        alive = None
        while alive != self.workers:
            for process in self.processes:
                assert process.poll() is None, f"a Spark daemon exited ({process.returncode}): {self.logs()}"
            assert time.monotonic() < deadline, f"{alive} of {self.workers} workers alive: {self.logs()}"
            time.sleep(0.5)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.webui_port}/json/", timeout=5) as answer:
                    alive = json.load(answer).get("aliveworkers")
            except OSError:
                alive = None

    def workers_that_ran(self) -> int:
        """How many workers started an executor (a worker gives each application a directory of its own)."""
        return sum(1 for i in range(self.workers) if any((self.directory / f"worker-{i}").glob("app-*")))

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-2000:]}"
                         for p in sorted(self.directory.glob("*.log")))

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)


@pytest.fixture
def standalone_spark(tmp_path):
    spark = StandaloneSpark(tmp_path / "spark")
    spark.directory.mkdir()
    try:
        yield spark.start()
    finally:
        spark.stop()


def _committed(bootstrap: str) -> int:
    try:
        return len(read_topic(bootstrap, "clean", timeout_s=20))
    except Exception:  # noqa: BLE001 - a failover in progress: ask again
        return -1


def _wait_committed(driver, bootstrap: str, at_least: int, what: str, timeout_s: float = 180) -> int:
    deadline = time.monotonic() + timeout_s
    while (count := _committed(bootstrap)) < at_least:
        assert driver.poll() is None, f"the driver exited ({driver.returncode}) before {what}"
        assert time.monotonic() < deadline, f"{what}: {count} of {at_least} rows within {timeout_s} s"
        time.sleep(1)
    return count


def test_a_standalone_spark_stream_writes_exactly_once_across_a_killed_kafka_leader(kafka_nodes, standalone_spark,
                                                                                   tmp_path):
    bootstrap = kafka_nodes.bootstrap_servers
    create_replicated_topics(kafka_nodes, {"events": 2, "clean": 3}, TOPIC_CONFIG)
    produce_acks_all(bootstrap, "events", range(FIRST), 2)
    stop_file = tmp_path / "stop"
    driver = subprocess.Popen([sys.executable, str(JOB), standalone_spark.master_url, bootstrap, "events", "clean",
                               str(tmp_path / "checkpoint"), str(stop_file), "--deadline-s", str(RUN_DEADLINE_S)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        before = _wait_committed(driver, bootstrap, 1, "the first batch")
        assert before < FIRST, "the stream had written everything before the fault"
        killed, moved_to = kill_and_restart(kafka_nodes, "clean", 0, down_s=5,
                                            while_down=lambda: produce_acks_all(bootstrap, "events",
                                                                                range(FIRST, TOTAL), 2))
        _wait_committed(driver, bootstrap, TOTAL, "every row after the restart")
        stop_file.touch()
        _, err = driver.communicate(timeout=60)
    except BaseException:
        os.killpg(driver.pid, signal.SIGKILL)
        _, err = driver.communicate()
        print(err[-4000:], file=sys.stderr)
        raise
    assert driver.returncode == 0, err[-4000:]
    assert standalone_spark.workers_that_ran() == 2, "the executors did not run on both workers"
    assert values_of(read_topic(bootstrap, "clean")) == sorted(f"seen-{i}".encode() for i in range(TOTAL)), (
        f"leader {killed} of clean-0 killed, {moved_to} led it meanwhile")
