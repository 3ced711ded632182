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

from broker_sim.coordinator.group_metadata import GroupConfig
from broker_sim.coordinator.group_records import OFFSETS_TOPIC
from broker_sim.coordinator.group_service import GroupService


class BrokerInternalTopic:
    """A coordinator's compacted internal topic on this broker, created on first use."""

    def __init__(self, broker, name: str, partitions: int, segment_bytes: int) -> None:
        self._broker = broker
        self.name = name
        self._partitions = partitions
        self._segment_bytes = segment_bytes

    def exists(self) -> bool:
        return self.name in self._broker.metadata.topics

    def partition_count(self) -> int:
        info = self._broker.metadata.topics.get(self.name)
        return info.partitions if info is not None else self._partitions

    def create(self) -> None:
        self._broker.create_topic(self.name, self._partitions,
                                  {"cleanup.policy": "compact", "segment.bytes": str(self._segment_bytes)},
                                  internal=True)

    def partition(self, index: int):
        return self._broker.replicas.get(self.name, index)

    def led_partitions(self) -> list[int]:
        # a single broker leads every partition it hosts; replication narrows this to its leaderships
        return [p.index for p in self._broker.replicas.topic_partitions(self.name)]


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
                                config.get("offsets.topic.segment.bytes"))
    service = GroupService(group_config(config), topic, clock=broker.now_ms,
                           partition_exists=lambda name, index: (name, index) in broker.replicas.partitions,
                           retention_check_interval_ms=config.get("offsets.retention.check.interval.ms"))
    service.startup()
    return service
