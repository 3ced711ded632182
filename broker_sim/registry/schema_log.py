"""The registry's ``SchemaLog`` on a broker: partition 0 of the compacted ``_schemas`` topic.

Theory of operation: Confluent's registry keeps everything in one
single-partition compacted topic (``kafkastore.topic``, here always
``_schemas``) and lets one instance write it.  pylog's writer is the broker
that leads ``_schemas``-0; ``BrokerSchemaLog`` is that partition as the
``RegistryService`` sees it (``registry/service.py``'s ``SchemaLog`` protocol):

* the topic is created on first use of the registry (``ensure_topic``), as
  the coordinators create theirs: internal, ``cleanup.policy=compact``, one
  partition; in a cluster with replication factor min(3, live brokers), and
  ``min.insync.replicas=2`` when the factor is 3 (1 otherwise, so a dev
  cluster of one or two brokers can write) — a registration is answered
  only once two replicas have it, so losing the writer never loses it;
* ``is_writer()``: this broker hosts ``_schemas``-0 and leads it;
* ``append(records)``: one batch through the partition with acks=all
  semantics (refused while the ISR is below min.insync.replicas, as a
  producer's acks=all would be), then waits until the high watermark passes
  it, at most ``replica.socket.timeout.ms`` (``coordinator/isr_wait``'s wait);
  returns the offset after the batch.  Lost leadership, a shrunk ISR or a
  timeout raise ``NotWriterError``: the service answers an error the client
  retries, never success for a write that may not survive; records over the
  topic's ``max.message.bytes`` are Confluent's 42209 (schema too large);
* ``read_committed(from_offset)``: the records from ``from_offset`` up to
  what may be served — the leader's log end (as the coordinators load: a new
  leader's high watermark lags what its ISR committed), a follower's high
  watermark;
* ``end_offset()``: that bound.  Below the offset the service replayed to,
  the log was truncated (an old leader's uncommitted tail, dropped when it
  follows again): the service rebuilds from ``start_offset()``.

A broker that hosts no replica of ``_schemas`` (a cluster of more than three
brokers) has nothing to replay: ``has_replica()`` is False and its registry
forwards reads as well as writes to the writer (``server/schema_registry.py``).
"""
from __future__ import annotations

import logging
from typing import Iterator

import kafka.errors as Errors

from broker_sim.coordinator.broker_topic import BrokerInternalTopic
from broker_sim.coordinator.internal_topic import READ_CHUNK_BYTES
from broker_sim.coordinator.records import build_batch, iter_batches
from broker_sim.controller.metadata import MetadataError
from broker_sim.registry.errors import SCHEMA_TOO_LARGE, NotWriterError, RegistryError
from broker_sim.storage.batch import parse_batches

log = logging.getLogger(__name__)

SCHEMAS_TOPIC = "_schemas"
SCHEMAS_SEGMENT_BYTES = 100 * 1024 * 1024
SCHEMAS_REPLICATION_FACTOR = 3


class SchemasTopic(BrokerInternalTopic):
    """``_schemas``: one compacted partition; RF min(3, live brokers), min.insync.replicas 2 at RF 3."""

    def __init__(self, broker) -> None:
        super().__init__(broker, SCHEMAS_TOPIC, 1, SCHEMAS_SEGMENT_BYTES,
                         replication_factor=SCHEMAS_REPLICATION_FACTOR)

    def create(self) -> None:
        configs = {"cleanup.policy": "compact", "segment.bytes": str(self._segment_bytes)}
        if self._broker.cluster is None:
            self._broker.create_topic(self.name, 1, configs, internal=True)
            return
        factor = max(1, min(self._replication_factor, len(self._broker.metadata.brokers)))
        configs["min.insync.replicas"] = "2" if factor >= 3 else "1"
        try:
            self._broker.create_topic(self.name, 1, configs, internal=True, replication_factor=factor)
        except MetadataError as exc:
            if exc.error is not Errors.TopicAlreadyExistsError:  # another broker created it first: fine
                raise


