"""Decoding Fetch records bytes into Arrow: offset window, control batches, aborted transactions."""
from __future__ import annotations

import struct
from collections import namedtuple

import pyarrow as pa
from kafka.record.default_records import DefaultRecordBatchBuilder
from pyspark.sql.pandas.types import to_arrow_schema

from connector.source.arrow_records import decode, to_record_batch
from connector.source.readers import source_schema

Aborted = namedtuple("Aborted", "producer_id first_offset")
_ATTRIBUTES_AT = 21  # base offset 8, length 4, leader epoch 4, magic 1, crc 4
_CONTROL = 0x20


def _batch(base: int, values, *, producer_id=-1, transactional=False, control_type=None, headers=()):
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=transactional,
                                        producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                                        base_sequence=0 if producer_id >= 0 else -1, batch_size=1 << 20)
    if control_type is not None:
        builder.append(0, timestamp=1000, key=struct.pack(">hh", 0, control_type), value=b"\0\0\0\0\0\0", headers=[])
    for i, value in enumerate(values):
        builder.append(i, timestamp=1000 + base + i, key=b"k", value=value, headers=list(headers))
    data = bytearray(builder.build())
    struct.pack_into(">q", data, 0, base)
    if control_type is not None:
        (attributes,) = struct.unpack_from(">h", data, _ATTRIBUTES_AT)
        struct.pack_into(">h", data, _ATTRIBUTES_AT, attributes | _CONTROL)
    return bytes(data)


def _transactions():
    return b"".join([
        _batch(0, [b"aborted-0", b"aborted-1"], producer_id=7, transactional=True),
        _batch(2, [], producer_id=7, transactional=True, control_type=0),          # abort marker
        _batch(3, [b"plain-3"]),
        _batch(4, [b"committed-4", b"committed-5"], producer_id=8, transactional=True),
        _batch(6, [], producer_id=8, transactional=True, control_type=1),          # commit marker
    ])


def test_read_committed_drops_aborted_transactions_and_markers():
    columns = decode(_transactions(), 0, 100, aborted_transactions=[Aborted(7, 0)], read_committed=True)
    assert columns.offsets == [3, 4, 5]
    assert columns.values == [b"plain-3", b"committed-4", b"committed-5"]
    assert columns.next_offset == 7


def test_read_uncommitted_keeps_aborted_data_but_never_markers():
    columns = decode(_transactions(), 0, 100, aborted_transactions=None, read_committed=False)
    assert columns.offsets == [0, 1, 3, 4, 5]


def test_only_offsets_in_the_window_become_rows():
    data = _batch(0, [b"a", b"b", b"c"]) + _batch(3, [b"d", b"e"])
    columns = decode(data, 1, 4)
    assert columns.offsets == [1, 2, 3]
    assert columns.next_offset == 5


def test_record_batch_matches_the_spark_arrow_schema_exactly():
    schema = to_arrow_schema(source_schema(include_headers=True), timezone="UTC")
    columns = decode(_batch(0, [b"a", None], headers=[("h", b"1")]), 0, 10, include_headers=True)
    batch = to_record_batch("t", 3, columns, schema)
    assert batch.schema.equals(schema)
    assert batch.column("partition").to_pylist() == [3, 3]
    assert batch.column("value").to_pylist() == [b"a", None]
    assert batch.column("timestamp").cast(pa.int64()).to_pylist() == [1_000_000, 1_001_000]
    assert batch.column("headers").to_pylist() == [[{"key": "h", "value": b"1"}]] * 2


def test_gapless_and_compacted_batches_give_the_same_columns_as_record_by_record():
    whole = _batch(10, [b"a", b"b", b"c"])
    compacted = _compacted(_batch(20, [b"x", b"y", b"z"]), keep=(0, 2))
    columns = decode(whole + compacted, 0, 100)
    assert columns.offsets == [10, 11, 12, 20, 22]
    assert columns.values == [b"a", b"b", b"c", b"x", b"z"]
    assert columns.timestamp_types == [0] * 5
    schema = to_arrow_schema(source_schema(), timezone="UTC")
    assert to_record_batch("t", 0, columns, schema).column("offset").to_pylist() == [10, 11, 12, 20, 22]
    assert decode(whole + compacted, 11, 21).offsets == [11, 12, 20]


