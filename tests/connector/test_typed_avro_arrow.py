"""connector.typed.avro_arrow (the C extension _avro_arrow): a column of Avro payloads decoded straight into Arrow
must equal what the per-record path gives — ``pa.array([avro_format.decoder(...)(p) ...], type=...)`` — with
the same type, values and nulls; hostile payloads raise ValueError naming the record; what the compiled path
does not handle compiles to None."""
from __future__ import annotations

import datetime as dt
import io
import json
import math
import resource
import sys
from decimal import Decimal

import fastavro
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker_sim.registry.types import parse
from connector.typed import arrow_type
from connector.typed import avro_arrow
from connector.typed import avro_format as A

from tests.connector.test_typed_avro import ALL, INNER, full_record

pytestmark = pytest.mark.skipif(not avro_arrow.available(),
                                reason="the _avro_arrow extension is not built (python3 setup.py build_ext --inplace)")

UTC = dt.timezone.utc


def avro_schema(schema, references=None):
    return parse("AVRO", json.dumps(schema), references)


def fastavro_bytes(schema, record) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def per_record(reader, writer, payloads, offset=0):
    """The existing path: fastavro per record, then pa.array."""
    decode = A.decoder(reader, writer, framed=offset == 5)
    return pa.array([decode(p[offset:]) for p in payloads], type=arrow_type(A.spark_type(reader)))


def same(got, expected) -> bool:
    """Equal arrays (NaN equal to NaN, which Arrow's equals does not grant)."""
    return got.equals(expected) or repr(got.to_pylist()) == repr(expected.to_pylist())


def assert_same(reader_json, writer_json, records=None, payloads=None, framed=False, pylist=True):
    """The compiled path's array equals the per-record path's; returns it."""
    reader = avro_schema(reader_json)
    writer = avro_schema(writer_json) if writer_json is not None else None
    if payloads is None:
        payloads = [fastavro_bytes(writer_json if writer_json is not None else reader_json, r) for r in records]
    if framed:
        payloads = [b"\x00\x00\x00\x00\x07" + p for p in payloads]
    expected = per_record(reader, writer, payloads, 5 if framed else 0)
    decode = A.column_decoder(reader, writer, framed=framed)
    assert decode is not None
    got = decode(payloads)
    got.validate(full=True)
    assert got.type == expected.type
    assert got.equals(expected), (got.to_pylist(), expected.to_pylist())
    if pylist:
        assert got.to_pylist() == expected.to_pylist()
    return got


def record_of(*fields, name="R"):
    return {"type": "record", "name": name, "fields": [{"name": n, "type": t, **extra} for n, t, *rest in fields
                                                         for extra in [rest[0] if rest else {}]]}


# ------------------------------------------------------------------ every construct, same schema


def test_every_construct_of_the_all_schema_framed_and_bare():
    records = [
        full_record(),
        full_record(u=5, nu=None, ns=None, sn="x", fd=None, ndate=dt.date(2020, 2, 29), nrec=None, arr=[], m={}),
        full_record(u="five", nu=12, il=2**40, fd=-1.5, m={"a": 1.0, "b": -2.0, "ü": 0.0}, arr=[None, None]),
        full_record(i=2**31 - 1, l=-2**63, s="", by=b"", dec=Decimal("0.000"), fdec=Decimal("-0.01"),
                    date=dt.date(9999, 12, 31), tsm=dt.datetime(1, 1, 1, tzinfo=UTC),
                    tsu=dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)),
    ]
    for framed in (False, True):
        assert_same(ALL, None, records, framed=framed)
        assert_same(ALL, ALL, records, framed=framed)


def test_the_bench_record():
    from broker_sim.bench.spark_typed import SCHEMA, _record
    got = assert_same(json.loads(SCHEMA), None, [_record(i) for i in range(300)], framed=True)
    assert got.to_pylist()[1]["price"] == Decimal("0.01")


