"""connector.typed.avro_format: spark-avro's type mapping, the fastavro decoder (with Avro's schema resolution),
the encoder and schema_for — no Spark session, only pyspark's types and pyarrow.

Data comes from the reference writers: fastavro, the Apache ``avro`` package, and confluent-kafka's
AvroSerializer against the in-process broker's Schema Registry (``pylog_broker``)."""
from __future__ import annotations

import datetime as dt
import io
import json
import struct
import uuid
from decimal import Decimal

import avro.io
import avro.schema
import fastavro
import pyarrow as pa
import pytest
from pyspark.sql.types import (ArrayType, BinaryType, BooleanType, DateType, DayTimeIntervalType, DecimalType,
                               DoubleType, FloatType, IntegerType, LongType, MapType, NullType, ShortType,
                               StringType, StructField, StructType, TimestampNTZType, TimestampType,
                               YearMonthIntervalType)

from broker_sim.registry.types import parse
from connector.typed import RowMismatch, arrow_type
from connector.typed import avro_format as A

UTC = dt.timezone.utc

INNER = {"type": "record", "name": "Inner", "fields": [{"name": "x", "type": "int"}]}
ALL = {"type": "record", "name": "All", "namespace": "t", "fields": [
    {"name": "i", "type": "int"},
    {"name": "l", "type": "long"},
    {"name": "f", "type": "float"},
    {"name": "d", "type": "double"},
    {"name": "b", "type": "boolean"},
    {"name": "s", "type": "string"},
    {"name": "by", "type": "bytes"},
    {"name": "fx", "type": {"type": "fixed", "name": "F4", "size": 4}},
    {"name": "e", "type": {"type": "enum", "name": "Suit", "symbols": ["HEART", "SPADE"]}},
    {"name": "arr", "type": {"type": "array", "items": ["null", "long"]}},
    {"name": "m", "type": {"type": "map", "values": "double"}},
    {"name": "ns", "type": ["null", "string"], "default": None},
    {"name": "sn", "type": ["string", "null"]},
    {"name": "il", "type": ["int", "long"]},
    {"name": "fd", "type": ["null", "float", "double"]},
    {"name": "u", "type": ["int", "string", INNER]},
    {"name": "nu", "type": ["null", "int", "string"]},
    {"name": "rec", "type": "Inner"},
    {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 3}},
    {"name": "fdec", "type": {"type": "fixed", "name": "D8", "size": 8, "logicalType": "decimal",
                              "precision": 18, "scale": 2}},
    {"name": "date", "type": {"type": "int", "logicalType": "date"}},
    {"name": "tsm", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "tsu", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "ltm", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
    {"name": "ltu", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
    {"name": "uid", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}},
    {"name": "tu", "type": {"type": "long", "logicalType": "time-micros"}},
    {"name": "ndate", "type": ["null", {"type": "int", "logicalType": "date"}]},
    {"name": "nrec", "type": ["null", "Inner"]},
]}

ALL_SPARK = StructType([
    StructField("i", IntegerType(), False),
    StructField("l", LongType(), False),
    StructField("f", FloatType(), False),
    StructField("d", DoubleType(), False),
    StructField("b", BooleanType(), False),
    StructField("s", StringType(), False),
    StructField("by", BinaryType(), False),
    StructField("fx", BinaryType(), False),
    StructField("e", StringType(), False),
    StructField("arr", ArrayType(LongType(), True), False),
    StructField("m", MapType(StringType(), DoubleType(), False), False),
    StructField("ns", StringType(), True),
    StructField("sn", StringType(), True),
    StructField("il", LongType(), False),
    StructField("fd", DoubleType(), True),
    StructField("u", StructType([StructField("member0", IntegerType(), True),
                                 StructField("member1", StringType(), True),
                                 StructField("member2", StructType([StructField("x", IntegerType(), False)]),
                                             True)]), False),
    StructField("nu", StructType([StructField("member0", IntegerType(), True),
                                  StructField("member1", StringType(), True)]), True),
    StructField("rec", StructType([StructField("x", IntegerType(), False)]), False),
    StructField("dec", DecimalType(9, 3), False),
    StructField("fdec", DecimalType(18, 2), False),
    StructField("date", DateType(), False),
    StructField("tsm", TimestampType(), False),
    StructField("tsu", TimestampType(), False),
    StructField("ltm", TimestampNTZType(), False),
    StructField("ltu", TimestampNTZType(), False),
    StructField("uid", StringType(), False),
    StructField("tm", IntegerType(), False),
    StructField("tu", LongType(), False),
    StructField("ndate", DateType(), True),
    StructField("nrec", StructType([StructField("x", IntegerType(), False)]), True),
])

