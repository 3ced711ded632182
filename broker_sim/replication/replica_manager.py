"""The partitions this broker hosts, by (topic, index) (Kafka's ``ReplicaManager`` + ``LogManager``).

Theory of operation: partition directories live directly in the data dir as
``<topic>-<index>``, Kafka's layout.  The manager opens every partition of
every known topic at start (recovery runs inside ``PartitionLog``); one that
cannot be opened is logged with its path and kept ``offline`` (answering
KAFKA_STORAGE_ERROR) while the others are served.  New topics and partitions
are made in two steps: ``create_partitions`` creates and opens their
directories (in slices the broker spreads over the event loop) without
making them visible, ``publish`` does once the metadata is persisted, and
``discard`` removes them when that fails.  A topic is deleted by renaming
its directories to ``<topic>-<index>.<id>-delete`` (atomic) before removing
them, so a crash mid-delete leaves a marked directory that the next start
removes instead of a half-deleted partition.  ``enforce_retention`` and
``maybe_roll`` are called periodically by the broker.  Runs on the broker's
event loop thread; no locks.  ``clean_logs`` (compaction) is awaited by the
broker's cleaner task and does its heavy part in a worker thread.

Replication: every hosted partition starts as the leader of a one-replica
ISR (the single-node broker).  In a cluster the lead's glue applies the
controller's decisions: ``ensure_partition`` opens a replica assigned here,
``become_leader`` stops fetching it and makes it lead at the controller's
epoch, ``become_follower`` makes it follow and (re)starts fetching it from the
new leader through ``fetcher`` (a ``ReplicaFetcherManager``, truncation
first), ``remove_partition`` stops hosting it (deleting the directory when
asked).  ``check_isr`` (periodic, the broker's timer) shrinks the ISR of led
partitions whose followers lag more than ``replica.lag.time.max.ms``; ISR
writes go through the injected ``isr_writer`` (a ZooKeeper conditional
write).  ``get`` answers NOT_LEADER_OR_FOLLOWER rather than
UNKNOWN_TOPIC_OR_PARTITION for a topic that exists (``topic_exists``) but has
no replica here; ``get_leader`` also refuses a follower replica.
``preferred_read_replica`` is the leader's KIP-392 choice of the replica a
consumer in a rack should read from (``replica_selector``).

Produce (Kafka's ``ReplicaManager.appendRecords``): ``append_records`` is the
one owner of a Produce request's partitions once they are authorized.  Per
partition, in request order: acks must be -1, 0 or 1; internal topics are
written only by their coordinators (INVALID_TOPIC_EXCEPTION); only the leader
appends (``get_leader``, once); the records pass Kafka's LogValidator rules
and the topic's ``compression.type`` (``storage/validator.py``), inline when
small and on a two-thread pool when checking them would hold the event loop
(over 256 KB, or decompressing past that), the append itself then happening
back on the loop; a topic whose configs ask for it (``config.checks_records``:
Confluent's ``confluent.{key,value}.schema.validation``) has its records
checked further by ``record_check`` (the broker wires the registry's schema
validation there; replication does not import the registry): the validator's
walk hands it the keys or values it asks for wherever validation runs, then
its verdict on the loop refuses the partition's records with INVALID_RECORD
and per-record errors, or a retriable error; a transactional batch must
belong to its producer's ongoing transaction (``verify_transaction``, the
transaction coordinator's check, as Kafka 3.6+
``transaction.partition.verification.enable``: INVALID_TXN_STATE, or
INVALID_PRODUCER_EPOCH for a fenced epoch); then ``Partition.append_records``
refuses acks=-1 below min.insync.replicas and appends.  For acks=-1 the
request then waits (Kafka's delayed produce, the purgatory being
``Partition.wait_for_high_watermark``) until the high watermark covers what
was appended, for every partition at once, at most the request's timeout:
REQUEST_TIMED_OUT past it, NOT_LEADER_OR_FOLLOWER when leadership moved,
NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below the minimum.  On a
single node the high watermark is already there and nothing waits.  Each
partition's answer is a ``ProduceResult`` value; per-record failures (a
keyless record on a compacted topic) carry KIP-467 ``record_errors``.

High watermarks are checkpointed in ``replication-offset-checkpoint`` (Kafka's
file: version 0, a count, then ``topic partition offset`` lines) by
``checkpoint_high_watermarks`` (periodically, and at ``close``).  A replica
opened by ``ensure_partition`` (cluster mode) starts from its checkpointed high
watermark (bounded by its log), not from its log end offset, so records that
were never committed are not served after a restart before the ISR has them.
A single node neither reads nor writes the file: everything appended is committed.
"""
from __future__ import annotations

