"""Protobuf compatibility: a port of Confluent's protobuf SchemaDiff (protobuf-provider ``protobuf/diff``).

``compare(original, update)`` (two ProtoModels) lists every Difference from the original file to the
update; kinds in ``COMPATIBLE_CHANGES`` keep the wire format readable.  Confluent walks wire's parsed
elements and resolves type names itself; here both files come resolved from the descriptor pool (type
names fully qualified), so a name is looked up directly among the file's and its references' types.
Types it does not know (the well-known google/protobuf files) are compared by name.

Scalars are grouped as Confluent groups them (int32/int64/uint32/uint64/bool and enums; sint32/sint64;
string/bytes; fixed32/sfixed32; fixed64/sfixed64; float; double): a change within a group is compatible.
A field whose message type keeps its local name is compared into that message; the message pair is
memoized and a pair met again while being compared (a recursive message) counts as compatible.  The
recursion is bounded by MAX_COMPARE_DEPTH; deeper comparisons stop with an incompatibility.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from google.protobuf import descriptor_pb2

from broker_sim.registry.types.errors import MAX_SCHEMA_DEPTH, capped

F = descriptor_pb2.FieldDescriptorProto
MAX_COMPARE_DEPTH = 2 * MAX_SCHEMA_DEPTH

COMPATIBLE_CHANGES = frozenset({
    "MESSAGE_ADDED", "MESSAGE_MOVED", "ENUM_ADDED", "ENUM_REMOVED", "ENUM_CONST_ADDED", "ENUM_CONST_CHANGED",
    "ENUM_CONST_REMOVED", "FIELD_ADDED", "FIELD_REMOVED", "FIELD_NAME_CHANGED",
    "FIELD_STRING_OR_BYTES_LABEL_CHANGED", "ONEOF_ADDED", "ONEOF_REMOVED", "ONEOF_FIELD_ADDED",
})

# Confluent's FieldSchemaDiff.ScalarKind, after the proto3 guide's "Updating A Message Type".
_SCALAR_KINDS = {
    F.TYPE_INT32: "GENERAL_NUMBER", F.TYPE_INT64: "GENERAL_NUMBER", F.TYPE_UINT32: "GENERAL_NUMBER",
    F.TYPE_UINT64: "GENERAL_NUMBER", F.TYPE_BOOL: "GENERAL_NUMBER", F.TYPE_ENUM: "GENERAL_NUMBER",
    F.TYPE_SINT32: "SIGNED_NUMBER", F.TYPE_SINT64: "SIGNED_NUMBER",
    F.TYPE_STRING: "STRING_OR_BYTES", F.TYPE_BYTES: "STRING_OR_BYTES",
    F.TYPE_FIXED32: "FIXED32", F.TYPE_SFIXED32: "FIXED32",
    F.TYPE_FIXED64: "FIXED64", F.TYPE_SFIXED64: "FIXED64",
    F.TYPE_FLOAT: "FLOAT", F.TYPE_DOUBLE: "DOUBLE",
}


@dataclass(frozen=True)
class Difference:
    kind: str
    path: str

    def __str__(self) -> str:
        """Confluent's ``Difference.toString()``."""
        return f"Difference{{fullPath='{self.path}', type={self.kind}}}"


@dataclass(frozen=True)
class _TypeInfo:
    package: str
    proto: Any  # DescriptorProto or EnumDescriptorProto
    source: str  # the reference path it came from, "" for the schema itself
    canonical: str  # the canonical text of the referenced schema it came from, "" for the schema itself


