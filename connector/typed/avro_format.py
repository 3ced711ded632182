"""Avro records (Confluent's wire format, or bare) as Spark structs, and back.

Theory of operation.

- ``spark_type`` is spark-avro's ``SchemaConverters.toSqlType`` on the registry's parse
  (``broker_sim.registry.types.avro``: an ``avro.schema.Schema``). A logical type counts only where Java's
  Avro accepts it (the ``avro`` package's logical schema classes; ``local-timestamp-*`` on a long), so an
  invalid one (a decimal whose precision does not fit its fixed size) maps to the plain type, as in Spark.
- ``decoder`` reads with fastavro's compiled ``schemaless_reader``. Before the first record, the reader and
  writer schemas are walked together once (Avro's resolution rules: fields by name or reader alias, union
  branches, promotions) and two fastavro schemas are derived from them:

  * the *reader copy*: the reader schema with every named type renamed to a unique name, no logical types;
    a union that Spark maps to a struct of ``member0``, ``member1``, ... has each branch ``i`` replaced by a
    record with all the member fields (``member i`` of the branch's type, the others of type ``null`` with
    default null), so fastavro itself builds the member struct;
  * the *writer copy*: the writer schema, its named types renamed to unique names that the corresponding
    reader types list as aliases (so fastavro resolves exactly the pairs the walk chose), a union branch
    that resolves into a member-struct union wrapped in a one-field record (a record adds no bytes, so the
    encoding is unchanged), and its logical types kept only where fastavro's compiled conversion gives what
    the reader's Spark type wants (decimal with the reader's precision and scale, date, timestamp-*,
    local-timestamp-*); ``uuid`` and ``time-*`` are dropped, so strings and ints come out untouched.

  Only what fastavro cannot do is left to Python, decided once per (reader, writer) pair: a logical type
  the writer lacks (or has differently), and a reader field missing from the writer whose Avro default
  needs converting (bytes given as text, decimals, member structs). With the same schema on both sides,
  none of that exists and a record costs one fastavro call plus a check that the payload was consumed
  exactly (trailing bytes are corruption, not silently ignored).
- fastavro trusts a block's item count: items that encode in no bytes (null, fixed(0), records of those)
  cost it nothing to read, so one array declaring 2^62 of them loops for ever, and it recurses into a
  recursive writer type as deep as the data goes (a crash of the process past a few thousand levels). For
  a writer schema with such an array, or a recursive one, each payload first goes through a *guard*
  (``_Guard``) that walks it as the writer encodes it, building nothing: every block count bounded by the
  bytes left (count times the item's minimum size), zero-size items over all the record's arrays by
  ``ZERO_SIZE_ITEMS_BASE`` plus ``ZERO_SIZE_ITEMS_PER_BYTE`` per byte of the record (what a fetch decodes to
  stays proportional to its bytes, however they are split into records), nesting of a recursive writer by
  ``RECURSIVE_DEPTH_MAX``. A payload past a bound is a
  corrupt record (ValueError) before fastavro sees it. Every other schema costs nothing more: each item of
  its arrays and maps takes at least one byte, so fastavro meets the payload's end first. The compiled path
  (``avro_arrow``) applies the same bounds itself.
- ``encoder`` converts a ``to_pylist()`` value by a function tree built once per (schema, Spark type)
  (names matched by name, ranges, enum symbols, fixed sizes, decimal precision and scale checked, each
  failure a ``RowMismatch`` naming the dotted field path) into the primitive values of a logical-type-free
  copy of the schema, and writes them with fastavro's ``schemaless_writer`` (union branches chosen by the
  converter and given to fastavro in its tuple notation, never guessed).
- ``schema_for`` is spark-avro's ``SchemaConverters.toAvroType``.
"""
from __future__ import annotations

import datetime as _dt
import decimal as _decimal
import io
import json
import re
from collections.abc import Callable
from typing import Any

import avro.name
import avro.schema
import fastavro
from pyspark.sql import types as T

from connector.typed import RowMismatch

SCHEMA_TYPE = "AVRO"

__all__ = ["SCHEMA_TYPE", "spark_type", "decoder", "schema_for", "encoder"]

_CATALYST_TYPE_PROP = "spark.sql.catalyst.type"
_VALID_LOGICAL = {
    ("int", "date"), ("int", "time-millis"), ("long", "time-micros"),
    ("long", "timestamp-millis"), ("long", "timestamp-micros"),
    ("long", "local-timestamp-millis"), ("long", "local-timestamp-micros"),
    ("string", "uuid"),
}
# Logical types whose fastavro conversion is already the value pyarrow takes for the Spark type.
_FASTAVRO_KEEPS = {"decimal", "date", "timestamp-millis", "timestamp-micros",
                   "local-timestamp-millis", "local-timestamp-micros"}
_PROMOTIONS = {("int", "long"), ("int", "float"), ("int", "double"), ("long", "float"), ("long", "double"),
               ("float", "double"), ("string", "bytes"), ("bytes", "string")}
_NAMED = ("record", "error", "enum", "fixed")
_EPOCH_ORDINAL = _dt.date(1970, 1, 1).toordinal()
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_EPOCH_NAIVE = _dt.datetime(1970, 1, 1)
_MICRO = _dt.timedelta(microseconds=1)
_INT_RANGE = {"int": (-2**31, 2**31 - 1), "long": (-2**63, 2**63 - 1)}
# Zero-size array items (null, fixed(0), records of those) one record may declare over all its arrays: BASE plus
# PER_BYTE per byte of the record (Avro writes N of them in the bytes of the number N); keep in sync with
# _avro_arrow.c.
ZERO_SIZE_ITEMS_BASE = 64
ZERO_SIZE_ITEMS_PER_BYTE = 8
# Records of a recursive writer type nested in one another in one record: fastavro recurses once (or more) per
# level on the C stack.
RECURSIVE_DEPTH_MAX = 200


# ---------------------------------------------------------------------------------------------------------
# The type mapping (spark-avro's SchemaConverters.toSqlType)
# ---------------------------------------------------------------------------------------------------------

def _logical(s: avro.schema.Schema) -> str | None:
    """The logical type of ``s`` where Java's Avro accepts it, else None."""
    props = getattr(s, "props", None)
    if not props:
        return None
    name = props.get("logicalType")
    if name is None:
        return None
    if name == "decimal":
        ok = isinstance(s, (avro.schema.BytesDecimalSchema, avro.schema.FixedDecimalSchema))
        return "decimal" if ok else None
    return name if (s.type, name) in _VALID_LOGICAL else None


def _decimal_params(s: avro.schema.Schema) -> tuple[int, int]:
    return int(s.props["precision"]), int(s.props.get("scale", 0) or 0)


_INTERVAL = re.compile(r"^\s*interval\s+(year|month|day|hour|minute|second)(?:\s+to\s+"
                       r"(year|month|day|hour|minute|second))?\s*$", re.IGNORECASE)
