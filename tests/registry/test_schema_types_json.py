"""JSON Schema type: meta-schema validation, $ref through references, canonical form, bounds, and the
compatibility rules of Confluent's JsonSchemaDiff (each rule on its compatible and incompatible side)."""

import json

import pytest

from broker_sim.registry.types import MAX_SCHEMA_DEPTH, SchemaError, check_compatibility, parse


def js(value, references=None):
    return parse("JSON", value if isinstance(value, str) else json.dumps(value), references)


def obj(props, **keywords):
    return {"type": "object", "properties": props, **keywords}


def kinds(old, new, level="BACKWARD"):
    """The errorTypes check_compatibility reports for ``new`` after ``old``."""
    messages = check_compatibility(level, js(new), [js(old)])
    return [m.split('"')[1] for m in messages if m.startswith("{errorType:")]


STR, INT, NUM = {"type": "string"}, {"type": "integer"}, {"type": "number"}


def test_whitespace_and_key_order_give_one_canonical_form():
    a = js('{"type": "object", "title": "T", "properties": {"a": {"type": "string"}}}')
    b = js('{"properties":{"a":{"type":"string"}},\n "title":"T","type":"object"}')
    assert a == b and hash(a) == hash(b)
    assert a.canonical == '{"properties":{"a":{"type":"string"}},"title":"T","type":"object"}'
    assert a.normalized().canonical == a.canonical


def test_name_is_the_title():
    assert js({"title": "Order", "type": "object"}).name == "Order"
    assert js({"type": "object"}).name is None


@pytest.mark.parametrize("schema, reason", [
    ({"type": "strin"}, "strin"),
    ({"type": "object", "properties": {"a": {"minLength": -1}}}, "minLength"),
    ({"$schema": "http://json-schema.org/draft-04/schema#", "exclusiveMaximum": 3}, "3"),
    ('{"type":', "malformed JSON"),
    ("[1, 2]", "object or a boolean"),
    ({"$ref": "other.json"}, "unresolved"),
    ({"$ref": "#/definitions/missing"}, "unresolved"),
])
def test_invalid_schemas_are_refused_with_the_reason(schema, reason):
    with pytest.raises(SchemaError, match=reason):
        js(schema)


def test_draft_follows_dollar_schema():
    # exclusiveMaximum is a boolean in draft-04 and a number from draft-06 on.
    js({"$schema": "http://json-schema.org/draft-04/schema#", "maximum": 3, "exclusiveMaximum": True})
    with pytest.raises(SchemaError):
        js({"maximum": 3, "exclusiveMaximum": True})


def test_refs_resolve_through_references():
    address = js(obj({"street": STR}))
    order = js(obj({"ship_to": {"$ref": "address.json"}}), {"address.json": address})
    assert json.loads(order.canonical)["properties"]["ship_to"] == {"$ref": "address.json"}
    narrowed = js(obj({"street": INT}))
    newer = js(obj({"ship_to": {"$ref": "address.json"}}), {"address.json": narrowed})
    assert "TYPE_CHANGED" in check_compatibility("BACKWARD", newer, [order])[0]


def test_deep_nesting_is_a_schema_error_not_a_recursion_error():
    with pytest.raises(SchemaError, match="nested deeper"):
        js('{"not":' * 10_000 + "{}" + "}" * 10_000)
    nested = STR
    for _ in range(MAX_SCHEMA_DEPTH + 1):
        nested = {"not": nested}
    with pytest.raises(SchemaError, match=f"nested deeper than {MAX_SCHEMA_DEPTH}"):
        js(nested)


def test_nesting_through_refs_counts():
    definitions = {f"d{i}": {"not": {"$ref": f"#/definitions/d{i + 1}"}} for i in range(MAX_SCHEMA_DEPTH)}
    definitions[f"d{MAX_SCHEMA_DEPTH}"] = STR
    with pytest.raises(SchemaError, match="nested deeper"):
        js({"definitions": definitions, "$ref": "#/definitions/d0"})


