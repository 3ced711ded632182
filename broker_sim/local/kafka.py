"""Apache Kafka itself on 127.0.0.1: the oracle pylog's broker is compared with, and the tools that compare.

Examples::

    $ python -m broker_sim.local.kafka fetch            # jars from Maven Central into the cache (ci/setup.sh)
    $ python -m broker_sim.local.kafka run --data-dir /tmp/k  # one KRaft node in the foreground

    with KafkaServer("/tmp/k") as kafka:                # one combined broker+controller node
        Producer({"bootstrap.servers": kafka.bootstrap_servers})
    with KafkaCluster("/tmp/kc", brokers=3) as cluster:  # three nodes, each a broker and a voter
        cluster.kill(cluster.leader_of("events", 0))
    run_tool("kafka-topics", "--bootstrap-server", kafka.bootstrap_servers, "--list")

Theory of operation
-------------------
Kafka comes as jars from Maven Central, not as a release tarball: ``fetch_kafka`` writes a small POM naming
``kafka_2.13``, ``kafka-tools``, ``kafka-clients`` and ``kafka-streams`` at ``KAFKA_VERSION`` and lets Maven copy
them with their dependencies into ``<kafka home>/libs`` (``$PYLOG_KAFKA_HOME``, else
``~/.cache/pylog/kafka-<version>``). A JVM's classpath is that directory, as ``bin/kafka-run-class.sh`` does.

A node runs in KRaft mode, as Kafka 4 only can: ``process.roles=broker,controller``, a static
``controller.quorum.voters`` list (one voter, or every node of a cluster), a PLAINTEXT listener for clients and
a CONTROLLER listener for the quorum. ``kafka.tools.StorageTool format`` writes a node's log directory; it costs
a JVM start, so each node id is formatted once per Kafka version into ``<home>/formatted/`` (one cluster id for
all of them) and copied from there: formatting depends on the node id and cluster id only, not on ports.

Start-up is what makes Kafka slow in tests (a broker JVM needs seconds where pylog needs a fraction of one), so
every JVM here compiles with C1 only (``-XX:TieredStopAtLevel=1``: tests are short and two cores are shared) and
maps Kafka's classes from a class-data-sharing archive when ``fetch_kafka`` could write one (``<home>/kafka-*.jsa``,
dumped at the exit of a node's start). Both only change how fast the JVM starts, never what Kafka does.

Readiness is observed from outside, as ``LocalCluster`` does: a node is up once it answers Metadata listing
every node that should be live. Processes run in their own process groups; faults are signals to them only
(``kill`` SIGKILL, ``pause``/``resume`` SIGSTOP/SIGCONT, ``stop`` SIGTERM then SIGKILL after a bounded wait).
Each node's stdout and stderr (Kafka logs at WARN) go to ``kafka.log`` in its directory.
"""
from __future__ import annotations

import argparse
import base64
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from broker_sim.local.cluster import HOST, ClusterError, ClusterQueries, NodeSignals, fetch_metadata, file_tail
from broker_sim.local.zookeeper import free_ports

KAFKA_VERSION = os.environ.get("PYLOG_KAFKA_VERSION", "4.1.1")
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 30.0
KILL_WAIT_S = 10.0
POLL_S = 0.1
TOOL_TIMEOUT_S = 120.0
# Kafka's command-line tools by their script names (bin/<name>.sh) and the classes the scripts run
TOOLS = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-configs": "kafka.admin.ConfigCommand",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-client-metrics": "org.apache.kafka.tools.ClientMetricsCommand",
    "kafka-broker-api-versions": "org.apache.kafka.tools.BrokerApiVersionsCommand",
    "kafka-cluster": "org.apache.kafka.tools.ClusterTool",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-verifiable-producer": "org.apache.kafka.tools.VerifiableProducer",
    "kafka-verifiable-consumer": "org.apache.kafka.tools.VerifiableConsumer",
    "kafka-storage": "kafka.tools.StorageTool",
}
# the broker and its tools, the Java clients, Kafka Streams, and Connect with its file connectors (Connect's
# runtime comes with kafka-tools' dependencies)
_ARTIFACTS = ("kafka_2.13", "kafka-tools", "kafka-storage", "kafka-server", "kafka-clients", "kafka-streams",
              "connect-runtime", "connect-file")