_YM_FIELDS = {"year": T.YearMonthIntervalType.YEAR, "month": T.YearMonthIntervalType.MONTH}
_DT_FIELDS = {"day": T.DayTimeIntervalType.DAY, "hour": T.DayTimeIntervalType.HOUR,
              "minute": T.DayTimeIntervalType.MINUTE, "second": T.DayTimeIntervalType.SECOND}


def _catalyst_type(s: avro.schema.Schema, default: T.DataType) -> T.DataType:
    """The ``spark.sql.catalyst.type`` property spark-avro writes for interval types (and reads back)."""
    text = s.props.get(_CATALYST_TYPE_PROP) if getattr(s, "props", None) else None
    if text is None:
        return default
    match = _INTERVAL.match(str(text))
    if match:
        start, end = match.group(1).lower(), (match.group(2) or match.group(1)).lower()
        if s.type == "int" and start in _YM_FIELDS and end in _YM_FIELDS:
            return T.YearMonthIntervalType(_YM_FIELDS[start], _YM_FIELDS[end])
        if s.type == "long" and start in _DT_FIELDS and end in _DT_FIELDS:
            return T.DayTimeIntervalType(_DT_FIELDS[start], _DT_FIELDS[end])
    raise ValueError(f"unsupported {_CATALYST_TYPE_PROP} {text!r} on an Avro {s.type}")


def _union_shape(u: avro.schema.UnionSchema) -> tuple[str, list[avro.schema.Schema], bool]:
    """How Spark maps a union: ("single", [T], nullable) for [null, T] or a one-branch union,
    ("long"|"double", branches, nullable) for int+long / float+double, ("members", branches, nullable)
    for the rest (a struct of member0, member1, ... over the non-null branches)."""
    branches = [b for b in u.schemas if b.type != "null"]
    nullable = len(branches) != len(u.schemas)
    kinds = {b.type for b in branches}
    if len(branches) == 1:
        return "single", branches, nullable
    if len(branches) == 2 and kinds == {"int", "long"}:
        return "long", branches, nullable
    if len(branches) == 2 and kinds == {"float", "double"}:
        return "double", branches, nullable
    return "members", branches, nullable


def _sql(s: avro.schema.Schema, records: frozenset, meta: bool = False) -> tuple[T.DataType, bool]:
    kind = s.type
    if kind == "int":
        return (T.DateType() if _logical(s) == "date" else _catalyst_type(s, T.IntegerType())), False
    if kind == "long":
        lt = _logical(s)
        if lt in ("timestamp-millis", "timestamp-micros"):
            return T.TimestampType(), False
        if lt in ("local-timestamp-millis", "local-timestamp-micros"):
            return T.TimestampNTZType(), False
        return _catalyst_type(s, T.LongType()), False
    if kind == "string":
        return T.StringType(), False
    if kind == "boolean":
        return T.BooleanType(), False
    if kind in ("bytes", "fixed"):
        if _logical(s) == "decimal":
            precision, scale = _decimal_params(s)
            if precision > 38:
                raise ValueError(f"decimal({precision},{scale}) exceeds Spark's maximum precision 38")
            return T.DecimalType(precision, scale), False
        return T.BinaryType(), False
    if kind == "double":
        return T.DoubleType(), False
    if kind == "float":
        return T.FloatType(), False
    if kind == "enum":
        return T.StringType(), False
    if kind == "null":
        return T.NullType(), True
    if kind in ("record", "error"):
        if s.fullname in records:
            raise ValueError(f"Found recursive reference in Avro schema, which can not be processed by Spark: "
                             f"{s.fullname} contains itself")
        inner = records | {s.fullname}
        fields = []
        for f in s.fields:
            dt, nullable = _sql(f.type, inner, meta)
            fields.append(T.StructField(f.name, dt, nullable, _field_metadata(f) if meta else None))
        return T.StructType(fields), False
    if kind == "array":
        dt, nullable = _sql(s.items, records, meta)
        return T.ArrayType(dt, containsNull=nullable), False
    if kind == "map":
        dt, nullable = _sql(s.values, records, meta)
        return T.MapType(T.StringType(), dt, valueContainsNull=nullable), False
    if kind == "union":
        shape, branches, nullable = _union_shape(s)
        if not branches:
            return T.NullType(), True
        if shape == "single":
            dt, inner_nullable = _sql(branches[0], records, meta)
            return dt, nullable or inner_nullable
        if shape == "long":
            return T.LongType(), nullable
        if shape == "double":
            return T.DoubleType(), nullable
        fields = [T.StructField(f"member{i}", _sql(b, records, meta)[0], True)
                  for i, b in enumerate(branches)]
        return T.StructType(fields), nullable
    raise ValueError(f"Unsupported Avro type {kind}")


def spark_type(schema, message_name: str | None = None, *, field_metadata: bool = False) -> T.DataType:
    """The Spark type of a column of records of ``schema`` (spark-avro's ``SchemaConverters.toSqlType``).

    ``field_metadata``: each record field's struct field carries the field's ``default`` (as JSON text),
    ``doc`` and ``aliases`` in its metadata (``METADATA_DEFAULT``, ``METADATA_DOC``, ``METADATA_ALIASES``), as
    Kafka Connect's Avro converter keeps them in a Connect schema. A pass-through query keeps them in its
    column's type, and a sink deriving its schema writes them back (``schema_for(evolvable=True)``)."""
    return _sql(schema.model.schema, frozenset(), field_metadata)[0]


METADATA_DEFAULT = "avro.default"
METADATA_DOC = "avro.doc"
METADATA_ALIASES = "avro.aliases"


def _field_metadata(f: avro.schema.Field) -> dict:
    out: dict = {}
    if f.has_default:
        out[METADATA_DEFAULT] = json.dumps(f.default, separators=(",", ":"))
    if f.doc:
        out[METADATA_DOC] = f.doc
    aliases = f.props.get("aliases")
    if aliases:
        out[METADATA_ALIASES] = [str(a) for a in aliases]
    return out


# ---------------------------------------------------------------------------------------------------------
# Values: Avro JSON defaults and raw (logical-type-free) values to what pyarrow takes
# ---------------------------------------------------------------------------------------------------------

def _decimal_reader(precision: int, scale: int) -> Callable[[bytes], _decimal.Decimal]:
    context = _decimal.Context(prec=max(precision, 1))

    def to_decimal(raw: bytes) -> _decimal.Decimal:
        return context.create_decimal(int.from_bytes(raw, "big", signed=True)).scaleb(-scale, context)
    return to_decimal


def _raw_fix(r: avro.schema.Schema) -> Callable[[Any], Any] | None:
    """The conversion of a raw (logical-type-free) value of ``r``'s Avro type to the value its Spark type
    wants, or None when the raw value is already it."""
    lt = _logical(r)
    if lt == "decimal":
        to_decimal = _decimal_reader(*_decimal_params(r))
        return lambda raw: to_decimal(raw if isinstance(raw, bytes) else bytes(raw))
    if lt == "date":
        return lambda days: _dt.date.fromordinal(days + _EPOCH_ORDINAL)
    if lt in ("timestamp-millis", "local-timestamp-millis"):
        return lambda millis: millis * 1000  # int microseconds, which pyarrow takes for timestamp[us]
    return None


