"""Avro payloads decoded straight into one Arrow array by the C extension ``_avro_arrow``.

Theory of operation: ``compile(reader, writer)`` walks the writer schema against the reader schema once, by
the same resolution rules as ``avro_format``'s decoder (``_Resolution.pair``: fields by name or reader alias,
union branches, promotions, logical types kept only where fastavro converts them), and emits a *program*:

- the output *columns*, one per node of the Arrow type of ``spark_type(reader)`` (struct, list, map and its
  entries struct, and the leaves), each (kind, byte width, child columns);
- a tree of *ops* (nested 7-tuples ``(op, column, a, b, c, kids, blob)``) following the writer's encoding:
  each op consumes the writer's bytes of one value and appends to its column (-1: skip the value).

The extension runs the program over each payload and returns the buffers of every column, which ``_assemble``
wraps with ``pyarrow.Array.from_buffers`` bottom-up. The result equals ``pa.array([decoder(p) ...],
type=arrow_type(spark_type(reader)))`` — the same values, nulls and type; where the per-record path would
refuse a record (out-of-range dates, decimals that do not fit their precision, invalid UTF-8, unknown enum
symbols, bytes left over) the extension raises ValueError, and the caller falls back to that path. A
schema pair with a construct this module does not handle (complex defaults, interval types, recursive writer
types, ...) compiles to None: the per-record path is used, never a different answer.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

try:
    from connector.typed import _avro_arrow as _ext
except ImportError:  # built without a compiler: the per-record path only
    _ext = None

__all__ = ["available", "compile", "Program"]

# column kinds and op codes: keep in sync with _avro_arrow.c
C_NULL, C_BOOL, C_FIXED, C_BIN, C_LIST, C_STRUCT = range(6)
(OP_ERR, OP_NULL, OP_BOOL, OP_LONG, OP_FLOAT, OP_DOUBLE, OP_BYTES, OP_FIXED, OP_DECB, OP_DECF, OP_ENUM,
 OP_ARRAY, OP_MAP, OP_RECORD, OP_UNION, OP_MEMBER, OP_CONST) = range(17)
T_SKIP, T_I32, T_I64, T_F32, T_F64 = range(5)
R_NONE, R_DATE, R_DT_MILLIS, R_DT_MICROS = range(4)


def available() -> bool:
    return _ext is not None


class Unsupported(Exception):
    """A construct the compiled path does not handle: the per-record path reads it."""


def _op(op: int, col: int = -1, a: int = 0, b: int = 0, c: int = 0, kids: tuple = (), blob: Any = None) -> tuple:
    return (op, col, a, b, c, tuple(kids), blob)


def _err(message: str) -> tuple:
    return _op(OP_ERR, blob=message.encode())


class _Compiler:
    def __init__(self, rules) -> None:
        import pyarrow as pa
        self.pa = pa
        self.rules = rules   # the avro_format module: its resolution helpers
        self.columns: list[list] = []   # [kind, width, kids] (kids filled after allocation)
        self.types: list = []

    # -- columns -----------------------------------------------------------------------------------
    def alloc(self, atype) -> int:
        pa = self.pa
        t = pa.types
        index = len(self.columns)
        self.columns.append(None)
        self.types.append(atype)
        kids: list[int] = []
        if t.is_null(atype):
            kind, width = C_NULL, 0
        elif t.is_boolean(atype):
            kind, width = C_BOOL, 0
        elif atype in (pa.int32(), pa.date32(), pa.float32()):
            kind, width = C_FIXED, 4
        elif atype in (pa.int64(), pa.float64()):
            kind, width = C_FIXED, 8
        elif t.is_timestamp(atype) and atype.unit == "us" and atype.tz in (None, "UTC"):
            kind, width = C_FIXED, 8
        elif t.is_decimal128(atype):
            kind, width = C_FIXED, 16
        elif atype in (pa.string(), pa.binary()):
            kind, width = C_BIN, 0
        elif t.is_struct(atype):
            kind, width = C_STRUCT, 0
            kids = [self.alloc(atype.field(i).type) for i in range(atype.num_fields)]
        elif t.is_map(atype):
            kind, width = C_LIST, 0
            entries = len(self.columns)
            self.columns.append(None)
            self.types.append(None)
            key = self.alloc(atype.key_type)
            value = self.alloc(atype.item_type)
            if self.columns[key][0] != C_BIN:
                raise Unsupported("map keys that are not strings")
            self.columns[entries] = [C_STRUCT, 0, (key, value)]
            kids = [entries]
        elif t.is_list(atype):
            kind, width = C_LIST, 0
            kids = [self.alloc(atype.value_type)]
        else:
            raise Unsupported(f"Arrow type {atype}")
        self.columns[index] = [kind, width, tuple(kids)]
        return index

    def kind(self, col: int) -> int:
        return self.columns[col][0]

    def kids(self, col: int) -> tuple:
        return self.columns[col][2]

    # -- minimum encoded sizes (bounds for block counts) -------------------------------------------
    def min_size(self, w, stack=()) -> int:
        kind = w.type
        if kind == "null":
            return 0
        if kind in ("boolean", "int", "long", "string", "bytes", "enum", "array", "map", "union"):
            return 1
        if kind == "float":
            return 4
        if kind == "double":
            return 8
        if kind == "fixed":
            return w.size
        if kind in ("record", "error"):
            if id(w) in stack:
                return 0
            return sum(self.min_size(f.type, stack + (id(w),)) for f in w.fields)
        raise Unsupported(f"Avro type {kind}")

    # -- skipping writer values the reader does not read --------------------------------------------
    def skip(self, w, stack=()) -> tuple:
        kind = w.type
        if kind == "null":
            return _op(OP_NULL)
        if kind == "boolean":
            return _op(OP_BOOL)
        if kind in ("int", "long"):
            return _op(OP_LONG, a=T_SKIP)
        if kind == "float":
            return _op(OP_FLOAT, a=T_SKIP)
        if kind == "double":
            return _op(OP_DOUBLE, a=T_SKIP)
        if kind in ("string", "bytes"):
            return _op(OP_BYTES)
        if kind == "fixed":
            return _op(OP_FIXED, a=w.size)
        if kind == "enum":
            return _op(OP_ENUM)
        if kind == "array":
            return _op(OP_ARRAY, b=self.min_size(w.items), kids=(self.skip(w.items, stack),))
        if kind == "map":
            return _op(OP_MAP, c=1 + self.min_size(w.values), kids=(self.skip(w.values, stack),))
        if kind in ("record", "error"):
            if id(w) in stack:
                raise Unsupported("a recursive writer type")
            inner = stack + (id(w),)
            return _op(OP_RECORD, kids=[self.skip(f.type, inner) for f in w.fields])
        if kind == "union":
            return _op(OP_UNION, kids=[self.skip(b, stack) for b in w.schemas])
        raise Unsupported(f"Avro type {kind}")

    # -- the writer value read as the reader's, into column col -------------------------------------
    def pair(self, w, r, col: int) -> tuple:
        A = self.rules
        if w.type == "union":
            return _op(OP_UNION, kids=[self.pair(b, r, col) for b in w.schemas])
        if r.type == "union":
            return self.into_union(w, r, col)
        if not (A._same_kind(w, r) or A._promotable(w, r)):
            return _err(f"a writer {w.type} cannot be read as a {r.type}")
        kind = r.type
        if kind in ("record", "error"):
            return self.records(w, r, col)
        if kind == "enum":
            return self.enum(w, r, col)
        if kind == "array":
            if self.kind(col) != C_LIST:
                raise Unsupported("array column")
            item = self.pair(w.items, r.items, self.kids(col)[0])
            return _op(OP_ARRAY, col, b=self.min_size(w.items), kids=(item,))
        if kind == "map":
            if self.kind(col) != C_LIST:
                raise Unsupported("map column")
            entries = self.kids(col)[0]
            key, value = self.kids(entries)
            return _op(OP_MAP, col, a=key, b=entries, c=1 + self.min_size(w.values),
                       kids=(self.pair(w.values, r.values, value),))
        return self.primitive(w, r, col)

    def into_union(self, w, r, col: int) -> tuple:
        """Mirrors ``_Resolution.pair_into_union``."""
        A = self.rules
        import avro.schema
        index = None
        for test in (lambda b: A._same_kind(w, b) and (not isinstance(b, avro.schema.NamedSchema)
                                                       or A._unqualified(w) == A._unqualified(b)
                                                       or A._unqualified(w) in A._aliases(b)),
                     lambda b: A._same_kind(w, b),
                     lambda b: A._promotable(w, b)):
            index = next((i for i, b in enumerate(r.schemas) if test(b)), None)
            if index is not None:
                break
        if index is None:
            return _err(f"a writer {w.type} matches no branch of the reader's union")
        branch = r.schemas[index]
        shape, branches, _ = A._union_shape(r)
        if shape in ("long", "double") and any(A._logical(b) or (getattr(b, "props", None) or {}).get(
                A._CATALYST_TYPE_PROP) is not None for b in branches):
            raise Unsupported("a widened union with logical types or properties")
        if shape != "members" or branch.type == "null":
            return self.pair(w, branch, col)
        if self.kind(col) != C_STRUCT:
            raise Unsupported("member union column")
        member = sum(1 for b in r.schemas[:index] if b.type != "null")
        return _op(OP_MEMBER, col, a=member, kids=(self.pair(w, branch, self.kids(col)[member]),))

    def records(self, w, r, col: int) -> tuple:
        """Mirrors ``_Resolution.pair_records``."""
        A = self.rules
        if self.kind(col) != C_STRUCT or len(self.kids(col)) != len(r.fields):
            raise Unsupported("record column")
        reader_for = A._reader_fields(w, r)
        matched = set(reader_for.values())
        r_index = {f.name: i for i, f in enumerate(r.fields)}
        kids = []
        for wf in w.fields:
            rname = reader_for.get(wf.name)
            if rname is None:
                kids.append(self.skip(wf.type))
                continue
            i = r_index[rname]
            kids.append(self.pair(wf.type, r.fields[i].type, self.kids(col)[i]))
        for i, f in enumerate(r.fields):
            if f.name in matched:
                continue
            if not f.has_default:
                raise Unsupported(f"reader field {f.name} has no default and the writer lacks it")
            kids.append(self.const(A._default_value(f.type, f.default), self.kids(col)[i]))
        return _op(OP_RECORD, col, kids=kids)

    def const(self, value: Any, col: int) -> tuple:
        """A reader default (as ``avro_format._default_value`` gives it) appended to every record."""
        pa = self.pa
        if value is None:
            return _op(OP_NULL, col)
        kind = self.kind(col)
        if kind not in (C_BOOL, C_FIXED, C_BIN):
            raise Unsupported("a complex default")
        try:
            array = pa.array([value], type=self.types[col])
        except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
            raise Unsupported(f"a default Arrow refuses: {exc}") from None
        if array.null_count:
            return _op(OP_NULL, col)
        if kind == C_BOOL:
            return _op(OP_CONST, col, a=int(array[0].as_py()))
        if kind == C_BIN:
            raw = array.cast(pa.binary())[0].as_py() if pa.types.is_string(array.type) else array[0].as_py()
            return _op(OP_CONST, col, blob=bytes(raw))
        width = self.columns[col][1]
        data = array.buffers()[1]
        return _op(OP_CONST, col, blob=data.to_pybytes()[array.offset * width:(array.offset + 1) * width])

    def enum(self, w, r, col: int) -> tuple:
        if self.kind(col) != C_BIN:
            raise Unsupported("enum column")
        symbols = set(r.symbols)
        default = r.props.get("default")
        table = []
        for symbol in w.symbols:
            if symbol in symbols:
                table.append(symbol.encode())
            elif default:
                table.append(str(default).encode())
            else:
                table.append(None)
        return _op(OP_ENUM, col, blob=tuple(table))

    def primitive(self, w, r, col: int) -> tuple:
        """Mirrors ``_Resolution.pair`` for primitives and fixed, and ``_raw_fix`` / fastavro's conversions."""
        A = self.rules
        pa = self.pa
        atype = self.types[col]
        if getattr(r, "props", None) and r.props.get(A._CATALYST_TYPE_PROP) is not None:
            raise Unsupported("interval types")
        w_lt, r_lt = A._logical(w), A._logical(r)
        keep = (w_lt is not None and w_lt == r_lt and w_lt in A._FASTAVRO_KEEPS
                and (w_lt != "decimal" or A._decimal_params(w) == A._decimal_params(r)))
        rk, wk = r.type, w.type
        if rk == "null":
            return _op(OP_NULL, col)
        if r_lt == "decimal":
            if not pa.types.is_decimal128(atype):
                raise Unsupported("decimal column")
            precision, _ = A._decimal_params(r)
            if wk == "bytes":
                return _op(OP_DECB, col, a=precision)
            if wk == "fixed":
                return _op(OP_DECF, col, a=w.size, b=precision)
            return _err("a writer string cannot be read as a decimal")
        if rk in ("int", "long", "float", "double"):
            if wk in ("int", "long"):
                target = {pa.int32(): T_I32, pa.date32(): T_I32, pa.int64(): T_I64, pa.float32(): T_F32,
                          pa.float64(): T_F64}.get(atype)
                if target is None and pa.types.is_timestamp(atype):
                    target = T_I64
                if target is None:
                    raise Unsupported(f"{wk} into {atype}")
                mul, check = 1, R_NONE
                if r_lt == "date":
                    check = R_DATE
                elif r_lt in ("timestamp-millis", "local-timestamp-millis"):
                    mul = 1000
                    check = R_DT_MILLIS if keep else R_NONE
                elif r_lt in ("timestamp-micros", "local-timestamp-micros"):
                    check = R_DT_MICROS if keep else R_NONE
                if (r_lt in ("date", "timestamp-millis", "local-timestamp-millis", "timestamp-micros",
                             "local-timestamp-micros")) != (pa.types.is_timestamp(atype) or atype == pa.date32()):
                    raise Unsupported("logical type and column disagree")
                return _op(OP_LONG, col, a=target, b=mul, c=check)
            if r_lt is not None and r_lt not in ("time-millis", "time-micros"):
                raise Unsupported(f"{wk} into {r_lt}")
            if wk == "float":
                target = {pa.float32(): T_F32, pa.float64(): T_F64}.get(atype)
                if target is None:
                    raise Unsupported(f"float into {atype}")
                return _op(OP_FLOAT, col, a=target)
            if wk == "double" and atype == pa.float64():
                return _op(OP_DOUBLE, col, a=T_F64)
            raise Unsupported(f"{wk} into {atype}")
        if rk == "boolean":
            if atype != pa.bool_():
                raise Unsupported("boolean column")
            return _op(OP_BOOL, col)
        if rk in ("string", "bytes", "fixed"):
            if self.kind(col) != C_BIN:
                raise Unsupported(f"{rk} column")
            if wk == "fixed":
                return _op(OP_FIXED, col, a=w.size)
            # a writer string is decoded (strict UTF-8) whatever the reader does with it; bytes read as a
            # string are decoded too
            return _op(OP_BYTES, col, a=int(wk == "string" or rk == "string"))
        raise Unsupported(f"Avro type {rk}")


