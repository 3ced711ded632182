"""A coordinator's internal topic on this broker, and the other seams both coordinators have to the broker.

``BrokerInternalTopic`` is the ``InternalTopic`` of a broker: it creates the
topic (``__consumer_offsets``, ``__transaction_state``) through the broker's
ordinary ``create_topic`` path (internal, ``cleanup.policy=compact``, the
coordinator's partition count and, in a cluster, its replication factor
capped at the live brokers, as Kafka does) and hands out its ``Partition``
objects.  ``partition_in_metadata`` answers whether a partition exists in
the cluster, whichever broker hosts it; ``isr_wait_for`` is what the
coordinators' shells wait with before they answer (``isr_wait``).  The
``group.wiring`` and ``txn.wiring`` modules build the coordinators over these.
"""
from __future__ import annotations

import kafka.errors as Errors

from broker_sim.controller.metadata import MetadataError
from broker_sim.coordinator.isr_wait import IsrWait, no_wait


class BrokerInternalTopic:
    """A coordinator's compacted internal topic on this broker, created on first use."""

    def __init__(self, broker, name: str, partitions: int, segment_bytes: int, *, replication_factor: int = 1,
                 min_insync_replicas: int | None = None) -> None:
        self._broker = broker
        self.name = name
        self._partitions = partitions
        self._segment_bytes = segment_bytes
        self._replication_factor = replication_factor
        self._min_insync_replicas = min_insync_replicas
        self.replicated = broker.cluster is not None

    def exists(self) -> bool:
        return self.name in self._broker.metadata.topics

    def partition_count(self) -> int:
        info = self._broker.metadata.topics.get(self.name)
        return info.partitions if info is not None else self._partitions

    def create(self) -> None:
        configs = {"cleanup.policy": "compact", "segment.bytes": str(self._segment_bytes)}
        if self._broker.cluster is None:
            self._broker.create_topic(self.name, self._partitions, configs, internal=True)
            return
        # as Kafka: the configured replication factor, capped at the live brokers (a dev cluster of 1 or 2 works)
        factor = max(1, min(self._replication_factor, len(self._broker.metadata.brokers)))
        if self._min_insync_replicas is not None:
            configs["min.insync.replicas"] = str(max(1, min(self._min_insync_replicas, factor)))
        try:
            self._broker.create_topic(self.name, self._partitions, configs, internal=True,
                                      replication_factor=factor)
        except MetadataError as exc:
            if exc.error is not Errors.TopicAlreadyExistsError:  # another broker created it first: fine
                raise

    def partition(self, index: int):
        return self._broker.replicas.get(self.name, index)

    def led_partitions(self) -> list[int]:
        """The partitions this broker leads (all it hosts on a single node)."""
        return sorted(index for (topic, index), partition in list(self._broker.replicas.partitions.items())
                      if topic == self.name and partition.is_leader)


def partition_in_metadata(broker):
    """``partition_exists`` for a coordinator: the partition is in the cluster's metadata (Kafka's
    ``metadataCache.contains``), whichever broker hosts it — not only this broker's replicas."""
    def exists(name: str, index: int) -> bool:
        info = broker.metadata.topics.get(name)
        return info is not None and 0 <= index < info.partitions
    return exists


def isr_wait_for(broker):
    """The shells' ``isr_wait``: an ``IsrWait`` bounded by ``replica.socket.timeout.ms`` in a cluster, else
    ``no_wait``."""
    if broker.cluster is None:
        return no_wait
    return IsrWait(broker.config.get("replica.socket.timeout.ms") / 1000.0)
