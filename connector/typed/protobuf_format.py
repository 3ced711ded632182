"""Protobuf records as Spark structs, and back: spark-protobuf's mapping over google.protobuf dynamic messages.

Theory of operation.  A PROTOBUF ``ParsedSchema`` carries the registry's resolved FileDescriptorProto and its
references (``ProtoModel``).  ``_Schema`` adds them, after the well-known files they import, to a private
``DescriptorPool`` (as ``broker_sim.registry.types.protobuf`` does to validate them) and builds message
classes with ``message_factory.GetMessageClass``: parsing and serializing run in the protobuf runtime (upb,
in C); Python only walks the fields.

- ``spark_type`` follows spark-protobuf's ``SchemaConverters.toSqlType`` with its default options: int32 /
  sint32 / sfixed32 / uint32 / fixed32 → IntegerType (unsigned values reinterpreted as signed, as the JVM
  does), the 64-bit ones → LongType, enum → StringType, Timestamp → TimestampType, Duration →
  DayTimeIntervalType(DAY, SECOND), wrappers and Any stay structs (``unwrap.primitive.wrapper.types`` and
  ``convert.any.fields.to.json`` are off by default), map → MapType(k, v, valueContainsNull=False), repeated
  → ArrayType(t, containsNull=False), a message → StructType whose fields are all nullable except proto2
  ``required`` ones.  Fields of messages left with no fields (google.protobuf.Empty) are dropped, and a
  recursive message is refused (``recursive.fields.max.depth`` -1).
- ``decoder`` parses the payload with the reader's message class (decoding by field number *is* protobuf's
  schema evolution: unknown fields are skipped, absent ones absent) and turns it into a dict as
  spark-protobuf's ``ProtobufDeserializer`` does: a field is emitted when it is repeated, present
  (``ListFields``), or has a proto2 default; otherwise null — so a proto3 implicit-presence scalar holding its
  default (0, "", false, the first enum value) reads as null unless ``emit_default_values=True`` (Spark's
  ``emit.default.values``).  The per-message work is one ``ListFields()`` loop over the present fields into
  a copy of a precomputed dict of nulls/defaults; converters exist only where a value needs one (enums,
  unsigned ints, Timestamp/Duration, nested messages, maps).  A framed payload starts with Confluent's
  message-index list; the message it names in the writer's schema must be the reader's message (by full
  name), otherwise the record is refused.
- ``encoder`` fills a new message from a ``to_pylist()`` value, matching struct fields to proto fields by name
  (exact, then case-insensitively, as Spark's resolver), with checks that name the field
  (``RowMismatch``): integer ranges, enum symbols, nulls in required fields and arrays.
- ``schema_for`` writes a proto3 file: a message per struct (nested messages for nested structs), singular
  scalars ``optional`` so a zero and a null stay apart, arrays ``repeated``, maps ``map<,>``, timestamps
  google.protobuf.Timestamp, day-time intervals google.protobuf.Duration.
"""
from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Mapping

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import FieldDescriptor
from pyspark.sql.types import (
    ArrayType, BinaryType, BooleanType, ByteType, DataType, DateType, DayTimeIntervalType, DoubleType, FloatType,
    IntegerType, LongType, MapType, ShortType, StringType, StructField, StructType, TimestampType,
)

from broker_sim.registry.types import ParsedSchema
from broker_sim.registry.types.protobuf import add_well_known
from connector.typed import RowMismatch

SCHEMA_TYPE = "PROTOBUF"

__all__ = ["SCHEMA_TYPE", "decoder", "encoder", "schema_for", "spark_type"]

_FD = FieldDescriptor
_INT32_TYPES = {_FD.TYPE_INT32, _FD.TYPE_SINT32, _FD.TYPE_SFIXED32}
_UINT32_TYPES = {_FD.TYPE_UINT32, _FD.TYPE_FIXED32}
_INT64_TYPES = {_FD.TYPE_INT64, _FD.TYPE_SINT64, _FD.TYPE_SFIXED64}
_UINT64_TYPES = {_FD.TYPE_UINT64, _FD.TYPE_FIXED64}
_SCALAR_SPARK = {
    **{t: IntegerType() for t in _INT32_TYPES | _UINT32_TYPES},
    **{t: LongType() for t in _INT64_TYPES | _UINT64_TYPES},
    _FD.TYPE_FLOAT: FloatType(), _FD.TYPE_DOUBLE: DoubleType(), _FD.TYPE_BOOL: BooleanType(),
    _FD.TYPE_STRING: StringType(), _FD.TYPE_BYTES: BinaryType(), _FD.TYPE_ENUM: StringType(),
}
# The integer range a proto integer field accepts on write; unsigned 32/64-bit ones also take the negative
# values their signed Spark reading gives (spark-protobuf reads uint32 as a Java int), as two's complement.
_INT_RANGES = {
    **{t: (-(1 << 31), 1 << 31) for t in _INT32_TYPES}, **{t: (-(1 << 31), 1 << 32) for t in _UINT32_TYPES},
    **{t: (-(1 << 63), 1 << 63) for t in _INT64_TYPES}, **{t: (-(1 << 63), 1 << 64) for t in _UINT64_TYPES},
}
_POOL_FILE = "<pylog-typed-schema>.proto"
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_EPOCH_NAIVE = datetime.datetime(1970, 1, 1)
_EPOCH_DATE = datetime.date(1970, 1, 1)
_MICRO = datetime.timedelta(microseconds=1)


