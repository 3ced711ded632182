"""Kafka record batches (bytes of a Fetch response) -> one Arrow RecordBatch in the source's row schema.

Theory of operation: ``decode`` frames the records bytes into batches with
aiokafka's ``MemoryRecords`` (their headers: offsets, control and
transactional flags), keeps the records in [low, high) and appends their
fields to plain column lists (offsets and timestamp types as per-batch
runs); ``to_record_batch`` turns them into Arrow arrays in one call per
column (constant columns — topic, partition — are ``pa.repeat``\\ ed,
timestamps are scaled from milliseconds to microseconds in one vectorised
step).

The records of a v2 batch are read by the one definition of a record,
Kafka's ``DefaultRecord.readFrom`` (``broker_sim.protocol.records``: the
attributes are one byte, varints at most 5 bytes, any negative key or value
length null), never by aiokafka's record reader, which reads the attributes
as a varint and so could read a key and value other than those the broker's
validator and every Kafka consumer read in the same bytes. Two compiled twins of it in
``_records_arrow.c`` read them: ``decode_batches`` straight into Arrow
buffers (whole batches without headers, ``decode(compiled=True)``; a
compressed one once aiokafka's codecs have decompressed it), ``read_records``
into lists (the per-record path: partial batches, headers, typed reads); without the extension, ``walk_records`` of that module. What Kafka
refuses raises ValueError on every path. Legacy batches (magic 0 and 1) are
aiokafka's ``LegacyRecordBatch``, a different format.

A compacted batch may hold fewer records than its offset span, or none (the
empty batch the log cleaner keeps of an idempotent producer's last batch): it
gives only the rows it holds, and ``next_offset`` still moves past its span.

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
# RecordBatch v2 header: base offset 8, batch length 4 (bytes after it), partition leader epoch 4, magic 1,
# crc 4, attributes 2, last offset delta 4, base/max timestamp 8+8, producer id 8, epoch 2, base sequence 4,
# record count 4. Legacy message sets (magic 0/1) have the length and the magic at the same places.
_LOG_OVERHEAD = 12
_BATCH_LENGTH = struct.Struct(">i")
_MAGIC_AT = 16
_ABORT = 0
# the v2 header fields a batch's rows need: base offset, attributes, base and max timestamp, record count
_V2_HEADER = struct.Struct(">q13xh4xqq14xi")
_V2_HEADER_SIZE = 61
_COMPRESSION = 0x07
_LOG_APPEND_TIME = 0x08

try:
    from connector.source import _records_arrow as _compiled
except ImportError:  # built without a compiler: aiokafka's reader and the per-record path only
    _compiled = None


@dataclass
class Columns:
    """Decoded records as column lists, plus where the next fetch should start.

    Offsets and timestamp types are kept as runs, not one Python int per
    record: a gapless batch contributes one ``range`` and one (type, count)
    pair, which become NumPy arrays without a per-record step.
    """

    timestamps: list = field(default_factory=list)
    keys: list = field(default_factory=list)
    values: list = field(default_factory=list)
    headers: list | None = None
    next_offset: int = -1
    offset_runs: list = field(default_factory=list)  # ``range``\ s (gapless batches) and lists of offsets
    type_runs: list = field(default_factory=list)    # (timestamp type, number of records)
    chunks: list | None = None  # ``decode(compiled=True)``: the rows, in order, as Columns and _CompiledRows

    def __len__(self) -> int:
        if self.chunks is not None:
            return sum(len(chunk) for chunk in self.chunks)
        return len(self.timestamps)

    @property
    def offsets(self) -> list[int]:
        return [offset for run in self.offset_runs for offset in run]

    @property
    def timestamp_types(self) -> list[int]:
        return [kind for kind, count in self.type_runs for _ in range(count)]


def decode(records: bytes | None, low: int, high: int, *, aborted_transactions=None, read_committed: bool = False,
           include_headers: bool = False, compiled: bool = False) -> Columns:
    """Records with offsets in [low, high) from ``records``; ``next_offset`` is past the last batch seen (-1: none).

    ``compiled``: decode whole v2 batches with the C extension (when built, and without headers) into
    ``Columns.chunks``, for ``to_record_batch`` only (the column lists stay empty); a compressed one is
    decompressed first.
    Raises ValueError for records Kafka refuses to read."""
    from aiokafka.record.memory_records import MemoryRecords

    columns = Columns(headers=[] if include_headers else None)
    if not records:
        return columns
    spans = compiled and _compiled is not None and not include_headers
    if spans:
        columns.chunks = []
    target = columns  # the Columns the per-record path appends to (compiled: the last chunk)
    aborted_queue = [(a.first_offset, a.producer_id) for a in aborted_transactions or ()] if read_committed else []
    heapq.heapify(aborted_queue)
    aborted_producers: set[int] = set()
    memory = MemoryRecords(records)
    next_offset = -1
    batch_start = 0  # where ``batch``'s header starts in ``records``
    while memory.has_next():
        batch = memory.next_batch()
        if batch is None:  # a partial batch at the end of the response (fetch size limit)
            break
        header_at = batch_start
        batch_start += _LOG_OVERHEAD + _BATCH_LENGTH.unpack_from(records, header_at + 8)[0]
        batch_next = batch.next_offset
        if batch_next <= low:
            next_offset = batch_next
            continue
        if read_committed:
            while aborted_queue and aborted_queue[0][0] < batch_next:
                aborted_producers.add(heapq.heappop(aborted_queue)[1])
            if batch.is_control_batch:
                if batch.is_transactional and batch.producer_id in aborted_producers and \
                        _is_abort(batch, records, header_at, batch_start):
                    aborted_producers.discard(batch.producer_id)
                next_offset = batch_next
                continue
            if batch.is_transactional and batch.producer_id in aborted_producers:
                next_offset = batch_next
                continue
        elif batch.is_control_batch:
            next_offset = batch_next
            continue
        whole = low <= batch.base_offset and batch_next <= high
        v2 = whole and records[header_at + _MAGIC_AT] == 2
        codec = _V2_HEADER.unpack_from(records, header_at)[1] & _COMPRESSION if v2 else 0
        if spans and v2 and not codec:
            if not columns.chunks or not isinstance(columns.chunks[-1], list):
                columns.chunks.append([])
            columns.chunks[-1].append(_span(records, header_at, batch_start, batch.timestamp_type))
        elif spans and v2:   # decompressed whole, then decoded by the C extension like an uncompressed batch
            columns.chunks.append(_decompressed_rows(records, header_at, batch_start, codec, batch.timestamp_type))
        else:
            if spans:
                if not columns.chunks or isinstance(columns.chunks[-1], list):
                    columns.chunks.append(Columns())
                target = columns.chunks[-1]
            _append_batch(batch, records, header_at, batch_start, whole, low, high, target)
        next_offset = batch_next
        if batch_next >= high:
            break
    columns.next_offset = next_offset
    if spans:  # a batch Kafka refuses raises ValueError here, as on the per-record path
        columns.chunks = [_CompiledRows(records, chunk) if isinstance(chunk, list) else chunk
                          for chunk in columns.chunks]
    return columns


def next_fetch_offset(records: bytes | None, high: int) -> int:
    """Where ``decode(records, low, high)`` will put ``next_offset``, read from the v2 batch headers alone (the C
    extension's ``next_offset``), so the next Fetch can be sent before the decode; -1 when only the decode can
    tell (a legacy batch, no whole batch, or no C extension)."""
    if _compiled is None or not records:
        return -1
    return _compiled.next_offset(records, high)


def _append_batch(batch, records: bytes, header_at: int, batch_end: int, whole: bool, low: int, high: int,
                  columns: Columns) -> None:
    """The per-record path: ``batch``'s records in [low, high) appended to ``columns``' lists (``whole``: all
    of them are)."""
    timestamps, keys, values, headers = columns.timestamps, columns.keys, columns.values, columns.headers
    before = len(timestamps)
    if records[header_at + _MAGIC_AT] != 2:
        _append_legacy(batch, low, high, columns)
    else:
        offsets, stamps, batch_keys, batch_values, pairs = read_v2(records, header_at, batch_end, headers is not None)
        base_offset = batch.base_offset
        if whole:
            timestamps += stamps
            keys += batch_keys
            values += batch_values
            if headers is not None:
                headers += pairs
            columns.offset_runs.append(range(base_offset, base_offset + len(stamps)) if offsets is None else offsets)
        else:
            kept = []
            for index in range(len(stamps)):
                offset = base_offset + index if offsets is None else offsets[index]
                if offset < low:
                    continue
                if offset >= high:
                    break
                kept.append(offset)
                timestamps.append(stamps[index])
                keys.append(batch_keys[index])
                values.append(batch_values[index])
                if headers is not None:
                    headers.append(pairs[index])
            columns.offset_runs.append(kept)
    columns.type_runs.append((batch.timestamp_type, len(timestamps) - before))


def read_v2(records: bytes, header_at: int, batch_end: int, want_headers: bool = False) -> tuple:
    """The records of the v2 batch ``records[header_at:batch_end]`` as Kafka reads them: (offsets, or None when
    they are base offset + 0, 1, 2, ...; timestamps in ms; keys; values; headers, (str key, value) lists with
    the keys decoded as Java decodes them, or None unless ``want_headers``). A compressed batch is decompressed
    by aiokafka's codecs first. Raises ValueError for what Kafka refuses (a stream that does not decompress
    included)."""
    if batch_end - header_at < _V2_HEADER_SIZE:
        raise ValueError(f"record batch at byte {header_at}: {batch_end - header_at} bytes is shorter than a "
                         f"v2 batch header")
    (base_offset, attributes, base_timestamp, max_timestamp,
     count) = _V2_HEADER.unpack_from(records, header_at)
    codec = attributes & _COMPRESSION
    if codec:
        data = _decompress(memoryview(records)[header_at + _V2_HEADER_SIZE:batch_end], codec, base_offset)
        start, end = 0, len(data)
    else:
        data, start, end = records, header_at + _V2_HEADER_SIZE, batch_end
    log_append = bool(attributes & _LOG_APPEND_TIME)
    if _compiled is not None:
        *read, not_utf8 = _compiled.read_records(data, start, end, count, base_offset, base_timestamp, log_append,
                                                 max_timestamp, want_headers)
        if not_utf8:  # header keys that are not UTF-8, decoded as Kafka's Java String decodes them
            from broker_sim.protocol.records import java_utf8

            read[4] = [[(java_utf8(k) if isinstance(k, bytes) else k, v) for k, v in pairs] for pairs in read[4]]
        return tuple(read)
    return _walk(data, start, end, count, base_offset, base_timestamp, log_append, max_timestamp, want_headers,
                 bool(codec))


def _decompress(payload: memoryview, codec: int, base_offset: int) -> bytes:
    from aiokafka import codec as codecs

    decoders = {1: codecs.gzip_decode, 2: codecs.snappy_decode, 3: codecs.lz4_decode, 4: codecs.zstd_decode}
    if codec not in decoders:
        raise ValueError(f"record batch at offset {base_offset}: unknown compression type id {codec}")
    try:
        return bytes(decoders[codec](payload.tobytes()))
    except Exception as exc:  # each codec library raises its own errors for a corrupt stream
        raise ValueError(f"record batch at offset {base_offset}: the {codec} stream does not decompress: "
                         f"{exc!r}") from None


def _walk(data, start: int, end: int, count: int, base_offset: int, base_timestamp: int, log_append: bool,
          max_timestamp: int, want_headers: bool, compressed: bool) -> tuple:
    """``read_records`` of the C extension, by the one definition's pure walk (a build without a compiler)."""
    import kafka.errors as Errors

    from broker_sim.protocol.records import (
        WANT_HEADERS, WANT_KEYS, WANT_OFFSETS, WANT_TIMESTAMPS, WANT_VALUES, java_long, java_utf8, walk_records)

    want = WANT_KEYS | WANT_VALUES | WANT_TIMESTAMPS | WANT_OFFSETS | (WANT_HEADERS if want_headers else 0)
    if count == 0:  # Kafka's iterator reads nothing of a batch that claims no records
        return None, [], [], [], [] if want_headers else None
    try:
        *_, keys, values, deltas, pairs, offset_deltas = walk_records(
            memoryview(data)[start:end], count, want, compressed=compressed)
    except (Errors.InvalidRecordError, Errors.UnknownError) as exc:
        raise ValueError(f"record batch at offset {base_offset}: {exc}") from None
    timestamps = [max_timestamp] * len(deltas) if log_append else [java_long(base_timestamp + d) for d in deltas]
    offsets = None if offset_deltas == list(range(len(offset_deltas))) else [
        java_long(base_offset + d) for d in offset_deltas]
    headers = [[(java_utf8(k), v) for k, v in record] for record in pairs] if want_headers else None
    return offsets, timestamps, keys, values, headers


