"""connector.typed.protobuf_format: spark-protobuf's mapping, decoding Confluent-framed and bare protobuf,
schema evolution by field number, encoding checked against confluent-kafka's serializer and deserializer, and
schema_for's derived proto3 files.  No Spark session: pyspark types and pyarrow only."""
import datetime
import struct

import pyarrow as pa
import pytest
from pyspark.sql.types import (
    ArrayType, BinaryType, BooleanType, DateType, DayTimeIntervalType, DecimalType, DoubleType, FloatType,
    IntegerType, LongType, MapType, StringType, StructField, StructType, TimestampType,
)

from broker_sim.registry.types import parse
from connector.typed import RowMismatch, arrow_type
from connector.typed import protobuf_format as pf
from schema_samples import compiled_proto as compiled

UTC = datetime.timezone.utc

EVERYTHING = """
syntax = "proto3";
package acme.typed;
import "google/protobuf/timestamp.proto";
import "google/protobuf/duration.proto";
import "google/protobuf/wrappers.proto";
import "google/protobuf/any.proto";
import "google/protobuf/empty.proto";

message Everything {
  int32 i32 = 1; sint32 s32 = 2; sfixed32 sf32 = 3; uint32 u32 = 4; fixed32 f32 = 5;
  int64 i64 = 6; sint64 s64 = 7; sfixed64 sf64 = 8; uint64 u64 = 9; fixed64 f64 = 10;
  float fl = 11; double db = 12; bool flag = 13; string text = 14; bytes blob = 15;
  Color color = 16;
  Inner inner = 17;
  repeated int64 numbers = 18;
  repeated Inner inners = 19;
  map<string, int32> counts = 20;
  map<int64, Inner> by_id = 21;
  oneof choice { string label = 22; int32 code = 23; }
  google.protobuf.Timestamp at = 24;
  google.protobuf.Duration took = 25;
  google.protobuf.Int64Value maybe = 26;
  google.protobuf.StringValue maybe_text = 27;
  google.protobuf.Any any = 28;
  google.protobuf.Empty nothing = 29;
  optional int32 opt = 30;
  repeated Color colors = 31;
  repeated google.protobuf.Timestamp times = 32;
  map<string, google.protobuf.Timestamp> stamps = 33;

  enum Color { RED = 0; GREEN = 1; BLUE = 2; }
  message Inner { string name = 1; int32 x = 2; }
}

message Other { string id = 1; }
"""

INNER = StructType([StructField("name", StringType()), StructField("x", IntegerType())])
EVERYTHING_TYPE = StructType([
    StructField("i32", IntegerType()), StructField("s32", IntegerType()), StructField("sf32", IntegerType()),
    StructField("u32", IntegerType()), StructField("f32", IntegerType()),
    StructField("i64", LongType()), StructField("s64", LongType()), StructField("sf64", LongType()),
    StructField("u64", LongType()), StructField("f64", LongType()),
    StructField("fl", FloatType()), StructField("db", DoubleType()), StructField("flag", BooleanType()),
    StructField("text", StringType()), StructField("blob", BinaryType()),
    StructField("color", StringType()),
    StructField("inner", INNER),
    StructField("numbers", ArrayType(LongType(), containsNull=False)),
    StructField("inners", ArrayType(INNER, containsNull=False)),
    StructField("counts", MapType(StringType(), IntegerType(), valueContainsNull=False)),
    StructField("by_id", MapType(LongType(), INNER, valueContainsNull=False)),
    StructField("label", StringType()), StructField("code", IntegerType()),
    StructField("at", TimestampType()),
    StructField("took", DayTimeIntervalType(DayTimeIntervalType.DAY, DayTimeIntervalType.SECOND)),
    StructField("maybe", StructType([StructField("value", LongType())])),
    StructField("maybe_text", StructType([StructField("value", StringType())])),
    StructField("any", StructType([StructField("type_url", StringType()), StructField("value", BinaryType())])),
    # google.protobuf.Empty has no fields: spark-protobuf drops the field (retain.empty.message.types false)
    StructField("opt", IntegerType()),
    StructField("colors", ArrayType(StringType(), containsNull=False)),
    StructField("times", ArrayType(TimestampType(), containsNull=False)),
    StructField("stamps", MapType(StringType(), TimestampType(), valueContainsNull=False)),
])


