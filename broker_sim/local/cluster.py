"""A local pylog cluster: one ZooKeeper and N broker processes on 127.0.0.1.

Examples::

    $ pylog-broker cluster --brokers 3 --data-dir /tmp/pylog-cluster      # foreground, Ctrl-C stops
    $ kill -USR1 <its pid>                                                # adds broker 3 (add_broker())
    $ pylog cluster up --brokers 3 --data-dir /tmp/pylog-cluster --base-port 9092
    PYLOG_BOOTSTRAP_SERVERS=127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094
    PYLOG_SCHEMA_REGISTRY_URL=http://127.0.0.1:40123,http://127.0.0.1:40125,http://127.0.0.1:40127
    $ pylog-broker cluster --brokers 3 --data-dir /tmp/pylog-cluster --schema-registry-port 8081
    PYLOG_BOOTSTRAP_SERVERS=...
    PYLOG_SCHEMA_REGISTRY_URL=http://127.0.0.1:8081,http://127.0.0.1:8082,http://127.0.0.1:8083

    with LocalCluster("/tmp/c", brokers=3, configs={"min.insync.replicas": "2"}) as cluster:
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})
        cluster.kill(cluster.leader_of("events", 0))     # SIGKILL the partition's leader
        cluster.restart(...)

Theory of operation
-------------------
``LocalCluster`` is process management plus a few cluster queries; the brokers
are the real thing, ``python -m broker_sim --zookeeper HOST:PORT --broker-id
N ...``, talking to a real ZooKeeper (``ZooKeeperServer``, Debian's jar).

Layout under *data_dir*::

    zookeeper/            ZooKeeper's dataDir, zoo.cfg and its log
    broker-<id>/data/     the broker's log.dirs (``--data-dir``)
    broker-<id>/broker.log  the broker's stdout and stderr, appended across restarts

Broker ids are ``0..N-1``; ``add_broker()`` (SIGUSR1 to the foreground command) starts one more, id
``max + 1``, which hosts nothing until partitions are reassigned to it.  Each broker's
port is chosen once, up front
(``base_port + id``, or a free port per broker when no base port is given),
and kept across restarts, so a restarted broker re-registers at the same
address, as a real broker would.  Every broker serves a Schema Registry
(they answer alike; writes are forwarded to one writer) on a port chosen the
same way: ``registry_base_port + id`` (``--schema-registry-port``), or a free
one each.

Every broker runs in its own session and process group: a Ctrl-C in the
terminal reaches only the foreground tool, which then stops the brokers in
order; faults are signals to that group only. ``kill`` is SIGKILL (no
controlled shutdown, page cache survives), ``pause``/``resume`` are
SIGSTOP/SIGCONT (the process is frozen: its ZooKeeper session expires and its
sockets stop answering), ``stop`` is SIGTERM with a bounded wait then SIGKILL,
``restart`` starts the same id on the same port and data dir.

Readiness is observed from the outside, through the Kafka protocol: a broker
is up once it answers a Metadata request listing every broker that should be
live (brokers list only those registered in ZooKeeper, so this implies the
registrations). A broker is (re)started only once ZooKeeper no longer holds its
registration: after a SIGKILL or SIGSTOP its ephemeral ``/brokers/ids/<id>``
lives until the session expires (``zookeeper.session.timeout.ms``), and a
broker refuses to start while another session holds its id, as Kafka's does.
``LocalCluster`` keeps its own kazoo client for that read (paths from
``controller/zk_layout.py``). The cluster queries (``metadata``, ``controller_id``,
``leader_of``, ``partition``) ask a running, unpaused broker with a raw
Metadata v12 request (``broker_sim.protocol.client.WireConnection``, one deadline for the whole answer),
so a frozen broker is never asked and a query never hangs.

``stop_all`` is the clean shutdown: resume paused brokers, SIGTERM them one at
a time with the controller last (each does its controlled shutdown while a
controller and another broker are alive), SIGKILL any that does not exit within
a bounded wait, then stop ZooKeeper.
"""
from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Sequence, TextIO

from broker_sim.arguments import key_value, positive_int
from broker_sim.arguments import port as port_number
from broker_sim.local.zookeeper import ZooKeeperServer, free_port, free_ports
from broker_sim.protocol.client import WireConnection

HOST = "127.0.0.1"
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
KILL_WAIT_S = 10.0
METADATA_TIMEOUT_S = 2.0
POLL_S = 0.1
PORT_RACE_RETRIES = 3  # start(): a broker whose picked port another process bound first starts again on new ones
log = logging.getLogger(__name__)


class ClusterError(Exception):
    """The cluster could not be started or did not reach the state asked for; the message says why."""


def _source_root() -> str:
    import broker_sim

    return os.path.dirname(os.path.dirname(os.path.abspath(broker_sim.__file__)))


def _lost_a_port_race(node: "BrokerNode") -> bool:
    """The node's ended process could not bind a port we picked for it: another process took it meanwhile
    (the broker's ``cannot listen: ... address already in use``, the last thing its log says)."""
    tail = file_tail(node.log_path, 600).lower()
    return "cannot listen" in tail and "address already in use" in tail