import asyncio
import logging
import shutil
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import (
    Awaitable, Callable, Container, Generator, Iterable, Iterator, Mapping, NamedTuple, Optional, Protocol)

import kafka.errors as Errors

from broker_sim.config import (
    RACK_AWARE_REPLICA_SELECTOR, RECORD_CHECK_CONFIGS, BrokerConfig, checks_records, readable_stored_topic_configs)
from broker_sim.controller.cluster_state import NO_LEADER, BrokerEndpoint, PartitionState
from broker_sim.controller.metadata import TopicInfo
from broker_sim.errors import error_of
from broker_sim.replication.fetcher import ReplicaFetcherManager
from broker_sim.replication.partition import Partition
from broker_sim.replication.throttle import ReplicationThrottles
from broker_sim.storage.batch import BatchHeader
from broker_sim.storage.checkpoint import read_checkpoint, write_checkpoint
from broker_sim.storage.log_dirs import (LogDirs, copy_pass, finish_copy, future_path, mark_deleted,
                                         parse_log_dirs)
from broker_sim.storage.log import LogConfig, shared_open_segments, storage_descriptors
from broker_sim.storage.segment import OpenSegments
from broker_sim.storage.validator import (
    MoveToThread, RecordInspector, RecordRules, ValidRecords, check_produce_records, costs_a_thread, rules_for,
    validate_records)

log = logging.getLogger(__name__)
# ``create_partitions`` yields to its caller after this much work, so a big CreateTopics can be
# spread over the event loop instead of blocking it (opening a partition costs about a millisecond).
CREATE_SLICE_S = 0.02
DELETE_SUFFIX = "-delete"
HIGH_WATERMARK_CHECKPOINT = "replication-offset-checkpoint"
# Two threads: decompression (zlib, zstd, lz4, snappy) releases the GIL, so two bombs at once
# still leave the loop a core; each holds at most message.max.decompressed.bytes.
# the newest Produce version served: what ``append_records`` assumes when not told
PRODUCE_VERSION = 9
_VALIDATION_THREADS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="record-validation")
# (transactional id, producer id, producer epoch, topic, partition) -> Kafka error code, 0 when it may append
TransactionVerifier = Callable[[str, int, int, str, int], int]


class ProduceResult(NamedTuple):
    """One partition's answer to a produce (Kafka's ``PartitionResponse``): an error code, or where it went.

    ``error_message`` is what the response carries: as Kafka (``LogAppendResult.hasCustomErrorMessage``) only a
    refusal of records by their own rules (KIP-467 record errors) and an unknown magic have one; ``reason`` is
    the broker's own account of any failure, for its log and for closing an acks=0 connection.
    """

    error_code: int
    error_message: str | None = None
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    record_errors: list[tuple[int, str]] = []  # KIP-467: (index in its batch, message); never mutated
    reason: str | None = None


# Kafka's ReplicaManager.appendToLocalLog answers these failures without the log start offset; every other
# failure of an append to a partition it leads carries it (processFailedRecord).
_WITHOUT_LOG_START = (Errors.UnknownTopicOrPartitionError, Errors.NotLeaderForPartitionError,
                      Errors.MessageSizeTooLargeError, Errors.RecordListTooLargeError, Errors.CorruptRecordError,
                      Errors.KafkaStorageError)


class RecordScan(RecordInspector, Protocol):
    """One produce's further check of one partition's records (made by ``ReplicaManager.record_check``): as
    ``validate_records``' inspect it is given each batch's keys or values, pure, on whatever thread validates
    (again for the same batch when the check moves to a thread); then its verdict."""

    def verdict(self) -> None:
        """On the event loop, once every batch was scanned: raises RecordValidationError (INVALID_RECORD with
        per-record errors) or a retriable KafkaError; returns when the records may be appended."""


# (topic, its effective configs) -> the scan of one produce's records to it
RecordCheck = Callable[[str, Mapping[str, str]], RecordScan]