def test_recursive_schemas_are_accepted_and_compared():
    tree = {"definitions": {"node": obj({"kids": {"type": "array", "items": {"$ref": "#/definitions/node"}},
                                         "v": INT})}, "$ref": "#/definitions/node"}
    wider = json.loads(json.dumps(tree))
    wider["definitions"]["node"]["properties"]["v"] = NUM
    assert kinds(tree, wider) == []
    assert kinds(wider, tree) == ["TYPE_NARROWED"]


def test_property_added_to_open_content_model_is_incompatible_closed_is_not():
    assert kinds(obj({"a": STR}), obj({"a": STR, "b": STR})) == ["PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"]
    assert kinds(obj({"a": STR}), obj({"a": STR, "b": {}})) == []
    closed = {"additionalProperties": False}
    assert kinds(obj({"a": STR}, **closed), obj({"a": STR, "b": STR}, **closed)) == []
    assert kinds(obj({"a": STR}, **closed), obj({"a": STR, "b": STR}, required=["b"], **closed)) == [
        "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL"]
    assert kinds(obj({"a": STR}, **closed),
                 obj({"a": STR, "b": {"type": "string", "default": ""}}, required=["b"], **closed)) == []


def test_property_removed_from_closed_content_model_is_incompatible_open_is_not():
    assert kinds(obj({"a": STR, "b": STR}), obj({"a": STR})) == []
    closed = {"additionalProperties": False}
    assert kinds(obj({"a": STR, "b": STR}, **closed), obj({"a": STR}, **closed)) == [
        "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL"]


def test_partially_open_content_model_covers_a_property_of_its_schema():
    partial = {"additionalProperties": STR}
    assert kinds(obj({"a": STR}, **partial), obj({"a": STR, "b": STR}, **partial)) == []
    assert kinds(obj({"a": STR}, **partial), obj({"a": STR, "b": INT}, **partial)) == [
        "TYPE_CHANGED", "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"]


def test_required_added_is_incompatible_removed_is_not():
    assert kinds(obj({"a": STR}), obj({"a": STR}, required=["a"])) == ["REQUIRED_ATTRIBUTE_ADDED"]
    assert kinds(obj({"a": STR}, required=["a"]), obj({"a": STR})) == []
    assert kinds(obj({"a": STR}), obj({"a": {"type": "string", "default": "x"}}, required=["a"])) == []


def test_type_changed_narrowed_and_extended():
    assert kinds(STR, INT) == ["TYPE_CHANGED"]
    assert kinds(INT, NUM) == []
    assert kinds(NUM, INT) == ["TYPE_NARROWED"]
    assert kinds(STR, {"type": ["string", "null"]}) == []
    assert kinds({"type": ["string", "null"]}, STR) == ["TYPE_CHANGED"]


def test_enum_extended_narrowed_changed():
    assert kinds({"enum": ["a"]}, {"enum": ["a", "b"]}) == []
    assert kinds({"enum": ["a", "b"]}, {"enum": ["a"]}) == ["ENUM_ARRAY_NARROWED"]
    assert kinds({"enum": ["a"]}, {"enum": ["b"]}) == ["ENUM_ARRAY_CHANGED"]


@pytest.mark.parametrize("keyword, small, large, narrowing", [
    ("maxLength", 3, 5, "MAX_LENGTH_DECREASED"),
    ("maxItems", 3, 5, "MAX_ITEMS_DECREASED"),
    ("maxProperties", 3, 5, "MAX_PROPERTIES_DECREASED"),
    ("maximum", 3, 5, "MAXIMUM_DECREASED"),
])
def test_max_limits_may_grow_not_shrink(keyword, small, large, narrowing):
    kind = {"maxLength": "string", "maxItems": "array", "maxProperties": "object", "maximum": "number"}[keyword]
    assert kinds({"type": kind, keyword: small}, {"type": kind, keyword: large}) == []
    assert kinds({"type": kind, keyword: large}, {"type": kind, keyword: small}) == [narrowing]
    assert kinds({"type": kind, keyword: small}, {"type": kind}) == []
    assert kinds({"type": kind}, {"type": kind, keyword: small}) == [narrowing.replace("DECREASED", "ADDED")]