EVERYTHING_SCHEMA, everything_class = compiled(EVERYTHING, "acme/typed/everything.proto")
Everything = everything_class("acme.typed.Everything")


def arrow_roundtrip(values, spark_type):
    """``pa.array(values, type=arrow_type(spark_type))`` (which must accept them) as to_pylist() gives it back."""
    return pa.array(values, type=arrow_type(spark_type)).to_pylist()


# ---------------------------------------------------------------------------------------------------------------
# mapping
# ---------------------------------------------------------------------------------------------------------------

def test_spark_type_of_every_construct():
    assert pf.spark_type(EVERYTHING_SCHEMA) == EVERYTHING_TYPE
    assert pf.spark_type(EVERYTHING_SCHEMA, "acme.typed.Everything") == EVERYTHING_TYPE


def test_message_name_selects_by_full_or_simple_name_and_nested():
    other = StructType([StructField("id", StringType())])
    assert pf.spark_type(EVERYTHING_SCHEMA, "acme.typed.Other") == other
    assert pf.spark_type(EVERYTHING_SCHEMA, ".acme.typed.Other") == other
    assert pf.spark_type(EVERYTHING_SCHEMA, "Other") == other
    assert pf.spark_type(EVERYTHING_SCHEMA, "acme.typed.Everything.Inner") == INNER
    assert pf.spark_type(EVERYTHING_SCHEMA, "Inner") == INNER
    with pytest.raises(ValueError, match="no message 'Missing'"):
        pf.spark_type(EVERYTHING_SCHEMA, "Missing")


def test_proto2_required_is_not_nullable_and_defaults_are_emitted():
    schema = parse("PROTOBUF", """
        syntax = "proto2";
        message Legacy {
          required int64 id = 1;
          optional string name = 2 [default = "anon"];
          optional Kind kind = 3 [default = B];
          optional int32 plain = 4;
          enum Kind { A = 1; B = 2; }
        }""")
    assert pf.spark_type(schema) == StructType([
        StructField("id", LongType(), nullable=False), StructField("name", StringType()),
        StructField("kind", StringType()), StructField("plain", IntegerType())])
    decode = pf.decoder(schema, None, framed=False)
    # field 1 = 7: spark-protobuf emits proto2 defaults for absent fields, null for those without one
    assert decode(b"\x08\x07") == {"id": 7, "name": "anon", "kind": "B", "plain": None}
    assert decode(b"\x08\x07\x12\x01z\x18\x01\x20\x00") == {"id": 7, "name": "z", "kind": "A", "plain": 0}
    with pytest.raises(Exception, match="required"):
        decode(b"\x12\x01z")  # the required id is missing


def test_recursive_messages_are_refused():
    schema = parse("PROTOBUF", """
        syntax = "proto3";
        message Person { string name = 1; Person bff = 2; }""")
    with pytest.raises(ValueError, match="recursive reference.*Person.bff"):
        pf.spark_type(schema)
    indirect = parse("PROTOBUF", """
        syntax = "proto3";
        message A { B b = 1; } message B { repeated A a = 1; }""")
    with pytest.raises(ValueError, match="recursive reference"):
        pf.decoder(indirect, None, framed=False)
    struct_value = parse("PROTOBUF", """
        syntax = "proto3";
        import "google/protobuf/struct.proto";
        message Doc { google.protobuf.Struct body = 1; }""")
    with pytest.raises(ValueError, match="recursive reference"):
        pf.spark_type(struct_value)
    # a message used twice side by side is not recursive
    twice = parse("PROTOBUF", """
        syntax = "proto3";
        message P { int32 x = 1; } message Two { P a = 1; P b = 2; }""")
    point = StructType([StructField("x", IntegerType())])
    assert pf.spark_type(twice, "Two") == StructType([StructField("a", point), StructField("b", point)])


