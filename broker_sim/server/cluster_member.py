"""This broker's membership of a ZooKeeper cluster: the glue between the control plane and the data path.

Theory of operation: the ``ZkMetadataStore`` mirrors the cluster as ZooKeeper
holds it (live brokers, topics with their replica assignments and configs,
one ``PartitionState`` per partition) and calls its listener from kazoo's
threads whenever any of it changes.  ``ClusterMember`` turns that into a
*reconcile* on the broker's event loop (coalesced: a burst of watch events is
one pass), level-triggered like a Kubernetes controller rather than
edge-triggered like Kafka's LeaderAndIsr requests: each pass compares every
partition assigned to this broker with its state and makes the local replica
match — leader at the state's epoch, or follower fetching from the state's
leader (truncating first, see ``replication/fetcher.py``) — and removes local
replicas of partitions no longer assigned here (topic deleted, or reassigned
away: its log is deleted, Kafka's StopReplica with deletePartition).  Because a
pass looks only at the latest state, a missed or reordered watch cannot leave
a replica in a stale role; the leader epoch in every state is what fences.

Coordinators move with leadership: a pass that makes this broker leader of a
``__consumer_offsets`` / ``__transaction_state`` partition loads that
partition into the group / transaction coordinator, and one that makes it a
follower unloads it (their clients get NOT_COORDINATOR and look again).

The ISR writer and the broker resolver handed to the replica manager come
from here: the leader's ISR change is a conditional ZooKeeper write
(``ZkMetadataStore.update_isr``, run off the event loop), refused when the
state moved on — a stale leader then learns the new state from the next
reconcile.  Controlled shutdown (``controlled_shutdown``) asks the controller
to move this broker's leaderships away before the broker stops serving.
"""
from __future__ import annotations

import asyncio
import logging

from broker_sim.controller.cluster_state import BrokerEndpoint, PartitionState
from broker_sim.coordinator.group.records import OFFSETS_TOPIC
from broker_sim.coordinator.txn.records import TRANSACTION_STATE_TOPIC

log = logging.getLogger(__name__)
INTERNAL_TOPICS = (OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC)


