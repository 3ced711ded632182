"""A column of record payloads <-> one Arrow array of a typed column, with Confluent's framing and ``mode``.

Theory of operation: ``ColumnDecoder`` (executor side, one per task and side)
turns the raw keys or values of one fetch into the typed column, its schema id
column and — in PERMISSIVE mode — the ``_corrupt_<side>`` column. Framed
payloads start with magic byte 0 and a 4-byte big-endian schema id; the
decoder for each id (writer schema from the registry, resolved into the reader
schema by the format module) is built once and kept. A bad record — not
framed, an id the registry does not know, bytes the writer schema cannot
read — fails the task in FAILFAST mode with an error naming topic, partition,
offset and schema id, or becomes a null struct with its raw bytes in
``_corrupt_<side>`` in PERMISSIVE mode, as Spark's ``from_avro`` does. A
registry that cannot be reached is never a bad record: it fails the task.

``ColumnEncoder`` (sink tasks) does the reverse with the one writer schema the
driver resolved: every non-null value becomes magic byte, id and payload (or the
bare payload without a registry); a value that does not fit raises
``TypedRowError`` naming the field, which fails the task before its
transaction can commit.
"""
from __future__ import annotations

import struct

from connector.typed import RowMismatch, arrow_type
from connector.typed.spec import ResolvedColumn

_HEADER = struct.Struct(">bI")
_MAGIC = 0


def _not_uniform():
    raise _BadRecord("another schema id")


class MalformedRecordError(RuntimeError):
    """A record cannot be decoded (FAILFAST): names topic, partition, offset and schema id."""


class TypedRowError(ValueError):
    """A sink row's typed column does not fit its schema: names the column and the field."""


class _BadRecord(Exception):
    def __init__(self, reason: str, schema_id: int | None = None) -> None:
        super().__init__(reason)
        self.schema_id = schema_id


