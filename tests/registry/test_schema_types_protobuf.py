"""Protobuf schema type: .proto text and base64 FileDescriptorProto (as confluent-kafka registers it), pool
validation, canonical text, references, bounds, and the rules of Confluent's protobuf SchemaDiff."""

import base64

import pytest
from google.protobuf import descriptor_pb2, timestamp_pb2

from broker_sim.registry.types import MAX_SCHEMA_DEPTH, SchemaError, check_compatibility, parse

ORDER = """
syntax = "proto3";
package shop.v1;
import "google/protobuf/timestamp.proto";
message Order {
  string id = 1;
  google.protobuf.Timestamp at = 2;
  map<string, Line> lines = 3;
  optional int32 qty = 4;
  oneof pay { string card = 5; string iban = 6; }
  Status status = 7;
  message Line { int64 n = 1; }
  reserved 9 to 11;
}
enum Status { UNKNOWN = 0; DONE = 1; }
"""


def proto(text, references=None):
    return parse("PROTOBUF", text, references)


def p3(body, package="p"):
    return proto(f'syntax = "proto3";\npackage {package};\n{body}')


def kinds(old, new, level="BACKWARD", old_package="p", new_package="p"):
    messages = check_compatibility(level, p3(new, new_package), [p3(old, old_package)])
    return [m.split("type=")[1].rstrip("}") for m in messages if m.startswith("Difference{")]


def test_text_and_its_serialized_descriptor_share_the_canonical_form():
    text = proto(ORDER)
    serialized = text.formatted("serialized")
    fdp = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(serialized))
    assert fdp.message_type[0].name == "Order" and list(fdp.dependency) == ["google/protobuf/timestamp.proto"]
    from_base64 = proto(serialized)
    assert from_base64 == text and from_base64.canonical == text.canonical
    assert proto(text.canonical) == text  # the canonical text parses back to itself
    assert text.formatted(None) == ORDER


def test_whitespace_and_comments_do_not_change_the_canonical_form():
    a = p3("message M { int32 a = 1; }")
    b = p3("// the M\nmessage   M {\n\n  int32 a=1;   // a\n}\n")
    assert a == b and hash(a) == hash(b)


def test_canonical_text_is_the_printed_descriptor():
    assert p3("message M { repeated string tags = 1; map<string, int64> counts = 2; }").canonical == (
        'syntax = "proto3";\npackage p;\n\nmessage M {\n  repeated string tags = 1;\n'
        "  map<string, int64> counts = 2;\n}\n")


PROTO2 = r"""syntax = "proto2"; package p.q;
option java_package = "x.y"; option optimize_for = SPEED;
message M {
  optional int32 a = 1 [default = 5, deprecated = true, json_name = "AA"];
  required E e = 2 [default = E1];
  optional string t = 8 [default = "a\"b\n"];
  optional bytes by = 12 [default = "\001x"];
  reserved 9 to 11, 15, 20 to max; reserved "foo"; extensions 100 to 199;
  optional group G = 4 { optional int32 x = 1; }
  map<string, M> mm = 5;
  oneof o { string s1 = 6; int64 i1 = 7; }
  extend M { optional int32 ext = 101; }
}
enum E { option allow_alias = true; E0 = 0; E1 = 1; E1B = 1; reserved 5 to 7; }
service S { rpc Call (stream M) returns (M) { option deprecated = true; } }
"""


def test_proto2_features_print_and_parse_back_to_the_same_canonical_text():
    parsed = proto(PROTO2)
    assert proto(parsed.canonical).canonical == parsed.canonical
    assert proto(parsed.formatted("serialized")).canonical == parsed.canonical
    for line in ('optional int32 a = 1 [default = 5, json_name = "AA", deprecated = true];',
                 "required E e = 2 [default = E1];", 'optional string t = 8 [default = "a\\"b\\n"];',
                 "reserved 9 to 11, 15, 20 to max;", "optional group G = 4 {", "map<string, M> mm = 5;",
                 "rpc Call(stream M) returns (M) {", "option optimize_for = SPEED;"):
        assert line in parsed.canonical, line