_JVM_FAST_START = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Djava.net.preferIPv4Stack=true")
_LOG4J2 = """status = error
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRef.stdout.ref = STDOUT
"""


class KafkaUnavailable(RuntimeError):
    """Kafka's jars or java are missing; the message says how to get them."""


# --------------------------------------------------------------------------- the jars

def kafka_home(version: str = KAFKA_VERSION) -> Path:
    """Where Kafka's jars live: ``$PYLOG_KAFKA_HOME`` or ``~/.cache/pylog/kafka-<version>``."""
    explicit = os.environ.get("PYLOG_KAFKA_HOME")
    if explicit:
        return Path(explicit)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "pylog" / f"kafka-{version}"


def _java() -> str | None:
    return shutil.which("java")


def kafka_available(version: str = KAFKA_VERSION) -> str | None:
    """None when Kafka can be started here, else the reason it cannot."""
    if not _java():
        return "no java executable on PATH (Kafka 4 needs Java 17 or newer)"
    libs = kafka_home(version) / "libs"
    if not all((libs / f"{artifact}-{version}.jar").exists() for artifact in _ARTIFACTS):
        return (f"Apache Kafka {version}'s jars are not in {libs}: run `python -m broker_sim.local.kafka fetch` "
                "(ci/setup.sh does it; it needs Maven and Maven Central)")
    return None


def _pom(version: str) -> str:
    dependencies = "".join(
        f"<dependency><groupId>org.apache.kafka</groupId><artifactId>{a}</artifactId>"
        f"<version>{version}</version></dependency>" for a in _ARTIFACTS)
    # Kafka logs through slf4j 1.7 to log4j2, as its release's libs/ do
    dependencies += ("<dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl"
                     "</artifactId><version>2.24.3</version></dependency>")
    return ('<?xml version="1.0" encoding="UTF-8"?><project xmlns="http://maven.apache.org/POM/4.0.0">'
            "<modelVersion>4.0.0</modelVersion><groupId>dev.pylog</groupId><artifactId>kafka-jars</artifactId>"
            f"<version>1</version><packaging>pom</packaging><dependencies>{dependencies}</dependencies></project>")