def _append_legacy(batch, low: int, high: int, columns: Columns) -> None:
    """A legacy message set (magic 0 or 1) by aiokafka's LegacyRecordBatch reader."""
    offsets = []
    for record in batch:
        offset = record.offset
        if offset < low:
            continue
        if offset >= high:
            break
        offsets.append(offset)
        columns.timestamps.append(record.timestamp)
        columns.keys.append(record.key)
        columns.values.append(record.value)
        if columns.headers is not None:
            columns.headers.append(record.headers)
    columns.offset_runs.append(offsets)


def _decompressed_rows(records: bytes, header_at: int, batch_end: int, codec: int,
                       timestamp_type: int) -> "_CompiledRows":
    """The compressed v2 batch at ``header_at``, decompressed and decoded into Arrow arrays by the C extension:
    its ``_span``, over the decompressed records instead of the batch's bytes."""
    start, end, base_offset, *rest = _span(records, header_at, batch_end, timestamp_type)
    data = _decompress(memoryview(records)[start:end], codec, base_offset)
    return _CompiledRows(data, [(0, len(data), base_offset, *rest)])


def _span(records: bytes, header_at: int, batch_end: int, timestamp_type: int) -> tuple:
    """The C decoder's description of the uncompressed v2 batch at ``header_at`` (see _records_arrow.c)."""
    (base_offset, attributes, base_timestamp, max_timestamp,
     count) = _V2_HEADER.unpack_from(records, header_at)
    return (header_at + _V2_HEADER_SIZE, batch_end, base_offset, base_timestamp, attributes & _LOG_APPEND_TIME,
            max_timestamp, count, timestamp_type)