def test_name_is_the_first_messages_full_name():
    assert proto(ORDER).name == "shop.v1.Order"
    assert proto('syntax = "proto3"; message M {}').name == "M"
    assert proto('syntax = "proto3"; enum E { A = 0; }').name is None


@pytest.mark.parametrize("text, reason", [
    ('syntax = "proto3"; message M { int32 a = 1; int32 b = 1; }', "duplicate field number"),
    ('syntax = "proto3"; message M { Nope a = 1; }', "Nope"),
    ('syntax = "proto3"; import "other.proto"; message M {}', "other.proto"),
    ('syntax = "proto3"; message M { int32 a = 1 }', "line 1"),
    ("message {", "line 1"),
    ('syntax = "proto4"; message M {}', "proto4"),
])
def test_invalid_schemas_are_refused_with_the_reason(text, reason):
    with pytest.raises(SchemaError, match=reason):
        proto(text)


def test_well_known_types_resolve_without_references():
    assert proto(ORDER).canonical.count("google.protobuf.Timestamp at = 2;") == 1


def test_confluents_own_files_resolve_without_references():
    parsed = proto('syntax = "proto3"; package p; import "confluent/type/decimal.proto"; '
                   'import "confluent/meta.proto"; message Price { confluent.type.Decimal amount = 1; }')
    assert "confluent.type.Decimal amount = 1;" in parsed.canonical


def test_a_well_known_file_registered_as_a_reference_is_accepted():
    # confluent-kafka with skip.known.types=False registers google/protobuf/timestamp.proto itself.
    timestamp = proto(base64.b64encode(timestamp_pb2.DESCRIPTOR.serialized_pb).decode())
    assert timestamp.name == "google.protobuf.Timestamp"
    assert proto(ORDER, {"google/protobuf/timestamp.proto": timestamp}).canonical == proto(ORDER).canonical


def test_references_are_imports_by_path():
    common = p3("message Money { int64 units = 1; }", package="c")
    text = 'syntax = "proto3"; package shop; import "common.proto"; message Order { c.Money price = 1; }'
    with pytest.raises(SchemaError, match="common.proto"):
        proto(text)
    order = proto(text, {"common.proto": common})
    assert "c.Money price = 1;" in order.canonical and order.text == text
    wider = p3("message Money { string units = 1; }", package="c")
    assert "FIELD_NAMED_TYPE_CHANGED" in check_compatibility(
        "BACKWARD", proto(text, {"common.proto": wider}), [order])[1]


def test_deep_nesting_is_a_schema_error_not_a_recursion_error():
    deep = "message M { " * 10_000 + "}" * 10_000
    with pytest.raises(SchemaError, match="nested deeper"):
        proto('syntax = "proto3"; ' + deep)
    fdp = descriptor_pb2.FileDescriptorProto(name="x.proto", syntax="proto3")
    message = fdp.message_type.add(name="M0")
    for i in range(MAX_SCHEMA_DEPTH + 1):
        message = message.nested_type.add(name=f"M{i + 1}")
    with pytest.raises(SchemaError, match="nested deeper"):
        proto(base64.b64encode(fdp.SerializeToString()).decode())


@pytest.mark.parametrize("text", ["/*" * 100_000, 'syntax = "proto3"; "' + '\\"' * 100_000])
def test_unterminated_comments_and_strings_are_refused_in_linear_time(text):
    import time
    started = time.monotonic()
    with pytest.raises(SchemaError):
        proto(text)
    assert time.monotonic() - started < 5


def test_a_brace_in_a_comment_or_string_does_not_count_as_nesting():
    assert proto('syntax = "proto2"; message M { /* {{{ */ optional string a = 1 [default = "{{"]; }').name == "M"


def test_normalized_sorts_fields_by_number():
    normalized = p3("message M { string b = 2; int32 a = 1; }").normalized()
    assert normalized.text.index("int32 a = 1;") < normalized.text.index("string b = 2;")
    assert normalized == p3("message M { int32 a = 1; string b = 2; }").normalized()