# ---------------------------------------------------------------------------------------------------------------
# Schemas: a pool per parsed schema, the message a column holds, its index path in the file
# ---------------------------------------------------------------------------------------------------------------

class _Schema:
    """One ParsedSchema's descriptor pool, its file, and message classes by full name."""

    def __init__(self, schema: ParsedSchema) -> None:
        if schema.schema_type != SCHEMA_TYPE:
            raise ValueError(f"a {schema.schema_type} schema is not a PROTOBUF schema")
        model = schema.model
        self.pool = descriptor_pool.DescriptorPool()
        loaded: set[str] = set()
        provided = {path for path, _ in model.dependencies}
        for path, dependency in model.dependencies:
            file = descriptor_pb2.FileDescriptorProto()
            file.CopyFrom(dependency.model.file)
            file.name = path
            add_well_known(self.pool, file.dependency, provided, loaded)
            self.pool.Add(file)
        add_well_known(self.pool, model.file.dependency, provided, loaded)
        main = descriptor_pb2.FileDescriptorProto()
        main.CopyFrom(model.file)
        main.name = _POOL_FILE
        self.pool.Add(main)
        self.file = self.pool.FindFileByName(_POOL_FILE)
        self._classes: dict[str, type] = {}

    def message(self, message_name: str | None):
        """The descriptor of the file's message ``message_name`` (None: the first; else full or simple name)."""
        if message_name is None:
            if not self.file.message_types_by_name:
                raise ValueError("the Protobuf schema defines no message")
            return next(iter(self.file.message_types_by_name.values()))
        wanted = message_name.lstrip(".")
        found = [d for d in _all_messages(self.file) if d.full_name == wanted]
        if not found:
            found = [d for d in _all_messages(self.file) if d.name == wanted]
        if len(found) > 1:
            raise ValueError(f"message name {message_name!r} is ambiguous in the Protobuf schema: "
                             + ", ".join(d.full_name for d in found))
        if not found:
            raise ValueError(f"the Protobuf schema has no message {message_name!r}; it has "
                             + ", ".join(d.full_name for d in _all_messages(self.file)))
        return found[0]

    def message_class(self, descriptor) -> type:
        cls = self._classes.get(descriptor.full_name)
        if cls is None:
            cls = self._classes[descriptor.full_name] = message_factory.GetMessageClass(descriptor)
        return cls

    def at_indexes(self, indexes: tuple[int, ...]):
        """The message Confluent's message-index list ``indexes`` names in this file."""
        candidates = list(self.file.message_types_by_name.values())
        descriptor = None
        for index in indexes:
            if not 0 <= index < len(candidates):
                raise ValueError(f"message index list {list(indexes)} names no message of the writer's schema")
            descriptor = candidates[index]
            candidates = list(descriptor.nested_types)
        return descriptor


def _all_messages(file):
    stack = list(reversed(file.message_types_by_name.values()))
    while stack:
        descriptor = stack.pop()
        yield descriptor
        stack.extend(reversed(descriptor.nested_types))


def _index_path(descriptor) -> list[int]:
    """Confluent's message-index list of ``descriptor`` in its file (confluent-kafka's _create_index_array)."""
    path = []
    while descriptor.containing_type is not None:
        parent = descriptor.containing_type
        path.append(list(parent.nested_types).index(descriptor))
        descriptor = parent
    path.append(list(descriptor.file.message_types_by_name.values()).index(descriptor))
    return path[::-1]


_SCHEMAS: dict[tuple, _Schema] = {}


def _schema(schema: ParsedSchema) -> _Schema:
    key = (schema.canonical, tuple((path, dep.canonical) for path, dep in schema.model.dependencies))
    cached = _SCHEMAS.get(key)
    if cached is None:
        if len(_SCHEMAS) > 256:
            _SCHEMAS.clear()
        cached = _SCHEMAS[key] = _Schema(schema)
    return cached