@pytest.mark.parametrize("keyword, growing", [
    ("minLength", "MIN_LENGTH_INCREASED"), ("minItems", "MIN_ITEMS_INCREASED"),
    ("minProperties", "MIN_PROPERTIES_INCREASED"), ("minimum", "MINIMUM_INCREASED"),
])
def test_min_limits_may_shrink_not_grow(keyword, growing):
    kind = {"minLength": "string", "minItems": "array", "minProperties": "object", "minimum": "number"}[keyword]
    assert kinds({"type": kind, keyword: 5}, {"type": kind, keyword: 3}) == []
    assert kinds({"type": kind, keyword: 3}, {"type": kind, keyword: 5}) == [growing]


def test_pattern_added_is_incompatible_removed_is_not():
    assert kinds({"type": "string", "pattern": "^a"}, STR) == []
    assert kinds(STR, {"type": "string", "pattern": "^a"}) == ["PATTERN_ADDED"]
    assert kinds({"type": "string", "pattern": "^a"}, {"type": "string", "pattern": "^b"}) == ["PATTERN_CHANGED"]


def test_array_items_follow_their_schema():
    assert kinds({"type": "array", "items": INT}, {"type": "array", "items": NUM}) == []
    assert kinds({"type": "array", "items": NUM}, {"type": "array", "items": INT}) == ["TYPE_NARROWED"]
    assert kinds({"type": "array"}, {"type": "array", "items": STR}) == ["SCHEMA_ADDED"]


def test_combined_sum_types_may_grow_not_shrink():
    one, two = {"oneOf": [STR]}, {"oneOf": [STR, INT]}
    assert kinds(one, two) == []
    assert "SUM_TYPE_NARROWED" in kinds(two, one)
    assert kinds(STR, two) == []  # a type becoming one branch of a union
    assert kinds({"oneOf": [STR, INT]}, {"anyOf": [STR, INT]}) == []
    assert kinds({"anyOf": [STR, INT]}, {"oneOf": [STR, INT]}) == ["COMBINED_TYPE_CHANGED"]
    assert "COMBINED_TYPE_SUBSCHEMAS_CHANGED" in kinds({"oneOf": [STR, INT]}, {"oneOf": [STR, {"type": "boolean"}]})


def test_additional_properties_added_is_compatible_removed_is_not():
    assert kinds(obj({"a": STR}, additionalProperties=False), obj({"a": STR})) == []
    assert kinds(obj({"a": STR}), obj({"a": STR}, additionalProperties=False)) == ["ADDITIONAL_PROPERTIES_REMOVED"]
    assert kinds(obj({"a": STR}), obj({"a": STR}, additionalProperties=STR)) == ["ADDITIONAL_PROPERTIES_NARROWED"]


def test_forward_and_full_reverse_the_comparison():
    old, new = obj({"a": STR}), obj({"a": STR}, required=["a"])
    assert kinds(old, new, "FORWARD") == []
    assert kinds(new, old, "FORWARD") == ["REQUIRED_ATTRIBUTE_ADDED"]
    assert kinds(old, new, "FULL") == ["REQUIRED_ATTRIBUTE_ADDED"]
    message = check_compatibility("BACKWARD", js(new), [js(old)])[0]
    assert message == ('{errorType:"REQUIRED_ATTRIBUTE_ADDED", description:"The keyword at path \'#/required/a\' '
                       'in the new schema is not present in the old schema"}')


def test_pattern_properties_cover_matching_names():
    partial = {"additionalProperties": False, "patternProperties": {"^x_": STR}}
    assert kinds(obj({"a": STR}, **partial), obj({"a": STR, "x_b": STR}, **partial)) == []
    assert kinds(obj({"a": STR}, **partial), obj({"a": STR, "x_b": INT}, **partial)) == [
        "TYPE_CHANGED", "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"]


def test_a_catastrophic_pattern_is_not_run_against_hostile_names():
    import time
    partial = {"additionalProperties": False, "patternProperties": {"^(a+)+$": STR}}
    name = "a" * 40 + "!"
    started = time.monotonic()
    assert kinds(obj({}, **partial), obj({name: STR}, **partial)) == []  # an optional property, not covered
    assert time.monotonic() - started < 2


