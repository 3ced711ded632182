"""The "pylog" sink: ``df.writeStream.format("pylog")`` and ``df.write.format("pylog")``, exactly-once by default.

Usage::

    (df.selectExpr("CAST(id AS STRING) AS key", "to_json(struct(*)) AS value")
       .writeStream.format("pylog")
       .option("kafka.bootstrap.servers", "127.0.0.1:9092")
       .option("topic", "clean")
       .option("checkpointLocation", "/tmp/ckpt")
       .start())

Columns, as Spark's Kafka sink: ``value`` (required, string or binary), ``key``
(string or binary), ``headers`` (array<struct<key string, value binary>>),
``topic`` (string; the ``topic`` option wins over it) and ``partition`` (int;
null or absent: Kafka's default partitioner, ``connector.sink.partitioner``). Other
columns are ignored. A bad schema fails the query before its first batch,
naming the column. Options: ``connector.options.parse_sink_options`` and the
README's "Spark sink".

Theory of operation: ``PylogDataSource.writer`` / ``streamWriter`` (driver)
validate the schema and build a ``PylogStreamWriter`` / ``PylogBatchWriter``
(Arrow writers), which Spark pickles to every task. ``write_task`` runs in the
task: it learns its batch id, query id, partition id and attempt number from
Spark's ``TaskContext``, writes its rows with a ``TaskProducer`` and returns a
``SinkCommitMessage``. With ``exactly_once`` (the default) each task writes
inside its own Kafka transaction with the transactional id

    <sinkId>-<batchId>-<partitionId>-<nonce>.<attempt>

(the nonce is drawn when the driver plans the batch, so a re-run of a batch
after a driver crash never fences the first run's transactions, which the
sink log may still need to commit), records it in the sink log as *open*
before its first record, and leaves it open: its commit message carries the
transactional id, producer id, epoch and record counts. The driver's
``commit(messages, batchId)`` finishes the batch (``connector.sink.commit``).
With ``at_least_once`` a task writes with an idempotent producer and the
data is visible as soon as it is acknowledged.

A stopped query (``query.stop()``, ``connector.stop_query``, an exception)
leaves no transaction open: Spark calls ``abort(messages, batchId)`` with the
tasks still running reported as None, and the abort fences them through the
sink log (``connector.sink.commit.abort_batch``). For that the planned writer
carries the query id (read from the checkpoint's ``metadata``) and the sink
log's end when the batch was planned (``log_start``): a task, once its open
entry is durable, looks for the batch's abort marker from there to its entry
before it sends a record. When Spark plans a query's batch (not when its
commit re-creates the writer), what a crashed run left open is fenced
(``connector.sink.commit.sweep_orphans``).

Test hooks (environment variables, read in the task and the driver's commit):
``PYLOG_SINK_CRASH_AT=<point>[:<min batch id>]`` SIGKILLs the driver's process
group at a named point of a task or of the commit (``connector.sink.commit.CRASH_POINTS``);
``PYLOG_SINK_FAIL_TASK=<partition id>[:<min batch id>]`` makes attempt 0 of that
task raise after it has written and flushed its rows; ``PYLOG_SINK_HOLD=<directory>``
holds a task at a point of ``HOLD_POINTS`` while the file ``<directory>/hold-<point>-p<partition id>``
exists (``_hold``), so a test can stop a query while a task is there.
"""
from __future__ import annotations

import json
import logging
import os
import secrets
import sys
import time
import uuid
from dataclasses import dataclass
from typing import Iterator

from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from connector.options import PylogOptionError, SinkOptions

log = logging.getLogger(__name__)

HEADERS_TYPE = ArrayType(StructType().add("key", StringType()).add("value", BinaryType()))


class SinkSchemaError(PylogOptionError):
    """The DataFrame written to the sink lacks a required column or has one of the wrong type."""