def _compacted(batch: bytes, keep) -> bytes:
    """``batch`` rebuilt as the log cleaner leaves it: only the records at ``keep``, the offset span unchanged."""
    from kafka.record.default_records import DefaultRecordBatch

    source = DefaultRecordBatch(batch)
    records = list(source)
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i in keep:
        builder.append(records[i].offset - source.base_offset, timestamp=records[i].timestamp, key=records[i].key,
                       value=records[i].value, headers=[])
    data = bytearray(builder.build())
    struct.pack_into(">q", data, 0, source.base_offset)
    struct.pack_into(">i", data, 23, len(records) - 1)  # last offset delta keeps the original span
    from kafka.record.util import calc_crc32c
    struct.pack_into(">I", data, 17, calc_crc32c(bytes(data[21:])))
    return bytes(data)


def _empty(base: int, last_offset_delta: int) -> bytes:
    """The header the log cleaner keeps of an idempotent producer's superseded last batch: recordsCount 0."""
    from kafka.record.util import calc_crc32c
    data = bytearray(61)
    struct.pack_into(">qiibIhiqqqhii", data, 0, base, 49, 0, 2, 0, 0, last_offset_delta, -1, 1_000, 7, 0, 4, 0)
    struct.pack_into(">I", data, 17, calc_crc32c(bytes(data[21:])))
    return bytes(data)


def test_an_empty_batch_gives_no_rows_but_moves_next_offset_past_it():
    data = _batch(0, [b"a", b"b"]) + _empty(2, 2) + _batch(5, [b"f"])
    for headers in (False, True):
        columns = decode(data, 0, 100, include_headers=headers)
        assert columns.offsets == [0, 1, 5] and columns.values == [b"a", b"b", b"f"]
        assert columns.timestamp_types == [0, 0, 0]
        assert columns.next_offset == 6
    only_empty = decode(_empty(2, 2), 0, 100)
    assert (len(only_empty), only_empty.offsets, only_empty.next_offset) == (0, [], 5)
    assert decode(data, 3, 5).offsets == [] and decode(data, 3, 5).next_offset == 5
    for read_committed in (False, True):
        assert decode(_empty(2, 2), 2, 100, read_committed=read_committed, aborted_transactions=[]).next_offset == 5
    schema = to_arrow_schema(source_schema(), timezone="UTC")
    batch = to_record_batch("t", 0, decode(data, 0, 100), schema)
    assert batch.column("offset").to_pylist() == [0, 1, 5]


# -- the compiled decoder (connector/source/_records_arrow.c) -------------------------------------------------

def _compiled_available() -> bool:
    from connector.source import arrow_records
    return arrow_records._compiled is not None


_needs_compiled = __import__("pytest").mark.skipif(
    not _compiled_available(), reason="the _records_arrow extension is not built (python3 setup.py build_ext --inplace)")


def _log_append_time(batch: bytes, max_timestamp: int) -> bytes:
    from kafka.record.util import calc_crc32c
    data = bytearray(batch)
    (attributes,) = struct.unpack_from(">h", data, _ATTRIBUTES_AT)
    struct.pack_into(">h", data, _ATTRIBUTES_AT, attributes | 0x08)
    struct.pack_into(">q", data, 35, max_timestamp)
    struct.pack_into(">I", data, 17, calc_crc32c(bytes(data[21:])))
    return bytes(data)


def _compressed(base: int, values) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=1, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i, value in enumerate(values):
        builder.append(i, timestamp=5000 + i, key=None, value=value, headers=[])
    data = bytearray(builder.build())
    struct.pack_into(">q", data, 0, base)
    return bytes(data)