@pytest.mark.parametrize("schema, values", [
    ("int", [0, -1, 2**31 - 1, -2**31]),
    ("long", [0, 2**63 - 1, -2**63, 300]),
    ("float", [0.0, -1.5, 3.4e38, 1e-45]),
    ("double", [0.0, 1e308, -5e-324]),
    ("boolean", [True, False]),
    ("string", ["", "a", "héllo ✓ 𝄞", "x" * 1000]),
    ("bytes", [b"", b"\x00\xff" * 50]),
    ("null", [None, None]),
    (["null", "string"], [None, "a", None]),
    (["string", "null"], ["a", None]),
    (["null"], [None]),
    (["boolean"], [True]),
    (["int", "long"], [1, 2**40]),
    (["null", "float", "double"], [None, 1.5, 2.25]),
    (["null", "int", "string"], [None, 3, "x"]),
    ({"type": "array", "items": "int"}, [[], [1, 2, 3]]),
    ({"type": "array", "items": ["null", "string"]}, [[None, "a"], []]),
    ({"type": "array", "items": {"type": "array", "items": "long"}}, [[[1], [], [2, 3]], []]),
    ({"type": "array", "items": "null"}, [[None] * 5, []]),
    ({"type": "map", "values": "long"}, [{}, {"a": 1, "b": 2}]),
    ({"type": "map", "values": ["null", "bytes"]}, [{"k": None, "j": b"x"}]),
    ({"type": "map", "values": {"type": "map", "values": "int"}}, [{"a": {"b": 1}, "c": {}}]),
    ({"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}, ["A", "C"]),
    ({"type": "fixed", "name": "F", "size": 3}, [b"abc", b"\x00\x00\x00"]),
    ({"type": "fixed", "name": "F0", "size": 0}, [b""]),
    ({"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 10},
     [Decimal("9999999999999999999999999999.9999999999"), Decimal("-9999999999999999999999999999.9999999999"),
      Decimal("0E-10")]),
    ({"type": "fixed", "name": "D16", "size": 16, "logicalType": "decimal", "precision": 38, "scale": 0},
     [Decimal(10**38 - 1), Decimal(-10**38 + 1), Decimal(0)]),
    ({"type": "fixed", "name": "D3", "size": 3, "logicalType": "decimal", "precision": 6, "scale": 2},
     [Decimal("-1.00"), Decimal("9999.99")]),
    ({"type": "int", "logicalType": "date"}, [dt.date(1, 1, 1), dt.date(1970, 1, 1), dt.date(9999, 12, 31)]),
    ({"type": "long", "logicalType": "timestamp-millis"}, [dt.datetime(1, 1, 1, tzinfo=UTC)]),
    ({"type": "long", "logicalType": "local-timestamp-millis"}, [dt.datetime(2000, 1, 1, 1, 1, 1, 1000)]),
    ({"type": "long", "logicalType": "local-timestamp-micros"}, [dt.datetime(9999, 12, 31, 23, 59, 59, 999999)]),
    ({"type": "string", "logicalType": "uuid"}, ["12345678-1234-5678-1234-567812345678"]),
    ({"type": "int", "logicalType": "time-millis"}, [dt.time(1, 2, 3, 4000)]),
    ({"type": "long", "logicalType": "time-micros"}, [dt.time(23, 59, 59, 999999)]),
    ({"type": "long", "logicalType": "timestamp-nanos"}, [5]),
    ({"type": "int", "logicalType": "timestamp-millis"}, [5]),
    (["null", {"type": "int", "logicalType": "date"}], [None, dt.date(2020, 1, 1)]),
    (["null", INNER], [None, {"x": 1}, None]),
    (["null", {"type": "array", "items": INNER}], [None, [{"x": 1}, {"x": 2}]]),
    (["null", {"type": "map", "values": ["null", INNER]}], [None, {"a": None, "b": {"x": 3}}]),
])
def test_top_level_types(schema, values):
    assert_same(schema, None, values)


def test_a_decimal_that_does_not_fit_its_fixed_is_binary():
    schema = {"type": "fixed", "name": "F2", "size": 2, "logicalType": "decimal", "precision": 10}
    assert_same(schema, None, payloads=[b"ab", b"\x00\xff"])


def test_nested_records_arrays_maps_and_member_unions():
    leaf = {"type": "record", "name": "Leaf", "fields": [
        {"name": "s", "type": ["null", "string"]}, {"name": "n", "type": "long"}]}
    schema = record_of(
        ("leaves", {"type": "array", "items": ["null", leaf]}),
        ("by_name", {"type": "map", "values": {"type": "array", "items": "Leaf"}}),
        ("either", ["null", "Leaf", {"type": "array", "items": "int"}, {"type": "map", "values": "string"}]),
        ("deep", ["null", {"type": "record", "name": "Deep", "fields": [
            {"name": "inner", "type": ["null", "Leaf"]},
            {"name": "e", "type": ["null", {"type": "enum", "name": "E", "symbols": ["X", "Y"]}]}]}]),
    )
    leaf_value = {"s": "a", "n": 1}
    records = [
        {"leaves": [None, leaf_value], "by_name": {"k": [leaf_value, {"s": None, "n": -1}]},
         "either": leaf_value, "deep": {"inner": None, "e": "Y"}},
        {"leaves": [], "by_name": {}, "either": [1, 2], "deep": None},
        {"leaves": [None], "by_name": {"a": [], "b": []}, "either": {"x": "y"},
         "deep": {"inner": leaf_value, "e": None}},
        {"leaves": [leaf_value] * 3, "by_name": {"z": [leaf_value]}, "either": None, "deep": None},
    ]
    assert_same(schema, None, records * 3)


def test_an_empty_list_and_a_big_batch():
    schema = record_of(("a", "long"), ("s", "string"))
    reader = avro_schema(schema)
    got = A.column_decoder(reader, None, framed=False)([])
    assert len(got) == 0 and got.type == arrow_type(A.spark_type(reader))
    assert_same(schema, None, [{"a": i, "s": str(i) * (i % 7)} for i in range(20000)])


def test_payloads_of_any_bytes_like_type():
    schema = record_of(("a", "long"), ("s", "string"))
    payload = fastavro_bytes(schema, {"a": 1, "s": "xyz"})
    decode = A.column_decoder(avro_schema(schema), None, framed=False)
    for raw in (payload, bytearray(payload), memoryview(payload), memoryview(b"junk" + payload)[4:]):
        assert decode([raw]).to_pylist() == [{"a": 1, "s": "xyz"}]


def test_nan_and_signed_zero_keep_their_bits():
    schema = record_of(("f", "float"), ("d", "double"))
    payloads = [fastavro_bytes(schema, {"f": v, "d": v}) for v in (math.nan, -0.0, math.inf, -math.inf)]
    payloads.append(b"\x01\x00\x80\x7f" + b"\x01\x00\x00\x00\x00\x00\xf0\x7f")  # signaling NaNs
    got = A.column_decoder(avro_schema(schema), None, framed=False)(payloads)
    expected = per_record(avro_schema(schema), None, payloads)
    for name in ("f", "d"):
        a, b = got.field(name), expected.field(name)
        assert a.buffers()[1].to_pybytes() == b.buffers()[1].to_pybytes()


# ------------------------------------------------------------------ evolution


def test_promotions_aliases_enum_default_and_skipped_fields():
    writer = {"type": "record", "name": "R", "fields": [
        {"name": "a", "type": "int"}, {"name": "b", "type": "long"}, {"name": "c", "type": "float"},
        {"name": "d", "type": "string"}, {"name": "e", "type": "bytes"},
        {"name": "old_name", "type": "string"},
        {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "PINK"]}},
        {"name": "gone", "type": {"type": "map", "values": {"type": "array", "items": "Color"}}},
        {"name": "n", "type": ["null", "int"]},
        {"name": "i2f", "type": "int"}, {"name": "l2f", "type": "long"}, {"name": "l2d", "type": "long"},
        {"name": "skipped", "type": ["null", "boolean", "double", {"type": "fixed", "name": "F5", "size": 5},
                                     {"type": "record", "name": "S", "fields": [
                                         {"name": "x", "type": "float"},
                                         {"name": "y", "type": {"type": "array", "items": "string"}}]}]},
    ]}
    reader = {"type": "record", "name": "R", "fields": [
        {"name": "a", "type": "double"}, {"name": "b", "type": "float"}, {"name": "c", "type": "double"},
        {"name": "d", "type": "bytes"}, {"name": "e", "type": "string"},
        {"name": "new_name", "aliases": ["old_name"], "type": "string"},
        {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "OTHER"],
                                   "default": "OTHER"}},
        {"name": "n", "type": ["null", "long"]},
        {"name": "i2f", "type": "float"}, {"name": "l2f", "type": "float"}, {"name": "l2d", "type": "double"},
        {"name": "def_int", "type": "int", "default": -7},
        {"name": "def_long", "type": "long", "default": 2**40},
        {"name": "def_float", "type": "float", "default": 0.1},
        {"name": "def_double", "type": "double", "default": 2.5},
        {"name": "def_bool", "type": "boolean", "default": True},
        {"name": "def_str", "type": "string", "default": "dflt ✓"},
        {"name": "def_bytes", "type": "bytes", "default": "\u00ff\u0000"},
        {"name": "def_null", "type": ["null", "string"], "default": None},
        {"name": "def_snull", "type": ["string", "null"], "default": "s"},
        {"name": "def_enum", "type": {"type": "enum", "name": "E2", "symbols": ["P", "Q"]}, "default": "Q"},
        {"name": "def_date", "type": {"type": "int", "logicalType": "date"}, "default": 19000},
        {"name": "def_ts", "type": {"type": "long", "logicalType": "timestamp-millis"}, "default": 1500},
        {"name": "def_dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2},
         "default": "\u0001\u0000"},
        {"name": "def_rec_null", "type": ["null", INNER], "default": None},
    ]}
    records = [{"a": 3, "b": 2**40 + 1, "c": 0.1, "d": "text", "e": b"raw", "old_name": "renamed",
                "color": color, "gone": {"k": ["RED"], "j": []}, "n": n, "i2f": 2**24 + 1, "l2f": 2**60 + 2**36 + 1,
                "l2d": 2**53 + 1, "skipped": skipped}
               for color, n, skipped in [("PINK", 5, None), ("RED", None, True), ("RED", -1, 2.5),
                                         ("PINK", 0, b"12345"), ("RED", 7, {"x": 1.5, "y": ["a", "b"]})]]
    got = assert_same(reader, writer, records)
    assert got.to_pylist()[0]["color"] == "OTHER"