def validate_schema(schema: StructType, options: SinkOptions) -> StructType:
    """The sink columns of ``schema`` (raises ``SinkSchemaError`` naming the column); Spark's KafkaWriter rules."""
    fields = {f.name.lower(): f for f in schema.fields}
    value = fields.get("value")
    if value is None:
        raise SinkSchemaError("Required attribute 'value' not found")
    _check_side(value, options.value_spec)
    key = fields.get("key")
    if key is not None:
        _check_side(key, options.key_spec)
    topic = fields.get("topic")
    if options.topic is None:
        if topic is None:
            raise SinkSchemaError("topic option required when no 'topic' attribute is present. Use the topic "
                                  "option for setting a topic.")
        if not isinstance(topic.dataType, StringType):
            raise SinkSchemaError(f"topic attribute type must be a string, got {topic.dataType.simpleString()}")
    headers = fields.get("headers")
    if headers is not None and not _is_headers_type(headers.dataType):
        raise SinkSchemaError(f"headers attribute type must be a {HEADERS_TYPE.simpleString()}, got "
                              f"{headers.dataType.simpleString()}")
    partition = fields.get("partition")
    if partition is not None and not isinstance(partition.dataType, IntegerType):
        raise SinkSchemaError(f"partition attribute type must be an int, got {partition.dataType.simpleString()}")
    return schema


def _check_side(column, spec) -> None:
    """``value`` / ``key``: string or binary, or with <side>Format=avro|protobuf|json a struct to serialize."""
    side, data_type = column.name.lower(), column.dataType
    fmt = spec.format if spec is not None else "binary"
    if fmt in ("binary", "string"):
        if not isinstance(data_type, (StringType, BinaryType)):
            hint = (f"; set {side}Format=avro, protobuf or json to serialize a {data_type.simpleString()} with a "
                    "schema") if isinstance(data_type, StructType) else ""
            raise SinkSchemaError(f"{side} attribute type must be a string or binary, got "
                                  f"{data_type.simpleString()}{hint}")
        return
    if isinstance(data_type, (StringType, BinaryType)) and spec.inline_schema is None:
        raise SinkSchemaError(f"{side}Format={fmt} serializes a struct {side} column with a schema, got "
                              f"{data_type.simpleString()} (leave {side}Format unset to write bytes as they are)")


def prepare_sink(schema: StructType, options: SinkOptions, checkpoint: str | None = None) -> StructType:
    """Driver side, before a job or micro-batch: validate ``schema`` and reach a bootstrap server; exactly_once also
    needs the sink log topic.

    Spark builds a stream writer for every micro-batch. Before a query's first
    committed batch (and for batch jobs) the brokers get ``bootstrapTimeoutMs``
    to accept a connection, so a wrong address fails at once; later (a broker
    gone mid-stream) they get ``kafka.delivery.timeout.ms``, the patience the
    tasks' writes have. Either way the failure names the address and the
    operating system's reason (``connector.wire.check_bootstrap``), which Spark
    shows in ``query.exception()``, where a task's failure would show only
    "Writing job failed". One connection with the security settings follows
    (``connector.wire.check_login``): a security mistake fails the write with
    its cause and the ``kafka.*`` option to change. That login is made once per
    process and settings (Spark calls this twice per micro-batch, in reused
    Python workers): settings that logged in once are not probed again.
    """
    validate_schema(schema, options)
    from connector.wire import check_bootstrap, check_login
    started = checkpoint is not None and _has_committed_batch(checkpoint)
    if started:
        reached = check_bootstrap(options.bootstrap_servers, options.delivery_timeout_ms, "kafka.delivery.timeout.ms")
    else:
        reached = check_bootstrap(options.bootstrap_servers, options.bootstrap_timeout_ms)
    login = (options.bootstrap_servers, repr(sorted(map(repr, options.client_kwargs.items()))))
    if login not in _LOGGED_IN:
        check_login(reached, options.client_kwargs, options.bootstrap_timeout_ms / 1000)
        _LOGGED_IN.add(login)
    if options.exactly_once:
        from connector.sink.sink_log import ensure_log_topic
        ensure_log_topic(options)
    return schema


_LOGGED_IN: set[tuple[str, str]] = set()   # (bootstrap servers, client settings) check_login passed in this process


