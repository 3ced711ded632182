"""JSON Schema values seen as the Everit schema classes Confluent's JsonSchemaDiff compares, and the keyword
readers the diff uses.

A ``View`` classifies one JSON value into the class Everit would load it as (empty, false, combined, not,
enum, string, number, object, array, boolean, null), with ``$ref`` followed to the schema it names.  A value
with keywords of several kinds (``type`` plus ``oneOf``, ``type`` plus ``enum``) is an ``allOf`` of one view
per kind, a list ``type`` an ``anyOf``, as Everit's loader builds them.  Building a view does not recurse.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from broker_sim.registry.types.errors import MAX_SCHEMA_DEPTH

_OBJECT_KEYWORDS = ("properties", "required", "additionalProperties", "patternProperties", "dependencies",
                    "dependentRequired", "dependentSchemas", "minProperties", "maxProperties", "propertyNames")
_ARRAY_KEYWORDS = ("items", "additionalItems", "prefixItems", "minItems", "maxItems", "uniqueItems", "contains")
_STRING_KEYWORDS = ("minLength", "maxLength", "pattern")
_NUMBER_KEYWORDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
_TYPED_KINDS = {"object": _OBJECT_KEYWORDS, "array": _ARRAY_KEYWORDS, "string": _STRING_KEYWORDS,
                "number": _NUMBER_KEYWORDS}
_COMBINERS = ("allOf", "anyOf", "oneOf")
_MAX_REF_HOPS = MAX_SCHEMA_DEPTH


@dataclass(eq=False)
class View:
    """One JSON value as an Everit class: ``kind``, the ``node`` whose keywords it reads (with the resolver
    and specification its ``$ref``s resolve with), ``integer`` for ``type: integer``, and for a combined
    type its ``criterion`` and ``subs``.  Compared by identity (the diff memoizes pairs by id)."""

    kind: str
    node: Any = None
    resolver: Any = None
    spec: Any = None
    integer: bool = False
    criterion: str = ""
    subs: list[View] = field(default_factory=list)

    _key: str | None = None

    def key(self) -> str:
        """What makes two subschemas of a combined type the same (Confluent collapses duplicates)."""
        if self._key is None:
            self._key = json.dumps([self.kind, self.integer, self.criterion, self.node], sort_keys=True)
        return self._key


class Views:
    """The views built so far in one comparison, by node id; each keeps its node alive, so ids stay unique."""

    def __init__(self) -> None:
        self.views: dict[int, tuple[Any, View]] = {}

    def view(self, node: Any, resolver: Any, specification: Any) -> View:
        for _ in range(_MAX_REF_HOPS):
            if not (isinstance(node, dict) and isinstance(node.get("$ref"), str)):
                break
            if isinstance(node.get("$id"), str):
                resolver = resolver.in_subresource(specification.create_resource(node))
            resolved = resolver.lookup(node["$ref"])  # parse checked that every $ref resolves
            node, resolver = resolved.contents, resolved.resolver
        cached = self.views.get(id(node))
        if cached is not None:
            return cached[1]
        if isinstance(node, dict) and isinstance(node.get("$id"), str):
            resolver = resolver.in_subresource(specification.create_resource(node))
        view = _classify(node, resolver, specification, self)
        self.views[id(node)] = (node, view)
        return view

    def sub(self, view: View, keyword: str) -> View | None:
        node = view.node.get(keyword) if isinstance(view.node, dict) else None
        if not isinstance(node, (dict, bool)):
            return None
        return self.view(node, view.resolver, view.spec)


def _classify(node: Any, resolver: Any, specification: Any, state: Views) -> View:
    if node is True or node == {}:
        return View("empty", node, resolver, specification)
    if node is False or not isinstance(node, dict):
        return View("false", node, resolver, specification)
    parts: list[View] = []
    declared = node.get("type")
    types = declared if isinstance(declared, list) else [declared] if isinstance(declared, str) else []
    if not types:
        types = [kind for kind, keywords in _TYPED_KINDS.items() if any(k in node for k in keywords)]
    typed = [View("number" if t == "integer" else t, node, resolver, specification, integer=t == "integer")
             for t in types]
    if len(typed) == 1:
        parts.append(typed[0])
    elif typed:
        parts.append(View("combined", node, resolver, specification, criterion="anyOf", subs=typed))
    if "enum" in node or "const" in node:
        parts.append(View("enum", node, resolver, specification))
    if isinstance(node.get("not"), (dict, bool)):
        parts.append(View("not", node, resolver, specification))
    for criterion in _COMBINERS:
        if isinstance(node.get(criterion), list):
            subs = [state.view(sub, resolver, specification) for sub in node[criterion]
                    if isinstance(sub, (dict, bool))]
            parts.append(View("combined", node, resolver, specification, criterion=criterion, subs=subs))
    if not parts:
        return View("empty", node, resolver, specification)
    if len(parts) == 1:
        return parts[0]
    return View("combined", node, resolver, specification, criterion="allOf", subs=parts)


def schemas(views: Views, view: View, keyword: str) -> dict[str, View]:
    value = view.node.get(keyword)
    if not isinstance(value, dict):
        return {}
    return {name: views.view(sub, view.resolver, view.spec) for name, sub in value.items()
            if isinstance(sub, (dict, bool))}


def strings(value: Any) -> set[str]:
    return {v for v in value if isinstance(v, str)} if isinstance(value, list) else set()


def has_default(view: View) -> bool:
    return isinstance(view.node, dict) and "default" in view.node


def extra_schema(views: Views, view: View) -> View | None:
    extra = view.node.get("additionalProperties")
    return views.sub(view, "additionalProperties") if isinstance(extra, dict) else None


def is_open(view: View) -> bool:
    node = view.node
    return not node.get("patternProperties") and not isinstance(node.get("additionalProperties"), dict) \
        and node.get("additionalProperties") is not False


# Both the patterns and the names come from hostile schemas, and backtracking is exponential in the worst
# case: a pattern is only run when it cannot blow up on a short name (no quantified group, no backreference,
# few quantifiers); another one matches nothing, so the property falls to additionalProperties.
_QUANTIFIED_GROUP = re.compile(r"\)[*+?{]")
_BACKREFERENCE = re.compile(r"\\[1-9]|\(\?P=")
_MAX_QUANTIFIERS = 4
_MAX_PATTERN = 256


def _safe_pattern(pattern: str) -> bool:
    quantifiers = sum(pattern.count(c) for c in "*+{")
    return (len(pattern) <= _MAX_PATTERN and quantifiers <= _MAX_QUANTIFIERS
            and not _QUANTIFIED_GROUP.search(pattern) and not _BACKREFERENCE.search(pattern))


def partial_schema(views: Views, view: View, name: str) -> View | None:
    """The schema a partially open content model gives property ``name``: its first matching
    patternProperties schema, else the additionalProperties schema."""
    for pattern, schema in schemas(views, view, "patternProperties").items():
        if not _safe_pattern(pattern):
            continue
        try:
            if re.search(pattern, name):
                return schema
        except re.error:
            continue
    return extra_schema(views, view)


def dependency_arrays(node: dict[str, Any]) -> dict[str, set[str]]:
    found = {}
    for keyword in ("dependencies", "dependentRequired"):
        value = node.get(keyword)
        if isinstance(value, dict):
            found |= {name: strings(deps) for name, deps in value.items() if isinstance(deps, list)}
    return found


def dependency_schemas(views: Views, view: View) -> dict[str, View]:
    found = {}
    for keyword in ("dependencies", "dependentSchemas"):
        found |= schemas(views, view, keyword)
    return found


def all_items(views: Views, view: View) -> View | None:
    items = view.node.get("items")
    if "prefixItems" in view.node or not isinstance(items, (dict, bool)):
        return None
    return views.sub(view, "items")


def item_list(views: Views, view: View) -> list[View]:
    node = view.node
    items = node.get("prefixItems") if isinstance(node.get("prefixItems"), list) else node.get("items")
    if not isinstance(items, list):
        return []
    return [views.view(item, view.resolver, view.spec) for item in items if isinstance(item, (dict, bool))]


def additional_items(node: dict[str, Any]) -> Any:
    return node.get("items") if isinstance(node.get("prefixItems"), list) else node.get("additionalItems")


def extra_items(views: Views, view: View) -> View | None:
    keyword = "items" if isinstance(view.node.get("prefixItems"), list) else "additionalItems"
    return views.sub(view, keyword) if isinstance(view.node.get(keyword), dict) else None