UID = uuid.UUID("12345678-1234-5678-1234-567812345678")
TSM = dt.datetime(2024, 2, 29, 23, 59, 58, 123000, tzinfo=UTC)
TSU = dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)  # before the epoch: negative micros
LTM = dt.datetime(2001, 9, 9, 1, 46, 40, 5000)
LTU = dt.datetime(2038, 1, 19, 3, 14, 8, 1)


def full_record(**overrides):
    """A record of ALL as fastavro's writer takes it."""
    record = {
        "i": -2**31, "l": 2**63 - 1, "f": 1.5, "d": -0.25, "b": True, "s": "héllo ✓", "by": b"\x00\xff",
        "fx": b"abcd", "e": "SPADE", "arr": [1, None, -3], "m": {"k": 2.5},
        "ns": "set", "sn": None, "il": 7, "fd": 2.0, "u": {"x": 4}, "nu": "str",
        "rec": {"x": -1}, "dec": Decimal("-123456.789"), "fdec": Decimal("9999999999999999.99"),
        "date": dt.date(1900, 1, 1), "tsm": TSM, "tsu": TSU, "ltm": LTM, "ltu": LTU,
        "uid": UID, "tm": dt.time(1, 2, 3, 4000), "tu": dt.time(23, 59, 59, 999999),
        "ndate": None, "nrec": {"x": 9},
    }
    record.update(overrides)
    return record


def expected_value(**overrides):
    """What the decoder must give for full_record(): Spark-shaped (member structs, str uuids, int times)."""
    value = {
        "i": -2**31, "l": 2**63 - 1, "f": 1.5, "d": -0.25, "b": True, "s": "héllo ✓", "by": b"\x00\xff",
        "fx": b"abcd", "e": "SPADE", "arr": [1, None, -3], "m": {"k": 2.5},
        "ns": "set", "sn": None, "il": 7, "fd": 2.0,
        "u": {"member0": None, "member1": None, "member2": {"x": 4}},
        "nu": {"member0": None, "member1": "str"},
        "rec": {"x": -1}, "dec": Decimal("-123456.789"), "fdec": Decimal("9999999999999999.99"),
        "date": dt.date(1900, 1, 1), "tsm": TSM, "tsu": TSU, "ltm": LTM, "ltu": LTU,
        "uid": str(UID), "tm": 3723004, "tu": 86399999999, "ndate": None, "nrec": {"x": 9},
    }
    value.update(overrides)
    return value


def avro_schema(schema, references=None) -> object:
    return parse("AVRO", json.dumps(schema), references)


def fastavro_bytes(schema, record) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def fastavro_read(schema, payload: bytes):
    return fastavro.schemaless_reader(io.BytesIO(payload), fastavro.parse_schema(schema), None)


def to_arrow(value, spark):
    return pa.array([value], type=arrow_type(spark))


# ------------------------------------------------------------------ mapping


def test_spark_type_maps_every_construct_as_spark_avro():
    assert A.spark_type(avro_schema(ALL)) == ALL_SPARK


