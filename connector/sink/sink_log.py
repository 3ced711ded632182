"""The exactly-once sink's durable log: a compacted topic in the target cluster, one JSON record per fact.

Theory of operation: the driver's two-phase commit must be idempotent per
batch id across driver crashes, and the transactions of crashed task
attempts must be findable. Both facts live in Kafka itself, in the compacted
topic ``__pylog_sink_log`` (option ``sinkLogTopic``; created by the driver
with cleanup.policy=compact when missing), so the sink needs nothing but the
cluster it writes to. Keys are prefixed ``<sinkId>/<queryId>/`` — the query id
is Spark's streaming query id, kept in the checkpoint, so a restart finds its
entries and a new checkpoint starts afresh:

``.../batch/<batch id:020d>``   ``{"state": "intent"|"completed", "txns": [Txn...]}`` — INTENT lists the
                                transactions the driver is about to commit; COMPLETED (same key, so
                                compaction keeps only it) those it did commit.
``.../open/<transactional id>`` ``{"batch": id, "txn": Txn}`` — written by a task after InitProducerId and
                                before its first record, so the driver can abort transactions of task
                                attempts that never reported back (crashed, retried, speculative).
``.../abort/<batch id:020d>``   ``{"aborted": true}`` — written by the driver's abort of a batch (a stopped or
                                failed query) *before* it reads the log and fences the batch's open
                                transactions. A task that was still running checks, after its open entry
                                is durable and before its first record, whether this marker lies between
                                the log's end when its batch was planned and its own open entry: if so the
                                abort may not have seen the entry, and the task refuses to write
                                (``SinkAborted``); if not, the abort's read sees the entry and fences it.
                                The log's single partition orders the two, so no task of an aborted batch
                                leaves a transaction open.

A ``Txn`` is ``{"partition", "attempt", "id", "pid", "epoch", "records": {"topic-partition": count}}``
(``connector/schemas/sink-log.json``). Resolved entries are deleted with tombstones;
batch entries are kept for the last ``KEEP_BATCHES`` batches (Spark re-runs at
most the last uncommitted one). All of one sink and query's records go to one
partition of the log (murmur2 of the prefix), so they are read back in order;
``read`` fetches that partition from its start to the high watermark, and a
process-wide cursor makes later reads incremental.
"""
from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field

import connector.admin as admin
from connector.error_codes import error_name, refused, retriable
from connector.options import SinkOptions
from connector.sink.brokers import RETRY_BACKOFF_S, SinkCluster, SinkError
from connector.wire import BrokerUnavailable

log = logging.getLogger(__name__)

INTENT, COMPLETED = "intent", "completed"


class SinkAborted(SinkError):
    """A task's batch was aborted by the driver (the query stopped or failed) before the task's first record."""
KEEP_BATCHES = 100  # as spark.sql.streaming.minBatchesToRetain
_READ_CACHE: dict[tuple, tuple[int, dict]] = {}


@dataclass(frozen=True)
class Txn:
    """One task's transaction, as recorded in the log and carried by commit messages."""

    partition: int          # Spark partition id
    attempt: int            # Spark task attempt number
    id: str                 # transactional id
    pid: int
    epoch: int
    records: dict = field(default_factory=dict, hash=False, compare=False)  # {"topic-partition": count}

    def to_json(self) -> dict:
        return {"partition": self.partition, "attempt": self.attempt, "id": self.id, "pid": self.pid,
                "epoch": self.epoch, "records": self.records}

    @classmethod
    def from_json(cls, data: dict) -> "Txn":
        return cls(int(data["partition"]), int(data["attempt"]), str(data["id"]), int(data["pid"]),
                   int(data["epoch"]), dict(data.get("records", {})))


@dataclass
class SinkLogState:
    """What the log says about one sink and query: batch entries and open transactions by transactional id."""

    batches: dict[int, tuple[str, list[Txn]]] = field(default_factory=dict)
    open: dict[str, tuple[int, Txn]] = field(default_factory=dict)
    aborted: set[int] = field(default_factory=set)   # batch ids with an abort marker

    def protected(self) -> set[str]:
        """Transactional ids an INTENT still needs: never abort these."""
        return {t.id for state, txns in self.batches.values() if state == INTENT for t in txns}


