"""JSON Schema records as Spark values, and back (``valueFormat=json`` with a schema).

Theory of operation.  A schema (the registry's own parse, ``broker_sim.registry.types.json_schema``: the
schema value plus a ``referencing`` registry that resolves every ``$ref``, through ``definitions``/``$defs``
and through the schema's references) is first reduced to a *shape* tree, once per schema:

- ``struct`` (object with ``properties``, in their order), ``map`` (object with only a schema-valued
  ``additionalProperties`` / ``patternProperties``), ``array`` (``items``), ``string`` / ``timestamp``
  (format date-time) / ``date`` (format date) / ``binary`` (contentEncoding base64), ``long`` (integer),
  ``double`` (number), ``boolean``;
- ``json`` for everything with no single Spark type: ``{}``/``true``, a plain ``{"type": "object"}``, unions of
  several non-null types, tuple arrays, a ``$ref`` back into itself (a recursive schema).  Its Spark type is
  a string holding the value's compact JSON text (always JSON text, also for a JSON string, so the sink can
  write it back unchanged).

``["null", T]``, and ``oneOf``/``anyOf`` of null and one other schema, are a nullable T; every Spark field is
nullable anyway (an absent property reads as null).  A ``$ref`` is followed (its sibling keywords are
ignored, as draft-07 does); ``allOf`` merges the properties of its object members.

Reading (``decoder``): the payload is one JSON document (Confluent's JSONSerializer writes UTF-8 JSON after
the 5-byte header; bare records are the document alone).  The shape's converter projects it onto the
reader's schema: properties the reader lacks are dropped, missing ones are null.  The writer's schema is not
needed for that, so it is not consulted.  Nothing is validated beyond what the Spark value needs: a value of
the wrong JSON type (a string where the reader has an integer, an integer beyond 64 bits, a malformed
date-time) raises ``ValueError`` naming the field; ``null`` is accepted anywhere.

Writing (``encoder``): the row's value is turned into a JSON document guided by the shape (timestamps as
RFC 3339, dates ISO, binary base64, decimals as exact JSON numbers, a ``json``-shaped string parsed back into
the value it holds, a null property omitted unless the schema allows null or requires it), then validated
against the whole schema (as Confluent's JSONSerializer does by default); the first violation becomes
``RowMismatch`` naming the field.  A schema of only types, properties, ``required``, ``additionalProperties``,
``items``, string enums, unions with null and ``$ref`` (what ``schema_for`` derives) is checked by the shape
itself (``_fitter``, an order of magnitude faster); any other keyword, or a document the shape does not
accept, goes to ``jsonschema``, which decides and explains.

``schema_for`` derives a draft-07 schema from a Spark struct: closed objects (``additionalProperties:
false``, so adding an optional property later is backward compatible in Confluent's rules), non-nullable
fields ``required``, nullable ones ``oneOf [null, T]``.
"""
from __future__ import annotations

import base64
import binascii
import dataclasses
import datetime as _dt
import decimal
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from connector.typed import RowMismatch

SCHEMA_TYPE = "JSON"

_UTC = _dt.timezone.utc
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_DRAFT_07 = "http://json-schema.org/draft-07/schema#"
# keywords that say nothing about a value's shape (an object of only these accepts anything)
_ANNOTATIONS = frozenset(("$schema", "$id", "id", "title", "description", "default", "examples", "$comment",
                          "definitions", "$defs", "readOnly", "writeOnly", "deprecated", "$anchor",
                          "$dynamicAnchor", "$vocabulary"))


# ---------------------------------------------------------------------------------------------------- shapes

@dataclass(eq=False)
class _Shape:
    """What one schema node means for Spark: ``kind`` (see the module doc), whether the schema admits null,
    and for a struct its ``fields`` (name, shape, required), for an array/map its ``element`` shape; for a
    struct also ``extra`` (the shape of its additional properties, when a schema gives them) and ``closed``
    (additionalProperties false).

    ``exact``: the shape says everything the schema (and all below it) asks of a value — only ``type``,
    ``properties``, ``required``, ``additionalProperties``, ``items``, a union with null, ``$ref`` and
    annotations — so ``_fits`` decides validity without jsonschema (the encoder's fast path)."""

    kind: str
    nullable: bool = False
    fields: list[tuple[str, _Shape, bool]] = field(default_factory=list)
    element: _Shape | None = None
    extra: _Shape | None = None
    closed: bool = False
    exact: bool = False
    symbols: frozenset[str] | None = None  # a string enum's values (None in it: ``nullable``)

    def with_null(self, exact: bool | None = None) -> _Shape:
        return dataclasses.replace(self, nullable=True, exact=self.exact if exact is None else exact)

    def inexact(self) -> _Shape:
        return dataclasses.replace(self, exact=False)