@pytest.mark.parametrize("schema, expected", [
    ("string", StringType()),
    ({"type": "array", "items": "int"}, ArrayType(IntegerType(), False)),
    ({"type": "map", "values": ["null", "bytes"]}, MapType(StringType(), BinaryType(), True)),
    (["null", "long"], LongType()),
    (["int", "long"], LongType()),
    (["float", "double"], DoubleType()),
    (["null", "int", "long"], LongType()),
    (["boolean"], BooleanType()),
    ("null", NullType()),
    ({"type": "enum", "name": "E", "symbols": ["A"]}, StringType()),
    ({"type": "long", "logicalType": "timestamp-nanos"}, LongType()),   # unknown to Spark: the plain type
    ({"type": "int", "logicalType": "timestamp-millis"}, IntegerType()),  # invalid on an int: ignored
    ({"type": "fixed", "name": "F2", "size": 2, "logicalType": "decimal", "precision": 10},
     BinaryType()),  # precision too big for 2 bytes: Avro drops the logical type, Spark reads binary
    ({"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 38}, DecimalType(38, 38)),
    ({"type": "long", "spark.sql.catalyst.type": "interval day to second"}, DayTimeIntervalType(0, 3)),
    ({"type": "int", "spark.sql.catalyst.type": "interval year to month"}, YearMonthIntervalType(0, 1)),
])
def test_spark_type_of_other_top_level_schemas(schema, expected):
    assert A.spark_type(avro_schema(schema)) == expected


def test_spark_type_refuses_recursive_records_as_spark_does():
    node = {"type": "record", "name": "Node", "fields": [
        {"name": "value", "type": "int"}, {"name": "next", "type": ["null", "Node"]}]}
    with pytest.raises(ValueError, match="recursive reference.*Node"):
        A.spark_type(avro_schema(node))
    with pytest.raises(ValueError, match="recursive"):
        A.decoder(avro_schema(node), None, framed=False)


def test_spark_type_with_referenced_named_types():
    money = parse("AVRO", json.dumps({"type": "record", "name": "Money", "namespace": "m", "fields": [
        {"name": "cents", "type": "long"}, {"name": "currency", "type": "string"}]}))
    order = avro_schema({"type": "record", "name": "Order", "fields": [
        {"name": "total", "type": "m.Money"}, {"name": "refund", "type": ["null", "m.Money"]}]},
        {"m.Money": money})
    money_type = StructType([StructField("cents", LongType(), False), StructField("currency", StringType(), False)])
    assert A.spark_type(order) == StructType([StructField("total", money_type, False),
                                              StructField("refund", money_type, True)])
    payload = fastavro_bytes({"type": "record", "name": "Order", "fields": [
        {"name": "total", "type": json.loads(money.text)},
        {"name": "refund", "type": ["null", "m.Money"]}]},
        {"total": {"cents": 150, "currency": "EUR"}, "refund": None})
    assert A.decoder(order, None, framed=True)(payload) == {
        "total": {"cents": 150, "currency": "EUR"}, "refund": None}


# ------------------------------------------------------------------ decoding what reference writers wrote


def test_decode_fastavro_record_with_every_construct_and_arrow_accepts_it():
    schema = avro_schema(ALL)
    payload = fastavro_bytes(ALL, full_record())
    decode = A.decoder(schema, schema, framed=True)
    value = decode(payload)
    assert value == expected_value()
    assert type(value["uid"]) is str
    assert to_arrow(value, ALL_SPARK).to_pylist() == [expected_value(
        m=[("k", 2.5)], tsm=TSM, tsu=TSU)]
    # bare (writer None) reads the same bytes the same way
    assert A.decoder(schema, None, framed=False)(payload) == expected_value()


def test_decode_every_union_branch_and_null():
    schema = avro_schema(ALL)
    decode = A.decoder(schema, None, framed=False)
    cases = [
        (dict(u=5, nu=None, ns=None, sn="x", fd=None, ndate=dt.date(2020, 2, 29), nrec=None, arr=[], m={}),
         dict(u={"member0": 5, "member1": None, "member2": None}, nu=None, ns=None, sn="x", fd=None,
              ndate=dt.date(2020, 2, 29), nrec=None, arr=[], m={})),
        (dict(u="five", nu=12, il=2**40),
         dict(u={"member0": None, "member1": "five", "member2": None},
              nu={"member0": 12, "member1": None}, il=2**40)),
    ]
    values = []
    for record, expected in cases:
        value = decode(fastavro_bytes(ALL, full_record(**record)))
        assert value == expected_value(**expected)
        values.append(value)
    arrow = pa.array(values, type=arrow_type(ALL_SPARK)).to_pylist()
    assert arrow[0]["u"] == {"member0": 5, "member1": None, "member2": None}
    assert arrow[0]["ndate"] == dt.date(2020, 2, 29) and arrow[0]["nrec"] is None
    assert arrow[1]["nu"] == {"member0": 12, "member1": None} and arrow[1]["il"] == 2**40


def test_decode_apache_avro_writer_output():
    schema_json = {"type": "record", "name": "Rec", "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": ["null", "string"]},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 6, "scale": 2}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "uid", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "either", "type": ["string", "double"]},
        {"name": "raw", "type": {"type": "fixed", "name": "F2", "size": 2, "logicalType": "decimal",
                                 "precision": 10}},
    ]}
    writer = avro.io.DatumWriter(avro.schema.parse(json.dumps(schema_json)))
    out = io.BytesIO()
    at = dt.datetime(2023, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
    writer.write({"id": 42, "name": None, "price": Decimal("-12.34"), "day": dt.date(2000, 1, 1), "at": at,
                  "uid": str(UID), "either": 0.5, "raw": b"\x01\x02"}, avro.io.BinaryEncoder(out))
    schema = avro_schema(schema_json)
    value = A.decoder(schema, None, framed=False)(out.getvalue())
    assert value == {"id": 42, "name": None, "price": Decimal("-12.34"), "day": dt.date(2000, 1, 1), "at": at,
                     "uid": str(UID), "either": {"member0": None, "member1": 0.5}, "raw": b"\x01\x02"}
    spark = A.spark_type(schema)
    assert spark["raw"].dataType == BinaryType()
    assert to_arrow(value, spark).to_pylist() == [value]


@pytest.fixture
def registry(pylog_broker):
    from confluent_kafka.schema_registry import SchemaRegistryClient
    client = SchemaRegistryClient({"url": pylog_broker.schema_registry_url, "max.retries": 0})
    yield client
    client.close()


V1 = {"type": "record", "name": "Payment", "namespace": "com.acme", "fields": [
    {"name": "id", "type": "long"},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "note", "type": ["null", "string"], "default": None},
]}
V2 = {"type": "record", "name": "Payment", "namespace": "com.acme", "fields": [
    {"name": "id", "type": "long"},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "channel", "type": {"type": "enum", "name": "Channel", "symbols": ["WEB", "APP"]},
     "default": "WEB"},
    {"name": "fee", "type": {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 2},
     "default": "\u0000\u0064"},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}, "default": 1},
]}