def _default_value(r: avro.schema.Schema, value: Any) -> Any:
    """A reader field's Avro (JSON-encoded) default as the Python value of its Spark type."""
    kind = r.type
    if kind == "union":
        first = r.schemas[0]
        if first.type == "null":
            return None
        shape, branches, _ = _union_shape(r)
        inner = _default_value(first, value)
        if shape != "members":
            return inner
        return {f"member{i}": (inner if b is first else None) for i, b in enumerate(branches)}
    if value is None:
        return None
    if kind in ("bytes", "fixed"):
        raw = value.encode("latin-1") if isinstance(value, str) else bytes(value)
        fix = _raw_fix(r)
        return fix(raw) if fix else raw
    if kind in ("int", "long"):
        fix = _raw_fix(r)
        return fix(int(value)) if fix else int(value)
    if kind in ("float", "double"):
        return float(value)
    if kind in ("record", "error"):
        out = {}
        for f in r.fields:
            if f.name in value:
                out[f.name] = _default_value(f.type, value[f.name])
            else:
                out[f.name] = _default_value(f.type, f.default) if f.has_default else None
        return out
    if kind == "array":
        return [_default_value(r.items, v) for v in value]
    if kind == "map":
        return {k: _default_value(r.values, v) for k, v in value.items()}
    return value  # string, enum, boolean, null


# ---------------------------------------------------------------------------------------------------------
# The decoder: reader and writer copies for fastavro, and the few Python fixes left
# ---------------------------------------------------------------------------------------------------------

def _reader_fields(w: avro.schema.RecordSchema, r: avro.schema.RecordSchema) -> dict[str, str]:
    """Writer field name -> the reader field it resolves into (by name, else by the reader field's aliases; a
    writer field serves one reader field), Avro's record resolution."""
    by_name = {f.name: f for f in w.fields}
    matched: dict[str, str] = {}
    for f in r.fields:
        wf = by_name.get(f.name)
        if wf is None:
            for alias in (f.props.get("aliases") or []):
                if alias in by_name:
                    wf = by_name[alias]
                    break
        if wf is not None and wf.name not in matched.values():
            matched[f.name] = wf.name
    return {wname: rname for rname, wname in matched.items()}


def _aliases(s: Any) -> list[str]:
    props = getattr(s, "props", None) or {}
    aliases = props.get("aliases") or []
    return [a.split(".")[-1] for a in aliases] + list(aliases)


def _unqualified(s: avro.schema.Schema) -> str:
    return s.name.split(".")[-1] if isinstance(s, avro.schema.NamedSchema) else s.type


def _same_kind(w: avro.schema.Schema, r: avro.schema.Schema) -> bool:
    if w.type != r.type:
        return False
    if w.type == "fixed":
        return w.size == r.size
    return True


def _promotable(w: avro.schema.Schema, r: avro.schema.Schema) -> bool:
    return (w.type, r.type) in _PROMOTIONS


def _record_fix(fixes: list, consts: list) -> Callable[[dict], dict]:
    if not consts and len(fixes) == 1:
        (key, fix), = fixes

        def fix_one(d: dict) -> dict:
            v = d[key]
            if v is not None:
                d[key] = fix(v)
            return d
        return fix_one

    def fix_record(d: dict) -> dict:
        for key, fix in fixes:
            v = d[key]
            if v is not None:
                d[key] = fix(v)
        for key, value in consts:
            d[key] = value
        return d
    return fix_record