class ColumnDecoder:
    """Decodes one side (value or key) of fetched records; see the module docstring."""

    def __init__(self, resolved: ResolvedColumn, permissive: bool) -> None:
        from connector.typed import format_module
        self.resolved = resolved
        self.side = resolved.spec.side
        self.permissive = permissive
        self._module = format_module(resolved.spec.format)
        self._reader = resolved.parsed()
        self._arrow_type = arrow_type(resolved.spark_type())
        self._decoders: dict[int, object] = {}
        self._bulk: dict[int, object] = {}   # schema id -> a compiled whole-column decoder, when the format has one
        self._bad_ids: dict[int, str] = {}
        self._bare = self._bare_bulk = None
        if not resolved.framed:
            self._bare = self._module.decoder(self._reader, None, framed=False,
                                              message_name=resolved.spec.message_name)
            self._bare_bulk = self._column_decoder(None, framed=False)

    def _column_decoder(self, writer, *, framed: bool):
        """The format's compiled decoder of a whole column (payloads -> one Arrow array), or None."""
        build = getattr(self._module, "column_decoder", None)
        if build is None:
            return None
        try:
            return build(self._reader, writer, framed=framed)
        except Exception:  # noqa: BLE001 - no compiled decoder for this pair: the per-record one serves
            return None

    def _decoder_for(self, schema_id: int):
        found = self._decoders.get(schema_id)
        if found is not None:
            return found
        if schema_id in self._bad_ids:
            raise _BadRecord(self._bad_ids[schema_id], schema_id)
        from connector.typed.registry_client import RegistryClient, RegistryError
        client = RegistryClient.shared(self.resolved.registry)
        try:
            registered = client.schema(schema_id)
            if registered.schema_type != self.resolved.schema_type:
                raise _BadRecord(f"schema id {schema_id} is a {registered.schema_type} schema, not "
                                 f"{self.resolved.schema_type}", schema_id)
            writer = client.parsed(registered)
        except RegistryError as exc:
            if exc.status == 404:
                self._bad_ids[schema_id] = f"the registry has no schema with id {schema_id} ({exc})"
                raise _BadRecord(self._bad_ids[schema_id], schema_id) from None
            raise
        try:
            found = self._module.decoder(self._reader, writer, framed=True,
                                         message_name=self.resolved.spec.message_name)
        except Exception as exc:  # noqa: BLE001 - a writer schema the reader cannot resolve: bad records
            self._bad_ids[schema_id] = f"schema id {schema_id} cannot be read with the reader schema: {exc}"
            raise _BadRecord(self._bad_ids[schema_id], schema_id) from None
        self._bulk[schema_id] = self._column_decoder(writer, framed=True)
        self._decoders[schema_id] = found
        return found

    def decode(self, payloads: list, where) -> dict:
        """Arrays for ``payloads`` (bytes or None): {side: typed, <side>SchemaId: int32, _corrupt_<side>: binary}
        (the last in PERMISSIVE mode only). ``where(i)`` describes record i (topic, partition, offset)."""
        import pyarrow as pa
        fast = self._decode_uniform(payloads)
        if fast is not None:
            return fast
        values, ids = [], []
        corrupt = [] if self.permissive else None
        framed = self.resolved.framed
        decoders = self._decoders
        for i, raw in enumerate(payloads):
            if raw is None:
                values.append(None)
                ids.append(None)
                if corrupt is not None:
                    corrupt.append(None)
                continue
            schema_id = None
            try:
                if framed:
                    if len(raw) < 5 or raw[0] != _MAGIC:
                        raise _BadRecord("not in Confluent's wire format (no magic byte 0 and 4-byte schema id)")
                    schema_id = _HEADER.unpack_from(raw)[1]
                    decode = decoders.get(schema_id) or self._decoder_for(schema_id)
                    values.append(decode(raw[5:]))
                else:
                    values.append(self._bare(raw))
                ids.append(schema_id)
                if corrupt is not None:
                    corrupt.append(None)
            except Exception as exc:  # noqa: BLE001 - any decoder failure is a malformed record
                from connector.typed.registry_client import RegistryError
                if isinstance(exc, RegistryError):
                    raise
                self._bad(exc, raw, schema_id, i, where, values, ids, corrupt)
        try:
            typed = pa.array(values, type=self._arrow_type)
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            typed = self._array_one_by_one(values, payloads, ids, corrupt, where)
        arrays = {self.side: typed}
        if framed:
            arrays[f"{self.side}SchemaId"] = pa.array(ids, type=pa.int32())
        if corrupt is not None:
            arrays[f"_corrupt_{self.side}"] = pa.array(corrupt, type=pa.binary())
        return arrays

    def _decode_uniform(self, payloads: list) -> dict | None:
        """The common case in one comprehension: every payload framed with the same, known schema id (or, bare,
        every payload present) and every one decodable. None sends the fetch through the per-record path,
        which handles nulls, several ids and bad records."""
        import pyarrow as pa
        if not payloads:
            return None
        try:
            if self.resolved.framed:
                first = payloads[0]
                if first is None or len(first) < 5 or first[0] != _MAGIC:
                    return None
                header = bytes(first[:5])
                schema_id = _HEADER.unpack_from(header)[1]
                decode = self._decoders.get(schema_id)
                if decode is None:
                    return None
                bulk = self._bulk.get(schema_id)
                if bulk is not None:   # checks every payload's header itself; any surprise raises
                    typed = bulk(payloads, header=header)
                else:
                    typed = pa.array([decode(raw[5:]) if raw[:5] == header else _not_uniform() for raw in payloads],
                                     type=self._arrow_type)
            elif self._bare_bulk is not None and None not in payloads:
                typed = self._bare_bulk(payloads)
            else:
                decode = self._bare
                typed = pa.array([decode(raw) for raw in payloads], type=self._arrow_type)
        except Exception:  # noqa: BLE001 - a null, another id or a bad record: the per-record path says which
            return None
        n = len(payloads)
        arrays = {self.side: typed}
        if self.resolved.framed:
            arrays[f"{self.side}SchemaId"] = pa.repeat(pa.scalar(schema_id, type=pa.int32()), n)
        if self.permissive:
            arrays[f"_corrupt_{self.side}"] = pa.nulls(n, pa.binary())
        return arrays

    def _bad(self, exc, raw, schema_id, i, where, values, ids, corrupt) -> None:
        schema_id = getattr(exc, "schema_id", None) or schema_id
        if corrupt is None:
            said = f" with schema id {schema_id}" if schema_id is not None else ""
            raise MalformedRecordError(
                f"Malformed {self.side} at {where(i)}{said}: {exc}. Set the option mode=PERMISSIVE to read "
                f"malformed records as null with their bytes in _corrupt_{self.side}") from None
        values.append(None)
        ids.append(schema_id)
        corrupt.append(bytes(raw))

    def _array_one_by_one(self, values, payloads, ids, corrupt, where):
        """A decoded value Arrow refused (out of range for its type): find it, and treat it as a bad record."""
        import pyarrow as pa
        for i, value in enumerate(values):
            try:
                pa.array([value], type=self._arrow_type)
            except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
                if corrupt is None:
                    said = f" with schema id {ids[i]}" if ids[i] is not None else ""
                    raise MalformedRecordError(f"Malformed {self.side} at {where(i)}{said}: a value does not fit "
                                               f"its Spark type: {exc}") from None
                values[i] = None
                corrupt[i] = bytes(payloads[i])
        return pa.array(values, type=self._arrow_type)


