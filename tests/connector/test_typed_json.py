"""connector.typed.json_format: JSON Schema → Spark types, JSON documents → Arrow-ready values, and back.

No Spark session: pyspark's types and pyarrow only.  Records written by confluent-kafka's JSONSerializer
(registering with the in-process broker's Schema Registry) are decoded, across two schema versions; the
encoder's output is read back by confluent-kafka's JSONDeserializer.
"""
import base64
import datetime as dt
import decimal
import json
import struct

import pyarrow as pa
import pytest
from pyspark.sql.types import (ArrayType, BinaryType, BooleanType, DateType, DayTimeIntervalType, DecimalType,
                               DoubleType, FloatType, IntegerType, LongType, MapType, ShortType, StringType,
                               StructField, StructType, TimestampNTZType, TimestampType)

from broker_sim.registry.types import parse
from connector.typed import RowMismatch, arrow_type, json_format

UTC = dt.timezone.utc


def js(value, references=None):
    return parse("JSON", json.dumps(value), references)


def nullable_struct(*fields):
    return StructType([StructField(name, t, True) for name, t in fields])


def arrow_roundtrip(values, spark_type):
    """pa.array accepts the decoder's values for the Spark type; what Arrow holds, as Python values."""
    return pa.array(values, type=arrow_type(spark_type)).to_pylist()


# ------------------------------------------------------------------------------------------------- mapping

EVERY_CONSTRUCT = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Everything",
    "type": "object",
    "properties": {
        "s": {"type": "string"},
        "ts": {"type": "string", "format": "date-time"},
        "d": {"type": "string", "format": "date"},
        "email": {"type": "string", "format": "email"},
        "bin": {"type": "string", "contentEncoding": "base64"},
        "i": {"type": "integer"},
        "n": {"type": "number"},
        "b": {"type": "boolean"},
        "arr": {"type": "array", "items": {"type": "integer"}},
        "arr_any": {"type": "array"},
        "tuple": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}]},
        "map": {"type": "object", "additionalProperties": {"type": "number"}},
        "pmap": {"type": "object", "patternProperties": {"^x": {"type": "string"}, "^y": {"type": "string"}}},
        "pmap_mixed": {"type": "object", "patternProperties": {"^x": {"type": "string"}, "^y": {"type": "integer"}}},
        "obj_any": {"type": "object"},
        "nested": {"type": "object", "properties": {"z": {"type": "integer"}, "a": {"type": "string"}}},
        "implied_obj": {"properties": {"q": {"type": "boolean"}}},
        "type_null_t": {"type": ["null", "string"]},
        "t_null": {"type": ["integer", "null"]},
        "int_or_num": {"type": ["integer", "number"]},
        "str_or_int": {"type": ["string", "integer"]},
        "oneof_null": {"oneOf": [{"type": "null"}, {"type": "string", "format": "date"}]},
        "anyof_null": {"anyOf": [{"$ref": "#/definitions/Point"}, {"type": "null"}]},
        "oneof_two": {"oneOf": [{"type": "string"}, {"type": "boolean"}]},
        "allof": {"allOf": [{"$ref": "#/definitions/Point"},
                            {"type": "object", "properties": {"label": {"type": "string"}}}]},
        "allof_one": {"allOf": [{"type": "integer"}, {"minimum": 0}]},
        "enum_s": {"enum": ["A", "B"]},
        "enum_i": {"enum": [1, 2, None]},
        "enum_mixed": {"enum": ["A", 1]},
        "const": {"const": 3.5},
        "empty": {},
        "true": True,
        "only_null": {"type": "null"},
        "ref_defs": {"$ref": "#/definitions/Point"},
        "ref_2019": {"$ref": "#/$defs/Tag"},
        "tree": {"$ref": "#/definitions/Tree"},
    },
    "definitions": {
        "Point": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
                  "required": ["x"]},
        "Tree": {"type": "object", "properties": {
            "value": {"type": "integer"},
            "children": {"type": "array", "items": {"$ref": "#/definitions/Tree"}}}},
    },
    "$defs": {"Tag": {"type": "string"}},
}