_ANY = _Shape("json", nullable=True, exact=True)  # {} / true: anything, as its JSON text
_JSON = _Shape("json", nullable=True)  # constraints no single Spark type holds (e.g. a recursive $ref)
# keywords jsonschema does not check (without a format checker), beside those ``exact`` shapes account for
_UNCHECKED = _ANNOTATIONS | {"format", "contentEncoding", "contentMediaType"}
_TYPED_KEYWORDS = {"type", "properties", "required", "additionalProperties", "items"}


def _shape_of(schema) -> _Shape:
    """The shape of a ParsedSchema (JSON), computed once and kept on the model."""
    model = schema.model
    cached = getattr(model, "_pylog_shape", None)  # JsonModel is a frozen dataclass without slots
    if cached is None:
        cached = _Walker().shape(model.value, model.resolver(), model.specification)
        object.__setattr__(model, "_pylog_shape", cached)
    return cached


class _Walker:
    """Builds shapes; a node already on the current path (a recursive ``$ref``) becomes ``json``."""

    def __init__(self) -> None:
        self.on_path: set[int] = set()
        self.keep: list[Any] = []  # resolved nodes stay alive, so their ids stay unique

    def shape(self, node: Any, resolver: Any, spec: Any) -> _Shape:
        siblings = False  # keywords beside a $ref (draft 2019-09 on applies them too): no fast path
        for _ in range(64):
            if not (isinstance(node, dict) and isinstance(node.get("$ref"), str)):
                break
            if id(node) in self.on_path:
                return _JSON
            siblings = siblings or not set(node) - {"$ref"} <= _ANNOTATIONS
            if isinstance(node.get("$id"), str):
                resolver = resolver.in_subresource(spec.create_resource(node))
            resolved = resolver.lookup(node["$ref"])
            node, resolver = resolved.contents, resolved.resolver
            self.keep.append(node)
        else:
            return _JSON
        if node is True or (isinstance(node, dict) and set(node) <= _UNCHECKED):
            shape = _ANY
        elif not isinstance(node, dict):
            shape = _JSON  # false: no value fits
        elif id(node) in self.on_path:
            return _JSON  # recursion: a Spark type cannot nest itself
        else:
            if isinstance(node.get("$id"), str):
                resolver = resolver.in_subresource(spec.create_resource(node))
            self.on_path.add(id(node))
            try:
                shape = self._classify(node, resolver, spec)
            finally:
                self.on_path.discard(id(node))
        return shape.inexact() if siblings and shape.exact else shape

    def _classify(self, node: dict, resolver: Any, spec: Any) -> _Shape:
        types = node.get("type")
        if isinstance(types, str):
            types = [types]
        elif not isinstance(types, list):
            types = None
        if types is None:
            inferred = _implied_type(node)
            if inferred is not None:
                types = [inferred]
                if "type" not in node:  # "properties" alone also accepts non-objects: no fast path
                    return self._typed(inferred, node, resolver, spec).inexact()
        if types is not None:
            nullable = "null" in types
            rest = [t for t in types if t != "null"]
            if len(rest) == 1:
                shape = self._typed(rest[0], node, resolver, spec)
            elif rest and set(rest) <= {"integer", "number"}:
                shape = _Shape("double", exact=True)
            else:
                shape = _Shape("json")
            if "enum" in node and shape.kind == "string":
                symbols = _string_enum(node)
                nullable = nullable and (symbols is None or None in node["enum"])
                shape = dataclasses.replace(shape, symbols=symbols, exact=shape.exact and symbols is not None)
            if not set(node) <= _UNCHECKED | _TYPED_KEYWORDS | ({"enum"} if shape.symbols is not None else set()):
                shape = shape.inexact()
            return shape.with_null() if nullable else shape
        for combiner in ("oneOf", "anyOf"):
            members = node.get(combiner)
            if isinstance(members, list) and members:
                shape = self._union([self.shape(m, resolver, spec) for m in members], members)
                return shape if set(node) <= _UNCHECKED | {combiner} else shape.inexact()
        members = node.get("allOf")
        if isinstance(members, list) and members:
            return self._all_of([self.shape(m, resolver, spec) for m in members])
        for key in ("enum", "const"):
            if key in node:
                values = node[key] if key == "enum" and isinstance(node[key], list) else [node[key]]
                shape = _shape_of_values(values)
                symbols = _string_enum(node) if key == "enum" else None
                if symbols is not None and set(node) <= _UNCHECKED | {"enum"}:
                    shape = dataclasses.replace(shape, symbols=symbols, exact=True)
                return shape
        return _JSON

    def _typed(self, type_name: str, node: dict, resolver: Any, spec: Any) -> _Shape:
        if type_name == "string":
            fmt = node.get("format")
            if fmt == "date-time":
                return _Shape("timestamp", exact=True)
            if fmt == "date":
                return _Shape("date", exact=True)
            if node.get("contentEncoding") == "base64":
                return _Shape("binary", exact=True)
            return _Shape("string", exact=True)
        if type_name == "integer":
            return _Shape("long", exact=True)
        if type_name == "number":
            return _Shape("double", exact=True)
        if type_name == "boolean":
            return _Shape("boolean", exact=True)
        if type_name == "array":
            items = node.get("items")
            if isinstance(items, (dict, bool)) and "prefixItems" not in node:
                return _Shape("array", element=self.shape(items, resolver, spec), exact=True)
            if "items" not in node and "prefixItems" not in node:
                return _Shape("array", element=_ANY, exact=True)
            return _Shape("array", element=_JSON)  # a tuple: each element as JSON text
        if type_name == "object":
            return self._object(node, resolver, spec)
        return _Shape("json")  # "null" alone, or an unknown type name

    def _object(self, node: dict, resolver: Any, spec: Any) -> _Shape:
        additional = node.get("additionalProperties")
        extra = self.shape(additional, resolver, spec) if isinstance(additional, dict) else None
        properties = node.get("properties")
        if isinstance(properties, dict):
            required = node.get("required") if isinstance(node.get("required"), list) else []
            fields = [(name, self.shape(sub, resolver, spec), name in required) for name, sub in properties.items()]
            exact = (all(sub.exact for _, sub, _ in fields) and (extra is None or extra.exact)
                     and all(name in properties for name in required))
            return _Shape("struct", fields=fields, extra=extra, closed=additional is False, exact=exact)
        patterns = node.get("patternProperties")
        values = list(patterns.values()) if isinstance(patterns, dict) else []
        value_shapes = [self.shape(v, resolver, spec) for v in values]
        if extra is not None:
            value_shapes.append(extra)
        if not value_shapes:
            return _Shape("json")  # any object: its JSON text
        first = value_shapes[0]
        if all(_same_type(first, other) for other in value_shapes[1:]):
            exact = not values and not node.get("required") and first.exact
            return _Shape("map", element=first, exact=exact)
        return _Shape("map", element=_JSON)

    def _union(self, shapes: list[_Shape], members: list[Any]) -> _Shape:
        nulls = [_is_null_schema(m) for m in members]
        rest = [s for s, is_null in zip(shapes, nulls) if not is_null]
        nullable = any(nulls) or any(s.nullable for s in rest)
        # exact: [null, T] with T not admitting null itself (oneOf would refuse a null both accept)
        exact = (len(members) == 2 and len(rest) == 1 and rest[0].exact and not rest[0].nullable
                 and all(set(m) <= _UNCHECKED | {"type"} for m, is_null in zip(members, nulls) if is_null))
        if len(rest) == 1:
            shape = rest[0]
        elif rest and all(s.kind in ("long", "double") for s in rest):
            shape = _Shape("double")
        elif rest and all(_same_type(rest[0], s) for s in rest[1:]):
            shape = rest[0]
        else:
            shape = _Shape("json")
        return shape.with_null(exact) if nullable else shape.inexact()

    @staticmethod
    def _all_of(shapes: list[_Shape]) -> _Shape:
        typed = [s for s in shapes if s.kind != "json"]
        if len(typed) == 1:
            return typed[0].inexact()
        if typed and all(s.kind == "struct" for s in typed):
            fields, seen = [], {}
            for s in typed:
                for name, sub, required in s.fields:
                    if name in seen:
                        if required:  # required in any member: required in the merge
                            i = seen[name]
                            fields[i] = (fields[i][0], fields[i][1], True)
                        continue
                    seen[name] = len(fields)
                    fields.append((name, sub, required))
            return _Shape("struct", fields=fields)
        return _Shape("json")


