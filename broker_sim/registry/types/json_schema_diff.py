"""JSON Schema compatibility: a port of Confluent's JsonSchemaDiff (json-schema-provider ``json/diff``).

``compare(original, update)`` lists every Difference from the original schema to the update; a change whose
kind is in ``COMPATIBLE_CHANGES`` keeps data valid under the original valid under the update.  BACKWARD
compares original = the previous version with update = the new one; FORWARD the other way round.

Confluent compares Everit schema objects; here each JSON value is first classified into the Everit class it
would load as (``json_schema_view.View``).  Pairs already compared are memoized and a pair met again while
being compared (a recursive schema) counts as compatible, as Confluent's ``Context`` does.  The recursion is bounded:
schemas were refused at parse when nested deeper than MAX_SCHEMA_DEPTH, and a comparison that goes deeper
than twice that (two recursive schemas whose cycles do not line up) stops with an incompatibility.
"""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Any

from broker_sim.registry.types.errors import MAX_SCHEMA_DEPTH, capped
from broker_sim.registry.types.json_schema_difference import COMPATIBLE_CHANGES, Difference
from broker_sim.registry.types.json_schema_view import (
    View, Views, additional_items, all_items, dependency_arrays, dependency_schemas, extra_items, extra_schema,
    has_default, is_open, item_list, partial_schema, schemas, strings)

MAX_COMPARE_DEPTH = 2 * MAX_SCHEMA_DEPTH
# oneOf/anyOf/allOf match subschema pairs; past this many pairs the comparison is refused, not run.
MAX_COMBINED_PAIRS = 65536
# Subschema pairs one comparison may compare (memoized pairs count once): combined types inside combined
# types multiply, so hostile schemas of moderate size could otherwise ask for billions.
MAX_COMPARED_PAIRS = 20_000

class _State:
    """Shared by one comparison: the views, the memo of compared pairs, the pairs being compared, the depth."""

    def __init__(self) -> None:
        self.views = Views()
        self.memo: dict[tuple[int, int], list[Difference]] = {}
        self.in_progress: set[tuple[int, int]] = set()
        self.depth = 0
        self.compared = 0


def compare(original: Any, update: Any) -> list[Difference]:
    """Every difference from ``original`` to ``update`` (two JsonModels), Confluent's SchemaDiff.compare."""
    state = _State()
    ctx = _Context(state, [])
    _compare(ctx, state.views.view(original.value, original.resolver(), original.specification),
             state.views.view(update.value, update.resolver(), update.specification))
    return capped(list(dict.fromkeys(ctx.diffs)), COMPATIBLE_CHANGES)


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


def _compare(ctx: _Context, original: View | None, update: View | None) -> None:
    if original is None and update is None:
        return
    if original is None:
        ctx.add("SCHEMA_ADDED")
        return
    if update is None:
        ctx.add("SCHEMA_REMOVED")
        return
    if original.key() == update.key() and not _has_ref([original.key()]):
        return  # identical subschemas (without references, which each side resolves its own way)
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
    if state.compared >= MAX_COMPARED_PAIRS:
        ctx.add("SCHEMA_TOO_LARGE_TO_COMPARE")
        return
    state.compared += 1
    state.in_progress.add(key)
    state.depth += 1
    try:
        pair = _Context(state, [])
        _compare_pair(pair, original, update)
    finally:
        state.depth -= 1
        state.in_progress.discard(key)
    state.memo[key] = pair.diffs = capped(pair.diffs, COMPATIBLE_CHANGES)
    ctx.add_rebased(pair.diffs)


def _compare_pair(ctx: _Context, original: View, update: View) -> None:
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


def _string(ctx: _Context, original: View, update: View) -> None:
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


def _number(ctx: _Context, original: View, update: View) -> None:
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


def _enum(ctx: _Context, original: View, update: View) -> None:
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


def _not(ctx: _Context, original: View, update: View) -> None:
    ctx.enter("not")
    sub = ctx.sub()
    # Reversed: the update accepts more when what it excludes is narrower.
    _compare(sub, ctx.state.views.sub(update, "not"), ctx.state.views.sub(original, "not"))
    ctx.add("NOT_TYPE_NARROWED" if sub.compatible() else "NOT_TYPE_EXTENDED")
    ctx.leave()


def _combined(ctx: _Context, original: View, update: View) -> None:
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
    o_keys, u_keys = {view.key() for view in o_subs}, {view.key() for view in u_subs}
    if (o_keys <= u_keys or u_keys <= o_keys) and not _has_ref(o_keys | u_keys):
        # Each subschema of the smaller side has an identical partner: the matching covers it, and
        # identical subschemas differ in nothing.  (Confluent compares every pair; the answer is the same.)
        return
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


def _has_ref(keys: Any) -> bool:
    return any('"$ref"' in key for key in keys)


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


def _object(ctx: _Context, original: View, update: View) -> None:
    state = ctx.state
    o, u = original.node, update.node
    o_props, u_props = schemas(state.views, original, "properties"), schemas(state.views, update, "properties")
    o_req, u_req = strings(o.get("required")), strings(u.get("required"))
    ctx.enter("required")
    for name in o_props:
        if name in u_props:
            ctx.enter(name)
            if name in o_req and name not in u_req:
                ctx.add("REQUIRED_ATTRIBUTE_REMOVED")
            elif name not in o_req and name in u_req:
                ctx.add("REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED" if has_default(u_props[name])
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
    o_extra, u_extra = extra_schema(state.views, original), extra_schema(state.views, update)
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


def _property_removed(ctx: _Context, update: View, name: str, o_prop: View) -> None:
    # Only the update's content model matters: a property may go only where the update accepts it anyway.
    if is_open(update):
        ctx.add("PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL")
        return
    partial = partial_schema(ctx.state.views, update, name)
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


def _property_added(ctx: _Context, original: View, update: View, name: str, u_prop: View,
                    u_req: set[str]) -> None:
    # Only the original's content model matters: data written with it may already hold the new property.
    if is_open(original):
        ctx.add("PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL" if u_prop.kind == "empty"
                else "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL")
        return
    partial = partial_schema(ctx.state.views, original, name)
    if partial is not None:
        sub = ctx.sub()
        _compare(sub, partial, u_prop)
        ctx.diffs.extend(sub.diffs)
        ctx.add("PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" if sub.compatible()
                else "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
    if name in u_req:
        ctx.add("REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL" if has_default(u_prop)
                else "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL")
    else:
        ctx.add("OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL")


def _dependencies(ctx: _Context, original: View, update: View) -> None:
    ctx.enter("dependencies")
    o_arrays, u_arrays = dependency_arrays(original.node), dependency_arrays(update.node)
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
    o_schemas, u_schemas = dependency_schemas(ctx.state, original), dependency_schemas(ctx.state, update)
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


def _array(ctx: _Context, original: View, update: View) -> None:
    state = ctx.state
    o, u = original.node, update.node
    ctx.enter("items")
    _compare(ctx, all_items(state.views, original), all_items(state.views, update))
    ctx.leave()
    o_items, u_items = item_list(state.views, original), item_list(state.views, update)
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
    o_permits, u_permits = additional_items(o) is not False, additional_items(u) is not False
    o_extra, u_extra = extra_items(state.views, original), extra_items(state.views, update)
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


def _item_removed(ctx: _Context, update: View, o_item: View) -> None:
    extra = extra_items(ctx.state.views, update)
    if additional_items(update.node) is not False and extra is None:
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


def _item_added(ctx: _Context, original: View, u_item: View) -> None:
    extra = extra_items(ctx.state.views, original)
    if additional_items(original.node) is not False and extra is None:
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