POINT = nullable_struct(("x", DoubleType()), ("y", DoubleType()))
EVERY_CONSTRUCT_TYPE = nullable_struct(
    ("s", StringType()),
    ("ts", TimestampType()),
    ("d", DateType()),
    ("email", StringType()),
    ("bin", BinaryType()),
    ("i", LongType()),
    ("n", DoubleType()),
    ("b", BooleanType()),
    ("arr", ArrayType(LongType(), True)),
    ("arr_any", ArrayType(StringType(), True)),
    ("tuple", ArrayType(StringType(), True)),
    ("map", MapType(StringType(), DoubleType(), True)),
    ("pmap", MapType(StringType(), StringType(), True)),
    ("pmap_mixed", MapType(StringType(), StringType(), True)),  # JSON text of each value
    ("obj_any", StringType()),
    ("nested", nullable_struct(("z", LongType()), ("a", StringType()))),
    ("implied_obj", nullable_struct(("q", BooleanType()))),
    ("type_null_t", StringType()),
    ("t_null", LongType()),
    ("int_or_num", DoubleType()),
    ("str_or_int", StringType()),
    ("oneof_null", DateType()),
    ("anyof_null", POINT),
    ("oneof_two", StringType()),
    ("allof", nullable_struct(("x", DoubleType()), ("y", DoubleType()), ("label", StringType()))),
    ("allof_one", LongType()),
    ("enum_s", StringType()),
    ("enum_i", LongType()),
    ("enum_mixed", StringType()),
    ("const", DoubleType()),
    ("empty", StringType()),
    ("true", StringType()),
    ("only_null", StringType()),
    ("ref_defs", POINT),
    ("ref_2019", StringType()),
    ("tree", nullable_struct(("value", LongType()), ("children", ArrayType(StringType(), True)))),
)


def test_every_construct_maps_to_its_spark_type_in_property_order():
    assert json_format.spark_type(js(EVERY_CONSTRUCT)) == EVERY_CONSTRUCT_TYPE


def test_top_level_non_object_schemas_map_to_their_own_type():
    assert json_format.spark_type(js({"type": "string"})) == StringType()
    assert json_format.spark_type(js({"type": "integer"})) == LongType()
    assert json_format.spark_type(js({"type": "array", "items": {"type": "number"}})) == ArrayType(DoubleType(), True)
    assert json_format.spark_type(js(True)) == StringType()
    assert json_format.spark_type(js({})) == StringType()


def test_refs_resolve_through_references():
    address = js({"$id": "https://acme.example/address.json", "type": "object",
                  "properties": {"street": {"type": "string"}, "zip": {"type": "integer"}}})
    customer = js({"type": "object", "properties": {
        "name": {"type": "string"},
        "home": {"$ref": "https://acme.example/address.json"}}},
        {"https://acme.example/address.json": address})
    address_type = nullable_struct(("street", StringType()), ("zip", LongType()))
    assert json_format.spark_type(customer) == nullable_struct(("name", StringType()), ("home", address_type))
    decode = json_format.decoder(customer, None, framed=False)
    assert decode(b'{"name":"ann","home":{"zip":12345,"street":"Main"}}') == {
        "name": "ann", "home": {"street": "Main", "zip": 12345}}


def test_message_name_is_refused():
    with pytest.raises(ValueError, match="protobuf"):
        json_format.spark_type(js({"type": "string"}), "Event")


# ------------------------------------------------------------------------------------------------- decoding

def test_decode_every_construct_and_arrow_accepts_it():
    schema = js(EVERY_CONSTRUCT)
    decode = json_format.decoder(schema, None, framed=False)
    doc = {
        "s": "text", "ts": "2024-02-29T23:59:58.123456+02:00", "d": "2024-02-29", "email": "a@b.c",
        "bin": base64.b64encode(b"\x00\xffbin").decode(), "i": -(1 << 63), "n": 1, "b": False,
        "arr": [1, None, 3], "arr_any": [1, "x", {"k": [True]}, None], "tuple": ["a", 2],
        "map": {"a": 1.5, "b": None}, "pmap": {"x1": "u"}, "pmap_mixed": {"x1": "u", "y1": 7},
        "obj_any": {"k": {"nested": [1, 2]}}, "nested": {"a": "A", "z": 26, "dropped": 1},
        "implied_obj": {"q": True}, "type_null_t": None, "t_null": 7, "int_or_num": 2, "str_or_int": 5,
        "oneof_null": "1970-01-01", "anyof_null": {"x": 1.25}, "oneof_two": "yes",
        "allof": {"x": 1, "y": 2, "label": "p"}, "allof_one": 4.0, "enum_s": "B", "enum_i": 2,
        "enum_mixed": "A", "const": 3.5, "empty": "just a string", "true": None, "only_null": None,
        "ref_defs": {"y": -0.5}, "ref_2019": "tag",
        "tree": {"value": 1, "children": [{"value": 2, "children": []}]},
        "not_in_schema": "dropped",
    }
    value = decode(json.dumps(doc).encode())
    expected = {
        "s": "text", "ts": dt.datetime(2024, 2, 29, 21, 59, 58, 123456, tzinfo=UTC), "d": dt.date(2024, 2, 29),
        "email": "a@b.c", "bin": b"\x00\xffbin", "i": -(1 << 63), "n": 1.0, "b": False,
        "arr": [1, None, 3], "arr_any": ["1", '"x"', '{"k":[true]}', None], "tuple": ['"a"', "2"],
        "map": [("a", 1.5), ("b", None)], "pmap": [("x1", "u")], "pmap_mixed": [("x1", '"u"'), ("y1", "7")],
        "obj_any": '{"k":{"nested":[1,2]}}', "nested": {"z": 26, "a": "A"}, "implied_obj": {"q": True},
        "type_null_t": None, "t_null": 7, "int_or_num": 2.0, "str_or_int": "5", "oneof_null": dt.date(1970, 1, 1),
        "anyof_null": {"x": 1.25, "y": None}, "oneof_two": '"yes"', "allof": {"x": 1.0, "y": 2.0, "label": "p"},
        "allof_one": 4, "enum_s": "B", "enum_i": 2, "enum_mixed": '"A"', "const": 3.5, "empty": '"just a string"',
        "true": None, "only_null": None, "ref_defs": {"x": None, "y": -0.5}, "ref_2019": "tag",
        "tree": {"value": 1, "children": ['{"value":2,"children":[]}']},
    }
    assert value == expected
    assert list(value) == [f.name for f in EVERY_CONSTRUCT_TYPE.fields]
    assert type(value["n"]) is float and type(value["int_or_num"]) is float
    held = arrow_roundtrip([value, None], EVERY_CONSTRUCT_TYPE)
    assert held[0] == {**expected, "ts": expected["ts"]}  # tz-aware compares by instant
    assert held[0]["ts"].utcoffset() == dt.timedelta(0)
    assert held[1] is None


