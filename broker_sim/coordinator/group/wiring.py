"""The group coordinator on a broker: its settings from the broker's configs, over ``__consumer_offsets``.

``group_service_for(broker)`` builds the broker's ``GroupService`` over a
``BrokerInternalTopic("__consumer_offsets")`` (``offsets.topic.*`` configs),
answering after the ISR in a cluster, and loads the partitions this broker
leads.  Nothing else in ``broker_sim.coordinator.group`` knows the broker.
"""
from __future__ import annotations

from broker_sim.coordinator.broker_topic import BrokerInternalTopic, isr_wait_for, partition_in_metadata
from broker_sim.coordinator.group.metadata import GroupConfig
from broker_sim.coordinator.group.records import OFFSETS_TOPIC
from broker_sim.coordinator.group.service import GroupService


def group_config(config) -> GroupConfig:
    """The coordinator's settings from a ``BrokerConfig``."""
    return GroupConfig(
        min_session_timeout_ms=config.get("group.min.session.timeout.ms"),
        max_session_timeout_ms=config.get("group.max.session.timeout.ms"),
        initial_rebalance_delay_ms=config.get("group.initial.rebalance.delay.ms"),
        max_size=config.get("group.max.size"),
        max_groups=config.get("group.max.groups"),
        offsets_partitions=config.get("offsets.topic.num.partitions"),
        offset_metadata_max_bytes=config.get("offset.metadata.max.bytes"),
        offsets_retention_ms=config.get("offsets.retention.minutes") * 60_000,
        consumer_session_timeout_ms=config.get("group.consumer.session.timeout.ms"),
        consumer_heartbeat_interval_ms=config.get("group.consumer.heartbeat.interval.ms"),
        consumer_max_size=config.get("group.consumer.max.size"),
        consumer_assignors=tuple(config.get("group.consumer.assignors").split(",")),
    )


def group_service_for(broker) -> GroupService:
    """The broker's group coordinator, with every existing ``__consumer_offsets`` partition loaded."""
    config = broker.config
    topic = BrokerInternalTopic(broker, OFFSETS_TOPIC, config.get("offsets.topic.num.partitions"),
                                config.get("offsets.topic.segment.bytes"),
                                replication_factor=config.get("offsets.topic.replication.factor"))
    service = GroupService(group_config(config), topic, clock=broker.now_ms,
                           partition_exists=partition_in_metadata(broker),
                           topics=lambda: broker.metadata.topics,
                           retention_check_interval_ms=config.get("offsets.retention.check.interval.ms"),
                           isr_wait=isr_wait_for(broker))
    service.startup()
    return service
