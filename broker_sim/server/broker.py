"""The broker's composition root: configuration, storage, handlers and the listener.

Theory of operation: ``Broker`` wires the parts together — ``MetadataStore``
(topics), ``ReplicaManager`` (partitions and their logs), ``ProducerIdManager``,
the group coordinator (``groups``: replays ``__consumer_offsets`` at start,
runs its own 100 ms timer), the transaction coordinator (``transactions``:
replays ``__transaction_state`` at start, finishing interrupted commits and
aborts, and aborts timed-out transactions on its timer), the request ``Dispatcher`` and the asyncio
listener — and runs housekeeping (time-based segment rolls, ``flush.ms``,
retention) and the log cleaner (compaction, every ``log.cleaner.backoff.ms``)
in the background.  All state is touched only from the broker's event loop.

Two ways to run it:

* foreground: ``asyncio.run(broker.serve())`` (what ``pylog-broker`` does);
  SIGTERM/SIGINT stop it cleanly (logs flushed and closed, producer state
  snapshotted);
* in-process: ``Broker(port=0).start()`` runs the loop in a daemon thread and
  returns once the port accepts connections; ``stop()`` or a ``with`` block
  ends it.  ``port=0`` picks a free port; ``bootstrap_servers`` says which.

Cluster mode: with ``zookeeper.connect`` set (``pylog-broker --zookeeper``) the
broker joins a ZooKeeper-era Kafka cluster instead: the metadata store is the
``ZkMetadataStore`` (topics, assignments, partition states, live brokers as
ZooKeeper holds them), every broker runs a controller candidate
(``controller/zk_controller.py``), ``ClusterMember`` (``server/cluster_member.py``)
keeps the local replicas leader or follower as the partition states say,
producer ids come in blocks from ZooKeeper, and a clean stop is a controlled
shutdown (leaderships moved away first).

Schema Registry: with ``schema.registry.listeners`` set (``pylog-broker
--schema-registry-port``) the broker also serves Confluent's Schema Registry
REST API over the ``_schemas`` topic (``server/schema_registry.py``; the
first bound URL is ``schema_registry_url``, published in the cluster
registration so that other brokers forward writes to the leader of
``_schemas``-0).

Files: at start the soft RLIMIT_NOFILE is raised to the hard limit and the
partition budget derived from it (``max.broker.partitions``, KIP-578's name:
half the descriptors at ``DESCRIPTORS_PER_PARTITION`` each, unless set; the
partitions' segments share one LRU of open files within that half).  Topic changes
go through one path per kind (``_create_topic``, ``_add_partitions``): validate
(name, count, budget), create the partition directories in slices that yield
to the event loop, persist the metadata file, and only then publish the topic;
a failure at any step removes what was made and answers KAFKA_STORAGE_ERROR.

Tests: ``broker.faults`` injects Kafka errors, delays and disconnects into chosen answers
(``server/faults.py``); ``unavailable(seconds)`` closes the listeners and every connection and serves again
on the same ports later; ``restart()`` stops and starts on the same data dir and ports.

Acknowledged data survives SIGKILL without fsync: appends are ``os.write`` s
into the page cache, which outlives the process; recovery on the next start
truncates only a torn tail that was never acknowledged.
"""
from __future__ import annotations

import asyncio
import logging
import resource
import shutil
import signal
import tempfile
import threading
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping

import kafka.errors as Errors

from broker_sim.config import BrokerConfig, ConfigError, shown_configs
from broker_sim.controller.cluster_state import BrokerEndpoint
from broker_sim.controller.metadata import MetadataError, MetadataStore, TopicInfo, validate_topic_name
from broker_sim.coordinator.group.records import OFFSETS_TOPIC
from broker_sim.coordinator.group.service import GroupService
from broker_sim.coordinator.group.wiring import group_service_for
from broker_sim.coordinator.producer_ids import ProducerIdManager
from broker_sim.coordinator.txn.records import TRANSACTION_STATE_TOPIC
from broker_sim.coordinator.txn.service import TxnService
from broker_sim.coordinator.txn.wiring import txn_service_for
from broker_sim.replication.replica_manager import ReplicaManager
from broker_sim.server.dispatch import Dispatcher
from broker_sim.server.faults import FaultInjector
from broker_sim.server.handlers import build_handlers
from broker_sim.security import acl, sasl, scram
from broker_sim.security.acl import FileAclStore
from broker_sim.security.quotas import QuotaManager, sanitize
from broker_sim.security.entity_configs import EntityConfigs, FileEntityConfigs, ZkEntityConfigs
from broker_sim.server.inter_broker import InterBrokerIdentity
from broker_sim.server.listeners import Listener, format_address, inter_broker_listener_name
from broker_sim.server.listeners import configure as listeners_from_config
from broker_sim.server.loop_monitor import LoopMonitor
from broker_sim.server.metrics import BrokerMetrics, serve_metrics
from broker_sim.server.network import Connections, KafkaConnection, TlsAcceptor
from broker_sim.storage.log import DESCRIPTORS_PER_PARTITION, partition_limit

