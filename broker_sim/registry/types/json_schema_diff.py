"""JSON Schema compatibility: a port of Confluent's JsonSchemaDiff (json-schema-provider ``json/diff``).

``compare(original, update)`` lists every Difference from the original schema to the update; a change whose
kind is in ``COMPATIBLE_CHANGES`` keeps data valid under the original valid under the update.  BACKWARD
compares original = the previous version with update = the new one; FORWARD the other way round.

Confluent compares Everit schema objects; here each JSON value is first classified into the Everit class it
would load as (a ``_View``: empty, false, combined, not, enum, string, number, object, array, boolean, null),
with ``$ref`` followed to the schema it names.  A value with keywords of several kinds (``type`` plus
``oneOf``, ``type`` plus ``enum``) is an ``allOf`` of one view per kind, a list ``type`` an ``anyOf``, as
Everit's loader builds them.  Pairs already compared are memoized and a pair met again while being compared
(a recursive schema) counts as compatible, as Confluent's ``Context`` does.  The recursion is bounded:
schemas were refused at parse when nested deeper than MAX_SCHEMA_DEPTH, and a comparison that goes deeper
than twice that (two recursive schemas whose cycles do not line up) stops with an incompatibility.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from broker_sim.registry.types.errors import MAX_SCHEMA_DEPTH
from broker_sim.registry.types.json_schema_difference import COMPATIBLE_CHANGES, Difference

MAX_COMPARE_DEPTH = 2 * MAX_SCHEMA_DEPTH
# oneOf/anyOf/allOf match subschema pairs; past this many pairs the comparison is refused, not run.
MAX_COMBINED_PAIRS = 65536

def compare(original: Any, update: Any) -> list[Difference]:
    """Every difference from ``original`` to ``update`` (two JsonModels), Confluent's SchemaDiff.compare."""
    state = _State()
    ctx = _Context(state, [])
    _compare(ctx, state.view(original.value, original.resolver(), original.specification),
             state.view(update.value, update.resolver(), update.specification))
    return ctx.diffs


# --- views: what Everit would load a JSON value as ---------------------------------------------------------

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
class _View:
    kind: str
    node: Any = None
    resolver: Any = None
    spec: Any = None
    integer: bool = False
    criterion: str = ""
    subs: list[_View] = field(default_factory=list)

    def key(self) -> str:
        """What makes two subschemas of a combined type the same (Confluent collapses duplicates)."""
        return json.dumps([self.kind, self.integer, self.criterion, self.node], sort_keys=True)


class _State:
    """Shared by one comparison: the views built so far (by node id, keeping the nodes alive), the memo of
    compared pairs, the pairs being compared, and the comparison depth."""

    def __init__(self) -> None:
        self.views: dict[int, tuple[Any, _View]] = {}
        self.memo: dict[tuple[int, int], list[Difference]] = {}
        self.in_progress: set[tuple[int, int]] = set()
        self.depth = 0

    def view(self, node: Any, resolver: Any, specification: Any) -> _View:
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

    def sub(self, view: _View, keyword: str) -> _View | None:
        node = view.node.get(keyword) if isinstance(view.node, dict) else None
        if not isinstance(node, (dict, bool)):
            return None
        return self.view(node, view.resolver, view.spec)


def _classify(node: Any, resolver: Any, specification: Any, state: _State) -> _View:
    if node is True or node == {}:
        return _View("empty", node, resolver, specification)
    if node is False or not isinstance(node, dict):
        return _View("false", node, resolver, specification)
    parts: list[_View] = []
    declared = node.get("type")
    types = declared if isinstance(declared, list) else [declared] if isinstance(declared, str) else []
    if not types:
        types = [kind for kind, keywords in _TYPED_KINDS.items() if any(k in node for k in keywords)]
    typed = [_View("number" if t == "integer" else t, node, resolver, specification, integer=t == "integer")
             for t in types]
    if len(typed) == 1:
        parts.append(typed[0])
    elif typed:
        parts.append(_View("combined", node, resolver, specification, criterion="anyOf", subs=typed))
    if "enum" in node or "const" in node:
        parts.append(_View("enum", node, resolver, specification))
    if isinstance(node.get("not"), (dict, bool)):
        parts.append(_View("not", node, resolver, specification))
    for criterion in _COMBINERS:
        if isinstance(node.get(criterion), list):
            subs = [state.view(sub, resolver, specification) for sub in node[criterion]
                    if isinstance(sub, (dict, bool))]
            parts.append(_View("combined", node, resolver, specification, criterion=criterion, subs=subs))
    if not parts:
        return _View("empty", node, resolver, specification)
    if len(parts) == 1:
        return parts[0]
    return _View("combined", node, resolver, specification, criterion="allOf", subs=parts)