BASE = "message M { int32 a = 1; string s = 2; }"


def test_fields_added_and_removed_are_compatible():
    assert kinds(BASE, "message M { int32 a = 1; string s = 2; int64 c = 3; }") == []
    assert kinds(BASE, "message M { int32 a = 1; }") == []
    assert kinds(BASE, "message M { int32 renamed = 1; string s = 2; }") == []


def test_scalar_kind_changes_follow_confluents_groups():
    assert kinds(BASE, "message M { int64 a = 1; string s = 2; }") == []
    assert kinds(BASE, "message M { bool a = 1; bytes s = 2; }") == []
    assert kinds(BASE, "message M { sint32 a = 1; string s = 2; }") == ["FIELD_SCALAR_KIND_CHANGED"]
    assert kinds(BASE, "message M { fixed32 a = 1; string s = 2; }") == ["FIELD_SCALAR_KIND_CHANGED"]
    assert kinds("message M { float f = 1; }", "message M { double f = 1; }") == ["FIELD_SCALAR_KIND_CHANGED"]


def test_field_kind_changed_is_incompatible():
    assert kinds(BASE, "message M { N a = 1; string s = 2; } message N {}") == ["FIELD_KIND_CHANGED"]
    assert kinds(BASE, "message M { map<string, int32> a = 1; string s = 2; }") == ["FIELD_KIND_CHANGED"]


def test_enum_fields_are_numbers_and_enum_constants_may_change():
    assert kinds("enum E { A = 0; B = 1; } message M { E e = 1; }", "message M { int32 e = 1; }") == []
    assert kinds("enum E { A = 0; } message M { E e = 1; }", "enum E { A = 0; B = 1; } message M { E e = 1; }") == []
    assert kinds("enum E { A = 0; } message M { E e = 1; }", "enum E { A = 0; } message M { string e = 1; }") == [
        "FIELD_SCALAR_KIND_CHANGED"]


def test_package_changed_and_message_removed_are_incompatible_message_added_is_not():
    assert kinds(BASE, BASE, new_package="q") == ["PACKAGE_CHANGED"]
    assert kinds(BASE + " message X {}", BASE) == ["MESSAGE_REMOVED"]
    assert kinds(BASE, BASE + " message X {}") == []


def test_named_type_changed_and_changes_inside_a_named_type():
    old = "message M { A x = 1; } message A { int32 v = 1; } message B { int32 v = 1; }"
    assert kinds(old, old.replace("A x = 1", "B x = 1")) == ["FIELD_NAMED_TYPE_CHANGED"]
    changed = "message M { A x = 1; } message A { string v = 1; } message B { int32 v = 1; }"
    assert "FIELD_NAMED_TYPE_CHANGED" in kinds(old, changed)
    assert kinds(old, old.replace("int32 v = 1; } message B", "int64 v = 1; } message B")) == []


def test_required_fields_added_and_removed_are_incompatible():
    def p2(body):
        return proto('syntax = "proto2"; package p; ' + body)
    old = p2("message M { optional int32 a = 1; }")
    added = p2("message M { optional int32 a = 1; required int32 b = 2; }")
    assert "REQUIRED_FIELD_ADDED" in check_compatibility("BACKWARD", added, [old])[0]
    assert "REQUIRED_FIELD_REMOVED" in check_compatibility("BACKWARD", old, [added])[0]
    assert check_compatibility("BACKWARD", p2("message M { optional int32 a = 1; optional int32 b = 2; }"),
                               [old]) == []


def test_oneof_rules():
    assert kinds(BASE, "message M { oneof o { int32 a = 1; } string s = 2; }") == []
    assert kinds(BASE, "message M { oneof o { int32 a = 1; string s = 2; } }") == ["MULTIPLE_FIELDS_MOVED_TO_ONEOF"]
    both = "message M { oneof o { int32 a = 1; string s = 2; } }"
    assert kinds(both, "message M { oneof o { int32 a = 1; } }") == ["ONEOF_FIELD_REMOVED"]
    assert kinds("message M { oneof o { int32 a = 1; } }", both) == []
    assert kinds(both, "message M { int32 a = 1; string s = 2; }") == []  # moved out, not removed


