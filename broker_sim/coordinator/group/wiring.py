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


def _check_consumer_timing(config) -> None:
    """Kafka's GroupCoordinatorConfig checks of the KIP-848 timing, at start: each default within its bounds and
    the heartbeat interval below the session timeout; a ConfigError names the configs."""
    from broker_sim.config import ConfigError

    for name in ("session.timeout.ms", "heartbeat.interval.ms"):
        low, value, high = (config.get(f"group.consumer.{bound}{name}") for bound in ("min.", "", "max."))
        if low > high:
            raise ConfigError(f"group.consumer.max.{name}={high} must be at least group.consumer.min.{name}={low}")
        if not low <= value <= high:
            raise ConfigError(f"group.consumer.{name}={value} must be between group.consumer.min.{name}={low} and "
                              f"group.consumer.max.{name}={high}")
    if config.get("group.consumer.heartbeat.interval.ms") >= config.get("group.consumer.session.timeout.ms"):
        raise ConfigError("group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms")


def group_config(config) -> GroupConfig:
    """The coordinator's settings from a ``BrokerConfig``."""
    _check_consumer_timing(config)
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
                           group_timing=broker.group_timing,
                           retention_check_interval_ms=config.get("offsets.retention.check.interval.ms"),
                           isr_wait=isr_wait_for(broker))
    service.startup()
    return service