def test_combined_types_inside_combined_types_are_compared_within_a_budget():
    import time

    def nested(extra=None):
        branches = [{"oneOf": [obj({f"p{i}_{j}": INT}) for j in range(40)]} for i in range(40)]
        if extra is not None:
            branches[0]["oneOf"][0]["properties"]["zz"] = extra
        return {"oneOf": branches}
    started = time.monotonic()
    assert kinds(nested(), nested()) == []
    assert kinds(nested(), {"oneOf": [*nested()["oneOf"], {"type": "null"}]}) == []
    assert kinds(nested(), nested(extra=STR)) != []
    assert time.monotonic() - started < 20


def test_multiple_of_may_divide_not_multiply():
    assert kinds({"type": "number", "multipleOf": 4}, {"type": "number", "multipleOf": 2}) == []
    assert kinds({"type": "number", "multipleOf": 2}, {"type": "number", "multipleOf": 4}) == ["MULTIPLE_OF_EXPANDED"]
    assert kinds({"type": "number", "multipleOf": 2}, {"type": "number", "multipleOf": 3}) == ["MULTIPLE_OF_CHANGED"]
    assert kinds({"type": "number", "multipleOf": 0.5}, {"type": "number", "multipleOf": 0.25}) == []


def test_exclusive_limits_may_widen_not_narrow():
    assert kinds({"type": "number", "exclusiveMaximum": 3}, {"type": "number", "exclusiveMaximum": 5}) == []
    assert kinds({"type": "number", "exclusiveMinimum": 3}, {"type": "number", "exclusiveMinimum": 5}) == [
        "EXCLUSIVE_MINIMUM_INCREASED"]


def test_unique_items_removed_is_compatible_added_is_not():
    assert kinds({"type": "array", "uniqueItems": True}, {"type": "array"}) == []
    assert kinds({"type": "array"}, {"type": "array", "uniqueItems": True}) == ["UNIQUE_ITEMS_ADDED"]


def test_tuple_items_follow_the_content_model():
    closed = {"type": "array", "items": [STR], "additionalItems": False}
    assert kinds(closed, {**closed, "items": [STR, INT]}) == []  # ITEM_ADDED_TO_CLOSED_CONTENT_MODEL
    assert kinds({**closed, "items": [STR, INT]}, closed) == ["ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL"]
    open_ = {"type": "array", "items": [STR]}
    assert kinds(open_, {**open_, "items": [STR, INT]}) == ["ITEM_ADDED_TO_OPEN_CONTENT_MODEL"]
    assert kinds({**open_, "items": [STR, INT]}, open_) == []
    assert kinds(open_, closed) == ["ADDITIONAL_ITEMS_REMOVED"]
    assert kinds(closed, open_) == []


def test_dependencies_may_narrow_not_extend():
    wide = obj({"a": STR, "b": STR, "c": STR}, dependencies={"a": ["b", "c"]})
    narrow = obj({"a": STR, "b": STR, "c": STR}, dependencies={"a": ["b"]})
    assert kinds(wide, narrow) == []
    assert kinds(narrow, wide) == ["DEPENDENCY_ARRAY_EXTENDED"]
    assert kinds(obj({"a": STR, "b": STR}), obj({"a": STR, "b": STR}, dependencies={"a": ["b"]})) == [
        "DEPENDENCY_ARRAY_ADDED"]


def test_not_may_narrow_not_extend():
    assert kinds({"not": {"type": ["string", "integer"]}}, {"not": STR}) == []
    assert kinds({"not": STR}, {"not": {"type": ["string", "integer"]}}) == ["NOT_TYPE_EXTENDED"]


def test_const_is_an_enum_of_one():
    assert kinds({"const": "a"}, {"enum": ["a", "b"]}) == []
    assert kinds({"enum": ["a", "b"]}, {"const": "a"}) == ["ENUM_ARRAY_NARROWED"]