# ---------------------------------------------------------------------------------------------------------------
# decoding
# ---------------------------------------------------------------------------------------------------------------

def full_message():
    message = Everything(
        i32=-5, s32=-6, sf32=-7, u32=4294967295, f32=2147483648, i64=-(1 << 62), s64=-9, sf64=-10,
        u64=18446744073709551615, f64=1 << 63, fl=1.5, db=-2.25, flag=True, text="héllo", blob=b"\x00\xff",
        color=Everything.Color.BLUE, numbers=[3, 1, 2], counts={"a": 1}, label="L", opt=0,
        colors=[Everything.Color.GREEN, Everything.Color.RED])
    message.inner.name = "in"
    message.inner.x = 42
    message.inners.add(name="a", x=1)
    message.inners.add(name="b", x=0)
    message.by_id[7].name = "seven"
    message.at.seconds, message.at.nanos = -1, 999_999_000           # 1969-12-31T23:59:59.999999
    message.took.seconds, message.took.nanos = -90061, -500_000      # -(1 day 1:01:01.0005)
    message.maybe.value = 0
    message.maybe_text.value = "w"
    message.any.type_url = "type.googleapis.com/acme.typed.Other"
    message.any.value = b"\x0a\x01x"
    message.nothing.SetInParent()
    stamp = message.times.add()
    stamp.seconds, stamp.nanos = 1_700_000_000, 123_456_789
    message.stamps["s"].seconds = 86400
    return message


FULL_VALUE = {
    "i32": -5, "s32": -6, "sf32": -7, "u32": -1, "f32": -2147483648,  # unsigned read as the JVM's signed int
    "i64": -(1 << 62), "s64": -9, "sf64": -10, "u64": -1, "f64": -(1 << 63),
    "fl": 1.5, "db": -2.25, "flag": True, "text": "héllo", "blob": b"\x00\xff", "color": "BLUE",
    "inner": {"name": "in", "x": 42}, "numbers": [3, 1, 2],
    "inners": [{"name": "a", "x": 1}, {"name": "b", "x": None}],  # proto3 0 without presence: null
    "counts": [("a", 1)], "by_id": [(7, {"name": "seven", "x": None})],
    "label": "L", "code": None,
    "at": -1, "took": -90061000500,
    "maybe": {"value": None}, "maybe_text": {"value": "w"},
    "any": {"type_url": "type.googleapis.com/acme.typed.Other", "value": b"\x0a\x01x"},
    "opt": 0,  # proto3 optional has presence: 0 stays 0
    "colors": ["GREEN", "RED"], "times": [1_700_000_000_123_456], "stamps": [("s", 86_400_000_000)],
}


def test_decode_every_type_bare_and_into_arrow():
    payload = full_message().SerializeToString()
    decoded = pf.decoder(EVERYTHING_SCHEMA, None, framed=False)(payload)
    assert decoded == FULL_VALUE
    assert arrow_roundtrip([decoded, None], EVERYTHING_TYPE) == [{
        **FULL_VALUE,
        "at": datetime.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        "took": -datetime.timedelta(days=1, hours=1, minutes=1, seconds=1, microseconds=500),
        "times": [datetime.datetime(2023, 11, 14, 22, 13, 20, 123456, tzinfo=UTC)],
        "stamps": [("s", datetime.datetime(1970, 1, 2, tzinfo=UTC))],
    }, None]


