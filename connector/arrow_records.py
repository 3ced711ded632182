"""Kafka record batches (bytes of a Fetch response) -> one Arrow RecordBatch in the source's row schema.

Theory of operation: ``decode`` walks the records bytes with aiokafka's
compiled (Cython) ``MemoryRecords`` / ``DefaultRecordBatch`` reader, keeps
the records in [low, high) and appends their fields to plain column lists;
``to_record_batch`` turns the lists into Arrow arrays in one call per column
(constant columns — topic, partition — are ``pa.repeat``\\ ed, timestamps are
scaled from milliseconds to microseconds in one vectorised step).

Under read_committed, control batches never become rows and batches of
aborted transactions are dropped using the Fetch response's
``aborted_transactions`` list, as Kafka's consumer does: a producer id joins
the aborted set when the fetch reaches its first aborted offset and leaves it
at that transaction's abort marker.
"""
from __future__ import annotations

import heapq
import struct
from dataclasses import dataclass, field

_CONTROL_KEY = struct.Struct(">hh")  # control record key: version, type (0 abort, 1 commit)
_ABORT = 0


@dataclass
class Columns:
    """Column lists of decoded records, plus where the next fetch should start."""

    offsets: list = field(default_factory=list)
    timestamps: list = field(default_factory=list)
    keys: list = field(default_factory=list)
    values: list = field(default_factory=list)
    timestamp_types: list = field(default_factory=list)
    headers: list | None = None
    next_offset: int = -1

    def __len__(self) -> int:
        return len(self.offsets)


def decode(records: bytes | None, low: int, high: int, *, aborted_transactions=None, read_committed: bool = False,
           include_headers: bool = False) -> Columns:
    """Records with offsets in [low, high) from ``records``; ``next_offset`` is past the last batch seen (-1: none)."""
    from aiokafka.record.memory_records import MemoryRecords

    columns = Columns(headers=[] if include_headers else None)
    if not records:
        return columns
    offsets, timestamps, keys, values, types = (columns.offsets, columns.timestamps, columns.keys, columns.values,
                                                columns.timestamp_types)
    headers = columns.headers
    aborted_queue = [(a.first_offset, a.producer_id) for a in aborted_transactions or ()] if read_committed else []
    heapq.heapify(aborted_queue)
    aborted_producers: set[int] = set()
    memory = MemoryRecords(records)
    next_offset = -1
    while memory.has_next():
        batch = memory.next_batch()
        if batch is None:  # a partial batch at the end of the response (fetch size limit)
            break
        batch_next = batch.next_offset
        if batch_next <= low:
            next_offset = batch_next
            continue
        if read_committed:
            while aborted_queue and aborted_queue[0][0] < batch_next:
                aborted_producers.add(heapq.heappop(aborted_queue)[1])
            if batch.is_control_batch:
                if batch.is_transactional and batch.producer_id in aborted_producers and _is_abort(batch):
                    aborted_producers.discard(batch.producer_id)
                next_offset = batch_next
                continue
            if batch.is_transactional and batch.producer_id in aborted_producers:
                next_offset = batch_next
                continue
        elif batch.is_control_batch:
            next_offset = batch_next
            continue
        timestamp_type = batch.timestamp_type
        before = len(offsets)
        for record in batch:
            offset = record.offset
            if offset < low:
                continue
            if offset >= high:
                break
            offsets.append(offset)
            timestamps.append(record.timestamp)
            keys.append(record.key)
            values.append(record.value)
            if headers is not None:
                headers.append(record.headers)
        types.extend([timestamp_type] * (len(offsets) - before))
        next_offset = batch_next
        if batch_next >= high:
            break
    columns.next_offset = next_offset
    return columns


def _is_abort(batch) -> bool:
    for record in batch:
        key = record.key
        return key is not None and len(key) >= 4 and _CONTROL_KEY.unpack_from(key)[1] == _ABORT
    return False


def to_record_batch(topic: str, partition: int, columns: Columns, schema):
    """An Arrow RecordBatch with exactly ``schema`` (from pyspark's ``to_arrow_schema``)."""
    import numpy as np
    import pyarrow as pa

    n = len(columns)
    timestamps_us = np.fromiter(columns.timestamps, dtype=np.int64, count=n) * 1000
    arrays = {
        "key": pa.array(columns.keys, type=pa.binary()),
        "value": pa.array(columns.values, type=pa.binary()),
        "topic": pa.repeat(pa.scalar(topic, type=pa.string()), n),
        "partition": pa.repeat(pa.scalar(partition, type=pa.int32()), n),
        "offset": pa.array(np.fromiter(columns.offsets, dtype=np.int64, count=n), type=pa.int64()),
        "timestamp": pa.array(timestamps_us, type=schema.field("timestamp").type),
        "timestampType": pa.array(np.asarray(columns.timestamp_types, dtype=np.int32), type=pa.int32()),
    }
    if columns.headers is not None:
        arrays["headers"] = _headers_array(columns.headers, schema.field("headers").type)
    return pa.RecordBatch.from_arrays([arrays[name] for name in schema.names], schema=schema)


def _headers_array(headers: list, list_type):
    import pyarrow as pa

    offsets, keys, values = [0], [], []
    for record_headers in headers:
        for key, value in record_headers:
            keys.append(key)
            values.append(value)
        offsets.append(len(keys))
    struct_type = list_type.value_type
    items = pa.StructArray.from_arrays([pa.array(keys, type=pa.string()), pa.array(values, type=pa.binary())],
                                       fields=list(struct_type))
    return pa.ListArray.from_arrays(pa.array(offsets, type=pa.int32()), items, type=list_type)


def empty_record_batch(schema):
    import pyarrow as pa
    return pa.RecordBatch.from_arrays([pa.array([], type=f.type) for f in schema], schema=schema)