# --- the comparison ----------------------------------------------------------------------------------------

class _Context:
    def __init__(self, state: _State, path: list[str]) -> None:
        self.state = state
        self.path = path
        self.diffs: list[Difference] = []

    def sub(self) -> _Context:
        return _Context(self.state, list(self.path))

    def add(self, kind: str, attribute: str | None = None) -> None:
        steps = self.path + ([attribute] if attribute else [])
        self.diffs.append(Difference(kind, "#/" + "/".join(steps)))

    def add_rebased(self, diffs: list[Difference]) -> None:
        prefix = "#/" + "/".join(self.path)
        for diff in diffs:
            relative = diff.path[2:]
            path = prefix if not relative else (prefix + "/" + relative if self.path else "#/" + relative)
            self.diffs.append(Difference(diff.kind, path))

    def compatible(self) -> bool:
        return all(diff.kind in COMPATIBLE_CHANGES for diff in self.diffs)

    def enter(self, step: str) -> _Context:
        self.path.append(step)
        return self

    def leave(self) -> None:
        self.path.pop()


def _compare(ctx: _Context, original: _View | None, update: _View | None) -> None:
    if original is None and update is None:
        return
    if original is None:
        ctx.add("SCHEMA_ADDED")
        return
    if update is None:
        ctx.add("SCHEMA_REMOVED")
        return
    state = ctx.state
    key = (id(original), id(update))
    if key in state.memo:
        ctx.add_rebased(state.memo[key])
        return
    if key in state.in_progress:
        return
    if state.depth >= MAX_COMPARE_DEPTH:
        ctx.add("SCHEMA_TOO_DEEP_TO_COMPARE")
        return
    state.in_progress.add(key)
    state.depth += 1
    try:
        pair = _Context(state, [])
        _compare_pair(pair, original, update)
    finally:
        state.depth -= 1
        state.in_progress.discard(key)
    state.memo[key] = pair.diffs
    ctx.add_rebased(pair.diffs)


def _compare_pair(ctx: _Context, original: _View, update: _View) -> None:
    if original.kind != "combined" and update.kind == "combined":
        if len(update.subs) == 1:
            sub = ctx.sub()
            _compare(sub, original, update.subs[0])
            if sub.compatible():
                ctx.diffs.extend(sub.diffs)
                return
        elif update.criterion in ("anyOf", "oneOf"):
            for branch in update.subs:
                sub = ctx.sub()
                _compare(sub, original, branch)
                if sub.compatible():
                    ctx.diffs.extend(sub.diffs)
                    ctx.add("SUM_TYPE_EXTENDED")
                    return
    elif original.kind == "combined" and update.kind != "combined" and len(original.subs) == 1:
        sub = ctx.sub()
        _compare(sub, original.subs[0], update)
        if sub.compatible():
            ctx.diffs.extend(sub.diffs)
            return
    if original.kind != update.kind:
        if original.kind != "false" and update.kind != "empty":
            ctx.add("TYPE_CHANGED")
        return
    compare_kind = _BY_KIND.get(original.kind)
    if compare_kind is not None:
        compare_kind(ctx, original, update)


def _limit(ctx: _Context, keyword: str, original: Any, update: Any, stem: str) -> None:
    """The ADDED/REMOVED/INCREASED/DECREASED difference of one numeric keyword."""
    o = original if isinstance(original, (int, float)) and not isinstance(original, bool) else None
    u = update if isinstance(update, (int, float)) and not isinstance(update, bool) else None
    if o == u:
        return
    if o is None:
        ctx.add(f"{stem}_ADDED", keyword)
    elif u is None:
        ctx.add(f"{stem}_REMOVED", keyword)
    elif o < u:
        ctx.add(f"{stem}_INCREASED", keyword)
    else:
        ctx.add(f"{stem}_DECREASED", keyword)