def _zigzag_varint(value: int) -> bytes:
    value = (value << 1) ^ (value >> 63)
    out = bytearray()
    while value & ~0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _index_bytes(indexes: list[int]) -> bytes:
    """The message-index list as confluent-kafka's ProtobufSerializer writes it ([0] as one 0 byte)."""
    if indexes == [0]:
        return b"\x00"
    return _zigzag_varint(len(indexes)) + b"".join(_zigzag_varint(i) for i in indexes)


def _read_indexes(payload: bytes) -> tuple[tuple[int, ...], int]:
    """Confluent's message-index list at the start of ``payload``: the indexes and where the message starts."""
    pos = 0
    values = []
    length = len(payload)
    count = None
    while count is None or len(values) < count:
        shift = value = 0
        while True:
            if pos >= length:
                raise ValueError("truncated Protobuf message-index list")
            byte = payload[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                break
            shift += 7
            if shift > 63:
                raise ValueError("malformed varint in the Protobuf message-index list")
        value = (value >> 1) ^ -(value & 1)
        if count is None:
            if value < 0 or value > 100_000:
                raise ValueError(f"invalid Protobuf message-index list length {value}")
            if value == 0:
                return (0,), pos
            count = value
        else:
            values.append(value)
    return tuple(values), pos


# ---------------------------------------------------------------------------------------------------------------
# spark_type: spark-protobuf's SchemaConverters
# ---------------------------------------------------------------------------------------------------------------

def _is_map(fd) -> bool:
    return fd.type == _FD.TYPE_MESSAGE and fd.message_type.GetOptions().map_entry and _is_repeated(fd)


def _is_repeated(fd) -> bool:
    # protobuf >= 6 has is_repeated/is_required (and 7 dropped ``label``); older ones only ``label``
    return fd.is_repeated if hasattr(fd, "is_repeated") else fd.label == _FD.LABEL_REPEATED


def _is_required(fd) -> bool:
    return fd.is_required if hasattr(fd, "is_required") else fd.label == _FD.LABEL_REQUIRED


def _is_seconds_nanos(message, name: str) -> bool:
    """Spark's test for Timestamp and Duration: by simple name, with fields seconds and nanos, in that order."""
    return (message.name == name and len(message.fields) == 2 and message.fields[0].name == "seconds"
            and message.fields[1].name == "nanos")


def _value_type(fd, seen: tuple[str, ...]) -> DataType | None:
    """The Spark type of one value of ``fd`` (an element, for repeated fields); None when Spark drops it."""
    if fd.type != _FD.TYPE_MESSAGE and fd.type != _FD.TYPE_GROUP:
        return _SCALAR_SPARK[fd.type]
    message = fd.message_type
    if _is_seconds_nanos(message, "Duration"):
        return DayTimeIntervalType()
    if _is_seconds_nanos(message, "Timestamp"):
        return TimestampType()
    if _is_map(fd):
        key = _value_type(message.fields_by_name["key"], seen)
        value = _value_type(message.fields_by_name["value"], seen)
        if key is None or value is None:
            return None
        return MapType(key, value, valueContainsNull=False)
    if message.full_name in seen:
        raise ValueError(
            f"Found recursive reference in Protobuf schema, which can not be processed by Spark by default: "
            f"{fd.full_name} (message {message.full_name} contains itself; spark-protobuf refuses it unless "
            f"recursive.fields.max.depth is set, which pylog does not support)")
    struct = _struct_type(message, seen + (message.full_name,))
    return struct if struct.fields else None


def _struct_field(fd, seen: tuple[str, ...]) -> StructField | None:
    data_type = _value_type(fd, seen)
    if data_type is None:
        return None
    if isinstance(data_type, MapType):
        return StructField(fd.name, data_type, nullable=True)
    if _is_repeated(fd):
        return StructField(fd.name, ArrayType(data_type, containsNull=False), nullable=True)
    return StructField(fd.name, data_type, nullable=not _is_required(fd))


def _struct_type(message, seen: tuple[str, ...]) -> StructType:
    return StructType([f for f in (_struct_field(fd, seen) for fd in message.fields) if f is not None])


def spark_type(schema: ParsedSchema, message_name: str | None = None) -> StructType:
    """The Spark type of a column of ``message_name`` records (None: the schema's first message)."""
    descriptor = _schema(schema).message(message_name)
    return _struct_type(descriptor, (descriptor.full_name,))


# ---------------------------------------------------------------------------------------------------------------
# decoder
# ---------------------------------------------------------------------------------------------------------------

def _signed32(value: int) -> int:
    return value - (1 << 32) if value >= 1 << 31 else value


def _signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _seconds_nanos_micros(value) -> int:
    """Spark's micros of a Timestamp/Duration: seconds * 10^6 + nanos truncated toward zero to micros."""
    nanos = value.nanos
    return value.seconds * 1_000_000 + (nanos // 1000 if nanos >= 0 else -(-nanos // 1000))


def _enum_converter(enum) -> Callable[[int], str]:
    names = {v.number: v.name for v in enum.values}
    prefix = f"UNKNOWN_ENUM_VALUE_{enum.name}_"

    def convert(number: int) -> str:
        name = names.get(number)
        # an open (proto3) enum keeps numbers it has no name for; the JVM names them so
        return name if name is not None else prefix + str(number)
    return convert


def _scalar_converter(fd) -> Callable | None:
    """The converter of one scalar value of ``fd``, None where the protobuf value already is the Spark one."""
    if fd.type == _FD.TYPE_ENUM:
        return _enum_converter(fd.enum_type)
    if fd.type in _UINT32_TYPES:
        return _signed32
    if fd.type in _UINT64_TYPES:
        return _signed64
    return None


def _value_converter(fd, data_type: DataType, emit_default_values: bool) -> Callable | None:
    """The converter of one (element) value of ``fd`` to the Python value of ``data_type``."""
    if isinstance(data_type, (TimestampType, DayTimeIntervalType)):
        return _seconds_nanos_micros
    if isinstance(data_type, MapType):
        entry = fd.message_type
        key_convert = _scalar_converter(entry.fields_by_name["key"])
        value_fd = entry.fields_by_name["value"]
        value_convert = _value_converter(value_fd, data_type.valueType, emit_default_values)
        if key_convert is None and value_convert is None:
            return lambda container: list(container.items())
        key_convert = key_convert or (lambda k: k)
        value_convert = value_convert or (lambda v: v)
        return lambda container: [(key_convert(k), value_convert(v)) for k, v in container.items()]
    if isinstance(data_type, StructType):
        return _message_converter(fd.message_type, data_type, emit_default_values)
    return _scalar_converter(fd)


def _message_converter(message, struct: StructType, emit_default_values: bool) -> Callable:
    """A function from a message of ``message`` to the dict of ``struct`` (its Spark type)."""
    template: dict[str, object] = {}
    table: dict[object, tuple[str, Callable | None]] = {}
    for field in struct.fields:
        fd = message.fields_by_name[field.name]
        element_type = field.dataType.elementType if isinstance(field.dataType, ArrayType) else field.dataType
        convert = _value_converter(fd, element_type, emit_default_values)
        if isinstance(field.dataType, MapType):
            template[field.name] = []
        elif _is_repeated(fd):
            template[field.name] = []
            if convert is not None:
                element_convert = convert
                convert = (lambda c: lambda values: [c(v) for v in values])(element_convert)
            else:
                convert = list
        elif fd.has_default_value or (emit_default_values and not fd.has_presence):
            # Spark emits these even when absent: proto2 explicit defaults, and with emit.default.values the
            # implicit-presence proto3 scalars.  Their value when absent is constant: precomputed.
            template[field.name] = convert(fd.default_value) if convert is not None else fd.default_value
        else:
            template[field.name] = None
        table[fd] = (field.name, convert)
    copy = template.copy
    lookup = table.get

    def convert_message(msg) -> dict:
        out = copy()
        for fd, value in msg.ListFields():
            entry = lookup(fd)
            if entry is not None:  # fields Spark drops (empty messages) and extensions are not in the table
                name, convert = entry
                out[name] = value if convert is None else convert(value)
        return out
    return convert_message


def _has_required(descriptor) -> bool:
    """Whether a message of ``descriptor`` can lack a required field (its own or a nested message's)."""
    seen, stack = set(), [descriptor]
    while stack:
        message = stack.pop()
        if message.full_name in seen:
            continue
        seen.add(message.full_name)
        for fd in message.fields:
            if _is_required(fd):
                return True
            if fd.message_type is not None:
                stack.append(fd.message_type)
    return False


def decoder(reader: ParsedSchema, writer: ParsedSchema | None, *, framed: bool,
            message_name: str | None = None, emit_default_values: bool = False) -> Callable[[bytes], dict]:
    """A function from a record's payload to the dict of ``spark_type(reader, message_name)``.

    framed: the payload starts with Confluent's message-index list, which must name the reader's message (by
    full name) in ``writer`` (the schema registered under the record's id; None skips that check).
    emit_default_values: Spark's ``emit.default.values`` — proto3 scalars without presence read as their
    default instead of null when absent.
    """
    schema = _schema(reader)
    descriptor = schema.message(message_name)
    struct = _struct_type(descriptor, (descriptor.full_name,))
    parse = schema.message_class(descriptor).FromString
    if _has_required(descriptor):
        # upb parses a message lacking a required field; the JVM's parseFrom (Spark) refuses it
        parse_unchecked = parse

        def parse(data):
            msg = parse_unchecked(data)
            if not msg.IsInitialized():
                raise ValueError("the Protobuf record lacks required fields: "
                                 + ", ".join(msg.FindInitializationErrors()))
            return msg
    convert = _message_converter(descriptor, struct, emit_default_values)

    if not framed:
        def decode_bare(payload: bytes) -> dict:
            return convert(parse(payload))
        return decode_bare

    wanted = descriptor.full_name
    writer_schema = _schema(writer) if writer is not None else None
    checked: dict[tuple[int, ...], bool] = {}

    def check(indexes: tuple[int, ...]) -> None:
        if writer_schema is None:
            return
        ok = checked.get(indexes)
        if ok is None:
            written = writer_schema.at_indexes(indexes)
            if len(checked) < 1024:
                checked[indexes] = ok = written.full_name == wanted
            if written.full_name != wanted:
                raise ValueError(f"the record is a {written.full_name} message (message indexes "
                                 f"{list(indexes)}); the column holds {wanted}")
        elif not ok:
            raise ValueError(f"the record's message indexes {list(indexes)} name another message than {wanted}")

    def decode_framed(payload: bytes) -> dict:
        if payload[:1] == b"\x00":
            check((0,))
            return convert(parse(payload[1:]))
        indexes, start = _read_indexes(payload)
        check(indexes)
        return convert(parse(payload[start:]))
    return decode_framed


# ---------------------------------------------------------------------------------------------------------------
# encoder
# ---------------------------------------------------------------------------------------------------------------

_INTEGRAL = (ByteType, ShortType, IntegerType, LongType)
_TYPE_NAMES = {v: k[len("TYPE_"):].lower() for k, v in vars(FieldDescriptor).items() if k.startswith("TYPE_")}


def _proto_type_name(fd) -> str:
    if fd.type in (_FD.TYPE_MESSAGE, _FD.TYPE_GROUP):
        return fd.message_type.full_name
    if fd.type == _FD.TYPE_ENUM:
        return fd.enum_type.full_name
    return _TYPE_NAMES[fd.type]


def _micros(value, path: str, what: str) -> int:
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            return (value - _EPOCH_NAIVE) // _MICRO
        return (value - _EPOCH) // _MICRO
    if isinstance(value, datetime.timedelta):
        return value // _MICRO
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise RowMismatch(path, f"expected a {what}, got {type(value).__name__}")


def _scalar_writer(data_type: DataType, fd, path: str) -> Callable[[object, str], object]:
    """A function checking one scalar value for ``fd`` and giving what protobuf's setter takes."""
    kind = fd.type
    if kind == _FD.TYPE_ENUM:
        enum = fd.enum_type
        if isinstance(data_type, StringType):
            numbers = {v.name: v.number for v in enum.values}

            def enum_symbol(value, path):
                number = numbers.get(value) if isinstance(value, str) else None
                if number is None:
                    raise RowMismatch(path, f"{value!r} is not a symbol of enum {enum.full_name} "
                                            f"({', '.join(numbers)})")
                return number
            return enum_symbol
        if isinstance(data_type, _INTEGRAL):
            known = {v.number for v in enum.values}

            def enum_number(value, path):
                if type(value) is not int or value not in known:
                    raise RowMismatch(path, f"{value!r} is not a number of enum {enum.full_name}")
                return value
            return enum_number
    elif kind in _INT_RANGES and isinstance(data_type, (*_INTEGRAL, DateType)):
        low, high = _INT_RANGES[kind]
        unsigned = kind in _UINT32_TYPES or kind in _UINT64_TYPES
        modulus = 1 << 32 if kind in _UINT32_TYPES else 1 << 64
        is_date = isinstance(data_type, DateType)
        if is_date and kind not in _INT32_TYPES:
            raise RowMismatch(path, f"a date column is written to an int32 field, not {_proto_type_name(fd)}")

        def integer(value, path):
            if is_date:
                if not isinstance(value, datetime.date):
                    raise RowMismatch(path, f"expected a date, got {type(value).__name__}")
                value = (value - _EPOCH_DATE).days
            elif type(value) is not int:
                raise RowMismatch(path, f"expected an integer, got {type(value).__name__}")
            if not low <= value < high:
                raise RowMismatch(path, f"{value} is out of range for {_proto_type_name(fd)}")
            return value % modulus if unsigned and value < 0 else value
        return integer
    elif kind in (_FD.TYPE_FLOAT, _FD.TYPE_DOUBLE) and isinstance(data_type, (FloatType, DoubleType, *_INTEGRAL)):
        def real(value, path):
            if type(value) is not float and type(value) is not int:
                raise RowMismatch(path, f"expected a number, got {type(value).__name__}")
            return value
        return real
    elif kind == _FD.TYPE_BOOL and isinstance(data_type, BooleanType):
        def boolean(value, path):
            if type(value) is not bool:
                raise RowMismatch(path, f"expected a boolean, got {type(value).__name__}")
            return value
        return boolean
    elif kind == _FD.TYPE_STRING and isinstance(data_type, StringType):
        def string(value, path):
            if type(value) is not str:
                raise RowMismatch(path, f"expected a string, got {type(value).__name__}")
            return value
        return string
    elif kind == _FD.TYPE_BYTES and isinstance(data_type, BinaryType):
        def binary(value, path):
            if not isinstance(value, (bytes, bytearray, memoryview)):
                raise RowMismatch(path, f"expected bytes, got {type(value).__name__}")
            return bytes(value)
        return binary
    raise RowMismatch(path, f"a {data_type.simpleString()} column cannot be written to the protobuf field "
                            f"{fd.full_name} ({_proto_type_name(fd)})")


def _seconds_nanos_filler(data_type: DataType, fd, path: str) -> Callable[[object, object, str], None]:
    """Fills a Timestamp (from TimestampType/TimestampNTZ values) or Duration (from day-time intervals)."""
    message = fd.message_type
    if isinstance(data_type, TimestampType) and _is_seconds_nanos(message, "Timestamp"):
        def timestamp(msg, value, path):
            seconds, micros = divmod(_micros(value, path, "timestamp"), 1_000_000)
            if not -62135596800 <= seconds <= 253402300799:
                raise RowMismatch(path, f"{value!r} is out of google.protobuf.Timestamp's range")
            msg.seconds = seconds
            msg.nanos = micros * 1000
        return timestamp
    if isinstance(data_type, DayTimeIntervalType) and _is_seconds_nanos(message, "Duration"):
        def duration(msg, value, path):
            micros = _micros(value, path, "day-time interval")
            sign = -1 if micros < 0 else 1
            seconds, rest = divmod(abs(micros), 1_000_000)
            msg.seconds = sign * seconds
            msg.nanos = sign * rest * 1000
        return duration
    raise RowMismatch(path, f"a {data_type.simpleString()} column cannot be written to the protobuf field "
                            f"{fd.full_name} ({_proto_type_name(fd)})")


def _message_filler(data_type: DataType, message, path: str) -> Callable[[object, object, str], None]:
    """A function filling a message of ``message`` from a value of ``data_type``."""
    if isinstance(data_type, (TimestampType, DayTimeIntervalType)):
        raise AssertionError("handled by the field")
    if not isinstance(data_type, StructType):
        raise RowMismatch(path, f"a {data_type.simpleString()} column cannot be written to the protobuf "
                                f"message {message.full_name}")
    by_name = message.fields_by_name
    by_lower = {}
    for fd in message.fields:
        by_lower.setdefault(fd.name.lower(), []).append(fd)
    setters = []
    matched = set()
    for field in data_type.fields:
        field_path = f"{path}.{field.name}" if path else field.name
        fd = by_name.get(field.name)
        if fd is None:
            candidates = by_lower.get(field.name.lower(), [])
            if len(candidates) != 1:
                raise RowMismatch(field_path, f"the protobuf message {message.full_name} has no field "
                                              f"{field.name!r}")
            fd = candidates[0]
        if fd.name in matched:
            raise RowMismatch(field_path, f"two columns match the protobuf field {fd.full_name}")
        matched.add(fd.name)
        setters.append((field.name, field.nullable, fd, _field_setter(field.dataType, fd, field_path), field_path))
    required = [fd.name for fd in message.fields if _is_required(fd) and fd.name not in matched]
    if required:
        raise RowMismatch(f"{path}.{required[0]}" if path else required[0],
                          "the protobuf field is required and the struct has no such field")
    required_names = {fd.name for fd in message.fields if _is_required(fd)}

    def fill(msg, value, path_unused=None):
        if not isinstance(value, Mapping):
            as_dict = getattr(value, "asDict", None)
            if as_dict is None:
                raise RowMismatch(path, f"expected a struct (dict), got {type(value).__name__}")
            value = as_dict()
        get = value.get
        for name, nullable, fd, setter, field_path in setters:
            item = get(name)
            if item is None:
                if not nullable:
                    raise RowMismatch(field_path, "null in a non-nullable field")
                if fd.name in required_names:
                    raise RowMismatch(field_path, "null in a required protobuf field")
                continue
            setter(msg, item, field_path)
    return fill


def _field_setter(data_type: DataType, fd, path: str) -> Callable[[object, object, str], None]:
    """A function setting field ``fd`` of a message from a non-null value of ``data_type``."""
    name = fd.name
    is_message = fd.type in (_FD.TYPE_MESSAGE, _FD.TYPE_GROUP)
    if _is_map(fd):
        if not isinstance(data_type, MapType):
            raise RowMismatch(path, f"a {data_type.simpleString()} column cannot be written to the protobuf "
                                    f"map field {fd.full_name}")
        entry = fd.message_type
        key_check = _scalar_writer(data_type.keyType, entry.fields_by_name["key"], path + ".key")
        value_fd = entry.fields_by_name["value"]
        value_path = path + ".value"
        value_is_message = value_fd.type == _FD.TYPE_MESSAGE
        if value_is_message:
            value_fill = (_seconds_nanos_filler(data_type.valueType, value_fd, value_path)
                          if isinstance(data_type.valueType, (TimestampType, DayTimeIntervalType))
                          else _message_filler(data_type.valueType, value_fd.message_type, value_path))
        else:
            value_check = _scalar_writer(data_type.valueType, value_fd, value_path)

        def set_map(msg, value, path):
            container = getattr(msg, name)
            items = value.items() if isinstance(value, Mapping) else value
            for k, v in items:
                if k is None:
                    raise RowMismatch(path + ".key", "null map key")
                k = key_check(k, path + ".key")
                if value_is_message:
                    sub = container[k]  # creates the entry, also for a null value (Spark writes the default)
                    if v is not None:
                        value_fill(sub, v, value_path)
                elif v is not None:
                    container[k] = value_check(v, value_path)
                else:
                    container[k] = value_fd.default_value
        return set_map
    if _is_repeated(fd):
        if not isinstance(data_type, ArrayType):
            raise RowMismatch(path, f"a {data_type.simpleString()} column cannot be written to the repeated "
                                    f"protobuf field {fd.full_name}")
        element_type = data_type.elementType
        element_path = path + ".element"
        if is_message:
            element_fill = (_seconds_nanos_filler(element_type, fd, element_path)
                            if isinstance(element_type, (TimestampType, DayTimeIntervalType))
                            else _message_filler(element_type, fd.message_type, element_path))

            def set_messages(msg, value, path):
                container = getattr(msg, name)
                for i, item in enumerate(value):
                    if item is None:
                        raise RowMismatch(f"{path}[{i}]", "null element in a repeated protobuf field")
                    element_fill(container.add(), item, element_path)
            return set_messages
        element_check = _scalar_writer(element_type, fd, element_path)

        def set_scalars(msg, value, path):
            out = []
            for i, item in enumerate(value):
                if item is None:
                    raise RowMismatch(f"{path}[{i}]", "null element in a repeated protobuf field")
                out.append(element_check(item, path))
            getattr(msg, name).extend(out)
        return set_scalars
    if isinstance(data_type, ArrayType):
        raise RowMismatch(path, f"an array column cannot be written to the singular protobuf field {fd.full_name}")
    if is_message:
        if isinstance(data_type, (TimestampType, DayTimeIntervalType)):
            fill = _seconds_nanos_filler(data_type, fd, path)
        else:
            fill = _message_filler(data_type, fd.message_type, path)

        def set_message(msg, value, path):
            sub = getattr(msg, name)
            sub.SetInParent()  # present even when every field of the struct is null
            fill(sub, value, path)
        return set_message
    check = _scalar_writer(data_type, fd, path)

    def set_scalar(msg, value, path):
        setattr(msg, name, check(value, path))
    return set_scalar


def encoder(schema: ParsedSchema, data_type: DataType, *, framed: bool,
            message_name: str | None = None) -> Callable[[object], bytes]:
    """A function from a row's struct value (``to_pylist()`` form) to the protobuf payload.

    framed: prefix the message-index list of the message in ``schema``, as confluent-kafka's
    ProtobufSerializer writes after the 5-byte header.  Raises RowMismatch naming the field for a value
    that does not fit (also, when the encoder is built, for a column the message has no field for).
    """
    wrapped = _schema(schema)
    descriptor = wrapped.message(message_name)
    fill = _message_filler(data_type, descriptor, "")
    cls = wrapped.message_class(descriptor)
    prefix = _index_bytes(_index_path(descriptor)) if framed else b""

    def encode(value) -> bytes:
        if value is None:
            raise RowMismatch("", "a null struct cannot be written as a protobuf message")
        msg = cls()
        fill(msg, value)
        return prefix + msg.SerializeToString()
    return encode


# ---------------------------------------------------------------------------------------------------------------
# schema_for
# ---------------------------------------------------------------------------------------------------------------

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PROTO_SCALARS = [
    (BooleanType, "bool"), (ByteType, "int32"), (ShortType, "int32"), (IntegerType, "int32"),
    (LongType, "int64"), (FloatType, "float"), (DoubleType, "double"), (StringType, "string"),
    (BinaryType, "bytes"), (DateType, "int32"), (TimestampType, "google.protobuf.Timestamp"),
    (DayTimeIntervalType, "google.protobuf.Duration"),
]
_MAP_KEYS = (StringType, IntegerType, LongType, ShortType, ByteType, BooleanType)


def _proto_scalar(data_type: DataType) -> str | None:
    for spark_class, proto in _PROTO_SCALARS:
        if isinstance(data_type, spark_class):
            return proto
    return None


def _message_name(field_name: str, taken: set[str]) -> str:
    base = "".join(part[:1].upper() + part[1:] for part in field_name.split("_") if part) or "Message"
    if not base[0].isalpha():
        base = "M" + base
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}{n}"
    taken.add(name)
    return name


def _message_text(struct: StructType, name: str, path: str, indent: str, imports: set[str]) -> list[str]:
    lines = [f"{indent}message {name} {{"]
    inner = indent + "  "
    nested: list[str] = []
    taken = {name}
    seen_fields: set[str] = set()
    for number, field in enumerate(struct.fields, start=1):
        field_path = f"{path}.{field.name}" if path else field.name
        if not _IDENTIFIER.fullmatch(field.name):
            raise ValueError(f"column {field_path!r}: {field.name!r} is not a protobuf field name")
        if field.name in seen_fields:
            raise ValueError(f"column {field_path!r} appears twice")
        seen_fields.add(field.name)

        def type_of(data_type: DataType, where: str) -> str:
            scalar = _proto_scalar(data_type)
            if scalar is not None:
                if scalar.startswith("google.protobuf."):
                    imports.add(f"google/protobuf/{scalar.rsplit('.', 1)[1].lower()}.proto")
                return scalar
            if isinstance(data_type, StructType):
                message = _message_name(field.name, taken)
                nested.extend(_message_text(data_type, message, field_path, inner, imports))
                return message
            raise ValueError(f"column {where!r}: {data_type.simpleString()} has no protobuf type "
                             f"(pylog writes {', '.join(c.__name__ for c, _ in _PROTO_SCALARS)}, structs, "
                             f"arrays of those and maps with string/integer/boolean keys)")

        data_type = field.dataType
        if isinstance(data_type, ArrayType):
            if isinstance(data_type.elementType, (ArrayType, MapType)):
                raise ValueError(f"column {field_path!r}: protobuf has no repeated field of "
                                 f"{data_type.elementType.simpleString()} (arrays of arrays or maps)")
            lines.append(f"{inner}repeated {type_of(data_type.elementType, field_path + '.element')} "
                         f"{field.name} = {number};")
        elif isinstance(data_type, MapType):
            if not isinstance(data_type.keyType, _MAP_KEYS):
                raise ValueError(f"column {field_path!r}: a protobuf map key cannot be "
                                 f"{data_type.keyType.simpleString()}")
            if isinstance(data_type.valueType, (ArrayType, MapType)):
                raise ValueError(f"column {field_path!r}: a protobuf map value cannot be "
                                 f"{data_type.valueType.simpleString()}")
            key = _proto_scalar(data_type.keyType)
            value = type_of(data_type.valueType, field_path + ".value")
            lines.append(f"{inner}map<{key}, {value}> {field.name} = {number};")
        else:
            proto = type_of(data_type, field_path)
            is_message = isinstance(data_type, (StructType, TimestampType, DayTimeIntervalType))
            lines.append(f"{inner}{'' if is_message else 'optional '}{proto} {field.name} = {number};")
    lines.extend(nested)
    lines.append(f"{indent}}}")
    return lines


def schema_for(data_type: StructType, *, name: str, namespace: str) -> tuple[str, str]:
    """A proto3 file for ``data_type`` (message ``name`` in package ``namespace``) and its full message name."""
    if not isinstance(data_type, StructType):
        raise ValueError(f"a protobuf schema is derived from a struct, not {data_type.simpleString()}")
    if not _IDENTIFIER.fullmatch(name):
        raise ValueError(f"{name!r} is not a protobuf message name")
    if namespace and not all(_IDENTIFIER.fullmatch(part) for part in namespace.split(".")):
        raise ValueError(f"{namespace!r} is not a protobuf package name")
    imports: set[str] = set()
    body = _message_text(data_type, name, "", "", imports)
    head = ['syntax = "proto3";']
    if namespace:
        head.append(f"package {namespace};")
    head.append("")
    if imports:
        head.extend(f'import "{path}";' for path in sorted(imports))
        head.append("")
    return "\n".join(head + body) + "\n", f"{namespace}.{name}" if namespace else name
