"""Avro schema type: parsing with the avro package, canonical and normalized forms, references, bounds, and
Confluent's compatibility levels over avro's reader/writer checker."""

import json

import pytest

from broker_sim.registry import types
from broker_sim.registry.types import SchemaError, check_compatibility, parse

RECORD = '{"type":"record","name":"User","namespace":"com.example","fields":[{"name":"id","type":"long"}]}'


def avro(text, references=None):
    return parse("AVRO", text, references)


def record(*fields, name="User"):
    return avro(json.dumps({"type": "record", "name": name, "namespace": "com.example", "fields": list(fields)}))


def test_whitespace_and_key_order_do_not_change_the_canonical_form():
    spaced = """{ "fields": [ {"type": "long", "name": "id"} ],
                  "namespace": "com.example", "type": "record", "name": "User" }"""
    assert avro(spaced).canonical == avro(RECORD).canonical
    assert avro(spaced) == avro(RECORD) and hash(avro(spaced)) == hash(avro(RECORD))
    assert avro(spaced).text == spaced


def test_canonical_is_written_as_javas_schema_to_string():
    text = ('{"fields":[{"default":0,"type":{"logicalType":"date","type":"int"},"doc":"d","name":"at"},'
            '{"name":"c","type":{"symbols":["R"],"name":"C","type":"enum"}},{"name":"o","type":'
            '{"type":"record","name":"x.O","fields":[{"name":"c","type":"com.example.C"}]}}],'
            '"x-p":1,"name":"User","type":"record","namespace":"com.example"}')
    assert avro(text).canonical == (
        '{"type":"record","name":"User","namespace":"com.example","fields":[{"name":"at","type":{"type":"int",'
        '"logicalType":"date"},"doc":"d","default":0},{"name":"c","type":{"type":"enum","name":"C","symbols":'
        '["R"]}},{"name":"o","type":{"type":"record","name":"O","namespace":"x","fields":[{"name":"c","type":'
        '"com.example.C"}]}}],"x-p":1}')


def test_canonical_keeps_docs_defaults_and_logical_types():
    parsed = record({"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}, "doc": "when",
                     "default": 0})
    canonical = json.loads(parsed.canonical)
    assert canonical["fields"][0] == {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"},
                                      "doc": "when", "default": 0}
    assert parsed.canonical != record({"name": "at", "type": "long"}).canonical


def test_name_is_the_full_name_of_the_named_top_level_type():
    assert avro(RECORD).name == "com.example.User"
    assert avro('{"type":"enum","name":"a.E","symbols":["X"]}').name == "a.E"
    assert avro('"string"').name is None


@pytest.mark.parametrize("text, reason", [
    ('{"type":"record","name":"R"}', "fields"),
    ('{"type":"nope"}', "nope"),
    ('{"type":"record","name":"R","fields":[{"name":"a","type":"Missing"}]}', "Missing"),
    ('{"type":"enum","name":"E","symbols":["A","A"]}', "Duplicate"),
    ('{"type":', "malformed JSON"),
])
def test_invalid_schemas_are_refused_with_the_parsers_reason(text, reason):
    with pytest.raises(SchemaError, match=reason):
        avro(text)


@pytest.mark.parametrize("field_type, default", [
    ("int", 1), ("long", 2**40), ("double", 1), ("boolean", True), ("string", "x"), ("bytes", "\u00ff"),
    (["null", "string"], None), (["string", "null"], "x"), ({"type": "array", "items": "int"}, [1, 2]),
    ({"type": "map", "values": "long"}, {"a": 1}), ({"type": "enum", "name": "E", "symbols": ["A"]}, "A"),
    ({"type": "record", "name": "In", "fields": [{"name": "a", "type": "int"}]}, {"a": 1}),
    ({"type": "int", "logicalType": "date"}, 0),
])
def test_valid_defaults_are_accepted(field_type, default):
    record({"name": "f", "type": field_type, "default": default})


@pytest.mark.parametrize("field_type, default", [
    ("int", "x"), ("int", 2**31), ("int", True), ("string", 1), ("boolean", 0), ("null", 0),
    (["null", "string"], "x"), ({"type": "array", "items": "int"}, ["a"]),
    ({"type": "enum", "name": "E", "symbols": ["A"]}, "B"),
    ({"type": "record", "name": "In", "fields": [{"name": "a", "type": "int"}]}, {}),
])
def test_invalid_defaults_are_refused_as_javas_parser_does(field_type, default):
    with pytest.raises(SchemaError, match="Invalid default for field f"):
        record({"name": "f", "type": field_type, "default": default})