def _string(ctx: _Context, original: _View, update: _View) -> None:
    o, u = original.node, update.node
    _limit(ctx, "maxLength", o.get("maxLength"), u.get("maxLength"), "MAX_LENGTH")
    _limit(ctx, "minLength", o.get("minLength"), u.get("minLength"), "MIN_LENGTH")
    op, up = o.get("pattern"), u.get("pattern")
    if op is None and up is not None:
        ctx.add("PATTERN_ADDED", "pattern")
    elif op is not None and up is None:
        ctx.add("PATTERN_REMOVED", "pattern")
    elif op != up:
        ctx.add("PATTERN_CHANGED", "pattern")


def _number(ctx: _Context, original: _View, update: _View) -> None:
    o, u = original.node, update.node
    _limit(ctx, "maximum", o.get("maximum"), u.get("maximum"), "MAXIMUM")
    _limit(ctx, "minimum", o.get("minimum"), u.get("minimum"), "MINIMUM")
    _limit(ctx, "exclusiveMaximum", o.get("exclusiveMaximum"), u.get("exclusiveMaximum"), "EXCLUSIVE_MAXIMUM")
    _limit(ctx, "exclusiveMinimum", o.get("exclusiveMinimum"), u.get("exclusiveMinimum"), "EXCLUSIVE_MINIMUM")
    om, um = _fraction(o.get("multipleOf")), _fraction(u.get("multipleOf"))
    if om != um:
        if om is None:
            ctx.add("MULTIPLE_OF_ADDED", "multipleOf")
        elif um is None:
            ctx.add("MULTIPLE_OF_REMOVED", "multipleOf")
        elif (um / om).denominator == 1:
            ctx.add("MULTIPLE_OF_EXPANDED", "multipleOf")
        elif (om / um).denominator == 1:
            ctx.add("MULTIPLE_OF_REDUCED", "multipleOf")
        else:
            ctx.add("MULTIPLE_OF_CHANGED", "multipleOf")
    if original.integer != update.integer:
        ctx.add("TYPE_EXTENDED" if original.integer else "TYPE_NARROWED")


def _fraction(value: Any) -> Fraction | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        return None
    return Fraction(str(value))


def _enum(ctx: _Context, original: _View, update: _View) -> None:
    o, u = _enum_values(original.node), _enum_values(update.node)
    if o != u:
        if u >= o:
            ctx.add("ENUM_ARRAY_EXTENDED", "enum")
        elif o >= u:
            ctx.add("ENUM_ARRAY_NARROWED", "enum")
        else:
            ctx.add("ENUM_ARRAY_CHANGED", "enum")


def _enum_values(node: dict[str, Any]) -> frozenset[str]:
    values = node["enum"] if isinstance(node.get("enum"), list) else [node.get("const")]
    return frozenset(json.dumps(v, sort_keys=True) for v in values)


def _not(ctx: _Context, original: _View, update: _View) -> None:
    ctx.enter("not")
    sub = ctx.sub()
    # Reversed: the update accepts more when what it excludes is narrower.
    _compare(sub, ctx.state.sub(update, "not"), ctx.state.sub(original, "not"))
    ctx.add("NOT_TYPE_NARROWED" if sub.compatible() else "NOT_TYPE_EXTENDED")
    ctx.leave()


def _combined(ctx: _Context, original: _View, update: _View) -> None:
    oc, uc = original.criterion, update.criterion
    changed = False
    if oc != uc:
        if uc == "anyOf" or (uc == "oneOf" and len(original.subs) == 1) or (
                uc == "allOf" and len(original.subs) == 1 and len(update.subs) == 1):
            ctx.add("COMBINED_TYPE_EXTENDED")
        else:
            ctx.add("COMBINED_TYPE_CHANGED")
            changed = True
    if changed:
        return
    o_subs = list({view.key(): view for view in original.subs}.values())
    u_subs = list({view.key(): view for view in update.subs}.values())
    if len(o_subs) != len(u_subs):
        grew = len(o_subs) < len(u_subs)
        product = uc == "allOf"
        ctx.add(("PRODUCT" if product else "SUM") + ("_TYPE_EXTENDED" if grew else "_TYPE_NARROWED"))
    if len(o_subs) * len(u_subs) > MAX_COMBINED_PAIRS:
        ctx.add("COMBINED_TYPE_TOO_LARGE_TO_COMPARE")
        return
    edges: dict[int, dict[int, list[Difference]]] = {}
    for i, o_sub in enumerate(o_subs):
        ctx.enter(f"{oc}/{i}")
        for j, u_sub in enumerate(u_subs):
            sub = ctx.sub()
            _compare(sub, o_sub, u_sub)
            if sub.compatible():
                edges.setdefault(i, {})[j] = sub.diffs
        ctx.leave()
    matching = _maximum_matching(edges, len(o_subs))
    for i, j in matching.items():
        ctx.diffs.extend(edges[i][j])
    if len(matching) < min(len(o_subs), len(u_subs)):
        ctx.add("COMBINED_TYPE_SUBSCHEMAS_CHANGED")