def unframe(message: bytes) -> tuple[int, bytes]:
    assert message[0] == 0
    return struct.unpack(">I", message[1:5])[0], message[5:]


def test_decode_confluent_avro_serializer_output_across_two_versions(registry):
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    context = SerializationContext("payments", MessageField.VALUE)
    at = dt.datetime(2024, 3, 1, 12, 0, 0, 250000, tzinfo=UTC)
    old = AvroSerializer(registry, json.dumps(V1))({"id": 1, "amount": Decimal("10.50"), "at": at,
                                                     "tags": ["a"], "note": "first"}, context)
    new = AvroSerializer(registry, json.dumps(V2))({"id": 2, "amount": Decimal("-0.01"), "at": at, "tags": [],
                                                     "channel": "APP", "fee": Decimal("1.25"),
                                                     "day": dt.date(2024, 3, 1)}, context)
    (old_id, old_payload), (new_id, new_payload) = unframe(old), unframe(new)
    assert (old_id, new_id) == (1, 2)
    writers = {i: parse("AVRO", registry.get_schema(i).schema_str) for i in (old_id, new_id)}
    v1, v2 = avro_schema(V1), avro_schema(V2)

    # the newest version reads both: the old record gets every added field's default, converted
    read_v2 = {i: A.decoder(v2, writers[i], framed=True) for i in writers}
    expected_old = {"id": 1, "amount": Decimal("10.50"), "at": at, "tags": ["a"], "channel": "WEB",
                    "fee": Decimal("1.00"), "day": dt.date(1970, 1, 2)}
    expected_new = {"id": 2, "amount": Decimal("-0.01"), "at": at, "tags": [], "channel": "APP",
                    "fee": Decimal("1.25"), "day": dt.date(2024, 3, 1)}
    values = [read_v2[old_id](old_payload), read_v2[new_id](new_payload)]
    assert values == [expected_old, expected_new]
    assert pa.array(values, type=arrow_type(A.spark_type(v2))).to_pylist() == values

    # the old version reads the new record: fields it does not know are dropped, "note" gets its default
    read_v1 = A.decoder(v1, writers[new_id], framed=True)
    assert read_v1(new_payload) == {"id": 2, "amount": Decimal("-0.01"), "at": at, "tags": [], "note": None}
    assert A.decoder(v1, writers[old_id], framed=True)(old_payload) == {
        "id": 1, "amount": Decimal("10.50"), "at": at, "tags": ["a"], "note": "first"}


