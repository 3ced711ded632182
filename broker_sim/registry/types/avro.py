"""Avro schemas: parsed and validated by the Apache ``avro`` package, compared by its reader/writer checker.

- References: each referenced schema's named types are made known to the parser first (an ``avro.name.Names``
  filled in dependency order), so the schema may use them by full name, as Confluent's ``AvroSchema`` does
  with its resolved references.
- ``canonical``: the schema as Java's ``Schema.toString()`` writes it, which is Confluent's
  ``AvroSchema.canonicalString()`` (docs, defaults, logical types and custom properties kept, referenced
  types by name), compact JSON; whitespace and key order of the text do not matter (``avro_forms``).
- ``normalized()``: Confluent's ``AvroSchemaUtils.toNormalizedString`` (full names, fixed key order, sorted
  aliases and custom properties; ``avro_forms``).
- Compatibility: ``avro.compatibility.ReaderWriterCompatibilityChecker``, its findings worded as
  Confluent's ``avro.Difference``.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import avro.compatibility
import avro.errors
import avro.name
import avro.schema

from broker_sim.registry import bounded_json
from broker_sim.registry.types import ParsedSchema, avro_forms
from broker_sim.registry.types.errors import MAX_JSON_DEPTH, MAX_SCHEMA_DEPTH, SchemaError

# What avro raises on a malformed schema: its own errors, and plain Python errors where it indexes or calls
# into a JSON value of the wrong shape (e.g. "fields": 3).
_PARSE_ERRORS = (avro.errors.AvroException, TypeError, ValueError, KeyError, AttributeError)


# Reasons longer than this are cut: avro quotes the failing subschema at every level it unwinds through.
_MAX_REASON = 2000


class _QuietDict(dict):
    """A JSON object whose repr is short.  avro wraps an error in a nested type as 'Type property "<the
    subschema>" not a valid Avro schema', once per level: with plain dicts a deep invalid schema costs its
    size times its depth to describe (megabytes from a few hundred kilobytes)."""

    def __repr__(self) -> str:
        name = self.get("name")
        return f"{{type: {self.get('type')!r}, name: {name!r}, ...}}" if isinstance(name, str) \
            else f"{{type: {self.get('type')!r}, ...}}"

    __str__ = __repr__


def _shortened(reason: str) -> str:
    return reason if len(reason) <= _MAX_REASON else reason[:_MAX_REASON] + "..."


@dataclass(frozen=True)
class AvroModel:
    """What ``parse`` keeps: the avro Schema, its JSON value, and every schema it references, transitively,
    dependencies first (the order their named types must be made known to a parser)."""

    schema: avro.schema.Schema
    value: Any
    dependencies: tuple[ParsedSchema, ...]


# Confluent's registry (Java Avro) accepts logical types the ``avro`` package does not know (local-timestamp-*,
# user-defined ones) and keeps them in the schema; so does this one, without a warning per parse.
warnings.filterwarnings("ignore", category=avro.errors.IgnoredLogicalType)

def parse(text: str, references: Mapping[str, ParsedSchema]) -> ParsedSchema:
    try:
        value = bounded_json.loads(text, max_depth=MAX_JSON_DEPTH, object_hook=_QuietDict)
    except ValueError as e:
        raise SchemaError(f"Invalid Avro schema: {e}") from None
    _check_depth(value)
    dependencies = _dependencies(references)
    names = avro.name.Names()
    try:
        for dependency in dependencies:
            avro.schema.make_avsc_object(dependency.model.value, names)
    except _PARSE_ERRORS as e:
        raise SchemaError(f"Invalid Avro schema: reference: {_shortened(str(e))}") from None
    known = dict(names.names)
    try:
        schema = avro.schema.make_avsc_object(value, names)
    except _PARSE_ERRORS as e:
        raise SchemaError(f"Invalid Avro schema: {_shortened(str(e))}") from None
    _check_defaults(schema)
    return ParsedSchema(
        schema_type="AVRO",
        text=text,
        canonical=_compact(avro_forms.java_json(schema, None, set(known))),
        name=schema.fullname if isinstance(schema, avro_forms.NAMED) else None,
        references=dict(references),
        model=AvroModel(schema, value, dependencies),
    )


def normalize(parsed: ParsedSchema) -> ParsedSchema:
    env = {d.model.schema.fullname for d in parsed.model.dependencies if isinstance(d.model.schema, avro_forms.NAMED)}
    return parse(_compact(avro_forms.normalized(parsed.model.schema, env)), parsed.references)


def formatted(parsed: ParsedSchema, fmt: str) -> str:
    if fmt == "resolved":
        return _compact(parsed.model.schema.to_json())
    return parsed.text


def incompatibilities(reader: ParsedSchema, writer: ParsedSchema, reader_role: str, writer_role: str) -> list[str]:
    """Why ``reader`` cannot read data written with ``writer`` (empty when it can), as Confluent words it."""
    return [_difference(kind, path, info, reader_role, writer_role)
            for kind, path, info in _findings(reader.model.schema, writer.model.schema)]


def _findings(reader: avro.schema.Schema, writer: avro.schema.Schema) -> list[tuple[str, str, str]]:
    """(kind, path, info) of each incompatibility avro's checker finds.

    avro's result keeps the kinds in order but their locations and messages as sets, so several findings
    cannot be told apart.  A pair of records with several is taken apart field by field (the way the checker
    walks them, without recursion), until each finding stands alone; otherwise they are reported once per
    kind with every location."""
    found: list[tuple[str, str, str]] = []
    # A depth-first walk in field order (children pushed in reverse): an entry is a pair to check or a finding.
    stack: list[tuple[avro.schema.Schema, avro.schema.Schema, str] | tuple[str, str, str]] = [(reader, writer, "")]
    seen: set[tuple[int, int]] = set()
    while stack:
        entry = stack.pop()
        if isinstance(entry[0], str):
            found.append(entry)  # type: ignore[arg-type]
            continue
        r, w, prefix = entry
        if (id(r), id(w)) in seen:
            continue
        seen.add((id(r), id(w)))
        # A fresh checker each time: a memoized result carries the locations of the walk that computed it.
        result = avro.compatibility.ReaderWriterCompatibilityChecker().get_compatibility(r, w)
        if result.compatibility is not avro.compatibility.SchemaCompatibilityType.incompatible:
            continue
        kinds = list(dict.fromkeys(kind.name.upper() for kind in result.incompatibilities))
        # avro seeds every result with the root location "/" and merges it into the others' sets.
        locations = sorted(prefix + location if location != "/" else prefix or "/"
                           for location in (result.locations - {"/"} or {"/"}))
        separable = (isinstance(r, avro.schema.RecordSchema) and isinstance(w, avro.schema.RecordSchema)
                     and avro.compatibility.schema_name_equals(r, w))
        if len(result.incompatibilities) == 1 or not separable:
            info = "; ".join(sorted(result.messages))
            found.extend((kind, ", ".join(locations), info) for kind in kinds)
            continue
        children: list = []
        for i, field in enumerate(r.fields):
            at = f"{prefix}/fields/{i}"
            writer_field = avro.compatibility.lookup_writer_field(writer_schema=w, reader_field=field)
            if writer_field is not None:
                children.append((field.type, writer_field.type, at + "/type"))
            elif field.type.type == "enum" and field.type.props.get("default"):
                children.append((field.type, w, at + "/type"))  # as avro checks an enum field with a default
            elif not field.has_default:
                children.append(("READER_FIELD_MISSING_DEFAULT_VALUE", at, field.name))
        stack.extend(reversed(children))
    return found


def _difference(kind: str, path: str, info: str, reader: str, writer: str) -> str:
    """One finding in the words of Confluent's ``io.confluent.kafka.schemaregistry.avro.Difference``."""
    descriptions = {
        "FIXED_SIZE_MISMATCH": f"The size of FIXED type field at path '{path}' in the {reader} schema does not "
                               f"match with the {writer} schema",
        "TYPE_MISMATCH": f"The type (path '{path}') of a field in the {reader} schema does not match with the "
                         f"{writer} schema",
        "NAME_MISMATCH": f"The name of the schema has changed (path '{path}')",
        "MISSING_ENUM_SYMBOLS": f"The {reader} schema is missing enum symbols '{info}' at path '{path}' in the "
                                f"{writer} schema",
        "MISSING_UNION_BRANCH": f"The {reader} schema is missing a type inside a union field at path '{path}' "
                                f"in the {writer} schema",
        "READER_FIELD_MISSING_DEFAULT_VALUE": f"The field '{info}' at path '{path}' in the {reader} schema has "
                                              f"no default value and is missing in the {writer} schema",
    }
    return f"{{errorType:'{kind}', description:'{descriptions.get(kind, '')}', additionalInfo:'{info}'}}"


