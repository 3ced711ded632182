"""Replica assignment: which brokers hold each partition's replicas (Kafka's rack-unaware placement).

Theory of operation: Kafka's ``AdminUtils.assignReplicasToBrokers`` without
racks, as pure functions.  Brokers are sorted by id.  Partition ``p``'s first
replica (its preferred leader) is broker ``(p + start_index) % n``, so leaders
are spread round-robin; the followers come after it at a distance
``1 + (shift + j) % (n - 1)``, and ``shift`` grows by one every ``n``
partitions, so the followers of one leader are spread too.  Kafka picks
``start_index`` and the initial shift at random (both the same value when a
start index is given); tests pass ``start_index`` to make it deterministic.

Adding partitions to a topic continues the existing layout as Kafka's
``AdminZkClient.addPartitions`` does: same replication factor as partition 0,
start index at partition 0's preferred leader, partition ids continuing from
the current count.
"""
from __future__ import annotations

import random
from typing import Iterable, Sequence

import kafka.errors as Errors

from broker_sim.controller.metadata import MetadataError


def assign_replicas(brokers: Iterable[int], partitions: int, replication_factor: int,
                    start_index: int = -1, start_partition: int = 0,
                    rng: random.Random | None = None) -> list[list[int]]:
    """Replica lists for partitions ``start_partition .. start_partition + partitions - 1``.

    Raises MetadataError(InvalidPartitionsError / InvalidReplicationFactorError) with Kafka's messages.
    """
    if partitions <= 0:
        raise MetadataError(Errors.InvalidPartitionsError, "Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise MetadataError(Errors.InvalidReplicationFactorError, "Replication factor must be larger than 0.")
    ids = sorted(set(brokers))
    if replication_factor > len(ids):
        raise MetadataError(Errors.InvalidReplicationFactorError,
                            f"Replication factor: {replication_factor} larger than available brokers: {len(ids)}.")
    n = len(ids)
    rng = rng or random.Random()
    first_start = start_index if start_index >= 0 else rng.randrange(n)
    shift = start_index if start_index >= 0 else rng.randrange(n)
    result = []
    for partition in range(max(0, start_partition), max(0, start_partition) + partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + first_start) % n
        replicas = [ids[first]]
        for j in range(replication_factor - 1):
            replicas.append(ids[(first + 1 + (shift + j) % (n - 1)) % n])
        result.append(replicas)
    return result


def assign_added_partitions(brokers: Iterable[int], existing: Sequence[Sequence[int]],
                            new_count: int) -> list[list[int]]:
    """Replica lists of the partitions ``len(existing) .. new_count - 1`` added to a topic."""
    if new_count <= len(existing):
        raise MetadataError(Errors.InvalidPartitionsError,
                            f"the new partition count {new_count} must be larger than the current {len(existing)}")
    ids = sorted(set(brokers))
    first_leader = existing[0][0]
    start_index = next((i for i, b in enumerate(ids) if b >= first_leader), 0)
    return assign_replicas(ids, new_count - len(existing), len(existing[0]),
                           start_index=start_index, start_partition=len(existing))


def validate_assignment(replicas: Sequence[Sequence[int]], partitions: int, live_brokers: Iterable[int]) -> None:
    """Check a caller-given assignment (CreateTopics with explicit assignments) as Kafka does."""
    if len(replicas) != partitions:
        raise MetadataError(Errors.InvalidReplicationAssignmentError,
                            f"the assignment has {len(replicas)} partitions, not {partitions}")
    live = set(live_brokers)
    sizes = {len(r) for r in replicas}
    if len(sizes) != 1 or 0 in sizes:
        raise MetadataError(Errors.InvalidReplicationAssignmentError,
                            "all partitions must have the same, non-zero number of replicas")
    for index, r in enumerate(replicas):
        if len(set(r)) != len(r):
            raise MetadataError(Errors.InvalidReplicationAssignmentError,
                                f"duplicate brokers in the assignment of partition {index}: {list(r)}")
        unknown = sorted(set(r) - live)
        if unknown:
            raise MetadataError(Errors.BrokerNotAvailableError,
                                f"unknown or unavailable brokers {unknown} in the assignment of partition {index}")