# ------------------------------------------------------------------ evolution (Avro resolution)


def test_resolution_promotions_aliases_and_enum_default():
    writer = {"type": "record", "name": "R", "fields": [
        {"name": "a", "type": "int"}, {"name": "b", "type": "long"}, {"name": "c", "type": "float"},
        {"name": "d", "type": "string"}, {"name": "e", "type": "bytes"},
        {"name": "old_name", "type": "string"},
        {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "PINK"]}},
        {"name": "gone", "type": {"type": "map", "values": {"type": "array", "items": "Color"}}},
        {"name": "n", "type": ["null", "int"]},
    ]}
    reader = {"type": "record", "name": "R", "fields": [
        {"name": "a", "type": "double"}, {"name": "b", "type": "float"}, {"name": "c", "type": "double"},
        {"name": "d", "type": "bytes"}, {"name": "e", "type": "string"},
        {"name": "new_name", "aliases": ["old_name"], "type": "string"},
        {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "OTHER"],
                                   "default": "OTHER"}},
        {"name": "n", "type": ["null", "long"]},
        {"name": "added", "type": {"type": "array", "items": "int"}, "default": [1, 2]},
    ]}
    decode = A.decoder(avro_schema(reader), avro_schema(writer), framed=True)
    payload = fastavro_bytes(writer, {"a": 3, "b": 2**40, "c": 0.5, "d": "text", "e": b"raw",
                                      "old_name": "renamed", "color": "PINK", "gone": {"k": ["RED"]}, "n": 5})
    assert decode(payload) == {"a": 3.0, "b": float(2**40), "c": 0.5, "d": b"text", "e": "raw",
                               "new_name": "renamed", "color": "OTHER", "n": 5, "added": [1, 2]}
    value = decode(payload)
    assert type(value["a"]) is float
    assert to_arrow(value, A.spark_type(avro_schema(reader))).to_pylist()[0]["color"] == "OTHER"


def test_resolution_into_member_unions_and_logical_types_the_writer_lacks():
    writer = {"type": "record", "name": "R", "fields": [
        {"name": "u", "type": ["string", "int"]},
        {"name": "v", "type": "int"},
        {"name": "ts", "type": "long"},
        {"name": "money", "type": "bytes"},
        {"name": "day", "type": "int"},
        {"name": "w", "type": ["null", "long"]},
    ]}
    reader = {"type": "record", "name": "R", "fields": [
        {"name": "u", "type": ["int", "boolean", "string"]},
        {"name": "v", "type": ["null", "boolean", "long"]},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "money", "type": {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 1}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "w", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}]},
        {"name": "both", "type": ["int", "string"], "default": 3},
        {"name": "raw", "type": {"type": "fixed", "name": "F3", "size": 3}, "default": "\u00ff\u0000a"},
    ]}
    r, w = avro_schema(reader), avro_schema(writer)
    decode = A.decoder(r, w, framed=True)
    spark = A.spark_type(r)
    first = decode(fastavro_bytes(writer, {"u": "s", "v": 7, "ts": 1500, "money": b"\x04\xd2", "day": 3,
                                           "w": 10}))
    second = decode(fastavro_bytes(writer, {"u": 9, "v": -1, "ts": -1, "money": b"\xff", "day": -1,
                                            "w": None}))
    assert first == {"u": {"member0": None, "member1": None, "member2": "s"},
                     "v": {"member0": None, "member1": 7}, "ts": 1500000, "money": Decimal("123.4"),
                     "day": dt.date(1970, 1, 4), "w": 10,
                     "both": {"member0": 3, "member1": None}, "raw": b"\xff\x00a"}
    assert second["u"] == {"member0": 9, "member1": None, "member2": None}
    assert (second["ts"], second["money"], second["day"], second["w"]) == (
        -1000, Decimal("-0.1"), dt.date(1969, 12, 31), None)
    rows = pa.array([first, second], type=arrow_type(spark)).to_pylist()
    assert rows[0]["ts"] == dt.datetime(1970, 1, 1, 0, 0, 1, 500000, tzinfo=UTC)
    assert rows[0]["w"] == dt.datetime(1970, 1, 1, 0, 0, 0, 10, tzinfo=UTC)
    assert rows[1]["ts"] == dt.datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)