def test_absent_fields_are_null_as_spark_and_defaults_with_emit_default_values():
    nulls = {name: None for name in EVERYTHING_TYPE.fieldNames()}
    empty = {**nulls, "numbers": [], "inners": [], "counts": [], "by_id": [], "colors": [], "times": [],
             "stamps": []}
    assert pf.decoder(EVERYTHING_SCHEMA, None, framed=False)(b"") == empty
    # proto3 zeros are not on the wire: the same message
    zeros = Everything(i32=0, text="", color=Everything.Color.RED).SerializeToString()
    assert zeros == b""
    defaults = pf.decoder(EVERYTHING_SCHEMA, None, framed=False, emit_default_values=True)(b"")
    assert defaults == {
        **empty, "i32": 0, "s32": 0, "sf32": 0, "u32": 0, "f32": 0, "i64": 0, "s64": 0, "sf64": 0, "u64": 0,
        "f64": 0, "fl": 0.0, "db": 0.0, "flag": False, "text": "", "blob": b"", "color": "RED"}
    assert arrow_roundtrip([defaults], EVERYTHING_TYPE) == [defaults]


def test_unknown_enum_numbers_are_named_as_the_jvm_names_them():
    payload = b"\x80\x01\x07"  # field 16 (color), varint 7: an open enum keeps it
    decoded = pf.decoder(EVERYTHING_SCHEMA, None, framed=False)(payload)
    assert decoded["color"] == "UNKNOWN_ENUM_VALUE_Color_7"


def test_framed_message_indexes_select_and_check_the_message():
    other_decoder = pf.decoder(EVERYTHING_SCHEMA, EVERYTHING_SCHEMA, framed=True, message_name="Other")
    # Other is the file's second message: index list [1] = count 1, index 1, both zigzag
    assert other_decoder(b"\x02\x02" + b"\x0a\x02id") == {"id": "id"}
    inner_decoder = pf.decoder(EVERYTHING_SCHEMA, EVERYTHING_SCHEMA, framed=True, message_name="Inner")
    # [0, 3]: nested indexes count the map entry messages too (CountsEntry, ByIdEntry, StampsEntry, Inner)
    assert inner_decoder(b"\x04\x00\x06" + b"\x10\x05") == {"name": None, "x": 5}
    with pytest.raises(ValueError, match="Everything.CountsEntry message"):
        inner_decoder(b"\x04\x00\x00" + b"\x10\x05")
    everything = pf.decoder(EVERYTHING_SCHEMA, EVERYTHING_SCHEMA, framed=True)
    assert everything(b"\x00\x08\x03")["i32"] == 3            # [0] as the single byte 0
    assert everything(b"\x02\x00\x08\x03")["i32"] == 3        # [0] written out in full
    with pytest.raises(ValueError, match="acme.typed.Other message"):
        everything(b"\x02\x02\x0a\x02id")
    with pytest.raises(ValueError, match="names no message"):
        everything(b"\x02\x04\x08\x03")                       # [2]: the file has two top-level messages
    with pytest.raises(ValueError, match="truncated"):
        everything(b"\x04\x00")
    # without a writer schema only the framing is read
    assert pf.decoder(EVERYTHING_SCHEMA, None, framed=True, message_name="Other")(b"\x02\x02\x0a\x01z") == {
        "id": "z"}


@pytest.mark.parametrize("payload", [
    b"\x08",                 # truncated varint
    b"\x0f\x01",             # wire type 7 does not exist
    b"\x72\x05ab",           # field 14 (text): length 5, 2 bytes follow
    b"\x72\x02\xff\xfe",     # field 14 (text): not UTF-8
    b"\x8a\x01\x03\x0a\x01",  # field 17 (inner): truncated nested message
])
def test_corrupt_payloads_raise(payload):
    decode = pf.decoder(EVERYTHING_SCHEMA, None, framed=False)
    with pytest.raises(Exception):
        decode(payload)
    with pytest.raises(Exception):
        pf.decoder(EVERYTHING_SCHEMA, EVERYTHING_SCHEMA, framed=True)(b"\x00" + payload)


# ---------------------------------------------------------------------------------------------------------------
# confluent-kafka's serializer and deserializer, with two schema versions
# ---------------------------------------------------------------------------------------------------------------