def _implied_type(node: dict) -> str | None:
    """The type a node without ``type`` evidently describes (``properties`` → object, ``items`` → array)."""
    if any(k in node for k in ("properties", "additionalProperties", "patternProperties")):
        return "object"
    if "items" in node or "prefixItems" in node:
        return "array"
    return None


def _string_enum(node: dict) -> frozenset[str] | None:
    """The symbols of an enum of strings (and perhaps null), else None."""
    values = node.get("enum")
    if isinstance(values, list) and values and all(type(v) is str or v is None for v in values):
        return frozenset(v for v in values if v is not None)
    return None


def _is_null_schema(node: Any) -> bool:
    return isinstance(node, dict) and (node.get("type") == "null" or node.get("type") == ["null"]
                                       or node.get("const", ...) is None or node.get("enum") == [None])


def _shape_of_values(values: list[Any]) -> _Shape:
    nullable = None in values
    rest = [v for v in values if v is not None]
    if not rest:
        return _Shape("json", nullable=True)
    if all(isinstance(v, str) for v in rest):
        shape = _Shape("string")
    elif all(isinstance(v, bool) for v in rest):
        shape = _Shape("boolean")
    elif all(type(v) is int for v in rest):
        shape = _Shape("long")
    elif all(type(v) in (int, float) for v in rest):
        shape = _Shape("double")
    else:
        shape = _Shape("json")
    return shape.with_null() if nullable else shape