class ClusterMember:
    def __init__(self, broker, store, controller) -> None:
        self.broker = broker
        self.store = store
        self.controller = controller
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reconcile_pending = False
        self._applied_configs: dict[str, dict[str, str]] = {}
        self.reconciles = 0
        self.closed = False

    # --- lifecycle --------------------------------------------------------------------------------
    def start(self, endpoint: BrokerEndpoint) -> None:
        """Register this broker (its port is known now), start the controller candidate, reconcile once."""
        self._loop = asyncio.get_running_loop()
        self.store.listener = self._on_store_change
        self.store.register_broker(endpoint)
        self.controller.start()
        self.reconcile()

    async def controlled_shutdown(self) -> None:
        """Ask the controller to move this broker's leaderships away (bounded by controlled.shutdown.timeout.ms)."""
        timeout_s = self.broker.config.get("controlled.shutdown.timeout.ms") / 1000.0
        led = sum(1 for p in self.broker.replicas.partitions.values() if p.is_leader)
        if not led:
            return
        done = await asyncio.get_running_loop().run_in_executor(None, self.store.controlled_shutdown, timeout_s)
        if done:
            log.info("controlled shutdown: the controller moved this broker's %d leaderships away", led)
        else:
            log.warning("controlled shutdown did not complete within %.0f s; stopping anyway", timeout_s)
        self.reconcile()  # adopt the new states now rather than at the next watch

    def close(self) -> None:
        self.closed = True
        self.store.listener = None
        try:
            self.controller.close()
        finally:
            self.store.close()

    # --- seams for the replica manager ------------------------------------------------------------
    def resolve_broker(self, broker_id: int) -> BrokerEndpoint | None:
        """A broker as reached on inter.broker.listener.name (None: unknown, or it lacks that listener)."""
        endpoint = self.store.brokers.get(broker_id)
        return endpoint.on(self.broker.inter_broker_listener) if endpoint is not None else None

    def topic_exists(self, topic: str) -> bool:
        return topic in self.store.topics

    async def write_isr(self, partition, new_isr: tuple[int, ...]) -> PartitionState | None:
        """The leader's ISR change, written to ZooKeeper conditionally on the state it knows."""
        loop = asyncio.get_running_loop()
        try:
            state = await loop.run_in_executor(None, self.store.update_isr, partition.topic, partition.index,
                                               tuple(new_isr), partition.zk_version)
        except Exception:
            log.exception("writing the ISR %s of %s failed", list(new_isr), partition)
            return None
        if state is None:
            log.info("%s: ISR change to %s refused (the partition state moved on); waiting for the new state",
                     partition, list(new_isr))
            self._schedule()
        return state

    # --- reconcile --------------------------------------------------------------------------------
    def _on_store_change(self) -> None:  # kazoo threads
        loop = self._loop
        if loop is not None and not self.closed and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._schedule)
            except RuntimeError:  # the loop closed between the check and the call
                pass

    def _schedule(self) -> None:
        if not self._reconcile_pending and not self.closed:
            self._reconcile_pending = True
            self._loop.call_soon(self._run_reconcile)

    def _run_reconcile(self) -> None:
        self._reconcile_pending = False
        if self.closed or self.broker.stopping:
            return
        try:
            self.reconcile()
        except Exception:  # one bad pass must not stop the next; watches keep coming
            log.exception("reconciling with the cluster state failed")
            self._loop.call_later(1.0, self._schedule)

    def reconcile(self) -> None:
        """Make every local replica match the cluster state (see the module docstring)."""
        broker = self.broker
        me = broker.broker_id
        replicas = broker.replicas
        topics = self.store.topics
        states = self.store.partition_states
        wanted: set[tuple[str, int]] = set()
        self.reconciles += 1
        for info in topics.values():
            mine = [index for index in range(info.partitions)
                    if index < len(info.replicas) and me in info.replicas[index]]
            if not mine:
                continue
            for index in mine:
                wanted.add((info.name, index))
                replicas.ensure_partition(info, index)
            if self._applied_configs.get(info.name) != info.configs:
                replicas.reconfigure(info)
                self._applied_configs[info.name] = dict(info.configs)
            for index in mine:
                state = states.get((info.name, index))
                if state is None:
                    continue  # the controller has not elected a leader yet
                assigned = list(info.replicas[index])
                if state.leader == me:
                    if replicas.become_leader(info.name, index, state, assigned):
                        log.info("%s-%d: leader at epoch %d, ISR %s", info.name, index, state.leader_epoch,
                                 list(state.isr))
                        self._coordinator_loaded(info.name, index)
                else:
                    was_leader = replicas.partitions[(info.name, index)].is_leader
                    if replicas.become_follower(info.name, index, state, assigned):
                        log.info("%s-%d: follower of %d at epoch %d", info.name, index, state.leader,
                                 state.leader_epoch)
                        if was_leader:
                            self._coordinator_unloaded(info.name, index)
        for topic, index in list(replicas.partitions):
            if (topic, index) not in wanted:
                deleted = topic not in topics
                if replicas.partitions[(topic, index)].is_leader:
                    self._coordinator_unloaded(topic, index)
                # deleted topic, or reassigned away (Kafka's StopReplica with deletePartition): the log goes
                replicas.remove_partition(topic, index, delete=True)
                log.info("%s-%d: no longer a replica here (%s); its log is deleted", topic, index,
                         "topic deleted" if deleted else "reassigned to other brokers")
        for name in list(self._applied_configs):
            if name not in topics:
                del self._applied_configs[name]

    def _coordinator_loaded(self, topic: str, index: int) -> None:
        owner = self._coordinator_of(topic)
        if owner is not None and index not in owner.loaded:
            loaded = owner.load_partition(self.broker.replicas.get(topic, index))
            log.info("%s-%d: now coordinating it (%s entries loaded)", topic, index, loaded)

    def _coordinator_unloaded(self, topic: str, index: int) -> None:
        owner = self._coordinator_of(topic)
        if owner is not None and index in owner.loaded:
            owner.unload_partition(index)
            log.info("%s-%d: no longer coordinating it", topic, index)

    def _coordinator_of(self, topic: str):
        if topic == OFFSETS_TOPIC:
            return self.broker.groups
        if topic == TRANSACTION_STATE_TOPIC:
            return self.broker.transactions
        return None