EVENT_V1 = """
syntax = "proto3";
package acme;
message Event { int64 id = 1; string name = 2; Color color = 3; enum Color { RED = 0; GREEN = 1; } }
"""
EVENT_V2 = """
syntax = "proto3";
package acme;
import "google/protobuf/timestamp.proto";
message Event {
  int64 id = 1; string name = 2; Color color = 3; google.protobuf.Timestamp at = 4; repeated string tags = 5;
  enum Color { RED = 0; GREEN = 1; BLUE = 2; }
}
"""


@pytest.fixture
def registry(pylog_broker):
    from confluent_kafka.schema_registry import SchemaRegistryClient
    client = SchemaRegistryClient({"url": pylog_broker.schema_registry_url, "max.retries": 0})
    yield client
    client.close()


def confluent_serialized(registry, message_class, messages, topic="events"):
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    serializer = ProtobufSerializer(message_class, registry)
    context = SerializationContext(topic, MessageField.VALUE)
    return [serializer(message, context) for message in messages]


def registered(registry, record: bytes):
    """The schema id of a framed record and its writer schema, parsed from what the registry answers."""
    assert record[0] == 0
    schema_id = struct.unpack(">I", record[1:5])[0]
    return schema_id, parse("PROTOBUF", registry.get_schema(schema_id).schema_str)


def test_confluent_serializer_records_across_two_versions(registry):
    v1, v1_class = compiled(EVENT_V1, "acme/event.proto")
    v2, v2_class = compiled(EVENT_V2, "acme/event.proto")
    EventV1, EventV2 = v1_class("acme.Event"), v2_class("acme.Event")
    old = confluent_serialized(registry, EventV1, [EventV1(id=1, name="a", color=EventV1.Color.GREEN)])
    new_event = EventV2(id=2, name="b", color=EventV2.Color.BLUE, tags=["x", "y"])
    new_event.at.seconds, new_event.at.nanos = 1_600_000_000, 5_000
    new = confluent_serialized(registry, EventV2, [new_event, EventV2(id=3)])
    (id1, writer1), (id2, writer2) = registered(registry, old[0]), registered(registry, new[0])
    assert (id1, id2) == (1, 2)
    assert registered(registry, new[1])[0] == 2

    v2_type = StructType([
        StructField("id", LongType()), StructField("name", StringType()), StructField("color", StringType()),
        StructField("at", TimestampType()), StructField("tags", ArrayType(StringType(), containsNull=False))])
    assert pf.spark_type(v2) == v2_type
    # the new version reads both: the old record's new fields are absent (null, an empty array)
    read_v2 = [pf.decoder(v2, writer, framed=True)(record[5:])
               for record, writer in [(old[0], writer1), (new[0], writer2), (new[1], writer2)]]
    assert read_v2 == [
        {"id": 1, "name": "a", "color": "GREEN", "at": None, "tags": []},
        {"id": 2, "name": "b", "color": "BLUE", "at": 1_600_000_000_000_005, "tags": ["x", "y"]},
        {"id": 3, "name": None, "color": None, "at": None, "tags": []}]
    assert arrow_roundtrip(read_v2, v2_type)[1]["at"] == datetime.datetime(
        2020, 9, 13, 12, 26, 40, 5, tzinfo=UTC)
    # the old version reads the new records: unknown fields are dropped, the unknown enum number named
    read_v1 = [pf.decoder(v1, writer2, framed=True)(record[5:]) for record in new]
    assert read_v1 == [{"id": 2, "name": "b", "color": "UNKNOWN_ENUM_VALUE_Color_2"},
                       {"id": 3, "name": None, "color": None}]
    assert arrow_roundtrip(read_v1, pf.spark_type(v1)) == read_v1


