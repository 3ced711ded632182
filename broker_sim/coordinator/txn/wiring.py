"""The transaction coordinator on a broker: its settings from the broker's configs, over ``__transaction_state``.

``txn_service_for(broker)`` builds the broker's ``TxnService`` over a
``BrokerInternalTopic("__transaction_state")`` (``transaction.state.log.*``
configs), with the broker's producer ids and the marker writer of a single
node or a cluster (``txn.markers``), answering after the ISR in a cluster,
and loads the partitions this broker leads.
"""
from __future__ import annotations

from broker_sim.coordinator.broker_topic import BrokerInternalTopic, isr_wait_for, partition_in_metadata
from broker_sim.coordinator.txn.coordinator import TxnConfig
from broker_sim.coordinator.txn.markers import ClusterMarkerWriter, LocalMarkerWriter
from broker_sim.coordinator.txn.records import TRANSACTION_STATE_TOPIC
from broker_sim.coordinator.txn.service import TxnService


def txn_config(config) -> TxnConfig:
    """The coordinator's settings from a ``BrokerConfig``."""
    return TxnConfig(
        state_partitions=config.get("transaction.state.log.num.partitions"),
        max_timeout_ms=config.get("transaction.max.timeout.ms"),
        id_expiration_ms=config.get("transactional.id.expiration.ms"),
        partition_verification=config.get("transaction.partition.verification.enable"),
    )


def txn_service_for(broker) -> TxnService:
    """The broker's transaction coordinator, with every existing ``__transaction_state`` partition loaded."""
    config = broker.config
    topic = BrokerInternalTopic(broker, TRANSACTION_STATE_TOPIC, config.get("transaction.state.log.num.partitions"),
                                config.get("transaction.state.log.segment.bytes"),
                                replication_factor=config.get("transaction.state.log.replication.factor"),
                                min_insync_replicas=config.get("transaction.state.log.min.isr"))
    service = TxnService(
        txn_config(config), topic, ClusterMarkerWriter(broker) if broker.cluster else LocalMarkerWriter(broker),
        clock=broker.now_ms,
        next_producer_id=broker.producer_ids.next_id,
        partition_exists=partition_in_metadata(broker),
        abort_interval_ms=config.get("transaction.abort.timed.out.transaction.cleanup.interval.ms"),
        expiration_interval_ms=config.get("transaction.remove.expired.transaction.cleanup.interval.ms"),
        isr_wait=isr_wait_for(broker))
    service.startup()
    return service
