"""Cluster metadata kept in ZooKeeper: the broker's view of topics, brokers and partition states.

Theory of operation: ``ZkMetadataStore`` is the cluster counterpart of the
single-node ``MetadataStore`` and keeps its read API (``cluster_id``,
``topics``, ``topics_by_id``, ``get``, ``check_new_topic``,
``check_partition_count``) so request handlers do not care which one they use.
Its state lives in ZooKeeper under Kafka's own layout (``zk_layout``); the
store holds a cache fed by kazoo watches:

* ``ChildrenWatch(/brokers/ids)``            -> ``brokers`` (live brokers' endpoints)
* ``DataWatch(/controller)``                 -> ``controller_id``
* ``ChildrenWatch(/brokers/topics)``, then per topic ``DataWatch`` on its
  assignment and on ``/config/topics/<t>``   -> ``topics`` / ``topics_by_id``
* per partition ``DataWatch(.../state)``     -> ``partition_states``
* ``ChildrenWatch(/admin/delete_topics)``    -> ``topics_being_deleted``

Every attribute is replaced wholesale (a new dict) under the store's lock, never
mutated in place, so a reader on another thread (the broker's event loop)
always sees a consistent old or new value without locking.  After each change
``listener()`` is called, without the lock held, from the thread that saw the
change: a kazoo thread (its callback worker, or a thread kazoo spawned after a
reconnect) or the caller of a mutator.  A listener must not block; the broker
hands the news to its event loop with ``call_soon_threadsafe``.

kazoo's watch recipes re-read and re-arm themselves when the client reconnects,
also after a session expiry (kazoo then opens a new session), so the cache
recovers from a session loss by itself.  Ephemeral znodes do not: a state
listener re-creates this broker's registration (``register_broker``) on the
first CONNECTED after LOST.

Mutators write ZooKeeper and validate first (``MetadataError`` with Kafka's
error classes).  Topic creation writes the config then the assignment (Kafka's
order: a watcher that sees the topic can read its config); the controller
(``zk_controller``) reacts by electing leaders.  Deletion only marks the topic
in ``/admin/delete_topics``; the controller completes it.  ``update_isr`` is
the partition leader's conditional write (ZooKeeper version check), so a leader
that missed a controller decision is refused and has to wait for the new state.
Mutators block on ZooKeeper; only ``update_isr`` retries over connection losses
(its conditional write is recognisable when a retried attempt finds it applied);
the others raise kazoo's ConnectionLoss/SessionExpired to the caller.

Watches on deleted topics and partitions stay armed (as exists-watches, cheap)
until the store closes, so a re-created topic is picked up by the same watches.
"""
from __future__ import annotations

import logging
import os
import secrets
import threading
import uuid
from pathlib import Path
from typing import Callable, Iterable

import kafka.errors as Errors
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.hosts import collect_hosts
from kazoo.recipe.watchers import ChildrenWatch, DataWatch
from kazoo.retry import KazooRetry

from broker_sim.controller import zk_layout as layout
from broker_sim.controller.assignment import assign_added_partitions, assign_replicas, validate_assignment
from broker_sim.controller.cluster_state import BrokerEndpoint, PartitionState
from broker_sim.controller.metadata import (
    MetadataError, MetadataStore, TopicInfo, _read_properties, check_topic_configs,
)

log = logging.getLogger(__name__)

# Kafka's Topic.isInternal
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def new_kazoo_client(connect: str, session_timeout_ms: int) -> KazooClient:
    """A KazooClient that reconnects forever and retries commands a few times (bounded)."""
    return KazooClient(
        hosts=connect, timeout=session_timeout_ms / 1000.0,
        connection_retry=KazooRetry(max_tries=-1, delay=0.1, max_delay=1.0),
        command_retry=KazooRetry(max_tries=10, delay=0.1, max_delay=1.0, deadline=session_timeout_ms / 1000.0))


def ensure_chroot(connect: str, timeout_s: float) -> None:
    """Create the chroot of ``connect`` (``host:port/chroot``) if missing, as Kafka does on start."""
    hosts, chroot = collect_hosts(connect)
    if not chroot or chroot == "/":
        return
    client = KazooClient(hosts=",".join(f"{h}:{p}" for h, p in hosts), timeout=10.0)
    client.start(timeout=timeout_s)
    try:
        client.ensure_path(chroot)
    finally:
        client.stop()
        client.close()