def test_confluent_serializer_nested_message_indexes(registry):
    schema, classes = compiled(EVERYTHING, "acme/typed/everything.proto")
    Inner, Other = classes("acme.typed.Everything.Inner"), classes("acme.typed.Other")
    inner_records = confluent_serialized(registry, Inner, [Inner(name="n", x=-3)], topic="inner")
    other_records = confluent_serialized(registry, Other, [Other(id="o")], topic="other")
    _, writer = registered(registry, inner_records[0])
    assert inner_records[0][5:8] == b"\x04\x00\x06"   # confluent-kafka writes [0, 3] in full
    assert other_records[0][5:7] == b"\x02\x02"       # and [1]
    assert pf.decoder(schema, writer, framed=True, message_name="acme.typed.Everything.Inner")(
        inner_records[0][5:]) == {"name": "n", "x": -3}
    with pytest.raises(ValueError, match="Everything.Inner message"):
        pf.decoder(schema, writer, framed=True)(inner_records[0][5:])
    # the encoder writes the same index lists, and the same bytes
    assert pf.encoder(schema, INNER, framed=True, message_name="Inner")({"x": -3, "name": "n"}) == \
        inner_records[0][5:]
    assert pf.encoder(schema, StructType([StructField("id", StringType())]), framed=True,
                      message_name="acme.typed.Other")({"id": "o"}) == other_records[0][5:]


def test_encoder_output_is_read_by_confluent_deserializer(registry):
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    # register the schema as the serializer would, then frame the encoder's payload with its id
    reference = confluent_serialized(registry, Everything, [Everything()], topic="everything")
    schema_id, writer = registered(registry, reference[0])
    value = {**FULL_VALUE, "at": datetime.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
             "took": -datetime.timedelta(days=1, hours=1, minutes=1, seconds=1, microseconds=500),
             "times": [datetime.datetime(2023, 11, 14, 22, 13, 20, 123456, tzinfo=UTC)],
             "stamps": [("s", datetime.datetime(1970, 1, 2, tzinfo=UTC))]}
    payload = pf.encoder(writer, EVERYTHING_TYPE, framed=True)(value)
    deserializer = ProtobufDeserializer(Everything, schema_registry_client=registry)
    message = deserializer(b"\x00" + struct.pack(">I", schema_id) + payload,
                           SerializationContext("everything", MessageField.VALUE))
    expected = full_message()
    expected.times[0].nanos = 123_456_000  # Spark's values are microseconds
    expected.ClearField("nothing")          # a dropped field is not written
    expected.ClearField("maybe")            # {"value": None}: present, value 0 (which proto3 does not write)
    expected.maybe.SetInParent()
    assert message == expected
    # and back: the same dict
    assert pf.decoder(writer, writer, framed=True)(payload) == FULL_VALUE


# ---------------------------------------------------------------------------------------------------------------
# encoding: by name, and RowMismatch naming the field
# ---------------------------------------------------------------------------------------------------------------

def test_encoder_matches_fields_by_name_and_bare_has_no_index_list():
    reordered = StructType([StructField("code", IntegerType()), StructField("text", StringType()),
                            StructField("INNER", StructType([StructField("x", LongType())]))])
    encode = pf.encoder(EVERYTHING_SCHEMA, reordered, framed=False)
    payload = encode({"text": "t", "code": 9, "INNER": {"x": 4}})
    assert Everything.FromString(payload) == Everything(text="t", code=9, inner=Everything.Inner(x=4))
    assert pf.encoder(EVERYTHING_SCHEMA, reordered, framed=True)({"text": "t"}) == b"\x00" + b"\x72\x01t"
    # a null struct field leaves the message absent; an all-null struct is present and empty
    assert encode({"INNER": None}) == b""
    assert encode({"INNER": {"x": None}}) == b"\x8a\x01\x00"


