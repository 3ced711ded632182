"""Executor side: read one offset range of one partition into Arrow RecordBatches.

Theory of operation: Spark pickles a ``RangeInputPartition`` (the range plus
the frozen ``SourceOptions``: bootstrap servers, client settings, isolation
level, failOnDataLoss, includeHeaders) and calls the reader's ``read`` with
it in a Python worker, possibly on another machine. ``read_range`` finds the
partition's leader with a Metadata request, then issues raw Fetch requests
from ``from_offset`` until ``until_offset`` and yields one RecordBatch per
Fetch response.

Connections outlive the task: a range read to its end returns its connection to
``connector.wire.IDLE_CONNECTIONS`` and the partition's leader is remembered
(``_LEADERS``), so the next task in the same Python worker (Spark reuses them)
fetches at once, with no connect, ApiVersions or Metadata first. A leader that
moved answers NOT_LEADER_OR_FOLLOWER and the task looks it up again; a task that
fails or is stopped mid-request closes its connection.

A range may yield fewer rows than its size: compaction leaves gaps,
transaction markers and aborted records are not rows. Missing data is data
loss — the range starts before the log start (retention, DeleteRecords), the
log ends before the range does, or the topic is gone. With failOnDataLoss
(the default) that raises ``DataLossError`` naming topic, partition and
offsets; otherwise it is logged and the missing offsets are skipped.
"""
from __future__ import annotations

import logging
import time
from typing import Iterator

from pyspark.sql.datasource import InputPartition

from broker_sim.protocol.client import split_address
from connector.error_codes import refused, retriable
from connector.options import SourceOptions
from connector.source.offsets import OffsetRange

log = logging.getLogger(__name__)

INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_FALSE = (
    "Some data may have been lost because they are not available in Kafka any more; either the data was aged out "
    "by Kafka or the topic may have been deleted before all the data in the topic was processed. If you want your "
    "streaming query to fail on such cases, set the source option \"failOnDataLoss\" to \"true\".")
INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_TRUE = (
    "Some data may have been lost because they are not available in Kafka any more; either the data was aged out "
    "by Kafka or the topic may have been deleted before all the data in the topic was processed. If you don't want "
    "your streaming query to fail on such cases, set the source option \"failOnDataLoss\" to \"false\".")

_OFFSET_OUT_OF_RANGE = 1
# UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID: retriable for Kafka's clients, which wait for a topic to appear;
# a range planned from offsets the brokers reported is of a topic that existed, so here it is data loss.
_GONE = {3, 100}
_BACKOFF_S = 0.1
# A range is a bulk read to its end: 4 MiB per Fetch (Kafka's consumer: 1 MiB) costs the broker and this reader a
# quarter of the requests (the broker's CPU per row read falls to about half) and gives Spark 4x larger Arrow
# batches; ``kafka.max.partition.fetch.bytes`` still wins, and ``kafka.fetch.max.bytes`` caps the response.
BULK_PARTITION_FETCH_BYTES = 4 << 20
# (bootstrap servers, client id, settings, topic, partition) -> the leader's (host, port), as last looked up in this
# process; dropped on any retriable failure of the partition. Bounded: cleared when it outgrows _MAX_LEADERS.
_LEADERS: dict[tuple, tuple[str, int]] = {}
_MAX_LEADERS = 10_000


class DataLossError(RuntimeError):
    """Offsets a query must read are no longer in Kafka (failOnDataLoss=true)."""


class RangeInputPartition(InputPartition):
    """One Spark task: offsets [from, until) of one Kafka partition, and everything needed to fetch them."""

    def __init__(self, offset_range: OffsetRange, options: SourceOptions) -> None:
        super().__init__(offset_range)
        self.offset_range = offset_range
        self.options = options

    def __repr__(self) -> str:
        r = self.offset_range
        return f"RangeInputPartition({r.topic}-{r.partition} [{r.from_offset}, {r.until_offset}))"