class _Side:
    """The named types one side can see: its own file's and every referenced file's, by full name."""

    def __init__(self, model: Any) -> None:
        self.types: dict[str, _TypeInfo] = {}
        for path, dependency in model.dependencies:
            self._collect(dependency.model.file, path, dependency.canonical)
        self._collect(model.file, "", "")

    def _collect(self, file: descriptor_pb2.FileDescriptorProto, source: str, canonical: str) -> None:
        prefix = file.package + "." if file.package else ""
        stack: list[tuple[str, Any]] = [(prefix + m.name, m) for m in file.message_type]
        stack += [(prefix + e.name, e) for e in file.enum_type]
        while stack:
            name, proto = stack.pop()
            self.types[name] = _TypeInfo(file.package, proto, source, canonical)
            if isinstance(proto, descriptor_pb2.DescriptorProto):
                stack += [(f"{name}.{m.name}", m) for m in proto.nested_type]
                stack += [(f"{name}.{e.name}", e) for e in proto.enum_type]

    def get(self, type_name: str) -> _TypeInfo | None:
        return self.types.get(type_name.lstrip("."))


class _State:
    def __init__(self, original: _Side, update: _Side) -> None:
        self.original, self.update = original, update
        self.memo: dict[tuple[str, str], list[Difference]] = {}
        self.in_progress: set[tuple[str, str]] = set()
        self.depth = 0


class _Context:
    def __init__(self, state: _State, path: list[str]) -> None:
        self.state = state
        self.path = path
        self.diffs: list[Difference] = []

    def add(self, kind: str) -> None:
        self.diffs.append(Difference(kind, "#/" + "/".join(self.path)))

    def compatible(self) -> bool:
        return all(diff.kind in COMPATIBLE_CHANGES for diff in self.diffs)


def compare(original: Any, update: Any) -> list[Difference]:
    """Every difference from ``original`` to ``update`` (ProtoModels), Confluent's SchemaDiff.compare."""
    state = _State(_Side(original), _Side(update))
    _compare_dependencies_first(state)
    ctx = _Context(state, [])
    if original.file.package != update.file.package:
        ctx.add("PACKAGE_CHANGED")
    _compare_types(ctx, original.file, update.file)
    return capped(list(dict.fromkeys(ctx.diffs)), COMPATIBLE_CHANGES)


def _compare_dependencies_first(state: _State) -> None:
    """Compare the message types both sides name alike, each after the types its fields use (a post-order,
    walked without recursion), so that the walk that follows finds them memoized instead of recursing down a
    long chain of message-typed fields."""
    order: list[str] = []
    done: set[str] = set()
    for root in list(state.original.types):
        stack = [(root, False)]
        while stack:
            name, expanded = stack.pop()
            if expanded:
                order.append(name)
                continue
            if name in done:
                continue
            done.add(name)
            info = state.original.types.get(name)
            if info is None or not isinstance(info.proto, descriptor_pb2.DescriptorProto):
                continue
            stack.append((name, True))
            stack.extend((f.type_name.lstrip("."), False) for f in info.proto.field if f.type_name)
    for name in order:
        o_info, u_info = state.original.types.get(name), state.update.types.get(name)
        if u_info is not None and isinstance(u_info.proto, descriptor_pb2.DescriptorProto):
            _compare_message_types(_Context(state, []), name, o_info, name, u_info)


def _compare_types(ctx: _Context, original: Any, update: Any) -> None:
    """Messages and enums declared directly in ``original`` and ``update`` (files or messages), by name."""
    o_messages, u_messages = _messages(original), _messages(update)
    for name in sorted(o_messages.keys() | u_messages.keys()):
        ctx.path.append(name)
        o, u = o_messages.get(name), u_messages.get(name)
        if u is None:
            ctx.add("MESSAGE_REMOVED")
        elif o is None:
            ctx.add("MESSAGE_ADDED")
        else:
            _compare_message(ctx, o[1], u[1])
            if o[0] != u[0]:
                # Moving a message is compatible: a record's message indexes refer to its writer's schema.
                ctx.add("MESSAGE_MOVED")
        ctx.path.pop()
    o_enums, u_enums = {e.name: e for e in original.enum_type}, {e.name: e for e in update.enum_type}
    for name in sorted(o_enums.keys() | u_enums.keys()):
        ctx.path.append(name)
        if name not in u_enums:
            ctx.add("ENUM_REMOVED")
        elif name not in o_enums:
            ctx.add("ENUM_ADDED")
        else:
            _compare_enum(ctx, o_enums[name], u_enums[name])
        ctx.path.pop()