def _same_type(a: _Shape, b: _Shape) -> bool:
    return _spark(a) == _spark(b)


# ------------------------------------------------------------------------------------------------ spark_type

def _spark(shape: _Shape):
    from pyspark.sql import types as T
    kind = shape.kind
    if kind == "struct":
        return T.StructType([T.StructField(name, _spark(sub), True) for name, sub, _ in shape.fields])
    if kind == "array":
        return T.ArrayType(_spark(shape.element), True)
    if kind == "map":
        return T.MapType(T.StringType(), _spark(shape.element), True)
    return {
        "string": T.StringType, "json": T.StringType, "timestamp": T.TimestampType, "date": T.DateType,
        "binary": T.BinaryType, "long": T.LongType, "double": T.DoubleType, "boolean": T.BooleanType,
    }[kind]()


def spark_type(schema, message_name: str | None = None):
    """The Spark type of a column of records of this JSON Schema (see the module doc for the mapping)."""
    if message_name is not None:
        raise ValueError("a message name applies to protobuf schemas only, not JSON Schema")
    return _spark(_shape_of(schema))


# --------------------------------------------------------------------------------------------------- decoder

def _bad(path: str, what: str, value: Any) -> ValueError:
    text = json.dumps(value, ensure_ascii=False)
    if len(text) > 80:
        text = text[:77] + "..."
    return ValueError(f"field '{path or '<root>'}': expected {what}, got {text}")