def _has_committed_batch(checkpoint: str) -> bool:
    """True when the query's checkpoint records a committed batch (a local checkpoint; remote ones count as
    started, which only means the longer patience)."""
    if "://" in checkpoint and not checkpoint.startswith("file:"):
        return True
    commits = os.path.join(checkpoint.removeprefix("file://").removeprefix("file:"), "commits")
    return os.path.isdir(commits) and any(name.isdigit() for name in os.listdir(commits))


def _is_headers_type(data_type) -> bool:
    if not isinstance(data_type, ArrayType) or not isinstance(data_type.elementType, StructType):
        return False
    inner = data_type.elementType.fields
    return (len(inner) == 2 and inner[0].name == "key" and isinstance(inner[0].dataType, StringType)
            and inner[1].name == "value" and isinstance(inner[1].dataType, BinaryType))


@dataclass
class SinkCommitMessage(WriterCommitMessage):
    """What one task tells the driver: its rows, and for exactly_once its still-open transaction."""

    query_id: str
    batch_id: int
    partition_id: int
    attempt: int
    rows: int
    transactional_id: str | None = None
    producer_id: int = -1
    epoch: int = -1
    records: tuple[tuple[str, int, int], ...] = ()   # (topic, partition, records written)

    def txn(self):
        from connector.sink.sink_log import Txn
        return Txn(self.partition_id, self.attempt, self.transactional_id, self.producer_id, self.epoch,
                   {f"{t}-{p}": n for t, p, n in self.records})


class _PylogWriter:
    """Shared by the stream and batch writers: options, the batch's nonce, the task write and the driver commit."""

    def __init__(self, options: SinkOptions, schema: StructType, job_id: str | None = None, batch_id: int = 0,
                 keep_entry: bool = True, query_id: str | None = None, log_start: int = -1) -> None:
        self.options = options
        self.schema = schema
        self.nonce = secrets.token_hex(4)
        self.job_id = job_id       # batch writes: stands in for the streaming query id
        self.batch_id = batch_id   # batch writes: the batch id tasks and the commit use
        self.keep_entry = keep_entry
        self.query_id = job_id or query_id   # for an abort no task reported to
        self.log_start = log_start           # the sink log's end when the batch was planned; -1: unknown

    def write(self, iterator: Iterator) -> SinkCommitMessage:
        return write_task(self.options, self.nonce, self.job_id, self.batch_id, _encoded(self.options, iterator),
                          self.log_start)

    def _commit(self, messages, batch_id: int) -> None:
        if not self.options.exactly_once:
            return
        from connector.sink.commit import commit_batch
        commit_batch(self.options, [m for m in messages if m is not None], batch_id, keep_entry=self.keep_entry)

    def _abort(self, messages, batch_id: int) -> None:
        if not self.options.exactly_once:
            return
        from connector.sink.commit import abort_batch
        abort_batch(self.options, [m for m in messages if m is not None], batch_id, self.query_id)


class PylogStreamWriter(_PylogWriter, DataSourceStreamArrowWriter):
    """Micro-batch writer: tasks pre-commit, ``commit(messages, batchId)`` finishes the batch once."""

    def commit(self, messages, batchId: int) -> None:
        self._commit(messages, batchId)

    def abort(self, messages, batchId: int) -> None:
        self._abort(messages, batchId)


class PylogBatchWriter(_PylogWriter, DataSourceArrowWriter):
    """``df.write.format("pylog").mode("append")``: one job, committed as batch 0 of its own job id; or, from
    ``connector.foreach``, one micro-batch of a streaming query, committed under that query's id and batch id
    with its sink log entry kept, so a replay of the batch finds it COMPLETED."""

    def __init__(self, options: SinkOptions, schema: StructType, query_id: str | None = None,
                 batch_id: int = 0) -> None:
        if query_id is None:
            super().__init__(options, schema, job_id=f"job-{uuid.uuid4().hex[:12]}", keep_entry=False)
        else:
            super().__init__(options, schema, job_id=query_id, batch_id=batch_id)
        if options.exactly_once:
            self.log_start = planned_log_start(options, self.job_id)

    def commit(self, messages) -> None:
        self._commit(messages, self.batch_id)

    def abort(self, messages) -> None:
        self._abort(messages, self.batch_id)