class _CompiledRows:
    """Rows of a run of uncompressed v2 batches, decoded by the C extension into Arrow arrays."""

    def __init__(self, records: bytes, spans: list) -> None:
        import pyarrow as pa

        (n, key_offsets, key_data, key_valid, key_nulls, value_offsets, value_data, value_valid, value_nulls,
         offsets, timestamps_us, types) = _compiled.decode_batches(records, spans)
        self.rows = n
        buffer = pa.py_buffer
        self.key = pa.Array.from_buffers(pa.binary(), n, [key_valid and buffer(key_valid), buffer(key_offsets),
                                                          buffer(key_data)], null_count=key_nulls)
        self.value = pa.Array.from_buffers(pa.binary(), n, [value_valid and buffer(value_valid),
                                                            buffer(value_offsets), buffer(value_data)],
                                           null_count=value_nulls)
        self.offset = pa.Array.from_buffers(pa.int64(), n, [None, buffer(offsets)], null_count=0)
        self.timestamp_us = pa.Array.from_buffers(pa.int64(), n, [None, buffer(timestamps_us)], null_count=0)
        self.timestamp_type = pa.Array.from_buffers(pa.int32(), n, [None, buffer(types)], null_count=0)

    @classmethod
    def from_columns(cls, columns: Columns, schema) -> "_CompiledRows":
        """The same arrays from the per-record path's lists."""
        import numpy as np
        import pyarrow as pa

        rows = cls.__new__(cls)
        rows.rows = n = len(columns)
        rows.key = pa.array(columns.keys, type=pa.binary())
        rows.value = pa.array(columns.values, type=pa.binary())
        rows.offset = pa.array(_offsets_array(columns.offset_runs), type=pa.int64())
        rows.timestamp_us = pa.array(np.fromiter(columns.timestamps, dtype=np.int64, count=n) * 1000)
        rows.timestamp_type = pa.array(_types_array(columns.type_runs), type=pa.int32())
        return rows

    def __len__(self) -> int:
        return self.rows