class ReplicaManager:
    def __init__(self, data_dir: Path, config: BrokerConfig, *, broker_id: int,
                 now_ms: Callable[[], int],
                 isr_writer: Callable[[Partition, tuple], Awaitable[Optional[PartitionState]]] | None = None,
                 resolve_broker: Callable[[int], Optional[BrokerEndpoint]] | None = None,
                 topic_exists: Callable[[str], bool] | None = None,
                 inter_broker_client_id: Callable[[str], str] = str,
                 internal_topics: Container[str] = (),
                 verify_transaction: TransactionVerifier | None = None,
                 open_segments: OpenSegments | None = None) -> None:
        self.data_dir = data_dir
        self.config = config
        # one LRU of open segment files for every partition: storage's descriptors stay bounded however many
        # partitions are hosted (by default half of the open-file limit, the other half being the connections')
        self.open_segments = open_segments or shared_open_segments(storage_descriptors())
        # not a dynamic config, so read once rather than on every produce
        self.max_decompressed_bytes = config.get("message.max.decompressed.bytes")
        self.broker_id = broker_id
        self.now_ms = now_ms
        self.isr_writer = isr_writer
        self.topic_exists = topic_exists
        self.internal_topics = internal_topics  # written by their coordinators only, never through Produce
        self.verify_transaction = verify_transaction  # the transaction coordinator's check (set once it exists)
        self.record_check: RecordCheck | None = None  # set by the broker when its schema registry is on
        self._checked_topics: dict[str, dict[str, str]] = {}  # topics whose records record_check checks -> configs
        self.inter_broker_client_id = inter_broker_client_id  # role -> client id proving we are a broker
        self.inter_broker_ssl = None  # SSLContext when inter.broker.listener.name is a TLS listener
        self.inter_broker_sasl = None  # SaslLogin when it is a SASL listener
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.offline: dict[tuple[str, int], str] = {}  # partitions that failed to open -> why
        self.throttles = ReplicationThrottles(config, broker_id)  # KIP-73 quotas, topics' throttled replicas
        self.fetcher = ReplicaFetcherManager(self, broker_id=broker_id, config=config,
                                             resolve_broker=resolve_broker)
        self._checkpointed_hw = self._read_high_watermarks()
        self._replicated = False  # set by ensure_partition: cluster mode, where high watermarks are checkpointed
        # log.dirs (JBOD): where each partition directory is, where a new one goes (storage/log_dirs.py)
        self.log_dirs = LogDirs(parse_log_dirs(config.raw("log.dirs"), data_dir))
        self.moving: dict[tuple[str, int], Path] = {}  # replicas being moved (AlterReplicaLogDirs) -> target dir
        self._move_tasks: set[asyncio.Task] = set()
        for stale in self.log_dirs.stale_deletions():
            log.info("removing %s left by an interrupted topic deletion", stale.name)
            shutil.rmtree(stale, ignore_errors=True)

    def log_config(self, topic: TopicInfo) -> LogConfig:
        """The log settings of ``topic``'s partitions; notes whether its records are checked (``record_check``)."""
        configs = readable_stored_topic_configs(self.config.effective_topic_configs(topic.configs))
        self.throttles.set_topic(topic.name, topic.configs)
        if checks_records(configs):
            self._checked_topics[topic.name] = configs
        else:
            self._checked_topics.pop(topic.name, None)
        return LogConfig.from_topic_configs(configs)

    @property
    def resolve_broker(self) -> Callable[[int], Optional[BrokerEndpoint]] | None:
        return self.fetcher.resolve_broker

    @resolve_broker.setter
    def resolve_broker(self, resolve: Callable[[int], Optional[BrokerEndpoint]] | None) -> None:
        self.fetcher.resolve_broker = resolve

    async def _write_isr(self, partition: Partition, new_isr: tuple) -> PartitionState | None:
        """The partitions' ISR writer: whatever ``isr_writer`` is now (tests and the glue may set it late)."""
        if self.isr_writer is None:
            return PartitionState(self.broker_id, partition.leader_epoch, tuple(new_isr), -1,
                                  partition.zk_version + 1)
        return await self.isr_writer(partition, tuple(new_isr))

    def _construct(self, topic: TopicInfo, index: int, config) -> Partition:
        directory = self.log_dirs.path(topic.name, index)
        partition = Partition(topic.name, index, directory, config, broker_id=self.broker_id,
                              now_ms=self.now_ms, isr_writer=self._write_isr, open_segments=self.open_segments)
        if partition.log.recovered_bytes_truncated:
            log.warning("%s: recovery truncated %d bytes of a torn or corrupt tail",
                        partition, partition.log.recovered_bytes_truncated)
        return partition

    def _open(self, topic: TopicInfo, index: int, config) -> Partition:
        partition = self._construct(topic, index, config)
        self.partitions[(topic.name, index)] = partition
        return partition

    def open_topic(self, topic: TopicInfo, first_partition: int = 0) -> None:
        """Open the partitions of a known topic (at start); one that cannot be opened is logged and skipped.

        A skipped partition answers KAFKA_STORAGE_ERROR (``get``) while the rest are served, as
        Kafka does with a failed log directory.
        """
        config = self.log_config(topic)
        for index in range(first_partition, topic.partitions):
            try:
                self._open(topic, index, config)
            except Exception as exc:  # a corrupt or unreadable directory must not keep the others offline
                log.error("cannot open %s: %s; serving the other partitions", self.log_dirs.path(topic.name, index),
                          exc, exc_info=not isinstance(exc, (OSError, Errors.KafkaError)))
                self.offline[(topic.name, index)] = str(exc)

    def create_partitions(self, topic: TopicInfo, first: int, count: int) -> Generator[None, None, list[Partition]]:
        """Create directories and open partitions ``first``..``count - 1`` of ``topic``, unpublished.

        A generator: it yields after every ``CREATE_SLICE_S`` of work (see ``create_topic`` in the
        broker) and returns the partitions, which ``publish`` makes visible.  On any failure, or
        when closed early, what it created is closed and removed again, and the error raised.
        """
        config = self.log_config(topic)
        created: list[Partition] = []
        sliced = time.monotonic()
        try:
            for index in range(first, count):
                stale = self.log_dirs.path(topic.name, index)
                if stale.exists():  # no known partition: left by a deletion or creation cut short by a crash
                    log.warning("removing %s, left by an earlier topic of that name", stale)
                    self._delete_directory(stale)
                created.append(self._construct(topic, index, config))
                if time.monotonic() - sliced > CREATE_SLICE_S:
                    yield
                    sliced = time.monotonic()
        except BaseException:
            self.discard(created, topic.name, first, count)
            raise
        return created

    def publish(self, created: list[Partition]) -> None:
        for partition in created:
            self.partitions[(partition.topic, partition.index)] = partition

    def discard(self, created: list[Partition], topic: str, first: int, count: int) -> None:
        """Undo ``create_partitions``: close what it opened, remove directories ``first``..``count - 1``."""
        for partition in created:
            try:
                partition.close()
            except Exception:  # removing the directories matters more than closing cleanly
                log.exception("closing %s failed", partition)
        for index in range(first, count):
            try:
                self._delete_partition_directory(topic, index)
            except OSError as exc:
                log.error("cannot remove %s of a topic whose creation failed: %s",
                          self.log_dirs.path(topic, index), exc)

    def ensure_partition(self, topic: TopicInfo, index: int) -> Partition:
        """The replica of ``topic-index`` here, opened (directory created, log recovered) if it is not yet.

        A replica opened here (cluster mode) leads nothing until ``become_leader``
        or ``become_follower`` applies the controller's decision: it starts as a
        follower of no leader, so nothing is produced to it in between.
        """
        partition = self.partitions.get((topic.name, index))
        if partition is None:
            partition = self._open(topic, index, self.log_config(topic))
            partition.make_follower(PartitionState(NO_LEADER, partition.leader_epoch, (), -1), [])
            self._replicated = True
            checkpointed = self._checkpointed_hw.get((topic.name, index), 0)
            partition.high_watermark = max(min(checkpointed, partition.log_end_offset), partition.log_start_offset)
        return partition

    def _read_high_watermarks(self) -> dict[tuple[str, int], int]:
        path = self.data_dir / HIGH_WATERMARK_CHECKPOINT
        try:
            entries = read_checkpoint(path, 0) or []
            found = {}
            for line in entries:
                topic, index, offset = line.split()
                found[(topic, int(index))] = int(offset)
            return found
        except (ValueError, OSError) as exc:  # derived data: a bad file costs only re-replication of the HW
            log.warning("%s: unreadable high watermark checkpoint (%s); starting from log start offsets", path, exc)
            return {}

    def checkpoint_high_watermarks(self) -> None:
        """Write every hosted partition's high watermark to ``replication-offset-checkpoint`` (atomically)."""
        entries = [f"{topic} {index} {partition.high_watermark}"
                   for (topic, index), partition in sorted(self.partitions.items()) if not partition.log.closed]
        write_checkpoint(self.data_dir / HIGH_WATERMARK_CHECKPOINT, 0, entries)

    def reconfigure(self, topic: TopicInfo) -> None:
        config = self.log_config(topic)
        for index in range(topic.partitions):
            partition = self.partitions.get((topic.name, index))
            if partition is not None:
                partition.log.config = config

    def get(self, topic: str, index: int) -> Partition:
        """The replica of ``topic-index`` here, leader or follower.

        Raises NotLeaderOrFollowerError when the topic exists (``topic_exists``)
        but this broker hosts no replica of the partition, else
        UnknownTopicOrPartitionError.
        """
        partition = self.partitions.get((topic, index))
        if partition is None:
            if (topic, index) in self.offline:
                raise Errors.KafkaStorageError(f"{topic}-{index} is offline: {self.offline[(topic, index)]}")
            if self.topic_exists is not None and self.topic_exists(topic):
                raise Errors.NotLeaderForPartitionError(
                    f"broker {self.broker_id} hosts no replica of {topic}-{index}")
            raise Errors.UnknownTopicOrPartitionError(f"this broker hosts no partition {topic}-{index}")
        return partition

    def get_leader(self, topic: str, index: int) -> Partition:
        """``get``, refusing a follower replica with NotLeaderOrFollowerError naming the leader."""
        partition = self.get(topic, index)
        partition._check_leader()
        return partition

    # -- consumers reading from followers (KIP-392) ---------------------------------------

    def preferred_read_replica(self, partition: Partition, client_rack: str, fetch_offset: int) -> int:
        """The replica a consumer in ``client_rack`` fetching ``fetch_offset`` should read from, -1 for this
        leader (or no replica.selector.class); see ``replica_selector``."""
        if (not client_rack or not partition.is_leader
                or self.config.get("replica.selector.class") != RACK_AWARE_REPLICA_SELECTOR):
            return -1
        from broker_sim.replication.replica_selector import ReplicaView, select_rack_aware  # KIP-392 only

        leader = ReplicaView(self.broker_id, self.config.get("broker.rack") or None, partition.log_end_offset, 0)
        followers = []
        for broker, log_end_offset, since_ms in partition.in_sync_followers(self.now_ms()):
            endpoint = self.resolve_broker(broker) if self.resolve_broker is not None else None
            if endpoint is not None and log_end_offset >= fetch_offset:
                followers.append(ReplicaView(broker, endpoint.rack, log_end_offset, since_ms))
        chosen = select_rack_aware(client_rack, leader, followers)
        return -1 if chosen == self.broker_id else chosen

    # -- produce (the one owner of a Produce request's appends) ------------------------

    async def append_records(self, entries: Iterable[tuple[str, int, bytes | None]], *, required_acks: int,
                             timeout_ms: int, transactional_id: str | None = None,
                             version: int = PRODUCE_VERSION, slices=None) -> list[ProduceResult]:
        """Append each (topic, partition, records) of an authorized Produce request; one result per entry, in order.
        ``slices`` (the request's ``server.request_slicing.Slices``): the loop yields when it says so.

        See the module docstring for the rules; every failure is a result, nothing raises.
        """
        results = []
        waits = []  # (position in results, partition, offset to reach, min ISR) for acks=-1
        for topic, index, records in entries:
            result, wait = await self._append_to_leader(topic, index, records, required_acks, transactional_id,
                                                        version)
            if wait is not None:
                waits.append((len(results), *wait))
            results.append(result)
            if slices is not None and slices.due():  # a request naming thousands of partitions lets others in
                await asyncio.sleep(0)
        if waits:
            await self._await_replication(results, waits, timeout_ms)
        return results

    async def _append_to_leader(self, topic: str, index: int, records, acks: int, transactional_id: str | None,
                                version: int) -> tuple[ProduceResult, tuple | None]:
        """(the partition's result, (partition, offset to reach, min ISR) when acks=-1 must wait, else None)."""
        try:
            partition = self.get_leader(topic, index)
            checked = check_produce_records(records or b"", version)  # KafkaApis' reading of the records
        except Exception as exc:
            return _failed(topic, index, exc), None
        if acks not in (-1, 0, 1):
            return ProduceResult(Errors.InvalidRequiredAcksError.errno,
                                 reason=f"acks={acks} is not one of -1, 0, 1"), None
        if topic in self.internal_topics:  # only their coordinators append, not through Produce (as Kafka)
            return ProduceResult(Errors.InvalidTopicError.errno, log_start_offset=partition.log.log_start_offset,
                                 reason=f"Cannot append to internal topic {topic}"), None
        try:
            records = checked.records
            rules = rules_for(partition.log.config, self.max_decompressed_bytes, partition.now_ms())
            scan = self._record_scan(topic)
            valid = _validate_inline(records, rules, scan, checked.batches)
            if not isinstance(valid, ValidRecords):  # too costly for the event loop: on a thread, then back here
                valid = await asyncio.get_running_loop().run_in_executor(
                    _VALIDATION_THREADS, partial(validate_records, records, rules, valid, inspect=scan))
            if scan is not None:
                scan.verdict()
            first = valid.batches[0]
            if transactional_id is not None and first.is_transactional and self.verify_transaction is not None:
                error = self.verify_transaction(transactional_id, first.producer_id, first.producer_epoch, topic,
                                                index)
                if error:
                    return ProduceResult(error, log_start_offset=partition.log.log_start_offset, reason=(
                        f"{topic}-{index} is not part of the ongoing transaction of {transactional_id!r} "
                        f"(producer {first.producer_id} epoch {first.producer_epoch})")), None
            appended = partition.append_records(valid.records, batches=valid.batches, required_acks=acks)
        except Exception as exc:
            return _failed(topic, index, exc, partition.log.log_start_offset), None
        result = ProduceResult(0, None, appended.base_offset, appended.log_append_time, appended.log_start_offset)
        if acks == -1:
            return result, (partition, appended.last_offset + 1, partition.log.config.min_insync_replicas)
        return result, None

    def _record_scan(self, topic: str) -> RecordScan | None:
        """The further check of a produce to ``topic``, None for a topic without one (nearly all: nothing else
        is paid).  A checked topic on a broker that has no check (no schema registry) refuses every record."""
        configs = self._checked_topics.get(topic)
        if configs is None:
            return None
        if self.record_check is None:
            on = ", ".join(f"{name}={configs[name]}" for name in RECORD_CHECK_CONFIGS)
            raise Errors.InvalidRecordError(
                f"{topic} has {on}, but this broker checks no records: schema.registry.listeners is not set")
        return self.record_check(topic, configs)

    @staticmethod
    async def _await_replication(results: list[ProduceResult], waits: list[tuple], timeout_ms: int) -> None:
        """acks=-1: wait for the high watermarks of all appended partitions at once; errors replace the results."""
        timeout_s = max(timeout_ms, 0) / 1000.0
        pending = {}
        for position, partition, offset, min_isr in waits:
            if partition.high_watermark >= offset and partition.is_leader and len(partition.isr) >= min_isr:
                continue  # already committed (always so on a single node): no task, no wait
            task = asyncio.ensure_future(partition.wait_for_high_watermark(offset, timeout_s, min_isr=min_isr))
            pending[task] = (position, partition)
        if not pending:
            return
        await asyncio.wait(list(pending))
        for task, (position, partition) in pending.items():
            exc = task.exception()
            if exc is not None:
                code, message = error_of(exc)
                log.debug("acks=all produce to %s failed: %s", partition, message)
                results[position] = ProduceResult(code, reason=message)

    def topic_partitions(self, topic: str) -> Iterator[Partition]:
        """The replicas of ``topic`` hosted here, by index (all of them on a single node)."""
        for key in sorted(key for key in self.partitions if key[0] == topic):
            yield self.partitions[key]

    # -- leadership (the controller's decisions, applied by the broker's glue) -----------

    def become_leader(self, topic: str, index: int, state: PartitionState, replicas: list[int]) -> bool:
        """Lead ``topic-index`` at ``state.leader_epoch`` (stops fetching it); see ``Partition.make_leader``."""
        partition = self.get(topic, index)
        self.fetcher.remove_partitions([(topic, index)])
        changed = partition.make_leader(state, replicas)
        if changed:
            log.info("%s: leader at epoch %d, ISR %s, replicas %s", partition, state.leader_epoch,
                     list(state.isr), list(replicas))
        return changed

    def become_follower(self, topic: str, index: int, state: PartitionState, replicas: list[int]) -> bool:
        """Follow ``state.leader``; (re)start fetching from it, truncating first, when leader or epoch changed.

        With no leader (NO_LEADER) the replica stops fetching and waits.
        Must run on the event loop (it starts fetch tasks).
        """
        partition = self.get(topic, index)
        changed = partition.make_follower(state, replicas)
        key = (topic, index)
        if state.leader == NO_LEADER or state.leader == self.broker_id:
            self.fetcher.remove_partitions([key])
        elif changed or self.fetcher.leader_of(key) != state.leader:
            log.info("%s: following broker %d at epoch %d (LEO %d, HW %d)", partition, state.leader,
                     state.leader_epoch, partition.log_end_offset, partition.high_watermark)
            self.fetcher.add_partition(topic, index, state.leader, state.leader_epoch)
        return changed

    def remove_partition(self, topic: str, index: int, delete: bool) -> None:
        """Stop hosting ``topic-index``: stop fetching it, close it, and delete its directory when ``delete``."""
        key = (topic, index)
        self.fetcher.remove_partitions([key])
        partition = self.partitions.pop(key, None)
        if partition is not None:
            partition.close()
        if delete:
            self._delete_partition_directory(topic, index)

    def check_isr(self, now_ms: int | None = None) -> int:
        """Shrink the ISR of led partitions whose followers lag (replica.lag.time.max.ms); returns requests made.

        Call periodically on the event loop (Kafka checks every half lag time).
        """
        now = self.now_ms() if now_ms is None else now_ms
        lag_ms = self.config.get("replica.lag.time.max.ms")
        return sum(1 for partition in list(self.partitions.values())
                   if partition.is_leader and len(partition.isr) > 1 and partition.maybe_shrink_isr(now, lag_ms))

    def delete_topic(self, topic: TopicInfo) -> Generator[None, None, None]:
        """Close and remove every partition of ``topic``; a generator yielding every ``CREATE_SLICE_S``, as
        ``create_partitions`` (a big topic takes seconds).  Raises OSError when a directory cannot be removed."""
        sliced = time.monotonic()
        for index in range(topic.partitions):
            self.offline.pop((topic.name, index), None)
            partition = self.partitions.pop((topic.name, index), None)
            if partition is not None:
                partition.close()
            self.fetcher.remove_partitions([(topic.name, index)])
            self._delete_partition_directory(topic.name, index)
            if time.monotonic() - sliced > CREATE_SLICE_S:
                yield
                sliced = time.monotonic()

    # -- log dirs (JBOD): AlterReplicaLogDirs ---------------------------------------------------------------

    def alter_log_dir(self, topic: str, index: int, target: Path) -> None:
        """Move the replica of ``topic-index`` into log dir ``target`` (one of ``log_dirs.dirs``), in the background.

        Raises ReplicaNotAvailableError when it is not hosted here, KafkaStorageError when it is offline.  A
        replica already moving goes to the latest target asked for."""
        key = (topic, index)
        if key in self.offline:
            raise Errors.KafkaStorageError(f"{topic}-{index} is offline: {self.offline[key]}")
        if key not in self.partitions:
            raise Errors.ReplicaNotAvailableError(f"{topic}-{index} has no replica on broker {self.broker_id}")
        if key not in self.moving and self.log_dirs.located.get(key) == target:
            return
        already = key in self.moving
        self.moving[key] = target
        if not already:
            task = asyncio.get_running_loop().create_task(self._move(key))
            self._move_tasks.add(task)
            task.add_done_callback(self._move_tasks.discard)

    async def _move(self, key: tuple[str, int]) -> None:
        """Kafka's future-log move (see ``storage/log_dirs.py``): copy off the loop while the replica serves,
        then, on the loop, bring the copy up to date, rename it, reopen the replica there, remove the old one."""
        try:
            while (target := self.moving.get(key)) is not None and self.log_dirs.located.get(key) != target:
                partition = self.partitions.get(key)
                if partition is None:
                    return
                source = partition.log.directory
                future = future_path(target, source.name)
                try:
                    for _ in range(2):  # the second pass copies only what changed during the first
                        await asyncio.to_thread(copy_pass, source, future, self.throttles.pace_copy)
                    partition = self.partitions.get(key)
                    if partition is None or partition.log.closed or partition.log.directory != source:
                        shutil.rmtree(future, ignore_errors=True)
                        return
                    partition.producers.take_snapshot(partition.log_end_offset)
                    copied = finish_copy(source, future, target / source.name)
                    try:
                        partition.relocate(target / source.name)
                    except BaseException:
                        self._delete_directory(target / source.name)  # still served from the source
                        raise
                    self.log_dirs.located[key] = target
                    if (marked := mark_deleted(source)) is not None:  # renamed on the loop, removed off it
                        await asyncio.to_thread(shutil.rmtree, marked, True)
                    log.info("moved %s from %s to %s (%d bytes copied on the event loop)",
                             partition, source.parent, target, copied)
                except Exception:
                    log.exception("moving %s-%d to %s failed; it stays in %s", *key, target, source.parent)
                    shutil.rmtree(future, ignore_errors=True)
                    return
        finally:
            self.moving.pop(key, None)

    def describe_log_dirs(self, wanted: set[tuple[str, int]] | None) -> dict[Path, list[tuple[str, int, int, int]]]:
        """Per log dir, (topic, index, size in bytes, offset lag) of its partitions (``wanted`` ones, or all):
        Kafka's lag of the current log, max(high watermark - log end offset, 0)."""
        found: dict[Path, list[tuple[str, int, int, int]]] = {directory: [] for directory in self.log_dirs.dirs}
        for key, partition in sorted(self.partitions.items()):
            if wanted is not None and key not in wanted:
                continue
            directory = self.log_dirs.located.get(key)
            if directory is None or partition.log.closed:
                continue
            lag = max(partition.high_watermark - partition.log_end_offset, 0)
            found.setdefault(directory, []).append((*key, partition.log.size_in_bytes, lag))
        return found

    def _delete_partition_directory(self, topic: str, index: int) -> None:
        if (topic, index) in self.log_dirs.located:
            self._delete_directory(self.log_dirs.path(topic, index))
            self.log_dirs.forget(topic, index)

    @staticmethod
    def _delete_directory(directory: Path) -> None:
        if directory.exists():
            marked = directory.with_name(f"{directory.name}.{uuid.uuid4().hex}{DELETE_SUFFIX}")
            directory.rename(marked)
            shutil.rmtree(marked, ignore_errors=True)

    def enforce_retention(self) -> int:
        expiration_ms = self.config.get("producer.id.expiration.ms")
        return sum(p.enforce_retention(expiration_ms) for p in list(self.partitions.values()))

    async def clean_logs(self) -> None:
        """One log-cleaner pass over the partitions whose cleanup.policy contains compact; logs each clean."""
        for partition in list(self.partitions.values()):
            if not partition.log.config.compact or partition.log.closed:
                continue
            try:
                result = await partition.clean()
            except Exception:  # one partition's failure must not stop the others being cleaned
                log.exception("cleaning %s failed", partition)
                continue
            if result is not None:
                log.info("cleaned %s offsets %d..%d: %d -> %d bytes, %d records removed, %d -> %d segments",
                         partition, result.first_dirty_offset, result.end_offset, result.bytes_before,
                         result.bytes_after, result.records_removed, result.segments_before, result.segments_after)

    def maybe_roll(self) -> None:
        for partition in list(self.partitions.values()):
            partition.log.maybe_roll()

    def flush(self) -> None:
        for partition in list(self.partitions.values()):
            partition.log.flush()

    async def stop_fetchers(self) -> None:
        """Stop the replica fetchers and wait until their tasks ended (before ``close``)."""
        await self.fetcher.shutdown_and_wait()

    def close(self) -> None:
        """Stop the fetchers (their tasks are cancelled), checkpoint high watermarks, close every partition."""
        self.fetcher.shutdown()
        try:
            if self._replicated:
                self.checkpoint_high_watermarks()
        except OSError:
            log.exception("writing the high watermark checkpoint failed")
        for partition in self.partitions.values():
            try:
                partition.close()
            except Exception:  # one bad partition must not stop the others from closing cleanly
                log.exception("closing %s failed", partition)
        self.partitions.clear()


def _failed(topic: str, index: int, exc: Exception, log_start_offset: int = -1) -> ProduceResult:
    """A partition's failed append as Kafka answers it: the error message only where Kafka has its own
    (``shown``: record errors, an unknown magic), the log start offset unless Kafka leaves it out."""
    code, message = error_of(exc)
    log.debug("produce to %s-%d failed: %s", topic, index, message)
    shown = exc.args[0] if getattr(exc, "shown", False) and exc.args else None
    if isinstance(exc, _WITHOUT_LOG_START):
        log_start_offset = -1
    return ProduceResult(code, shown, log_start_offset=log_start_offset,
                         record_errors=getattr(exc, "record_errors", []), reason=message)


def _validate_inline(records, rules: RecordRules, inspect: RecordScan | None, batches: list[BatchHeader]
                     ) -> ValidRecords | list[BatchHeader]:
    """The log's record rules (Kafka's LogValidator) applied to a client's records on the event loop when that
    is cheap; else the batch headers to hand ``validate_records`` on a thread with them, so no request holds the
    event loop for more than ~1 ms."""
    if costs_a_thread(records):
        return batches
    try:
        return validate_records(records, rules, batches, inline=True, inspect=inspect)
    except MoveToThread:
        return batches