def test_absent_and_null_properties_decode_to_null():
    schema = js(EVERY_CONSTRUCT)
    decode = json_format.decoder(schema, None, framed=True)
    value = decode(b"{}")
    assert value == {f.name: None for f in EVERY_CONSTRUCT_TYPE.fields}
    assert decode(json.dumps({f.name: None for f in EVERY_CONSTRUCT_TYPE.fields}).encode()) == value
    assert arrow_roundtrip([value], EVERY_CONSTRUCT_TYPE) == [value]


@pytest.mark.parametrize("text, expected", [
    ("2024-01-02T03:04:05Z", dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)),
    ("2024-01-02T03:04:05.1Z", dt.datetime(2024, 1, 2, 3, 4, 5, 100000, tzinfo=UTC)),
    ("2024-01-02T03:04:05.123456789-05:30", dt.datetime(2024, 1, 2, 8, 34, 5, 123456, tzinfo=UTC)),
    ("2024-01-02T03:04:05", dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)),  # no offset: taken as UTC
    ("1969-12-31T23:59:59.999999Z", dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)),
])
def test_date_time_decodes_to_a_utc_timestamp(text, expected):
    schema = js({"type": "object", "properties": {"ts": {"type": "string", "format": "date-time"}}})
    value = json_format.decoder(schema, None, framed=False)(json.dumps({"ts": text}).encode())
    assert value == {"ts": expected} and value["ts"].tzinfo == UTC
    micros = pa.array([value], type=arrow_type(json_format.spark_type(schema))).field("ts").cast(pa.int64())
    assert micros.to_pylist() == [(expected - dt.datetime(1970, 1, 1, tzinfo=UTC)) // dt.timedelta(microseconds=1)]


def test_top_level_scalars_and_json_text_decode():
    framed_seven = memoryview(b"\x00\x00\x00\x00\x017")[5:]
    assert json_format.decoder(js({"type": "integer"}), None, framed=True)(framed_seven) == 7
    assert json_format.decoder(js({"type": "integer"}), None, framed=False)(b" 42 ") == 42
    assert json_format.decoder(js({"type": "string"}), None, framed=False)("é".join('""').encode()) == "é"
    assert json_format.decoder(js({}), None, framed=False)(b'{"b": [1, 2.5, "\xc3\xa9"]}') == '{"b":[1,2.5,"é"]}'
    assert json_format.decoder(js({}), None, framed=False)(b"null") is None


@pytest.mark.parametrize("payload, message", [
    (b'{"i": "1"}', "field 'i': expected an integer"),
    (b'{"i": 1.5}', "field 'i': expected an integer"),
    (b'{"i": true}', "field 'i': expected an integer"),
    (b'{"i": 9223372036854775808}', "field 'i': expected an integer within 64 bits"),
    (b'{"n": "1"}', "field 'n': expected a number"),
    (b'{"b": 0}', "field 'b': expected a boolean"),
    (b'{"s": 5}', "field 's': expected a string"),
    (b'{"ts": "yesterday"}', "field 'ts': expected a date-time"),
    (b'{"d": "2024-13-01"}', "field 'd': expected a date"),
    (b'{"d": "2024-W01-1"}', "field 'd': expected a date"),
    (b'{"bin": "not base64!"}', "field 'bin': expected base64 text"),
    (b'{"arr": [1, "2"]}', r"field 'arr\[\]': expected an integer"),
    (b'{"arr": {"0": 1}}', "field 'arr': expected an array"),
    (b'{"map": [1]}', "field 'map': expected an object"),
    (b'{"map": {"k": "v"}}', r"field 'map\{\}': expected a number"),
    (b'{"nested": {"z": "26"}}', "field 'nested.z': expected an integer"),
    (b'{"nested": "flat"}', "field 'nested': expected an object"),
    (b'[1]', "field '<root>': expected an object"),
])
def test_a_value_of_the_wrong_json_type_raises_naming_the_field(payload, message):
    decode = json_format.decoder(js(EVERY_CONSTRUCT), None, framed=True)
    with pytest.raises(ValueError, match=message):
        decode(payload)


@pytest.mark.parametrize("payload", [
    b"", b"{", b'{"s": "x"} trailing', b"\xff\xfe{}", b'{"s": "\xff"}', b'{"n": NaN}', b'{"n": Infinity}',
    b"\x00\x00\x00\x00\x01{}",  # a framed record handed over with its header still on
    b"[" * 100_000,
])
def test_corrupt_payloads_raise(payload):
    decode = json_format.decoder(js(EVERY_CONSTRUCT), None, framed=True)
    with pytest.raises(Exception):
        decode(payload)


V1 = {"title": "Event", "type": "object", "additionalProperties": False,
      "properties": {"id": {"type": "integer"}, "name": {"type": "string"}, "old": {"type": "boolean"}},
      "required": ["id"]}
V2 = {"title": "Event", "type": "object", "additionalProperties": False,
      "properties": {"id": {"type": "integer"}, "name": {"type": "string"},
                     "at": {"type": "string", "format": "date-time"},
                     "tags": {"type": "array", "items": {"type": "string"}}},
      "required": ["id"]}


def test_evolution_projects_onto_the_reader_schema():
    v1, v2 = js(V1), js(V2)
    old_record = b'{"id": 1, "name": "a", "old": true}'
    new_record = b'{"id": 2, "name": "b", "at": "2024-05-06T07:08:09Z", "tags": ["x"]}'
    read_new = json_format.decoder(v2, v1, framed=True)
    assert read_new(old_record) == {"id": 1, "name": "a", "at": None, "tags": None}
    assert json_format.decoder(v2, v2, framed=True)(new_record) == {
        "id": 2, "name": "b", "at": dt.datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC), "tags": ["x"]}
    read_old = json_format.decoder(v1, v2, framed=True)
    assert read_old(new_record) == {"id": 2, "name": "b", "old": None}