def file_tail(path: str | Path, limit: int = 2000) -> str:
    """The last *limit* bytes of a log file ("" if unreadable)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - limit))
            data = f.read()
    except OSError:
        return ""
    return data.decode("utf-8", errors="replace").strip()


# --------------------------------------------------------------------------- metadata over the wire

@dataclass(frozen=True)
class PartitionMetadata:
    """One partition as a broker's Metadata response describes it."""
    topic: str
    partition: int
    error_code: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...]


@dataclass(frozen=True)
class ClusterMetadata:
    """A Metadata v12 response, decoded to what the cluster tools need."""
    answered_by: int
    cluster_id: str | None
    controller_id: int
    brokers: dict[int, tuple[str, int]]
    topics: dict[str, int]                      # topic -> error code
    partitions: dict[tuple[str, int], PartitionMetadata] = field(default_factory=dict)


def fetch_metadata(host: str, port: int, topics: Sequence[str] | None = (), *,
                   timeout_s: float = METADATA_TIMEOUT_S, broker_id: int = -1) -> ClusterMetadata:
    """Send one Metadata v12 request to *host:port* and decode the answer.

    *topics*: ``()`` = no topics (brokers and controller only), ``None`` = all
    topics, else those names (never auto-created). Raises OSError (refused,
    timed out, closed) when the broker does not answer within *timeout_s*.
    """
    from kafka.protocol.metadata import MetadataRequest

    request = MetadataRequest[12](
        topics=None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
        allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    deadline = time.monotonic() + timeout_s
    with WireConnection.connect(host, port, timeout_s=timeout_s, client_id="pylog-cluster") as connection:
        response = connection.call(request, timeout_s=max(0.0, deadline - time.monotonic()))
    partitions = {}
    for topic in response.topics:
        for p in topic.partitions:
            partitions[(topic.name, p.partition_index)] = PartitionMetadata(
                topic.name, p.partition_index, p.error_code, p.leader_id, p.leader_epoch,
                tuple(p.replica_nodes), tuple(p.isr_nodes), tuple(p.offline_replicas or ()))
    return ClusterMetadata(
        answered_by=broker_id, cluster_id=response.cluster_id, controller_id=response.controller_id,
        brokers={b.node_id: (b.host, b.port) for b in response.brokers},
        topics={t.name: t.error_code for t in response.topics}, partitions=partitions)


# --------------------------------------------------------------------------- one broker process

@dataclass
class BrokerNode:
    """One broker of the cluster: its fixed identity and its current process."""
    broker_id: int
    port: int
    node_dir: Path
    registry_port: int | None = None  # its Schema Registry (--schema-registry-port); None: off
    metrics_port: int | None = None  # its /metrics (--metrics-port); None: off
    process: subprocess.Popen | None = None
    paused: bool = False
    starts: int = 0

    @property
    def data_dir(self) -> Path:
        return self.node_dir / "data"

    @property
    def log_path(self) -> Path:
        return self.node_dir / "broker.log"

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def schema_registry_url(self) -> str | None:
        return f"http://{HOST}:{self.registry_port}" if self.registry_port is not None else None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    @property
    def running(self) -> bool:
        """The process exists (possibly paused)."""
        return self.process is not None and self.process.poll() is None


class ClusterQueries:
    """Cluster queries over the wire, for any cluster of processes on 127.0.0.1 (pylog's or Apache Kafka's).

    A subclass gives ``available_brokers()`` (ids running and unpaused) and ``address(broker_id)``
    (``host:port``); every query asks one of those with a raw Metadata v12 request, so a frozen broker is never
    asked and a query never hangs.
    """

    def available_brokers(self) -> list[int]:
        raise NotImplementedError

    def address(self, broker_id: int) -> str:
        raise NotImplementedError

    def metadata(self, topics: Sequence[str] | None = (), *, prefer: Iterable[int] = (),
                 timeout_s: float = 10.0) -> ClusterMetadata:
        """A Metadata answer from an available broker (tries *prefer* first, then the others).

        Raises ClusterError if no available broker answers within *timeout_s*.
        """
        deadline = time.monotonic() + timeout_s
        last_error = "no broker is running and unpaused"
        while True:
            available = self.available_brokers()
            order = [b for b in prefer if b in available] + [b for b in available if b not in set(prefer)]
            for broker_id in order:
                try:
                    host, port = self.address(broker_id).rsplit(":", 1)
                    return fetch_metadata(host, int(port), topics, broker_id=broker_id,
                                          timeout_s=min(METADATA_TIMEOUT_S, max(0.1, deadline - time.monotonic())))
                except (OSError, ValueError) as exc:
                    last_error = f"broker {broker_id}: {type(exc).__name__}: {exc}"
            if time.monotonic() > deadline:
                raise ClusterError(f"no broker answered Metadata within {timeout_s:g} s ({last_error})")
            time.sleep(POLL_S)

    def controller_id(self, *, timeout_s: float = 10.0) -> int:
        """The active controller's broker id as an available broker reports it (-1 if none)."""
        return self.metadata((), timeout_s=timeout_s).controller_id

    def partition(self, topic: str, partition: int, *, timeout_s: float = 10.0) -> PartitionMetadata:
        """Leader, epoch, replicas and ISR of one partition, as an available broker reports them."""
        answer = self.metadata([topic], timeout_s=timeout_s)
        try:
            return answer.partitions[(topic, partition)]
        except KeyError:
            raise ClusterError(f"broker {answer.answered_by} does not know partition {topic}-{partition} "
                               f"(topic error code {answer.topics.get(topic)})") from None

    def leader_of(self, topic: str, partition: int, *, timeout_s: float = 10.0) -> int:
        """The leader's broker id (-1 while there is none)."""
        return self.partition(topic, partition, timeout_s=timeout_s).leader

    def wait_for(self, predicate, *, timeout_s: float, what: str, topics: Sequence[str] | None = ()):
        """Poll ``predicate(metadata)`` until it returns something other than None or False
        (a broker id 0 counts), which is returned.

        Raises ClusterError naming *what* and the last metadata seen after *timeout_s*.
        """
        deadline = time.monotonic() + timeout_s
        last = None
        while True:
            try:
                last = self.metadata(topics, timeout_s=max(0.5, min(5.0, deadline - time.monotonic())))
                result = predicate(last)
                if result is not None and result is not False:
                    return result
            except ClusterError:
                pass
            if time.monotonic() > deadline:
                raise ClusterError(f"timed out after {timeout_s:g} s waiting for {what}; last metadata: {last}")
            time.sleep(POLL_S)

    def wait_for_full_isr(self, topic: str, partitions: int, *, timeout_s: float = 60.0) -> dict:
        """Wait until every partition of *topic* has a leader and ISR == replicas; return them."""
        def complete(md: ClusterMetadata):
            states = {p: md.partitions.get((topic, p)) for p in range(partitions)}
            if all(s is not None and s.error_code == 0 and s.leader >= 0 and s.replicas
                   and set(s.isr) == set(s.replicas) for s in states.values()):
                return states
            return None
        return self.wait_for(complete, timeout_s=timeout_s, what=f"{topic}: leaders and full ISRs",
                             topics=[topic])


class NodeSignals:
    """Faults and stops by signal for a cluster of node processes, each in its own process group.

    A subclass gives ``_node(broker_id)`` (an object with ``process``, ``paused`` and ``running``), ``_lock``,
    ``stop_timeout_s`` and ``node_kind`` (how messages name a node). Signals go to the node's process group only.
    """
    node_kind = "broker"
    stop_timeout_s = STOP_TIMEOUT_S

    def _node(self, broker_id: int):
        raise NotImplementedError

    def _signal(self, node, sig: int) -> None:
        if node.process is None:
            return
        try:
            os.killpg(node.process.pid, sig)
        except ProcessLookupError:
            pass

    def kill(self, broker_id: int) -> None:
        """SIGKILL node *broker_id* (no controlled shutdown) and reap it."""
        node = self._node(broker_id)
        with self._lock:
            if not node.running:
                raise ClusterError(f"{self.node_kind} {broker_id} is not running")
            self._signal(node, signal.SIGKILL)
            node.process.wait(KILL_WAIT_S)
            node.paused = False

    def pause(self, broker_id: int) -> None:
        """SIGSTOP node *broker_id*: frozen, it stops answering (and its ZooKeeper session or KRaft
        registration expires)."""
        node = self._node(broker_id)
        with self._lock:
            if not node.running:
                raise ClusterError(f"{self.node_kind} {broker_id} is not running")
            self._signal(node, signal.SIGSTOP)
            node.paused = True

    def resume(self, broker_id: int) -> None:
        """SIGCONT a paused node."""
        node = self._node(broker_id)
        with self._lock:
            if node.running:
                self._signal(node, signal.SIGCONT)
            node.paused = False

    def stop(self, broker_id: int, timeout_s: float | None = None) -> int | None:
        """SIGTERM node *broker_id* (controlled shutdown), wait, SIGKILL after *timeout_s*.

        Returns the exit status (negative signal number if killed), None if it was not running.
        """
        node = self._node(broker_id)
        timeout_s = self.stop_timeout_s if timeout_s is None else timeout_s
        with self._lock:
            if node.process is None:
                return None
            if node.process.poll() is None:
                if node.paused:
                    self._signal(node, signal.SIGCONT)
                self._signal(node, signal.SIGTERM)
                try:
                    node.process.wait(timeout_s)
                except subprocess.TimeoutExpired:
                    self._signal(node, signal.SIGKILL)
                    node.process.wait(KILL_WAIT_S)
            node.paused = False
            return node.process.returncode


class LocalCluster(ClusterQueries, NodeSignals):
    """ZooKeeper plus *brokers* broker processes on 127.0.0.1; see the module docstring.

    *configs* are Kafka broker configs given to every broker (``--config k=v``); ``{port}`` in a value is the
    broker's own port (``listeners=SASL_SSL://127.0.0.1:{port}`` secures each broker's one listener).
    *broker_args*: more ``pylog-broker`` arguments for every broker (e.g. ``--add-scram ...``).
    *base_port*: broker ``i`` listens on ``base_port + i``; None picks free ports.
    *schema_registry*: every broker serves a Schema Registry at ``http://127.0.0.1:<port>``
    (``schema_registry_url(id)``; ports chosen once like the brokers', ``registry_base_port + i`` when given),
    unless the configs set ``schema.registry.listeners`` themselves.
    *racks*: ``broker.rack`` of each broker, broker ``i`` in ``racks[i % len(racks)]`` (``["a", "b", "c"]``
    puts 6 brokers two per rack); None: no racks.
    *metrics*: every broker serves Prometheus metrics at ``metrics_url(id)`` (ports chosen once).
    Use as a context manager, or call :meth:`start` and :meth:`stop_all`.
    """

    def __init__(self, data_dir: str | Path, brokers: int = 3, *, configs: Mapping[str, object] | None = None,
                 base_port: int | None = None, zookeeper_port: int = 0, log_level: str = "INFO",
                 start_timeout_s: float = START_TIMEOUT_S, stop_timeout_s: float = STOP_TIMEOUT_S,
                 zookeeper_tick_ms: int = 500, broker_args: tuple[str, ...] | list[str] = (),
                 schema_registry: bool = True, registry_base_port: int | None = None,
                 racks: Sequence[str] | None = None, metrics: bool = False) -> None:
        if brokers < 1:
            raise ValueError(f"a cluster needs at least one broker, got {brokers}")
        self.racks = [str(rack) for rack in racks or ()]
        if any(not rack.strip() for rack in self.racks):
            raise ValueError(f"racks must be non-empty names, got {list(racks or ())}")
        if self.racks and "broker.rack" in {str(k) for k in (configs or {})}:
            raise ValueError("give broker racks either with racks=[...] or with the broker.rack config, not both")
        self.data_dir = Path(data_dir).resolve()
        self.configs = {str(k): str(v) for k, v in (configs or {}).items()}
        self.broker_args = list(broker_args)
        self.log_level = log_level
        self.start_timeout_s = start_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.zookeeper_port = zookeeper_port
        self.zookeeper_tick_ms = zookeeper_tick_ms
        self.zookeeper = None
        self._zk = None  # kazoo client for reading registrations
        self._lock = threading.RLock()
        ports = ([base_port + i for i in range(brokers)] if base_port is not None
                 else free_ports(brokers))
        registry = schema_registry and "schema.registry.listeners" not in self.configs
        registry_ports = (([registry_base_port + i for i in range(brokers)] if registry_base_port is not None
                           else [p for p in free_ports(brokers * 2) if p not in ports][:brokers])
                          if registry else [None] * brokers)
        self.nodes: dict[int, BrokerNode] = {
            i: BrokerNode(i, ports[i], self.data_dir / f"broker-{i}", registry_ports[i]) for i in range(brokers)}
        self._bases = (base_port, registry_base_port if registry else None)  # add_broker(): base + its id
        # ports this cluster picked itself, which start() may pick again when another process took one first
        self._picked_ports = (base_port is None, registry and registry_base_port is None)
        if metrics:
            taken = set(ports) | set(registry_ports)
            for node, port in zip(self.nodes.values(),
                                  [p for p in free_ports(brokers * 3) if p not in taken][:brokers]):
                node.metrics_port = port

    def _pick_ports_again(self, nodes: list[BrokerNode]) -> bool:
        """New free ports for *nodes*, whose process could not listen on one that another process took between
        our pick and its bind; False when a port was given (``base_port``: not ours to change)."""
        brokers_picked, registry_picked = self._picked_ports
        if not brokers_picked or (not registry_picked and any(n.registry_port is not None for n in nodes)):
            return False
        taken = {port for n in self.nodes.values() for port in (n.port, n.registry_port, n.metrics_port) if port}
        fresh = iter([p for p in free_ports(len(taken) + 3 * len(nodes)) if p not in taken])
        for node in nodes:
            log.warning("broker %d could not listen on a port another process took; starting it on new ports",
                        node.broker_id)
            node.port = next(fresh)
            if node.registry_port is not None:
                node.registry_port = next(fresh)
            if node.metrics_port is not None:
                node.metrics_port = next(fresh)
        return True

    # ----------------------------------------------------------------- addresses

    @property
    def broker_ids(self) -> list[int]:
        return sorted(self.nodes)

    @property
    def bootstrap_servers(self) -> str:
        """Every broker's address, comma-separated (clients need only one live one)."""
        return ",".join(self.nodes[i].address for i in self.broker_ids)

    @property
    def zookeeper_connect(self) -> str:
        if self.zookeeper is None:
            raise ClusterError("ZooKeeper is not running")
        return self.zookeeper.connect_string

    def port(self, broker_id: int) -> int:
        return self._node(broker_id).port

    def schema_registry_url(self, broker_id: int) -> str | None:
        """Broker *broker_id*'s Schema Registry (every broker's answers alike; writes reach the writer)."""
        return self._node(broker_id).schema_registry_url

    @property
    def schema_registry_urls(self) -> list[str]:
        return [self.nodes[i].schema_registry_url for i in self.broker_ids if self.nodes[i].registry_port]

    def metrics_url(self, broker_id: int) -> str | None:
        """Broker *broker_id*'s Prometheus endpoint (``metrics=True``), None when off."""
        port = self._node(broker_id).metrics_port
        return f"http://{HOST}:{port}/metrics" if port is not None else None

    def pid(self, broker_id: int) -> int | None:
        return self._node(broker_id).pid

    def address(self, broker_id: int) -> str:
        return self._node(broker_id).address

    def broker_data_dir(self, broker_id: int) -> Path:
        return self._node(broker_id).data_dir

    def log_path(self, broker_id: int) -> Path:
        return self._node(broker_id).log_path

    def is_running(self, broker_id: int) -> bool:
        return self._node(broker_id).running

    def is_paused(self, broker_id: int) -> bool:
        return self._node(broker_id).paused

    def available_brokers(self) -> list[int]:
        """Brokers whose process runs and is not paused."""
        return [i for i in self.broker_ids if self.nodes[i].running and not self.nodes[i].paused]

    def _node(self, broker_id: int) -> BrokerNode:
        try:
            return self.nodes[broker_id]
        except KeyError:
            raise ClusterError(f"no broker {broker_id} in this cluster (ids {self.broker_ids})") from None

    # ----------------------------------------------------------------- lifecycle

    def start(self) -> "LocalCluster":
        """Start ZooKeeper and every broker; return once all answer Metadata listing all of them.

        Raises ClusterError (with the failing broker's log tail) and leaves
        nothing running if that does not happen within ``start_timeout_s``.
        """
        self.data_dir.mkdir(parents=True, exist_ok=True)
        try:
            self.zookeeper = ZooKeeperServer(self.data_dir / "zookeeper", port=self.zookeeper_port, host=HOST,
                                             tick_ms=self.zookeeper_tick_ms)
            self.zookeeper.start(timeout=self.start_timeout_s)
            from kazoo.client import KazooClient

            zk_log = logging.getLogger("broker_sim.local.cluster.kazoo")
            zk_log.setLevel(logging.ERROR)  # its reconnect chatter is not the cluster's news
            self._zk = KazooClient(hosts=self.zookeeper.connect_string, timeout=10.0, logger=zk_log)
            self._zk.start(timeout=self.start_timeout_s)
            for broker_id in self.broker_ids:
                self._spawn(self.nodes[broker_id])
            for attempt in range(PORT_RACE_RETRIES + 1):
                try:
                    self.wait_until_ready(timeout_s=self.start_timeout_s)
                    break
                except ClusterError:
                    ended = [node for node in self.nodes.values() if node.process is not None
                             and node.process.poll() is not None]
                    lost = [node for node in ended if _lost_a_port_race(node)]
                    if (attempt == PORT_RACE_RETRIES or not lost or len(lost) < len(ended)
                            or not self._pick_ports_again(lost)):
                        raise
                    for node in lost:
                        self._spawn(node)
        except BaseException:
            self.stop_all()
            raise
        return self

    def add_broker(self, broker_id: int | None = None, *, wait: bool = True,
                   timeout_s: float | None = None) -> int:
        """Start one more broker (id ``max + 1`` unless given) in the running cluster, on a free port (or
        ``base_port + id`` when the cluster's ports follow a base; its Schema Registry likewise, on
        ``registry_base_port + id``), with the cluster's configs; return its id once every broker lists it.
        It hosts nothing until partitions are reassigned to it (``pylog reassign``), as a new Kafka broker."""
        with self._lock:
            if self.zookeeper is None:
                raise ClusterError("the cluster is not running: start() it before adding brokers")
            new_id = max(self.nodes) + 1 if broker_id is None else broker_id
            if new_id < 0 or new_id in self.nodes:
                raise ClusterError(f"broker id {new_id} is taken or negative (ids {self.broker_ids})")
            taken = {n.port for n in self.nodes.values()} | {n.registry_port for n in self.nodes.values()}
            ports = [p for p in free_ports(4) if p not in taken]
            base_port, registry_base_port = self._bases
            registry = any(n.registry_port is not None for n in self.nodes.values())
            node = BrokerNode(new_id, ports[0] if base_port is None else base_port + new_id,
                              self.data_dir / f"broker-{new_id}",
                              None if not registry else ports[1] if registry_base_port is None
                              else registry_base_port + new_id)
            self.nodes[new_id] = node
            self._spawn(node)
        if wait:
            self.wait_until_ready(timeout_s=self.start_timeout_s if timeout_s is None else timeout_s)
        return new_id

    def _command(self, node: BrokerNode) -> list[str]:
        command = [sys.executable, "-m", "broker_sim", "--zookeeper", self.zookeeper_connect,
                   "--broker-id", str(node.broker_id), "--data-dir", str(node.data_dir),
                   "--port", str(node.port), "--host", HOST, "--log-level", self.log_level]
        for key, value in self.configs.items():  # "{port}" in a value: this broker's port (per-broker listeners)
            command += ["--config", f"{key}={value.replace('{port}', str(node.port))}"]
        rack = self.rack_of(node.broker_id)
        if rack is not None:
            command += ["--config", f"broker.rack={rack}"]
        if node.registry_port is not None:
            command += ["--schema-registry-port", str(node.registry_port)]
        if node.metrics_port is not None:
            command += ["--metrics-port", str(node.metrics_port)]
        return command + list(self.broker_args)

    def rack_of(self, broker_id: int) -> str | None:
        """Broker *broker_id*'s ``broker.rack`` (``racks[id % len(racks)]``), None without racks."""
        return self.racks[broker_id % len(self.racks)] if self.racks else None

    def registered_brokers(self) -> list[int]:
        """Broker ids registered in ZooKeeper right now (``/brokers/ids`` children)."""
        from kazoo.exceptions import NoNodeError

        from broker_sim.controller import zk_layout

        if self._zk is None:
            raise ClusterError("ZooKeeper is not running")
        try:
            return sorted(int(child) for child in self._zk.get_children(zk_layout.BROKER_IDS))
        except NoNodeError:
            return []

    def _zookeeper_controller(self) -> int | None:
        """The controller's id from ZooKeeper's ``/controller``, None if unknown."""
        from broker_sim.controller import zk_layout

        if self._zk is None:
            return None
        try:
            data, _ = self._zk.get(zk_layout.CONTROLLER)
            return zk_layout.decode_controller(data)
        except Exception:  # noqa: BLE001 - no controller (or no ZooKeeper): any order will do
            return None

    def wait_for_registration_gone(self, broker_id: int, timeout_s: float | None = None) -> None:
        """Wait until ZooKeeper drops broker *broker_id*'s registration (its session ended or expired)."""
        timeout_s = self._session_expiry_wait_s() if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        while broker_id in self.registered_brokers():
            if time.monotonic() > deadline:
                raise ClusterError(f"broker {broker_id}'s registration in ZooKeeper did not expire within "
                                   f"{timeout_s:g} s after its process ended")
            time.sleep(POLL_S)

    def _session_expiry_wait_s(self) -> float:
        from broker_sim.config import BrokerConfig

        try:
            session_ms = BrokerConfig(self.configs).get("zookeeper.session.timeout.ms")
        except Exception:  # noqa: BLE001 - an unparsable value is the broker's error to report
            session_ms = 18_000
        return 2 * session_ms / 1000 + 10

    def _spawn(self, node: BrokerNode) -> None:
        with self._lock:
            if node.running:
                raise ClusterError(f"broker {node.broker_id} is already running (pid {node.pid})")
            if self._zk is not None and node.starts:
                self.wait_for_registration_gone(node.broker_id)
            node.data_dir.mkdir(parents=True, exist_ok=True)
            python_path = os.pathsep.join(p for p in (_source_root(), os.environ.get("PYTHONPATH")) if p)
            with open(node.log_path, "ab") as log:
                log.write(f"\n=== pylog cluster: starting broker {node.broker_id} on {node.address} "
                          f"at {time.strftime('%Y-%m-%dT%H:%M:%S')} ===\n".encode())
                log.flush()
                node.process = subprocess.Popen(
                    self._command(node), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    cwd=node.node_dir, start_new_session=True,
                    env={**os.environ, "PYTHONPATH": python_path, "PYTHONUNBUFFERED": "1"})
            node.paused = False
            node.starts += 1

    def wait_until_ready(self, broker_ids: Iterable[int] | None = None, *,
                         timeout_s: float = START_TIMEOUT_S) -> None:
        """Wait until each of *broker_ids* (default: every running broker) answers Metadata
        listing every running, unpaused broker. Raises ClusterError naming the broker."""
        deadline = time.monotonic() + timeout_s
        waiting = sorted(broker_ids) if broker_ids is not None else self.available_brokers()
        while True:
            expected = set(self.available_brokers())
            pending = []
            for broker_id in waiting:
                node = self.nodes[broker_id]
                if node.process is None or node.process.poll() is not None:
                    status = None if node.process is None else node.process.returncode
                    raise ClusterError(f"broker {broker_id} exited (status {status}) before it was ready; "
                                       f"log {node.log_path} ends with:\n{file_tail(node.log_path)}")
                try:
                    listed = set(fetch_metadata(HOST, node.port, (), broker_id=broker_id).brokers)
                except (OSError, ValueError):
                    listed = set()
                if not expected <= listed:
                    pending.append((broker_id, sorted(listed)))
            if not pending:
                return
            if time.monotonic() > deadline:
                broker_id, listed = pending[0]
                raise ClusterError(
                    f"broker {broker_id} did not list brokers {sorted(expected)} within {timeout_s:g} s "
                    f"(it lists {listed}); log {self.nodes[broker_id].log_path} ends with:\n"
                    f"{file_tail(self.nodes[broker_id].log_path)}")
            time.sleep(POLL_S)

    def restart(self, broker_id: int, *, wait: bool = True, timeout_s: float | None = None) -> None:
        """Start broker *broker_id* again (same id, port, data dir); stop it first if it runs.

        With *wait*, return once every available broker, this one included, answers Metadata listing every
        available broker (so it has registered in ZooKeeper and the others' metadata caches know it).
        """
        node = self._node(broker_id)
        if node.running:
            self.stop(broker_id)
        self._spawn(node)
        if wait:
            self.wait_until_ready(timeout_s=timeout_s or self.start_timeout_s)

    def heal(self, *, wait: bool = True, timeout_s: float | None = None) -> None:
        """Resume every paused broker and restart every dead one; with *wait*, until all are ready."""
        for broker_id in self.broker_ids:
            node = self.nodes[broker_id]
            if node.running and node.paused:
                self.resume(broker_id)
            elif not node.running:
                self._spawn(node)
        if wait:
            self.wait_until_ready(timeout_s=timeout_s or self.start_timeout_s)

    def stop_all(self, timeout_s: float | None = None) -> dict[int, int | None]:
        """Stop every broker, then ZooKeeper; returns {broker id: exit status} (0 = clean).

        A rolling stop, as Kafka operators do it: paused brokers are resumed, then
        the brokers get SIGTERM one at a time, the controller last, so each
        controlled shutdown has a live controller and a live broker to move its
        leaderships to. Each broker gets *timeout_s* to exit before SIGKILL.
        """
        timeout_s = self.stop_timeout_s if timeout_s is None else timeout_s
        statuses: dict[int, int | None] = {}
        with self._lock:
            running = [n for n in self.nodes.values() if n.running]
            for node in running:
                if node.paused:
                    self._signal(node, signal.SIGCONT)
            controller = self._zookeeper_controller()
            running.sort(key=lambda n: (n.broker_id == controller, n.broker_id))
            for node in running:
                self._signal(node, signal.SIGTERM)
                try:
                    node.process.wait(timeout_s)
                except subprocess.TimeoutExpired:
                    self._signal(node, signal.SIGKILL)
                    try:
                        node.process.wait(KILL_WAIT_S)
                    except subprocess.TimeoutExpired:
                        pass
            for node in self.nodes.values():
                node.paused = False
                statuses[node.broker_id] = node.process.returncode if node.process is not None else None
            if self._zk is not None:
                try:
                    self._zk.stop()
                    self._zk.close()
                except Exception:  # noqa: BLE001 - shutting down anyway
                    pass
                self._zk = None
            if self.zookeeper is not None:
                self.zookeeper.stop()
        return statuses

    def __enter__(self) -> "LocalCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop_all()

    def partition_dirs(self, topic: str, partition: int) -> dict[int, Path]:
        """{broker id: the partition's directory in its data dir} for brokers that have one."""
        dirs = {}
        for broker_id in self.broker_ids:
            path = self.nodes[broker_id].data_dir / f"{topic}-{partition}"
            if path.is_dir():
                dirs[broker_id] = path
        return dirs

    def describe(self) -> str:
        lines = [f"ZooKeeper at {self.zookeeper.connect_string if self.zookeeper else '(not running)'}"]
        for broker_id in self.broker_ids:
            node = self.nodes[broker_id]
            state = "paused" if node.paused else ("running" if node.running else "stopped")
            registry = f", schema registry {node.schema_registry_url}" if node.registry_port is not None else ""
            lines.append(f"broker {broker_id}: {node.address} pid {node.pid} {state}{registry}, "
                         f"data {node.data_dir}, log {node.log_path}")
        return "\n".join(lines)


# --------------------------------------------------------------------------- the foreground command

def rack_list(text: str) -> list[str]:
    """``--racks a,b,c``: non-empty rack names."""
    racks = [part.strip() for part in text.split(",")]
    if not all(racks):
        raise argparse.ArgumentTypeError(f"expected RACK[,RACK...] with non-empty names, got {text!r}")
    return racks


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``pylog-broker cluster`` and ``pylog cluster up``."""
    parser.add_argument("--brokers", type=positive_int, default=3, help="number of brokers (default: 3)")
    parser.add_argument("--data-dir", required=True,
                        help="directory for ZooKeeper's and every broker's data and logs (kept for the next run)")
    parser.add_argument("--base-port", type=port_number, default=None,
                        help="broker i listens on BASE_PORT + i (default: free ports)")
    parser.add_argument("--zookeeper-port", type=port_number, default=0,
                        help="ZooKeeper client port (default: a free one)")
    parser.add_argument("--schema-registry-port", type=port_number, default=0, metavar="N",
                        help="broker i serves its Schema Registry at http://127.0.0.1:N+i "
                             "(schema.registry.listeners; every broker serves one; default 0: a free port each)")
    parser.add_argument("--config", type=key_value, action="append", default=[], metavar="KEY=VALUE",
                        help="a Kafka broker config for every broker, e.g. min.insync.replicas=2 (repeatable); "
                             "{port} in a value is each broker's port, e.g. listeners=SASL_SSL://127.0.0.1:{port}")
    parser.add_argument("--add-scram", action="append", default=[], metavar="'MECHANISM=[name=U,password=P]'",
                        help="a SCRAM user stored in ZooKeeper before the brokers serve (repeatable), for a "
                             "secured cluster's inter-broker login and its admin")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                        help="the brokers' log level (default: INFO)")
    parser.add_argument("--racks", type=rack_list, default=None, metavar="RACK[,RACK...]",
                        help="broker.rack of the brokers, broker i in the (i mod count)-th rack, e.g. a,b,c "
                             "(default: no racks)")
    parser.add_argument("--start-timeout-s", type=positive_int, default=int(START_TIMEOUT_S),
                        help=f"how long to wait for the cluster to come up (default: {START_TIMEOUT_S:g})")


def build_parser(prog: str = "pylog-broker cluster") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog, description="Run a local ZooKeeper and N pylog brokers on 127.0.0.1 in the foreground; "
                               "Ctrl-C or SIGTERM stops them cleanly.")
    add_arguments(parser)
    return parser


def port_range_problem(args: argparse.Namespace) -> str | None:
    """Why the ports asked for cannot be given to every broker (None: they can)."""
    registry, base, brokers = getattr(args, "schema_registry_port", 0), args.base_port, args.brokers
    if not registry:
        return None
    if "schema.registry.listeners" in dict(args.config):
        return ("--schema-registry-port and --config schema.registry.listeners=... both set the brokers' "
                "Schema Registry listeners: give one of them")
    if registry + brokers - 1 > 65535:
        return (f"--schema-registry-port {registry} with --brokers {brokers} puts broker {brokers - 1}'s "
                f"registry on port {registry + brokers - 1}: give a port of at most {65536 - brokers}")
    if base is not None and base < registry + brokers and registry < base + brokers:
        return (f"--schema-registry-port {registry} and --base-port {base} overlap: with --brokers {brokers} "
                f"the registries take {registry}-{registry + brokers - 1} and the brokers {base}-{base + brokers - 1}")
    return None


def run_from_args(args: argparse.Namespace, *, out: TextIO | None = None, err: TextIO | None = None,
                  stop_event: threading.Event | None = None) -> int:
    """Start the cluster, print its addresses, run until SIGINT/SIGTERM (or *stop_event*), stop it.

    Returns 0 after a clean stop, 1 if the cluster did not start, 2 for ports that cannot be given.
    """
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    problem = port_range_problem(args)
    if problem:
        print(f"pylog cluster: {problem}", file=err, flush=True)
        return 2
    stop_event = stop_event or threading.Event()
    grow = threading.Event()  # SIGUSR1: add one broker to the running cluster
    restore = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            restore[sig] = signal.signal(sig, lambda *_: stop_event.set())
        restore[signal.SIGUSR1] = signal.signal(signal.SIGUSR1, lambda *_: grow.set())
    cluster = LocalCluster(args.data_dir, brokers=args.brokers, configs=dict(args.config),
                           base_port=args.base_port, zookeeper_port=args.zookeeper_port,
                           registry_base_port=getattr(args, "schema_registry_port", 0) or None,
                           log_level=args.log_level, start_timeout_s=args.start_timeout_s,
                           broker_args=[arg for text in args.add_scram for arg in ("--add-scram", text)],
                           racks=getattr(args, "racks", None))
    try:
        print(f"pylog cluster: starting ZooKeeper and {args.brokers} broker(s) in {cluster.data_dir}",
              file=err, flush=True)
        try:
            cluster.start()
        except (ClusterError, RuntimeError, OSError) as exc:
            print(f"pylog cluster: {exc}", file=err, flush=True)
            return 1
        if stop_event.is_set():
            return 0
        print(cluster.describe(), file=err, flush=True)
        print(f"pylog cluster: controller is broker {cluster.controller_id()}; Ctrl-C stops the cluster, "
              f"kill -USR1 {os.getpid()} adds a broker", file=err, flush=True)
        print(f"PYLOG_BOOTSTRAP_SERVERS={cluster.bootstrap_servers}", file=out, flush=True)
        if cluster.schema_registry_urls:  # every broker's: clients (and pylog schemas) try them in turn
            print(f"PYLOG_SCHEMA_REGISTRY_URL={','.join(cluster.schema_registry_urls)}", file=out, flush=True)
        reported: set[int] = set()
        while not stop_event.wait(0.5):
            if grow.is_set():
                grow.clear()
                try:
                    added = cluster.add_broker()
                    node = cluster.nodes[added]
                    print(f"pylog cluster: added broker {added} at {node.address} (data {node.data_dir}); it hosts "
                          f"nothing until partitions are reassigned to it (pylog reassign)", file=err, flush=True)
                    print(f"PYLOG_BOOTSTRAP_SERVERS={cluster.bootstrap_servers}", file=out, flush=True)
                except (ClusterError, OSError) as exc:
                    print(f"pylog cluster: adding a broker failed: {exc}", file=err, flush=True)
            for broker_id in cluster.broker_ids:
                node = cluster.nodes[broker_id]
                if node.process is not None and node.process.poll() is not None and broker_id not in reported:
                    reported.add(broker_id)
                    print(f"pylog cluster: broker {broker_id} exited with status {node.process.returncode}; "
                          f"see {node.log_path}", file=err, flush=True)
        print("pylog cluster: stopping", file=err, flush=True)
        return 0
    finally:
        statuses = cluster.stop_all()
        if any(s is not None for s in statuses.values()):
            print("pylog cluster: stopped (" + ", ".join(f"broker {b}: status {s}" for b, s in statuses.items())
                  + ")", file=err, flush=True)
        for sig, handler in restore.items():
            signal.signal(sig, handler)


def main(argv: Sequence[str] | None = None, *, prog: str = "pylog-broker cluster") -> int:
    """``pylog-broker cluster ...``: parse *argv* and run the cluster in the foreground."""
    args = build_parser(prog).parse_args(argv)
    return run_from_args(args)


if __name__ == "__main__":
    sys.exit(main())