class BrokerSchemaLog:
    """``_schemas``-0 of one broker, as the registry service reads and writes it."""

    def __init__(self, broker, *, timeout_s: float) -> None:
        self._broker = broker
        self.topic = SchemasTopic(broker)
        self.timeout_s = timeout_s  # the longest an append waits for the ISR

    # --- the topic --------------------------------------------------------------------------------
    def ensure_topic(self) -> None:
        """Create ``_schemas`` on first use (the other brokers see it through the metadata)."""
        if not self.topic.exists():
            log.info("creating %s for the schema registry", SCHEMAS_TOPIC)
            self.topic.create()

    def partition(self):
        """The local replica of ``_schemas``-0, or None."""
        return self._broker.replicas.partitions.get((SCHEMAS_TOPIC, 0)) if self._broker.replicas else None

    def has_replica(self) -> bool:
        return self.partition() is not None

    def leader_id(self) -> int | None:
        """The broker leading ``_schemas``-0 as the metadata says (None: no leader, or no topic yet)."""
        if self._broker.cluster is None:
            return self._broker.broker_id if self.topic.exists() else None
        state = self._broker.metadata.partition_states.get((SCHEMAS_TOPIC, 0)) \
            if hasattr(self._broker.metadata, "partition_states") else None
        if state is not None:
            return state.leader if state.leader >= 0 else None
        partition = self.partition()
        if partition is not None and partition.leader_id is not None and partition.leader_id >= 0:
            return partition.leader_id
        return None

    # --- SchemaLog --------------------------------------------------------------------------------
    def is_writer(self) -> bool:
        partition = self.partition()
        return partition is not None and partition.is_leader and not self._broker.stopping

    async def append(self, records: list[tuple[bytes, bytes | None]]) -> int:
        self.ensure_topic()
        partition = self.partition()
        if partition is None or not partition.is_leader:
            raise NotWriterError(f"broker {self._broker.broker_id} does not lead {SCHEMAS_TOPIC}-0")
        try:
            partition.append_records(build_batch(records, self._broker.now_ms()), required_acks=-1)
            end = partition.log_end_offset
            if self._broker.cluster is not None:
                await partition.wait_for_high_watermark(end, self.timeout_s,
                                                        min_isr=partition.log.config.min_insync_replicas)
        except (Errors.NotLeaderForPartitionError, Errors.NotEnoughReplicasError,
                Errors.NotEnoughReplicasAfterAppendError, Errors.RequestTimedOutError) as exc:
            raise NotWriterError(f"{SCHEMAS_TOPIC}-0: the write was not committed: {exc}") from exc
        except (Errors.MessageSizeTooLargeError, Errors.RecordListTooLargeError) as exc:
            raise RegistryError(422, SCHEMA_TOO_LARGE, f"Schema too large for the {SCHEMAS_TOPIC} topic "
                                f"(its max.message.bytes): {exc}") from exc
        return end

    def end_offset(self) -> int:
        """The end of what may be served: the leader's log end, a follower's high watermark (0: no replica)."""
        partition = self.partition()
        if partition is None:
            return 0
        return partition.log_end_offset if partition.is_leader else min(partition.high_watermark,
                                                                         partition.log_end_offset)

    def start_offset(self) -> int:
        partition = self.partition()
        return partition.log_start_offset if partition is not None else 0

    def read_committed(self, from_offset: int) -> Iterator[tuple[int, bytes, bytes | None]]:
        partition = self.partition()
        if partition is None:
            return
        end = self.end_offset()
        offset = max(from_offset, partition.log_start_offset)
        while offset < end:
            data = partition.log.read_bytes(offset, READ_CHUNK_BYTES, max_offset=end)
            if not data:
                return
            for batch in iter_batches(data):
                if batch.is_control_batch:
                    continue
                try:
                    records = [r for r in batch if offset <= r.offset < end]
                except Exception as exc:  # kafka-python raises many kinds for a corrupt batch
                    log.warning("%s-0: skipping the unreadable batch at offset %d: %r", SCHEMAS_TOPIC,
                                batch.base_offset, exc)
                    continue
                for record in records:
                    yield record.offset, record.key, record.value
            offset = parse_batches(data, verify_crc=False)[-1].next_offset