def test_resolution_failures_raise_on_the_record_that_needs_them():
    writer = {"type": "record", "name": "R", "fields": [
        {"name": "x", "type": ["int", "string"]},
        {"name": "color", "type": {"type": "enum", "name": "C", "symbols": ["A", "B"]}}]}
    reader = {"type": "record", "name": "R", "fields": [
        {"name": "x", "type": "int"},
        {"name": "color", "type": {"type": "enum", "name": "C", "symbols": ["A"]}}]}
    decode = A.decoder(avro_schema(reader), avro_schema(writer), framed=True)
    assert decode(fastavro_bytes(writer, {"x": 1, "color": "A"})) == {"x": 1, "color": "A"}
    with pytest.raises(Exception):  # the string branch has no reader counterpart
        decode(fastavro_bytes(writer, {"x": "s", "color": "A"}))
    with pytest.raises(Exception):  # a symbol the reader lacks and no default
        decode(fastavro_bytes(writer, {"x": 1, "color": "B"}))
    missing = {"type": "record", "name": "R", "fields": [{"name": "y", "type": "int"}]}
    with pytest.raises(Exception):  # a reader field without default that the writer lacks
        A.decoder(avro_schema(missing), avro_schema(writer), framed=True)(
            fastavro_bytes(writer, {"x": 1, "color": "A"}))


# ------------------------------------------------------------------ corrupt input


@pytest.mark.parametrize("mangle", [
    lambda b: b[:-1],                 # truncated
    lambda b: b + b"\x00",            # trailing bytes
    lambda b: b"",                    # empty
    lambda b: b[:1] + b"\x7e" + b[2:],  # the string's length says 63 bytes
    lambda b: b[:5] + b"\x04" + b[6:],  # union branch 2 of 2
])
def test_corrupt_payloads_raise(mangle):
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "a", "type": "int"}, {"name": "s", "type": "string"}, {"name": "u", "type": ["null", "long"]}]}
    payload = fastavro_bytes(schema, {"a": 1, "s": "abc", "u": 300})
    decode = A.decoder(avro_schema(schema), None, framed=False)
    assert decode(payload) == {"a": 1, "s": "abc", "u": 300}
    with pytest.raises(Exception):
        decode(mangle(payload))


def test_corrupt_union_index_and_utf8_raise():
    schema = {"type": "record", "name": "R", "fields": [{"name": "u", "type": ["null", "string"]}]}
    decode = A.decoder(avro_schema(schema), None, framed=False)
    assert decode(b"\x02\x02a") == {"u": "a"}
    with pytest.raises(Exception):
        decode(b"\x06\x02a")  # branch 3 of 2
    with pytest.raises(Exception):
        decode(b"\x02\x02\xff")  # not UTF-8


# ------------------------------------------------------------------ encoder


def arrow_row(value, spark):
    """What the sink hands the encoder: pyarrow's to_pylist() of the row."""
    return to_arrow(value, spark).to_pylist()[0]


def test_encoder_round_trips_every_construct_through_fastavro():
    schema = avro_schema(ALL)
    encode = A.encoder(schema, ALL_SPARK, framed=True)
    rows = [arrow_row(expected_value(), ALL_SPARK),
            arrow_row(expected_value(u={"member0": 5, "member1": None, "member2": None}, nu=None, ns=None,
                                     sn="x", fd=None, ndate=dt.date(2020, 2, 29), nrec=None, arr=[], m={}),
                      ALL_SPARK)]
    assert isinstance(rows[0]["m"], list) and rows[0]["tsm"].tzinfo is not None  # what the sink really gives
    first, second = (fastavro_read(ALL, encode(row)) for row in rows)
    assert first == fastavro_read(ALL, fastavro_bytes(ALL, full_record()))
    assert first["uid"] == UID and first["tm"] == dt.time(1, 2, 3, 4000) and first["tsm"] == TSM
    assert (second["u"], second["nu"], second["ns"], second["fd"], second["ndate"], second["nrec"]) == (
        5, None, None, None, dt.date(2020, 2, 29), None)
    # and our own decoder reads back exactly what it was given
    decode = A.decoder(schema, None, framed=True)
    assert [decode(encode(row)) for row in rows] == [
        expected_value(), expected_value(u={"member0": 5, "member1": None, "member2": None}, nu=None, ns=None,
                                         sn="x", fd=None, ndate=dt.date(2020, 2, 29), nrec=None, arr=[], m={})]


