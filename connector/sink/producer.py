"""Executor side: turn Arrow RecordBatches into Kafka record batches and produce them, idempotently or in a transaction.

Theory of operation: a ``TaskProducer`` writes one Spark task's rows. It first
gets a producer id with InitProducerId — without a transactional id for
``at_least_once`` (an idempotent producer), with the task's transactional id
for ``exactly_once`` (which also fences and aborts any earlier holder of the
same id); ``start_init`` runs it (and the task's sink log entry) in a thread on
connections of its own while the first rows are encoded, and the first send
waits for it and stamps the producer id, epoch and CRC of the batches encoded
meanwhile. ``write`` maps each Arrow batch's rows to (topic, partition) —
explicit ``partition``, else ``connector.sink.partitioner`` — and appends them to
one aiokafka compiled ``DefaultRecordBatchBuilder`` per partition (RecordBatch
v2 with the producer id, epoch and the partition's next sequence number; CRC32C
in C). Without headers, the C extension ``_arrow_batches``
writes the same batches straight from the Arrow buffers, one call per
partition (``_encode_rows``), with no Python object per row; with
``kafka.compression.type`` each batch's records section is then compressed
whole, at Kafka's producer defaults (``_codec``: gzip 6, LZ4's fast compressor,
zstd 3), and the header's length and codec bits are rewritten (``_compress``):
one codec call per batch. The per-record path builds uncompressed batches and
compresses them the same way, so both write the same bytes. Full batches wait in a queue; when the queued bytes reach
``kafka.max.request.size`` they go out as Produce requests (acks=all) of at
most one batch per partition, to each partition's leader, without waiting for
the answers: up to ``MAX_IN_FLIGHT`` (5, Kafka's ceiling for idempotence)
requests per broker are in flight while the task encodes its next rows, and
the broker answers a connection's requests in order, so a partition's batches
land in sequence order. ``flush`` waits for every answer. In a transaction,
partitions are added with AddPartitionsToTxn before their first batch is sent.

A failed send is retried with the same bytes (same sequence numbers, so the
broker's idempotence drops a duplicate) until ``kafka.delivery.timeout.ms``:
the requests still in flight are drained first, and every batch not
acknowledged (the failed ones, and their partitions' later batches, which the
broker refused as OUT_OF_ORDER_SEQUENCE_NUMBER) is sent again in its order, one
request at a time;
the producer never commits: ``exactly_once`` leaves its transaction open for
the driver (``connector.sink.commit``), ``at_least_once`` data is visible once
acknowledged.
"""
from __future__ import annotations

import functools
import logging
import struct
import threading
import time
from collections import defaultdict, deque

from crc32c import crc32c

from connector.error_codes import error_name, refused, retriable
from connector.options import SinkOptions
from connector.sink.brokers import NOT_COORDINATOR, RETRY_BACKOFF_S, SinkCluster, SinkError
from connector.sink.partitioner import DefaultPartitioner
from connector.wire import BrokerUnavailable

log = logging.getLogger(__name__)

_DUPLICATE_SEQUENCE = 46  # the broker already has this batch: an earlier send succeeded after all
_FENCED = {47, 90}        # INVALID_PRODUCER_EPOCH, PRODUCER_FENCED
_OUT_OF_ORDER_SEQUENCE = 45
# Produce requests awaiting their answer, per broker: Kafka's ceiling for an idempotent producer
# (max.in.flight.requests.per.connection <= 5), within which the broker's duplicate check covers a resend.
MAX_IN_FLIGHT = 5


INVALID_PRODUCER_ID_MAPPING = 49
_CRC = struct.Struct(">I")
_IDS = struct.Struct(">qh")   # a v2 record batch's producer id (offset 43) and epoch (51)
_LENGTH = struct.Struct(">i")       # a v2 record batch's length (offset 8): the bytes after it
_ATTRIBUTES = struct.Struct(">h")   # its attributes (offset 21): the codec in bits 0-2
_BATCH_HEADER = 61                  # a v2 record batch's header; its records follow