@pytest.mark.parametrize("data_type, value, path, reason", [
    (StructType([StructField("color", StringType())]), {"color": "PURPLE"}, "color",
     "'PURPLE' is not a symbol of enum acme.typed.Everything.Color"),
    (StructType([StructField("i32", LongType())]), {"i32": 1 << 31}, "i32", "out of range for int32"),
    (StructType([StructField("u32", LongType())]), {"u32": -(1 << 31) - 1}, "u32", "out of range for uint32"),
    (StructType([StructField("inner", StructType([StructField("x", LongType())]))]), {"inner": {"x": 1 << 40}},
     "inner.x", "out of range for int32"),
    (StructType([StructField("text", StringType())]), {"text": 5}, "text", "expected a string, got int"),
    (StructType([StructField("i64", LongType())]), {"i64": True}, "i64", "expected an integer, got bool"),
    (StructType([StructField("numbers", ArrayType(LongType()))]), {"numbers": [1, None]}, "numbers[1]",
     "null element"),
    (StructType([StructField("inners", ArrayType(INNER))]), {"inners": [{"name": "a", "x": "x"}]},
     "inners.element.x", "expected an integer, got str"),
    (StructType([StructField("text", StringType(), nullable=False)]), {"text": None}, "text",
     "null in a non-nullable field"),
    (StructType([StructField("at", TimestampType())]),
     {"at": -62135596801 * 1_000_000}, "at", "out of"),  # int micros: before 0001-01-01, Timestamp's minimum
])
def test_row_mismatch_names_the_field(data_type, value, path, reason):
    encode = pf.encoder(EVERYTHING_SCHEMA, data_type, framed=True)
    with pytest.raises(RowMismatch, match=reason) as caught:
        encode(value)
    assert caught.value.path == path


def test_schema_mismatches_are_found_when_the_encoder_is_built():
    with pytest.raises(RowMismatch) as caught:
        pf.encoder(EVERYTHING_SCHEMA, StructType([StructField("nope", StringType())]), framed=True)
    assert caught.value.path == "nope" and "has no field 'nope'" in caught.value.reason
    with pytest.raises(RowMismatch) as caught:
        pf.encoder(EVERYTHING_SCHEMA, StructType([StructField("text", DecimalType(10, 2))]), framed=True)
    assert caught.value.path == "text"
    legacy = parse("PROTOBUF", 'syntax = "proto2"; message L { required int64 id = 1; optional string n = 2; }')
    with pytest.raises(RowMismatch) as caught:
        pf.encoder(legacy, StructType([StructField("n", StringType())]), framed=False)
    assert caught.value.path == "id" and "required" in caught.value.reason
    encode = pf.encoder(legacy, StructType([StructField("id", LongType()), StructField("n", StringType())]),
                        framed=False)
    with pytest.raises(RowMismatch, match="required") as caught:
        encode({"id": None, "n": "x"})
    assert caught.value.path == "id"
    assert encode({"id": 0, "n": None}) == b"\x08\x00"  # proto2 writes a set zero


def test_encoder_enum_numbers_dates_and_unsigned_roundtrip():
    schema = parse("PROTOBUF", """
        syntax = "proto3";
        message M { E e = 1; int32 day = 2; uint32 u = 3; uint64 big = 4; enum E { Z = 0; ONE = 1; } }""")
    data_type = StructType([StructField("e", IntegerType()), StructField("day", DateType()),
                            StructField("u", IntegerType()), StructField("big", LongType())])
    encode = pf.encoder(schema, data_type, framed=False)
    payload = encode({"e": 1, "day": datetime.date(1970, 1, 3), "u": -1, "big": -2})
    assert pf.decoder(schema, None, framed=False)(payload) == {"e": "ONE", "day": 2, "u": -1, "big": -2}
    with pytest.raises(RowMismatch, match="not a number of enum") as caught:
        encode({"e": 5})
    assert caught.value.path == "e"


# ---------------------------------------------------------------------------------------------------------------
# schema_for
# ---------------------------------------------------------------------------------------------------------------