def _child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _reader(shape: _Shape, path: str) -> Callable[[Any], Any]:
    """The converter from one parsed JSON value to the Spark/Arrow value of ``shape`` (None passes through)."""
    kind = shape.kind
    if kind == "string":
        def read(v):
            if v is None or type(v) is str:
                return v
            raise _bad(path, "a string", v)
    elif kind == "long":
        def read(v):
            if type(v) is int:
                if _INT64_MIN <= v <= _INT64_MAX:
                    return v
                raise _bad(path, "an integer within 64 bits", v)
            if v is None:
                return v
            if type(v) is float and v.is_integer() and _INT64_MIN <= v <= _INT64_MAX:
                return int(v)  # 1.0 is an integer in JSON Schema
            raise _bad(path, "an integer", v)
    elif kind == "double":
        def read(v):
            if type(v) is float or v is None:
                return v
            if type(v) is int:
                return float(v)
            raise _bad(path, "a number", v)
    elif kind == "boolean":
        def read(v):
            if v is None or type(v) is bool:
                return v
            raise _bad(path, "a boolean", v)
    elif kind == "timestamp":
        def read(v):
            if v is None:
                return v
            if type(v) is str:
                try:
                    t = _dt.datetime.fromisoformat(v)
                except ValueError:
                    pass
                else:
                    return t.replace(tzinfo=_UTC) if t.tzinfo is None else t.astimezone(_UTC)
            raise _bad(path, "a date-time", v)
    elif kind == "date":
        def read(v):
            if v is None:
                return v
            if type(v) is str and len(v) == 10 and v[4] == "-" and v[7] == "-":
                try:
                    return _dt.date.fromisoformat(v)
                except ValueError:
                    pass
            raise _bad(path, "a date (yyyy-mm-dd)", v)
    elif kind == "binary":
        def read(v):
            if v is None:
                return v
            if type(v) is str:
                try:
                    return base64.b64decode(v, validate=True)
                except (binascii.Error, ValueError):
                    pass
            raise _bad(path, "base64 text", v)
    elif kind == "json":
        dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode

        def read(v):
            return None if v is None else dumps(v)
    elif kind == "array":
        element = _reader(shape.element, path + "[]")

        def read(v):
            if type(v) is list:
                return [element(x) for x in v]
            if v is None:
                return v
            raise _bad(path, "an array", v)
    elif kind == "map":
        element = _reader(shape.element, path + "{}")

        def read(v):
            if type(v) is dict:
                return [(k, element(x)) for k, x in v.items()]
            if v is None:
                return v
            raise _bad(path, "an object", v)
    elif kind == "struct":
        fields = tuple((name, _reader(sub, _child(path, name))) for name, sub, _ in shape.fields)

        def read(v):
            if type(v) is dict:
                get = v.get
                return {name: conv(get(name)) for name, conv in fields}
            if v is None:
                return v
            raise _bad(path, "an object", v)
    else:  # pragma: no cover - every kind is above
        raise AssertionError(kind)
    return read


def _no_constant(name: str) -> Any:
    raise ValueError(f"not JSON: {name}")


_loads = json.JSONDecoder(parse_constant=_no_constant).decode


def decoder(reader, writer=None, *, framed: bool, message_name: str | None = None) -> Callable[[bytes], Any]:
    """A function from one record's payload (a UTF-8 JSON document, after Confluent's header when framed) to
    the Python value of ``spark_type(reader)``.  JSON evolution is projection onto the reader's properties,
    so the writer's schema is not needed."""
    if message_name is not None:
        raise ValueError("a message name applies to protobuf schemas only, not JSON Schema")
    convert = _reader(_shape_of(reader), "")
    loads = _loads

    def decode(payload: bytes) -> Any:
        return convert(loads(str(payload, "utf-8")))  # bytes, bytearray or memoryview; strict UTF-8

    return decode


# ------------------------------------------------------------------------------------------------ schema_for