try:
    from connector.sink import _arrow_batches
except ImportError:  # built without a compiler: aiokafka's builder, one record at a time
    _arrow_batches = None


class TaskProducer:
    """Writes one task's rows; ``counts`` holds records written per (topic, partition)."""

    def __init__(self, options: SinkOptions, transactional_id: str | None = None,
                 cluster: SinkCluster | None = None) -> None:
        self.options = options
        self.transactional_id = transactional_id
        self.cluster = cluster or SinkCluster(options, "pylog-sink-task")
        self.producer_id = -1
        self.epoch = -1
        self.counts: dict[tuple[str, int], int] = defaultdict(int)
        self._partitioner = DefaultPartitioner()
        self._sequences: dict[tuple[str, int], int] = defaultdict(int)
        self._builders: dict[tuple[str, int], object] = {}
        self._builder_counts: dict[tuple[str, int], int] = {}
        self._ready: list[tuple[tuple[str, int], bytes]] = []
        self._ready_bytes = 0
        self._in_txn: set[tuple[str, int]] = set()
        self._in_flight: dict[int, deque] = {}   # node id -> (handle, {tp: (send index, bytes)}), oldest first
        self._retry: list[tuple[int, tuple[str, int], bytes]] = []   # (send index, tp, bytes) to send again
        self._sent = 0
        self._why = ""
        self._setup = None   # a SetupThread while InitProducerId (and the task's setup) run beside the encoding

    def deadline(self) -> float:
        return time.monotonic() + self.options.delivery_timeout_ms / 1000

    # -- producer id -----------------------------------------------------------------------------------------------

    def init(self) -> None:
        """InitProducerId: an idempotent producer id, or the transactional id's (fencing its previous owner)."""
        self.producer_id, self.epoch = init_producer_id(self.cluster, self.transactional_id,
                                                        self.options.transaction_timeout_ms, self.deadline())

    def start_init(self, then=None) -> None:
        """``init`` in a thread of its own, on connections of its own, while the task encodes its first rows; then
        ``then(cluster, producer_id, epoch)`` in that thread (the sink log's open entry). Nothing is sent before
        both are done: the batches encoded meanwhile get their producer id, epoch and CRC when the first are
        sent (``_finish_init``)."""
        self._setup = _SetupThread(self.options, self.transactional_id, then)
        self._setup.start()

    def _finish_init(self) -> None:
        """Wait for ``start_init``'s thread (raising what it raised) and stamp the batches encoded meanwhile."""
        setup, self._setup = self._setup, None
        setup.join()
        try:
            if setup.error is not None:
                raise setup.error
            self.producer_id, self.epoch = setup.producer_id, setup.epoch
            if self.transactional_id is not None:
                self.cluster.learn_coordinator(setup.cluster, self.transactional_id)
            setup.cluster.release()   # its requests were answered
        finally:
            setup.cluster.close()
        for _, data in self._ready:
            self._stamp(data)

    def _stamp(self, data: bytearray) -> None:
        """Write the producer id, epoch and CRC into a record batch encoded before they were known."""
        _IDS.pack_into(data, 43, self.producer_id, self.epoch)
        _CRC.pack_into(data, 17, crc32c(memoryview(data)[21:]))

    # -- rows ------------------------------------------------------------------------------------------------------

    def write(self, batch, topic_option: str | None) -> int:
        """Append one Arrow RecordBatch's rows (sink schema: value, optional key/headers/topic/partition)."""
        try:
            return self._write(batch, topic_option)
        except SinkError:
            if self._setup is not None:
                self._finish_init()   # the setup's failure (InitProducerId, the sink log) is the one to report
            raise

    def _write(self, batch, topic_option: str | None) -> int:
        import pyarrow.compute as pc

        n = batch.num_rows
        if n == 0:
            return 0
        names = batch.schema.names
        keys_array = batch.column(names.index("key")) if "key" in names else None
        compiled = None
        if _arrow_batches is not None and "headers" not in names:
            compiled = _column_buffers(keys_array), _column_buffers(batch.column(names.index("value")))
            if compiled[1] is None or (keys_array is not None and compiled[0] is None):
                compiled = None
        keys = values = headers = None
        if compiled is None:
            if self._setup is not None:
                self._finish_init()   # aiokafka's builder takes the producer id when it is made
            values = _as_binary_list(batch.column(names.index("value")))
            keys = _as_binary_list(keys_array) if keys_array is not None else [None] * n
            headers = _headers_list(batch.column(names.index("headers"))) if "headers" in names else None
        explicit = batch.column(names.index("partition")) if "partition" in names else None
        if topic_option is not None:
            groups = {topic_option: None}
        else:
            topics = batch.column(names.index("topic"))
            if topics.null_count:
                raise SinkError("Null topic present in the data. Use the topic option for setting a topic.")
            bounds = pc.min_max(topics)
            if bounds["min"] == bounds["max"]:
                groups = {topics[0].as_py(): None}
            else:
                import numpy as np
                as_list = topics.to_pylist()
                groups = {t: np.nonzero(np.array([x == t for x in as_list]))[0] for t in dict.fromkeys(as_list)}
        timestamp = int(time.time() * 1000)
        for topic, rows in groups.items():
            count, _ = self.cluster.topic(topic, self.deadline())
            sub_keys = keys_array if rows is None else (keys_array.take(rows) if keys_array is not None else None)
            sub_explicit = explicit if rows is None or explicit is None else explicit.take(rows)
            partitions = self._partitioner.partitions(topic, count, n if rows is None else len(rows), sub_keys,
                                                     sub_explicit)
            if explicit is not None:
                bad = (partitions < 0) | (partitions >= count)
                if bad.any():
                    raise SinkError(f"Invalid partition {int(partitions[bad][0])} for topic {topic}: it has "
                                    f"{count} partitions (0 to {count - 1})")
            if compiled is not None:
                self._encode_rows(topic, partitions, rows, compiled, timestamp)
                continue
            indices = range(n) if rows is None else rows.tolist()
            self._append_rows(topic, partitions.tolist(), indices, keys, values, headers, timestamp)
        return n

    def _encode_rows(self, topic, partitions, rows, columns, timestamp) -> None:
        """The compiled path: each partition's rows (in order) become record batches in one C call."""
        import numpy as np

        indices = np.arange(len(partitions), dtype=np.int64) if rows is None else np.asarray(rows, dtype=np.int64)
        # a stable sort of 16-bit keys is numpy's radix sort: ~10x faster than on int32 for a 10k-row batch
        order = np.argsort(partitions.astype(np.int16) if len(partitions) and partitions.max() < 1 << 15
                           else partitions, kind="stable")
        ordered = partitions[order]
        bounds = np.flatnonzero(np.diff(ordered)) + 1
        transactional = self.transactional_id is not None
        for run in np.split(order, bounds):
            tp = (topic, int(partitions[run[0]]))
            if tp in self._builders:  # rows appended by the per-record path go first
                self._close_builder(tp)
            early = self._setup is not None   # the producer id is not known yet: stamped before the batch is sent
            chunks = _arrow_batches.encode(columns[0], columns[1], indices[run], timestamp, self.producer_id,
                                           self.epoch, self._sequences[tp], transactional, self.options.batch_bytes)
            for data, count in chunks:
                if self.options.compression:
                    data = _compress(data, self.options.compression)
                if not early:
                    _CRC.pack_into(data, 17, crc32c(memoryview(data)[21:]))
                elif self._setup is None:   # a flush_ready of this loop finished the setup: stamp it here
                    self._stamp(data)
                self._sequences[tp] = (self._sequences[tp] + count) & 0x7FFFFFFF
                self.counts[tp] += count
                self._ready.append((tp, data))   # a bytearray nothing changes once it is sent
                self._ready_bytes += len(data)
                if self._ready_bytes >= self.options.request_bytes:
                    self.flush_ready()

    def _append_rows(self, topic, partitions, indices, keys, values, headers, timestamp) -> None:
        builders = self._builders
        empty: list = []
        for partition, i in zip(partitions, indices):
            tp = (topic, partition)
            builder = builders.get(tp)
            if builder is None:
                builder = self._new_builder(tp)
            record_headers = headers[i] if headers is not None else empty
            # A builder takes its first record whatever its size; later ones only while under kafka.batch.size.
            if builder.append(self._builder_counts[tp], timestamp, keys[i], values[i], record_headers) is None:
                self._close_builder(tp)
                if self._ready_bytes >= self.options.request_bytes:
                    self.flush_ready()
                builder = self._new_builder(tp)
                builder.append(0, timestamp, keys[i], values[i], record_headers)
            self._builder_counts[tp] += 1

    def _new_builder(self, tp):
        from aiokafka.record._crecords import DefaultRecordBatchBuilder
        # uncompressed: _close_builder compresses the whole records section as the compiled path does
        builder = DefaultRecordBatchBuilder(2, 0, int(self.transactional_id is not None),
                                            self.producer_id, self.epoch, self._sequences[tp],
                                            self.options.batch_bytes)
        self._builders[tp] = builder
        self._builder_counts[tp] = 0
        return builder

    def _close_builder(self, tp) -> None:
        builder = self._builders.pop(tp)
        count = self._builder_counts.pop(tp)
        if not count:
            return
        data = builder.build()
        if self.options.compression:
            data = _compress(bytearray(data), self.options.compression)
            _CRC.pack_into(data, 17, crc32c(memoryview(data)[21:]))
        data = bytes(data)
        self._sequences[tp] = (self._sequences[tp] + count) & 0x7FFFFFFF
        self.counts[tp] += count
        self._ready.append((tp, data))
        self._ready_bytes += len(data)

    # -- sending ---------------------------------------------------------------------------------------------------

    def flush(self) -> None:
        """Send everything appended so far and wait for the acknowledgements."""
        for tp in list(self._builders):
            self._close_builder(tp)
        self.flush_ready()
        self._await_all()

    def flush_ready(self) -> None:
        """Send the full batches; their answers are awaited later (up to ``MAX_IN_FLIGHT`` requests per broker)."""
        if self._setup is not None:
            self._finish_init()
        ready, self._ready, self._ready_bytes = self._ready, [], 0
        if not ready:
            return
        deadline = self.deadline()
        if self.transactional_id is not None:
            new = sorted({tp for tp, _ in ready} - self._in_txn)
            if new:
                self._await_all()   # the coordinator may share a connection with requests in flight
                self._add_partitions(new, deadline)
        # One partition's batches stay in order: each request carries at most one batch per partition, and the
        # requests to one broker go out, and are answered, in order on its one connection.
        for request in _requests(ready, self.options.request_bytes):
            self._dispatch(request, deadline)

    def _dispatch(self, batches: dict[tuple[str, int], bytes], deadline: float) -> None:
        by_leader: dict[int, dict] = defaultdict(dict)
        for tp, data in batches.items():
            if not self.cluster.knows(tp[0]):
                self._await_all()   # a Metadata request on a connection with requests in flight would interleave
            _, leaders = self.cluster.topic(tp[0], deadline)
            by_leader[leaders[tp[1]]][tp] = data
        for node_id, records in by_leader.items():
            while len(self._in_flight.get(node_id, ())) >= MAX_IN_FLIGHT:
                self._await_oldest(node_id)   # a lost connection empties the node's queue
            if self._retry:
                self._recover()
            queue = self._in_flight.setdefault(node_id, deque())
            numbered = {}
            for tp, data in records.items():
                self._sent += 1
                numbered[tp] = (self._sent, data)
            try:
                handle = self.cluster.node(node_id).send_produce(
                    records, acks=-1, timeout_ms=self.options.request_timeout_ms,
                    transactional_id=self.transactional_id)
            except BrokerUnavailable as exc:
                queue.append((None, numbered))
                self._connection_lost(node_id, str(exc))
                self._recover()
                continue
            queue.append((handle, numbered))

    def _await_oldest(self, node_id: int) -> None:
        """Read the answer to the oldest request in flight to ``node_id``; batches to send again go to ``_retry``."""
        handle, numbered = self._in_flight[node_id][0]
        try:
            answers = self.cluster.node(node_id).read_produce(handle)
        except BrokerUnavailable as exc:
            self._connection_lost(node_id, str(exc))
            return
        self._in_flight[node_id].popleft()
        for tp, (code, _, message) in answers.items():
            if code in (0, _DUPLICATE_SEQUENCE):
                continue
            index, data = numbered[tp]
            # a batch after one that failed, in a request sent before the failure was known, is out of sequence:
            # it goes again after the failed one
            if retriable(code) or (code == _OUT_OF_ORDER_SEQUENCE and any(t == tp for _, t, _ in self._retry)):
                self.cluster.forget(tp[0])
                self._retry.append((index, tp, data))
                self._why = f"{tp[0]}-{tp[1]}: {error_name(code)}"
                continue
            hint = " (fenced: a newer attempt took over this transactional id)" if code in _FENCED else ""
            raise SinkError(f"Produce to {tp[0]}-{tp[1]} failed: {refused(code, self.options, tp[0])}{hint}"
                            f"{': ' + message if message else ''}")

    def _connection_lost(self, node_id: int, why: str) -> None:
        """Every request in flight to ``node_id`` is unanswered: its batches are sent again."""
        self.cluster.drop(node_id)
        for _, numbered in self._in_flight.pop(node_id, ()):
            for tp, (index, data) in numbered.items():
                self.cluster.forget(tp[0])
                self._retry.append((index, tp, data))
        self._why = why

    def _drain(self) -> None:
        """Read the answer to every request in flight (failed batches go to ``_retry``)."""
        for node_id in list(self._in_flight):
            while self._in_flight.get(node_id):
                self._await_oldest(node_id)

    def _await_all(self) -> None:
        """Wait for every request in flight, sending failed batches again until acknowledged."""
        self._drain()
        if self._retry:
            self._recover()

    def _recover(self) -> None:
        """Drain what is in flight, then send the failed batches again in their order, one request at a time
        (retried as ``_send`` does until kafka.delivery.timeout.ms)."""
        self._drain()
        retry, self._retry = sorted(self._retry, key=lambda entry: entry[0]), []
        log.info("pylog sink: sending %d record batches again (%s)", len(retry), self._why)
        deadline = self.deadline()
        for request in _requests([(tp, data) for _, tp, data in retry], self.options.request_bytes):
            self._send(request, deadline)

    def _send(self, batches: dict[tuple[str, int], bytes], deadline: float) -> None:
        """Send ``batches`` and wait for the answer, retried until ``deadline`` (nothing else in flight)."""
        pending = dict(batches)
        while pending:
            by_leader: dict[int, dict] = defaultdict(dict)
            for tp, data in pending.items():
                _, leaders = self.cluster.topic(tp[0], deadline)
                by_leader[leaders[tp[1]]][tp] = data
            failures = []
            for node_id, records in by_leader.items():
                try:
                    answers = self.cluster.node(node_id).produce(
                        records, acks=-1, timeout_ms=self.options.request_timeout_ms,
                        transactional_id=self.transactional_id)
                except BrokerUnavailable as exc:
                    self.cluster.drop(node_id)
                    failures.append(str(exc))
                    for tp in records:
                        self.cluster.forget(tp[0])
                    continue
                for tp, (code, _, message) in answers.items():
                    if code in (0, _DUPLICATE_SEQUENCE):
                        pending.pop(tp, None)
                    elif retriable(code):
                        self.cluster.forget(tp[0])
                        failures.append(f"{tp[0]}-{tp[1]}: {error_name(code)}")
                    else:
                        hint = " (fenced: a newer attempt took over this transactional id)" if code in _FENCED else ""
                        raise SinkError(f"Produce to {tp[0]}-{tp[1]} failed: {refused(code, self.options, tp[0])}{hint}"
                                        f"{': ' + message if message else ''}")
            if pending:
                if time.monotonic() > deadline:
                    raise SinkError(f"Produce gave up after kafka.delivery.timeout.ms="
                                    f"{self.options.delivery_timeout_ms}: {failures[-1] if failures else ''}")
                time.sleep(RETRY_BACKOFF_S)

    def _add_partitions(self, partitions: list[tuple[str, int]], deadline: float) -> None:
        pending = list(partitions)
        while pending:
            try:
                answers = self.cluster.coordinator(self.transactional_id, deadline).add_partitions_to_txn(
                    self.transactional_id, self.producer_id, self.epoch, pending)
                codes = {tp: answers.get(tp, 3) for tp in pending}
            except BrokerUnavailable as exc:
                self.cluster.drop()
                codes, why = {tp: -1 for tp in pending}, str(exc)
            else:
                why = ""
            failed = {tp: code for tp, code in codes.items() if code}
            # INVALID_PRODUCER_ID_MAPPING right after InitProducerId means the coordinator that answers now is
            # not the one that initialised us (a failover of __transaction_state seen under load in the cluster
            # failover test): nothing of this transaction is written yet, so ask the coordinator again until the
            # deadline instead of failing the task at once
            fatal = {tp: code for tp, code in failed.items()
                     if code != -1 and not retriable(code) and code != INVALID_PRODUCER_ID_MAPPING}
            if fatal:
                tp, code = next(iter(fatal.items()))
                raise SinkError(f"AddPartitionsToTxn({self.transactional_id}, {tp[0]}-{tp[1]}) failed: "
                                f"{refused(code, self.options, tp[0])}")
            self._in_txn.update(tp for tp in pending if tp not in failed)
            pending = sorted(failed)
            if pending:
                if any(code in NOT_COORDINATOR or code == INVALID_PRODUCER_ID_MAPPING for code in failed.values()):
                    self.cluster.drop()
                if time.monotonic() > deadline:
                    raise SinkError(f"AddPartitionsToTxn({self.transactional_id}) gave up: "
                                    f"{why or error_name(next(iter(failed.values())))}")
                time.sleep(RETRY_BACKOFF_S)

    def release(self) -> None:
        """After a successful ``flush``, or before anything was sent (nothing in flight): keep the connections for
        the worker's next task."""
        if self._setup is not None:
            setup, self._setup = self._setup, None
            setup.join()
            if setup.error is None:
                setup.cluster.release()
            setup.cluster.close()
        self.cluster.release()
        self.close()

    def close(self) -> None:
        if self._setup is not None:   # a task failing before its first send: the thread must not outlive it
            self._setup.join()
            self._setup.cluster.close()
            self._setup = None
        self.cluster.close()