def _is_abort(batch, records: bytes, header_at: int, batch_end: int) -> bool:
    """True when the control batch's first record is an abort marker (its key: version, type 0)."""
    if records[header_at + _MAGIC_AT] != 2:
        return False
    keys = read_v2(records, header_at, batch_end)[2]
    key = keys[0] if keys else None
    return key is not None and len(key) >= 4 and _CONTROL_KEY.unpack_from(key)[1] == _ABORT


def to_record_batch(topic: str, partition: int, columns: Columns, schema, typing=None):
    """An Arrow RecordBatch with exactly ``schema`` (from pyspark's ``to_arrow_schema``); ``typing``
    (``connector.typed.columns.RecordTyping``) decodes typed keys and values."""
    import numpy as np
    import pyarrow as pa

    if columns.chunks is not None:
        return _chunks_record_batch(topic, partition, columns, schema, typing)
    n = len(columns)
    timestamps_us = np.fromiter(columns.timestamps, dtype=np.int64, count=n) * 1000
    arrays = {}
    if typing is not None:
        offsets = []

        def where(i: int) -> str:
            if not offsets:
                offsets.extend(columns.offsets)
            return f"topic {topic} partition {partition} offset {offsets[i]}"
        arrays = typing.arrays(columns.keys, columns.values, where)
    if "key" not in arrays:
        arrays["key"] = pa.array(columns.keys, type=pa.binary())
    if "value" not in arrays:
        arrays["value"] = pa.array(columns.values, type=pa.binary())
    arrays.update({
        "topic": pa.repeat(pa.scalar(topic, type=pa.string()), n),
        "partition": pa.repeat(pa.scalar(partition, type=pa.int32()), n),
        "offset": pa.array(_offsets_array(columns.offset_runs), type=pa.int64()),
        "timestamp": pa.array(timestamps_us, type=schema.field("timestamp").type),
        "timestampType": pa.array(_types_array(columns.type_runs), type=pa.int32()),
    })
    if columns.headers is not None:
        arrays["headers"] = _headers_array(columns.headers, schema.field("headers").type)
    return pa.RecordBatch.from_arrays([arrays[name] for name in schema.names], schema=schema)