def test_resolution_into_member_unions_and_logical_types_the_writer_lacks():
    writer = {"type": "record", "name": "R", "fields": [
        {"name": "u", "type": ["string", "int"]},
        {"name": "v", "type": "int"},
        {"name": "ts", "type": "long"},
        {"name": "money", "type": "bytes"},
        {"name": "day", "type": "int"},
        {"name": "w", "type": ["null", "long"]},
        {"name": "ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "fdec", "type": {"type": "fixed", "name": "F4", "size": 4}},
        {"name": "dec2", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 3}},
    ]}
    reader = {"type": "record", "name": "R", "fields": [
        {"name": "u", "type": ["int", "boolean", "string"]},
        {"name": "v", "type": ["null", "boolean", "long"]},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "money", "type": {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 1}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "w", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}]},
        {"name": "ms", "type": {"type": "long", "logicalType": "timestamp-micros"}},  # raw millis as micros
        {"name": "fdec", "type": {"type": "fixed", "name": "F4", "size": 4, "logicalType": "decimal",
                                  "precision": 9, "scale": 2}},
        {"name": "dec2", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 1}},
        {"name": "raw", "type": {"type": "fixed", "name": "F3", "size": 3}, "default": "\u00ff\u0000a"},
    ]}
    at = dt.datetime(2020, 1, 1, tzinfo=UTC)
    records = [{"u": "s", "v": 7, "ts": 1500, "money": b"\x04\xd2", "day": 3, "w": 10, "ms": at,
                "fdec": b"\x00\x00\x01\x00", "dec2": Decimal("1.234")},
               {"u": 9, "v": -1, "ts": -1, "money": b"\xff", "day": -1, "w": None, "ms": at,
                "fdec": b"\xff\xff\xff\xff", "dec2": Decimal("-999999.999")}]
    assert_same(reader, writer, records)