def _mixed_log() -> bytes:
    """Every kind of batch the source meets: transactions, compaction, empty, nulls, headers (skipped), a
    log-append-time batch, a compressed batch between uncompressed ones, a big value."""
    return b"".join([
        _transactions(),                                                            # offsets 0-6
        _batch(7, [b"v7", None, b"", b"x" * 70_000], headers=[("h", b"1"), ("n", None)]),   # 7-10
        _compacted(_batch(11, [b"a", b"b", b"c", b"d"]), [0, 3]),                 # 11, 14
        _empty(15, 1),                                                              # 15-16
        _log_append_time(_batch(17, [b"t17", b"t18"]), 99_000),                     # 17-18
        _compressed(19, [b"z" * 300, None, b"y" * 300]),                            # 19-21
        _batch(22, [b"after-22"]),                                                  # 22
    ])


@_needs_compiled
def test_compiled_decoder_gives_the_per_record_paths_arrow_batch_for_every_window():
    from connector.source.arrow_records import _CompiledRows
    schema = to_arrow_schema(source_schema(), timezone="UTC")
    data = _mixed_log()
    aborted = [Aborted(7, 0)]
    for read_committed in (False, True):
        for low, high in [(0, 100), (0, 23), (1, 9), (8, 12), (12, 20), (15, 17), (18, 22), (19, 20), (23, 30)]:
            reference = decode(data, low, high, aborted_transactions=aborted, read_committed=read_committed)
            compiled = decode(data, low, high, aborted_transactions=aborted, read_committed=read_committed,
                              compiled=True)
            assert compiled.next_offset == reference.next_offset
            assert len(compiled) == len(reference)
            expected = to_record_batch("t", 3, reference, schema)
            assert to_record_batch("t", 3, compiled, schema).equals(expected), (read_committed, low, high)
    whole = decode(data, 0, 100, compiled=True)
    kinds = [type(chunk).__name__ for chunk in whole.chunks]
    # the compressed batch, decompressed by aiokafka's codec, is a C-decoded chunk of its own
    assert kinds == ["_CompiledRows", "_CompiledRows", "_CompiledRows"]
    assert all(isinstance(c, _CompiledRows) for c in decode(_batch(0, [b"a", None]), 0, 9, compiled=True).chunks)
    batch = to_record_batch("t", 3, whole, schema)
    rows = {row["offset"]: row for row in batch.to_pylist()}
    assert [rows[o]["value"] for o in (7, 8, 9, 10)] == [b"v7", None, b"", b"x" * 70_000]
    assert rows[17]["timestamp"] == rows[18]["timestamp"] and rows[17]["timestamp"].timestamp() == 99  # log append
    assert (rows[17]["timestampType"], rows[18]["timestampType"], rows[22]["timestampType"]) == (1, 1, 0)
    assert rows[20]["key"] is None and rows[20]["value"] is None and rows[19]["value"] == b"z" * 300


@_needs_compiled
def test_compiled_decoder_refuses_malformed_batches_and_the_reference_reader_answers():
    from connector.source import _records_arrow
    from connector.source.arrow_records import _span

    good = _batch(0, [b"abc", b"def"])
    span = _span(good, 0, len(good), 0)
    assert _records_arrow.decode_batches(good, [span])[0] == 2
    for why, spans in [("record count", [span[:6] + (3,) + span[7:]]),
                       ("leftover bytes", [span[:6] + (1,) + span[7:]]),
                       ("past the buffer", [(span[0], len(good) + 5) + span[2:]]),
                       ("count beyond any byte budget", [span[:6] + (1 << 40,) + span[7:]])]:
        with __import__("pytest").raises(ValueError, match="record batch at offset 0"):
            _records_arrow.decode_batches(good, spans)
    # a record whose key length runs past its record: the C decoder refuses, aiokafka's reader is the reference
    corrupt = bytearray(good)
    corrupt[61 + 4] = 0x7e  # the first record's key length varint (zigzag 63) - beyond the record
    reference_error = None
    try:
        reference = decode(bytes(corrupt), 0, 9)
    except Exception as exc:  # noqa: BLE001 - whatever aiokafka raises is the answer
        reference_error = type(exc)
    if reference_error is None:
        assert to_record_batch("t", 0, decode(bytes(corrupt), 0, 9, compiled=True), schema := to_arrow_schema(
            source_schema(), timezone="UTC")).equals(to_record_batch("t", 0, reference, schema))
    else:
        with __import__("pytest").raises(reference_error):
            decode(bytes(corrupt), 0, 9, compiled=True)