# ------------------------------------------------------------------------- confluent-kafka's serializers

@pytest.fixture
def registry(pylog_broker):
    from confluent_kafka.schema_registry import SchemaRegistryClient
    client = SchemaRegistryClient({"url": pylog_broker.schema_registry_url, "max.retries": 0})
    yield client
    client.close()


def split_frame(record: bytes) -> tuple[int, bytes]:
    assert record[0] == 0
    return struct.unpack(">I", record[1:5])[0], record[5:]


LOGICAL_V1 = {"title": "Reading", "type": "object", "additionalProperties": False,
              "properties": {
                  "id": {"type": "integer"},
                  "at": {"type": "string", "format": "date-time"},
                  "day": {"type": "string", "format": "date"},
                  "raw": {"type": "string", "contentEncoding": "base64"},
                  "value": {"type": ["number", "null"]},
                  "ok": {"type": "boolean"},
                  "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                  "extra": {}},
              "required": ["id"]}
LOGICAL_V2 = {**LOGICAL_V1, "properties": {**LOGICAL_V1["properties"],
                                           "source": {"type": "string", "default": "web"}}}


def test_json_serializer_records_across_two_versions_decode_exactly(registry):
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    context = SerializationContext("readings", MessageField.VALUE)
    ser_v1 = JSONSerializer(json.dumps(LOGICAL_V1), registry)
    ser_v2 = JSONSerializer(json.dumps(LOGICAL_V2), registry)
    records = [
        ser_v1({"id": 1, "at": "2024-03-04T05:06:07.890Z", "day": "2024-03-04",
                "raw": base64.b64encode(b"\x01\x02").decode(), "value": 2.5, "ok": True,
                "labels": {"k": "v"}, "extra": {"any": ["thing", 1]}}, context),
        ser_v1({"id": 2, "value": None}, context),
        ser_v2({"id": 3, "at": "2024-03-04T05:06:07+01:00", "value": 7, "source": "app", "extra": "s"}, context),
    ]
    ids = [split_frame(r)[0] for r in records]
    assert ids[0] == ids[1] != ids[2]
    writers = {i: parse("JSON", registry.get_schema(i).schema_str) for i in set(ids)}
    reader = js(LOGICAL_V2)
    reader_type = json_format.spark_type(reader)
    assert reader_type == nullable_struct(
        ("id", LongType()), ("at", TimestampType()), ("day", DateType()), ("raw", BinaryType()),
        ("value", DoubleType()), ("ok", BooleanType()), ("labels", MapType(StringType(), StringType(), True)),
        ("extra", StringType()), ("source", StringType()))
    values = []
    for record in records:
        schema_id, payload = split_frame(record)
        values.append(json_format.decoder(reader, writers[schema_id], framed=True)(payload))
    expected = [
        {"id": 1, "at": dt.datetime(2024, 3, 4, 5, 6, 7, 890000, tzinfo=UTC), "day": dt.date(2024, 3, 4),
         "raw": b"\x01\x02", "value": 2.5, "ok": True, "labels": [("k", "v")], "extra": '{"any":["thing",1]}',
         "source": None},
        {"id": 2, "at": None, "day": None, "raw": None, "value": None, "ok": None, "labels": None,
         "extra": None, "source": None},
        {"id": 3, "at": dt.datetime(2024, 3, 4, 4, 6, 7, tzinfo=UTC), "day": None, "raw": None, "value": 7.0,
         "ok": None, "labels": None, "extra": '"s"', "source": "app"},
    ]
    assert values == expected
    assert arrow_roundtrip(values, reader_type) == expected
    # the old version as the reader: the new property is dropped
    old_reader = js(LOGICAL_V1)
    schema_id, payload = split_frame(records[2])
    assert json_format.decoder(old_reader, writers[schema_id], framed=True)(payload) == {
        k: v for k, v in expected[2].items() if k != "source"}


# ------------------------------------------------------------------------------------------------ schema_for

ROW_TYPE = StructType([
    StructField("id", LongType(), False),
    StructField("small", ShortType(), True),
    StructField("name", StringType(), True),
    StructField("score", DoubleType(), True),
    StructField("ratio", FloatType(), True),
    StructField("ok", BooleanType(), False),
    StructField("at", TimestampType(), True),
    StructField("local", TimestampNTZType(), True),
    StructField("day", DateType(), True),
    StructField("raw", BinaryType(), True),
    StructField("price", DecimalType(38, 9), True),
    StructField("tags", ArrayType(StringType(), False), True),
    StructField("counts", MapType(StringType(), IntegerType(), True), True),
    StructField("inner", StructType([StructField("a", IntegerType(), False),
                                     StructField("b", ArrayType(DateType(), True), True)]), True),
])


def test_schema_for_derives_a_closed_draft07_schema():
    text, message_name = json_format.schema_for(ROW_TYPE, name="Row", namespace="com.acme")
    assert message_name is None

    def opt(node):
        return {"oneOf": [{"type": "null"}, node]}
    assert json.loads(text) == {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "com.acme.Row",
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "small": opt({"type": "integer"}),
            "name": opt({"type": "string"}),
            "score": opt({"type": "number"}),
            "ratio": opt({"type": "number"}),
            "ok": {"type": "boolean"},
            "at": opt({"type": "string", "format": "date-time"}),
            "local": opt({"type": "string", "format": "date-time"}),
            "day": opt({"type": "string", "format": "date"}),
            "raw": opt({"type": "string", "contentEncoding": "base64"}),
            "price": opt({"type": "number"}),
            "tags": opt({"type": "array", "items": {"type": "string"}}),
            "counts": opt({"type": "object", "additionalProperties": opt({"type": "integer"})}),
            "inner": opt({"type": "object",
                          "properties": {"a": {"type": "integer"},
                                         "b": opt({"type": "array",
                                                   "items": opt({"type": "string", "format": "date"})})},
                          "additionalProperties": False, "required": ["a"]}),
        },
        "additionalProperties": False,
        "required": ["id", "ok"],
    }
    assert list(json.loads(text)["properties"]) == ROW_TYPE.fieldNames()
    # the registry accepts it, and it maps back onto the column's type (as JSON Schema can hold it)
    assert json_format.spark_type(parse("JSON", text)) == nullable_struct(
        ("id", LongType()), ("small", LongType()), ("name", StringType()), ("score", DoubleType()),
        ("ratio", DoubleType()), ("ok", BooleanType()), ("at", TimestampType()), ("local", TimestampType()),
        ("day", DateType()), ("raw", BinaryType()), ("price", DoubleType()), ("tags", ArrayType(StringType(), True)),
        ("counts", MapType(StringType(), LongType(), True)),
        ("inner", nullable_struct(("a", LongType()), ("b", ArrayType(DateType(), True)))))