def test_deep_nesting_is_a_schema_error_not_a_recursion_error():
    text = '"int"'
    for i in range(10_000):
        text = '{"type":"record","name":"R%d","fields":[{"name":"f","type":%s}]}' % (i, text)
    with pytest.raises(SchemaError, match="nested deeper"):
        avro(text)
    arrays = '{"type":"array","items":' * 65 + '"int"' + "}" * 65
    with pytest.raises(SchemaError, match=f"nested deeper than {types.MAX_SCHEMA_DEPTH}"):
        avro(arrays)
    assert avro('{"type":"array","items":' * 63 + '"int"' + "}" * 63).name is None


def test_an_error_deep_inside_costs_no_more_than_the_schema():
    # avro quotes the failing subschema at each level it unwinds: the reason stays short and cheap.
    padding = ',"doc":"' + "x" * 10_000 + '"'
    text = '"Missing"'
    for i in range(60):
        text = '{"type":"record","name":"R%d"%s,"fields":[{"name":"f","type":%s}]}' % (i, padding, text)
    with pytest.raises(SchemaError) as refused:
        avro(text)
    assert "R58" in str(refused.value) and len(str(refused.value)) < 3000


def test_too_many_references_are_refused():
    enum = avro('{"type":"enum","name":"E","symbols":["A"]}')
    with pytest.raises(SchemaError, match="too many references"):
        avro(RECORD, {f"r{i}": enum for i in range(types.MAX_REFERENCES + 1)})


def test_references_make_named_types_known_and_stay_by_name_in_the_canonical_form():
    enum = avro('{"type":"enum","name":"Colour","namespace":"com.example","symbols":["RED"]}')
    address = avro('{"type":"record","name":"Address","namespace":"com.example",'
                   '"fields":[{"name":"colour","type":"Colour"}]}', {"com.example.Colour": enum})
    user = avro('{"type":"record","name":"User","namespace":"com.example",'
                '"fields":[{"name":"home","type":"com.example.Address"}]}', {"com.example.Address": address})
    assert json.loads(user.canonical)["fields"][0]["type"] == "Address"  # Java writes it relative to the namespace
    resolved = json.loads(user.formatted("resolved"))
    assert resolved["fields"][0]["type"]["fields"][0]["type"]["symbols"] == ["RED"]
    assert user.formatted(None) == user.text and user.formatted("default") == user.text
    with pytest.raises(SchemaError, match="Address"):
        avro(user.text)


def test_normalized_is_confluents_form_and_equal_for_equivalent_schemas():
    a = record({"name": "id", "type": "long", "aliases": ["b", "a"], "doc": "d", "x-z": 1, "x-a": 2})
    normalized = a.normalized()
    assert normalized.text == ('{"name":"com.example.User","type":"record","fields":[{"name":"id","type":"long",'
                               '"doc":"d","aliases":["a","b"],"x-a":2,"x-z":1}]}')
    other = avro('{"name":"User","namespace":"com.example","type":"record","fields":[{"x-a":2,"x-z":1,'
                 '"doc":"d","aliases":["a","b"],"name":"id","type":"long"}]}')
    assert other.normalized().canonical == normalized.canonical
    assert isinstance(normalized, types.ParsedSchema) and normalized.schema_type == "AVRO"


def test_added_field_without_default_breaks_backward_with_confluents_message():
    old = record({"name": "id", "type": "long"})
    new = record({"name": "id", "type": "long"}, {"name": "email", "type": "string"})
    messages = check_compatibility("BACKWARD", new, [old])
    assert messages[0] == ("{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'email' at "
                           "path '/fields/1' in the new schema has no default value and is missing in the old "
                           "schema', additionalInfo:'email'}")
    assert messages[1] == f"{{oldSchema: '{old.canonical}'}}"
    assert check_compatibility("FORWARD", new, [old]) == []


def test_added_field_with_default_is_fully_compatible():
    old = record({"name": "id", "type": "long"})
    new = record({"name": "id", "type": "long"}, {"name": "email", "type": "string", "default": ""})
    for level in types.COMPATIBILITY_LEVELS:
        assert check_compatibility(level, new, [old]) == []


def test_removed_field_without_default_breaks_forward_only():
    old = record({"name": "id", "type": "long"}, {"name": "email", "type": "string"})
    new = record({"name": "id", "type": "long"})
    assert check_compatibility("BACKWARD", new, [old]) == []
    forward = check_compatibility("FORWARD", new, [old])
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in forward[0] and "in the old schema" in forward[0]
    assert check_compatibility("FULL", new, [old]) == forward[:1]  # FULL's forward half quotes no old schema


