"""The transaction coordinator's seams to the broker: configs, ``__transaction_state`` and marker writing.

``txn_service_for(broker)`` builds the coordinator from the broker's configs
over ``BrokerInternalTopic("__transaction_state")``.  ``LocalMarkerWriter`` is
the coordinator's ``MarkerWriter`` on a single node: it appends the markers to
this broker's partitions (``write_txn_markers``, the same code the
``WriteTxnMarkers`` handler runs for markers another coordinator sends); a
replicated broker routes the partitions it does not lead to their leaders as
``WriteTxnMarkers`` requests instead.  Nothing else in
``broker_sim.coordinator.txn_*`` knows the broker.
"""
from __future__ import annotations

import logging
from typing import Iterable

import kafka.errors as Errors

from broker_sim.coordinator.group_broker import BrokerInternalTopic
from broker_sim.coordinator.group_records import OFFSETS_TOPIC
from broker_sim.coordinator.txn_coordinator import TxnConfig
from broker_sim.coordinator.txn_records import TRANSACTION_STATE_TOPIC
from broker_sim.coordinator.txn_service import TxnService

log = logging.getLogger(__name__)


def write_txn_markers(broker, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                      partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """Append one marker to each local partition; error code per partition.

    A marker in a ``__consumer_offsets`` partition also completes the
    producer's transactional offset commits there (Kafka's
    ``onTransactionCompleted`` hook into the group coordinator).
    """
    results = {}
    for topic, index in partitions:
        try:
            partition = broker.replicas.get(topic, index)
            partition.write_txn_marker(producer_id, producer_epoch, coordinator_epoch, commit)
            if topic == OFFSETS_TOPIC:
                broker.groups.complete_txn_offsets(index, producer_id, commit)
            results[(topic, index)] = 0
        except Errors.KafkaError as exc:
            log.warning("marker for producer %d in %s-%d failed: %r", producer_id, topic, index, exc)
            results[(topic, index)] = getattr(exc, "errno", None) or Errors.UnknownError.errno
        except Exception:
            log.exception("marker for producer %d in %s-%d failed", producer_id, topic, index)
            results[(topic, index)] = Errors.UnknownError.errno
    return results


class LocalMarkerWriter:
    def __init__(self, broker) -> None:
        self._broker = broker

    def write_markers(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                      partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        return write_txn_markers(self._broker, producer_id, producer_epoch, coordinator_epoch, commit, partitions)


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
                                config.get("transaction.state.log.segment.bytes"))
    service = TxnService(
        txn_config(config), topic, LocalMarkerWriter(broker), clock=broker.now_ms,
        next_producer_id=broker.producer_ids.next_id,
        partition_exists=lambda name, index: (name, index) in broker.replicas.partitions,
        abort_interval_ms=config.get("transaction.abort.timed.out.transaction.cleanup.interval.ms"),
        expiration_interval_ms=config.get("transaction.remove.expired.transaction.cleanup.interval.ms"))
    service.startup()
    return service