def test_member_union_defaults_are_unsupported_but_others_compile():
    writer = record_of(("a", "int"))
    reader = record_of(("a", "int"), ("both", ["int", "string"], {"default": 3}))
    assert A.column_decoder(avro_schema(reader), avro_schema(writer), framed=False) is None
    reader = record_of(("a", "int"), ("arr", {"type": "array", "items": "int"}, {"default": [1]}))
    assert A.column_decoder(avro_schema(reader), avro_schema(writer), framed=False) is None
    reader = record_of(("a", "int"), ("d", "int", {"default": 4}))
    assert_same(reader, writer, [{"a": 1}])


def test_writer_union_into_reader_types():
    writer = record_of(("x", ["null", "int", "string"]), ("y", ["int", "long", "float"]),
                       ("z", ["string", "bytes"]))
    reader = record_of(("x", ["null", "long"]), ("y", "double"), ("z", "string"))
    assert_same(reader, writer, [{"x": None, "y": 1, "z": "a"}, {"x": 5, "y": 2**40, "z": b"b"},
                                 {"x": -5, "y": 1.5, "z": "c"}])
    # the string branch of x has no reader counterpart: only records that use it are bad
    decode = A.column_decoder(avro_schema(reader), avro_schema(writer), framed=False)
    with pytest.raises(ValueError, match="record 1"):
        decode([fastavro_bytes(writer, {"x": 1, "y": 1, "z": "a"}),
                fastavro_bytes(writer, {"x": "s", "y": 1, "z": "a"})])