def test_schema_for_without_namespace_and_refusals():
    text, _ = json_format.schema_for(nullable_struct(("a", StringType())), name="topLevelRecord", namespace="")
    assert json.loads(text)["title"] == "topLevelRecord"
    with pytest.raises(ValueError, match="day to second"):
        json_format.schema_for(nullable_struct(("d", DayTimeIntervalType())), name="r", namespace="")
    with pytest.raises(ValueError, match="keys are strings"):
        json_format.schema_for(nullable_struct(("m", MapType(DateType(), StringType()))), name="r", namespace="")


# --------------------------------------------------------------------------------------------------- encoding

ROW = {
    "id": 7, "small": -3, "name": "zoë", "score": 0.1, "ratio": 0.5, "ok": True,
    "at": dt.datetime(2024, 6, 7, 8, 9, 10, 123456, tzinfo=UTC), "local": dt.datetime(2024, 6, 7, 8, 9, 10),
    "day": dt.date(1999, 12, 31), "raw": b"\x00\x01\xfe", "price": decimal.Decimal("12345678901234567890.123456789"),
    "tags": ["a", "b"], "counts": [("x", 1), ("y", None)], "inner": {"a": 1, "b": [dt.date(2000, 1, 1), None]},
}
ROW_DOC = {
    "id": 7, "small": -3, "name": "zoë", "score": 0.1, "ratio": 0.5, "ok": True,
    "at": "2024-06-07T08:09:10.123456Z", "local": "2024-06-07T08:09:10", "day": "1999-12-31", "raw": "AAH+",
    "price": 12345678901234567890.123456789, "tags": ["a", "b"], "counts": {"x": 1, "y": None},
    "inner": {"a": 1, "b": ["2000-01-01", None]},
}