class _Resolution:
    """One (writer, reader) pair's fastavro schemas and Python fixes (see the module docstring)."""

    def __init__(self) -> None:
        self.count = 0
        self.reader_nodes: dict[str, dict] = {}   # path -> the reader copy of the named type there
        self.member_nodes: dict[tuple[str, int], dict] = {}  # (union path, member) -> the wrapper record
        self.raw_names = avro.name.Names()        # writer parts the reader never reads, kept as they are
        self.wrappers = False

    def _name(self, prefix: str) -> str:
        self.count += 1
        return f"pylog_{prefix}{self.count}"

    # -- the reader copy -------------------------------------------------------------------------------
    def reader_json(self, r: avro.schema.Schema, path: str) -> Any:
        kind = r.type
        if kind in ("record", "error"):
            node = {"type": "record", "name": self._name("r"), "aliases": [], "fields": []}
            self.reader_nodes[path] = node
            for f in r.fields:
                field = {"name": f.name, "type": self.reader_json(f.type, f"{path}.{f.name}")}
                if f.has_default:
                    field["default"] = f.default
                node["fields"].append(field)
            return node
        if kind == "enum":
            node = {"type": "enum", "name": self._name("r"), "aliases": [], "symbols": list(r.symbols)}
            if r.props.get("default") is not None:
                node["default"] = r.props["default"]
            self.reader_nodes[path] = node
            return node
        if kind == "fixed":
            node = {"type": "fixed", "name": self._name("r"), "aliases": [], "size": r.size}
            self.reader_nodes[path] = node
            return node
        if kind == "array":
            return {"type": "array", "items": self.reader_json(r.items, path + "[]")}
        if kind == "map":
            return {"type": "map", "values": self.reader_json(r.values, path + "{}")}
        if kind == "union":
            shape, branches, _ = _union_shape(r)
            if shape != "members":
                return [self.reader_json(b, f"{path}|{i}") for i, b in enumerate(r.schemas)]
            self.wrappers = True
            out: list = []
            member = 0
            for i, b in enumerate(r.schemas):
                if b.type == "null":
                    out.append("null")
                    continue
                fields = []
                for j in range(len(branches)):
                    if j == member:
                        fields.append({"name": f"member{j}", "type": self.reader_json(b, f"{path}|{i}")})
                    else:
                        fields.append({"name": f"member{j}", "type": "null", "default": None})
                node = {"type": "record", "name": self._name("m"), "aliases": [], "fields": fields}
                self.member_nodes[(path, member)] = node
                out.append(node)
                member += 1
            return out
        return kind

    # -- the writer copy -------------------------------------------------------------------------------
    def raw(self, w: avro.schema.Schema) -> Any:
        """A writer part no reader part corresponds to: as written (fastavro skips it, or raises on reading
        it when it is an unresolvable union branch or type)."""
        return w.to_json(self.raw_names)

    def _alias(self, path: str, node_key: Any = None) -> str:
        """A fresh writer name, made an alias of the reader copy at ``path``."""
        name = self._name("w")
        target = self.member_nodes[node_key] if node_key is not None else self.reader_nodes[path]
        target["aliases"].append(name)
        return name

    def pair(self, w: avro.schema.Schema, r: avro.schema.Schema, path: str) -> tuple[Any, Any]:
        """(writer copy, fix or None) for data written as ``w`` read as ``r`` at ``path``."""
        if w.type == "union":
            parts = [self.pair(b, r, path) for b in w.schemas]
            fixes = [fix for _, fix in parts if fix is not None]
            return [wj for wj, _ in parts], (fixes[0] if fixes else None)
        if r.type == "union":
            return self.pair_into_union(w, r, path)
        if not (_same_kind(w, r) or _promotable(w, r)):
            return self.raw(w), None
        kind = r.type
        if kind in ("record", "error"):
            return self.pair_records(w, r, path)
        if kind == "enum":
            return {"type": "enum", "name": self._alias(path), "symbols": list(w.symbols)}, None
        if kind == "array":
            wj, fix = self.pair(w.items, r.items, path + "[]")
            return {"type": "array", "items": wj}, (None if fix is None else _array_fix(fix))
        if kind == "map":
            wj, fix = self.pair(w.values, r.values, path + "{}")
            return {"type": "map", "values": wj}, (None if fix is None else _map_fix(fix))
        # primitives and fixed: logical types
        w_lt, r_lt = _logical(w), _logical(r)
        keep = (w_lt is not None and w_lt == r_lt and w_lt in _FASTAVRO_KEEPS
                and (w_lt != "decimal" or _decimal_params(w) == _decimal_params(r)))
        if w.type == "fixed":
            wj: Any = {"type": "fixed", "name": self._alias(path), "size": w.size}
        else:
            wj = {"type": w.type}
        if keep:
            wj["logicalType"] = w_lt
            if w_lt == "decimal":
                wj["precision"], wj["scale"] = _decimal_params(w)
            return wj, None
        if w.type != "fixed":
            wj = w.type
        return wj, _raw_fix(r)

    def pair_records(self, w, r, path) -> tuple[Any, Any]:
        reader_for = _reader_fields(w, r)
        matched = set(reader_for.values())
        r_fields = {f.name: f for f in r.fields}
        fields = []
        fixes = []
        for wf in w.fields:
            rname = reader_for.get(wf.name)
            if rname is None:
                fields.append({"name": self._name("skip"), "type": self.raw(wf.type)})
                continue
            wj, fix = self.pair(wf.type, r_fields[rname].type, f"{path}.{rname}")
            fields.append({"name": rname, "type": wj})
            if fix is not None:
                fixes.append((rname, fix))
        consts = []
        for f in r.fields:
            if f.name not in matched and f.has_default:
                value = _default_value(f.type, f.default)
                if repr(value) != repr(f.default):
                    consts.append((f.name, value))
        node = {"type": "record", "name": self._alias(path), "fields": fields}
        return node, (_record_fix(fixes, consts) if fixes or consts else None)

    def pair_into_union(self, w, r, path) -> tuple[Any, Any]:
        """A non-union writer type into a reader union: the branch Avro picks (the first of the same type and
        name, then of the same type, then the first it promotes to)."""
        index = None
        for test in (lambda b: _same_kind(w, b) and (not isinstance(b, avro.schema.NamedSchema)
                                                    or _unqualified(w) == _unqualified(b)
                                                    or _unqualified(w) in _aliases(b)),
                     lambda b: _same_kind(w, b),
                     lambda b: _promotable(w, b)):
            index = next((i for i, b in enumerate(r.schemas) if test(b)), None)
            if index is not None:
                break
        if index is None:
            return self.raw(w), None
        branch = r.schemas[index]
        shape, branches, _ = _union_shape(r)
        if shape != "members" or branch.type == "null":
            return self.pair(w, branch, f"{path}|{index}")
        member = sum(1 for b in r.schemas[:index] if b.type != "null")
        wj, fix = self.pair(w, branch, f"{path}|{index}")
        node = {"type": "record", "name": self._alias(path, (path, member)),
                "fields": [{"name": f"member{member}", "type": wj}]}
        return node, (None if fix is None else _record_fix([(f"member{member}", fix)], []))


def _array_fix(fix):
    return lambda items: [fix(v) if v is not None else None for v in items]


def _map_fix(fix):
    return lambda entries: {k: (fix(v) if v is not None else None) for k, v in entries.items()}


def _parse(schema_json: Any) -> Any:
    try:
        return fastavro.parse_schema(schema_json, _ignore_default_error=True)
    except TypeError:  # a fastavro without the argument
        return fastavro.parse_schema(schema_json)


# ---------------------------------------------------------------------------------------------------------
# The guard: block counts and recursion bounded before fastavro reads a payload
# ---------------------------------------------------------------------------------------------------------

def _min_size(s: avro.schema.Schema, stack: tuple = ()) -> int:
    """The fewest bytes a value of the writer type ``s`` encodes in (a recursive reference counts 0: a
    record that contains itself without a union or array in between cannot be encoded at all)."""
    kind = s.type
    if kind == "null":
        return 0
    if kind == "float":
        return 4
    if kind == "double":
        return 8
    if kind == "fixed":
        return s.size
    if kind in ("record", "error"):
        if id(s) in stack:
            return 0
        return sum(_min_size(f.type, stack + (id(s),)) for f in s.fields)
    return 1   # boolean, int, long, string, bytes, enum, array, map (their end marker), union (its index)


def _needs_guard(s: avro.schema.Schema) -> bool:
    """Whether the writer type ``s`` has an array of zero-size items or a recursive record."""
    seen: set[int] = set()

    def walk(t, stack) -> bool:
        kind = t.type
        if kind in ("record", "error"):
            if id(t) in stack:
                return True
            if id(t) in seen:
                return False
            seen.add(id(t))
            return any(walk(f.type, stack | {id(t)}) for f in t.fields)
        if kind == "array":
            return _min_size(t.items) == 0 or walk(t.items, stack)
        if kind == "map":
            return walk(t.values, stack)
        if kind == "union":
            return any(walk(b, stack) for b in t.schemas)
        return False
    return walk(s, frozenset())


def _corrupt(reason: str) -> ValueError:
    return ValueError(f"corrupt Avro record: {reason}")


def _varint(buf, pos: int) -> tuple[int, int]:
    result = shift = 0
    end = len(buf)
    for _ in range(10):
        if pos >= end:
            raise _corrupt("truncated (in a varint)")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
    raise _corrupt("varint longer than 10 bytes")