class _SetupThread(threading.Thread):
    """``TaskProducer.start_init``'s thread: InitProducerId and ``then`` on a ``SinkCluster`` of its own."""

    def __init__(self, options: SinkOptions, transactional_id: str | None, then) -> None:
        super().__init__(name="pylog-sink-init", daemon=True)
        self.options = options
        self.transactional_id = transactional_id
        self.then = then
        self.cluster = SinkCluster(options, "pylog-sink-task")
        self.producer_id = self.epoch = -1
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            deadline = time.monotonic() + self.options.delivery_timeout_ms / 1000
            self.producer_id, self.epoch = init_producer_id(self.cluster, self.transactional_id,
                                                            self.options.transaction_timeout_ms, deadline)
            if self.then is not None:
                self.then(self.cluster, self.producer_id, self.epoch)
        except BaseException as exc:  # noqa: BLE001 - raised again in the task's thread by _finish_init
            self.error = exc


def _requests(ready: list[tuple[tuple[str, int], bytes]], request_bytes: int):
    """``ready`` batches, in order, as Produce requests of at most one batch per partition and ``request_bytes``."""
    while ready:
        request, rest, size = {}, [], 0
        for tp, data in ready:
            if tp in request or (request and size + len(data) > request_bytes):
                rest.append((tp, data))
            else:
                request[tp] = data
                size += len(data)
        yield request
        ready = rest