class SinkLog:
    """Reads and appends one sink and query's records; see the module docstring."""

    def __init__(self, cluster: SinkCluster, options: SinkOptions, query_id: str) -> None:
        self.cluster = cluster
        self.options = options
        self.topic = options.sink_log_topic
        self.prefix = f"{options.sink_id}/{query_id}/"

    # -- writing ---------------------------------------------------------------------------------------------------

    def put_batch(self, batch_id: int, state: str, txns: list[Txn]) -> None:
        self._append([(self._batch_key(batch_id), {"state": state, "txns": [t.to_json() for t in txns]})])

    def put_open(self, batch_id: int, txn: Txn) -> int:
        """Record ``txn`` as open; returns the entry's offset in the log."""
        return self._append([(self._open_key(txn.id), {"batch": batch_id, "txn": txn.to_json()})])

    def put_aborted(self, batch_id: int) -> None:
        self._append([(self._abort_key(batch_id), {"aborted": True})])

    def delete(self, batch_ids=(), open_ids=(), aborted_ids=()) -> None:
        keys = ([self._batch_key(b) for b in batch_ids] + [self._open_key(t) for t in open_ids]
                + [self._abort_key(b) for b in aborted_ids])
        if keys:
            self._append([(key, None) for key in keys])

    def _abort_key(self, batch_id: int) -> str:
        return f"{self.prefix}abort/{batch_id:020d}"

    def _batch_key(self, batch_id: int) -> str:
        return f"{self.prefix}batch/{batch_id:020d}"

    def _open_key(self, transactional_id: str) -> str:
        return f"{self.prefix}open/{transactional_id}"

    def _append(self, entries: list[tuple[str, dict | None]]) -> int:
        """Append ``entries`` (value None: a tombstone) in one record batch; returns its base offset."""
        from aiokafka.record._crecords import DefaultRecordBatchBuilder

        builder = DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 1 << 30)
        now = int(time.time() * 1000)
        for delta, (key, value) in enumerate(entries):
            payload = None if value is None else json.dumps(value, sort_keys=True).encode()
            builder.append(delta, now, key.encode(), payload, [])
        data = bytes(builder.build())
        deadline = time.monotonic() + self.options.delivery_timeout_ms / 1000
        # Not idempotent: a retried append may land twice, which the log's last-value-wins reading absorbs.
        while True:
            partition, leaders = self._partition(deadline)
            try:
                answers = self.cluster.node(leaders[partition]).produce(
                    {(self.topic, partition): data}, acks=-1, timeout_ms=self.options.request_timeout_ms)
                code, base_offset, message = answers[(self.topic, partition)]
            except BrokerUnavailable as exc:
                self.cluster.drop()
                code, message = -1, str(exc)
            if code == 0:
                return base_offset
            if code != -1 and not retriable(code):
                raise SinkError(f"Appending to the sink log {self.topic}-{partition} failed: "
                                f"{refused(code, self.options, self.topic)}"
                                f"{': ' + message if message else ''}")
            self.cluster.forget(self.topic)
            if time.monotonic() > deadline:
                raise SinkError(f"Appending to the sink log {self.topic} gave up: {message or error_name(code)}")
            time.sleep(RETRY_BACKOFF_S)

    def _partition(self, deadline: float) -> tuple[int, dict[int, int]]:
        from connector.sink.partitioner import murmur2
        import pyarrow as pa

        count, leaders = self.cluster.topic(self.topic, deadline)
        hashed = int(murmur2(pa.array([self.prefix.encode()], pa.binary()))[0])
        return (hashed & 0x7FFFFFFF) % count, leaders

    # -- reading ---------------------------------------------------------------------------------------------------

    def read(self) -> SinkLogState:
        """Every live entry of this sink and query, from the log's start (or the cached position) to its end."""
        deadline = time.monotonic() + self.options.delivery_timeout_ms / 1000
        partition, _ = self._partition(deadline)
        cache_key = (self.options.bootstrap_servers, self.topic, partition, self.prefix)
        position, entries = _READ_CACHE.get(cache_key, (0, {}))
        entries = dict(entries)
        position = self._scan(position, None, entries, deadline)
        _READ_CACHE[cache_key] = (position, entries)
        return _state_of(entries)

    def end_offset(self) -> int:
        """The log partition's end offset now (ListOffsets latest at its leader)."""
        deadline = time.monotonic() + self.options.delivery_timeout_ms / 1000
        while True:
            partition, leaders = self._partition(deadline)
            try:
                code, offset = self.cluster.node(leaders[partition]).list_offset(self.topic, partition, -1, 0)
            except BrokerUnavailable as exc:
                self.cluster.drop()
                code, why = -1, str(exc)
            else:
                why = refused(code, self.options, self.topic) if code else ""
            if code == 0:
                return offset
            if code != -1 and not retriable(code):
                raise SinkError(f"Reading the end of the sink log {self.topic}-{partition} failed: {why}")
            if time.monotonic() > deadline:
                raise SinkError(f"Reading the end of the sink log {self.topic}-{partition} gave up: {why}")
            self.cluster.forget(self.topic)
            time.sleep(RETRY_BACKOFF_S)

    def aborted_between(self, batch_id: int, start: int, end: int) -> bool:
        """Whether an abort marker of ``batch_id`` lies at an offset in [start, end) (see the module docstring)."""
        entries: dict[str, bytes | None] = {}
        self._scan(start, end, entries, time.monotonic() + self.options.delivery_timeout_ms / 1000)
        return entries.get(f"abort/{batch_id:020d}") is not None

    def _scan(self, position: int, end: int | None, entries: dict, deadline: float) -> int:
        """Read this prefix's records from ``position`` to ``end`` (None: the high watermark) into ``entries``
        (key without the prefix -> value, later ones win); returns the position reached."""
        from aiokafka.record.memory_records import MemoryRecords

        partition, leaders = self._partition(deadline)
        prefix = self.prefix.encode()
        while end is None or position < end:
            try:
                answer = self.cluster.node(leaders[partition]).fetch(
                    self.topic, partition, position, isolation_level=0, max_wait_ms=0, max_bytes=8 << 20,
                    partition_max_bytes=8 << 20)
            except BrokerUnavailable as exc:
                self.cluster.drop()
                answer, why = None, str(exc)
            if answer is not None and answer.error_code == 1 and position < max(answer.log_start_offset, 0):
                position = answer.log_start_offset   # compaction/retention moved the start: nothing lost for us
                continue
            if answer is None or answer.error_code:
                why = why if answer is None else refused(answer.error_code, self.options, self.topic)
                if answer is not None and not retriable(answer.error_code):
                    raise SinkError(f"Reading the sink log {self.topic}-{partition} failed: {why}")
                if time.monotonic() > deadline:
                    raise SinkError(f"Reading the sink log {self.topic}-{partition} gave up: {why}")
                self.cluster.forget(self.topic)
                time.sleep(RETRY_BACKOFF_S)
                partition, leaders = self._partition(deadline)
                continue
            if position >= answer.high_watermark:
                break
            memory = MemoryRecords(answer.records or b"")
            advanced = position
            while memory.has_next():
                batch = memory.next_batch()
                if batch is None:
                    break
                for record in batch:
                    if end is not None and record.offset >= end:
                        break
                    if record.offset >= position and record.key is not None and record.key.startswith(prefix):
                        entries[record.key[len(prefix):].decode()] = record.value
                advanced = batch.next_offset
            if advanced <= position:
                break
            position = advanced
            if position >= answer.high_watermark:
                break   # read up to the high watermark this answer gave: no Fetch to learn it again
        return position