def pylist(value, spark_type):
    """What the sink hands the encoder: pyarrow's to_pylist() of the column."""
    return pa.array([value], type=arrow_type(spark_type)).to_pylist()[0]


def test_encode_writes_the_document_exactly():
    text, _ = json_format.schema_for(ROW_TYPE, name="Row", namespace="")
    encode = json_format.encoder(parse("JSON", text), ROW_TYPE, framed=False)
    payload = encode(pylist(ROW, ROW_TYPE))
    assert payload == (
        b'{"id":7,"small":-3,"name":"zo\xc3\xab","score":0.1,"ratio":0.5,"ok":true,'
        b'"at":"2024-06-07T08:09:10.123456Z","local":"2024-06-07T08:09:10","day":"1999-12-31","raw":"AAH+",'
        b'"price":12345678901234567890.123456789,"tags":["a","b"],"counts":{"x":1,"y":null},'
        b'"inner":{"a":1,"b":["2000-01-01",null]}}')
    assert json.loads(payload, parse_float=decimal.Decimal)["price"] == ROW["price"]
    assert json_format.encoder(parse("JSON", text), ROW_TYPE, framed=True)(pylist(ROW, ROW_TYPE)) == payload


def test_encode_then_decode_round_trips_through_arrow():
    text, _ = json_format.schema_for(ROW_TYPE, name="Row", namespace="")
    schema = parse("JSON", text)
    payload = json_format.encoder(schema, ROW_TYPE, framed=True)(pylist(ROW, ROW_TYPE))
    value = json_format.decoder(schema, schema, framed=True)(payload)
    read_type = json_format.spark_type(schema)
    assert arrow_roundtrip([value], read_type) == [{
        **ROW, "local": dt.datetime(2024, 6, 7, 8, 9, 10, tzinfo=UTC), "price": 1.2345678901234567e19,
        "counts": [("x", 1), ("y", None)]}]


def test_nulls_are_written_where_allowed_and_left_out_where_not():
    schema = js({"type": "object", "properties": {
        "nullable": {"type": ["string", "null"]}, "plain": {"type": "string"}, "any": {}}})
    t = nullable_struct(("nullable", StringType()), ("plain", StringType()), ("any", StringType()))
    assert json_format.encoder(schema, t, framed=False)({"nullable": None, "plain": None, "any": None}) == \
        b'{"nullable":null,"any":null}'
    with pytest.raises(RowMismatch) as e:  # a null record is no object
        json_format.encoder(schema, t, framed=False)(None)
    assert (e.value.path, e.value.reason) == ("", "None is not of type 'object'")