def _assemble(pa, columns, types, buffers, col: int):
    kind, width, kids = columns[col]
    length, nulls, validity, offsets, data = buffers[col]
    atype = types[col]
    vbuf = pa.py_buffer(validity) if validity is not None else None
    if kind == C_NULL:
        return pa.nulls(length, type=pa.null())
    if kind in (C_BOOL, C_FIXED):
        return pa.Array.from_buffers(atype, length, [vbuf, pa.py_buffer(data)], null_count=nulls)
    if kind == C_BIN:
        return pa.Array.from_buffers(atype, length, [vbuf, pa.py_buffer(offsets), pa.py_buffer(data)],
                                     null_count=nulls)
    if kind == C_LIST:
        if pa.types.is_map(atype):
            entries_col = kids[0]
            key_col, value_col = columns[entries_col][2]
            e_len = buffers[entries_col][0]
            entries_type = pa.struct([pa.field("key", atype.key_type, nullable=False), atype.item_field])
            entries = pa.StructArray.from_buffers(entries_type, e_len, [None], null_count=0,
                                                  children=[_assemble(pa, columns, types, buffers, key_col),
                                                            _assemble(pa, columns, types, buffers, value_col)])
            return pa.Array.from_buffers(atype, length, [vbuf, pa.py_buffer(offsets)], null_count=nulls,
                                         children=[entries])
        return pa.Array.from_buffers(atype, length, [vbuf, pa.py_buffer(offsets)], null_count=nulls,
                                     children=[_assemble(pa, columns, types, buffers, kids[0])])
    children = [_assemble(pa, columns, types, buffers, k) for k in kids]
    return pa.Array.from_buffers(atype, length, [vbuf], null_count=nulls, children=children)