def init_producer_id(cluster: SinkCluster, transactional_id: str | None, timeout_ms: int,
                     deadline: float) -> tuple[int, int]:
    """(producer id, epoch) from InitProducerId, retried until ``deadline``; with a transactional id this fences
    and aborts the id's open transaction, if any."""
    while True:
        try:
            connection = (cluster.coordinator(transactional_id, deadline) if transactional_id is not None
                          else cluster.any_connection())
            code, producer_id, epoch = connection.init_producer_id(transactional_id, timeout_ms)
        except BrokerUnavailable as exc:
            cluster.drop()
            code, why = -1, str(exc)
        else:
            why = refused(code, cluster.options) if code else ""
        if code == 0:
            return producer_id, epoch
        if code != -1 and not retriable(code):
            raise SinkError(f"InitProducerId(transactional id {transactional_id}) failed: {why}")
        if code in NOT_COORDINATOR:
            cluster.drop()
        if time.monotonic() > deadline:
            raise SinkError(f"InitProducerId(transactional id {transactional_id}) gave up: {why}")
        time.sleep(RETRY_BACKOFF_S)


def _gzip(data: bytes) -> bytes:
    import gzip
    return gzip.compress(data, compresslevel=6, mtime=0)   # Kafka's default level (Deflater's 6), no timestamp


