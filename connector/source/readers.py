"""The source's readers: ``PylogStreamReader`` (micro-batches) and ``PylogBatchReader`` (``spark.read``).

Theory of operation: ``connector.datasource.PylogDataSource`` builds a
reader from the parsed ``SourceOptions``. The stream reader lives in one
long-running driver-side Python process per query: it asks the brokers for
partitions and offsets (``connector.source.offset_reader``), plans each
micro-batch as offset ranges (``connector.source.offsets``) and copies
the progress to a consumer group (below). Spark
pickles the reader and each ``RangeInputPartition`` to executors, where
``read`` fetches the range with raw Fetch requests and yields Arrow
RecordBatches (``connector.source.partition_reader``).

The consumer group: ``groupId`` (or ``kafka.group.id``) when given; else each
query gets its own, ``<groupIdPrefix>-<hash of the subscription>-<token>``,
the token drawn by ``initialOffset``. Spark tells a Python source nothing
about its query (no checkpoint location, no query id), so the group's name
travels in the query's offsets (``offsets.with_group``: a key Spark's own
connector reads as a topic without partitions), which Spark checkpoints and
hands back on restart; checkpoints written without it (by ``format("kafka")``
or an early pylog) keep the old shared default, the hash alone.

Group commits and the handoff: Spark calls ``commit(end)`` for batch N only
while it constructs batch N+1, after ``latestOffset(start=end of N)``; and it
calls ``latestOffset`` only once the previous batch completed (its commit
log is written). So ``latestOffset`` and ``partitions`` commit their
``start`` — a completed batch's end — together with, per partition, the end
of the batch now planned from it (``"next"`` in the metadata,
``connector.source.offsets.group_metadata``). Nothing Spark tells a Python
source says that the last planned batch completed: a query stopped in a
trigger interval's wait after a batch, during a batch, or whose driver died,
leaves the group at the start of its last planned batch with that batch's
end beside it. ``connector.stop_query`` stops a query and commits the end of
its last completed batch from the query's progress (exact); a query started
with ``startingOffsets=group`` logs a WARNING naming the ranges of a batch
that was never confirmed (``connector.source.offset_reader``).

Progress: Spark 4.3's Python streaming API has no source description and no
``metrics()`` (``PythonMicroBatchStream`` implements neither
``ReportsSourceMetrics`` nor a ``toString``), so ``lastProgress`` names the
source ``PythonMicroBatchStream...@hash`` with empty metrics. What it does
carry is ``endOffset`` and, from ``reportLatestOffset``, ``latestOffset``:
``connector.progress`` turns those into Spark's Kafka metrics
(``avgOffsetsBehindLatest``, ...), and every planned batch logs them at INFO.
"""
from __future__ import annotations

import logging
import os
import secrets
import socket
import time
from typing import Iterator

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, ReadMinRows, \
    SupportsTriggerAvailableNow
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from connector.options import SourceOptions
from connector.source.offsets import (
    OffsetRange,
    from_json_dict,
    group_metadata,
    group_of,
    offsets_behind,
    plan_ranges,
    rate_limit,
    split_ranges,
    to_json_dict,
    with_group,
)

log = logging.getLogger(__name__)


def source_schema(include_headers: bool = False, options: SourceOptions | None = None) -> StructType:
    """Spark's Kafka source schema (``headers`` only with includeHeaders=true); with typed sides in ``options``
    (resolved), ``key``/``value`` take their schema's type and ``<side>SchemaId`` / ``_corrupt_<side>`` follow."""
    types, extra = {}, []
    if options is not None:
        from connector.typed.columns import typed_fields
        types, extra = typed_fields(options)
    fields = [
        StructField("key", types.get("key", BinaryType())),
        StructField("value", types.get("value", BinaryType())),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", ArrayType(StructType([
            StructField("key", StringType()), StructField("value", BinaryType())]))))
    return StructType(fields + extra)


def _read(partition: InputPartition, schema: StructType) -> Iterator:
    from connector.source.partition_reader import RangeInputPartition, read_range
    if not isinstance(partition, RangeInputPartition):  # Spark's placeholder when a batch has no ranges
        return iter(())
    from pyspark.sql.pandas.types import to_arrow_schema
    return read_range(partition, to_arrow_schema(schema, timezone="UTC"))


def _input_partitions(options: SourceOptions, ranges) -> list:
    from connector.source.partition_reader import RangeInputPartition
    ranges = split_ranges(ranges, options.min_partitions, options.max_records_per_partition)
    return [RangeInputPartition(r, options) for r in ranges]


