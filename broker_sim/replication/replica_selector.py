"""Which replica a consumer should read from (KIP-392, Kafka's ``ReplicaSelector``).

Theory of operation: a consumer that names its rack (Fetch v11+ ``rack_id``,
the client's ``client.rack``) asks the partition's leader; with
``replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector``
the leader answers with ``preferred_read_replica`` instead of records when a
better replica exists, and the consumer fetches from it until told otherwise
(it serves up to its own high watermark).  The candidates are Kafka's
(``ReplicaManager.findPreferredReadReplica``): the leader, and the followers
in the ISR whose log end offset (as the leader last saw it) reaches the
consumer's fetch offset.  ``RackAwareReplicaSelector.select``: no rack, or no
candidate in that rack, or the leader in that rack: the leader; otherwise the
most caught-up replica of the rack (highest log end offset, then the shortest
time since it was last caught up; lowest id on a tie).  Pure functions.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable


@dataclass(frozen=True)
class ReplicaView:
    """One candidate replica as the leader sees it (Kafka's ``ReplicaView``)."""
    broker_id: int
    rack: str | None
    log_end_offset: int
    time_since_caught_up_ms: int


def select_rack_aware(client_rack: str, leader: ReplicaView, followers: Iterable[ReplicaView]) -> int:
    """The broker a consumer in ``client_rack`` should fetch from (``leader.broker_id`` when the leader)."""
    if not client_rack or leader.rack == client_rack:
        return leader.broker_id
    same_rack = [view for view in followers if view.rack == client_rack]
    if not same_rack:
        return leader.broker_id
    best = min(same_rack, key=lambda v: (-v.log_end_offset, v.time_since_caught_up_ms, v.broker_id))
    return best.broker_id
