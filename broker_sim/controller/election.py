"""Leader elections asked for by an administrator (``ElectLeaders``, API 43; Kafka's ``kafka-leader-election.sh``).

Theory of operation: the request reaches the active controller (any other
broker answers NOT_CONTROLLER, as Kafka's does), which decides every named
partition against a fresh read of ZooKeeper, Kafka's
``KafkaController.processReplicaLeaderElection`` rules:

* a partition that does not exist (or whose topic is being deleted):
  UNKNOWN_TOPIC_OR_PARTITION;
* PREFERRED: the leader already is the preferred replica (assignment[0]):
  ELECTION_NOT_NEEDED; the preferred replica is live (not shutting down) and
  in the ISR: it leads at leader_epoch + 1 (ISR unchanged); otherwise
  PREFERRED_LEADER_NOT_AVAILABLE;
* UNCLEAN: the partition has a live leader: ELECTION_NOT_NEEDED; else the
  first live ISR member in assignment order, else the first live replica
  with ISR = [it] (records it lacks are lost, which is what the operator
  asked for); none live: ELIGIBLE_LEADERS_NOT_AVAILABLE.

The decisions are the pure ``decide_election``; the controller writes the
new states with its fenced transactions (``Controller.elect_leaders``).  A
request for all partitions (``topic_partitions`` null) is answered without
the partitions that needed no election, as Kafka's ``KafkaApis`` does.
"""
from __future__ import annotations

import enum
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Sequence

import kafka.errors as Errors

from broker_sim.controller.cluster_state import NO_LEADER, PartitionState


class ElectionType(enum.IntEnum):
    """Kafka's ``ElectionType`` (the request's int8)."""
    PREFERRED = 0
    UNCLEAN = 1


# (error class, message) of one partition; (None, None) when it got a new leader
Outcome = tuple[type | None, str | None]


def decide_election(kind: ElectionType, state: PartitionState | None, replicas: Sequence[int], live: set[int],
                    eligible: set[int], controller_epoch: int) -> tuple[PartitionState | None, Outcome]:
    """(new state or None, outcome) of one partition's requested election; see the module docstring.

    ``live``: registered brokers; ``eligible``: those that may lead (not shutting down).
    """
    if not replicas:
        return None, (Errors.UnknownTopicOrPartitionError, "The partition does not exist.")
    if kind == ElectionType.PREFERRED:
        preferred = replicas[0]
        if state is not None and state.leader == preferred:
            return None, (Errors.ElectionNotNeededError, f"Leader is already the preferred replica {preferred}.")
        if state is None or preferred not in eligible or preferred not in state.isr:
            why = ("is not live" if preferred not in live else "is shutting down" if preferred not in eligible
                   else f"is not in the ISR {list(state.isr) if state else []}")
            return None, (Errors.PreferredLeaderNotAvailableError,
                          f"Failed to elect leader: the preferred replica {preferred} {why}.")
        return PartitionState(preferred, state.leader_epoch + 1, state.isr, controller_epoch), (None, None)
    if state is not None and state.leader != NO_LEADER and state.leader in live:
        return None, (Errors.ElectionNotNeededError, f"Partition has a live leader {state.leader}.")
    isr = state.isr if state is not None else ()
    in_sync = [r for r in replicas if r in isr and r in eligible]
    epoch = state.leader_epoch + 1 if state is not None else 0
    if in_sync:
        return PartitionState(in_sync[0], epoch, tuple(b for b in isr if b in eligible), controller_epoch), (None, None)
    any_live = [r for r in replicas if r in eligible]
    if any_live:
        return PartitionState(any_live[0], epoch, (any_live[0],), controller_epoch), (None, None)
    return None, (Errors.EligibleLeadersNotAvailableError,
                  f"Failed to elect leader: none of the replicas {list(replicas)} is live.")


@dataclass(eq=False)
class ElectionRequest:
    """One ElectLeaders request queued for the controller's event thread; ``partitions`` None: all."""
    kind: ElectionType
    partitions: frozenset[tuple[str, int]] | None
    result: Future = field(default_factory=Future)  # {(topic, partition): Outcome}, or NotControllerError