if TYPE_CHECKING:
    from broker_sim.server.schema_registry import SchemaRegistry

log = logging.getLogger(__name__)
HOUSEKEEPING_INTERVAL_S = 1.0


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def _tls_module():
    from broker_sim.security import tls  # with TLS listeners only: a plaintext broker never loads it

    return tls


def _storage_step(steps, topic: str):
    """``yield from steps``, with a failing disk (or descriptor limit) as KAFKA_STORAGE_ERROR naming the cause."""
    try:
        return (yield from steps)
    except (OSError, Errors.KafkaStorageError) as exc:
        raise MetadataError(Errors.KafkaStorageError, f"creating the partitions of {topic!r} failed: {exc}") from exc


def _run(steps):
    """Drive a creation generator to its end at once; returns its value."""
    try:
        while True:
            next(steps)
    except StopIteration as done:
        return done.value


async def _run_async(steps):
    """Drive a creation (or deletion) generator, letting the event loop run between its slices.

    Cancelled (the broker stops), the generator is closed: a creation undoes what it made, a deletion
    stops (directories it did not reach are removed when the name is created again).
    """
    try:
        while True:
            next(steps)
            await asyncio.sleep(0)
    except StopIteration as done:
        return done.value
    finally:
        steps.close()


def raise_open_file_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit (Kafka's docs ask for a high ulimit); returns the soft limit.

    Storage holds at most half of them (one LRU of open segments shared by every partition), connections the rest.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard and hard != resource.RLIM_INFINITY:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            log.info("raised the open-file limit (RLIMIT_NOFILE) from %d to its hard limit %d", soft, hard)
            soft = hard
        except (ValueError, OSError) as exc:
            log.warning("cannot raise the open-file limit from %d to %d: %s", soft, hard, exc)
    return soft


# a TLS client must finish its handshake within this long (the connection is not a KafkaConnection yet, so
# connections.max.idle.ms does not cover it; it is counted against max.connections[.per.ip] already)
TLS_HANDSHAKE_TIMEOUT_S = 10.0


class BrokerStopError(RuntimeError):
    """A broker's event-loop thread did not end within stop()'s timeout."""


class Unavailable:
    """A spell of ``Broker.unavailable()``: ``end()`` (or the end of its ``with`` block) serves again."""

    def __init__(self, broker: "Broker") -> None:
        self._broker = broker
        self._timer = None

    def _end_on_loop(self) -> None:
        asyncio.ensure_future(self._broker._come_up())

    def end(self) -> None:
        broker = self._broker
        if broker._loop is not None and not broker._loop.is_closed() and broker._thread is not None:
            asyncio.run_coroutine_threadsafe(broker._come_up(), broker._loop).result(30)

    def __enter__(self) -> "Unavailable":
        return self

    def __exit__(self, *exc) -> None:
        self.end()


class Broker:
    """A single-node Kafka-protocol broker.

    >>> with Broker(port=0) as broker:            # doctest: +SKIP
    ...     KafkaProducer(bootstrap_servers=broker.bootstrap_servers).send("events", b"hi")
    """

    def __init__(self, data_dir: str | Path | None = None, *, host: str = "127.0.0.1", port: int = 0,
                 broker_id: int | None = None, config: Mapping[str, object] | None = None,
                 advertised_host: str | None = None, now_ms: Callable[[], int] = wall_clock_ms,
                 add_scram: tuple[str, ...] | list[str] = ()) -> None:
        overrides = dict(config or {})
        if broker_id is not None:
            overrides["broker.id"] = broker_id
        self.config = BrokerConfig(overrides)
        self.broker_id = self.config.get("broker.id")
        self._owns_data_dir = data_dir is None
        self.data_dir = Path(data_dir) if data_dir is not None else Path(tempfile.mkdtemp(prefix="pylog-broker-"))
        # listeners / advertised.listeners (server/listeners.py); without them one PLAINTEXT listener at host:port
        self.listeners: list[Listener] = listeners_from_config(self.config, host=host, port=port,
                                                               advertised_host=advertised_host)
        self.inter_broker_listener = inter_broker_listener_name(self.config, self.listeners)
        # TLS: loaded now, so a bad keystore fails the start naming its config, not the first handshake
        tls = _tls_module() if any(l.protocol in ("SSL", "SASL_SSL") for l in self.listeners) else None
        self._tls = {l.name: tls.server_context(self.config, l.name) for l in self.listeners
                     if l.protocol in ("SSL", "SASL_SSL")}
        # mTLS principals: ssl.principal.mapping.rules, or listener.name.<l>.ssl.principal.mapping.rules
        self._principals = {name: tls.PrincipalMapper(tls.setting(self.config, name, "ssl.principal.mapping.rules"))
                            for name in self._tls}
        # SASL: mechanisms and PLAIN users checked now; SCRAM credentials come from entity_configs once open
        self.entity_configs: EntityConfigs | None = None  # SCRAM credentials (and quotas) of users and clients
        self.acls: acl.AclStore | None = None  # ACL bindings: the data dir's file, or ZooKeeper /kafka-acl
        self.authorizer: acl.Authorizer | None = None  # set when authorizer.class.name is (handlers/access.py)
        self.quotas: QuotaManager | None = None  # client quotas (security/quotas.py), once entity_configs is open
        acl.parse_super_users(self.config.raw("super.users"))  # a malformed list fails the start
        self._sasl = {l.name: sasl.SaslListener.from_config(self.config, l.name, None) for l in self.listeners
                      if l.protocol.startswith("SASL_")}
        self._add_scram = [scram.parse_add_scram(text) for text in add_scram]
        inter = next(l for l in self.listeners if l.name == self.inter_broker_listener)
        self.inter_broker_ssl = (tls.client_context(self.config, inter.name)
                                 if inter.protocol in ("SSL", "SASL_SSL") else None)
        # a cluster's brokers log in to each other's SASL inter-broker listener (a single node has no peers)
        self.inter_broker_sasl = (self._inter_broker_login(inter) if inter.protocol.startswith("SASL_")
                                  and self.config.raw("zookeeper.connect") else None)
        first = self.listeners[0]
        self.host = first.host or "0.0.0.0"  # where the first listener binds
        self.port = first.port  # the first listener's port (bound port once started)
        self.advertised_host = first.advertised_host or self.host
        self.now_ms = now_ms
        self.stopping = False
        self.metadata: MetadataStore | None = None
        self.replicas: ReplicaManager | None = None
        self.producer_ids: ProducerIdManager | None = None
        self.groups: GroupService | None = None
        self.transactions: TxnService | None = None
        # internal topic name -> its coordinator's create-on-first-use (Metadata auto-creation goes there)
        self.internal_topics: dict[str, Callable[[], None]] = {}
        self.cluster = None  # ClusterMember in cluster mode
        self.inter_broker: InterBrokerIdentity | None = None  # cluster mode: proves this broker to its peers
        self.dispatcher: Dispatcher | None = None
        self.faults = FaultInjector()  # faults on demand (server/faults.py): kept across restart()
        self._servers: list[asyncio.AbstractServer] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_event: asyncio.Event | None = None
        self._stop_future: asyncio.Future | None = None
        self.connections = Connections.from_config(self.config)  # live connections, quotas, request memory
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None
        self.started_in_ms: float | None = None
        self.loop_monitor = LoopMonitor()  # event-loop stalls over 100 ms are logged and counted
        self.metrics = BrokerMetrics(self.config.get("metrics.consumergroup.max.series"))
        self.metrics_port: int | None = None  # where /metrics is served (metrics.port), once listening
        self._metrics_server = None  # server/http.py's HttpServer
        # schema.registry.listeners (server/schema_registry.py): built now, so bad URLs or TLS fail the start
        self.schema_registry = self._schema_registry() if self.config.raw("schema.registry.listeners").strip() else None
        self.max_broker_partitions = 0  # set at start from max.broker.partitions or the open-file limit
        self._partition_limit_source = ""

    # --- public API -------------------------------------------------------
    @property
    def bootstrap_servers(self) -> str:
        """The first listener's advertised address (``bootstrap_servers_for`` names another listener's)."""
        return self.bootstrap_servers_for(self.listeners[0].name)

    def bootstrap_servers_for(self, listener: str) -> str:
        for candidate in self.listeners:
            if candidate.name == listener.upper():
                host, port = candidate.advertised or (candidate.host or "127.0.0.1", candidate.port)
                return format_address(host, port)
        raise KeyError(f"no listener named {listener} (listeners: {', '.join(l.name for l in self.listeners)})")

    @property
    def schema_registry_url(self) -> str | None:
        """The first bound ``schema.registry.listeners`` URL (None: the registry is off, or not started yet)."""
        return self.schema_registry.url if self.schema_registry is not None else None

    def group_timing(self, group_id: str) -> tuple[int, int]:
        """A KIP-848 group's session timeout and heartbeat interval: its group configs (``kafka-configs
        --entity-type groups``), else the broker's ``group.consumer.*`` (for the group coordinator)."""
        from broker_sim.resource_configs import group_config

        timing = group_config(self.entity_configs, group_id, self.config)
        return timing.session_timeout_ms, timing.heartbeat_interval_ms

    def endpoint_on(self, listener: str | None) -> BrokerEndpoint:
        """This broker's address for a client on ``listener`` (the inter-broker one if it is not advertised)."""
        endpoint = self.endpoint()
        return (endpoint.on(listener) if listener else None) or endpoint

    def endpoint(self) -> BrokerEndpoint:
        """This broker as registered: every advertised listener; host/port = the inter-broker listener's."""
        advertised = [(l.name, l.protocol) + l.advertised for l in self.listeners if l.advertised]
        first = self.listeners[0]
        inter = next((entry for entry in advertised if entry[0] == self.inter_broker_listener),
                     advertised[0] if advertised else (first.name, first.protocol, self.host, self.port))
        return BrokerEndpoint(self.broker_id, inter[2], inter[3], self.config.get("broker.rack") or None,
                              tuple(advertised), self.schema_registry_url)

    def start(self, timeout: float = 30.0) -> "Broker":
        """Run the broker on a background thread; return once it accepts connections."""
        if self._thread is not None:
            raise RuntimeError("broker already started")
        self._thread = threading.Thread(target=self._thread_main, name=f"pylog-broker-{self.broker_id}",
                                        daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError(f"broker did not start within {timeout} s")
        if self._startup_error is not None:
            self._thread.join()
            self._thread = None
            raise self._startup_error
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Stop a broker started with start(): close connections, flush and close logs.

        Raises BrokerStopError when its thread is still running after ``timeout`` seconds (the broker is left
        as it is, so ``stop()`` can be called again); its data directory is kept then.
        """
        if self._thread is None:
            return
        if self._loop is not None and self._stop_event is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._stop_event.set)
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise BrokerStopError(f"broker {self.broker_id} did not stop within {timeout:g} s: its thread "
                                  f"{self._thread.name} is still running (a shutdown step hangs; see its log)")
        self._thread = None
        if self._owns_data_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def restart(self, timeout: float = 30.0) -> "Broker":
        """Stop and start again on the same data directory and ports (a temporary data dir is kept meanwhile).

        Clients see their connections close and then the same addresses serve again, with every record,
        committed offset, producer state and transaction the broker had made durable."""
        log.warning("broker %d restarting on %s", self.broker_id, self.data_dir)
        registry_ports = [server.port for server in self.schema_registry.servers] if self.schema_registry else []
        owns, self._owns_data_dir = self._owns_data_dir, False
        try:
            self.stop(timeout)
        finally:
            self._owns_data_dir = owns
        self._ready = threading.Event()
        self._startup_error = None
        self._servers = []
        self.stopping = False
        self.connections = Connections.from_config(self.config)
        if not self.clustered:  # reopened from the data dir at start
            self.entity_configs = None
            self.acls = None
        if self.schema_registry is not None:  # a new one (its state comes from _schemas), on the same ports
            registry = self._schema_registry()
            registry.listeners = [replace(listener, port=port) if port else listener
                                  for listener, port in zip(registry.listeners, registry_ports)]
            self.schema_registry = registry
        return self.start(timeout)

    def unavailable(self, seconds: float | None = None) -> "Unavailable":
        """Close the listeners and every connection; accept again on the same ports after ``seconds`` (None:
        when the returned handle's ``end()`` is called or its ``with`` block ends).  Data and state are kept,
        as librdkafka's ``rd_kafka_mock_broker_set_down`` / ``_set_up``."""
        if self._loop is None or self._thread is None:
            raise RuntimeError("unavailable() needs a broker started with start()")
        asyncio.run_coroutine_threadsafe(self._go_down(), self._loop).result(30)
        spell = Unavailable(self)
        if seconds is not None:
            spell._timer = self._loop.call_soon_threadsafe(self._loop.call_later, seconds, spell._end_on_loop)
        return spell

    def __enter__(self) -> "Broker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    async def serve(self, *, handle_signals: bool = False, when_serving: Callable[[], object] | None = None) -> None:
        """Run until stopped (SIGTERM/SIGINT when ``handle_signals``); ``when_serving`` is called once the listeners
        accept connections (set-up that need not delay them: the broker program's ``tune_malloc``)."""
        started = time.monotonic()
        await self._open()
        self.started_in_ms = (time.monotonic() - started) * 1000
        log.info("pylog broker %d listening on %s (data dir %s, ready in %.0f ms)", self.broker_id,
                 ", ".join(f"{format_address(l.host or '0.0.0.0', l.port)} ({l.name}"
                           + (f" as {format_address(*l.advertised)}" if l.advertised and
                              l.advertised != (l.host, l.port) else "") + ")" for l in self.listeners),
                 self.data_dir, self.started_in_ms)
        if handle_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                self._loop.add_signal_handler(sig, self._stop_event.set)
        self._ready.set()
        if when_serving is not None:
            when_serving()
        try:
            await self._stop_event.wait()
        finally:
            await self._close()

    def _inter_broker_login(self, inter: Listener) -> "sasl.SaslLogin":
        mechanism = self.config.raw("sasl.mechanism.inter.broker.protocol").strip().upper()
        offered = self._sasl[inter.name].mechanisms
        mechanism = mechanism or offered[0]
        if mechanism not in offered:
            raise ConfigError(f"sasl.mechanism.inter.broker.protocol={mechanism} is not enabled on the inter-broker "
                              f"listener {inter.name} (sasl.enabled.mechanisms there: {', '.join(offered)})")
        return sasl.SaslLogin(mechanism, *sasl.client_login(self.config, inter.name, mechanism))

    def _schema_registry(self) -> "SchemaRegistry":
        # imported only when configured: the registry's modules were ~15% of a plain broker's imports
        from broker_sim.server.schema_registry import SchemaRegistry

        return SchemaRegistry(self)

    # --- used by handlers -------------------------------------------------
    def stop_future(self) -> asyncio.Future:
        """A future completed at shutdown (done once the broker stops; long polls wait on it too, so they end
        promptly)."""
        return asyncio.ensure_future(asyncio.shield(self._stop_future))

    @property
    def clustered(self) -> bool:
        return bool(self.config.raw("zookeeper.connect"))

    def create_topic(self, name: str, partitions: int, configs: Mapping[str, str], *,
                     internal: bool = False, replication_factor: int | None = None,
                     assignment: list[list[int]] | None = None) -> TopicInfo:
        """Create a topic: here on a single node; in ZooKeeper in a cluster (replicas open as leaders are elected).

        Blocks until done: for the few partitions of auto-created and internal topics.  CreateTopics
        uses ``create_topic_async``.  Raises MetadataError (the Kafka error code to answer).
        """
        return _run(self._create_topic(name, partitions, dict(configs), internal, replication_factor, assignment))

    async def create_topic_async(self, name: str, partitions: int, configs: Mapping[str, str], *,
                                 replication_factor: int | None = None,
                                 assignment: list[list[int]] | None = None) -> TopicInfo:
        """``create_topic``, yielding to the event loop between slices of partitions (a big topic takes seconds)."""
        return await _run_async(self._create_topic(name, partitions, dict(configs), False, replication_factor,
                                                   assignment))

    def _create_topic(self, name: str, partitions: int, configs: dict[str, str], internal: bool,
                      replication_factor: int | None, assignment: list[list[int]] | None):
        """The one creation path (a generator, see ``_run``): validate, create directories, persist, publish.

        Nothing is visible before the metadata file holds the topic, and nothing is left when a
        step fails: the directories go again and the reserved name is released.
        """
        if self.cluster is not None:
            self.metadata.check_new_topic(name, partitions, configs)
            self.check_partition_budget(partitions * (replication_factor or 1), f"topic {name!r}")
            info = self.metadata.create_topic(name, partitions, configs, internal=internal,
                                              replication_factor=replication_factor, assignment=assignment)
            self.cluster.reconcile()
        else:
            self.metadata.check_new_topic(name, partitions, configs)
            self.check_partition_budget(partitions, f"topic {name!r}")
            info = TopicInfo(name, uuid.uuid4(), partitions, configs, internal)
            self.metadata.reserve(name, partitions)
            try:
                created = yield from _storage_step(self.replicas.create_partitions(info, 0, partitions), name)
                try:
                    self.metadata.add_topic(info)
                except BaseException:
                    self.replicas.discard(created, name, 0, partitions)
                    raise
                self.replicas.publish(created)
            finally:
                self.metadata.release(name)
        log.info("created topic %s with %d partitions%s", name, partitions,
                 f" and configs {configs}" if configs else "")
        return info

    def check_partition_budget(self, adding: int, what: str) -> None:
        """KIP-578's max.broker.partitions (by default what the open-file limit allows): POLICY_VIOLATION beyond."""
        limit = self.max_broker_partitions
        if self.cluster is not None:  # replicas spread over the live brokers: the cluster's share
            hosted = sum(len(r) for t in self.metadata.topics.values() for r in t.replicas)
            limit *= max(1, len(self.metadata.brokers))
        else:
            hosted = self.metadata.partition_count
        if hosted + adding > limit:
            raise MetadataError(
                Errors.PolicyViolationError,
                f"{what} would bring the partitions hosted to {hosted + adding}, over the limit {limit} "
                f"(max.broker.partitions{self._partition_limit_source})")

    def auto_create_topic(self, name: str) -> TopicInfo:
        """Metadata's auto-creation: internal topics come from their coordinator, with its configs."""
        validate_topic_name(name)
        ensure = self.internal_topics.get(name)
        if ensure is not None:
            ensure()
            return self.metadata.get(name)
        return self.create_topic(name, self.config.get("num.partitions"), {},
                                 replication_factor=self._default_replication_factor())

    def _default_replication_factor(self) -> int | None:
        return self.config.get("default.replication.factor") if self.cluster is not None else None

    async def delete_topic(self, name: str) -> None:
        """Forget the topic (persisted first: a failing disk leaves it whole), then remove its partitions
        in slices between which the event loop runs."""
        if self.metadata.get(name).internal:
            raise MetadataError(Errors.InvalidRequestError, f"internal topic {name!r} cannot be deleted")
        info = self.metadata.delete_topic(name)
        if self.cluster is None:  # in a cluster the controller deletes it; replicas go at the next reconcile
            try:
                await _run_async(self.replicas.delete_topic(info))
            except OSError as exc:  # deleted for clients already; a marked directory is removed at the next start
                log.error("removing the partitions of deleted topic %s failed: %s", name, exc)
        log.info("deleted topic %s", name)

    async def add_partitions(self, name: str, count: int) -> None:
        """CreatePartitions: as ``create_topic_async``, the new directories before the persisted count."""
        await _run_async(self._add_partitions(name, count))

    def _add_partitions(self, name: str, count: int):
        info = self.metadata.check_partition_count(name, count)
        first = info.partitions
        if name in self.metadata.pending:
            raise MetadataError(Errors.InvalidPartitionsError, f"partitions are being added to {name!r} already")
        self.check_partition_budget(count - first, f"{count - first} more partitions of {name!r}")
        if self.cluster is not None:
            self.metadata.set_partition_count(name, count)
        else:
            self.metadata.reserve(name, count - first)
            try:
                created = yield from _storage_step(
                    self.replicas.create_partitions(replace(info, partitions=count), first, count), name)
                try:
                    self.metadata.set_partition_count(name, count)
                except BaseException:
                    self.replicas.discard(created, name, first, count)
                    raise
                self.replicas.publish(created)
            finally:
                self.metadata.release(name)
        log.info("topic %s now has %d partitions", name, count)

    def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        info = self.metadata.set_configs(name, dict(configs))
        if self.cluster is None:
            self.replicas.reconfigure(info)
        log.info("topic %s configs are now %s", name, info.configs)

    # --- internals --------------------------------------------------------
    def _thread_main(self) -> None:
        try:
            asyncio.run(self.serve())
        except BaseException as exc:  # surfaced to start()'s caller
            if not self._ready.is_set():
                self._startup_error = exc
                self._ready.set()
            else:
                log.exception("broker stopped with an error")

    async def _open(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop_event = asyncio.Event()
        self._stop_future = self._loop.create_future()
        self._set_partition_limit(raise_open_file_limit())
        if self.clustered:
            await self._join_cluster()
        else:
            self.metadata = MetadataStore(self.data_dir, self.broker_id, self.config.raw("cluster.id"))
            self.replicas = ReplicaManager(self.data_dir, self.config, broker_id=self.broker_id, now_ms=self.now_ms,
                                           internal_topics=self.internal_topics)
            for info in self.metadata.topics.values():
                self.replicas.open_topic(info)
            if self.metadata.partition_count > self.max_broker_partitions:
                log.warning("hosting %d partitions, over the limit %d (max.broker.partitions%s): new ones are "
                            "refused until some are deleted", self.metadata.partition_count,
                            self.max_broker_partitions, self._partition_limit_source)
            self.producer_ids = ProducerIdManager(self.data_dir)
        self.groups = group_service_for(self)
        self.transactions = txn_service_for(self)  # after groups: completing a commit may touch their offsets
        self.replicas.verify_transaction = self.transactions.verify_partition
        if self.schema_registry is not None:  # broker-side schema validation (confluent.*.schema.validation)
            from broker_sim.registry.validation import broker_validation

            self.replicas.record_check = broker_validation(self.schema_registry)
        self.internal_topics[OFFSETS_TOPIC] = self.groups.ensure_topic
        self.internal_topics[TRANSACTION_STATE_TOPIC] = self.transactions.ensure_topic
        self.metrics.watch(self.replicas, self.metadata, self.groups, self.transactions, self.connections,
                           self.loop_monitor)
        if self.entity_configs is None:
            self.entity_configs = FileEntityConfigs(self.data_dir)
        if self.acls is None:
            self.acls = FileAclStore(self.data_dir)
        self.authorizer = acl.Authorizer.from_config(self.config, self.acls)
        self.metrics.restrict(self.authorizer, self.config.get("metrics.principal"))  # what /metrics may name
        for user, mechanism, credential in self._add_scram:  # pylog-broker --add-scram
            await self._loop.run_in_executor(None, self.entity_configs.alter, "users", sanitize(user),
                                             {mechanism: credential.to_text()})
            log.info("stored the %s credential of user %r (--add-scram)", mechanism, user)
        for listener_sasl in self._sasl.values():
            listener_sasl.credentials = self.entity_configs
        if any(mechanism.startswith("SCRAM-") for listener_sasl in self._sasl.values()
               for mechanism in listener_sasl.mechanisms):  # settled now, so a bad file fails the start
            self.entity_configs.mock_secret  # noqa: B018
        self.quotas = QuotaManager.from_config(self.config, self.entity_configs)
        self.connections.quotas.ip_rate = self.quotas.connection_rate
        self._apply_dynamic_configs()
        loop = self._loop
        self.entity_configs.on_change(lambda: loop.call_soon_threadsafe(self._apply_dynamic_configs))
        self.dispatcher = Dispatcher(build_handlers(self), self.inter_broker, self.metrics, quotas=self.quotas,
                                     inter_broker_listener=self.inter_broker_listener, faults=self.faults)
        await self._listen()
        self.connections.start()
        self._isr_checks = None
        if self.schema_registry is not None:  # before registering: the registration publishes its URL
            await self.schema_registry.start()
        if self.cluster is not None:
            self.cluster.start(self.endpoint())
            self._isr_checks = self._loop.create_task(self._check_isr())
        if self.config.get("metrics.port") >= 0:
            metrics_host = self.config.raw("metrics.host").strip() or "127.0.0.1"  # explicit bind (server/metrics.py)
            self._metrics_server = await serve_metrics(self.metrics, metrics_host, self.config.get("metrics.port"))
            self.metrics_port = self._metrics_server.sockets[0].getsockname()[1]
            log.info("metrics at http://%s:%d/metrics", metrics_host, self.metrics_port)
        self._housekeeping = self._loop.create_task(self._housekeep())
        self._loop_monitoring = self._loop.create_task(self.loop_monitor.run())
        self._group_timer = self._loop.create_task(self.groups.run_timer())
        self._txn_timer = self._loop.create_task(self.transactions.run_timer())
        self._cleaning = (self._loop.create_task(self._clean_logs())
                          if self.config.get("log.cleaner.enable") else None)

    async def _listen(self) -> None:
        """Bind every listener (the ports bound before, after a restart or an unavailable() spell)."""
        for index, listener in enumerate(self.listeners):
            context = self._tls.get(listener.name)

            def connection(name=listener.name):
                return KafkaConnection(self.dispatcher.handle, self.connections, listener=name,
                                       principal=self._principals.get(name), sasl=self._sasl.get(name))

            # TLS: counted against the connection limits at accept, handshakes bounded (server/network.py)
            factory = connection if context is None else (
                lambda make=connection, context=context: TlsAcceptor(self.connections, context,
                                                                     TLS_HANDSHAKE_TIMEOUT_S, make))
            server = await self._loop.create_server(factory, listener.bind_host, listener.port, reuse_address=True)
            self._servers.append(server)
            self.listeners[index] = listener.bound(server.sockets[0].getsockname()[1])
        self.port = self.listeners[0].port

    async def _go_down(self) -> None:
        for server in self._servers:
            server.close()
        for server in self._servers:
            await server.wait_closed()
        self._servers = []
        for connection in list(self.connections):
            connection.close()
        log.warning("broker %d unavailable: listeners closed, every connection closed (data and state kept)",
                    self.broker_id)

    async def _come_up(self) -> None:
        if self._servers or self.stopping:
            return
        await self._listen()
        log.warning("broker %d available again on %s", self.broker_id,
                    ", ".join(format_address(l.host or "0.0.0.0", l.port) for l in self.listeners))

    def _apply_dynamic_configs(self) -> None:
        """Dynamic broker configs (AlterConfigs on BROKER resources): this broker's and the cluster default, from
        /config/brokers (or the data dir), applied to every partition's log at once."""
        if self.stopping or self.entity_configs is None:
            return
        wanted = (self.entity_configs.get("brokers", str(self.broker_id)),
                  self.entity_configs.get("brokers", "<default>"))
        if wanted == self.config.dynamic:
            return
        for problem in self.config.set_dynamic(*wanted):
            log.error("dynamic broker config ignored: %s", problem)
        log.info("dynamic broker configs now %s (this broker) and %s (default)",
                 *(shown_configs(layer) for layer in self.config.dynamic))
        if self.metadata is not None and self.replicas is not None:
            for info in list(self.metadata.topics.values()):
                self.replicas.reconfigure(info)

    def _set_partition_limit(self, open_files: int) -> None:
        configured = self.config.get("max.broker.partitions")
        if configured >= 0:
            self.max_broker_partitions, self._partition_limit_source = configured, ""
        elif open_files == resource.RLIM_INFINITY:
            self.max_broker_partitions, self._partition_limit_source = 2**31 - 1, " unset, no open-file limit"
        else:
            # half the descriptors for storage (one shared LRU of open segments), the other half for connections
            self.max_broker_partitions = partition_limit(open_files)
            self._partition_limit_source = (f" unset: half of the open-file limit {open_files} at "
                                            f"{DESCRIPTORS_PER_PARTITION} descriptor per partition")

    async def _join_cluster(self) -> None:
        """Cluster mode: connect to ZooKeeper; replicas and coordinators follow the partition states from there."""
        from broker_sim.controller.zk_controller import Controller
        from broker_sim.controller.zk_store import ZkMetadataStore
        from broker_sim.coordinator.zk_producer_ids import ZkProducerIdManager
        from broker_sim.server.cluster_member import ClusterMember

        store = ZkMetadataStore(self.config.raw("zookeeper.connect"), self.broker_id, self.data_dir,
                                session_timeout_ms=self.config.get("zookeeper.session.timeout.ms"),
                                connection_timeout_ms=self.config.get("zookeeper.connection.timeout.ms"),
                                cluster_id=self.config.raw("cluster.id"))
        await self._loop.run_in_executor(None, store.start)
        self.metadata = store
        self.inter_broker = InterBrokerIdentity(store.inter_broker_secret)
        self.cluster = ClusterMember(self, store, Controller(store.zk, self.broker_id, self.config))
        self.replicas = ReplicaManager(self.data_dir, self.config, broker_id=self.broker_id, now_ms=self.now_ms,
                                       isr_writer=self.cluster.write_isr, resolve_broker=self.cluster.resolve_broker,
                                       topic_exists=self.cluster.topic_exists,
                                       inter_broker_client_id=self.inter_broker.client_id,
                                       internal_topics=self.internal_topics)
        self.replicas.inter_broker_ssl = self.inter_broker_ssl
        self.replicas.inter_broker_sasl = self.inter_broker_sasl
        self.entity_configs = await self._loop.run_in_executor(None, ZkEntityConfigs, store.zk)
        self.acls = await self._loop.run_in_executor(None, acl.ZkAclStore, store.zk)
        self.producer_ids = ZkProducerIdManager(store.zk, self.broker_id)

    async def _check_isr(self) -> None:
        """The leader's ISR shrink check (Kafka's isr-expiration task: every replica.lag.time.max.ms / 2)."""
        every = self.config.get("replica.lag.time.max.ms") / 2000.0
        while True:
            await asyncio.sleep(every)
            try:
                self.replicas.check_isr(self.now_ms())
            except Exception:  # must keep running; the next pass retries
                log.exception("ISR check failed")

    async def _close(self) -> None:
        if self.cluster is not None and self.config.get("controlled.shutdown.enable"):
            try:  # still serving meanwhile: followers keep fetching, clients move to the new leaders
                await self.cluster.controlled_shutdown()
            except Exception:
                log.exception("controlled shutdown failed; stopping anyway")
        self.stopping = True
        self._stop_future.set_result(None)
        if self._isr_checks is not None:
            self._isr_checks.cancel()
        self._housekeeping.cancel()
        self._loop_monitoring.cancel()
        self._group_timer.cancel()
        self._txn_timer.cancel()
        self.groups.close()
        if self._cleaning is not None:
            self._cleaning.cancel()
        for server in self._servers:
            server.close()
        if self._metrics_server is not None:
            self._metrics_server.close()
        if self.schema_registry is not None:
            self.schema_registry.close()
        self.connections.close()
        await asyncio.sleep(0)
        if self.cluster is not None:
            self.transactions.markers.close()  # ClusterMarkerWriter: its connections to other brokers
            await self.replicas.stop_fetchers()
        self.replicas.close()
        if self.cluster is not None:
            self.cluster.close()
        log.info("pylog broker %d stopped cleanly", self.broker_id)

    async def _clean_logs(self) -> None:
        """The log cleaner: a compaction pass over compacted partitions every log.cleaner.backoff.ms."""
        backoff = self.config.get("log.cleaner.backoff.ms") / 1000.0
        while True:
            await asyncio.sleep(backoff)
            try:
                await self.replicas.clean_logs()
            except Exception:  # the cleaner must keep running; the next pass retries
                log.exception("log cleaner pass failed")

    async def _housekeep(self) -> None:
        # as Kafka's LogManager schedules it: the first retention pass log.initial.task.delay.ms after start (so
        # a short-lived broker deletes expired records too), then one every log.retention.check.interval.ms
        retention_every = self.config.get("log.retention.check.interval.ms") / 1000.0
        next_retention = self._loop.time() + self.config.get("log.initial.task.delay.ms") / 1000.0
        while True:
            await asyncio.sleep(HOUSEKEEPING_INTERVAL_S)
            try:
                self.replicas.maybe_roll()
                if self.cluster is not None:  # Kafka: replica.high.watermark.checkpoint.interval.ms
                    self.replicas.checkpoint_high_watermarks()
                if self._loop.time() >= next_retention:
                    next_retention = self._loop.time() + retention_every
                    deleted = self.replicas.enforce_retention()
                    if deleted:
                        log.info("retention deleted %d segments", deleted)
            except Exception:  # housekeeping must keep running; the next pass retries
                log.exception("housekeeping failed")
