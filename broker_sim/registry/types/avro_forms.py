"""The written forms of a parsed Avro schema: Java's ``Schema.toString()`` (Confluent's canonical string) and
Confluent's normalized form (``AvroSchemaUtils.toNormalizedString``).  Both recurse with the schema's nesting,
which parse bounded by MAX_SCHEMA_DEPTH; a named type is written whole once, then by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import avro.schema

NAMED = (avro.schema.RecordSchema, avro.schema.EnumSchema, avro.schema.FixedSchema)


def java_json(schema: avro.schema.Schema, space: str | None, known: set[str]) -> Any:
    """The schema as Java's ``Schema.toString()`` writes it (what Confluent stores and compares): key order,
    namespaces written only where they change, named types written once and then by (qualified) name.
    ``known`` holds the full names already written (first the references')."""
    if isinstance(schema, avro.schema.UnionSchema):
        return [java_json(branch, space, known) for branch in schema.schemas]
    if isinstance(schema, NAMED):
        if schema.fullname in known:
            return schema.name if (schema.namespace or None) == space else schema.fullname
        known.add(schema.fullname)
        out: dict[str, Any] = {"type": schema.type, "name": schema.name}
        namespace = schema.namespace or None
        if namespace != space:
            out["namespace"] = namespace or ""
        if schema.props.get("doc") is not None:
            out["doc"] = schema.props["doc"]
        if isinstance(schema, avro.schema.RecordSchema):
            out["fields"] = [_java_field(field, namespace, known) for field in schema.fields]
        elif isinstance(schema, avro.schema.EnumSchema):
            out["symbols"] = list(schema.symbols)
            if schema.props.get("default") is not None:
                out["default"] = schema.props["default"]
        else:
            out["size"] = schema.size
        out |= {k: v for k, v in schema.other_props.items() if k not in ("aliases", "default")}
        if schema.props.get("aliases"):
            out["aliases"] = list(schema.props["aliases"])
        return out
    if isinstance(schema, avro.schema.ArraySchema):
        return {"type": "array", "items": java_json(schema.items, space, known)} | dict(schema.other_props)
    if isinstance(schema, avro.schema.MapSchema):
        return {"type": "map", "values": java_json(schema.values, space, known)} | dict(schema.other_props)
    if schema.other_props:
        return {"type": schema.type} | dict(schema.other_props)
    return schema.type


def _java_field(field: avro.schema.Field, space: str | None, known: set[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"name": field.name, "type": java_json(field.type, space, known)}
    if field.doc is not None:
        out["doc"] = field.doc
    if field.has_default:
        out["default"] = field.default
    if field.props.get("order") not in (None, "ascending"):
        out["order"] = field.props["order"]
    if field.props.get("aliases"):
        out["aliases"] = list(field.props["aliases"])
    return out | {k: v for k, v in field.other_props.items() if k != "aliases"}


_RESERVED = {"type", "name", "namespace", "doc", "aliases", "fields", "symbols", "default", "size", "items",
             "values", "logicalType", "precision", "scale", "order"}


def normalized(schema: avro.schema.Schema, env: set[str]) -> Any:
    """Confluent's normalized form as a JSON value; ``env`` holds the full names already written."""
    if isinstance(schema, avro.schema.UnionSchema):
        return [normalized(branch, env) for branch in schema.schemas]
    props = schema.other_props
    if isinstance(schema, (avro.schema.ArraySchema, avro.schema.MapSchema)):
        out: dict[str, Any] = {"type": schema.type}
        if isinstance(schema, avro.schema.ArraySchema):
            out["items"] = normalized(schema.items, env)
        else:
            out["values"] = normalized(schema.values, env)
        return out | _simple_props(props)
    if isinstance(schema, NAMED):
        if schema.fullname in env:
            return schema.fullname
        env.add(schema.fullname)
        out = {"name": schema.fullname, "type": schema.type}
        if isinstance(schema, avro.schema.EnumSchema):
            out["symbols"] = list(schema.symbols)
        elif isinstance(schema, avro.schema.FixedSchema):
            out["size"] = schema.size
            out |= _logical_props(schema)
        else:
            out["fields"] = [_normalized_field(field, env) for field in schema.fields]
        if schema.props.get("doc"):
            out["doc"] = schema.props["doc"]
        if schema.props.get("aliases"):
            out["aliases"] = sorted(schema.props["aliases"])
        if isinstance(schema, avro.schema.EnumSchema) and schema.props.get("default") is not None:
            out["default"] = schema.props["default"]
        return out | _simple_props(props)
    logical = _logical_props(schema)
    if logical or _simple_props(props):
        return {"type": schema.type} | logical | _simple_props(props)
    return schema.type


def _normalized_field(field: avro.schema.Field, env: set[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"name": field.name, "type": normalized(field.type, env)}
    if field.props.get("order") is not None:
        out["order"] = field.order
    if field.doc is not None:
        out["doc"] = field.doc
    if field.props.get("aliases"):
        out["aliases"] = sorted(field.props["aliases"])
    if field.has_default:
        out["default"] = field.default
    return out | _simple_props(field.other_props)


def _logical_props(schema: avro.schema.Schema) -> dict[str, Any]:
    logical = schema.props.get("logicalType")
    if not isinstance(logical, str):
        return {}
    out: dict[str, Any] = {"logicalType": logical}
    if logical == "decimal":
        out["precision"] = schema.props.get("precision")
        if schema.props.get("scale"):
            out["scale"] = schema.props["scale"]
    return out


def _simple_props(props: Mapping[str, Any]) -> dict[str, Any]:
    return {key: props[key] for key in sorted(props) if key not in _RESERVED}