def _maximum_matching(edges: dict[int, dict[int, Any]], left: int) -> dict[int, int]:
    """A maximum bipartite matching (left index -> right index) by augmenting paths, searched iteratively."""
    right_of: dict[int, int] = {}
    left_of: dict[int, int] = {}
    for start in range(left):
        parent: dict[int, int] = {}  # right node -> the left node that reached it
        frontier = [start]
        seen_left = {start}
        found = None
        while frontier and found is None:
            nxt = []
            for u in frontier:
                for v in edges.get(u, {}):
                    if v in parent:
                        continue
                    parent[v] = u
                    if v not in left_of:
                        found = v
                        break
                    if left_of[v] not in seen_left:
                        seen_left.add(left_of[v])
                        nxt.append(left_of[v])
                if found is not None:
                    break
            frontier = nxt
        v = found
        while v is not None:
            u = parent[v]
            previous = right_of.get(u)
            right_of[u], left_of[v] = v, u
            v = previous
    return right_of


def _object(ctx: _Context, original: _View, update: _View) -> None:
    state = ctx.state
    o, u = original.node, update.node
    o_props, u_props = _schemas(state, original, "properties"), _schemas(state, update, "properties")
    o_req, u_req = _strings(o.get("required")), _strings(u.get("required"))
    ctx.enter("required")
    for name in o_props:
        if name in u_props:
            ctx.enter(name)
            if name in o_req and name not in u_req:
                ctx.add("REQUIRED_ATTRIBUTE_REMOVED")
            elif name not in o_req and name in u_req:
                ctx.add("REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED" if _has_default(u_props[name])
                        else "REQUIRED_ATTRIBUTE_ADDED")
            ctx.leave()
    ctx.leave()
    ctx.enter("properties")
    for name in list(dict.fromkeys([*o_props, *u_props])):
        ctx.enter(name)
        o_prop, u_prop = o_props.get(name), u_props.get(name)
        if u_prop is None:
            _property_removed(ctx, update, name, o_prop)
        elif o_prop is None:
            _property_added(ctx, original, update, name, u_prop, u_req)
        else:
            _compare(ctx, o_prop, u_prop)
        ctx.leave()
    ctx.leave()
    _dependencies(ctx, original, update)
    ctx.enter("additionalProperties")
    o_permits, u_permits = o.get("additionalProperties") is not False, u.get("additionalProperties") is not False
    o_extra, u_extra = _extra_schema(state, original), _extra_schema(state, update)
    if o_permits != u_permits:
        ctx.add("ADDITIONAL_PROPERTIES_ADDED" if u_permits else "ADDITIONAL_PROPERTIES_REMOVED")
    elif o_extra is None and u_extra is not None:
        ctx.add("ADDITIONAL_PROPERTIES_NARROWED")
    elif u_extra is None and o_extra is not None:
        ctx.add("ADDITIONAL_PROPERTIES_EXTENDED")
    else:
        _compare(ctx, o_extra, u_extra)
    ctx.leave()
    _limit(ctx, "maxProperties", o.get("maxProperties"), u.get("maxProperties"), "MAX_PROPERTIES")
    _limit(ctx, "minProperties", o.get("minProperties"), u.get("minProperties"), "MIN_PROPERTIES")