class StringDecoder:
    """``<side>Format=string``: UTF-8 text; invalid UTF-8 is a malformed record."""

    def __init__(self, side: str, permissive: bool) -> None:
        self.side = side
        self.permissive = permissive

    def decode(self, payloads: list, where) -> dict:
        import pyarrow as pa
        binary = pa.array(payloads, type=pa.binary())
        try:
            return {self.side: binary.cast(pa.string())} | ({f"_corrupt_{self.side}": pa.nulls(len(payloads),
                                                                                              pa.binary())}
                                                           if self.permissive else {})
        except pa.ArrowInvalid:
            pass
        texts, corrupt = [], []
        for i, raw in enumerate(payloads):
            try:
                texts.append(None if raw is None else bytes(raw).decode("utf-8"))
                corrupt.append(None)
            except UnicodeDecodeError as exc:
                if not self.permissive:
                    raise MalformedRecordError(f"Malformed {self.side} at {where(i)}: not UTF-8 ({exc}). Set the "
                                               f"option mode=PERMISSIVE to read it as null with its bytes in "
                                               f"_corrupt_{self.side}") from None
                texts.append(None)
                corrupt.append(bytes(raw))
        arrays = {self.side: pa.array(texts, type=pa.string())}
        if self.permissive:
            arrays[f"_corrupt_{self.side}"] = pa.array(corrupt, type=pa.binary())
        return arrays


class ColumnEncoder:
    """Encodes one side of sink rows with the driver's writer schema; see the module docstring."""

    def __init__(self, resolved: ResolvedColumn, column_type) -> None:
        from connector.typed import format_module
        self.resolved = resolved
        self.side = resolved.spec.side
        module = format_module(resolved.spec.format)
        self._encode = module.encoder(resolved.parsed(), column_type, framed=resolved.framed,
                                      message_name=resolved.spec.message_name)
        self._header = _HEADER.pack(_MAGIC, resolved.schema_id) if resolved.framed else b""

    def encode(self, column):
        """An Arrow struct (or other typed) column -> a binary column of encoded records (nulls stay null)."""
        import pyarrow as pa
        encode, header = self._encode, self._header
        out = []
        for row, value in enumerate(column.to_pylist()):
            if value is None:
                out.append(None)
                continue
            try:
                out.append(header + encode(value))
            except RowMismatch as exc:
                where = f"{self.side}.{exc.path}" if exc.path else self.side
                raise TypedRowError(f"Column '{self.side}' row {row} does not fit the {self.resolved.schema_type} "
                                    f"schema{self._which()}: field '{where}': {exc.reason}") from None
        return pa.array(out, type=pa.binary())

    def _which(self) -> str:
        return f" with id {self.resolved.schema_id}" if self.resolved.schema_id is not None else ""


class RecordTyping:
    """The source's typed sides for one task: {column name: Arrow array} for a fetch's keys and values."""

    def __init__(self, decoders: list) -> None:
        self._decoders = decoders   # (side, decoder)

    @classmethod
    def for_options(cls, options) -> "RecordTyping | None":
        """From ``SourceOptions`` (after ``resolve_typed``); None when key and value are both binary."""
        decoders = []
        for side, spec, resolved in (("value", options.value_spec, options.value_typed),
                                     ("key", options.key_spec, options.key_typed)):
            if spec is None or spec.format == "binary":
                continue
            if spec.format == "string":
                decoders.append((side, StringDecoder(side, options.permissive)))
            else:
                decoders.append((side, ColumnDecoder(resolved, options.permissive)))
        return cls(decoders) if decoders else None

    def arrays(self, keys: list, values: list, where) -> dict:
        arrays = {}
        for side, decoder in self._decoders:
            arrays.update(decoder.decode(values if side == "value" else keys, where))
        return arrays


def typed_fields(options) -> tuple[dict, list]:
    """The source schema's changes for ``SourceOptions``: ({"key"/"value": Spark type}, [extra StructFields])."""
    from pyspark.sql.types import BinaryType, IntegerType, StringType, StructField
    types, ids, corrupt = {}, [], []
    for side, spec, resolved in (("value", options.value_spec, options.value_typed),
                                 ("key", options.key_spec, options.key_typed)):
        if spec is None or spec.format == "binary":
            continue
        if spec.format == "string":
            types[side] = StringType()
        else:
            types[side] = resolved.spark_type()
            if resolved.framed:
                ids.append(StructField(f"{side}SchemaId", IntegerType()))
        if options.permissive:
            corrupt.append(StructField(f"_corrupt_{side}", BinaryType()))
    return types, ids + corrupt