def test_int_and_long_unions_widen():
    writer = record_of(("a", "int"), ("b", "long"), ("c", "float"), ("d", ["int", "long"]))
    reader = record_of(("a", ["int", "long"]), ("b", ["null", "int", "long"]), ("c", ["float", "double"]),
                       ("d", ["null", "long"]))
    assert_same(reader, writer, [{"a": 1, "b": 2**40, "c": 0.1, "d": 3}, {"a": -1, "b": 0, "c": 1e30, "d": 2**50}])


def test_unsupported_constructs_compile_to_none():
    writer = record_of(("a", "int"))
    node = {"type": "record", "name": "Node", "fields": [{"name": "v", "type": "int"},
                                                          {"name": "next", "type": ["null", "Node"]}]}
    cases = [
        (record_of(("a", "int"), ("y", "int")), writer),          # reader field without default, writer lacks it
        ({"type": "long", "spark.sql.catalyst.type": "interval day to second"}, None),
        ({"type": "int", "spark.sql.catalyst.type": "interval year to month"}, None),
        (node, None),                                              # recursive reader (Spark refuses it)
        (record_of(("a", "int")), record_of(("a", "int"), ("skip", node))),  # a recursive writer part to skip
    ]
    for reader_json, writer_json in cases:
        reader = avro_schema(reader_json)
        writer = avro_schema(writer_json) if writer_json is not None else None
        assert A.column_decoder(reader, writer, framed=False) is None


def test_without_the_extension_column_decoder_is_none(monkeypatch):
    monkeypatch.setattr(avro_arrow, "_ext", None)
    assert A.column_decoder(avro_schema(record_of(("a", "int"))), None, framed=True) is None


# ------------------------------------------------------------------ edges the per-record path refuses


