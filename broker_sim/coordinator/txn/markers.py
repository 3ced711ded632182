"""Transaction markers on a broker: the coordinator's ``MarkerWriter`` and the WriteTxnMarkers work.

``LocalMarkerWriter`` is the coordinator's ``MarkerWriter`` on a single node:
it appends the markers to this broker's partitions (``write_txn_markers``,
the same code the ``WriteTxnMarkers`` handler runs for markers another
coordinator sends).

``ClusterMarkerWriter`` is the writer in a cluster, where a marker counts only
once the partition's ISR has it (a marker only on a leader that then dies
would leave the transaction open on the new leader, its last stable offset
stuck): each partition's marker goes to the partition's leader — this broker
(``write_txn_markers_replicated``) or another, as a ``WriteTxnMarkers``
request whose handler does the same — in the background; ``write_markers``
answers "not yet" for those, and each delivery that completes asks the
coordinator to retry its pending markers, which then finds them written.
A partition no longer in the cluster's metadata (its topic was deleted) is
owed no marker and answers UNKNOWN_TOPIC_OR_PARTITION, which the coordinator
counts as done.  With ``txn.wiring``, the only module of
``broker_sim.coordinator.txn`` that knows the broker.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Iterable

import kafka.errors as Errors

from broker_sim.coordinator.broker_topic import partition_in_metadata
from broker_sim.coordinator.group.records import OFFSETS_TOPIC
from broker_sim.coordinator.isr_wait import high_watermarks_reached
from broker_sim.protocol.apis import messages

log = logging.getLogger(__name__)


def write_txn_markers(broker, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                      partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """Append one marker to each local partition; error code per partition."""
    return {tp: code for tp, (code, _) in _append_markers(broker, producer_id, producer_epoch, coordinator_epoch,
                                                          commit, partitions).items()}


def _append_markers(broker, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                    partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], tuple[int, int]]:
    """(error code, marker offset) per partition.

    A marker in a ``__consumer_offsets`` partition also completes the
    producer's transactional offset commits there (Kafka's
    ``onTransactionCompleted`` hook into the group coordinator).
    """
    results = {}
    for topic, index in partitions:
        try:
            partition = broker.replicas.get(topic, index)
            if not partition.is_leader:
                raise Errors.NotLeaderForPartitionError(f"{topic}-{index} is led by broker {partition.leader_id}")
            offset = partition.write_txn_marker(producer_id, producer_epoch, coordinator_epoch, commit)
            if topic == OFFSETS_TOPIC:
                broker.groups.complete_txn_offsets(index, producer_id, commit)
            results[(topic, index)] = (0, offset)
        except Errors.KafkaError as exc:
            log.warning("marker for producer %d in %s-%d failed: %r", producer_id, topic, index, exc)
            results[(topic, index)] = (getattr(exc, "errno", None) or Errors.UnknownError.errno, -1)
        except Exception:
            log.exception("marker for producer %d in %s-%d failed", producer_id, topic, index)
            results[(topic, index)] = (Errors.UnknownError.errno, -1)
    return results


async def write_txn_markers_replicated(broker, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                                       commit: bool, partitions: Iterable[tuple[str, int]]
                                       ) -> dict[tuple[str, int], int]:
    """``write_txn_markers``, answering for each partition once its ISR has the marker (Kafka appends with acks=all)."""
    written = _append_markers(broker, producer_id, producer_epoch, coordinator_epoch, commit, partitions)
    failed = await high_watermarks_reached(
        {tp: (broker.replicas.get(*tp), offset + 1) for tp, (code, offset) in written.items() if code == 0},
        broker.config.get("replica.socket.timeout.ms") / 1000.0)
    results = {}
    for tp, (code, _) in written.items():
        outcome = failed.get(tp)
        if isinstance(outcome, Errors.KafkaError):
            code = getattr(outcome, "errno", None) or Errors.UnknownError.errno
        elif outcome is not None:
            code = Errors.RequestTimedOutError.errno
        results[tp] = code
    return results


class LocalMarkerWriter:
    def __init__(self, broker) -> None:
        self._broker = broker

    def write_markers(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                      partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        return write_txn_markers(self._broker, producer_id, producer_epoch, coordinator_epoch, commit, partitions)


class ClusterMarkerWriter:
    """Markers in a cluster, delivered to each partition's leader in the background (module docstring)."""

    PENDING = Errors.RequestTimedOutError.errno  # "not written yet": the coordinator keeps the partition pending
    RETRY_AFTER_S = 0.5

    def __init__(self, broker) -> None:
        self._broker = broker
        self._written: set[tuple] = set()    # delivered, not yet reported to the coordinator
        self._in_flight: set[tuple] = set()
        self._clients: dict[int, object] = {}
        self._retry_scheduled = False

    def write_markers(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                      partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        results = {}
        by_leader: dict[int, list[tuple[str, int]]] = {}
        states = self._broker.metadata.partition_states
        exists = partition_in_metadata(self._broker)
        for tp in partitions:
            key = (producer_id, producer_epoch, coordinator_epoch, commit) + tuple(tp)
            if key in self._written:
                self._written.discard(key)
                results[tp] = 0
                continue
            if not exists(*tp):
                # deleted since it joined the transaction: as Kafka's marker channel, no marker is owed (waiting
                # for a leader that never comes would hold the transaction in its Prepare state for good)
                results[tp] = Errors.UnknownTopicOrPartitionError.errno
                continue
            results[tp] = self.PENDING
            if key in self._in_flight:
                continue
            state = states.get(tuple(tp))
            if state is None or not state.has_leader:
                self._schedule_retry(self.RETRY_AFTER_S)
                continue
            self._in_flight.add(key)
            by_leader.setdefault(state.leader, []).append(tuple(tp))
        loop = asyncio.get_running_loop()
        for leader, tps in by_leader.items():
            loop.create_task(self._deliver(leader, producer_id, producer_epoch, coordinator_epoch, commit, tps))
        return results

    async def _deliver(self, leader: int, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                       commit: bool, tps: list[tuple[str, int]]) -> None:
        codes: dict[tuple[str, int], int] = {}
        try:
            if leader == self._broker.broker_id:
                codes = await write_txn_markers_replicated(self._broker, producer_id, producer_epoch,
                                                           coordinator_epoch, commit, tps)
            else:
                codes = await self._send(leader, producer_id, producer_epoch, coordinator_epoch, commit, tps)
        except Exception as exc:  # a dead or unreachable leader: retried after the new leader is known
            log.info("markers for producer %d to broker %d failed: %r; will retry", producer_id, leader, exc)
            self._drop_client(leader)
        failed = False
        for tp in tps:
            key = (producer_id, producer_epoch, coordinator_epoch, commit) + tp
            self._in_flight.discard(key)
            code = codes.get(tp, Errors.UnknownError.errno)
            if code == 0:
                self._written.add(key)
            elif code in (Errors.InvalidProducerEpochError.errno, Errors.TransactionCoordinatorFencedError.errno):
                self._written.add(key)  # as Kafka: a fenced marker is not retried (a newer epoch or coordinator won)
                log.warning("marker for producer %d in %s-%d refused with error %d; not retried",
                            producer_id, tp[0], tp[1], code)
            else:
                failed = True
        self._schedule_retry(self.RETRY_AFTER_S if failed else 0.0)

    async def _send(self, leader: int, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                    commit: bool, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        client = self._client(leader)
        if client is None:
            return {}
        WriteTxnMarkersRequest = messages.WriteTxnMarkersRequest  # kafka-python's class, loaded on first use
        Marker = WriteTxnMarkersRequest.WritableTxnMarker
        topics: dict[str, list[int]] = {}
        for topic, index in tps:
            topics.setdefault(topic, []).append(index)
        response = await client.request(WriteTxnMarkersRequest[1](markers=[Marker(
            producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=commit,
            coordinator_epoch=coordinator_epoch,
            topics=[Marker.WritableTxnMarkerTopic(name=t, partition_indexes=p) for t, p in topics.items()])]))
        return {(t.name, p.partition_index): p.error_code
                for marker in response.markers for t in marker.topics for p in t.partitions}

    def _client(self, broker_id: int):
        client = self._clients.get(broker_id)
        if client is None:
            endpoint = self._broker.metadata.brokers.get(broker_id)
            endpoint = endpoint.on(self._broker.inter_broker_listener) if endpoint is not None else None
            if endpoint is None:
                return None
            from broker_sim.replication.client import BrokerClient
            client_id = self._broker.inter_broker.client_id(f"pylog-txn-markers-{self._broker.broker_id}")
            client = BrokerClient(endpoint.host, endpoint.port, client_id=client_id,
                                  timeout_s=self._broker.config.get("replica.socket.timeout.ms") / 1000.0,
                                  ssl=self._broker.inter_broker_ssl, sasl=self._broker.inter_broker_sasl)
            self._clients[broker_id] = client
        return client

    def _drop_client(self, broker_id: int) -> None:
        client = self._clients.pop(broker_id, None)
        if client is not None:
            try:
                client.close()
            except Exception:  # closing a broken connection
                pass

    def _schedule_retry(self, delay_s: float) -> None:
        if self._retry_scheduled or self._broker.stopping:
            return
        self._retry_scheduled = True
        asyncio.get_running_loop().call_later(delay_s, self._retry)

    def _retry(self) -> None:
        self._retry_scheduled = False
        if self._broker.stopping:
            return
        try:
            self._broker.transactions.retry_markers()
        except Exception:
            log.exception("retrying transaction markers failed")

    def close(self) -> None:
        for broker_id in list(self._clients):
            self._drop_client(broker_id)