def fetch_kafka(version: str = KAFKA_VERSION, *, quiet: bool = True) -> Path:
    """Copy Kafka ``version``'s jars and their dependencies from Maven Central into ``kafka_home()/libs``.

    Does nothing when they are there. Then formats nodes 1-3 and writes the class-data-sharing archive (best
    effort), so tests running in parallel find them made. Returns the home. Raises KafkaUnavailable naming the problem when Maven is missing or fails.
    """
    home = kafka_home(version)
    if kafka_available(version) is None:
        _prepare(version)
        return home
    mvn = shutil.which("mvn")
    if not mvn:
        raise KafkaUnavailable("Maven (mvn) is needed to fetch Kafka's jars from Maven Central: apt-get install maven")
    home.mkdir(parents=True, exist_ok=True)
    libs = home / "libs"
    # new artifacts join a libs/ that JVMs may be running from: Maven adds the missing jars and leaves the rest
    staging = libs if libs.exists() else Path(tempfile.mkdtemp(prefix="libs-", dir=home))
    with tempfile.TemporaryDirectory() as work:
        (Path(work) / "pom.xml").write_text(_pom(version))
        command = [mvn, "-B", *(["-q"] if quiet else []), "dependency:copy-dependencies",
                   f"-DoutputDirectory={staging}", "-DincludeScope=runtime"]
        done = subprocess.run(command, cwd=work, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        if staging != libs:
            shutil.rmtree(staging, ignore_errors=True)
        raise KafkaUnavailable(f"mvn could not fetch Apache Kafka {version} (exit {done.returncode}):\n"
                               f"{(done.stdout + done.stderr)[-3000:]}")
    if staging != libs:
        staging.rename(libs)
    _prepare(version)
    return home


def _prepare(version: str) -> None:
    for node_id in (1, 2, 3):
        _formatted(node_id, version)
    _write_class_archive(version)


def classpath(version: str = KAFKA_VERSION) -> str:
    return str(kafka_home(version) / "libs" / "*")


def _class_archive(version: str) -> Path:
    """The class archive for the jars in libs/ now: a JVM ignores an archive dumped with another classpath,
    so the name carries a digest of the jar names (a fetch that adds jars makes a new one)."""
    import hashlib

    jars = sorted(p.name for p in (kafka_home(version) / "libs").glob("*.jar"))
    return kafka_home(version) / f"kafka-{hashlib.sha256(chr(10).join(jars).encode()).hexdigest()[:12]}.jsa"


def java_command(main_class: str, args: Sequence[str] = (), *, version: str = KAFKA_VERSION,
                 heap: str = "256m", jvm_options: Sequence[str] = (), log_config: str | Path | None = None,
                 extra_classpath: Sequence[str | Path] = ()) -> list[str]:
    """The command line that runs ``main_class`` of Kafka ``version`` (as ``bin/kafka-run-class.sh`` would);
    ``extra_classpath`` goes before Kafka's jars (an application's own classes)."""
    reason = kafka_available(version)
    if reason:
        raise KafkaUnavailable(reason)
    options = [f"-Xmx{heap}", *_JVM_FAST_START]
    archive = _class_archive(version)
    if archive.exists():
        options += [f"-XX:SharedArchiveFile={archive}", "-Xshare:auto"]
    if log_config is None:
        log_config = _default_log_config(version)
    options.append(f"-Dlog4j2.configurationFile={log_config}")
    path = os.pathsep.join([*(str(p) for p in extra_classpath), classpath(version)])
    return [_java(), *options, *jvm_options, "-cp", path, main_class, *args]


def compile_java(sources: Sequence[str | Path], out_dir: str | Path, *, version: str = KAFKA_VERSION) -> Path:
    """Compile Java ``sources`` against Kafka's jars into ``out_dir`` (for ``java_command(extra_classpath=)``)."""
    reason = kafka_available(version)
    if reason:
        raise KafkaUnavailable(reason)
    javac = shutil.which("javac")
    if not javac:
        raise KafkaUnavailable("no javac on PATH (a JDK, not only a JRE, compiles Kafka applications)")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([javac, "-nowarn", "-cp", classpath(version), "-d", str(out), *map(str, sources)],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=TOOL_TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(f"javac failed:\n{done.stdout}{done.stderr}")
    return out


def _default_log_config(version: str, level: str = "WARN") -> Path:
    path = kafka_home(version) / f"log4j2-{level.lower()}.properties"
    if not path.exists():
        _write_atomically(path, _LOG4J2.format(level=level))
    return path


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


@dataclass(frozen=True)
class ToolResult:
    """What a Kafka tool printed and how it exited."""
    command: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def check(self) -> "ToolResult":
        """Self, or AssertionError naming the tool, its exit status and its output."""
        if self.returncode != 0:
            raise AssertionError(f"{' '.join(self.command[-12:])} exited {self.returncode}:\n{self.output[-4000:]}")
        return self


def run_tool(tool: str, *args: str, version: str = KAFKA_VERSION, timeout_s: float = TOOL_TIMEOUT_S,
             input: str | None = None, heap: str = "256m") -> ToolResult:
    """Run one of Kafka's command-line tools (``TOOLS``: its script name, or a main class) and wait for it.

    ``input`` goes to its standard input (closed otherwise). Raises ``subprocess.TimeoutExpired`` after
    ``timeout_s``, once the tool's process group is killed.
    """
    main_class = TOOLS.get(tool, tool)
    command = java_command(main_class, args, version=version, heap=heap)
    process = subprocess.Popen(command, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = process.communicate(input, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        process.communicate()
        raise
    return ToolResult((tool, *args), process.returncode, stdout, stderr)


def _kill_group(process: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        pass


# --------------------------------------------------------------------------- formatted log directories

def _cluster_id(version: str) -> str:
    """The one cluster id of this home's formatted directories (Kafka's form: 16 random bytes, base64url)."""
    path = kafka_home(version) / "formatted" / "cluster.id"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent)
        with os.fdopen(fd, "w") as f:
            f.write(base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode())
        try:
            os.link(tmp, path)   # the first process to get here decides; the others read its id
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
    return path.read_text().strip()


def _formatted(node_id: int, version: str) -> Path:
    """A log directory formatted for ``node_id`` by Kafka's StorageTool, made once and then copied."""
    root = kafka_home(version) / "formatted"
    target = root / f"node-{node_id}"
    if (target / "meta.properties").exists():
        return target
    cluster_id = _cluster_id(version)
    work = Path(tempfile.mkdtemp(prefix=f"node-{node_id}-", dir=root))
    (work / "server.properties").write_text(
        f"process.roles=broker,controller\nnode.id={node_id}\n"
        f"controller.quorum.voters={node_id}@{HOST}:9093\ncontroller.listener.names=CONTROLLER\n"
        f"listeners=PLAINTEXT://{HOST}:9092,CONTROLLER://{HOST}:9093\nlog.dirs={work / 'data'}\n")
    done = subprocess.run(java_command("kafka.tools.StorageTool",
                                       ["format", "-t", cluster_id, "-c", str(work / "server.properties")],
                                       version=version),
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=TOOL_TIMEOUT_S)
    if done.returncode != 0:
        shutil.rmtree(work, ignore_errors=True)
        raise ClusterError(f"Kafka's StorageTool could not format node {node_id}: {done.stdout}{done.stderr}")
    try:
        (work / "data").rename(target)
    except OSError:  # another process formatted it first
        if not (target / "meta.properties").exists():
            raise
    shutil.rmtree(work, ignore_errors=True)
    return target


def _write_class_archive(version: str) -> None:
    """Dump the classes a node's start loads into ``_class_archive()`` (Java's dynamic CDS), once; best effort."""
    archive = _class_archive(version)
    if archive.exists() or not _java():
        return
    with tempfile.TemporaryDirectory() as work:
        node = KafkaServer(work, jvm_options=(f"-XX:ArchiveClassesAtExit={archive}",), use_class_archive=False)
        try:
            node.start()
        except (ClusterError, OSError) as exc:
            print(f"broker_sim.local.kafka: no class archive ({exc})", file=sys.stderr)
        finally:
            node.stop()


# --------------------------------------------------------------------------- nodes

@dataclass
class _Node:
    node_id: int
    port: int
    controller_port: int
    node_dir: Path
    process: subprocess.Popen | None = None
    paused: bool = False

    @property
    def log_dir(self) -> Path:
        return self.node_dir / "data"

    @property
    def log_path(self) -> Path:
        return self.node_dir / "kafka.log"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


def _defaults(nodes: int) -> dict[str, str]:
    """Kafka's own defaults, but for what a cluster of ``nodes`` cannot meet, and fast group starts in tests."""
    replicas = min(nodes, 3)
    return {
        "offsets.topic.replication.factor": str(replicas),
        "transaction.state.log.replication.factor": str(replicas),
        "transaction.state.log.min.isr": str(min(2, replicas)),
        "group.initial.rebalance.delay.ms": "0",
        "share.coordinator.state.topic.replication.factor": str(replicas),
        "share.coordinator.state.topic.min.isr": str(min(2, replicas)),
    }


class KafkaCluster(ClusterQueries, NodeSignals):
    """``brokers`` Apache Kafka nodes on 127.0.0.1, each a broker and a controller (KRaft voter).

    Faults as ``LocalCluster``'s (``NodeSignals``): ``kill`` SIGKILL, ``pause``/``resume`` SIGSTOP/SIGCONT (the
    quorum fences a paused node), ``stop`` SIGTERM then SIGKILL; ``restart`` keeps the id, ports and log directory.

    *configs* are broker configs for every node (Kafka's names), over ``_defaults``; ``{port}`` in a value is
    the node's own client port. Node ids are ``1..brokers``. Use as a context manager, or ``start``/``stop_all``.
    """

    def __init__(self, data_dir: str | Path, brokers: int = 3, *, configs: Mapping[str, object] | None = None,
                 version: str = KAFKA_VERSION, heap: str = "512m", start_timeout_s: float = START_TIMEOUT_S,
                 jvm_options: Sequence[str] = (), use_class_archive: bool = True) -> None:
        if brokers < 1:
            raise ValueError(f"a cluster needs at least one node, got {brokers}")
        self.data_dir = Path(data_dir).resolve()
        self.version = version
        self.heap = heap
        self.start_timeout_s = start_timeout_s
        self.stop_timeout_s = STOP_TIMEOUT_S
        self.jvm_options = tuple(jvm_options)
        self.use_class_archive = use_class_archive
        self.configs = {**_defaults(brokers), **{str(k): str(v) for k, v in (configs or {}).items()}}
        ports = free_ports(2 * brokers)
        self.nodes = {i + 1: _Node(i + 1, ports[2 * i], ports[2 * i + 1], self.data_dir / f"kafka-{i + 1}")
                      for i in range(brokers)}
        self._lock = threading.RLock()

    node_kind = "Kafka node"

    # ----------------------------------------------------------------- addresses

    @property
    def broker_ids(self) -> list[int]:
        return sorted(self.nodes)

    def _node(self, broker_id: int) -> _Node:
        try:
            return self.nodes[broker_id]
        except KeyError:
            raise ClusterError(f"no Kafka node {broker_id} in this cluster (ids {self.broker_ids})") from None

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(self.address(i) for i in self.broker_ids)

    def address(self, broker_id: int) -> str:
        return f"{HOST}:{self.nodes[broker_id].port}"

    def pid(self, broker_id: int) -> int | None:
        node = self.nodes[broker_id]
        return node.process.pid if node.process is not None else None

    def log_path(self, broker_id: int) -> Path:
        return self.nodes[broker_id].log_path

    def is_running(self, broker_id: int) -> bool:
        return self.nodes[broker_id].running

    def available_brokers(self) -> list[int]:
        return [i for i, n in sorted(self.nodes.items()) if n.running and not n.paused]

    # ----------------------------------------------------------------- processes

    def _properties(self, node: _Node) -> str:
        voters = ",".join(f"{n.node_id}@{HOST}:{n.controller_port}" for n in self.nodes.values())
        settings = {
            "process.roles": "broker,controller",
            "node.id": str(node.node_id),
            "controller.quorum.voters": voters,
            "listeners": f"PLAINTEXT://{HOST}:{node.port},CONTROLLER://{HOST}:{node.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{HOST}:{node.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(node.log_dir),
            **{k: v.replace("{port}", str(node.port)) for k, v in self.configs.items()},
        }
        return "".join(f"{k}={v}\n" for k, v in settings.items())

    def _spawn(self, node: _Node) -> None:
        with self._lock:
            if node.running:
                raise ClusterError(f"Kafka node {node.node_id} is already running (pid {node.process.pid})")
            node.node_dir.mkdir(parents=True, exist_ok=True)
            if not (node.log_dir / "meta.properties").exists():
                shutil.copytree(_formatted(node.node_id, self.version), node.log_dir)
            properties = node.node_dir / "server.properties"
            properties.write_text(self._properties(node))
            options = list(self.jvm_options)
            command = java_command("kafka.Kafka", [str(properties)], version=self.version, heap=self.heap,
                                   jvm_options=options)
            if not self.use_class_archive:
                command = [c for c in command if not c.startswith("-XX:SharedArchiveFile=")]
            with open(node.log_path, "ab") as log:
                log.write(f"\n=== pylog: starting Kafka node {node.node_id} on {HOST}:{node.port} "
                          f"at {time.strftime('%Y-%m-%dT%H:%M:%S')} ===\n".encode())
                log.flush()
                node.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                                stdin=subprocess.DEVNULL, cwd=node.node_dir,
                                                start_new_session=True)
            node.paused = False

    def start(self, *, wait: bool = True) -> "KafkaCluster":
        """Start every node and (with *wait*) wait until each lists them all; raise ClusterError with a log
        tail if not."""
        try:
            for node in self.nodes.values():
                self._spawn(node)
            if wait:
                self.wait_until_ready()
        except BaseException:
            self.stop_all()
            raise
        return self

    def wait_until_ready(self, broker_ids: Sequence[int] | None = None, *, timeout_s: float | None = None) -> None:
        """Wait until each of *broker_ids* (default: every available node) answers Metadata listing every
        available node and a controller."""
        timeout_s = self.start_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        waiting = list(broker_ids) if broker_ids is not None else self.available_brokers()
        while True:
            expected = set(self.available_brokers())
            pending = []
            for node_id in waiting:
                node = self.nodes[node_id]
                if not node.running:
                    status = None if node.process is None else node.process.returncode
                    raise ClusterError(f"Kafka node {node_id} exited (status {status}) before it was ready; "
                                       f"{node.log_path} ends with:\n{file_tail(node.log_path)}")
                try:
                    answer = fetch_metadata(HOST, node.port, (), broker_id=node_id)
                    ready = expected <= set(answer.brokers) and answer.controller_id >= 0
                except (OSError, ValueError):
                    ready = False
                if not ready:
                    pending.append(node_id)
            if not pending:
                return
            if time.monotonic() > deadline:
                node = self.nodes[pending[0]]
                raise ClusterError(f"Kafka node {node.node_id} did not list nodes {sorted(expected)} within "
                                   f"{timeout_s:g} s; {node.log_path} ends with:\n{file_tail(node.log_path)}")
            time.sleep(POLL_S)

    def restart(self, broker_id: int, *, wait: bool = True, timeout_s: float | None = None) -> None:
        """Start node *broker_id* again (same id, ports, log directory); stop it first if it runs."""
        node = self._node(broker_id)
        if node.running:
            self.stop(broker_id)
        self._spawn(node)
        if wait:
            self.wait_until_ready(timeout_s=timeout_s)

    def stop_all(self, timeout_s: float = STOP_TIMEOUT_S) -> dict[int, int | None]:
        """SIGTERM every node at once (a quorum that loses its nodes one by one would hold the last ones'
        controlled shutdowns until their timeout), SIGKILL those still running after *timeout_s*."""
        with self._lock:
            running = [n for n in self.nodes.values() if n.running]
            for node in running:
                if node.paused:
                    self._signal(node, signal.SIGCONT)
                self._signal(node, signal.SIGTERM)
            deadline = time.monotonic() + timeout_s
            for node in running:
                try:
                    node.process.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    self._signal(node, signal.SIGKILL)
                    try:
                        node.process.wait(KILL_WAIT_S)
                    except subprocess.TimeoutExpired:
                        pass
            for node in self.nodes.values():
                node.paused = False
            return {i: (n.process.returncode if n.process is not None else None) for i, n in self.nodes.items()}

    def rss_bytes(self) -> dict[int, int]:
        """Resident memory of each running node's JVM (from /proc)."""
        sizes = {}
        for node_id, node in self.nodes.items():
            if node.running:
                try:
                    fields = Path(f"/proc/{node.process.pid}/statm").read_text().split()
                    sizes[node_id] = int(fields[1]) * os.sysconf("SC_PAGE_SIZE")
                except OSError:
                    pass
        return sizes

    def __enter__(self) -> "KafkaCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop_all()


class KafkaServer(KafkaCluster):
    """One Apache Kafka node (broker and sole controller), node id 1: the peer of one pylog ``Broker``."""

    def __init__(self, data_dir: str | Path, *, configs: Mapping[str, object] | None = None, **kwargs) -> None:
        super().__init__(data_dir, 1, configs=configs, **kwargs)

    @property
    def pid(self) -> int | None:  # type: ignore[override]
        process = self.nodes[1].process
        return process.pid if process is not None else None

    @property
    def node_id(self) -> int:
        return 1

    @property
    def host(self) -> str:
        return HOST

    @property
    def port(self) -> int:
        return self.nodes[1].port

    def stop(self, broker_id: int = 1, timeout_s: float | None = None) -> int | None:
        return super().stop(broker_id, timeout_s)



# --------------------------------------------------------------------------- command line

def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m broker_sim.local.kafka",
                                     description="Fetch and run Apache Kafka (KRaft) beside pylog.")
    commands = parser.add_subparsers(dest="command", required=True)
    fetch = commands.add_parser("fetch", help="copy Kafka's jars from Maven Central into the cache")
    fetch.add_argument("--version", default=KAFKA_VERSION)
    run = commands.add_parser("run", help="run Kafka nodes in the foreground until Ctrl-C")
    run.add_argument("--data-dir", required=True)
    run.add_argument("--brokers", type=int, default=1)
    run.add_argument("--version", default=KAFKA_VERSION)
    args = parser.parse_args(argv)
    try:
        if args.command == "fetch":
            print(fetch_kafka(args.version))
            return 0
        with KafkaCluster(args.data_dir, args.brokers, version=args.version) as cluster:
            print(f"PYLOG_KAFKA_BOOTSTRAP_SERVERS={cluster.bootstrap_servers}", flush=True)
            signal.sigwait({signal.SIGINT, signal.SIGTERM})
        return 0
    except (KafkaUnavailable, ClusterError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
