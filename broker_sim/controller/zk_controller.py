"""The cluster controller (ZooKeeper era): one broker elects partition leaders for all.

Theory of operation: every broker runs a ``Controller``; the one whose
ephemeral ``/controller`` znode exists acts, the others wait for it to vanish.
Winning is one ZooKeeper transaction (Kafka's
``registerControllerAndIncrementControllerEpoch``): create ``/controller`` and
set ``/controller_epoch`` to epoch + 1 conditional on its version.  Every
partition-state write of the controller is a transaction that first checks
``/controller_epoch`` is still at the version this controller set, so a
controller that lost its place (paused, session expired, another one elected)
cannot overwrite newer decisions: its write fails, it resigns (deleting its
``/controller`` if it still holds it) and an election follows.

Threading (Kafka's ControllerEventManager): kazoo watches and the session
listener only put events on a queue; one thread, ``controller-event-thread``,
takes them and does all the work, so decisions never race each other.  Queued
events are coalesced: whatever changed, the active controller re-reads the
cluster from ZooKeeper (brokers with their registration zxid, assignments,
topic configs, partition states, pending requests; pipelined async reads) and
reconciles, in this order:

1. topic deletions requested in ``/admin/delete_topics`` (one fenced
   transaction deletes the topic's znodes, its config and the request);
2. brokers that died or re-registered ("bounced", registration zxid changed):
   partitions they led get a new leader, the first live ISR member in
   assignment order, ISR minus the dead, leader_epoch + 1; with no live ISR
   member the partition goes offline (leader -1, ISR keeps its last member)
   unless unclean.leader.election.enable (topic config over broker default)
   elects the first live replica with ISR = [it]; partitions they only
   followed lose them from the ISR (no epoch bump);
3. offline partitions that can be led again (a broker joined) get a leader the
   same way; new partitions (no state znode yet) get leader = first live
   replica, ISR = live replicas, leader_epoch 0;
4. controlled-shutdown requests (``/pylog/controlled_shutdown/<id>``): every
   leadership of the broker moves to another live ISR member (epoch + 1), it
   leaves follower ISRs, the request znode is deleted (the broker waits for
   that); brokers shutting down are never elected;
5. ISR change notifications written by leaders are deleted (their content is
   already in the re-read states);
6. partition reassignments (``reassignment.py``, KIP-455): AlterPartitionReassignments requests waiting for
   the event thread (``alter_reassignments``) are validated and written into the assignment znodes,
   ``/admin/reassign_partitions`` entries are started, reassignments whose target replicas are all in the
   ISR complete (leadership to a target, removed replicas out of the ISR, then the target assignment), and a
   state naming a broker the assignment dropped is corrected;
7. on the periodic check (leader.imbalance.check.interval.seconds, when
   auto.leader.rebalance.enable) or ``elect_preferred_leaders()``: leadership
   moves back to assignment[0] when it is live and in the ISR (not for partitions being reassigned);
8. elections an administrator asked for (``elect_leaders``, the ElectLeaders
   API): decided per partition by ``election.decide_election`` on a fresh
   read and answered through the request's future (NOT_CONTROLLER when this
   broker is not, or stops being, the controller).

The decisions are pure functions (``initial_state``, ``elect_after_change``,
``preferred_state``, ``shutdown_state``) tested without ZooKeeper.  A partition
write refused because the leader changed the ISR meanwhile (BadVersion on the
state znode) is decided again on a fresh read, a few times.
"""
from __future__ import annotations

import logging
import queue
from concurrent.futures import Future
import threading
import time
from dataclasses import replace
from typing import Iterable, Sequence

import kafka.errors as Errors
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError, RolledBackError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from broker_sim.config import BrokerConfig, TOPIC_CONFIGS
from broker_sim.controller import zk_layout as layout
from broker_sim.controller.cluster_state import NO_LEADER, PartitionState
from broker_sim.controller.reassignment import ReassignmentSteps, without_unassigned
from broker_sim.controller.election import ElectionRequest, ElectionType, Outcome, decide_election

