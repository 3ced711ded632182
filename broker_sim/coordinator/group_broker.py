"""The group coordinator's seams to the broker: its configs and the ``__consumer_offsets`` topic.

``BrokerInternalTopic`` creates a coordinator's internal topic
(``__consumer_offsets`` here, ``__transaction_state`` for the transaction
coordinator) through the broker's ordinary ``create_topic`` path (internal,
``cleanup.policy=compact``, ``offsets.topic.num.partitions`` partitions) and
hands out its ``Partition`` objects; ``group_service_for(broker)`` builds the
coordinator from the broker's configs.  Nothing else in
``broker_sim.coordinator.group_*`` knows the broker.
"""
from __future__ import annotations

import kafka.errors as Errors

from broker_sim.controller.metadata import MetadataError
from broker_sim.coordinator.group_metadata import GroupConfig
from broker_sim.coordinator.group_records import OFFSETS_TOPIC
from broker_sim.coordinator.group_service import GroupService


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


def group_config(config) -> GroupConfig:
    """The coordinator's settings from a ``BrokerConfig``."""
    return GroupConfig(
        min_session_timeout_ms=config.get("group.min.session.timeout.ms"),
        max_session_timeout_ms=config.get("group.max.session.timeout.ms"),
        initial_rebalance_delay_ms=config.get("group.initial.rebalance.delay.ms"),
        max_size=config.get("group.max.size"),
        offsets_partitions=config.get("offsets.topic.num.partitions"),
        offset_metadata_max_bytes=config.get("offset.metadata.max.bytes"),
        offsets_retention_ms=config.get("offsets.retention.minutes") * 60_000,
    )


def group_service_for(broker) -> GroupService:
    """The broker's group coordinator, with every existing ``__consumer_offsets`` partition loaded."""
    config = broker.config
    topic = BrokerInternalTopic(broker, OFFSETS_TOPIC, config.get("offsets.topic.num.partitions"),
                                config.get("offsets.topic.segment.bytes"),
                                replication_factor=config.get("offsets.topic.replication.factor"))
    service = GroupService(group_config(config), topic, clock=broker.now_ms,
                           partition_exists=partition_in_metadata(broker),
                           retention_check_interval_ms=config.get("offsets.retention.check.interval.ms"))
    service.startup()
    return service