def stream_writer(options: SinkOptions, schema: StructType, checkpoint: str | None) -> "PylogStreamWriter":
    """The stream writer Spark asked for. Spark asks when it plans a batch (``write_into_data_source``, whose
    writer goes to the tasks) and again to commit or abort it (``python_streaming_sink_runner``); only the
    planned one sweeps orphans and learns where the log ends."""
    query_id = checkpoint_query_id(checkpoint) if checkpoint else None
    writer = PylogStreamWriter(options, schema, query_id=query_id)
    if options.exactly_once and query_id is not None and _planning():
        key = (options.bootstrap_servers, options.sink_log_topic, options.sink_id, query_id)
        if key not in _SWEPT:
            from connector.sink.commit import sweep_orphans
            sweep_orphans(options, query_id)
            _SWEPT.add(key)
        writer.log_start = planned_log_start(options, query_id)
    return writer


_SWEPT: set[tuple] = set()   # (bootstrap, log topic, sink id, query id) swept by this process


def _planning() -> bool:
    """Whether Spark is planning a write (the writer goes to the tasks), not committing or aborting one."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename.endswith("write_into_data_source.py"):
            return True
        frame = frame.f_back
    return False


def planned_log_start(options: SinkOptions, query_id: str) -> int:
    """The sink log's end now: where the tasks of the batch being planned look for its abort marker (an abort
    comes after the planning)."""
    from connector.sink.brokers import SinkCluster
    from connector.sink.sink_log import SinkLog
    cluster = SinkCluster(options, "pylog-sink-driver")
    try:
        offset = SinkLog(cluster, options, query_id).end_offset()
        cluster.release()
        return offset
    finally:
        cluster.close()


def checkpoint_query_id(checkpoint: str) -> str | None:
    """Spark's streaming query id from ``<checkpoint>/metadata`` (``{"id": ...}``, written when the query first
    starts); None for a checkpoint this process cannot read (not a local path) or one not written yet."""
    if "://" in checkpoint and not checkpoint.startswith("file:"):
        return None
    path = os.path.join(checkpoint.removeprefix("file://").removeprefix("file:"), "metadata")
    try:
        with open(path, encoding="utf-8") as f:
            value = json.loads(f.readline()).get("id")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) and value else None


HOLD_POINTS = ("before_init", "task_written")
HOLD_LIMIT_S = 300


def _hold(point: str, partition_id: int, batch_id: int) -> None:
    """Test hook: wait while ``$PYLOG_SINK_HOLD/hold-<point>-p<partition>`` exists (at most HOLD_LIMIT_S) and
    ``batch_id`` is at least the number it holds (empty: 0), after leaving ``held-<point>-batch<b>-p<partition>``
    there."""
    directory = os.environ.get("PYLOG_SINK_HOLD")
    if not directory:
        return
    gate = os.path.join(directory, f"hold-{point}-p{partition_id}")
    try:
        with open(gate, encoding="utf-8") as f:
            min_batch = int(f.read().strip() or 0)
    except (OSError, ValueError):
        return
    if batch_id < min_batch:
        return
    with open(os.path.join(directory, f"held-{point}-batch{batch_id}-p{partition_id}"), "w") as f:
        f.write(f"{os.getpid()}\n")
    deadline = time.monotonic() + HOLD_LIMIT_S
    while os.path.exists(gate) and time.monotonic() < deadline:
        time.sleep(0.02)


def write_task(options: SinkOptions, nonce: str, job_id: str | None, job_batch_id: int,
               iterator: Iterator, log_start: int = -1) -> SinkCommitMessage:
    """Write one task's Arrow batches; see the module docstring."""
    from pyspark import TaskContext

    from connector.sink.producer import TaskProducer

    context = TaskContext.get()
    batch_id = int(context.getLocalProperty("streaming.sql.batchId") or 0) if job_id is None else job_batch_id
    query_id = job_id or context.getLocalProperty("sql.streaming.queryId") or "no-query-id"
    partition_id, attempt = context.partitionId(), context.attemptNumber()
    message = SinkCommitMessage(query_id, batch_id, partition_id, attempt, 0)
    batches = (b for b in iterator if b.num_rows)
    transactional_id = None
    if options.exactly_once:
        transactional_id = f"{options.sink_id}-{batch_id}-{partition_id}-{nonce}.{attempt}"
    producer = None
    if transactional_id is None:
        # at_least_once: the idempotent producer id is asked for while the task waits for its first rows (Spark
        # hands them over once the upstream read is done); a task without rows wasted an id, nothing else
        producer = TaskProducer(options)
        producer.start_init()
    try:
        first = next(batches, None)
        if first is None:
            if producer is not None:
                producer.release()
            return message   # no rows, no transaction
        if producer is None:
            # InitProducerId and the sink log's open entry run in a thread while the first rows are encoded; no
            # record is sent before both are done (TaskProducer.start_init)
            _hold("before_init", partition_id, batch_id)

            def put_open(cluster, producer_id, epoch):
                from connector.sink.sink_log import SinkAborted, SinkLog, Txn
                sink_log = SinkLog(cluster, options, query_id)
                at = sink_log.put_open(batch_id, Txn(partition_id, attempt, transactional_id, producer_id, epoch))
                if log_start >= 0 and sink_log.aborted_between(batch_id, log_start, at):
                    raise SinkAborted(f"batch {batch_id} of query {query_id} was aborted (the query stopped or "
                                      f"failed) before task {partition_id} (attempt {attempt}) wrote: nothing "
                                      f"written")
            producer = TaskProducer(options, transactional_id)
            producer.start_init(put_open)
        rows = producer.write(first, options.topic)
        for batch in batches:
            rows += producer.write(batch, options.topic)
        producer.flush()
        from connector.sink.commit import crash_point
        crash_point("task_written", batch_id)
        _hold("task_written", partition_id, batch_id)
        _maybe_fail_task(partition_id, attempt, batch_id)
        producer.release()   # flushed: every request answered, the connections serve the worker's next task
    finally:
        if producer is not None:
            producer.close()
    message.rows = rows
    message.transactional_id = transactional_id
    message.producer_id, message.epoch = producer.producer_id, producer.epoch
    message.records = tuple(sorted((t, p, n) for (t, p), n in producer.counts.items()))
    return message