@pytest.mark.parametrize("schema, payload", [
    ({"type": "int", "logicalType": "date"}, b"\xfe\xff\xff\xff\x0f"),                # far beyond year 9999
    ({"type": "long", "logicalType": "timestamp-millis"}, b"\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01"),
    ({"type": "long", "logicalType": "timestamp-micros"}, b"\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01"),
    ({"type": "bytes", "logicalType": "decimal", "precision": 3, "scale": 1}, b"\x04\x03\xe8"),  # 1000: 4 digits
    ("int", b"\x80\x80\x80\x80\x10"),                                                  # 2**31: not an int32
    ({"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 0}, b"\x22" + b"\x7f" * 17),
])
def test_values_out_of_range_raise_as_the_per_record_path_fails(schema, payload):
    reader = avro_schema(schema)
    with pytest.raises(Exception):
        per_record(reader, None, [payload])
    with pytest.raises(ValueError, match="record 0"):
        A.column_decoder(reader, None, framed=False)([payload])


def test_timestamp_and_date_bounds_match_the_per_record_path():
    for schema, values in [({"type": "int", "logicalType": "date"}, [-719162, 2932896, -719163, 2932897]),
                           ({"type": "long", "logicalType": "timestamp-millis"},
                            [-62135596800000, 253402300799999, -62135596800001, 253402300800000]),
                           ({"type": "long", "logicalType": "local-timestamp-micros"},
                            [-62135596800000000, 253402300799999999, -62135596800000001, 253402300800000000])]:
        plain = schema["type"]
        reader = avro_schema(schema)
        decode = A.column_decoder(reader, None, framed=False)
        for v in values:
            payload = fastavro_bytes(plain, v)
            try:
                expected = per_record(reader, None, [payload])
            except Exception:  # noqa: BLE001 - out of Python's range: the compiled path refuses it too
                with pytest.raises(ValueError):
                    decode([payload])
                continue
            assert decode([payload]).equals(expected)
        # without the logical type on the writer, millis are only multiplied (no datetime in between)
        if plain == "long":
            plain_writer = avro_schema("long")
            assert_same(schema, "long", [values[2], values[3]], pylist=False)
            assert A.column_decoder(reader, plain_writer, framed=False) is not None


# ------------------------------------------------------------------ hostile input


HOSTILE_SCHEMA = record_of(
    ("a", "int"), ("s", "string"), ("u", ["null", "long"]),
    ("arr", {"type": "array", "items": "long"}),
    ("m", {"type": "map", "values": "string"}),
    ("e", {"type": "enum", "name": "E", "symbols": ["A", "B"]}),
    ("b", "boolean"),
)
GOOD = fastavro_bytes(HOSTILE_SCHEMA, {"a": 1, "s": "abc", "u": 300, "arr": [1], "m": {"k": "v"}, "e": "B",
                                       "b": True})


@pytest.mark.parametrize("payload, reason", [
    (GOOD[:-1], "truncated"),
    (GOOD + b"\x00", "bytes left"),
    (b"", "truncated"),
    (b"\x02\x7eabc", "truncated"),                                    # the string says 63 bytes
    (b"\x02\x06abc\x04", "union branch"),                             # branch 2 of 2
    (b"\x02\x06abc\x00" + b"\xfe\xff\xff\xff\x0f", "block count"),      # 2**31 longs in a few bytes
    (b"\x02\x06abc\x00" + b"\x80" * 11, "varint"),                    # an 11-byte varint
    (b"\x02\x06abc\x00" + b"\xff" * 9 + b"\x7f", "varint overflows"),  # 10 bytes, more than 64 bits
    (b"\x02\x06ab\xff\x00", "UTF-8"),
    (b"\x02\x06\xed\xa0\x80\x00", "UTF-8"),                            # a surrogate
    (b"\x02\x06\xc0\xafa\x00", "UTF-8"),                               # overlong
    (b"\x02\x06abc\x00\x00\x02\x02k\x02\xff\x00", "UTF-8"),            # map value
    (b"\x02\x06abc\x00\x00\x02\x02\xff\x02v\x00", "UTF-8"),            # map key
    (b"\x02\x06abc\x00\x00\x04\x02k\x00\x02k\x00\x00\x02\x01", "duplicate map key"),
    (b"\x02\x06abc\x00\x00\x00\x04\x01", "enum index"),                # symbol 2 of 2
    (b"\x02\x06abc\x00\x00\x00\x01\x01", "enum index"),                # symbol -1
    (b"\x02\x06abc\x00\x01\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01", "block"),  # count -2**63
    (b"\x02\x06abc\x00\x01\x7f\x02\x00\x00\x00\x02\x01", "block size"),  # block of 1 item sized -64 bytes
])
def test_hostile_payloads_raise_value_error_naming_the_record(payload, reason):
    decode = A.column_decoder(avro_schema(HOSTILE_SCHEMA), None, framed=False)
    assert decode([GOOD]).to_pylist()[0]["m"] == [("k", "v")]
    with pytest.raises(ValueError, match=f"record 2: .*{reason}"):
        decode([GOOD, GOOD, payload, GOOD])


def test_framed_payloads_shorter_than_the_header_and_non_bytes_raise():
    decode = A.column_decoder(avro_schema(HOSTILE_SCHEMA), None, framed=True)
    with pytest.raises(ValueError, match="record 1: .*header"):
        decode([b"\x00\x00\x00\x00\x01" + GOOD, b"\x00\x00"])
    with pytest.raises(ValueError, match="record 0"):
        decode([None])
    with pytest.raises(ValueError, match="record 0"):
        decode([12])


def test_a_header_checked_on_every_payload():
    decode = A.column_decoder(avro_schema(HOSTILE_SCHEMA), None, framed=True)
    header = b"\x00\x00\x00\x00\x07"
    assert len(decode([header + GOOD, header + GOOD], header=header)) == 2
    with pytest.raises(ValueError, match="record 1: .*another header"):
        decode([header + GOOD, b"\x00\x00\x00\x00\x08" + GOOD], header=header)
    with pytest.raises(ValueError, match="record 0: .*header"):
        decode([b"\x00"], header=header)


def test_an_enum_symbol_the_reader_lacks_without_default_is_a_bad_record():
    writer = record_of(("e", {"type": "enum", "name": "E", "symbols": ["A", "B"]}))
    reader = record_of(("e", {"type": "enum", "name": "E", "symbols": ["A"]}))
    decode = A.column_decoder(avro_schema(reader), avro_schema(writer), framed=False)
    assert decode([b"\x00"]).to_pylist() == [{"e": "A"}]
    with pytest.raises(ValueError, match="record 0: .*enum symbol"):
        decode([b"\x02"])


def test_skipped_blocks_with_a_byte_size_are_skipped_by_it_as_fastavro_does():
    writer = record_of(("a", {"type": "array", "items": "long"}), ("m", {"type": "map", "values": "int"}),
                       ("b", "int"))
    reader = record_of(("b", "int"))
    payloads = [b"\x01\x02\x0a\x00" b"\x00" b"\x06",          # a: one block of 1 item, 1 byte
                b"\x01\x04\x0a\x00\x00" b"\x01\x06\x02k\x02\x00" b"\x08",  # sizes cover the end marker
                b"\x00" b"\x03\x0c\x02k\x02\x02j\x04\x00" b"\x0a",
                b"\x01\x00\x00" b"\x00" b"\x0c"]  # a block of one item in 0 bytes: skipped by its size
    assert_same(reader, writer, payloads=payloads)


def test_zero_size_items_are_bounded():
    schema = {"type": "array", "items": "null"}
    decode = A.column_decoder(avro_schema(schema), None, framed=False)
    assert decode([b"\x06\x00"]).to_pylist() == [[None] * 3]
    with pytest.raises(ValueError, match="zero-size"):
        decode([b"\xfe\xff\xff\xff\xff\xff\xff\xff\x7f\x00"])  # 2**62 nulls


def _mutations(payload: bytes):
    yield payload[:0]
    for i in range(len(payload)):
        yield payload[:i]
        for b in (0x00, 0x01, 0x7f, 0x80, 0xff):
            yield payload[:i] + bytes([b]) + payload[i + 1:]
        yield payload[:i] + b"\xff" + payload[i:]


def test_mutated_payloads_never_give_an_answer_the_per_record_path_does_not():
    """Every one-byte change of a rich record: the compiled path raises ValueError or agrees exactly."""
    reader = avro_schema(ALL)
    decode = A.column_decoder(reader, None, framed=False)
    per = A.decoder(reader, None, framed=False)
    spark = arrow_type(A.spark_type(reader))
    agreed = refused = 0
    for payload in _mutations(fastavro_bytes(ALL, full_record())):
        try:
            got = decode([payload])
        except ValueError:
            refused += 1
            continue
        expected = pa.array([per(payload)], type=spark)
        assert same(got, expected), payload
        agreed += 1
    assert agreed and refused


# ------------------------------------------------------------------ hypothesis: random records of a rich schema

RICH = {"type": "record", "name": "Rich", "namespace": "h", "fields": [
    {"name": "i", "type": "int"},
    {"name": "l", "type": "long"},
    {"name": "d", "type": "double"},
    {"name": "f", "type": "float"},
    {"name": "b", "type": "boolean"},
    {"name": "s", "type": "string"},
    {"name": "by", "type": "bytes"},
    {"name": "e", "type": {"type": "enum", "name": "Suit", "symbols": ["H", "S", "D", "C"]}},
    {"name": "ns", "type": ["null", "string"]},
    {"name": "arr", "type": {"type": "array", "items": ["null", "long"]}},
    {"name": "m", "type": {"type": "map", "values": {"type": "array", "items": "string"}}},
    {"name": "u", "type": ["null", "int", "string", {"type": "record", "name": "P", "fields": [
        {"name": "x", "type": "double"}, {"name": "tags", "type": {"type": "map", "values": "int"}}]}]},
    {"name": "recs", "type": {"type": "array", "items": "P"}},
    {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 4}},
    {"name": "fdec", "type": ["null", {"type": "fixed", "name": "D9", "size": 9, "logicalType": "decimal",
                                       "precision": 20, "scale": 2}]},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "lts", "type": ["null", {"type": "long", "logicalType": "local-timestamp-micros"}]},
]}
# RICH evolved: fields dropped (skipped), promoted, renamed, added with defaults, enum default
RICH_READER = {"type": "record", "name": "Rich", "namespace": "h", "fields": [
    {"name": "i", "type": "long"},
    {"name": "d", "type": "double"},
    {"name": "f", "type": "double"},
    {"name": "text", "aliases": ["s"], "type": "string"},
    {"name": "by", "type": "string"},
    {"name": "e", "type": {"type": "enum", "name": "Suit", "symbols": ["S", "H", "X"], "default": "X"}},
    {"name": "ns", "type": ["string", "null"]},
    {"name": "u", "type": ["null", "long", "string", {"type": "record", "name": "P", "fields": [
        {"name": "x", "type": "double"}, {"name": "extra", "type": "string", "default": "?"}]}]},
    {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 4}},
    {"name": "day", "type": ["null", {"type": "int", "logicalType": "date"}]},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "added", "type": ["null", "string"], "default": None},
    {"name": "added2", "type": "double", "default": 1.25},
]}