def _schema_of(data_type) -> dict:
    from pyspark.sql import types as T
    if isinstance(data_type, T.StructType):
        properties, required = {}, []
        for f in data_type.fields:
            sub = _schema_of(f.dataType)
            if f.nullable:
                sub = {"oneOf": [{"type": "null"}, sub]}
            else:
                required.append(f.name)
            properties[f.name] = sub
        node = {"type": "object", "properties": properties, "additionalProperties": False}
        if required:
            node["required"] = required
        return node
    if isinstance(data_type, T.ArrayType):
        items = _schema_of(data_type.elementType)
        return {"type": "array", "items": {"oneOf": [{"type": "null"}, items]} if data_type.containsNull else items}
    if isinstance(data_type, T.MapType):
        if not isinstance(data_type.keyType, (T.StringType, T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
            raise ValueError(f"JSON object keys are strings: a map keyed by {data_type.keyType.simpleString()} "
                             f"has no JSON Schema")
        values = _schema_of(data_type.valueType)
        if data_type.valueContainsNull:
            values = {"oneOf": [{"type": "null"}, values]}
        return {"type": "object", "additionalProperties": values}
    if isinstance(data_type, (T.StringType, T.CharType, T.VarcharType)):
        return {"type": "string"}
    if isinstance(data_type, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
        return {"type": "integer"}
    if isinstance(data_type, (T.FloatType, T.DoubleType, T.DecimalType)):
        return {"type": "number"}
    if isinstance(data_type, T.BooleanType):
        return {"type": "boolean"}
    if isinstance(data_type, (T.TimestampType, T.TimestampNTZType)):
        return {"type": "string", "format": "date-time"}
    if isinstance(data_type, T.DateType):
        return {"type": "string", "format": "date"}
    if isinstance(data_type, T.BinaryType):
        return {"type": "string", "contentEncoding": "base64"}
    raise ValueError(f"a {data_type.simpleString()} column has no JSON Schema type")


def schema_for(data_type, *, name: str, namespace: str) -> tuple[str, None]:
    """A draft-07 JSON Schema for records of ``data_type`` (its ``title`` the record name, namespace-qualified
    when there is one, as RecordNameStrategy reads it), and None (no message name in JSON Schema)."""
    node = _schema_of(data_type)
    title = f"{namespace}.{name}" if namespace and name else name
    schema = {"$schema": _DRAFT_07}
    if title:
        schema["title"] = title
    schema.update(node)
    return json.dumps(schema, separators=(",", ":"), ensure_ascii=False), None


# --------------------------------------------------------------------------------------------------- encoder

class _Exact:
    """A decimal to be written as the exact JSON number it is (json cannot write ``Decimal``)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _rfc3339(t: _dt.datetime) -> str:
    if t.tzinfo is None:  # TimestampNTZ: the wall-clock time, no zone (as Spark's to_json writes it)
        return t.isoformat()
    return t.astimezone(_UTC).isoformat().replace("+00:00", "Z")


def _writer(shape: _Shape | None, data_type, path: str) -> Callable[[Any], Any]:
    """The converter from one ``to_pylist()`` value of ``data_type`` to a JSON value, guided by ``shape``
    (the schema's shape at this place, None where the schema says nothing).  It converts, and refuses only
    what JSON cannot hold; the schema's own rules are checked on the whole document afterwards."""
    from pyspark.sql import types as T
    kind = shape.kind if shape is not None else None
    if isinstance(data_type, T.StructType):
        by_name = {name: (sub, required) for name, sub, required in shape.fields} if kind == "struct" else {}
        extra = shape.extra if kind == "struct" else None
        fields = []
        for f in data_type.fields:
            if f.name in by_name:
                sub, required = by_name[f.name]
                write_null = sub.nullable or required  # else a null property is left out
            else:  # not in the schema: written as an additional property (a closed schema refuses it)
                sub, write_null = extra, False
            fields.append((f.name, _writer(sub, f.dataType, _child(path, f.name)), write_null))

        def write(v):
            if v is None:
                return None
            if not isinstance(v, dict):
                raise RowMismatch(path, f"expected a struct (dict), got {type(v).__name__}")
            out = {}
            for name, conv, write_null in fields:
                x = v.get(name)
                if x is not None:
                    out[name] = conv(x)
                elif write_null:
                    out[name] = None
            return out
        return write
    if isinstance(data_type, T.ArrayType):
        element = _writer(shape.element if kind == "array" else None, data_type.elementType, path + "[]")

        def write(v):
            if v is None:
                return None
            if not isinstance(v, (list, tuple)):
                raise RowMismatch(path, f"expected an array, got {type(v).__name__}")
            return [element(x) for x in v]
        return write
    if isinstance(data_type, T.MapType):
        if kind == "struct":  # a map written as an object with properties: each key by its property's schema
            subs = {name: sub for name, sub, _ in shape.fields}
            convs = {name: _writer(sub, data_type.valueType, _child(path, name)) for name, sub in subs.items()}
            other = _writer(shape.extra, data_type.valueType, path + "{}")
        else:
            convs = {}
            other = _writer(shape.element if kind == "map" else None, data_type.valueType, path + "{}")
        string_keys = isinstance(data_type.keyType, (T.StringType, T.CharType, T.VarcharType))
        int_keys = isinstance(data_type.keyType, (T.ByteType, T.ShortType, T.IntegerType, T.LongType))

        def write(v):
            if v is None:
                return None
            items = v.items() if isinstance(v, dict) else v
            out = {}
            for k, x in items:
                if string_keys and type(k) is str:
                    key = k
                elif int_keys and type(k) is int:
                    key = str(k)
                else:
                    raise RowMismatch(path, f"a JSON object key must be a string, got {type(k).__name__}")
                out[key] = convs.get(key, other)(x)
            return out
        return write
    if kind == "json" and isinstance(data_type, (T.StringType, T.CharType, T.VarcharType)):
        def write(v):  # the column holds the value's JSON text (as the reader gives it)
            if v is None:
                return None
            try:
                return _loads(v)
            except (ValueError, TypeError) as e:
                raise RowMismatch(path, f"not JSON text ({e})") from None
        return write
    if isinstance(data_type, (T.TimestampType, T.TimestampNTZType)):
        def write(v):
            if v is None:
                return None
            if isinstance(v, _dt.datetime):
                return _rfc3339(v)
            raise RowMismatch(path, f"expected a timestamp, got {type(v).__name__}")
        return write
    if isinstance(data_type, T.DateType):
        def write(v):
            if v is None:
                return None
            if isinstance(v, _dt.date) and not isinstance(v, _dt.datetime):
                return v.isoformat()
            raise RowMismatch(path, f"expected a date, got {type(v).__name__}")
        return write
    if isinstance(data_type, T.BinaryType):
        def write(v):
            if v is None:
                return None
            if isinstance(v, (bytes, bytearray, memoryview)):
                return base64.b64encode(bytes(v)).decode("ascii")
            raise RowMismatch(path, f"expected bytes, got {type(v).__name__}")
        return write
    if isinstance(data_type, T.DecimalType):
        integral = kind == "long"

        def write(v):
            if v is None:
                return None
            if not isinstance(v, decimal.Decimal) or not v.is_finite():
                raise RowMismatch(path, f"expected a finite decimal, got {v!r}")
            if integral and v == v.to_integral_value():
                return int(v)
            return _Exact(format(v, "f"))
        return write
    if isinstance(data_type, (T.FloatType, T.DoubleType)):
        def write(v):
            if v is None:
                return None
            if isinstance(v, float) and not math.isfinite(v):
                raise RowMismatch(path, f"{v} is not a JSON number")
            if kind == "long" and isinstance(v, float) and v.is_integer():
                return int(v)
            return v
        return write
    if isinstance(data_type, (T.StringType, T.CharType, T.VarcharType, T.BooleanType, T.ByteType, T.ShortType,
                              T.IntegerType, T.LongType)):
        return lambda v: v  # the schema's check says whether it fits
    raise RowMismatch(path, f"a {data_type.simpleString()} value has no JSON form")


def _has_decimal(data_type) -> bool:
    from pyspark.sql import types as T
    if isinstance(data_type, T.DecimalType):
        return True
    if isinstance(data_type, T.StructType):
        return any(_has_decimal(f.dataType) for f in data_type.fields)
    if isinstance(data_type, T.ArrayType):
        return _has_decimal(data_type.elementType)
    if isinstance(data_type, T.MapType):
        return _has_decimal(data_type.valueType)
    return False


_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


def _dumps_exact(value: Any) -> str:
    """``_dumps`` for documents holding ``_Exact`` decimals (written as their digits)."""
    if isinstance(value, _Exact):
        return value.text
    if isinstance(value, dict):
        return "{" + ",".join(_dumps(k) + ":" + _dumps_exact(v) for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_dumps_exact(v) for v in value) + "]"
    return _dumps(value)


def _plain(value: Any) -> Any:
    """The document as jsonschema sees it (``_Exact`` decimals as Decimal, a numbers.Number)."""
    if isinstance(value, _Exact):
        return decimal.Decimal(value.text)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _path_text(parts) -> str:
    text = ""
    for p in parts:
        text += f"[{p}]" if isinstance(p, int) else (f".{p}" if text else str(p))
    return text


def _mismatch(error) -> RowMismatch:
    """A RowMismatch naming the field of a jsonschema ValidationError (the missing or unexpected property
    itself for ``required`` and ``additionalProperties``)."""
    parts = list(error.absolute_path)
    reason = error.message
    if error.validator == "required" and isinstance(error.instance, dict):
        missing = [r for r in error.validator_value if r not in error.instance]
        if missing:
            parts.append(missing[0])
            reason = "a required property is missing"
    elif error.validator in ("additionalProperties", "unevaluatedProperties") and isinstance(error.instance, dict):
        known = error.schema.get("properties", {}) if isinstance(error.schema, dict) else {}
        unexpected = [k for k in error.instance if k not in known]
        if unexpected:
            parts.append(unexpected[0])
            reason = "the schema allows no such property"
    return RowMismatch(_path_text(parts), reason)


def _fitter(shape: _Shape) -> Callable[[Any], bool]:
    """For an ``exact`` shape: whether a document (as the writer builds it) is valid against the schema —
    exactly what jsonschema answers, or False where unsure (jsonschema then decides and explains)."""
    nullable = shape.nullable
    kind = shape.kind
    if shape.symbols is not None:
        symbols = shape.symbols
        return (lambda v: v in symbols if type(v) is str else nullable and v is None)
    if kind in ("string", "timestamp", "date", "binary"):
        return (lambda v: type(v) is str or v is None) if nullable else (lambda v: type(v) is str)
    if kind == "long":
        return (lambda v: type(v) is int or v is None) if nullable else (lambda v: type(v) is int)
    if kind == "double":
        numbers = (int, float, _Exact)
        return (lambda v: type(v) in numbers or v is None) if nullable else (lambda v: type(v) in numbers)
    if kind == "boolean":
        return (lambda v: type(v) is bool or v is None) if nullable else (lambda v: type(v) is bool)
    if kind == "json":
        return lambda v: True  # {} / true
    if kind == "array":
        element = _fitter(shape.element)
        return lambda v: (type(v) is list and all(map(element, v))) or (nullable and v is None)
    if kind == "map":
        element = _fitter(shape.element)
        return lambda v: (type(v) is dict and all(map(element, v.values()))) or (nullable and v is None)
    if kind == "struct":
        fits = {name: _fitter(sub) for name, sub, _ in shape.fields}
        required = tuple(name for name, _, is_required in shape.fields if is_required)
        closed = shape.closed
        extra = _fitter(shape.extra) if shape.extra is not None else None

        def fit(v):
            if type(v) is not dict:
                return nullable and v is None
            for name in required:
                if name not in v:
                    return False
            for name, x in v.items():
                check = fits.get(name)
                if check is None:
                    if closed:
                        return False
                    if extra is not None and not extra(x):
                        return False
                elif not check(x):
                    return False
            return True
        return fit
    raise AssertionError(kind)  # pragma: no cover


def _validator(schema):
    import jsonschema
    from jsonschema.validators import validator_for
    model = schema.model
    cls = validator_for(model.value, default=jsonschema.Draft7Validator)
    return cls(model.value, registry=model.registry)


def encoder(schema, data_type, *, framed: bool, message_name: str | None = None) -> Callable[[Any], bytes]:
    """A function from one row's value (``to_pylist()`` of ``arrow_type(data_type)``) to the UTF-8 JSON
    document (the same bytes framed or bare: Confluent's JSONSerializer writes the document after the
    header).  A value the schema rejects raises RowMismatch naming the field."""
    if message_name is not None:
        raise ValueError("a message name applies to protobuf schemas only, not JSON Schema")
    import jsonschema.exceptions
    shape = _shape_of(schema)
    convert = _writer(shape, data_type, "")
    fits = _fitter(shape) if shape.exact else (lambda doc: False)
    validator = _validator(schema)
    exact = _has_decimal(data_type)
    best_match = jsonschema.exceptions.best_match

    def encode(value: Any) -> bytes:
        doc = convert(value)
        if not fits(doc):  # the schema asks more than types and properties, or the document does not fit
            plain = _plain(doc) if exact else doc
            if next(validator.iter_errors(plain), None) is not None:
                raise _mismatch(best_match(validator.iter_errors(plain)))
        return (_dumps_exact(doc) if exact else _dumps(doc)).encode("utf-8")

    return encode
