"""Replica assignment: which brokers hold each partition's replicas (Kafka's ``AdminUtils`` placement).

Theory of operation: Kafka's ``AdminUtils.assignReplicasToBrokers`` as pure
functions.  Brokers come as ids, or as ``{id: rack or None}``.

Without racks, brokers are sorted by id.  Partition ``p``'s first replica (its
preferred leader) is broker ``(p + start_index) % n``, so leaders are spread
round-robin; the followers come after it at a distance
``1 + (shift + j) % (n - 1)``, and ``shift`` grows by one every ``n``
partitions, so the followers of one leader are spread too.  Kafka picks
``start_index`` and the initial shift at random (both the same value when a
start index is given); tests pass ``start_index`` to make it deterministic.

With racks (every broker has one; some with and some without is an error, as
Kafka's ``RackAwareMode.Enforced``, unless ``rack_aware=False``, Kafka's
``--disable-rack-aware``), the brokers are first put in *rack-alternating*
order: racks sorted by name, each rack's brokers sorted by id, and the list
takes one broker from each rack in turn (``a1, b1, c1, a2, b2, ...``).  The
leader is chosen as above in that list; each further replica walks the list
from the leader at the same shifted distances (the shift counted in steps of
the number of racks) and skips a broker whose rack already holds a replica
while some rack holds none, or a broker already holding one while some broker
holds none.  So an RF=3 partition over three racks has one replica per rack.

Adding partitions to a topic continues the existing layout as Kafka's
``AdminZkClient.addPartitions`` does: same replication factor as partition 0,
start index at partition 0's preferred leader, partition ids continuing from
the current count.
"""
from __future__ import annotations

import random
from typing import Iterable, Mapping, Sequence

import kafka.errors as Errors

from broker_sim.controller.metadata import MetadataError


Brokers = Iterable[int] | Mapping[int, "str | None"]


def broker_racks(brokers: Brokers) -> dict[int, str | None]:
    """``{id: rack or None}`` of ids (no racks) or of a ``{id: rack}`` mapping."""
    if isinstance(brokers, Mapping):
        return {int(b): (rack or None) for b, rack in brokers.items()}
    return {int(b): None for b in brokers}


def assign_replicas(brokers: Brokers, partitions: int, replication_factor: int,
                    start_index: int = -1, start_partition: int = 0,
                    rng: random.Random | None = None, rack_aware: bool = True) -> list[list[int]]:
    """Replica lists for partitions ``start_partition .. start_partition + partitions - 1``.

    ``brokers``: ids, or ``{id: rack or None}`` (rack-aware placement when every broker has a rack).
    Raises MetadataError(InvalidPartitionsError / InvalidReplicationFactorError) with Kafka's messages, and
    InvalidReplicationAssignmentError when some brokers have a rack and others not (unless not ``rack_aware``).
    """
    if partitions <= 0:
        raise MetadataError(Errors.InvalidPartitionsError, "Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise MetadataError(Errors.InvalidReplicationFactorError, "Replication factor must be larger than 0.")
    racks = broker_racks(brokers)
    ids = sorted(racks)
    if replication_factor > len(ids):
        raise MetadataError(Errors.InvalidReplicationFactorError,
                            f"Replication factor: {replication_factor} larger than available brokers: {len(ids)}.")
    with_rack = {b: r for b, r in racks.items() if r is not None}
    if rack_aware and with_rack and len(with_rack) != len(ids):
        missing = sorted(b for b in ids if b not in with_rack)
        raise MetadataError(Errors.InvalidReplicationAssignmentError,
                            f"Not all brokers have rack information for replica rack aware assignment: "
                            f"brokers {missing} have no broker.rack (the others do).")
    rng = rng or random.Random()
    n = len(ids)
    first_start = start_index if start_index >= 0 else rng.randrange(n)
    shift = start_index if start_index >= 0 else rng.randrange(n)
    if rack_aware and with_rack:
        return _assign_rack_aware(with_rack, partitions, replication_factor, first_start, shift, start_partition)
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


def rack_alternated_brokers(racks: Mapping[int, str]) -> list[int]:
    """Kafka's ``getRackAlternatedBrokerList``: one broker of each rack (racks by name, brokers by id) in turn."""
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(racks):
        by_rack.setdefault(racks[broker], []).append(broker)
    columns = [by_rack[rack] for rack in sorted(by_rack)]
    return [column[row] for row in range(max(map(len, columns))) for column in columns if row < len(column)]


def _assign_rack_aware(racks: Mapping[int, str], partitions: int, replication_factor: int, first_start: int,
                       shift: int, start_partition: int) -> list[list[int]]:
    arranged = rack_alternated_brokers(racks)
    n, rack_count = len(arranged), len(set(racks.values()))
    result = []
    for partition in range(max(0, start_partition), max(0, start_partition) + partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + first_start) % n
        leader = arranged[first]
        replicas, used_racks, used = [leader], {racks[leader]}, {leader}
        k = 0
        for _ in range(replication_factor - 1):
            while True:
                broker = arranged[(first + 1 + (shift * rack_count + k) % (n - 1)) % n]
                k += 1
                rack = racks[broker]
                if ((rack not in used_racks or len(used_racks) == rack_count)
                        and (broker not in used or len(used) == n)):
                    replicas.append(broker)
                    used_racks.add(rack)
                    used.add(broker)
                    break
        result.append(replicas)
    return result


def assign_added_partitions(brokers: Brokers, existing: Sequence[Sequence[int]],
                            new_count: int) -> list[list[int]]:
    """Replica lists of the partitions ``len(existing) .. new_count - 1`` added to a topic."""
    if new_count <= len(existing):
        raise MetadataError(Errors.InvalidPartitionsError,
                            f"the new partition count {new_count} must be larger than the current {len(existing)}")
    racks = broker_racks(brokers)
    ids = sorted(racks)
    first_leader = existing[0][0]
    start_index = next((i for i, b in enumerate(ids) if b >= first_leader), 0)
    return assign_replicas(racks, new_count - len(existing), len(existing[0]),
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
