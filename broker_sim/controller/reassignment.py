"""Partition reassignment (KIP-455), ZooKeeper mode: Kafka's ``KafkaController.onPartitionReassignment``.

Theory of operation: a reassignment lives in the topic's assignment znode, as in Kafka 2.4+:
``/brokers/topics/<t>`` holds, for a partition being moved, the full replica set RS = target + origin
(target first, Kafka's ``ReplicaAssignment.reassignTo``) and its ``adding_replicas`` AR = RS - origin and
``removing_replicas`` RR = RS - target.  Because the state is in ZooKeeper, a controller that dies
mid-reassignment leaves it to the next one, which reads the same znodes and carries on.

Requests arrive two ways: AlterPartitionReassignments (API 45, handled by the active controller through
``Controller.alter_reassignments``: validated with Kafka's rules, then written into the assignment znodes),
and the ``/admin/reassign_partitions`` znode of pre-KIP-455 tools (the controller starts each entry, removes
it once that partition's reassignment completed and deletes the znode once empty).  A null target cancels:
the partition is reassigned back to its origin replicas (Kafka's ``maybeBuildReassignment``).  A new
target for a partition already being moved replaces the old one from the same origin.

The controller then runs Kafka's sequence, level-triggered on every reconcile (assignment, ISR change
notifications, brokers coming and going all wake it):

1. writing RS makes every broker in AR host a replica (brokers create the replicas assigned to them) and the
   leader accept their fetches (it adopts the replica list);
2. they catch up and the leader adds them to the ISR (its ordinary ISR expansion);
3. once every target replica is in the ISR (``completion_state``): leadership moves to the first live
   target replica in the ISR if the leader is not a target, and RR leaves the ISR, with leader epoch + 1;
4. the assignment becomes the target alone (AR and RR gone); the brokers of RR, no longer assigned, stop
   their replicas and delete their logs.

``without_unassigned`` is the safety net that also serves cancellations and changed targets: a state whose
leader or ISR names a broker that the assignment no longer lists is corrected (leader epoch + 1).

The decisions (``plan``, ``completion_state``, ``without_unassigned``) are pure functions; ``ReassignmentSteps``,
mixed into ``zk_controller.Controller``, runs them on the controller's event thread and writes the results, every
write fenced by the controller epoch.
"""
from __future__ import annotations

import concurrent.futures
import logging
import queue
from dataclasses import dataclass
from typing import Iterable, Sequence

import kafka.errors as Errors
from kazoo.exceptions import BadVersionError, KazooException, NoNodeError

from broker_sim.controller import zk_layout as layout
from broker_sim.controller.cluster_state import NO_LEADER, PartitionState
from broker_sim.controller.zk_layout import TopicAssignment

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Reassignment:
    """One partition's replicas during a reassignment (Kafka's ``ReplicaAssignment``)."""
    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def origin(self) -> tuple[int, ...]:
        return tuple(b for b in self.replicas if b not in self.adding)

    @property
    def target(self) -> tuple[int, ...]:
        return tuple(b for b in self.replicas if b not in self.removing)

    @property
    def in_progress(self) -> bool:
        return bool(self.adding or self.removing)

    def reassign_to(self, target: Sequence[int]) -> "Reassignment":
        origin = self.origin
        full = tuple(dict.fromkeys((*target, *origin)))
        return Reassignment(full, tuple(b for b in full if b not in origin), tuple(b for b in full if b not in target))


def of(assignment: TopicAssignment, index: int) -> Reassignment:
    return Reassignment(tuple(assignment.replicas[index]), tuple(assignment.adding.get(index, ())),
                        tuple(assignment.removing.get(index, ())))


def with_partitions(assignment: TopicAssignment, changes: dict[int, Reassignment]) -> TopicAssignment:
    """The topic's assignment with ``changes`` applied (a finished reassignment has no AR / RR)."""
    replicas = list(assignment.replicas)
    adding, removing = dict(assignment.adding), dict(assignment.removing)
    for index, change in changes.items():
        replicas[index] = change.replicas
        for mapping, value in ((adding, change.adding), (removing, change.removing)):
            if value:
                mapping[index] = value
            else:
                mapping.pop(index, None)
    return TopicAssignment(assignment.topic_id, tuple(replicas), adding, removing)