def _state_of(entries: dict[str, bytes | None]) -> SinkLogState:
    state = SinkLogState()
    for key, value in entries.items():
        if value is None:
            continue
        data = json.loads(value)
        kind, _, name = key.partition("/")
        if kind == "batch":
            state.batches[int(name)] = (data["state"], [Txn.from_json(t) for t in data["txns"]])
        elif kind == "open":
            state.open[name] = (int(data["batch"]), Txn.from_json(data["txn"]))
        elif kind == "abort":
            state.aborted.add(int(name))
    return state


def ensure_log_topic(options: SinkOptions) -> None:
    """Create the compacted sink log topic when it does not exist (driver side, once per process).

    Retriable failures (a bootstrap broker down, a leader moving) are retried
    for the Java clients' default.api.timeout.ms, each time with a new client.
    """
    key = (options.bootstrap_servers, options.sink_log_topic)
    if key in _CREATED:
        return
    admin.with_patience(lambda: _create_log_topic(options), f"creating the sink log topic {options.sink_log_topic}")
    _CREATED.add(key)


def _create_log_topic(options: SinkOptions) -> None:
    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError

    client = admin.client(options, "pylog-sink-driver")
    try:
        if options.sink_log_topic not in client.list_topics():
            # replicated like Kafka's own internal topics: 3 copies, or as many as there are brokers
            factor = max(1, min(SINK_LOG_REPLICATION_FACTOR, len(client.describe_cluster().get("brokers") or ())))
            try:
                client.create_topics([NewTopic(options.sink_log_topic, 1, factor, topic_configs={
                    "cleanup.policy": "compact", "min.compaction.lag.ms": "60000"})])
                log.info("created the sink log topic %s (cleanup.policy=compact, replication factor %d)",
                         options.sink_log_topic, factor)
            except TopicAlreadyExistsError:
                pass
    finally:
        client.close()


_CREATED: set[tuple[str, str]] = set()
SINK_LOG_REPLICATION_FACTOR = 3