def _lz4(data: bytes) -> bytes:
    """LZ4 frames as Kafka's producer writes them at its default level: the fast compressor (Lz4BlockOutputStream
    takes lz4-java's highCompressor only for a level other than the default), independent 64 KiB blocks, no
    checksums. aiokafka's ``lz4_encode`` runs LZ4HC at level 9 instead: ~40x slower for ~25% smaller batches."""
    import cramjam
    compressor = cramjam.lz4.Compressor(level=1, content_checksum=False, block_linked=False)
    compressor.compress(data)
    return bytes(compressor.finish())


@functools.cache
def _codec(codec: int):
    """Kafka's codec id -> the function compressing a records section at Kafka's producer defaults."""
    from aiokafka import codec as codecs
    return {1: _gzip, 2: codecs.snappy_encode, 3: _lz4, 4: codecs.zstd_encode}[codec]   # zstd: level 3, Kafka's


def _compress(batch: bytearray, codec: int) -> bytearray:
    """``batch`` (an uncompressed v2 record batch) with its records section compressed by ``codec`` (Kafka's codec
    id, ``_codec``), its length and attributes rewritten; the CRC is written by the caller. As Kafka's producer:
    compressed even where that does not shrink it (one small record)."""
    out = bytearray(memoryview(batch)[:_BATCH_HEADER])
    out += _codec(codec)(bytes(memoryview(batch)[_BATCH_HEADER:]))
    _LENGTH.pack_into(out, 8, len(out) - 12)
    _ATTRIBUTES.pack_into(out, 21, _ATTRIBUTES.unpack_from(out, 21)[0] | codec)
    return out


def _column_buffers(column):
    """(validity or None, offsets, data, array offset, length) of a string/binary column for ``_arrow_batches``;
    None for no column or one it cannot read (64-bit offsets)."""
    import pyarrow as pa
    if column is None or not (pa.types.is_string(column.type) or pa.types.is_binary(column.type)):
        return None
    validity, offsets, data = column.buffers()
    if data is None:
        data = pa.py_buffer(b"")
    return (validity if column.null_count else None), offsets, data, column.offset, len(column)


def _as_binary_list(column) -> list:
    """An Arrow string/binary column as a list of bytes (None for nulls)."""
    import pyarrow as pa
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        column = column.cast(pa.binary())
    return column.to_pylist()


def _headers_list(column) -> list:
    return [[(h["key"], h["value"]) for h in row] if row else [] for row in column.to_pylist()]
