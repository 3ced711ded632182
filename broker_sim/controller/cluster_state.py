"""The cluster facts every part of a replicated broker shares: brokers and partition states.

These are the decoded forms of the ZooKeeper payloads (``controller/zk_layout.py``
reads and writes them; ``schemas/zookeeper-layout.json`` documents them), and
what the replica manager and request handlers act on.  Immutable: a change is a
new object, so a reader on the broker's event loop never sees a half update.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

NO_LEADER = -1


@dataclass(frozen=True)
class BrokerEndpoint:
    """A live broker: ``host``/``port`` reach it from other brokers; ``listeners`` lists every advertised
    (name, protocol, host, port), so a client is answered with the addresses of the listener it came in on."""
    broker_id: int
    host: str
    port: int
    rack: str | None = None
    listeners: tuple[tuple[str, str, str, int], ...] = ()
    schema_registry_url: str | None = None  # its Schema Registry (pylog_schema_registry_url in the registration)

    def on(self, listener: str) -> "BrokerEndpoint | None":
        """This broker as reached through ``listener`` (None when it does not advertise that listener).

        A registration without a listener list (an older pylog) is reachable on every listener at host/port.
        """
        if not self.listeners:
            return self
        for name, _protocol, host, port in self.listeners:
            if name == listener:
                return self if (host, port) == (self.host, self.port) else replace(self, host=host, port=port)
        return None


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