def test_map_value_changes_are_compared():
    assert kinds("message M { map<string, int32> m = 1; }", "message M { map<string, int64> m = 1; }") == []
    assert kinds("message M { map<string, int32> m = 1; }", "message M { map<string, string> m = 1; }") == [
        "FIELD_SCALAR_KIND_CHANGED"]


def test_recursive_messages_are_compared_without_looping():
    old = "message T { repeated T kids = 1; int32 v = 2; }"
    assert kinds(old, old) == []
    assert "FIELD_SCALAR_KIND_CHANGED" in kinds(old, old.replace("int32 v", "string v"))


def test_forward_reverses_the_comparison():
    old = BASE + " message X {}"
    assert kinds(old, BASE, "FORWARD") == []
    assert kinds(BASE, old, "FORWARD") == ["MESSAGE_REMOVED"]
    assert kinds(BASE, old, "FULL") == ["MESSAGE_REMOVED"]


def test_confluent_kafka_protobuf_client_forms_round_trip():
    """The serializer registers base64(FileDescriptor.serialized_pb); the deserializer reads format=serialized
    back with _str_to_proto and adds it to its own pool (confluent_kafka.schema_registry.common.protobuf)."""
    from confluent_kafka.schema_registry.common.protobuf import _init_pool, _schema_to_str, _str_to_proto
    from google.protobuf import descriptor_pool

    client_pool = descriptor_pool.DescriptorPool()
    _init_pool(client_pool)
    source = descriptor_pb2.FileDescriptorProto()
    source.CopyFrom(proto(ORDER).model.file)
    source.name = "shop/order.proto"
    registered = _schema_to_str(client_pool.Add(source))
    parsed = proto(registered)
    assert parsed.canonical == proto(ORDER).canonical and parsed.name == "shop.v1.Order"

    reader_pool = descriptor_pool.DescriptorPool()
    _init_pool(reader_pool)
    fdp = _str_to_proto("default", parsed.formatted("serialized"))
    reader_pool.Add(fdp)
    order = reader_pool.FindMessageTypeByName("shop.v1.Order")
    assert [f.name for f in order.fields] == ["id", "at", "lines", "qty", "card", "iban", "status"]


def test_a_long_chain_of_message_types_is_compared_without_deep_recursion_or_quadratic_output():
    import sys

    def chain(last, n=500):
        messages = "\n".join(f"message M{i} {{ M{i + 1} f = 1; }}" for i in range(n))
        return messages + f"\nmessage M{n} {{ {last} v = 1; }}"
    old, new = p3(chain("int32")), p3(chain("string"))
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(200)  # the walk must not need a frame per message in the chain
    try:
        messages = check_compatibility("BACKWARD", new, [old])
    finally:
        sys.setrecursionlimit(limit)
    assert messages[0] == "Difference{fullPath='#/M500/1', type=FIELD_SCALAR_KIND_CHANGED}"
    assert len(messages) <= 101
    assert check_compatibility("BACKWARD", old, [old]) == []


def test_reordered_messages_and_renamed_enum_constants_are_compatible():
    assert kinds("message A {} message B {}", "message B {} message A {}") == []
    assert kinds("enum E { X = 0; Y = 1; }", "enum E { X = 0; Z = 1; }") == []


def test_a_field_moved_into_an_existing_oneof_is_incompatible():
    old = "message M { int32 a = 1; oneof o { string s = 2; } }"
    assert kinds(old, "message M { oneof o { int32 a = 1; string s = 2; } }") == ["FIELD_MOVED_TO_EXISTING_ONEOF"]
    assert kinds(old, "message M { int32 a = 1; oneof o { string s = 2; } oneof n { int64 x = 3; } }") == []