def test_fields_are_matched_by_name_and_json_text_columns_are_embedded():
    schema = js({"type": "object", "properties": {"a": {"type": "integer"}, "payload": {},
                                                  "list": {"type": "array"}}, "required": ["a"]})
    t = nullable_struct(("list", ArrayType(StringType())), ("payload", StringType()), ("a", LongType()))
    encode = json_format.encoder(schema, t, framed=False)
    # an array without items reads as the JSON texts of its elements: they are written back as values
    assert json.loads(encode({"payload": '{"k": [1, "two"]}', "a": 1, "list": ["3", '"x"', None]})) == {
        "a": 1, "payload": {"k": [1, "two"]}, "list": [3, "x", None]}
    # a json-shaped column written then read gives the same text back
    decoded = json_format.decoder(schema, None, framed=False)(encode({"a": 1, "payload": '{"k":[1,"two"]}',
                                                                      "list": None}))
    assert decoded == {"a": 1, "payload": '{"k":[1,"two"]}', "list": None}


def test_a_map_column_writes_an_object_with_properties():
    schema = js({"type": "object", "properties": {"when": {"type": "string", "format": "date-time"}},
                 "additionalProperties": {"type": "string"}})
    t = MapType(StringType(), StringType())
    assert json_format.encoder(schema, t, framed=False)([("when", "2024-01-01T00:00:00Z"), ("k", "v")]) == \
        b'{"when":"2024-01-01T00:00:00Z","k":"v"}'
    with pytest.raises(RowMismatch) as e:
        json_format.encoder(schema, MapType(StringType(), LongType()), framed=False)([("k", 1)])
    assert e.value.path == "k"


MISMATCH_SCHEMA = {
    "type": "object", "additionalProperties": False, "required": ["id", "kind"],
    "properties": {
        "id": {"type": "integer", "minimum": 1, "maximum": 1000},
        "kind": {"enum": ["A", "B"]},
        "name": {"type": "string", "maxLength": 5},
        "nested": {"type": "object", "properties": {"deep": {"type": "integer"}}, "required": ["deep"]},
        "items": {"type": "array", "items": {"type": "object", "properties": {"v": {"type": "integer"}}}},
        "doc": {},
        "ratio": {"type": "number"},
    },
}
MISMATCH_TYPE = nullable_struct(
    ("id", LongType()), ("kind", StringType()), ("name", StringType()),
    ("nested", nullable_struct(("deep", StringType()))),
    ("items", ArrayType(nullable_struct(("v", StringType())))),
    ("doc", StringType()), ("ratio", DoubleType()))
GOOD = {"id": 5, "kind": "A", "name": "ok", "nested": {"deep": None}, "items": [], "doc": None, "ratio": 1.0}


@pytest.mark.parametrize("change, path, reason", [
    ({"id": 0}, "id", "less than the minimum of 1"),
    ({"id": 1001}, "id", "greater than the maximum of 1000"),
    ({"id": None}, "id", "None is not of type 'integer'"),
    ({"kind": "C"}, "kind", "'C' is not one of ['A', 'B']"),
    ({"kind": None}, "kind", "None is not one of ['A', 'B']"),
    ({"name": "toolong"}, "name", "'toolong' is too long"),
    ({"nested": {"deep": "x"}}, "nested.deep", "'x' is not of type 'integer'"),
    ({"items": [{"v": None}, {"v": "1"}]}, "items[1].v", "'1' is not of type 'integer'"),
    ({"doc": "{not json"}, "doc", "not JSON text"),
    ({"ratio": float("nan")}, "ratio", "nan is not a JSON number"),
])
def test_a_value_that_does_not_fit_raises_row_mismatch_naming_the_field(change, path, reason):
    encode = json_format.encoder(js(MISMATCH_SCHEMA), MISMATCH_TYPE, framed=True)
    assert json.loads(encode({**GOOD, "nested": None})) == {"id": 5, "kind": "A", "name": "ok", "items": [],
                                                            "doc": None, "ratio": 1.0}
    with pytest.raises(RowMismatch) as e:
        encode({**GOOD, "nested": None, **change})
    assert e.value.path == path
    assert reason in e.value.reason
    assert str(e.value).startswith(f"field '{path}': ")


def test_missing_required_and_unknown_fields_name_the_field():
    schema = js(MISMATCH_SCHEMA)
    without_kind = nullable_struct(("id", LongType()))
    with pytest.raises(RowMismatch) as e:
        json_format.encoder(schema, without_kind, framed=True)({"id": 3})
    assert (e.value.path, e.value.reason) == ("kind", "a required property is missing")
    with pytest.raises(RowMismatch) as e:
        json_format.encoder(schema, MISMATCH_TYPE, framed=True)({**GOOD, "nested": {"deep": None}})
    assert (e.value.path, e.value.reason) == ("nested.deep", "None is not of type 'integer'")
    extra = nullable_struct(("id", LongType()), ("kind", StringType()), ("surplus", LongType()))
    encode = json_format.encoder(schema, extra, framed=True)
    assert encode({"id": 3, "kind": "B", "surplus": None}) == b'{"id":3,"kind":"B"}'  # a null extra is left out
    with pytest.raises(RowMismatch) as e:
        encode({"id": 3, "kind": "B", "surplus": 1})
    assert (e.value.path, e.value.reason) == ("surplus", "the schema allows no such property")


