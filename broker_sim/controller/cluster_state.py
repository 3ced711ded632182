"""The cluster facts every part of a replicated broker shares: brokers and partition states.

These are the decoded forms of the ZooKeeper payloads (``controller/zk_layout.py``
reads and writes them; ``schemas/zookeeper-layout.json`` documents them), and
what the replica manager and request handlers act on.  Immutable: a change is a
new object, so a reader on the broker's event loop never sees a half update.
"""
from __future__ import annotations

from dataclasses import dataclass

NO_LEADER = -1


@dataclass(frozen=True)
class BrokerEndpoint:
    broker_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True)
class PartitionState:
    """``/brokers/topics/<t>/partitions/<p>/state``: who leads, at which epoch, and the in-sync replicas.

    ``zk_version`` is the znode's version when read: the leader's ISR updates are
    conditional on it, so a leader that missed a controller decision is refused.
    """
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int = -1

    @property
    def has_leader(self) -> bool:
        return self.leader != NO_LEADER