class ReassignmentError(Exception):
    """A partition's reassignment request refused: ``error`` is the Kafka error class."""

    def __init__(self, error: type[Errors.KafkaError], message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


def plan(current: Reassignment, target: Sequence[int] | None, live: Iterable[int]) -> Reassignment:
    """The new assignment for a request (Kafka's ``validateReplicas`` + ``maybeBuildReassignment``).

    ``target`` None cancels.  Raises ReassignmentError: INVALID_REPLICA_ASSIGNMENT for an empty list,
    duplicates, negative ids or added brokers that are not alive; NO_REASSIGNMENT_IN_PROGRESS for a
    cancellation of a partition that is not being reassigned.
    """
    if target is None:
        if not current.in_progress:
            raise ReassignmentError(Errors.NoReassignmentInProgressError,
                                    "No reassignment in progress for this partition to cancel")
        return current.reassign_to(current.origin)
    target = tuple(target)
    if not target:
        raise ReassignmentError(Errors.InvalidReplicationAssignmentError,
                                "Empty replica list specified in partition reassignment.")
    if len(set(target)) != len(target):
        raise ReassignmentError(Errors.InvalidReplicationAssignmentError,
                                f"Duplicate replica ids in partition reassignment replica list: {list(target)}")
    if any(b < 0 for b in target):
        raise ReassignmentError(Errors.InvalidReplicationAssignmentError,
                                f"Invalid broker id in replica list: {list(target)}")
    new = current.reassign_to(target)
    live = set(live)
    dead = [b for b in new.adding if b not in live]
    if dead:
        raise ReassignmentError(Errors.InvalidReplicationAssignmentError,
                                f"Replica assignment has brokers that are not alive. Replica list: {list(new.adding)}"
                                f", live broker list: {sorted(live)}")
    return new


def completion_state(state: PartitionState | None, reassignment: Reassignment, eligible: set[int],
                     controller_epoch: int) -> tuple[PartitionState | None, bool]:
    """Step 3: (the state to write first or None, whether the reassignment can complete now).

    Not complete while a target replica is outside the ISR, or no live target replica could lead.
    """
    if state is None or not reassignment.in_progress:
        return None, False
    target = reassignment.target
    if not set(target) <= set(state.isr):
        return None, False
    leader = state.leader
    if leader not in target or leader not in eligible:
        candidates = [b for b in target if b in state.isr and b in eligible]
        if not candidates:
            return None, False
        leader = candidates[0]
    isr = tuple(b for b in state.isr if b in target)
    if leader == state.leader and isr == state.isr:
        return None, True
    return PartitionState(leader, state.leader_epoch + 1, isr, controller_epoch), True


def without_unassigned(state: PartitionState | None, replicas: Sequence[int], eligible: set[int],
                       controller_epoch: int) -> PartitionState | None:
    """A state naming brokers the assignment dropped (cancelled or changed reassignment), corrected: they leave
    the ISR and, when one led, the first assigned eligible ISR member leads (else no leader), epoch + 1."""
    if state is None:
        return None
    assigned = set(replicas)
    isr = tuple(b for b in state.isr if b in assigned)
    leader = state.leader
    if leader != NO_LEADER and leader not in assigned:
        candidates = [b for b in replicas if b in isr and b in eligible]
        leader = candidates[0] if candidates else NO_LEADER
    elif isr == state.isr:
        return None
    if not isr:  # no assigned replica in sync: offline, keeping the last member as the data's witness
        if state.leader == NO_LEADER:
            return None
        return PartitionState(NO_LEADER, state.leader_epoch + 1, state.isr[-1:], controller_epoch)
    return PartitionState(leader, state.leader_epoch + 1, isr, controller_epoch)


# --- the controller's steps (mixed into zk_controller.Controller; they run on its event thread) ---

class ReassignmentSteps:
    """Reassignment requests and progress for ``zk_controller.Controller`` (which provides ``zk``, ``epoch``,
    ``_epoch_zk_version``, ``_live``, ``_events``, ``_write_states``, ``_commit_fenced``, ``_active``)."""

    REQUEST_TIMEOUT_S = 30.0

    def _init_reassignment(self) -> None:
        self._requests: queue.Queue = queue.Queue()

    def alter_reassignments(self, targets: dict[tuple[str, int], Sequence[int] | None],
                            timeout_s: float | None = None) -> dict[tuple[str, int], ReassignmentError | None]:
        """AlterPartitionReassignments on the active controller, from any thread: each (topic, partition) ->
        None (accepted) or the ReassignmentError refusing it.  Raises NotControllerError when this broker's
        controller is not the active one, RequestTimedOutError when the event thread did not answer in time."""
        if not self._active:
            raise Errors.NotControllerError(f"broker {self.broker_id} is not the controller")
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._requests.put((dict(targets), future))
        self._events.put("reconcile")
        try:
            return future.result(self.REQUEST_TIMEOUT_S if timeout_s is None else timeout_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise Errors.RequestTimedOutError("the controller did not handle the reassignment in time") from None

    def _refuse_reassignment_requests(self) -> None:
        """Not (or no longer) the active controller: every waiting request gets NOT_CONTROLLER."""
        while True:
            try:
                _, future = self._requests.get_nowait()
            except queue.Empty:
                return
            if future.set_running_or_notify_cancel():
                future.set_exception(Errors.NotControllerError(f"broker {self.broker_id} is not the controller"))

    def _serve_reassignment_requests(self, assignments: dict, deleting: set[str]) -> None:
        while True:
            try:
                targets, future = self._requests.get_nowait()
            except queue.Empty:
                return
            if not future.set_running_or_notify_cancel():
                continue  # the caller gave up waiting: do nothing it was not told about
            try:
                future.set_result(self._alter(targets, assignments, deleting))
            except BaseException as exc:
                future.set_exception(exc)
                raise

    def _alter(self, targets: dict, assignments: dict, deleting: set[str]) -> dict:
        results: dict[tuple[str, int], ReassignmentError | None] = {}
        by_topic: dict[str, dict[int, Sequence[int] | None]] = {}
        for (topic, index), target in targets.items():
            by_topic.setdefault(topic, {})[index] = target
        for topic, wanted in by_topic.items():
            def change(assignment: TopicAssignment, topic=topic, wanted=wanted):
                changes = {}
                for index, target in wanted.items():
                    if not 0 <= index < len(assignment.replicas):
                        results[(topic, index)] = ReassignmentError(
                            Errors.UnknownTopicOrPartitionError, f"topic {topic!r} has no partition {index}")
                        continue
                    try:
                        changes[index] = plan(of(assignment, index), target, self._live)
                        results[(topic, index)] = None
                    except ReassignmentError as exc:
                        results[(topic, index)] = exc
                return with_partitions(assignment, changes) if changes else None
            if topic in deleting or not self._update_topic(topic, change, assignments):
                for index in wanted:
                    results[(topic, index)] = ReassignmentError(
                        Errors.UnknownTopicOrPartitionError, f"topic {topic!r} does not exist")
        for key, result in results.items():
            if result is None:
                log.info("controller %d: reassigning %s-%d to %s", self.broker_id, key[0], key[1],
                         "its origin (cancelled)" if targets[key] is None else list(targets[key]))
        return results

    def _update_topic(self, topic: str, change, assignments: dict) -> bool:
        """Rewrite ``/brokers/topics/<topic>`` with ``change(assignment)`` (None: leave it), conditionally on its
        version and fenced by the controller epoch; False when the topic does not exist."""
        path = layout.topic_path(topic)
        for _ in range(5):
            try:
                data, stat = self.zk.get(path)
            except NoNodeError:
                return False
            new = change(layout.decode_topic_assignment(topic, data))
            if new is None:
                return True
            transaction = self.zk.transaction()
            transaction.check(layout.CONTROLLER_EPOCH, self._epoch_zk_version)
            transaction.set_data(path, layout.encode_topic_assignment(new.topic_id, new.replicas, new.adding,
                                                                      new.removing), version=stat.version)
            failed = self._commit_fenced(transaction, f"rewriting {path}")
            if failed is None:
                assignments[topic] = new
                return True
            if isinstance(failed[1], NoNodeError):
                return False
            if not isinstance(failed[1], BadVersionError):
                raise failed[1]
        raise KazooException(f"{path} kept changing under the controller")

    def _progress_reassignments(self, assignments: dict, states: dict, eligible: set[int],
                                deleting: set[str]) -> None:
        """Start the ``/admin/reassign_partitions`` entries, complete the reassignments whose target replicas are
        all in sync (step 3 then step 4), and drop finished entries from the znode."""
        requested, znode_version = self._requested_reassignments()
        done: set[tuple[str, int]] = set()
        starts: dict[str, dict[int, tuple[int, ...]]] = {}
        for (topic, index), target in requested.items():
            assignment = assignments.get(topic)
            if assignment is None or topic in deleting or index >= len(assignment.replicas):
                log.error("controller %d: %s asks to reassign %s-%d, which does not exist; dropping it",
                          self.broker_id, layout.REASSIGN_PARTITIONS, topic, index)
                done.add((topic, index))
                continue
            current = of(assignment, index)
            if (current.in_progress and current.target == target) or \
                    (not current.in_progress and current.replicas == target):
                continue
            starts.setdefault(topic, {})[index] = target
        for topic, wanted in starts.items():
            def start(assignment: TopicAssignment, topic=topic, wanted=wanted):
                changes = {}
                for index, target in wanted.items():
                    try:
                        changes[index] = plan(of(assignment, index), target, self._live)
                    except ReassignmentError as exc:
                        log.error("controller %d: %s entry %s-%d refused: %s; dropping it", self.broker_id,
                                  layout.REASSIGN_PARTITIONS, topic, index, exc.message)
                        done.add((topic, index))
                return with_partitions(assignment, changes) if changes else None
            self._update_topic(topic, start, assignments)

        finished: dict[str, dict[int, Reassignment]] = {}
        for topic, assignment in assignments.items():
            if topic in deleting:
                continue
            for index in sorted(set(assignment.adding) | set(assignment.removing)):
                key = (topic, index)
                current = of(assignment, index)
                new_state, complete = completion_state(states.get(key), current, eligible, self.epoch)
                if new_state is not None and self._write_states({key: new_state}, states):
                    continue  # refused by a concurrent ISR change: decided again on the next reconcile
                if complete:
                    finished.setdefault(topic, {})[index] = Reassignment(current.target)
        for topic, indexes in finished.items():
            def finish(assignment: TopicAssignment, indexes=indexes, topic=topic):
                still = {i: r for i, r in indexes.items()
                         if i < len(assignment.replicas) and of(assignment, i).target == r.replicas}
                return with_partitions(assignment, still) if still else None
            self._update_topic(topic, finish, assignments)
            for index, result in indexes.items():
                log.info("controller %d: reassignment of %s-%d completed: replicas %s", self.broker_id, topic,
                         index, list(result.replicas))
        for key, target in requested.items():
            assignment = assignments.get(key[0])
            if assignment is not None and key[1] < len(assignment.replicas):
                current = of(assignment, key[1])
                if not current.in_progress and current.replicas == tuple(target):
                    done.add(key)
        if done:
            self._drop_requested(done)

    def _requested_reassignments(self) -> tuple[dict[tuple[str, int], tuple[int, ...]], int]:
        try:
            data, stat = self.zk.get(layout.REASSIGN_PARTITIONS)
        except NoNodeError:
            return {}, -1
        try:
            return layout.decode_reassign_partitions(data), stat.version
        except layout.LayoutError as exc:
            log.error("controller %d: %s; deleting it", self.broker_id, exc)
            self.zk.delete(layout.REASSIGN_PARTITIONS, version=stat.version)
            return {}, -1

    def _drop_requested(self, done: set[tuple[str, int]]) -> None:
        for _ in range(5):
            requested, version = self._requested_reassignments()
            if version < 0:
                return
            remaining = {k: v for k, v in requested.items() if k not in done}
            try:
                if remaining:
                    self.zk.set(layout.REASSIGN_PARTITIONS, layout.encode_reassign_partitions(remaining),
                                version=version)
                else:
                    self.zk.delete(layout.REASSIGN_PARTITIONS, version=version)
                return
            except BadVersionError:
                continue
            except NoNodeError:
                return