def test_encoder_output_is_read_by_json_deserializer(registry):
    from confluent_kafka.schema_registry import Schema
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    text, _ = json_format.schema_for(ROW_TYPE, name="Row", namespace="")
    schema_id = registry.register_schema("rows-value", Schema(text, "JSON"))
    writer = parse("JSON", registry.get_schema(schema_id).schema_str)
    encode = json_format.encoder(writer, ROW_TYPE, framed=True)
    rows = [ROW, {**{k: None for k in ROW}, "id": -1, "ok": False}]
    records = [b"\x00" + struct.pack(">I", schema_id) + encode(pylist(row, ROW_TYPE)) for row in rows]
    context = SerializationContext("rows", MessageField.VALUE)
    deserializer = JSONDeserializer(None, schema_registry_client=registry)
    assert [deserializer(r, context) for r in records] == [
        {**ROW_DOC, "price": float(ROW_DOC["price"])}, {**{k: None for k in ROW}, "id": -1, "ok": False}]


# ------------------------------------------------------------------- the encoder's fast path vs jsonschema

EXACT_SCHEMAS = [
    {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": ["string", "null"]},
                                      "c": {"type": "array", "items": {"type": "number"}}},
     "required": ["a"], "additionalProperties": False},
    {"type": "object", "properties": {"k": {"oneOf": [{"type": "null"}, {"type": "boolean"}]},
                                      "e": {"type": "string", "enum": ["A", "B"]},
                                      "en": {"enum": ["X", None]}},
     "additionalProperties": {"type": "integer"}},
    {"type": "object", "additionalProperties": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
    {"type": "array", "items": {"$ref": "#/definitions/P"},
     "definitions": {"P": {"type": "object", "properties": {"x": {"type": ["integer", "number"]}, "any": {}},
                           "required": ["x", "any"]}}},
    {"type": ["string", "null"], "enum": ["A", "B"]},
    json.loads(json_format.schema_for(ROW_TYPE, name="Row", namespace="")[0]),
]
INEXACT_SCHEMAS = [
    {"type": "integer", "minimum": 1},
    {"type": "object", "properties": {"a": {"type": "string", "maxLength": 3}}},
    {"properties": {"a": {"type": "string"}}},  # no "type": non-objects fit too
    {"oneOf": [{"type": "null"}, {}]},  # oneOf refuses null, which both members accept
    {"oneOf": [{"type": "string"}, {"type": "integer"}]},
    {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a", "b"]},
    {"type": "object", "properties": {"a": {"$ref": "#/definitions/A", "minLength": 1}},
     "definitions": {"A": {"type": "string"}}, "$schema": "https://json-schema.org/draft/2020-12/schema"},
    {"enum": [1, 2]},
    {"type": "object", "patternProperties": {"^x": {"type": "string"}}},
]


def test_exact_shapes_are_those_with_only_types_and_properties():
    assert [json_format._shape_of(js(s)).exact for s in EXACT_SCHEMAS] == [True] * len(EXACT_SCHEMAS)
    assert [json_format._shape_of(js(s)).exact for s in INEXACT_SCHEMAS] == [False] * len(INEXACT_SCHEMAS)


def _has_integral_float(doc) -> bool:
    if isinstance(doc, float):
        return doc.is_integer()
    if isinstance(doc, dict):
        return any(_has_integral_float(v) for v in doc.values())
    if isinstance(doc, list):
        return any(_has_integral_float(v) for v in doc)
    return False


def _documents():
    from hypothesis import strategies as st
    scalars = (st.none() | st.booleans() | st.integers(-5, 5) | st.floats(-3, 3, allow_nan=False)
               | st.sampled_from(["A", "B", "X", "x", "2024-01-01"]))
    keys = st.sampled_from(["a", "b", "c", "k", "e", "en", "x", "any", "z", "id", "ok", "tags", "inner"])
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=5),
                        max_leaves=12)


@pytest.mark.parametrize("index", range(len(EXACT_SCHEMAS)))
def test_the_fast_path_answers_as_jsonschema_does(index):
    from hypothesis import given, settings
    schema = js(EXACT_SCHEMAS[index])
    fits = json_format._fitter(json_format._shape_of(schema))
    validator = json_format._validator(schema)

    @settings(max_examples=400, deadline=None, derandomize=True)
    @given(_documents())
    def check(doc):
        valid = validator.is_valid(doc)
        if fits(doc):
            assert valid, doc
        elif not _has_integral_float(doc):  # jsonschema's integer takes 2.0; the fast path leaves it to it
            assert not valid, doc
    check()