_INT_RANGES = {"int": (-2**31, 2**31 - 1), "long": (-2**63, 2**63 - 1)}


def _check_defaults(schema: avro.schema.Schema) -> None:
    """Every field default is a value of its field's type, in Avro's JSON encoding (a union's default of its
    first branch), as Java's Schema.Parser checks them for Confluent when a schema is registered."""
    seen: set[int] = set()
    records = [schema]
    while records:
        node = records.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, avro.schema.RecordSchema):
            for field in node.fields:
                if field.has_default and not _is_valid_default(field.type, field.default):
                    raise SchemaError(f"Invalid Avro schema: Invalid default for field {field.name}: "
                                      f"{_shortened(_compact(field.default))} not a {_compact(field.type.to_json())}")
                records.append(field.type)
        elif isinstance(node, avro.schema.UnionSchema):
            records.extend(node.schemas)
        elif isinstance(node, avro.schema.ArraySchema):
            records.append(node.items)
        elif isinstance(node, avro.schema.MapSchema):
            records.append(node.values)


def _is_valid_default(schema: avro.schema.Schema, default: Any) -> bool:
    """Whether ``default`` is a JSON-encoded value of ``schema``, walking nested values without recursion."""
    pending = [(schema, default)]
    while pending:
        node, value = pending.pop()
        kind = node.type
        if isinstance(node, avro.schema.UnionSchema):
            pending.append((node.schemas[0], value))
        elif kind == "null":
            if value is not None:
                return False
        elif kind == "boolean":
            if not isinstance(value, bool):
                return False
        elif kind in _INT_RANGES:
            low, high = _INT_RANGES[kind]
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                return False
        elif kind in ("float", "double"):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                return False
        elif kind in ("string", "bytes", "fixed"):
            if not isinstance(value, str):
                return False
        elif kind == "enum":
            if value not in node.symbols:
                return False
        elif kind == "array":
            if not isinstance(value, list):
                return False
            pending.extend((node.items, item) for item in value)
        elif kind == "map":
            if not isinstance(value, dict):
                return False
            pending.extend((node.values, item) for item in value.values())
        elif kind in ("record", "error"):
            if not isinstance(value, dict):
                return False
            for field in node.fields:
                if field.name in value:
                    pending.append((field.type, value[field.name]))
                elif not field.has_default:
                    return False
    return True


def _dependencies(references: Mapping[str, ParsedSchema]) -> tuple[ParsedSchema, ...]:
    """Every referenced schema, transitively, each after the schemas it references, each once."""
    ordered: dict[int, ParsedSchema] = {}
    for ref in references.values():
        for dependency in (*ref.model.dependencies, ref):
            ordered.setdefault(id(dependency), dependency)
    return tuple(ordered.values())


def _check_depth(value: Any) -> None:
    """Refuse schemas whose types nest deeper than MAX_SCHEMA_DEPTH, walking without recursion."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_SCHEMA_DEPTH:
            raise SchemaError(f"Invalid Avro schema: types nested deeper than {MAX_SCHEMA_DEPTH} levels")
        if isinstance(node, list):
            stack.extend((branch, depth + 1) for branch in node)
        elif isinstance(node, dict):
            children = [node.get("type"), node.get("items"), node.get("values")]
            fields = node.get("fields")
            if isinstance(fields, list):
                children.extend(field.get("type") for field in fields if isinstance(field, dict))
            stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