def _messages(scope: Any) -> dict[str, tuple[int, Any]]:
    """The messages declared in a file or message, by name, with their index; map entries are field types,
    not messages, in Confluent's (wire's) model, so they are left out."""
    declared = scope.message_type if isinstance(scope, descriptor_pb2.FileDescriptorProto) else scope.nested_type
    return {m.name: (i, m) for i, m in enumerate(m for m in declared if not m.options.map_entry)}


def _compare_enum(ctx: _Context, original: Any, update: Any) -> None:
    o_values, u_values = {v.number: v for v in original.value}, {v.number: v for v in update.value}
    for number in sorted(o_values.keys() | u_values.keys()):
        ctx.path.append(str(number))
        if number not in u_values:
            ctx.add("ENUM_CONST_REMOVED")
        elif number not in o_values:
            ctx.add("ENUM_CONST_ADDED")
        elif o_values[number].name != u_values[number].name:
            ctx.add("ENUM_CONST_CHANGED")
        ctx.path.pop()


def _real_oneof(field: Any) -> bool:
    return field.HasField("oneof_index") and not field.proto3_optional


def _compare_message(ctx: _Context, original: Any, update: Any) -> None:
    o_top = {f.number: f for f in original.field if not _real_oneof(f)}
    u_top = {f.number: f for f in update.field if not _real_oneof(f)}
    o_all, u_all = {f.number: f for f in original.field}, {f.number: f for f in update.field}
    o_oneof_of = {f.number: original.oneof_decl[f.oneof_index].name for f in original.field if _real_oneof(f)}
    u_oneof_of = {f.number: update.oneof_decl[f.oneof_index].name for f in update.field if _real_oneof(f)}
    o_oneofs = {original.oneof_decl[i].name: [f for f in original.field if _real_oneof(f) and f.oneof_index == i]
                for i in range(len(original.oneof_decl)) if any(_real_oneof(f) and f.oneof_index == i
                                                                 for f in original.field)}
    u_oneofs = {update.oneof_decl[i].name: [f for f in update.field if _real_oneof(f) and f.oneof_index == i]
                for i in range(len(update.oneof_decl)) if any(_real_oneof(f) and f.oneof_index == i
                                                               for f in update.field)}
    for name, members in u_oneofs.items():
        ctx.path.append(name)
        moved = sum(1 for f in members if o_top.pop(f.number, None) is not None)
        existing = sum(1 for f in members if f.number in o_oneof_of and f.number not in o_top)
        if moved > 1:
            ctx.add("MULTIPLE_FIELDS_MOVED_TO_ONEOF")
        elif moved == 1 and existing > 0:
            ctx.add("FIELD_MOVED_TO_EXISTING_ONEOF")
        ctx.path.pop()
    for name in sorted(o_oneofs.keys() | u_oneofs.keys()):
        ctx.path.append(name)
        if name not in u_oneofs:
            ctx.add("ONEOF_REMOVED")
        elif name not in o_oneofs:
            ctx.add("ONEOF_ADDED")
        else:
            _compare_oneof(ctx, o_oneofs[name], u_oneofs[name], set(u_all))
        ctx.path.pop()
    for number in sorted(o_top.keys() | u_top.keys()):
        ctx.path.append(str(number))
        o, u = o_top.get(number), u_top.get(number)
        if u is None:
            ctx.add("REQUIRED_FIELD_REMOVED" if o.label == F.LABEL_REQUIRED else "FIELD_REMOVED")
        elif o is None:
            ctx.add("REQUIRED_FIELD_ADDED" if u.label == F.LABEL_REQUIRED else "FIELD_ADDED")
        else:
            _compare_field(ctx, o, u)
        ctx.path.pop()
    # Fields whose oneof membership changed are compared by number too, so a type change is not missed.
    for number in sorted(o_all.keys() & u_all.keys()):
        o_oneof, u_oneof = o_oneof_of.get(number), u_oneof_of.get(number)
        if (o_oneof is None and u_oneof is None) or (o_oneof is not None and o_oneof == u_oneof):
            continue
        ctx.path.append(str(number))
        _compare_field(ctx, o_all[number], u_all[number])
        ctx.path.pop()
    _compare_types(ctx, original, update)