_text = st.text(max_size=8)
_int32 = st.integers(-2**31, 2**31 - 1)
_int64 = st.integers(-2**63, 2**63 - 1)
_p = st.fixed_dictionaries({"x": st.floats(allow_nan=False), "tags": st.dictionaries(_text, _int32, max_size=3)})
_rich = st.fixed_dictionaries({
    "i": _int32, "l": _int64, "d": st.floats(allow_nan=False), "f": st.floats(width=32, allow_nan=False),
    "b": st.booleans(), "s": st.text(max_size=20), "by": st.text(max_size=6).map(str.encode),
    "e": st.sampled_from(["H", "S", "D", "C"]), "ns": st.none() | _text,
    "arr": st.lists(st.none() | _int64, max_size=5),
    "m": st.dictionaries(_text, st.lists(_text, max_size=3), max_size=3),
    "u": st.none() | _int32 | _text | _p,
    "recs": st.lists(_p, max_size=3),
    "dec": st.integers(-10**20 + 1, 10**20 - 1).map(lambda n: Decimal(n).scaleb(-4)),
    "fdec": st.none() | st.integers(-10**20 + 1, 10**20 - 1).map(lambda n: Decimal(n).scaleb(-2)),
    "day": st.dates().map(lambda d: d),
    "ts": st.datetimes(timezones=st.just(UTC)).map(lambda t: t.replace(microsecond=t.microsecond // 1000 * 1000)),
    "lts": st.none() | st.datetimes(),
})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_rich, min_size=1, max_size=12))
def test_hypothesis_rich_records_same_schema(records):
    assert_same(RICH, None, records, framed=True)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_rich, min_size=1, max_size=12))
def test_hypothesis_rich_records_evolved_reader(records):
    assert_same(RICH_READER, RICH, records)


# ------------------------------------------------------------------ memory


def test_no_leak_over_many_calls():
    schema = record_of(("a", "long"), ("s", "string"), ("m", {"type": "map", "values": "int"}),
                       ("u", ["null", "int", "string"]))
    payloads = [fastavro_bytes(schema, {"a": i, "s": "x" * (i % 5), "m": {"k": i}, "u": i if i % 2 else "s"})
                for i in range(8)]
    decode = A.column_decoder(avro_schema(schema), None, framed=False)
    bad = payloads[:3] + [payloads[3][:-1]]

    def loop(n):
        for _ in range(n):
            decode(payloads)
            try:
                decode(bad)
            except ValueError:
                pass

    loop(2000)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    refs = sys.gettotalrefcount() if hasattr(sys, "gettotalrefcount") else None
    loop(50_000)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert after - before < 20_000, (before, after)   # kilobytes
    if refs is not None:
        assert sys.gettotalrefcount() - refs < 1000