def test_encoder_output_is_read_by_confluent_avro_deserializer(registry):
    from confluent_kafka.schema_registry import Schema
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    schema_id = registry.register_schema("sink-value", Schema(json.dumps(V2), "AVRO"))
    v2 = avro_schema(V2)
    spark = A.spark_type(v2)
    # the DataFrame's struct in another order than the schema: fields go by name
    shuffled = StructType(list(reversed(spark.fields)))
    at = dt.datetime(2024, 3, 1, 12, 0, 0, 250000, tzinfo=UTC)
    row = arrow_row({"day": dt.date(2024, 3, 1), "fee": Decimal("1.5"), "channel": "APP", "tags": ["x", "y"],
                     "at": at, "amount": Decimal("-7.25"), "id": 99}, shuffled)
    payload = A.encoder(v2, shuffled, framed=True)(row)
    message = b"\x00" + struct.pack(">I", schema_id) + payload
    value = AvroDeserializer(registry)(message, SerializationContext("sink", MessageField.VALUE))
    assert value == {"id": 99, "amount": Decimal("-7.25"), "at": at, "tags": ["x", "y"], "channel": "APP",
                     "fee": Decimal("1.50"), "day": dt.date(2024, 3, 1)}


def test_encoder_fills_defaults_of_fields_the_struct_lacks():
    v2 = avro_schema(V2)
    partial = StructType([f for f in A.spark_type(v2).fields if f.name not in ("channel", "fee", "day")])
    at = dt.datetime(2024, 1, 1, tzinfo=UTC)
    payload = A.encoder(v2, partial, framed=False)(
        arrow_row({"id": 1, "amount": Decimal("0.10"), "at": at, "tags": []}, partial))
    assert fastavro_read(V2, payload) == {"id": 1, "amount": Decimal("0.10"), "at": at, "tags": [],
                                          "channel": "WEB", "fee": Decimal("1.00"), "day": dt.date(1970, 1, 2)}


@pytest.mark.parametrize("change, path, reason", [
    (dict(i=2**31), "i", "out of range"),
    (dict(l=None), "l", "null in a non-nullable field"),
    (dict(s=5), "s", "expected a string"),
    (dict(b=1), "b", "expected a boolean"),
    (dict(e="CLUB"), "e", "unknown enum symbol 'CLUB'"),
    (dict(fx=b"abc"), "fx", "fixed of size 4 given 3 bytes"),
    (dict(dec=Decimal("1234567.891")), "dec", "does not fit decimal(9,3)"),
    (dict(dec=Decimal("1.2345")), "dec", "more than 3 digits"),
    (dict(rec={"x": None}), "rec.x", "null in a non-nullable field"),
    (dict(rec={}), "rec.x", "missing required field"),
    (dict(arr=[1, 2**63]), "arr.element", "out of range"),
    (dict(m=[("k", None)]), "m.value", "null in a non-nullable field"),
    (dict(m=[(1, 2.0)]), "m.key", "map keys must be strings"),
    (dict(u={"member0": None, "member1": None, "member2": None}), "u", "no member of the union is set"),
    (dict(u={"member0": None, "member1": None, "member2": {"x": 2**40}}), "u.x", "out of range"),
    (dict(tsm="2024-01-01"), "tsm", "expected a timestamp"),
    (dict(date=5.5), "date", "expected a date"),
])
def test_encoder_row_mismatch_names_the_field(change, path, reason):
    encode = A.encoder(avro_schema(ALL), ALL_SPARK, framed=True)
    row = arrow_row(expected_value(), ALL_SPARK)
    row.update(change)
    with pytest.raises(RowMismatch) as error:
        encode(row)
    assert error.value.path == path
    assert reason in error.value.reason
    assert f"field '{path}'" in str(error.value)


def test_encoder_missing_top_level_field_and_null_row():
    encode = A.encoder(avro_schema(V1), A.spark_type(avro_schema(V1)), framed=True)
    with pytest.raises(RowMismatch) as error:
        encode({"id": 1, "at": dt.datetime(2024, 1, 1, tzinfo=UTC), "tags": []})
    assert error.value.path == "amount"
    with pytest.raises(RowMismatch, match="null"):
        encode(None)


# ------------------------------------------------------------------ schema_for (spark-avro's toAvroType)