def _encoded(options: SinkOptions, iterator: Iterator) -> Iterator:
    """The task's Arrow batches with typed ``value`` / ``key`` columns serialized (``connector.typed.columns``)."""
    sides = [(side, resolved) for side, resolved in (("value", options.value_typed), ("key", options.key_typed))
             if resolved is not None]
    if not sides:
        yield from iterator
        return
    from connector.typed.columns import ColumnEncoder
    encoders = {}
    for batch in iterator:
        names = batch.schema.names
        columns = list(batch.columns)
        lowered = [n.lower() for n in names]
        for side, resolved in sides:
            at = lowered.index(side)
            if side not in encoders:
                encoders[side] = ColumnEncoder(resolved, resolved.spark_type())
            columns[at] = encoders[side].encode(columns[at])
        import pyarrow as pa
        yield pa.RecordBatch.from_arrays(columns, names=names)


def _maybe_fail_task(partition_id: int, attempt: int, batch_id: int) -> None:
    spec = os.environ.get("PYLOG_SINK_FAIL_TASK")
    if not spec or attempt != 0:
        return
    target, _, min_batch = spec.partition(":")
    if int(target) == partition_id and batch_id >= int(min_batch or 0):
        from connector.sink.commit import mark_fault
        mark_fault(f"failtask-p{partition_id}-batch{batch_id}")
        raise RuntimeError(f"PYLOG_SINK_FAIL_TASK: injected failure of partition {partition_id} attempt {attempt} "
                           f"of batch {batch_id} after writing")