SINK_TYPE = StructType([
    StructField("id", LongType(), nullable=False), StructField("name", StringType()),
    StructField("score", DoubleType()), StructField("ok", BooleanType()), StructField("n", IntegerType()),
    StructField("f", FloatType()), StructField("raw", BinaryType()), StructField("at", TimestampType()),
    StructField("took", DayTimeIntervalType()),
    StructField("tags", ArrayType(StringType())),
    StructField("address", StructType([StructField("street", StringType()), StructField("zip", IntegerType())])),
    StructField("attrs", MapType(StringType(), LongType())),
    StructField("points", ArrayType(StructType([StructField("x", DoubleType())]))),
])

SINK_PROTO = """syntax = "proto3";
package com.acme;

import "google/protobuf/duration.proto";
import "google/protobuf/timestamp.proto";

message topLevelRecord {
  optional int64 id = 1;
  optional string name = 2;
  optional double score = 3;
  optional bool ok = 4;
  optional int32 n = 5;
  optional float f = 6;
  optional bytes raw = 7;
  google.protobuf.Timestamp at = 8;
  google.protobuf.Duration took = 9;
  repeated string tags = 10;
  Address address = 11;
  map<string, int64> attrs = 12;
  repeated Points points = 13;
  message Address {
    optional string street = 1;
    optional int32 zip = 2;
  }
  message Points {
    optional double x = 1;
  }
}
"""


def test_schema_for_derives_a_proto3_file_that_maps_back():
    text, message_name = pf.schema_for(SINK_TYPE, name="topLevelRecord", namespace="com.acme")
    assert text == SINK_PROTO
    assert message_name == "com.acme.topLevelRecord"
    schema = parse("PROTOBUF", text)  # the registry accepts it
    assert schema.name == "com.acme.topLevelRecord"
    assert pf.spark_type(schema, message_name) == StructType([
        StructField("id", LongType()), StructField("name", StringType()), StructField("score", DoubleType()),
        StructField("ok", BooleanType()), StructField("n", IntegerType()), StructField("f", FloatType()),
        StructField("raw", BinaryType()), StructField("at", TimestampType()),
        StructField("took", DayTimeIntervalType()),
        StructField("tags", ArrayType(StringType(), containsNull=False)),
        StructField("address", StructType([StructField("street", StringType()),
                                           StructField("zip", IntegerType())])),
        StructField("attrs", MapType(StringType(), LongType(), valueContainsNull=False)),
        StructField("points", ArrayType(StructType([StructField("x", DoubleType())]), containsNull=False)),
    ])
    value = {"id": 0, "name": "", "score": 0.0, "ok": False, "n": -1, "f": 0.5, "raw": b"",
             "at": datetime.datetime(2024, 2, 29, 12, 0, 0, 1, tzinfo=UTC),
             "took": datetime.timedelta(seconds=-1, microseconds=1), "tags": ["t"],
             "address": {"street": "Main", "zip": None}, "attrs": [("k", 1 << 40)], "points": [{"x": 1.0}]}
    payload = pf.encoder(schema, SINK_TYPE, framed=True, message_name=message_name)(value)
    decoded = pf.decoder(schema, schema, framed=True, message_name=message_name)(payload)
    # optional scalars keep zeros apart from nulls
    assert arrow_roundtrip([decoded], pf.spark_type(schema)) == [value]
    assert pf.schema_for(StructType([StructField("x", LongType())]), name="R", namespace="") == (
        'syntax = "proto3";\n\nmessage R {\n  optional int64 x = 1;\n}\n', "R")


@pytest.mark.parametrize("data_type, match", [
    (StructType([StructField("d", DecimalType(10, 2))]), "'d': decimal\\(10,2\\) has no protobuf type"),
    (StructType([StructField("a", ArrayType(ArrayType(LongType())))]), "'a': protobuf has no repeated field"),
    (StructType([StructField("m", MapType(DoubleType(), LongType()))]), "'m': a protobuf map key"),
    (StructType([StructField("bad-name", LongType())]), "not a protobuf field name"),
])
def test_schema_for_refuses_what_protobuf_cannot_hold(data_type, match):
    with pytest.raises(ValueError, match=match):
        pf.schema_for(data_type, name="R", namespace="")
