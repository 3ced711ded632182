"""The server-side assignors of KIP-848 consumer groups: ``uniform`` (Kafka's default) and ``range``.

Theory of operation: an assignor maps the group's members (each with the topic ids it subscribes to) and the
subscribed topics' partition counts to a target assignment, ``member id -> {topic id: partitions}``.  It is a
pure function of its inputs plus the current target (for stickiness); the coordinator calls it when the group
epoch moved past the assignment epoch (a member joined, left or changed its subscription, or a subscribed
topic changed) and persists the result as Kafka's ConsumerGroupTargetAssignment records.

- ``uniform`` (Kafka's ``UniformAssignor``): every partition of every subscribed topic goes to one member
  subscribed to its topic, member counts differ by at most one where subscriptions allow it, and a member
  keeps what it had as far as balance allows (a join moves only the partitions the joiner gets).
- ``range`` (Kafka's ``RangeAssignor``): per topic, the subscribed members in member-id order get contiguous
  ranges, the first ``partitions % members`` one partition more; members subscribed to the same topics get the
  same partition numbers of each (co-partitioning, what joins rely on).

Bounded work: uniform's balancing moves at most one partition per step and stops when no move narrows the
spread, so its cost is O(partitions x members) per assignment; the group's size is bounded by
``group.consumer.max.size``.
"""
from __future__ import annotations

import uuid
from typing import Mapping

Assignment = dict[uuid.UUID, frozenset[int]]


def _freeze(pairs: dict[uuid.UUID, set[int]]) -> Assignment:
    return {topic: frozenset(parts) for topic, parts in pairs.items() if parts}


def range_assign(subscriptions: Mapping[str, frozenset[uuid.UUID]], partitions: Mapping[uuid.UUID, int],
                 current: Mapping[str, Assignment]) -> dict[str, Assignment]:
    """Per topic, contiguous ranges over the subscribed members in member-id order."""
    result: dict[str, dict[uuid.UUID, set[int]]] = {member: {} for member in subscriptions}
    for topic, count in sorted(partitions.items(), key=lambda item: str(item[0])):
        members = sorted(m for m, topics in subscriptions.items() if topic in topics)
        if not members:
            continue
        base, extra = divmod(count, len(members))
        start = 0
        for index, member in enumerate(members):
            size = base + (1 if index < extra else 0)
            if size:
                result[member][topic] = set(range(start, start + size))
            start += size
    return {member: _freeze(pairs) for member, pairs in result.items()}


def uniform_assign(subscriptions: Mapping[str, frozenset[uuid.UUID]], partitions: Mapping[uuid.UUID, int],
                   current: Mapping[str, Assignment]) -> dict[str, Assignment]:
    """Balanced and sticky: members keep their partitions up to their share, the rest go to the least loaded."""
    members = sorted(subscriptions)
    if not members:
        return {}
    eligible: dict[uuid.UUID, list[str]] = {
        topic: [m for m in members if topic in subscriptions[m]] for topic in partitions}
    homogeneous = len({subscriptions[m] for m in members}) == 1
    owned: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in members}
    count = dict.fromkeys(members, 0)
    taken: set[tuple[uuid.UUID, int]] = set()
    total = sum(n for topic, n in partitions.items() if eligible[topic])
    if homogeneous:
        quota, extra = divmod(total, len(members))
    # 1. stickiness: each member keeps the current partitions it still may have, up to its share
    for member in members:
        for topic, parts in sorted((current.get(member) or {}).items(), key=lambda item: str(item[0])):
            if topic not in subscriptions[member] or topic not in partitions:
                continue
            for p in sorted(parts):
                if p >= partitions[topic] or (topic, p) in taken:
                    continue
                if homogeneous:
                    if count[member] >= quota + 1 or (count[member] >= quota and extra == 0):
                        continue
                    if count[member] == quota:
                        extra -= 1   # this member takes one of the extra places
                owned[member].setdefault(topic, set()).add(p)
                count[member] += 1
                taken.add((topic, p))
    # 2. the partitions nobody kept, each to the least loaded member that may have it
    for topic in sorted(partitions, key=lambda t: (len(eligible[t]), str(t))):
        candidates = eligible[topic]
        if not candidates:
            continue
        for p in range(partitions[topic]):
            if (topic, p) in taken:
                continue
            member = min(candidates, key=lambda m: (count[m], m))
            owned[member].setdefault(topic, set()).add(p)
            count[member] += 1
            taken.add((topic, p))
    # 3. heterogeneous subscriptions: move partitions from the most to the least loaded member that may have
    # them while that narrows the spread (homogeneous groups are balanced by construction)
    if not homogeneous:
        for _ in range(total + 1):
            moved = False
            for giver in sorted(members, key=lambda m: (-count[m], m)):
                for topic, parts in sorted(owned[giver].items(), key=lambda item: str(item[0])):
                    takers = [m for m in eligible[topic] if count[m] + 1 < count[giver]]
                    if not takers or not parts:
                        continue
                    taker = min(takers, key=lambda m: (count[m], m))
                    p = max(parts)
                    parts.discard(p)
                    owned[taker].setdefault(topic, set()).add(p)
                    count[giver] -= 1
                    count[taker] += 1
                    moved = True
                    break
                if moved:
                    break
            if not moved:
                break
    return {member: _freeze(pairs) for member, pairs in owned.items()}


ASSIGNORS = {"uniform": uniform_assign, "range": range_assign}