class _DriverState:
    """Mixin: a lazily created ``OffsetReader`` that is never pickled to executors."""

    options: SourceOptions
    _offset_reader = None

    @property
    def offset_reader(self):
        if self._offset_reader is None:
            from connector.source.offset_reader import OffsetReader
            self._offset_reader = OffsetReader(self.options)
        return self._offset_reader

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_offset_reader"] = None
        return state


class PylogStreamReader(_DriverState, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader: offsets ``{"topic": {"partition": next offset}}``, connector/schemas/source-offsets.json."""

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema
        self._latest = None                   # last latest offsets seen, for reportLatestOffset
        self._available_now = False
        self._available_now_target = None     # latest offsets snapshotted for Trigger.AvailableNow
        self._last_trigger_ms = 0.0           # for minOffsetsPerTrigger / maxTriggerDelay
        self._group_commit = None             # (group, offsets, planned ends) last committed to the group
        self._run = run_identity()            # who commits, in the group commits' metadata
        self._initial = None                  # initialOffset's answer

    def initialOffset(self) -> dict:
        """Resolved once per reader: Spark asks twice, and the group's token and handoff WARNING are drawn once."""
        if self._initial is None:
            reader = self.offset_reader
            offsets = reader.resolve_bound(self.options.starting, reader.partitions(), starting=True,
                                           option=_starting_option_name(self.options))
            group = self.options.group_id if self.options.group_id_set else \
                f"{self.options.group_id}-{secrets.token_hex(4)}"
            log.info("pylog source %s starts at %s; consumer group '%s' follows its progress",
                     self.options.subscription(), offsets, group)
            self._initial = self._to_json(offsets, group)
        return self._initial

    def _group_of(self, offset: dict) -> str:
        """The consumer group of the query whose offset this is (see the module docstring)."""
        if self.options.group_id_set:
            return self.options.group_id
        return group_of(offset) or self.options.group_id

    def _to_json(self, offsets: dict, group: str) -> dict:
        result = to_json_dict(offsets)
        return with_group(result, group) if group != self.options.group_id else result

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now = True

    def getDefaultReadLimit(self) -> ReadLimit:
        # Python has no composite read limit: with both options set, the minimum is applied from the
        # options in latestOffset while the engine carries the maximum.
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.min_offsets_per_trigger is not None:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        reader = self.offset_reader
        start_offsets = from_json_dict(start)
        group = self._group_of(start)
        if self._available_now:
            if self._available_now_target is None:
                self._available_now_target = reader.latest(reader.partitions())
            latest = self._available_now_target
        else:
            latest = reader.latest(reader.partitions())
        self._latest = latest
        end = self._plan_end(start_offsets, latest, limit)
        # Spark plans the next batch from the end of the last completed one: ``start`` is complete, ``end``
        # (when it differs) is the batch Spark is about to run (see the module docstring).
        self._commit_to_group(group, start_offsets, end)
        if end is None:
            return start
        if end != start_offsets:
            log.info("pylog source %s: next batch ends at %s; offsets behind latest after it: %s",
                     self.options.subscription(), to_json_dict(end), offsets_behind(end, latest))
        return self._to_json(end, group)

    def _plan_end(self, start_offsets: dict, latest: dict, limit: ReadLimit) -> dict | None:
        """The next batch's end offsets under ``limit``, or None to wait (minOffsetsPerTrigger)."""
        if isinstance(limit, ReadAllAvailable):
            return latest
        min_rows = limit.min_rows if isinstance(limit, ReadMinRows) else self.options.min_offsets_per_trigger
        if min_rows is not None and not self._available_now and self._delay_batch(min_rows, start_offsets, latest):
            return None
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else self.options.max_offsets_per_trigger
        if max_rows is None:
            return latest
        new = [tp for tp in latest if tp not in start_offsets]
        earliest_of_new = self.offset_reader.earliest(new) if new else {}
        return rate_limit(max_rows, start_offsets, latest, earliest_of_new)

    def _delay_batch(self, min_rows: int, start: dict, latest: dict) -> bool:
        """Spark's delayBatch: wait for minOffsetsPerTrigger new offsets, at most maxTriggerDelay."""
        now_ms = time.time() * 1000
        if now_ms - self._last_trigger_ms >= self.options.max_trigger_delay_ms:
            self._last_trigger_ms = now_ms
            return False
        available = sum(end - start.get(tp, 0) for tp, end in latest.items())
        if available < min_rows:
            return True
        self._last_trigger_ms = now_ms
        return False

    def reportLatestOffset(self) -> dict | None:
        return to_json_dict(self._latest) if self._latest else None

    def partitions(self, start: dict, end: dict) -> list:
        start_offsets, end_offsets = from_json_dict(start), from_json_dict(end)
        if start_offsets == end_offsets:
            return []
        # also a batch re-run after a restart, which Spark plans without a latestOffset call
        self._commit_to_group(self._group_of(end), start_offsets, end_offsets)
        new = set(end_offsets) - set(start_offsets)
        earliest_of_new = {}
        if new:
            reader = self.offset_reader
            earliest_of_new = reader.earliest(sorted(new & set(reader.partitions())))
        from connector.source.partition_reader import report_data_loss
        ranges = plan_ranges(start_offsets, end_offsets, earliest_of_new,
                             lambda message: report_data_loss(message, self.options.fail_on_data_loss))
        return _input_partitions(self.options, ranges)

    def read(self, partition: InputPartition) -> Iterator:
        return _read(partition, self.schema)

    def commit(self, end: dict) -> None:
        """Copy the committed batch's end offsets to the consumer group (failures are logged, never raised).

        Spark calls it after ``latestOffset`` already committed ``end`` with the next batch beside it: then
        nothing is committed, so that the next batch's end stays in the group's metadata."""
        offsets = from_json_dict(end)
        if self._group_commit is None or self._group_commit[1] != offsets:
            self._commit_to_group(self._group_of(end), offsets, None)

    def _commit_to_group(self, group: str, offsets: dict, planned: dict | None) -> None:
        """Commit ``offsets`` (complete) with, per partition, the end of the batch ``planned`` from them."""
        nexts = {tp: planned[tp] for tp in offsets if planned and planned.get(tp, offsets[tp]) != offsets[tp]}
        key = (group, offsets, nexts)
        if not self.options.commit_offsets_to_group or not offsets or key == self._group_commit:
            return
        if nexts:
            self._run["batches"] = self._run.get("batches", 0) + 1
        self._run["at"] = int(time.time() * 1000)
        metadata = {tp: group_metadata(self._run, nexts.get(tp)) for tp in offsets}
        try:
            self.offset_reader.commit_group_offsets(group, offsets, metadata)
            self._group_commit = (group, dict(offsets), nexts)
        except Exception as exc:  # a lag-reporting side channel must never fail the query
            log.warning("pylog source: committing offsets %s to consumer group '%s' failed: %r",
                        to_json_dict(offsets), group, exc)

    def stop(self) -> None:
        if self._offset_reader is not None:
            self._offset_reader.close()


class PylogBatchReader(_DriverState, DataSourceReader):
    """Batch reader: from startingOffsets (default earliest) to endingOffsets (default latest)."""

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema

    def partitions(self) -> list:
        reader = self.offset_reader
        try:
            partitions = reader.partitions()
            start = reader.resolve_bound(self.options.starting, partitions, starting=True,
                                         option=_starting_option_name(self.options))
            end = reader.resolve_bound(self.options.ending, partitions, starting=False,
                                       option=_ending_option_name(self.options))
        finally:
            reader.close()
        ranges = []
        for tp in sorted(end):
            if start[tp] > end[tp]:
                raise ValueError(f"Beginning offset {start[tp]} is after the ending offset {end[tp]} for topic "
                                 f"{tp[0]} partition {tp[1]}. You either provided an invalid fromOffset, or the "
                                 "Kafka topic has been damaged")
            ranges.append(OffsetRange(tp[0], tp[1], start[tp], end[tp]))
        return _input_partitions(self.options, ranges)

    def read(self, partition: InputPartition) -> Iterator:
        return _read(partition, self.schema)


def run_identity() -> dict:
    """Who commits to the group: a token drawn per run of a stream reader, the driver's host and pid, the start
    time (ms) — shown by ``pylog groups list/describe``."""
    return {"run": secrets.token_hex(4), "host": socket.gethostname()[:64], "pid": os.getpid(),
            "started": int(time.time() * 1000)}


def _starting_option_name(options: SourceOptions) -> str:
    return {"timestamp": "startingTimestamp", "timestamps": "startingOffsetsByTimestamp"}.get(
        options.starting.kind, "startingOffsets")


def _ending_option_name(options: SourceOptions) -> str:
    return {"timestamp": "endingTimestamp", "timestamps": "endingOffsetsByTimestamp"}.get(
        options.ending.kind, "endingOffsets")