class Program:
    """A compiled (reader, writer) pair: ``decode(payloads, offset)`` -> one Arrow array."""

    def __init__(self, columns, types, root) -> None:
        import pyarrow as pa
        self._pa = pa
        self._columns = columns
        self._types = types
        self._program = _ext.compile([tuple(c) for c in columns], root)
        self.type = types[0]

    def decode(self, payloads: list, offset: int = 0, header: bytes | None = None):
        buffers = _ext.decode(self._program, payloads, offset, header)
        return _assemble(self._pa, self._columns, self._types, buffers, 0)


def compile(reader, writer, rules) -> Program | None:
    """The program for payloads written with ``writer`` (``reader`` when None) read as ``reader`` (parsed
    schemas of the registry), or None when the extension is missing or the pair uses something unsupported.
    ``rules`` is the ``avro_format`` module, whose type mapping and resolution helpers the program follows
    (given, not imported: avro_format imports this module)."""
    if _ext is None:
        return None
    from connector.typed import arrow_type
    A = rules
    try:
        r = reader.model.schema
        w = writer.model.schema if writer is not None else r
        atype = arrow_type(A.spark_type(reader))
        compiler = _Compiler(rules)
        root_col = compiler.alloc(atype)
        root = compiler.pair(w, r, root_col)
        return Program(compiler.columns, compiler.types, root)
    except Exception:  # noqa: BLE001 - Unsupported, or what spark_type / arrow_type refuse (the per-record
        return None     # path raises it with its own message): never a different answer, only a slower one


def column_decoder(reader, writer, *, framed: bool, rules) -> Callable[..., Any] | None:
    """See ``avro_format.column_decoder``."""
    program = compile(reader, writer, rules)
    if program is None:
        return None
    offset = 5 if framed else 0
    decode = program.decode

    def column(payloads: list, header: bytes | None = None):
        return decode(payloads, offset, header)
    return column