def test_several_incompatibilities_are_reported_one_by_one_with_their_paths():
    old = record({"name": "id", "type": "long"}, {"name": "inner", "type": {"type": "record", "name": "In", "fields": [
        {"name": "n", "type": "int"}]}})
    new = record({"name": "id", "type": "int"}, {"name": "inner", "type": {"type": "record", "name": "In", "fields": [
        {"name": "n", "type": "string"}, {"name": "m", "type": "int"}]}}, {"name": "e", "type": "string"})
    messages = check_compatibility("BACKWARD", new, [old])[:-1]
    assert [(m.split("'")[1], m.split("path '")[1].split("'")[0]) for m in messages] == [
        ("TYPE_MISMATCH", "/fields/0/type"),
        ("TYPE_MISMATCH", "/fields/1/type/fields/0/type"),
        ("READER_FIELD_MISSING_DEFAULT_VALUE", "/fields/1/type/fields/1"),
        ("READER_FIELD_MISSING_DEFAULT_VALUE", "/fields/2"),
    ]


def test_type_promotion_int_to_long_reads_backward_not_forward():
    old = record({"name": "n", "type": "int"})
    new = record({"name": "n", "type": "long"})
    assert check_compatibility("BACKWARD", new, [old]) == []
    assert "TYPE_MISMATCH" in check_compatibility("FORWARD", new, [old])[0]


@pytest.mark.parametrize("old, new, kind", [
    ('{"type":"enum","name":"E","symbols":["A","B"]}', '{"type":"enum","name":"E","symbols":["A"]}',
     "MISSING_ENUM_SYMBOLS"),
    ('["null","string"]', '["null","int"]', "MISSING_UNION_BRANCH"),
    ('{"type":"fixed","name":"F","size":4}', '{"type":"fixed","name":"F","size":8}', "FIXED_SIZE_MISMATCH"),
    ('{"type":"fixed","name":"F","size":4}', '{"type":"fixed","name":"G","size":4}', "NAME_MISMATCH"),
    ('"string"', '"int"', "TYPE_MISMATCH"),
])
def test_each_incompatibility_kind_is_named(old, new, kind):
    messages = check_compatibility("BACKWARD", avro(new), [avro(old)])
    assert f"errorType:'{kind}'" in messages[0]
    assert check_compatibility("BACKWARD", avro(old), [avro(old)]) == []


def test_non_transitive_levels_check_the_latest_only_transitive_all():
    v1 = record({"name": "id", "type": "long"})
    v2 = record({"name": "id", "type": "long"}, {"name": "e", "type": "string", "default": ""})
    v3 = record({"name": "id", "type": "long"}, {"name": "e", "type": "string"})  # e lost its default
    assert check_compatibility("BACKWARD", v3, [v1, v2]) == []
    assert "'e'" in check_compatibility("BACKWARD_TRANSITIVE", v3, [v1, v2])[0]
    assert check_compatibility("FORWARD", v1, [v3, v2]) == []
    assert check_compatibility("FORWARD_TRANSITIVE", v1, [v3, v2]) != []
    assert check_compatibility("FULL_TRANSITIVE", v3, [v1, v2]) != []


def test_no_previous_schema_or_none_level_is_compatible():
    assert check_compatibility("BACKWARD", avro(RECORD), []) == []
    assert check_compatibility("NONE", avro('"int"'), [avro('"string"')]) == []
    with pytest.raises(ValueError):
        check_compatibility("SIDEWAYS", avro(RECORD), [avro(RECORD)])


def test_unknown_schema_type_is_a_schema_error():
    with pytest.raises(SchemaError, match="unknown schema type"):
        parse("XML", "<a/>")


def test_a_reference_of_another_schema_type_is_refused():
    json_schema = parse("JSON", '{"type": "string"}')
    with pytest.raises(SchemaError, match="is a JSON schema, not AVRO"):
        avro(RECORD, {"other.json": json_schema})


def test_parsed_schemas_are_hashable_values_and_unknown_formats_answer_the_text():
    assert len({avro(RECORD), avro(RECORD.replace(",", ", "))}) == 1
    assert avro(RECORD).formatted("no-such-format") == RECORD
    with pytest.raises(SchemaError, match="must be a string"):
        parse("AVRO", None)