def report_data_loss(message: str, fail_on_data_loss: bool) -> None:
    """Raise ``DataLossError`` or log a warning, by ``failOnDataLoss``."""
    if fail_on_data_loss:
        raise DataLossError(f"{message}. {INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_TRUE}")
    log.warning("%s. %s", message, INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_FALSE)


def read_range(partition: RangeInputPartition, arrow_schema) -> Iterator:
    """Yield Arrow RecordBatches (``arrow_schema``) for the partition's range; see the module docstring."""
    from connector.source.arrow_records import decode, next_fetch_offset, to_record_batch

    r, options = partition.offset_range, partition.options
    config = options.client_kwargs
    read_committed = options.isolation_level == "read_committed"
    isolation = 1 if read_committed else 0
    max_bytes = int(config.get("fetch_max_bytes", 52_428_800))
    partition_max_bytes = int(config.get("max_partition_fetch_bytes", BULK_PARTITION_FETCH_BYTES))
    where = f"{r.topic}-{r.partition}"
    from connector.typed.columns import RecordTyping
    typing = RecordTyping.for_options(options)
    fetcher = _LeaderConnection(options, r.topic, r.partition)
    deadline = time.monotonic() + options.poll_timeout_ms / 1000
    position = r.from_offset
    prefetch = _Prefetch(fetcher, isolation=isolation, max_bytes=max_bytes, partition_max_bytes=partition_max_bytes)
    done = False   # the range was read (or found lost) to its end: no request is in flight, the connection is kept
    try:
        while position < r.until_offset:
            answer = prefetch.take(position, deadline)
            code = answer.error_code
            if code == _OFFSET_OUT_OF_RANGE:
                earliest = fetcher.list_offset(-2, isolation, deadline)
                if position < earliest:
                    report_data_loss(f"Cannot fetch offsets {position} until {min(earliest, r.until_offset)} of "
                                     f"{where}: the earliest available offset is {earliest}", options.fail_on_data_loss)
                    position = earliest
                    continue
                latest = fetcher.list_offset(-1, isolation, deadline)
                report_data_loss(f"Cannot fetch offsets {position} until {r.until_offset} of {where}: the latest "
                                 f"available offset is {latest}", options.fail_on_data_loss)
                done = True
                return
            if code in _GONE:
                report_data_loss(f"Cannot fetch offsets {position} until {r.until_offset} of {where}: the topic "
                                 "partition is gone (topic deleted?)", options.fail_on_data_loss)
                done = True
                return
            if code != 0 and retriable(code):
                fetcher.reset(deadline, f"Fetch of {where} at offset {position} failed with error code {code}")
                continue
            if code != 0:
                raise RuntimeError(f"Fetch of {where} at offset {position} failed: "
                                   f"{refused(code, options, r.topic)}")
            # the next Fetch goes out before this one is decoded, when its batch headers say where it starts
            upcoming = next_fetch_offset(answer.records, r.until_offset)
            if position < upcoming < r.until_offset:  # never a fetch past the range's end
                prefetch.start(upcoming, deadline)
            columns = decode(answer.records, position, r.until_offset, aborted_transactions=answer.aborted_transactions,
                             read_committed=read_committed, include_headers=options.include_headers,
                             compiled=typing is None)
            if columns.next_offset > position:
                position = columns.next_offset
                if position != upcoming and position < r.until_offset:
                    prefetch.start(position, deadline)
                if len(columns):
                    yield to_record_batch(r.topic, r.partition, columns, arrow_schema, typing)
                continue
            end = answer.last_stable_offset if read_committed and answer.last_stable_offset >= 0 \
                else answer.high_watermark
            if end <= position:
                report_data_loss(f"Cannot fetch offsets {position} until {r.until_offset} of {where}: the log ends "
                                 f"at offset {end}", options.fail_on_data_loss)
                done = True
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"Fetch of {where} at offset {position} returned no records for "
                                   f"kafkaConsumer.pollTimeoutMs={options.poll_timeout_ms} although the log ends at "
                                   f"{end}")
            time.sleep(_BACKOFF_S)
        done = True
    finally:
        prefetch.close(keep=done)


