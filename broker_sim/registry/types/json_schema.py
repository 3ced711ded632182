"""JSON Schema: validated against its draft's meta-schema by ``jsonschema``, ``$ref`` resolved by ``referencing``.

- Draft: from ``$schema`` (draft-04 to 2020-12), draft-07 when absent, as Confluent's default.
- References: each reference name is the ``$ref`` URL the schema uses; the referenced schemas are resources
  of a ``referencing.Registry``, and every ``$ref`` must resolve (locally or to a reference).
- ``canonical`` (and ``normalized()``): sorted compact JSON.  ``name``: the ``title``.
- Compatibility: ``json_schema_diff``, after Confluent's JsonSchemaDiff.
- Bounds: JSON nesting (``bounded_json``) and subschema nesting through ``$ref`` (``MAX_SCHEMA_DEPTH``), both
  checked without recursion before ``jsonschema`` (which recurses) sees the schema.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema
import referencing
import referencing.exceptions
import referencing.jsonschema
from jsonschema.validators import validator_for

from broker_sim.registry import bounded_json
from broker_sim.registry.types import ParsedSchema
from broker_sim.registry.types import json_schema_diff
from broker_sim.registry.types.errors import MAX_SCHEMA_DEPTH, SchemaError
from broker_sim.registry.types.json_schema_difference import COMPATIBLE_CHANGES

# A subschema level costs at most two JSON levels ("properties": {"name": {...}}).
MAX_JSON_SCHEMA_JSON_DEPTH = 2 * MAX_SCHEMA_DEPTH + 2

# Keywords whose value is one subschema, a list of subschemas, or an object of subschemas.
_ONE = ("additionalProperties", "additionalItems", "items", "not", "contains", "propertyNames", "if", "then",
        "else", "unevaluatedItems", "unevaluatedProperties", "contentSchema")
_LIST = ("allOf", "anyOf", "oneOf", "items", "prefixItems")
_MAP = ("properties", "patternProperties", "definitions", "$defs", "dependencies", "dependentSchemas")


@dataclass(frozen=True)
class JsonModel:
    """What ``parse`` keeps: the schema value and a registry holding it and its references."""

    value: Any
    registry: referencing.Registry
    specification: Any

    def resolver(self) -> referencing.Resolver:
        return self.registry.resolver(base_uri=_id_of(self.value))


def parse(text: str, references: Mapping[str, ParsedSchema]) -> ParsedSchema:
    try:
        value = bounded_json.loads(text, max_depth=MAX_JSON_SCHEMA_JSON_DEPTH)
    except ValueError as e:
        raise SchemaError(f"Invalid JSON schema: {e}") from None
    if not isinstance(value, (dict, bool)):
        raise SchemaError("Invalid JSON schema: a schema is a JSON object or a boolean")
    validator = validator_for(value, default=jsonschema.Draft7Validator)
    dialect = value.get("$schema") if isinstance(value, dict) else None
    specification = referencing.jsonschema.specification_with(
        dialect if isinstance(dialect, str) else "", default=referencing.jsonschema.DRAFT7)
    registry = referencing.Registry().with_resources(
        (ref_name, ref.model.specification.create_resource(ref.model.value))
        for ref_name, ref in _all_references(references).items())
    root_uri = _id_of(value)
    registry = registry.with_resource(root_uri, specification.create_resource(value))
    model = JsonModel(value, registry, specification)
    if isinstance(value, dict):
        _check_depth_and_refs(model)
    try:
        validator.check_schema(value)
    except jsonschema.SchemaError as e:
        path = "/".join(str(p) for p in e.absolute_path)
        raise SchemaError(f"Invalid JSON schema: {e.message}" + (f" at #/{path}" if path else "")) from None
    title = value.get("title") if isinstance(value, dict) else None
    return ParsedSchema(
        schema_type="JSON",
        text=text,
        canonical=json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False),
        name=title if isinstance(title, str) else None,
        references=dict(references),
        model=model,
    )


def _all_references(references: Mapping[str, ParsedSchema]) -> dict[str, ParsedSchema]:
    """The references and theirs, transitively, by name (a referenced schema's own $refs resolve too)."""
    found: dict[str, ParsedSchema] = {}
    pending = list(references.items())
    while pending:
        ref_name, ref = pending.pop()
        if ref_name not in found:
            found[ref_name] = ref
            pending.extend(ref.references.items())
    return found


def normalize(parsed: ParsedSchema) -> ParsedSchema:
    return parse(parsed.canonical, parsed.references)


def formatted(parsed: ParsedSchema, fmt: str) -> str:
    return parsed.text


def incompatibilities(reader: ParsedSchema, writer: ParsedSchema, reader_role: str, writer_role: str) -> list[str]:
    """Confluent's ``reader.isBackwardCompatible(writer)``: the diff from writer (original) to reader (update),
    its incompatible differences only."""
    return [diff.describe(reader_role, writer_role) for diff in json_schema_diff.compare(writer.model, reader.model)
            if diff.kind not in COMPATIBLE_CHANGES]


def subschemas(node: Any) -> Iterator[tuple[str, Any]]:
    """The (path step, subschema) pairs directly inside ``node``."""
    if not isinstance(node, dict):
        return
    for key in _ONE:
        if isinstance(node.get(key), (dict, bool)):
            yield key, node[key]
    for key in _LIST:
        if isinstance(node.get(key), list):
            for i, sub in enumerate(node[key]):
                yield f"{key}/{i}", sub
    for key in _MAP:
        if isinstance(node.get(key), dict):
            for name, sub in node[key].items():
                if isinstance(sub, (dict, bool)):
                    yield f"{key}/{name}", sub


def _check_depth_and_refs(model: JsonModel) -> None:
    """Every ``$ref`` resolves, and subschemas nest (following references) no deeper than MAX_SCHEMA_DEPTH.

    One iterative depth-first walk over the graph of subschemas and ``$ref`` edges.  An edge back to a
    subschema still on the walk's path (a recursive schema, e.g. a tree) adds no depth; a subschema already
    walked adds the height found below it."""
    keep: list[Any] = []  # resolved nodes stay alive, so the ids below stay unique during the walk
    height_below: dict[int, int] = {}
    on_path = {id(model.value)}
    root = model.value
    frames: list[list[Any]] = [[root, _children(root, model.resolver(), model.specification, keep), 0]]
    while frames:
        frame = frames[-1]
        child = next(frame[1], None)
        if child is None:
            frames.pop()
            on_path.discard(id(frame[0]))
            height_below[id(frame[0])] = frame[2]
            if frames:
                frames[-1][2] = max(frames[-1][2], frame[2] + 1)
            continue
        sub, sub_resolver = child
        if id(sub) in on_path:
            continue
        if id(sub) in height_below:
            frame[2] = max(frame[2], height_below[id(sub)] + 1)
            depth = len(frames) + 1 + height_below[id(sub)]
        else:
            on_path.add(id(sub))
            frames.append([sub, _children(sub, sub_resolver, model.specification, keep), 0])
            depth = len(frames)
        if depth > MAX_SCHEMA_DEPTH:
            raise SchemaError(f"Invalid JSON schema: subschemas nested deeper than {MAX_SCHEMA_DEPTH} levels")


def _children(node: dict[str, Any], resolver: referencing.Resolver, specification: Any,
              keep: list[Any]) -> Iterator[tuple[dict[str, Any], referencing.Resolver]]:
    """The object subschemas directly under ``node``, and what its ``$ref`` points at, with their resolvers."""
    if isinstance(node.get("$id"), str):
        resolver = resolver.in_subresource(specification.create_resource(node))
    ref = node.get("$ref")
    if isinstance(ref, str):
        resolved = resolve(ref, resolver)
        keep.append(resolved.contents)
        if isinstance(resolved.contents, dict):
            yield resolved.contents, resolved.resolver
    for _, sub in subschemas(node):
        if isinstance(sub, dict):
            yield sub, resolver


def resolve(ref: str, resolver: referencing.Resolver) -> Any:
    """Look ``ref`` up from ``resolver``; SchemaError when nothing answers it."""
    try:
        return resolver.lookup(ref)
    except referencing.exceptions.Unresolvable as e:
        raise SchemaError(f"Invalid JSON schema: unresolved $ref {ref!r} ({type(e).__name__})") from None


def _id_of(value: Any) -> str:
    if isinstance(value, dict):
        for key in ("$id", "id"):
            if isinstance(value.get(key), str):
                return value[key]
    return ""