@_needs_compiled
def test_compiled_decoder_lets_other_threads_run_while_it_parses():
    """The reader's prefetch thread receives the next Fetch while a batch is decoded: the parse runs without
    the GIL. A thread stamping the time in a loop must run in the middle of one long decode (with the GIL held
    it cannot run at all then; a thread switch at either end of the call stays within the margins)."""
    import threading
    import time

    from connector.source import _records_arrow

    count, margin = 1_000_000, 0.015
    for _ in range(6):
        # minimal records: length 6, attributes, timestamp and offset deltas 0, null key and value, no headers
        records = b"\x0c\x00\x00\x00\x01\x01\x00" * count
        span = (0, len(records), 0, 0, 0, 0, count, 0)
        stamps, done = [], threading.Event()

        def stamp():
            while not done.is_set():
                stamps.append(time.perf_counter())

        thread = threading.Thread(target=stamp)
        thread.start()
        while not stamps:
            time.sleep(0.001)
        started = time.perf_counter()
        rows = _records_arrow.decode_batches(records, [span])[0]
        ended = time.perf_counter()
        done.set()
        thread.join()
        assert rows == count
        if ended - started <= 4 * margin:  # too quick to tell on this machine: a longer decode
            count *= 2
            continue
        if any(started + margin < t < ended - margin for t in stamps):
            return
    raise AssertionError(f"no other thread ran during the last decode of {count} records "
                         f"({(ended - started) * 1000:.0f} ms)")


def _legacy(offset: int, value: bytes) -> bytes:
    """One uncompressed magic-1 message set entry at ``offset``."""
    from kafka.record.legacy_records import LegacyRecordBatchBuilder
    builder = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=1 << 20)
    builder.append(0, timestamp=1000, key=None, value=value)
    data = bytearray(builder.build())
    struct.pack_into(">q", data, 0, offset)
    return bytes(data)


@_needs_compiled
def test_the_next_fetch_offset_read_from_batch_headers_is_the_decodes_next_offset():
    """The reader sends the next Fetch at ``next_fetch_offset`` before it decodes: for every window and every
    place a Fetch can cut the records (batch boundaries and a few bytes either side), that offset is exactly
    where the decode then says the next Fetch starts (a partial last batch, a window end inside a batch,
    control, compacted, empty and compressed batches); -1 only when no batch is whole."""
    from connector.source.arrow_records import next_fetch_offset

    data = _mixed_log()
    ends, position = [], 0
    while position < len(data):
        position += 12 + struct.unpack_from(">i", data, position + 8)[0]
        ends.append(position)
    cuts = sorted({max(0, min(len(data), end + d)) for end in [0, *ends] for d in (-13, -1, 0, 1, 17, 61)})
    for cut in cuts:
        for low, high in [(0, 100), (0, 23), (1, 9), (8, 12), (12, 20), (15, 17), (19, 20), (23, 30)]:
            expected = decode(data[:cut], low, high).next_offset
            assert next_fetch_offset(data[:cut], high) == expected, (cut, low, high)
    assert next_fetch_offset(b"", 10) == next_fetch_offset(None, 10) == -1


@_needs_compiled
def test_the_next_fetch_offset_of_legacy_or_malformed_batches_is_left_to_the_decode():
    from connector.source.arrow_records import next_fetch_offset

    v2 = _batch(0, [b"a", b"b"])
    assert next_fetch_offset(v2 + _legacy(2, b"c"), 10) == -1   # a magic-1 batch ends where its decode says
    assert next_fetch_offset(_legacy(0, b"c") + v2, 10) == -1
    short = bytearray(v2)
    struct.pack_into(">i", short, 8, 40)  # a v2 batch length below its 49-byte header
    assert next_fetch_offset(bytes(short[:52]), 10) == -1
    negative = bytearray(v2)
    struct.pack_into(">i", negative, 8, -5)
    assert next_fetch_offset(bytes(negative), 10) == -1