class _Prefetch:
    """The next Fetch of a range, sent by one helper thread while Spark consumes the current RecordBatch.

    ``start(offset)`` sends the Fetch at ``offset`` in the thread; ``take(offset)`` returns its answer (or
    raises its error), fetching at once when none was started there. One request at a time: the connection is
    only used by the thread between ``start`` and ``take``. ``close`` aborts a request in flight (the
    connection is shut down, so a blocked read fails at once), joins the thread and closes the connection:
    a reader that fails or is closed by Spark leaves no thread and no socket behind; ``close(keep=True)``
    with nothing in flight (a range read to its end) hands the connection to the next task instead.
    """

    def __init__(self, fetcher: "_LeaderConnection", **fetch_args) -> None:
        self._fetcher, self._fetch_args = fetcher, fetch_args
        self._thread = None
        self._offset = None
        self._answer = self._error = None

    def _run(self, offset: int, deadline: float) -> None:
        try:
            self._answer = self._fetcher.fetch(offset, deadline=deadline, **self._fetch_args)
        except BaseException as exc:  # noqa: BLE001 - handed to ``take``
            self._error = exc

    def start(self, offset: int, deadline: float) -> None:
        import threading
        self._join()  # a Fetch still in flight (sent at another offset): its answer is not needed
        self._offset, self._answer, self._error = offset, None, None
        self._thread = threading.Thread(target=self._run, args=(offset, deadline), daemon=True,
                                        name=f"pylog-prefetch-{self._fetcher.where}")
        self._thread.start()

    def take(self, offset: int, deadline: float):
        if self._thread is None or self._offset != offset:
            self._join()
            return self._fetcher.fetch(offset, deadline=deadline, **self._fetch_args)
        self._join()
        answer, error = self._answer, self._error
        self._answer = self._error = None
        if error is not None:
            raise error
        return answer

    def _join(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def close(self, keep: bool = False) -> None:
        if self._thread is not None:
            self._fetcher.abort()
            self._join()
        elif keep:
            self._fetcher.release()
        self._fetcher.close()


class _LeaderConnection:
    """A connection to the leader of one partition, found through the bootstrap servers."""

    def __init__(self, options: SourceOptions, topic: str, partition: int) -> None:
        from connector.wire import sasl_login_for, ssl_context_for

        self._options = options
        self._topic, self._partition = topic, partition
        config = options.client_kwargs
        self._timeout_s = int(config.get("request_timeout_ms", 30_000)) / 1000
        self._client_id = str(config.get("client_id", "pylog-source-executor"))
        self._ssl = ssl_context_for(config)
        self._sasl = sasl_login_for(config)
        self._connection = None
        self._aborted = False
        self.where = f"{topic}-{partition}"
        self._leader_key = (options.bootstrap_servers, self._client_id, repr(sorted(map(repr, config.items()))),
                            topic, partition)

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def release(self) -> None:
        """Hand the connection (no request in flight) to ``IDLE_CONNECTIONS`` for the next task."""
        connection, self._connection = self._connection, None
        if connection is not None and not self._aborted:
            self._keep(connection)
        elif connection is not None:
            connection.close()

    def _keep(self, connection) -> None:
        from connector.wire import IDLE_CONNECTIONS
        IDLE_CONNECTIONS.put(self._pool_key(connection.address), connection)

    def _pool_key(self, address: str) -> tuple:
        from connector.wire import ConnectionPool
        return ConnectionPool.key(address, self._client_id, self._options.client_kwargs)

    def _open(self, host: str, port: int):
        """An idle connection to ``host:port`` from an earlier task, else a new one."""
        from connector.wire import IDLE_CONNECTIONS, BrokerConnection
        connection = IDLE_CONNECTIONS.take(self._pool_key(f"{host}:{port}"))
        if connection is None:
            connection = BrokerConnection(host, port, timeout_s=self._timeout_s, client_id=self._client_id,
                                          ssl_context=self._ssl, sasl=self._sasl)
        return connection

    def abort(self) -> None:
        """From another thread: fail the request in flight and refuse to reconnect (the reader is closing)."""
        self._aborted = True
        connection = self._connection
        if connection is not None:
            connection.abort()

    def reset(self, deadline: float, why: str) -> None:
        """Drop the connection (and the leader it led to) after a retriable failure; raise when ``deadline`` has
        passed."""
        _LEADERS.pop(self._leader_key, None)
        self.close()
        if self._aborted:
            raise BrokenPipeError(f"{why}; the reader of {self.where} is closing")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{why}; gave up after kafkaConsumer.pollTimeoutMs={self._options.poll_timeout_ms}")
        log.info("%s; retrying", why)
        time.sleep(_BACKOFF_S)

    def fetch(self, offset: int, *, isolation: int, max_bytes: int, partition_max_bytes: int, deadline: float):
        from connector.wire import BrokerUnavailable
        while True:
            try:
                return self._leader(deadline).fetch(
                    self._topic, self._partition, offset, isolation_level=isolation, max_wait_ms=500,
                    max_bytes=max_bytes, partition_max_bytes=partition_max_bytes)
            except BrokerUnavailable as exc:
                self.reset(deadline, str(exc))

    def list_offset(self, timestamp: int, isolation: int, deadline: float) -> int:
        from connector.wire import BrokerUnavailable
        while True:
            try:
                code, offset = self._leader(deadline).list_offset(self._topic, self._partition, timestamp, isolation)
            except BrokerUnavailable as exc:
                self.reset(deadline, str(exc))
                continue
            if code == 0:
                return offset
            if not retriable(code):
                raise RuntimeError(f"ListOffsets of {self._topic}-{self._partition} failed: "
                                   f"{refused(code, self._options, self._topic)}")
            self.reset(deadline, f"ListOffsets of {self._topic}-{self._partition} failed with error code {code}")

    def _leader(self, deadline: float):
        if self._connection is not None:
            return self._connection
        if self._aborted:
            raise BrokenPipeError(f"the reader of {self.where} is closing")
        connection = self._connect()
        if self._aborted:  # closed while this thread connected
            self.close()
            raise BrokenPipeError(f"the reader of {self.where} is closing")
        return connection

    def _connect(self):
        from connector.wire import BrokerUnavailable
        known = _LEADERS.get(self._leader_key)
        if known is not None:
            try:
                self._connection = self._open(*known)
                return self._connection
            except BrokerUnavailable:
                _LEADERS.pop(self._leader_key, None)
        last_error = None
        for server in self._options.bootstrap_servers.split(","):
            host, port = split_address(server)
            try:
                bootstrap = self._open(host, port)
            except BrokerUnavailable as exc:
                last_error = exc
                continue
            try:
                brokers, topic = bootstrap.metadata(self._topic)
            except BrokerUnavailable as exc:
                bootstrap.close()
                last_error = exc
                continue
            leader = None
            if topic is not None and topic.error_code == 0:
                leader = next((p.leader_id for p in topic.partitions if p.partition_index == self._partition), None)
            if topic is None or topic.error_code in _GONE or leader is None:
                # Let the Fetch report the partition as gone, through the normal error path.
                self._connection = bootstrap
                return bootstrap
            if leader < 0 or leader not in brokers:
                bootstrap.close()
                last_error = BrokerUnavailable(f"{self._topic}-{self._partition} has no leader")
                continue
            host, port = brokers[leader]
            if len(_LEADERS) >= _MAX_LEADERS:
                _LEADERS.clear()
            _LEADERS[self._leader_key] = (host, port)
            if bootstrap.address == f"{host}:{port}":
                self._connection = bootstrap
            else:
                self._keep(bootstrap)   # its Metadata was answered: nothing in flight
                self._connection = self._open(host, port)
            return self._connection
        raise last_error or BrokerUnavailable("no bootstrap server configured")