class _Guard:
    """The walk of one writer schema (see the module docstring): ``check(payload)`` returns None or raises
    ValueError. Each node is a function ``(buf, pos, state) -> pos``; ``state`` is [zero-size items left,
    recursive depth]."""

    def __init__(self, w: avro.schema.Schema) -> None:
        self.records: dict[int, list] = {}
        self.root = self.node(w, frozenset())

    def check(self, payload) -> None:
        state = [ZERO_SIZE_ITEMS_BASE + ZERO_SIZE_ITEMS_PER_BYTE * len(payload), 0]
        self.root(payload, 0, state)

    def node(self, s: avro.schema.Schema, stack: frozenset) -> Callable:
        kind = s.type
        if kind == "null":
            return lambda buf, pos, state: pos
        if kind == "boolean":
            return _fixed_size(1)
        if kind in ("int", "long", "enum"):
            return lambda buf, pos, state: _varint(buf, pos)[1]
        if kind == "float":
            return _fixed_size(4)
        if kind == "double":
            return _fixed_size(8)
        if kind == "fixed":
            return _fixed_size(s.size)
        if kind in ("string", "bytes"):
            return _sized
        if kind in ("record", "error"):
            return self.record(s, stack)
        if kind == "union":
            branches = [self.node(b, stack) for b in s.schemas]

            def union(buf, pos, state):
                i, pos = _varint(buf, pos)
                if not 0 <= i < len(branches):
                    raise _corrupt("union branch index out of range")
                return branches[i](buf, pos, state)
            return union
        if kind == "array":
            return _blocks(self.node(s.items, stack), _min_size(s.items), None)
        if kind == "map":
            return _blocks(self.node(s.values, stack), 1 + _min_size(s.values), _sized)
        raise ValueError(f"Unsupported Avro type {kind}")

    def record(self, s, stack: frozenset) -> Callable:
        holder = self.records.get(id(s))
        if holder is not None:                      # a recursive reference: nesting is bounded
            def nested(buf, pos, state):
                state[1] += 1
                if state[1] > RECURSIVE_DEPTH_MAX:
                    raise _corrupt(f"a recursive type nested deeper than {RECURSIVE_DEPTH_MAX} "
                                   f"(RECURSIVE_DEPTH_MAX)")
                pos = holder[0](buf, pos, state)
                state[1] -= 1
                return pos
            return nested
        holder = self.records[id(s)] = [None]
        fields = [self.node(f.type, stack | {id(s)}) for f in s.fields]

        def record(buf, pos, state):
            for field in fields:
                pos = field(buf, pos, state)
            return pos
        holder[0] = record
        return record


def _sized(buf, pos: int, state) -> int:
    n, pos = _varint(buf, pos)
    if n < 0 or n > len(buf) - pos:
        raise _corrupt("truncated (a length past the end of the record)")
    return pos + n


def _guarded(read: Callable, check: Callable) -> Callable:
    """fastavro's ``schemaless_reader`` reading only what ``check`` passes (the stream is a BytesIO of the
    whole payload, at its start)."""
    def guarded_read(stream, writer_parsed, reader_parsed):
        check(stream.getbuffer())
        return read(stream, writer_parsed, reader_parsed)
    return guarded_read


def _fixed_size(n: int) -> Callable:
    def fixed(buf, pos, state):
        if len(buf) - pos < n:
            raise _corrupt("truncated")
        return pos + n
    return fixed


def _blocks(item: Callable, min_size: int, key: Callable | None) -> Callable:
    """An array's or map's blocks: each count bounded by the bytes left, or by the record's zero-size
    budget for items of no bytes (which have nothing to walk)."""
    def blocks(buf, pos, state):
        while True:
            n, pos = _varint(buf, pos)
            if n == 0:
                return pos
            if n < 0:
                n = -n
                size, pos = _varint(buf, pos)
                if size < 0 or size > len(buf) - pos:
                    raise _corrupt("bad block size")
            if min_size == 0:
                if n > state[0]:
                    raise _corrupt(f"too many zero-size items (more than ZERO_SIZE_ITEMS_BASE + "
                                   f"ZERO_SIZE_ITEMS_PER_BYTE per byte = {ZERO_SIZE_ITEMS_BASE} + "
                                   f"{ZERO_SIZE_ITEMS_PER_BYTE} x {len(buf)} in the record)")
                state[0] -= n
                continue
            if n > (len(buf) - pos) // min_size:
                raise _corrupt("block count larger than the bytes left")
            for _ in range(n):
                if key is not None:
                    pos = key(buf, pos, state)
                pos = item(buf, pos, state)
    return blocks


def decoder(reader, writer=None, *, framed: bool, message_name: str | None = None) -> Callable[[bytes], object]:
    """A function from one record's Avro payload (written with ``writer``, or ``reader`` when None) to the
    Python value of ``spark_type(reader)``, resolved by Avro's rules. Corrupt payloads raise (ValueError for
    those past the guard's bounds, see the module docstring)."""
    r = reader.model.schema
    w = writer.model.schema if writer is not None else r
    _sql(r, frozenset())  # refuses what Spark refuses (recursive records) before any record
    resolution = _Resolution()
    reader_json = resolution.reader_json(r, "")
    writer_json, fix = resolution.pair(w, r, "")
    writer_parsed = _parse(writer_json)
    same = writer is None or writer.canonical == reader.canonical
    reader_parsed = None if (same and not resolution.wrappers) else _parse(reader_json)
    read = fastavro.schemaless_reader
    new_io = io.BytesIO

    if _needs_guard(w):
        read = _guarded(fastavro.schemaless_reader, _Guard(w).check)
    if fix is None:
        def decode(payload: bytes) -> object:
            stream = new_io(payload)
            value = read(stream, writer_parsed, reader_parsed)
            if stream.tell() != len(payload):
                raise ValueError(f"corrupt Avro record: {len(payload) - stream.tell()} bytes left after the "
                                 f"record ({len(payload)} bytes)")
            return value
    else:
        def decode(payload: bytes) -> object:
            stream = new_io(payload)
            value = read(stream, writer_parsed, reader_parsed)
            if stream.tell() != len(payload):
                raise ValueError(f"corrupt Avro record: {len(payload) - stream.tell()} bytes left after the "
                                 f"record ({len(payload)} bytes)")
            return None if value is None else fix(value)
    return decode


# ---------------------------------------------------------------------------------------------------------
# The encoder: to_pylist() values -> fastavro primitives of a logical-type-free schema copy
# ---------------------------------------------------------------------------------------------------------

