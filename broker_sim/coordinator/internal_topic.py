"""The internal topic a coordinator keeps its state in: which keys it owns, how it appends, how it replays.

Theory of operation: a coordinator keeps its state in a compacted internal
topic (``__consumer_offsets``, ``__transaction_state``).  A key (group id,
transactional id) belongs to partition ``partition_for(key, partitions)``,
Kafka's ``abs(java hashCode(key)) % partitions``, and this broker coordinates
the keys of the partitions it leads and has loaded.  The coordinators are
I/O-free: their topic is an ``InternalTopic`` they are handed (the broker's
``broker_topic.BrokerInternalTopic``, or a test's partitions).

``InternalTopicOwner`` is what both coordinators do with it, written once:
ownership (``partition_of``, ``is_coordinator``); loading the partitions this
broker leads (``startup``, ``ensure_topic``; a coordinator supplies
``default_partitions`` and ``load_partition``, which replays with
``read_partition_batches``); and ``append``: one batch to a key's partition,
synchronously, before the coordinator changes its state and answers, a
failure turned into the error code its APIs answer (``APPEND_ERRORS``,
Kafka's tables).  Every append is remembered (``take_appended``: partition ->
its log end offset after the append) so that the asyncio shell answers only
once the ISR has it (``isr_wait``).
"""
from __future__ import annotations

import logging
from typing import Callable, Iterator, Protocol

import kafka.errors as Errors

from broker_sim.coordinator.records import build_batch, iter_batches
from broker_sim.storage.batch import parse_batches

log = logging.getLogger(__name__)

NONE = 0
UNKNOWN_SERVER_ERROR = Errors.UnknownError.errno
READ_CHUNK_BYTES = 1 << 20


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode``: ``h = 31*h + c`` over UTF-16 code units, in signed 32-bit arithmetic."""
    data = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(key: str, partitions: int) -> int:
    """Kafka's ``partitionFor``: ``Utils.abs(key.hashCode) % partitions`` (abs(MIN_VALUE) is 0)."""
    h = java_string_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


class InternalTopic(Protocol):
    """Where a coordinator's internal topic lives (the broker, or a test's partitions).

    ``replicated`` (optional, False when missing): the topic lives on a cluster.
    """

    def exists(self) -> bool: ...

    def partition_count(self) -> int: ...

    def create(self) -> None: ...

    def partition(self, index: int): ...

    def led_partitions(self) -> list[int]: ...


class InternalTopicOwner:
    TOPIC: str  # the internal topic's name, for the logs
    APPEND_ERRORS: dict[int, int]  # an append's error -> what the coordinator's APIs answer

    def __init__(self, topic: InternalTopic, clock: Callable[[], int]) -> None:
        self.topic = topic
        self.clock = clock
        self.loaded: set[int] = set()
        self._appended: dict[object, int] = {}

    @property
    def default_partitions(self) -> int:
        raise NotImplementedError

    def load_partition(self, partition) -> int:
        raise NotImplementedError

    def partition_of(self, key: str) -> int:
        count = self.topic.partition_count() if self.topic.exists() else self.default_partitions
        return partition_for(key, count)

    def is_coordinator(self, key: str) -> bool:
        if not self.topic.exists():
            # a single node coordinates every key and creates the topic on first use; in a cluster the
            # leaders of the topic's partitions coordinate, so no broker does before it exists
            return not getattr(self.topic, "replicated", False)
        return self.partition_of(key) in self.loaded

    def startup(self) -> None:
        """Load the partitions of an existing internal topic that this broker leads."""
        if self.topic.exists():
            self._load_led_partitions()

    def ensure_topic(self) -> None:
        """Create the internal topic on first use; load led partitions not loaded yet.

        The second part covers a topic that appeared without the coordinator (an auto-created topic).
        """
        if not self.topic.exists():
            self.topic.create()
            self.loaded.update(self.topic.led_partitions())  # new partitions are empty
        self._load_led_partitions()

    def _load_led_partitions(self) -> None:
        for index in self.topic.led_partitions():
            if index not in self.loaded:
                self.load_partition(self.topic.partition(index))

    def append(self, key: str, records: list[tuple[bytes, bytes | None]], *,
               producer: tuple[int, int] | None = None, errors: dict[int, int] | None = None) -> int:
        """Append ``records`` to ``key``'s partition as one batch; NONE or the error code to answer.

        ``producer`` (id, epoch): the records are part of that producer's transaction. ``errors``: how the
        request this append serves answers an append error (default: ``APPEND_ERRORS``).
        """
        try:
            if not self.topic.exists():
                self.ensure_topic()
            partition = self.topic.partition(self.partition_of(key))
            partition.append_records(build_batch(records, self.clock(), producer=producer),
                                     from_coordinator=producer is not None)
        except Errors.KafkaError as exc:
            code = getattr(exc, "errno", None)
            log.warning("appending to %s for %r failed: %r", self.TOPIC, key, exc)
            table = self.APPEND_ERRORS if errors is None else errors
            return table.get(code, code if code is not None else UNKNOWN_SERVER_ERROR)
        except Exception:
            log.exception("appending to %s for %r failed", self.TOPIC, key)
            return UNKNOWN_SERVER_ERROR
        self._appended[partition] = partition.log_end_offset
        return NONE

    def take_appended(self) -> dict[object, int]:
        """Partition -> its log end offset after this coordinator's latest append there, since the last take."""
        appended, self._appended = self._appended, {}
        return appended

    def take_awaited(self, key: object = None) -> dict[object, int]:
        """What an answer about ``key`` waits for: ``take_appended()``, plus the key's partition up to its log end
        when this coordinator has it loaded (the answer may come from state an unreplicated append made)."""
        appended = self.take_appended()
        if isinstance(key, str) and self.topic.exists():
            index = self.partition_of(key)
            if index in self.loaded:
                partition = self.topic.partition(index)
                appended[partition] = max(appended.get(partition, 0), partition.log_end_offset)
        return appended


def read_partition_batches(partition) -> Iterator[tuple[object, list]]:
    """``(batch, records)`` of every batch of ``partition`` up to its log end, in offset order.

    Up to the log end, not the high watermark, as Kafka's coordinators load: a
    newly elected leader's high watermark can lag what its ISR already
    committed (followers learn it one fetch late), and the leader's log is what
    stays.  ``batch`` is kafka-python's ``DefaultRecordBatch`` (control and
    transactional flags, producer id), ``records`` its records at or after the
    log start offset.  A batch whose records cannot be read (lying lengths or
    counts, a codec that fails: bytes that reached the log before appends were
    validated) is logged with its offset and skipped, so a start never fails on it.
    """
    offset = partition.log_start_offset
    end = partition.log_end_offset
    while offset < end:
        data = partition.log.read_bytes(offset, READ_CHUNK_BYTES, max_offset=end)
        if not data:
            return
        for batch in iter_batches(data):
            try:
                # the first batch may start before ``offset``
                records = [record for record in batch if record.offset >= offset]
            except Exception as exc:  # kafka-python raises many kinds for a corrupt batch
                log.warning("%s-%d: skipping the unreadable batch at offset %d: %r", partition.topic,
                            partition.index, batch.base_offset, exc)
                continue
            yield batch, records
        offset = parse_batches(data, verify_crc=False)[-1].next_offset


def read_partition(partition) -> Iterator[tuple[int, bytes, bytes | None]]:
    """``(offset, key, value)`` of every data record of ``partition`` up to its log end, in offset order."""
    for batch, records in read_partition_batches(partition):
        if not batch.is_control_batch:
            for record in records:
                yield record.offset, record.key, record.value