def _property_removed(ctx: _Context, update: _View, name: str, o_prop: _View) -> None:
    # Only the update's content model matters: a property may go only where the update accepts it anyway.
    if _is_open(update):
        ctx.add("PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL")
        return
    partial = _partial_schema(ctx.state, update, name)
    if partial is not None:
        sub = ctx.sub()
        _compare(sub, o_prop, partial)
        ctx.diffs.extend(sub.diffs)
        ctx.add("PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" if sub.compatible()
                else "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
    elif o_prop.kind == "false":
        ctx.add("PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL")
    else:
        ctx.add("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL")


def _property_added(ctx: _Context, original: _View, update: _View, name: str, u_prop: _View,
                    u_req: set[str]) -> None:
    # Only the original's content model matters: data written with it may already hold the new property.
    if _is_open(original):
        ctx.add("PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL" if u_prop.kind == "empty"
                else "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL")
        return
    partial = _partial_schema(ctx.state, original, name)
    if partial is not None:
        sub = ctx.sub()
        _compare(sub, partial, u_prop)
        ctx.diffs.extend(sub.diffs)
        ctx.add("PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" if sub.compatible()
                else "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
    if name in u_req:
        ctx.add("REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL" if _has_default(u_prop)
                else "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL")
    else:
        ctx.add("OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL")


def _dependencies(ctx: _Context, original: _View, update: _View) -> None:
    ctx.enter("dependencies")
    o_arrays, u_arrays = _dependency_arrays(original.node), _dependency_arrays(update.node)
    for name in list(dict.fromkeys([*o_arrays, *u_arrays])):
        o_deps, u_deps = o_arrays.get(name), u_arrays.get(name)
        ctx.enter(name)
        if u_deps is None:
            ctx.add("DEPENDENCY_ARRAY_REMOVED")
        elif o_deps is None:
            ctx.add("DEPENDENCY_ARRAY_ADDED")
        elif o_deps != u_deps:
            ctx.add("DEPENDENCY_ARRAY_EXTENDED" if u_deps >= o_deps else
                    "DEPENDENCY_ARRAY_NARROWED" if o_deps >= u_deps else "DEPENDENCY_ARRAY_CHANGED")
        ctx.leave()
    o_schemas, u_schemas = _dependency_schemas(ctx.state, original), _dependency_schemas(ctx.state, update)
    for name in list(dict.fromkeys([*o_schemas, *u_schemas])):
        ctx.enter(name)
        if name not in u_schemas:
            ctx.add("DEPENDENCY_SCHEMA_REMOVED")
        elif name not in o_schemas:
            ctx.add("DEPENDENCY_SCHEMA_ADDED")
        else:
            _compare(ctx, o_schemas[name], u_schemas[name])
        ctx.leave()
    ctx.leave()


def _array(ctx: _Context, original: _View, update: _View) -> None:
    state = ctx.state
    o, u = original.node, update.node
    ctx.enter("items")
    _compare(ctx, _all_items(state, original), _all_items(state, update))
    ctx.leave()
    o_items, u_items = _item_list(state, original), _item_list(state, update)
    for index in range(max(len(o_items), len(u_items))):
        ctx.enter(f"items/{index}")
        if index < len(o_items) and index < len(u_items):
            _compare(ctx, o_items[index], u_items[index])
        elif index < len(o_items):
            _item_removed(ctx, update, o_items[index])
        else:
            _item_added(ctx, original, u_items[index])
        ctx.leave()
    ctx.enter("additionalItems")
    o_permits, u_permits = _additional_items(o) is not False, _additional_items(u) is not False
    o_extra, u_extra = _extra_items(state, original), _extra_items(state, update)
    if o_permits != u_permits:
        ctx.add("ADDITIONAL_ITEMS_REMOVED" if o_permits else "ADDITIONAL_ITEMS_ADDED")
    elif o_extra is None and u_extra is not None:
        ctx.add("ADDITIONAL_ITEMS_NARROWED")
    elif u_extra is None and o_extra is not None:
        ctx.add("ADDITIONAL_ITEMS_EXTENDED")
    else:
        _compare(ctx, o_extra, u_extra)
    ctx.leave()
    _limit(ctx, "maxItems", o.get("maxItems"), u.get("maxItems"), "MAX_ITEMS")
    _limit(ctx, "minItems", o.get("minItems"), u.get("minItems"), "MIN_ITEMS")
    if bool(o.get("uniqueItems")) != bool(u.get("uniqueItems")):
        ctx.add("UNIQUE_ITEMS_REMOVED" if o.get("uniqueItems") else "UNIQUE_ITEMS_ADDED", "uniqueItems")


def _item_removed(ctx: _Context, update: _View, o_item: _View) -> None:
    extra = _extra_items(ctx.state, update)
    if _additional_items(update.node) is not False and extra is None:
        ctx.add("ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL")
    elif extra is not None:
        sub = ctx.sub()
        _compare(sub, o_item, extra)
        ctx.diffs.extend(sub.diffs)
        ctx.add("ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" if sub.compatible()
                else "ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
    elif o_item.kind == "false":
        ctx.add("ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL")
    else:
        ctx.add("ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL")


def _item_added(ctx: _Context, original: _View, u_item: _View) -> None:
    extra = _extra_items(ctx.state, original)
    if _additional_items(original.node) is not False and extra is None:
        ctx.add("ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL" if u_item.kind == "empty"
                else "ITEM_ADDED_TO_OPEN_CONTENT_MODEL")
    elif extra is not None:
        sub = ctx.sub()
        _compare(sub, extra, u_item)
        ctx.diffs.extend(sub.diffs)
        ctx.add("ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" if sub.compatible()
                else "ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
    else:
        ctx.add("ITEM_ADDED_TO_CLOSED_CONTENT_MODEL")


_BY_KIND = {"string": _string, "number": _number, "enum": _enum, "combined": _combined, "not": _not,
            "object": _object, "array": _array}


# --- keyword readers ---------------------------------------------------------------------------------------

def _schemas(state: _State, view: _View, keyword: str) -> dict[str, _View]:
    value = view.node.get(keyword)
    if not isinstance(value, dict):
        return {}
    return {name: state.view(sub, view.resolver, view.spec) for name, sub in value.items()
            if isinstance(sub, (dict, bool))}


def _strings(value: Any) -> set[str]:
    return {v for v in value if isinstance(v, str)} if isinstance(value, list) else set()


def _has_default(view: _View) -> bool:
    return isinstance(view.node, dict) and "default" in view.node


def _extra_schema(state: _State, view: _View) -> _View | None:
    extra = view.node.get("additionalProperties")
    return state.sub(view, "additionalProperties") if isinstance(extra, dict) else None


def _is_open(view: _View) -> bool:
    node = view.node
    return not node.get("patternProperties") and not isinstance(node.get("additionalProperties"), dict) \
        and node.get("additionalProperties") is not False


def _partial_schema(state: _State, view: _View, name: str) -> _View | None:
    for pattern, schema in _schemas(state, view, "patternProperties").items():
        try:
            if re.search(pattern, name):
                return schema
        except re.error:
            continue
    return _extra_schema(state, view)


def _dependency_arrays(node: dict[str, Any]) -> dict[str, set[str]]:
    found = {}
    for keyword in ("dependencies", "dependentRequired"):
        value = node.get(keyword)
        if isinstance(value, dict):
            found |= {name: _strings(deps) for name, deps in value.items() if isinstance(deps, list)}
    return found


def _dependency_schemas(state: _State, view: _View) -> dict[str, _View]:
    found = {}
    for keyword in ("dependencies", "dependentSchemas"):
        found |= _schemas(state, view, keyword)
    return found


def _all_items(state: _State, view: _View) -> _View | None:
    items = view.node.get("items")
    if "prefixItems" in view.node or not isinstance(items, (dict, bool)):
        return None
    return state.sub(view, "items")


def _item_list(state: _State, view: _View) -> list[_View]:
    node = view.node
    items = node.get("prefixItems") if isinstance(node.get("prefixItems"), list) else node.get("items")
    if not isinstance(items, list):
        return []
    return [state.view(item, view.resolver, view.spec) for item in items if isinstance(item, (dict, bool))]


def _additional_items(node: dict[str, Any]) -> Any:
    return node.get("items") if isinstance(node.get("prefixItems"), list) else node.get("additionalItems")


def _extra_items(state: _State, view: _View) -> _View | None:
    keyword = "items" if isinstance(view.node.get("prefixItems"), list) else "additionalItems"
    return state.sub(view, keyword) if isinstance(view.node.get(keyword), dict) else None