def _field_path(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class _Encoding:
    """The fastavro schema copy and the converter tree of one (schema, Spark type) pair."""

    def __init__(self) -> None:
        self.count = 0
        self.emitted: set[int] = set()
        self.names: dict[int, str] = {}

    def name_of(self, s: avro.schema.Schema) -> str:
        if id(s) not in self.names:
            self.count += 1
            self.names[id(s)] = f"pylog_e{self.count}"
        return self.names[id(s)]

    def build(self, s: avro.schema.Schema, path: str, stack: tuple = ()) -> tuple[Any, Callable[[Any], Any]]:
        """(schema copy, converter) for values of ``s`` at ``path``; the converter raises RowMismatch."""
        kind = s.type
        if kind == "union":
            return self.union(s, path, stack)
        if kind in ("record", "error", "enum", "fixed"):
            if id(s) in stack:
                raise ValueError(f"recursive Avro type {s.fullname} cannot be written from a Spark struct")
            first = id(s) not in self.emitted
            self.emitted.add(id(s))
            name = self.name_of(s)
            if kind in ("record", "error"):
                fields_json, convert = self.record(s, path, stack + (id(s),))
                schema_json: Any = {"type": "record", "name": name, "fields": fields_json} if first else name
                return schema_json, convert
            if kind == "enum":
                symbols = frozenset(s.symbols)
                schema_json = {"type": "enum", "name": name, "symbols": list(s.symbols)} if first else name

                def enum(value: Any) -> Any:
                    if value is None:
                        raise RowMismatch(path, "null in a non-nullable field")
                    if not isinstance(value, str):
                        raise RowMismatch(path, f"expected an enum symbol (string), got {_describe(value)}")
                    if value not in symbols:
                        raise RowMismatch(path, f"unknown enum symbol {_describe(value)} "
                                                f"(symbols: {', '.join(s.symbols)})")
                    return value
                return schema_json, enum
            schema_json = {"type": "fixed", "name": name, "size": s.size} if first else name
            return schema_json, self.binary(s, path, s.size)
        if kind == "array":
            items_json, item = self.build(s.items, _field_path(path, "element"), stack)

            def array(value: Any) -> Any:
                if value is None:
                    raise RowMismatch(path, "null in a non-nullable field")
                if not isinstance(value, (list, tuple)):
                    raise RowMismatch(path, f"expected an array, got {_describe(value)}")
                return [item(v) for v in value]
            return {"type": "array", "items": items_json}, array
        if kind == "map":
            values_json, item = self.build(s.values, _field_path(path, "value"), stack)

            def map_(value: Any) -> Any:
                if value is None:
                    raise RowMismatch(path, "null in a non-nullable field")
                entries = value.items() if isinstance(value, dict) else value
                out = {}
                try:
                    for k, v in entries:
                        if not isinstance(k, str):
                            raise RowMismatch(_field_path(path, "key"), f"map keys must be strings, got {_describe(k)}")
                        out[k] = item(v)
                except (TypeError, ValueError) as e:
                    if isinstance(e, RowMismatch):
                        raise
                    raise RowMismatch(path, f"expected a map, got {_describe(value)}") from None
                return out
            return {"type": "map", "values": values_json}, map_
        return kind, self.primitive(s, path)

    def record(self, s, path, stack) -> tuple[list, Callable[[Any], Any]]:
        fields_json = []
        converters = []
        for f in s.fields:
            fpath = _field_path(path, f.name)
            fjson, convert = self.build(f.type, fpath, stack)
            fields_json.append({"name": f.name, "type": fjson})
            default = self.raw_default(f.type, f.default) if f.has_default else _MISSING
            converters.append((f.name, fpath, convert, default))

        def record(value: Any) -> Any:
            if value is None:
                raise RowMismatch(path, "null in a non-nullable field")
            if not isinstance(value, dict):
                raise RowMismatch(path, f"expected a struct, got {_describe(value)}")
            out = {}
            for name, fpath, convert, default in converters:
                if name in value:
                    out[name] = convert(value[name])
                elif default is not _MISSING:
                    out[name] = default
                else:
                    raise RowMismatch(fpath, "missing required field (not in the struct, and no default)")
            return out
        return fields_json, record

    def raw_default(self, s: avro.schema.Schema, value: Any) -> Any:
        """A field's Avro JSON default as the primitive value fastavro writes for the schema copy."""
        kind = s.type
        if kind == "union":
            first = s.schemas[0]
            label = self.name_of(first) if isinstance(first, avro.schema.NamedSchema) else first.type
            return (label, self.raw_default(first, value))
        if value is None:
            return None
        if kind in ("bytes", "fixed"):
            return value.encode("latin-1") if isinstance(value, str) else bytes(value)
        if kind in ("float", "double"):
            return float(value)
        if kind in ("record", "error"):
            return {f.name: self.raw_default(f.type, value[f.name] if f.name in value else f.default)
                    for f in s.fields}
        if kind == "array":
            return [self.raw_default(s.items, v) for v in value]
        if kind == "map":
            return {k: self.raw_default(s.values, v) for k, v in value.items()}
        return value

    def union(self, s, path, stack) -> tuple[Any, Callable[[Any], Any]]:
        branches_json = []
        converters = []
        for b in s.schemas:
            bjson, convert = self.build(b, path, stack)
            branches_json.append(bjson)
            # fastavro's tuple notation names a branch by its type, or its (full) name for a named type
            label = bjson if isinstance(bjson, str) else (bjson.get("name") or bjson["type"])
            converters.append((b, label, convert))
        shape, branches, nullable = _union_shape(s)
        null_label = "null" if nullable else None
        non_null = [(b, label, convert) for b, label, convert in converters if b.type != "null"]

        if shape == "members":
            def members(value: Any) -> Any:
                if value is None:
                    if null_label is None:
                        raise RowMismatch(path, "null in a non-nullable field")
                    return (null_label, None)
                if not isinstance(value, dict):
                    raise RowMismatch(path, f"expected a struct of union members, got {_describe(value)}")
                for i, (b, label, convert) in enumerate(non_null):
                    member = value.get(f"member{i}")
                    if member is not None:
                        return (label, convert(member))
                if null_label is not None:
                    return (null_label, None)
                raise RowMismatch(path, "no member of the union is set")
            return branches_json, members

        def choose(value: Any) -> Any:
            if value is None:
                if null_label is None:
                    raise RowMismatch(path, "null in a non-nullable field")
                return (null_label, None)
            error = None
            # int+long / float+double: the wider branch (Spark's type is long / double) first
            ordered = non_null if shape == "single" else sorted(
                non_null, key=lambda c: c[0].type not in ("long", "double"))
            for b, label, convert in ordered:
                try:
                    return (label, convert(value))
                except RowMismatch as e:
                    error = e
            raise error
        return branches_json, choose

    def binary(self, s, path, size: int | None) -> Callable[[Any], Any]:
        if _logical(s) == "decimal":
            return self.decimal(s, path, size)

        def binary(value: Any) -> Any:
            if value is None:
                raise RowMismatch(path, "null in a non-nullable field")
            if not isinstance(value, (bytes, bytearray, memoryview)):
                raise RowMismatch(path, f"expected bytes, got {_describe(value)}")
            value = bytes(value)
            if size is not None and len(value) != size:
                raise RowMismatch(path, f"fixed of size {size} given {len(value)} bytes")
            return value
        return binary

    def decimal(self, s, path, size: int | None) -> Callable[[Any], Any]:
        precision, scale = _decimal_params(s)
        quantum = _decimal.Decimal(1).scaleb(-scale)
        limit = 10 ** precision
        context = _decimal.Context(prec=precision + scale + 40)
        length = size

        def decimal(value: Any) -> Any:
            if value is None:
                raise RowMismatch(path, "null in a non-nullable field")
            if isinstance(value, bool) or not isinstance(value, (_decimal.Decimal, int)):
                raise RowMismatch(path, f"expected a decimal, got {_describe(value)}")
            value = _decimal.Decimal(value)
            if not value.is_finite():
                raise RowMismatch(path, f"{value} is not a finite decimal")
            scaled = value.quantize(quantum, context=context)
            if scaled != value:
                raise RowMismatch(path, f"{value} has more than {scale} digits after the point")
            unscaled = int(scaled.scaleb(scale, context))
            if not -limit < unscaled < limit:
                raise RowMismatch(path, f"{value} does not fit decimal({precision},{scale})")
            n = length if length is not None else max(1, (unscaled.bit_length() + 8) // 8)
            return unscaled.to_bytes(n, "big", signed=True)
        return decimal

    def primitive(self, s, path) -> Callable[[Any], Any]:
        kind = s.type
        lt = _logical(s)
        if kind == "null":
            def null(value: Any) -> Any:
                if value is not None:
                    raise RowMismatch(path, f"expected null, got {_describe(value)}")
                return None
            return null
        if kind == "boolean":
            def boolean(value: Any) -> Any:
                if not isinstance(value, bool):
                    raise RowMismatch(path, "null in a non-nullable field" if value is None
                                      else f"expected a boolean, got {_describe(value)}")
                return value
            return boolean
        if kind in ("int", "long"):
            low, high = _INT_RANGE[kind]
            as_int = _TO_INT.get(lt)

            def integer(value: Any) -> Any:
                if value is None:
                    raise RowMismatch(path, "null in a non-nullable field")
                if as_int is not None and not isinstance(value, int):
                    value = as_int(value, path)
                elif isinstance(value, _dt.timedelta):
                    value = value // _MICRO
                if isinstance(value, bool) or not isinstance(value, int):
                    raise RowMismatch(path, f"expected an integer ({kind}), got {_describe(value)}")
                if not low <= value <= high:
                    raise RowMismatch(path, f"{value} is out of range for an Avro {kind}")
                return value
            return integer
        if kind in ("float", "double"):
            def floating(value: Any) -> Any:
                if value is None:
                    raise RowMismatch(path, "null in a non-nullable field")
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise RowMismatch(path, f"expected a number ({kind}), got {_describe(value)}")
                return float(value)
            return floating
        if kind == "string":
            def string(value: Any) -> Any:
                if value is None:
                    raise RowMismatch(path, "null in a non-nullable field")
                if not isinstance(value, str):
                    raise RowMismatch(path, f"expected a string, got {_describe(value)}")
                return value
            return string
        if kind == "bytes":
            return self.binary(s, path, None)
        raise ValueError(f"Unsupported Avro type {kind}")


_MISSING = object()


def _to_micros(value: Any, path: str, millis: bool, local: bool) -> int:
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            micros = (value - _EPOCH_NAIVE) // _MICRO
        else:
            micros = (value - _EPOCH) // _MICRO
        if millis:
            return micros // 1000
        return micros
    raise RowMismatch(path, f"expected a timestamp, got {_describe(value)}")


def _to_days(value: Any, path: str) -> int:
    if isinstance(value, _dt.date) and not isinstance(value, _dt.datetime):
        return value.toordinal() - _EPOCH_ORDINAL
    raise RowMismatch(path, f"expected a date, got {_describe(value)}")


def _time_of_day(unit: int) -> Callable[[Any, str], int]:
    def convert(value: Any, path: str) -> int:
        if isinstance(value, _dt.time):
            micros = ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond
            return micros // unit
        raise RowMismatch(path, f"expected a time of day, got {_describe(value)}")
    return convert


_TO_INT: dict[str | None, Callable[[Any, str], int]] = {
    "timestamp-millis": lambda v, p: _to_micros(v, p, True, False),
    "timestamp-micros": lambda v, p: _to_micros(v, p, False, False),
    "local-timestamp-millis": lambda v, p: _to_micros(v, p, True, True),
    "local-timestamp-micros": lambda v, p: _to_micros(v, p, False, True),
    "date": _to_days,
    "time-millis": _time_of_day(1000),
    "time-micros": _time_of_day(1),
}


def encoder(schema, data_type: T.DataType, *, framed: bool,
            message_name: str | None = None) -> Callable[[object], bytes]:
    """A function from one row's value (``to_pylist()`` of ``arrow_type(data_type)``) to its Avro payload
    written with ``schema`` (bare; Confluent's header is the caller's). Fields are matched by name; a value
    that does not fit raises ``RowMismatch`` naming the field."""
    encoding = _Encoding()
    schema_json, convert = encoding.build(schema.model.schema, "")
    parsed = _parse(schema_json)
    write = fastavro.schemaless_writer
    new_io = io.BytesIO

    def encode(value: object) -> bytes:
        datum = convert(value)
        out = new_io()
        try:
            write(out, parsed, datum)
        except RowMismatch:
            raise
        except (ValueError, TypeError, OverflowError) as e:  # what the converters did not foresee
            raise RowMismatch("", f"cannot be written as Avro: {e}") from None
        return out.getvalue()
    return encode


# ---------------------------------------------------------------------------------------------------------
# schema_for: spark-avro's SchemaConverters.toAvroType
# ---------------------------------------------------------------------------------------------------------

def _min_bytes_for_precision(precision: int) -> int:
    n = 1
    while 2 ** (8 * n - 1) < 10 ** precision:
        n += 1
    return n


def _to_avro(dt: T.DataType, nullable: bool, record_name: str, namespace: str, evolve: bool = False,
             known: avro.schema.Schema | None = None) -> Any:
    if isinstance(dt, T.BooleanType):
        schema: Any = "boolean"
    elif isinstance(dt, (T.ByteType, T.ShortType, T.IntegerType)):
        schema = "int"
    elif isinstance(dt, T.LongType):
        schema = "long"
    elif isinstance(dt, T.DateType):
        schema = {"type": "int", "logicalType": "date"}
    elif isinstance(dt, T.TimestampNTZType):
        schema = {"type": "long", "logicalType": "local-timestamp-micros"}
    elif isinstance(dt, T.TimestampType):
        schema = {"type": "long", "logicalType": "timestamp-micros"}
    elif isinstance(dt, T.FloatType):
        schema = "float"
    elif isinstance(dt, T.DoubleType):
        schema = "double"
    elif isinstance(dt, T.StringType):
        schema = "string"
    elif isinstance(dt, T.NullType):
        schema = "null"
    elif isinstance(dt, T.DecimalType):
        full = f"{namespace}.{record_name}.fixed" if namespace else f"{record_name}.fixed"
        space, _, name = full.rpartition(".")
        schema = {"type": "fixed", "name": name, "namespace": space,
                  "size": _min_bytes_for_precision(dt.precision),
                  "logicalType": "decimal", "precision": dt.precision, "scale": dt.scale}
    elif isinstance(dt, T.BinaryType):
        schema = "bytes"
    elif isinstance(dt, T.ArrayType):
        items = _branch(known, "array")
        schema = {"type": "array", "items": _to_avro(dt.elementType, dt.containsNull, record_name, namespace, evolve,
                                                     items.items if items is not None else None)}
    elif isinstance(dt, T.MapType):
        if not isinstance(dt.keyType, T.StringType):
            raise ValueError(f"Avro maps have string keys; cannot derive a schema for {dt.simpleString()}")
        values = _branch(known, "map")
        schema = {"type": "map", "values": _to_avro(dt.valueType, dt.valueContainsNull, record_name, namespace,
                                                    evolve, values.values if values is not None else None)}
    elif isinstance(dt, T.StructType):
        child_namespace = f"{namespace}.{record_name}" if namespace else record_name
        schema = {"type": "record", "name": record_name}
        if namespace:
            schema["namespace"] = namespace
        if evolve:
            record = _branch(known, "record")
            schema["fields"] = [_evolvable_field(f, child_namespace, record) for f in dt.fields]
        else:
            schema["fields"] = [{"name": f.name, "type": _to_avro(f.dataType, f.nullable, f.name, child_namespace)}
                                for f in dt.fields]
    elif isinstance(dt, T.YearMonthIntervalType):
        schema = {"type": "int", _CATALYST_TYPE_PROP: dt.simpleString()}
    elif isinstance(dt, T.DayTimeIntervalType):
        schema = {"type": "long", _CATALYST_TYPE_PROP: dt.simpleString()}
    else:
        raise ValueError(f"Unexpected type {dt.simpleString()}: no Avro type for it")
    if nullable and not isinstance(dt, T.NullType):
        return [schema, "null"]
    return schema


def _branch(s: avro.schema.Schema | None, kind: str) -> avro.schema.Schema | None:
    """``s`` when it is a ``kind`` (record, array, map), or its union's only branch of that kind; else None."""
    if s is None:
        return None
    kinds = ("record", "error") if kind == "record" else (kind,)
    if s.type in kinds:
        return s
    if s.type == "union":
        found = [b for b in s.schemas if b.type in kinds]
        return found[0] if len(found) == 1 else None
    return None


def _known_field(record: avro.schema.RecordSchema | None, name: str) -> avro.schema.Field | None:
    if record is None:
        return None
    for f in record.fields:
        if f.name == name or name in (f.props.get("aliases") or ()):
            return f
    return None


def _same_spark_type(s: avro.schema.Schema, dt: T.DataType) -> bool:
    """Whether the Avro type ``s`` reads as ``dt`` (nullability and metadata aside)."""
    try:
        return _sql(s, frozenset())[0].simpleString() == dt.simpleString()
    except ValueError:
        return False


def _default_fits(schema: Any, value: Any) -> bool:
    """Whether the JSON ``value`` is a valid Avro default of the derived ``schema`` (a union: of its first
    branch), so a carried default never makes the schema invalid."""
    if isinstance(schema, list):
        return bool(schema) and _default_fits(schema[0], value)
    kind = schema if isinstance(schema, str) else schema["type"]
    if kind == "null":
        return value is None
    if kind == "boolean":
        return isinstance(value, bool)
    if kind in ("int", "long"):
        return isinstance(value, int) and not isinstance(value, bool)
    if kind in ("float", "double"):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind in ("string", "bytes", "fixed", "enum"):
        return isinstance(value, str)
    if kind == "array":
        return isinstance(value, list) and all(_default_fits(schema["items"], v) for v in value)
    if kind == "map":
        return isinstance(value, dict) and all(_default_fits(schema["values"], v) for v in value.values())
    if kind == "record":
        return isinstance(value, dict) and all(
            _default_fits(f["type"], value[f["name"]]) if f["name"] in value else "default" in f
            for f in schema["fields"])
    return False


def _evolvable_field(f: T.StructField, namespace: str, known: avro.schema.RecordSchema | None) -> dict:
    """One record field of ``schema_for(evolvable=True)``: see its docstring."""
    meta = f.metadata or {}
    previous = _known_field(known, f.name)
    if previous is not None and not _same_spark_type(previous.type, f.dataType):
        previous = None   # the field changed type: what it had no longer applies
    base = _to_avro(f.dataType, False, f.name, namespace, True, previous.type if previous is not None else None)
    default: Any = _MISSING
    if METADATA_DEFAULT in meta:
        try:
            default = json.loads(meta[METADATA_DEFAULT])
        except (TypeError, ValueError):
            default = _MISSING
    elif previous is not None and previous.has_default:
        default = previous.default
    if f.nullable and not isinstance(f.dataType, T.NullType):
        if default is _MISSING or default is None:
            field_type, default = ["null", base], None    # Confluent's AvroData: optional, default null
        else:
            field_type = [base, "null"]
    else:
        field_type = base
    out: dict = {"name": f.name, "type": field_type}
    doc = meta.get(METADATA_DOC) or (previous.doc if previous is not None else None)
    if doc:
        out["doc"] = str(doc)
    if default is not _MISSING and _default_fits(field_type, default):
        out["default"] = default
    aliases = meta.get(METADATA_ALIASES) or (previous.props.get("aliases") if previous is not None else None)
    if aliases:
        out["aliases"] = [str(a) for a in aliases]
    return out


def schema_for(data_type: T.StructType, *, name: str, namespace: str, evolvable: bool = False,
               known=None) -> tuple[str, str | None]:
    """The Avro schema spark-avro's ``to_avro`` derives for ``data_type`` (a record ``name`` in
    ``namespace``; nullable fields as ``[T, "null"]`` unions), as JSON text, and None (no message name).

    ``evolvable`` (the schema is registered, as ``auto.register.schemas`` does): a schema that its subject's
    compatibility check accepts when the column gained fields, as Confluent's AvroData derives one from a
    Connect schema. Each field carries the ``default``, ``doc`` and ``aliases`` its struct field's metadata
    holds (``spark_type(field_metadata=True)``: a column read by a pylog Avro source), else those of the field
    of the same name (or alias) and Spark type in ``known`` (a ParsedSchema: the subject's latest version).
    A nullable field is ``["null", T]`` with default null unless a non-null default is known (then
    ``[T, "null"]``)."""
    known_schema = known.model.schema if known is not None else None
    schema = _to_avro(data_type, False, name, namespace, evolvable, known_schema)
    return json.dumps(schema, separators=(",", ":")), None


# ---------------------------------------------------------------------------------------------------------
# The compiled column decoder (connector.typed.avro_arrow and its C extension)
# ---------------------------------------------------------------------------------------------------------

def column_decoder(reader, writer=None, *, framed: bool) -> Callable[..., Any] | None:
    """A function from a list of payloads (bytes-like, none null; ``framed``: each starts with Confluent's
    5-byte header, which the caller has checked — or passes as ``header=`` for the extension to check that
    every payload starts with it) written with ``writer`` (``reader`` when None) to the Arrow array
    ``pa.array([decoder(p) for p in payloads], type=arrow_type(spark_type(reader)))`` would give, decoded by
    the C extension; it raises ValueError naming the first bad record (then decode record by record to
    attribute it). None when the extension is not built or the schemas use something it does not handle."""
    import sys
    from connector.typed import avro_arrow
    return avro_arrow.column_decoder(reader, writer, framed=framed, rules=sys.modules[__name__])