class ZkMetadataStore(MetadataStore):
    """Topics, brokers and partition states of a cluster, cached from ZooKeeper.

    Read attributes from any thread; mutators block on ZooKeeper (call them off
    the event loop or accept the short block).  ``listener`` runs on kazoo threads.
    """

    def __init__(self, connect: str, broker_id: int, data_dir: str | os.PathLike, *,
                 session_timeout_ms: int, connection_timeout_ms: int, cluster_id: str = "") -> None:
        # MetadataStore.__init__ is not called: the topics file is replaced by ZooKeeper.
        self.connect = connect
        self.broker_id = broker_id
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms
        self._requested_cluster_id = cluster_id
        self.cluster_id = ""
        self.zk = new_kazoo_client(connect, session_timeout_ms)
        self.listener: Callable[[], None] | None = None
        self.topics: dict[str, TopicInfo] = {}
        self.topics_by_id: dict = {}
        self.pending: dict[str, int] = {}
        self.brokers: dict[int, BrokerEndpoint] = {}
        self.controller_id: int = -1
        self.partition_states: dict[tuple[str, int], PartitionState] = {}
        self.topics_being_deleted: frozenset[str] = frozenset()
        self._assignments: dict[str, layout.TopicAssignment] = {}
        self._assignment_versions: dict[str, int] = {}
        self._configs: dict[str, dict[str, str]] = {}
        # topics this store created whose assignment znode its watch has not delivered yet: kept in ``topics``
        # through rebuilds meanwhile, so a CreatePartitions or Metadata right after a CreateTopics finds them
        self._created: dict[str, TopicInfo] = {}
        self._watched_topics: set[str] = set()
        self._watched_states: set[tuple[str, int]] = set()
        self._lock = threading.RLock()
        self._endpoint: BrokerEndpoint | None = None
        self._session_lost = False
        self._closed = False
        self._started = False

    # --- lifecycle ---

    def start(self) -> "ZkMetadataStore":
        """Connect (within connection_timeout_ms), create the top-level paths, settle the cluster id, arm watches."""
        timeout_s = self.connection_timeout_ms / 1000.0
        try:
            ensure_chroot(self.connect, timeout_s)
            self.zk.start(timeout=timeout_s)
        except Exception as exc:
            raise RuntimeError(f"cannot connect to ZooKeeper at {self.connect!r} within "
                               f"{self.connection_timeout_ms} ms (zookeeper.connection.timeout.ms): {exc}") from exc
        self._started = True
        for path in layout.PERSISTENT_PATHS:
            self.zk.ensure_path(path)
        self.cluster_id = self._settle_cluster_id()
        self.inter_broker_secret = self._settle_inter_broker_secret()
        self.zk.add_listener(self._on_connection_state)
        ChildrenWatch(self.zk, layout.BROKER_IDS, self._on_brokers)
        DataWatch(self.zk, layout.CONTROLLER, self._on_controller)
        ChildrenWatch(self.zk, layout.DELETE_TOPICS, self._on_delete_requests)
        ChildrenWatch(self.zk, layout.TOPICS, self._on_topics)
        return self

    def _settle_inter_broker_secret(self) -> str:
        """The cluster's inter-broker secret (server/inter_broker.py): the first broker creates it."""
        try:
            self.zk.create(layout.INTER_BROKER_SECRET, layout.encode_inter_broker_secret(secrets.token_hex(32)),
                           makepath=True)
        except NodeExistsError:
            pass
        return layout.decode_inter_broker_secret(self.zk.get(layout.INTER_BROKER_SECRET)[0])

    def _settle_cluster_id(self) -> str:
        """The cluster id in /cluster/id (created from meta.properties or a new id), checked against meta.properties."""
        meta = self.data_dir / "meta.properties"
        local = _read_properties(meta).get("cluster.id", "") if meta.exists() else ""
        proposed = self._requested_cluster_id or local or ""
        if not proposed:
            from broker_sim.controller.metadata import new_cluster_id
            proposed = new_cluster_id()
        try:
            self.zk.create(layout.CLUSTER_ID, layout.encode_cluster_id(proposed), makepath=True)
        except NodeExistsError:
            pass
        cluster_id = layout.decode_cluster_id(self.zk.get(layout.CLUSTER_ID)[0])
        if self._requested_cluster_id and self._requested_cluster_id != cluster_id:
            raise RuntimeError(f"ZooKeeper at {self.connect!r} holds cluster.id {cluster_id}, "
                               f"not the requested {self._requested_cluster_id}")
        # Kafka's InconsistentClusterIdException: a data dir of another cluster refuses to start
        return self._load_meta_properties(cluster_id)

    def close(self) -> None:
        """Stop watching and end the session (this broker's ephemeral znodes vanish at once)."""
        self._closed = True
        if self._started:
            try:
                self.zk.stop()
            finally:
                self.zk.close()

    def _on_connection_state(self, state: str) -> None:
        # runs on kazoo's connection thread: must not block
        if state == KazooState.LOST:
            self._session_lost = True
        elif state == KazooState.CONNECTED and self._session_lost and not self._closed:
            self._session_lost = False
            if self._endpoint is not None:
                self.zk.handler.spawn(self._reregister)

    def _reregister(self) -> None:
        try:
            self.register_broker(self._endpoint)
            log.info("broker %d re-registered in ZooKeeper after a session loss", self.broker_id)
        except Exception:
            log.exception("broker %d could not re-register after a session loss", self.broker_id)

    # --- notifications ---

    def _changed(self) -> None:
        listener = self.listener
        if listener is not None and not self._closed:
            try:
                listener()
            except Exception:
                log.exception("metadata listener failed")

    # --- watches (kazoo threads) ---

    def _on_brokers(self, children: list[str]):
        if self._closed:
            return False
        brokers = {}
        for child in children:
            try:
                data, _ = self.zk.get(layout.broker_path(int(child)))
            except NoNodeError:
                continue
            brokers[int(child)] = layout.decode_broker(int(child), data)
        with self._lock:
            self.brokers = dict(sorted(brokers.items()))
        self._changed()

    def _on_controller(self, data, stat):
        if self._closed:
            return False
        with self._lock:
            self.controller_id = layout.decode_controller(data) if data else -1
        self._changed()

    def _on_delete_requests(self, children: list[str]):
        if self._closed:
            return False
        with self._lock:
            self.topics_being_deleted = frozenset(children)
        self._changed()

    def _on_topics(self, children: list[str]):
        if self._closed:
            return False
        for topic in children:
            with self._lock:
                if topic in self._watched_topics:
                    continue
                self._watched_topics.add(topic)
            DataWatch(self.zk, layout.topic_config_path(topic), self._config_watcher(topic))
            DataWatch(self.zk, layout.topic_path(topic), self._assignment_watcher(topic))

    def _config_watcher(self, topic: str):
        def on_config(data, stat):
            if self._closed:
                return False
            with self._lock:
                configs = dict(self._configs)
                if stat is None:
                    configs.pop(topic, None)
                else:
                    configs[topic] = layout.decode_topic_config(data)
                self._configs = configs
                self._rebuild_topics()
            self._changed()
        return on_config

    def _assignment_watcher(self, topic: str):
        def on_assignment(data, stat):
            if self._closed:
                return False
            with self._lock:
                self._created.pop(topic, None)   # the watch's view of it is current from here on
                assignments = dict(self._assignments)
                versions = dict(self._assignment_versions)
                if stat is None:
                    assignments.pop(topic, None)
                    versions.pop(topic, None)
                    states = {k: v for k, v in self.partition_states.items() if k[0] != topic}
                    if len(states) != len(self.partition_states):
                        self.partition_states = states
                else:
                    assignments[topic] = layout.decode_topic_assignment(topic, data)
                    versions[topic] = stat.version
                self._assignments = assignments
                self._assignment_versions = versions
                self._rebuild_topics()
                new_states = [] if stat is None else [
                    (topic, p) for p in range(len(assignments[topic].replicas))
                    if (topic, p) not in self._watched_states]
                self._watched_states.update(new_states)
            for key in new_states:
                DataWatch(self.zk, layout.partition_state_path(*key), self._state_watcher(key))
            self._changed()
        return on_assignment

    def _state_watcher(self, key: tuple[str, int]):
        what = layout.partition_state_path(*key)

        def on_state(data, stat):
            if self._closed:
                return False
            with self._lock:
                states = dict(self.partition_states)
                if stat is None or not data:
                    if states.pop(key, None) is None:
                        return None
                else:
                    state = layout.decode_partition_state(data, stat.version, what)
                    current = states.get(key)
                    if current is not None and current.zk_version > state.zk_version:
                        return None  # update_isr already cached a newer version
                    states[key] = state
                self.partition_states = states
            self._changed()
        return on_state

    def _rebuild_topics(self) -> None:
        """New ``topics`` / ``topics_by_id`` from the assignments and configs (lock held)."""
        topics = {}
        for name, assignment in sorted(self._assignments.items()):
            previous = self.topics.get(name)
            topic_id = assignment.topic_id or (previous.topic_id if previous else None)
            if topic_id is None:
                continue  # a topic written without an id (old Kafka tooling): not served
            topics[name] = TopicInfo(name, topic_id, len(assignment.replicas), dict(self._configs.get(name, {})),
                                     name in INTERNAL_TOPICS, [list(r) for r in assignment.replicas])
        for name, info in self._created.items():
            topics.setdefault(name, info)
        self.topics = topics
        self.topics_by_id = {t.topic_id: t for t in topics.values()}

    def reassignments(self) -> dict[tuple[str, int], tuple[list[int], list[int], list[int]]]:
        """Partitions being reassigned (KIP-455), from the cached assignments: (topic, partition) ->
        (replicas, adding replicas, removing replicas)."""
        found = {}
        for topic, assignment in self._assignments.items():
            for index in sorted(set(assignment.adding) | set(assignment.removing)):
                if index < len(assignment.replicas):
                    found[(topic, index)] = (list(assignment.replicas[index]), list(assignment.adding.get(index, ())),
                                             list(assignment.removing.get(index, ())))
        return found

    # --- mutators ---

    def live_broker_ids(self) -> list[int]:
        """Registered broker ids, read from ZooKeeper (not the cache: assignments must not use a stale view)."""
        return sorted(int(c) for c in self.zk.get_children(layout.BROKER_IDS))

    def live_broker_racks(self) -> dict[int, str | None]:
        """``{id: broker.rack or None}`` of the registered brokers, read from ZooKeeper (replica placement)."""
        reads = {b: self.zk.get_async(layout.broker_path(b)) for b in self.live_broker_ids()}
        racks = {}
        for broker, pending in reads.items():
            try:
                racks[broker] = layout.decode_broker(broker, pending.get()[0]).rack or None
            except NoNodeError:
                continue  # gone since the listing
        return racks

    def register_broker(self, endpoint: BrokerEndpoint) -> None:
        """Create this broker's ephemeral registration; it is re-created after a session loss."""
        if endpoint.broker_id != self.broker_id:
            raise ValueError(f"endpoint of broker {endpoint.broker_id} registered by store of broker {self.broker_id}")
        self._endpoint = endpoint
        path = layout.broker_path(self.broker_id)
        try:
            self.zk.create(path, layout.encode_broker(endpoint), ephemeral=True, makepath=True)
        except NodeExistsError:
            _, stat = self.zk.get(path)
            if stat.ephemeralOwner != self.zk.client_id[0]:
                raise RuntimeError(
                    f"broker.id {self.broker_id} is already registered in ZooKeeper by another session "
                    f"({path}); another broker runs with this id") from None

    def create_topic(self, name: str, partitions: int, configs: dict[str, str] | None = None,
                     internal: bool = False, replication_factor: int | None = None,
                     assignment: list[list[int]] | None = None) -> TopicInfo:
        """Write a new topic (config, then assignment).  ``replication_factor`` None or -1 means 1
        (the caller resolves default.replication.factor); ``assignment`` overrides the computed one.
        ``internal`` is accepted for MetadataStore compatibility; as in Kafka, internal-ness follows the name."""
        configs = dict(configs or {})
        self.check_new_topic(name, partitions, configs)
        live = self.live_broker_ids()
        if assignment is not None:
            validate_assignment(assignment, partitions, live)
            replicas = [list(r) for r in assignment]
        else:
            rf = 1 if replication_factor in (None, -1) else replication_factor
            replicas = assign_replicas(self.live_broker_racks(), partitions, rf)
        topic_id = uuid.uuid4()
        transaction = self.zk.transaction()
        transaction.create(layout.topic_config_path(name), layout.encode_topic_config(configs))
        transaction.create(layout.topic_path(name), layout.encode_topic_assignment(topic_id, replicas))
        results = transaction.commit()
        failure = next((r for r in results if isinstance(r, Exception)), None)
        if failure is not None:
            if any(isinstance(r, NodeExistsError) for r in results):
                raise MetadataError(Errors.TopicAlreadyExistsError, f"topic {name!r} already exists")
            raise failure
        info = TopicInfo(name, topic_id, partitions, configs, name in INTERNAL_TOPICS, replicas)
        with self._lock:
            if name not in self._assignments:
                self._created[name] = info
                self._rebuild_topics()
        self._changed()
        return info

    def delete_topic(self, name: str) -> TopicInfo:
        """Request the deletion (/admin/delete_topics/<t>); the controller removes the topic."""
        info = self.get(name)
        try:
            self.zk.create(layout.delete_topic_path(name), b"", makepath=True)
        except NodeExistsError:
            pass
        return info

    def set_partition_count(self, name: str, count: int) -> TopicInfo:
        """Add partitions (Kafka's addPartitions layout), conditional on the assignment's znode version."""
        self.check_partition_count(name, count)
        data, stat = self.zk.get(layout.topic_path(name))
        current = layout.decode_topic_assignment(name, data)
        if count <= len(current.replicas):
            raise MetadataError(Errors.InvalidPartitionsError,
                                f"topic {name!r} has {len(current.replicas)} partitions; "
                                f"the new count {count} must be larger")
        if current.adding or current.removing:  # Kafka: ReassignmentInProgressException
            raise MetadataError(Errors.ReassignmentInProgressError,
                                f"topic {name!r} has partitions being reassigned "
                                f"({sorted(set(current.adding) | set(current.removing))}); add partitions after")
        added = assign_added_partitions(self.live_broker_racks(), current.replicas, count)
        replicas = [list(r) for r in current.replicas] + added
        try:
            self.zk.set(layout.topic_path(name), layout.encode_topic_assignment(current.topic_id, replicas),
                        version=stat.version)
        except BadVersionError:
            raise MetadataError(Errors.InvalidPartitionsError,
                                f"topic {name!r} changed while adding partitions; retry") from None
        except NoNodeError:
            raise MetadataError(Errors.UnknownTopicOrPartitionError, f"topic {name!r} does not exist") from None
        info = self.get(name)
        return TopicInfo(name, info.topic_id, count, dict(info.configs), info.internal, replicas)

    def set_configs(self, name: str, configs: dict[str, str]) -> TopicInfo:
        """Replace the topic's config overrides in /config/topics/<t>."""
        info = self.get(name)
        check_topic_configs(configs)
        path = layout.topic_config_path(name)
        data = layout.encode_topic_config(configs)
        try:
            self.zk.set(path, data)
        except NoNodeError:
            self.zk.create(path, data, makepath=True)
        return TopicInfo(name, info.topic_id, info.partitions, dict(configs), info.internal, info.replicas)

    def update_isr(self, topic: str, index: int, new_isr: Iterable[int], zk_version: int) -> PartitionState | None:
        """The leader's ISR change: same leader and leader epoch, new ISR, only if the state znode is
        still at ``zk_version``.  Returns the new state, or None when the state moved on (BadVersion).
        Connection losses are retried (command retry, bounded by the session timeout); a set whose first
        attempt was applied is recognised by its content."""
        path = layout.partition_state_path(topic, index)
        try:
            data, stat = self.zk.retry(self.zk.get, path)
        except NoNodeError:
            return None
        if stat.version != zk_version:
            return None
        current = layout.decode_partition_state(data, stat.version, path)
        wanted = PartitionState(current.leader, current.leader_epoch, tuple(new_isr), current.controller_epoch)
        encoded = layout.encode_partition_state(wanted)
        try:
            new_stat = self.zk.retry(self.zk.set, path, encoded, version=zk_version)
        except BadVersionError:
            # a retried set after a connection loss may have been applied by the first attempt
            data, stat = self.zk.retry(self.zk.get, path)
            if data != encoded or stat.version != zk_version + 1:
                return None
            new_stat = stat
        except NoNodeError:
            return None
        state = PartitionState(wanted.leader, wanted.leader_epoch, wanted.isr, wanted.controller_epoch,
                               new_stat.version)
        self.zk.retry(self.zk.create, layout.isr_change_prefix_path(), layout.encode_isr_change([(topic, index)]),
                      sequence=True, makepath=True)
        with self._lock:
            current_cached = self.partition_states.get((topic, index))
            if current_cached is None or current_cached.zk_version < state.zk_version:
                self.partition_states = {**self.partition_states, (topic, index): state}
        self._changed()
        return state

    def controlled_shutdown(self, timeout_s: float) -> bool:
        """Ask the controller to move this broker's leaderships away; True once it has (it deletes the
        request znode), False on timeout (the request is withdrawn)."""
        path = layout.controlled_shutdown_path(self.broker_id)
        done = threading.Event()
        outcome = []
        try:
            self.zk.create(path, layout.encode_controlled_shutdown(self.broker_id), ephemeral=True, makepath=True)
        except NodeExistsError:
            pass
        session = self.zk.client_id[0]

        def on_request(data, stat):
            if stat is None:
                # deleted by the controller, unless our session ended (which also removes an ephemeral)
                outcome.append(self.zk.client_id is not None and self.zk.client_id[0] == session)
                done.set()
                return False
            return None

        DataWatch(self.zk, path, on_request)
        if done.wait(timeout_s):
            return outcome[0]
        try:
            self.zk.delete(path)
        except NoNodeError:
            done.wait(1.0)  # deleted just now: by the controller if our session is the same
            return bool(outcome and outcome[0])
        return False