def test_schema_for_derives_spark_avros_schema():
    spark = StructType([
        StructField("id", LongType(), False),
        StructField("small", ShortType(), False),
        StructField("name", StringType(), True),
        StructField("price", DecimalType(10, 2), True),
        StructField("day", DateType(), False),
        StructField("at", TimestampType(), True),
        StructField("local", TimestampNTZType(), False),
        StructField("blob", BinaryType(), False),
        StructField("ratio", FloatType(), False),
        StructField("ok", BooleanType(), False),
        StructField("tags", ArrayType(StringType(), True), False),
        StructField("attrs", MapType(StringType(), DoubleType(), False), True),
        StructField("inner", StructType([StructField("x", IntegerType(), False),
                                         StructField("amount", DecimalType(38, 0), False)]), True),
        StructField("took", DayTimeIntervalType(0, 3), False),
    ])
    text, message = A.schema_for(spark, name="topLevelRecord", namespace="")
    assert message is None
    assert json.loads(text) == {"type": "record", "name": "topLevelRecord", "fields": [
        {"name": "id", "type": "long"},
        {"name": "small", "type": "int"},
        {"name": "name", "type": ["string", "null"]},
        {"name": "price", "type": [{"type": "fixed", "name": "fixed", "namespace": "topLevelRecord.price",
                                    "size": 5, "logicalType": "decimal", "precision": 10, "scale": 2}, "null"]},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "at", "type": [{"type": "long", "logicalType": "timestamp-micros"}, "null"]},
        {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "blob", "type": "bytes"},
        {"name": "ratio", "type": "float"},
        {"name": "ok", "type": "boolean"},
        {"name": "tags", "type": {"type": "array", "items": ["string", "null"]}},
        {"name": "attrs", "type": [{"type": "map", "values": "double"}, "null"]},
        {"name": "inner", "type": [{"type": "record", "name": "inner", "namespace": "topLevelRecord", "fields": [
            {"name": "x", "type": "int"},
            {"name": "amount", "type": {"type": "fixed", "name": "fixed", "namespace": "topLevelRecord.inner.amount",
                                        "size": 16, "logicalType": "decimal", "precision": 38, "scale": 0}}]},
            "null"]},
        {"name": "took", "type": {"type": "long", "spark.sql.catalyst.type": "interval day to second"}},
    ]}
    parsed = parse("AVRO", text)  # the registry accepts it
    back = A.spark_type(parsed)
    # spark-avro's round trip: the same type, except that ShortType comes back as IntegerType
    expected = StructType([StructField(f.name, IntegerType(), False) if f.name == "small" else f
                           for f in spark.fields])
    assert back == expected
    row = {"id": 1, "small": 2, "name": None, "price": Decimal("3.10"), "day": dt.date(2020, 1, 1),
           "at": dt.datetime(2020, 1, 1, 0, 0, 0, 1, tzinfo=UTC), "local": dt.datetime(2020, 1, 1, 5),
           "blob": b"\x00", "ratio": 0.5, "ok": False, "tags": ["a", None], "attrs": None,
           "inner": {"x": 3, "amount": Decimal(10) ** 37}, "took": dt.timedelta(days=1, microseconds=5)}
    payload = A.encoder(parsed, spark, framed=False)(arrow_row(row, spark))
    assert A.decoder(parsed, None, framed=False)(payload) == dict(
        row, took=86400000005, local=dt.datetime(2020, 1, 1, 5))


def test_schema_for_with_namespace_and_refusals():
    text, _ = A.schema_for(StructType([StructField("v", StructType([StructField("d", DecimalType(5, 1))]))]),
                           name="Value", namespace="com.acme")
    assert json.loads(text) == {"type": "record", "name": "Value", "namespace": "com.acme", "fields": [
        {"name": "v", "type": [{"type": "record", "name": "v", "namespace": "com.acme.Value", "fields": [
            {"name": "d", "type": [{"type": "fixed", "name": "fixed", "namespace": "com.acme.Value.v.d",
                                    "size": 3, "logicalType": "decimal", "precision": 5, "scale": 1},
                                   "null"]}]}, "null"]}]}
    assert parse("AVRO", text).name == "com.acme.Value"
    with pytest.raises(ValueError, match="string keys"):
        A.schema_for(StructType([StructField("m", MapType(LongType(), LongType()))]), name="r", namespace="")