def _compare_oneof(ctx: _Context, original: list[Any], update: list[Any], update_numbers: set[int]) -> None:
    o_fields, u_fields = {f.number: f for f in original}, {f.number: f for f in update}
    for number in sorted(o_fields.keys() | u_fields.keys()):
        ctx.path.append(str(number))
        if number not in u_fields:
            # A field that left the oneof but lives on elsewhere in the message was moved, not removed.
            if number not in update_numbers:
                ctx.add("ONEOF_FIELD_REMOVED")
        elif number not in o_fields:
            ctx.add("ONEOF_FIELD_ADDED")
        else:
            _compare_field(ctx, o_fields[number], u_fields[number])
        ctx.path.pop()


def _compare_field(ctx: _Context, original: Any, update: Any) -> None:
    if original.name != update.name:
        ctx.add("FIELD_NAME_CHANGED")
    _compare_field_types(ctx, original, update)


def _kind(field: Any, info: _TypeInfo | None) -> str:
    if field.type not in (F.TYPE_MESSAGE, F.TYPE_GROUP):
        return "SCALAR"
    if info is not None and isinstance(info.proto, descriptor_pb2.DescriptorProto) and info.proto.options.map_entry:
        return "MAP"
    return "MESSAGE"


def _compare_field_types(ctx: _Context, original: Any, update: Any) -> None:
    state = ctx.state
    o_info, u_info = state.original.get(original.type_name), state.update.get(update.type_name)
    o_kind, u_kind = _kind(original, o_info), _kind(update, u_info)
    if o_kind != u_kind:
        ctx.add("FIELD_KIND_CHANGED")
    elif o_kind == "SCALAR":
        if _SCALAR_KINDS[original.type] != _SCALAR_KINDS[update.type]:
            ctx.add("FIELD_SCALAR_KIND_CHANGED")
    elif o_kind == "MAP":
        o_entry = {f.number: f for f in o_info.proto.field}
        u_entry = {f.number: f for f in u_info.proto.field}
        for number in (1, 2):
            if number in o_entry and number in u_entry:
                _compare_field_types(ctx, o_entry[number], u_entry[number])
    else:
        _compare_message_types(ctx, original.type_name.lstrip("."), o_info, update.type_name.lstrip("."), u_info)


def _local(full_name: str, info: _TypeInfo) -> str:
    return full_name[len(info.package) + 1:] if info.package and full_name.startswith(info.package + ".") \
        else full_name


def _compare_message_types(ctx: _Context, o_name: str, o_info: _TypeInfo | None, u_name: str,
                           u_info: _TypeInfo | None) -> None:
    if o_info is None or u_info is None:
        if o_name != u_name:
            ctx.add("FIELD_NAMED_TYPE_CHANGED")
        return
    o_local, u_local = _local(o_name, o_info), _local(u_name, u_info)
    if o_local != u_local:
        ctx.add("FIELD_NAMED_TYPE_CHANGED")
        return
    if o_info.source and o_info.source == u_info.source and o_info.canonical == u_info.canonical:
        return  # the same referenced schema on both sides
    state = ctx.state
    key = (o_name, u_name)
    if key in state.in_progress:
        return
    if key not in state.memo:
        if state.depth >= MAX_COMPARE_DEPTH:
            ctx.add("SCHEMA_TOO_DEEP_TO_COMPARE")
            return
        state.in_progress.add(key)
        state.depth += 1
        try:
            sub = _Context(state, o_local.split("."))
            _compare_message(sub, o_info.proto, u_info.proto)
        finally:
            state.depth -= 1
            state.in_progress.discard(key)
        state.memo[key] = capped(sub.diffs, COMPATIBLE_CHANGES)
    diffs = state.memo[key]
    ctx.diffs.extend(diffs)
    if not all(diff.kind in COMPATIBLE_CHANGES for diff in diffs):
        ctx.add("FIELD_NAMED_TYPE_CHANGED")