log = logging.getLogger(__name__)

MAX_WRITE_ROUNDS = 5
RETRY_AFTER_ERROR_S = 0.2


class ControllerMovedError(Exception):
    """This controller's epoch is no longer current: another controller was elected."""


# --- pure decisions ---

def initial_state(replicas: Sequence[int], eligible: set[int], controller_epoch: int) -> PartitionState | None:
    """State of a new partition: first live replica leads, live replicas in sync; None when none is live."""
    live = [r for r in replicas if r in eligible]
    if not live:
        return None
    return PartitionState(live[0], 0, tuple(live), controller_epoch)


def elect_after_change(state: PartitionState, replicas: Sequence[int], live: set[int], eligible: set[int],
                       unclean: bool, controller_epoch: int) -> PartitionState | None:
    """New state after brokers died or joined, or None when nothing changes.

    ``live``: registered brokers; ``eligible``: live brokers that may lead (not shutting down).
    """
    if state.leader != NO_LEADER and state.leader in live:
        isr = tuple(b for b in state.isr if b in live)
        if isr != state.isr and isr:
            return replace(state, isr=isr, controller_epoch=controller_epoch, zk_version=-1)
        return None
    candidates = [r for r in replicas if r in state.isr and r in eligible]
    if candidates:
        return PartitionState(candidates[0], state.leader_epoch + 1,
                              tuple(b for b in state.isr if b in eligible), controller_epoch)
    if unclean:
        live_replicas = [r for r in replicas if r in eligible]
        if live_replicas:
            return PartitionState(live_replicas[0], state.leader_epoch + 1, (live_replicas[0],), controller_epoch)
    if state.leader == NO_LEADER:
        return None
    keep = (state.leader,) if state.leader in state.isr else state.isr[-1:]
    return PartitionState(NO_LEADER, state.leader_epoch + 1, keep, controller_epoch)


def preferred_state(state: PartitionState, replicas: Sequence[int], eligible: set[int],
                    controller_epoch: int) -> PartitionState | None:
    """Leadership back to the preferred replica (assignment[0]) when it is eligible and in the ISR."""
    if not replicas:
        return None
    preferred = replicas[0]
    if state.leader == preferred or preferred not in eligible or preferred not in state.isr:
        return None
    return PartitionState(preferred, state.leader_epoch + 1, state.isr, controller_epoch)


def shutdown_state(state: PartitionState, replicas: Sequence[int], broker: int, eligible: set[int],
                   controller_epoch: int) -> PartitionState | None:
    """Move ``broker``'s leadership to another eligible ISR member (epoch + 1), or drop it from the ISR."""
    if state.leader == broker:
        candidates = [r for r in replicas if r in state.isr and r != broker and r in eligible]
        if not candidates:
            return None  # no other in-sync replica: moving would lose data; it goes offline with the broker
        return PartitionState(candidates[0], state.leader_epoch + 1,
                              tuple(b for b in state.isr if b != broker), controller_epoch)
    if broker in state.isr and len(state.isr) > 1:
        return replace(state, isr=tuple(b for b in state.isr if b != broker),
                       controller_epoch=controller_epoch, zk_version=-1)
    return None


def _first_failure(results: list) -> tuple[int, Exception] | None:
    """(index, error) of the operation that failed a ZooKeeper multi, or None when it committed.

    The other operations of a failed multi report RolledBackError / RuntimeInconsistency."""
    from kazoo.exceptions import RuntimeInconsistency
    for index, result in enumerate(results):
        if isinstance(result, Exception) and not isinstance(result, (RolledBackError, RuntimeInconsistency)):
            return index, result
    return None


# --- the controller ---

_ELECT = "elect"
_SESSION_LOST = "session-lost"
_RECONCILE = "reconcile"
_PREFERRED = "preferred"
_STOP = "stop"