def _chunks_record_batch(topic: str, partition: int, columns: Columns, schema, typing):
    """``to_record_batch`` of ``decode(compiled=True)``'s Columns: each chunk's arrays, concatenated."""
    import pyarrow as pa

    parts = []
    for chunk in columns.chunks:
        if not isinstance(chunk, _CompiledRows):
            chunk = _CompiledRows.from_columns(chunk, schema)
        parts.append(chunk)
    if len(parts) <= 1:
        chunk = parts[0] if parts else _CompiledRows.from_columns(Columns(), schema)
    else:
        chunk = _CompiledRows.__new__(_CompiledRows)
        chunk.rows = sum(part.rows for part in parts)
        for name in ("key", "value", "offset", "timestamp_us", "timestamp_type"):
            setattr(chunk, name, pa.concat_arrays([getattr(part, name) for part in parts]))
    n = chunk.rows
    arrays = {}
    if typing is not None:
        keys, values, offsets = chunk.key.to_pylist(), chunk.value.to_pylist(), chunk.offset.to_pylist()
        arrays = typing.arrays(keys, values, lambda i: f"topic {topic} partition {partition} offset {offsets[i]}")
    arrays.setdefault("key", chunk.key)
    arrays.setdefault("value", chunk.value)
    arrays.update({
        "topic": pa.repeat(pa.scalar(topic, type=pa.string()), n),
        "partition": pa.repeat(pa.scalar(partition, type=pa.int32()), n),
        "offset": chunk.offset,
        "timestamp": chunk.timestamp_us.view(schema.field("timestamp").type),
        "timestampType": chunk.timestamp_type,
    })
    return pa.RecordBatch.from_arrays([arrays[name] for name in schema.names], schema=schema)


def _offsets_array(runs: list):
    import numpy as np
    if not runs:
        return np.empty(0, dtype=np.int64)
    return np.concatenate([np.arange(run.start, run.stop, dtype=np.int64) if isinstance(run, range)
                           else np.asarray(run, dtype=np.int64) for run in runs])


def _types_array(runs: list):
    import numpy as np
    kinds = np.fromiter((kind for kind, _ in runs), dtype=np.int32, count=len(runs))
    return np.repeat(kinds, np.fromiter((count for _, count in runs), dtype=np.int64, count=len(runs)))


def _headers_array(headers: list, list_type):
    """The ``headers`` column: a record without headers is null, as Spark's KafkaRecordToRowConverter makes it."""
    import pyarrow as pa

    offsets, keys, values, absent = [0], [], [], []
    for record_headers in headers:
        for key, value in record_headers:
            keys.append(key)
            values.append(value)
        offsets.append(len(keys))
        absent.append(not record_headers)
    struct_type = list_type.value_type
    items = pa.StructArray.from_arrays([pa.array(keys, type=pa.string()), pa.array(values, type=pa.binary())],
                                       fields=list(struct_type))
    return pa.ListArray.from_arrays(pa.array(offsets, type=pa.int32()), items, type=list_type,
                                    mask=pa.array(absent, type=pa.bool_()) if any(absent) else None)


def empty_record_batch(schema):
    import pyarrow as pa
    return pa.RecordBatch.from_arrays([pa.array([], type=f.type) for f in schema], schema=schema)