class Controller(ReassignmentSteps):
    """Controller of one broker; shares the store's KazooClient.  See the module docstring."""

    def __init__(self, zk: KazooClient, broker_id: int, config: BrokerConfig) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.config = config
        self.epoch = 0
        self._epoch_zk_version = -1
        self._active = False
        self._events: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._watched_topics: set[str] = set()
        self._lock = threading.Lock()
        # context of the active controller (event thread only)
        self._live: dict[int, int] = {}          # broker id -> registration czxid
        self._shutting_down: set[int] = set()
        self._session_lost = False
        self._init_reassignment()

    @property
    def is_active(self) -> bool:
        return self._active

    # --- lifecycle ---

    def start(self) -> "Controller":
        self._thread = threading.Thread(target=self._run, name=f"controller-event-thread-{self.broker_id}",
                                        daemon=True)
        self._thread.start()
        self.zk.add_listener(self._on_connection_state)
        DataWatch(self.zk, layout.CONTROLLER, self._on_controller)
        for path in (layout.BROKER_IDS, layout.DELETE_TOPICS, layout.ISR_CHANGE_NOTIFICATION,
                     layout.CONTROLLED_SHUTDOWN):
            self.zk.ensure_path(path)
            ChildrenWatch(self.zk, path, self._on_children)
        self.zk.ensure_path(layout.TOPICS)
        ChildrenWatch(self.zk, layout.TOPICS, self._on_topics)
        DataWatch(self.zk, layout.REASSIGN_PARTITIONS, self._on_controller_data)
        return self

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop the event thread; an active controller resigns (deletes /controller) so another takes over now."""
        if self._closed:
            return
        self._closed = True
        self._events.put(_STOP)
        if self._thread is not None:
            self._thread.join(timeout_s)
        try:
            self.zk.remove_listener(self._on_connection_state)
        except Exception:
            pass

    def elect_preferred_leaders(self) -> None:
        """Ask the active controller for a preferred-leader election now (no-op on others)."""
        self._events.put(_PREFERRED)

    def elect_leaders(self, kind: ElectionType, partitions: Iterable[tuple[str, int]] | None) -> Future:
        """Queue an administrator's election (``partitions`` None: all); the future's result maps every
        decided (topic, partition) to its Outcome, or fails with NotControllerError (any thread)."""
        request = ElectionRequest(ElectionType(kind), None if partitions is None else frozenset(partitions))
        if not self._active or self._closed:
            request.result.set_exception(Errors.NotControllerError(f"broker {self.broker_id} is not the controller"))
        else:
            self._events.put(request)
        return request.result

    # --- watches (kazoo threads): enqueue only ---

    def _on_connection_state(self, state: str) -> None:
        if state == KazooState.LOST:
            self._session_lost = True
            self._events.put(_SESSION_LOST)
        elif state == KazooState.CONNECTED and self._session_lost:
            self._session_lost = False
            self._events.put(_ELECT)

    def _on_controller(self, data, stat):
        if self._closed:
            return False
        self._events.put(_ELECT)

    def _on_controller_data(self, data, stat):
        if self._closed:
            return False
        self._events.put(_RECONCILE)

    def _on_children(self, children):
        if self._closed:
            return False
        self._events.put(_RECONCILE)

    def _on_topics(self, children):
        if self._closed:
            return False
        for topic in children:
            with self._lock:
                if topic in self._watched_topics:
                    continue
                self._watched_topics.add(topic)
            DataWatch(self.zk, layout.topic_path(topic), self._on_assignment)
        self._events.put(_RECONCILE)

    def _on_assignment(self, data, stat):
        if self._closed:
            return False
        self._events.put(_RECONCILE)

    # --- event thread ---

    def _run(self) -> None:
        interval_s = self.config.get("leader.imbalance.check.interval.seconds")
        auto_rebalance = self.config.get("auto.leader.rebalance.enable")
        next_preferred = time.monotonic() + interval_s
        retry_at = None
        while True:
            now = time.monotonic()
            deadlines = [d for d in (next_preferred if auto_rebalance and self._active else None, retry_at) if d]
            timeout = max(0.0, min(deadlines) - now) if deadlines else None
            kinds = set()
            try:
                kinds.add(self._events.get(timeout=timeout))
            except queue.Empty:
                pass
            while True:
                try:
                    kinds.add(self._events.get_nowait())
                except queue.Empty:
                    break
            elections = [kind for kind in kinds if isinstance(kind, ElectionRequest)]
            kinds.difference_update(elections)
            if _STOP in kinds:
                for request in elections:
                    request.result.set_exception(Errors.NotControllerError("the controller is shutting down"))
                self._shutdown()
                self._refuse_reassignment_requests()
                return
            now = time.monotonic()
            if retry_at is not None and now >= retry_at:
                kinds.add(_ELECT)
                retry_at = None
            if auto_rebalance and now >= next_preferred:
                kinds.add(_PREFERRED)
                next_preferred = now + interval_s
            try:
                self._process(kinds)
            except ControllerMovedError as exc:
                log.warning("controller %d: %s; resigning", self.broker_id, exc)
                self._resign(delete_znode=True)
            except Exception as exc:  # ZooKeeper unavailable, a znode changing under us...: try again soon
                log.warning("controller %d: event %s failed (%r); retrying", self.broker_id, sorted(kinds), exc)
                retry_at = time.monotonic() + RETRY_AFTER_ERROR_S
            for request in elections:
                self._answer_election(request)

    def _process(self, kinds: set[str]) -> None:
        if _SESSION_LOST in kinds and self._active:
            self._resign(delete_znode=False)
        if _ELECT in kinds or _SESSION_LOST in kinds or not self._active:
            self._check_controller()
            if not self._active:
                self._refuse_reassignment_requests()
                return
        self._reconcile(preferred=_PREFERRED in kinds)

    def _answer_election(self, request: ElectionRequest) -> None:
        if not request.result.set_running_or_notify_cancel():
            return  # the handler gave up waiting (the request's timeout_ms)
        try:
            if not self._active:
                raise Errors.NotControllerError(f"broker {self.broker_id} is not the controller")
            request.result.set_result(self._elect_requested(request))
        except ControllerMovedError as exc:
            log.warning("controller %d: %s; resigning", self.broker_id, exc)
            self._resign(delete_znode=True)
            request.result.set_exception(Errors.NotControllerError(str(exc)))
        except Exception as exc:  # ZooKeeper unavailable...: the administrator's tool retries
            request.result.set_exception(exc)

    def _elect_requested(self, request: ElectionRequest) -> dict[tuple[str, int], Outcome]:
        """Decide and write one ElectLeaders request's elections (fenced; a partition whose write met a
        concurrent ISR change is decided again on a fresh read, a few times)."""
        live, assignments, _, states = self._read_cluster()
        deleting = set(self.zk.get_children(layout.DELETE_TOPICS))
        alive = set(live)
        eligible = alive - self._shutting_down

        def replicas_of(key) -> list[int]:
            assignment = assignments.get(key[0])
            if assignment is None or key[0] in deleting or not 0 <= key[1] < len(assignment.replicas):
                return []
            return list(assignment.replicas[key[1]])

        pending = sorted(request.partitions if request.partitions is not None else
                         [(t, p) for t, a in assignments.items() if t not in deleting for p in range(len(a.replicas))])
        outcomes: dict[tuple[str, int], Outcome] = {}
        for _ in range(MAX_WRITE_ROUNDS):
            changes = {}
            for key in pending:
                new, outcome = decide_election(request.kind, states.get(key), replicas_of(key), alive, eligible,
                                               self.epoch)
                if new is None:
                    outcomes[key] = outcome
                else:
                    changes[key] = new
            if not changes:
                return outcomes
            refused = self._write_states(changes, states)
            outcomes.update({key: (None, None) for key in changes if key not in refused})
            pending = refused
            self._reread_states(refused, states)
        for key in pending:
            outcomes[key] = (Errors.RequestTimedOutError, "the partition's state kept changing during the election")
        return outcomes

    def _shutdown(self) -> None:
        if self._active:
            self._resign(delete_znode=True)

    # --- election ---

    def _check_controller(self) -> None:
        """Become controller if /controller is free; resign if it names another broker."""
        try:
            data, stat = self.zk.get(layout.CONTROLLER)
        except NoNodeError:
            self._try_elect()
            return
        mine = stat.ephemeralOwner == self.zk.client_id[0] and layout.decode_controller(data) == self.broker_id
        if self._active and not mine:
            self._resign(delete_znode=False)
        elif mine and not self._active:
            # our znode from before (e.g. a failed failover): start over with a fresh epoch
            self._resign(delete_znode=True)

    def _try_elect(self) -> None:
        for _ in range(MAX_WRITE_ROUNDS):
            try:
                data, stat = self.zk.get(layout.CONTROLLER_EPOCH)
            except NoNodeError:
                try:
                    self.zk.create(layout.CONTROLLER_EPOCH, layout.encode_controller_epoch(0))
                except NodeExistsError:
                    pass
                continue
            epoch = layout.decode_controller_epoch(data) + 1
            transaction = self.zk.transaction()
            transaction.create(layout.CONTROLLER, layout.encode_controller(self.broker_id), ephemeral=True)
            transaction.set_data(layout.CONTROLLER_EPOCH, layout.encode_controller_epoch(epoch), version=stat.version)
            results = transaction.commit()
            failed = _first_failure(results)
            if failed is None:
                self.epoch = epoch
                self._epoch_zk_version = results[1].version
                self._active = True
                self._live = {}
                self._shutting_down = set()
                log.info("broker %d is the controller, epoch %d", self.broker_id, epoch)
                return
            if isinstance(failed[1], NodeExistsError):
                return  # another broker is controller
            if not isinstance(failed[1], BadVersionError):
                raise failed[1]
        raise KazooException("controller election kept racing on /controller_epoch")

    def _resign(self, delete_znode: bool) -> None:
        was_active, self._active = self._active, False
        self._live = {}
        self._shutting_down = set()
        if was_active:
            log.info("broker %d resigns as controller (epoch %d)", self.broker_id, self.epoch)
        if delete_znode:
            try:
                data, stat = self.zk.get(layout.CONTROLLER)
                if stat.ephemeralOwner == self.zk.client_id[0]:
                    self.zk.delete(layout.CONTROLLER, version=stat.version)
            except (NoNodeError, BadVersionError):
                pass
            except KazooException as exc:
                log.warning("controller %d could not delete /controller: %r", self.broker_id, exc)

    # --- reading the cluster ---

    def _read_cluster(self):
        zk = self.zk
        ids = [int(c) for c in zk.get_children(layout.BROKER_IDS)]
        stats = {b: zk.exists_async(layout.broker_path(b)) for b in ids}
        live = {}
        for broker, pending in stats.items():
            stat = pending.get()
            if stat is not None:
                live[broker] = stat.czxid
        topics = zk.get_children(layout.TOPICS)
        assignment_reads = {t: zk.get_async(layout.topic_path(t)) for t in topics}
        config_reads = {t: zk.get_async(layout.topic_config_path(t)) for t in topics}
        assignments, configs = {}, {}
        for topic in topics:
            try:
                assignments[topic] = layout.decode_topic_assignment(topic, assignment_reads[topic].get()[0])
            except NoNodeError:
                continue
            try:
                configs[topic] = layout.decode_topic_config(config_reads[topic].get()[0])
            except NoNodeError:
                configs[topic] = {}
        state_reads = {(t, p): zk.get_async(layout.partition_state_path(t, p))
                       for t, a in assignments.items() for p in range(len(a.replicas))}
        states = {}
        for key, pending in state_reads.items():
            try:
                data, stat = pending.get()
            except NoNodeError:
                continue
            states[key] = layout.decode_partition_state(data, stat.version, layout.partition_state_path(*key))
        return live, assignments, configs, states

    def _unclean(self, configs: dict[str, str]) -> bool:
        value = configs.get("unclean.leader.election.enable")
        if value is None:
            return bool(self.config.get("unclean.leader.election.enable"))
        return bool(TOPIC_CONFIGS["unclean.leader.election.enable"].parse(value))

    # --- reconciling ---

    def _reconcile(self, preferred: bool) -> None:
        live, assignments, configs, states = self._read_cluster()
        previous = self._live
        bounced = {b for b, czxid in live.items() if b in previous and previous[b] != czxid}
        self._live = live
        self._shutting_down &= set(live)

        self._delete_requested_topics(assignments, states)
        deleting = set(self.zk.get_children(layout.DELETE_TOPICS))
        self._serve_reassignment_requests(assignments, deleting)
        requests = [int(c) for c in self.zk.get_children(layout.CONTROLLED_SHUTDOWN)]
        self._shutting_down |= {b for b in requests if b in live}

        def live_set(exclude: Iterable[int] = ()) -> tuple[set[int], set[int]]:
            alive = set(live) - set(exclude)
            return alive, alive - self._shutting_down

        def decide(decision) -> None:
            self._apply(assignments, states, deleting, decision)

        if bounced:
            alive, eligible = live_set(bounced)
            decide(lambda key, state, replicas: elect_after_change(
                state, replicas, alive, eligible, self._unclean(configs.get(key[0], {})), self.epoch))
        alive, eligible = live_set()
        decide(lambda key, state, replicas: elect_after_change(
            state, replicas, alive, eligible, self._unclean(configs.get(key[0], {})), self.epoch)
            if state is not None else initial_state(replicas, eligible, self.epoch))
        for broker in requests:
            if broker in live:
                decide(lambda key, state, replicas, broker=broker: shutdown_state(
                    state, replicas, broker, eligible, self.epoch) if state is not None else None)
            try:
                self.zk.delete(layout.controlled_shutdown_path(broker))
            except NoNodeError:
                pass
        for child in self.zk.get_children(layout.ISR_CHANGE_NOTIFICATION):
            try:
                self.zk.delete(layout.isr_change_path(child))
            except NoNodeError:
                pass
        self._progress_reassignments(assignments, states, eligible, deleting)
        decide(lambda key, state, replicas: without_unassigned(state, replicas, eligible, self.epoch))
        if preferred:  # not while a partition is being reassigned (Kafka skips those too)
            decide(lambda key, state, replicas: preferred_state(state, replicas, eligible, self.epoch)
                   if state is not None and key[1] not in assignments[key[0]].adding
                   and key[1] not in assignments[key[0]].removing else None)

    def _apply(self, assignments, states, deleting, decision) -> None:
        """Run ``decision(key, state | None, replicas)`` over every partition and write the results (fenced);
        partitions whose write met a concurrent ISR change are re-read and decided again."""
        keys = [(t, p) for t, a in assignments.items() if t not in deleting for p in range(len(a.replicas))]
        for _ in range(MAX_WRITE_ROUNDS):
            changes = {}
            for key in keys:
                new = decision(key, states.get(key), assignments[key[0]].replicas[key[1]])
                if new is not None:
                    changes[key] = new
            if not changes:
                return
            refused = self._write_states(changes, states)
            if not refused:
                return
            keys = refused
            self._reread_states(refused, states)
        log.warning("controller %d: partitions %s kept changing under the controller", self.broker_id, keys)

    def _reread_states(self, keys, states: dict) -> None:
        """Refresh ``states`` for ``keys`` from ZooKeeper (a write refused by a concurrent change)."""
        for key in keys:
            try:
                data, stat = self.zk.get(layout.partition_state_path(*key))
                states[key] = layout.decode_partition_state(data, stat.version)
            except NoNodeError:
                states.pop(key, None)

    def _write_states(self, changes: dict, states: dict) -> list:
        """Write each new state in a transaction checking /controller_epoch; update ``states`` with the
        written ones.  Returns the keys refused by a concurrent change; raises ControllerMovedError."""
        pending = {}
        for key, new in changes.items():
            old = states.get(key)
            path = layout.partition_state_path(*key)
            data = layout.encode_partition_state(new)
            if old is None:
                self.zk.ensure_path(layout.partition_path(*key))
            transaction = self.zk.transaction()
            transaction.check(layout.CONTROLLER_EPOCH, self._epoch_zk_version)
            if old is None:
                transaction.create(path, data)
            else:
                transaction.set_data(path, data, version=old.zk_version)
            pending[key] = transaction.commit_async()
        refused, moved = [], False
        for key, result in pending.items():
            failed = _first_failure(result.get())
            if failed is None:
                stat = result.get()[1]
                version = stat.version if hasattr(stat, "version") else 0
                states[key] = replace(changes[key], zk_version=version)
                log.info("controller %d epoch %d: %s-%d -> %s", self.broker_id, self.epoch, key[0], key[1],
                         states[key])
            elif failed[0] == 0:
                moved = True
            elif isinstance(failed[1], (BadVersionError, NoNodeError, NodeExistsError)):
                refused.append(key)
            else:
                raise failed[1]
        if moved:
            raise ControllerMovedError(f"/controller_epoch moved past epoch {self.epoch}: a newer controller exists")
        return refused

    def _commit_fenced(self, transaction, what: str) -> tuple[int, Exception] | None:
        """Commit a transaction whose first operation checks /controller_epoch: None when it committed, else the
        failing (index, error); raises ControllerMovedError when the epoch check failed."""
        failed = _first_failure(transaction.commit())
        if failed is not None and failed[0] == 0:
            raise ControllerMovedError(f"/controller_epoch moved past epoch {self.epoch} while {what}")
        return failed

    def _delete_requested_topics(self, assignments, states) -> None:
        for topic in self.zk.get_children(layout.DELETE_TOPICS):
            transaction = self.zk.transaction()
            transaction.check(layout.CONTROLLER_EPOCH, self._epoch_zk_version)
            assignment = assignments.pop(topic, None)
            if assignment is not None:
                partitions = self.zk.get_children(layout.partitions_path(topic)) \
                    if self.zk.exists(layout.partitions_path(topic)) else []
                for child in partitions:
                    if self.zk.exists(f"{layout.partitions_path(topic)}/{child}/state"):
                        transaction.delete(f"{layout.partitions_path(topic)}/{child}/state")
                    transaction.delete(f"{layout.partitions_path(topic)}/{child}")
                if partitions or self.zk.exists(layout.partitions_path(topic)):
                    transaction.delete(layout.partitions_path(topic))
                transaction.delete(layout.topic_path(topic))
            if self.zk.exists(layout.topic_config_path(topic)):
                transaction.delete(layout.topic_config_path(topic))
            transaction.delete(layout.delete_topic_path(topic))
            failed = _first_failure(transaction.commit())
            if failed is not None and failed[0] == 0:
                raise ControllerMovedError(f"/controller_epoch moved past epoch {self.epoch} while deleting {topic}")
            if failed is not None:
                raise KazooException(f"deleting topic {topic!r} met a concurrent change: {failed[1]!r}")
            for key in [k for k in states if k[0] == topic]:
                del states[key]
            log.info("controller %d: topic %s deleted", self.broker_id, topic)
