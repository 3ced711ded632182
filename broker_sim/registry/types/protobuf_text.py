""".proto text -> FileDescriptorProto, with proto-schema-parser's AST as the middle step.

The AST keeps type names as written (relative or fully qualified); the descriptor pool resolves them when
``protobuf.parse`` adds the file, as protoc would.  Map fields become their ``map_entry`` nested messages,
proto3 ``optional`` a synthetic oneof, groups a nested message and a TYPE_GROUP field, as protoc builds
them.  Custom options (``(name)``) are not carried into the descriptor.

Hostile input: the text's brace nesting is counted first (outside strings and comments) and refused past
MAX_SCHEMA_DEPTH, before the recursive ANTLR parser sees it; syntax errors raise instead of being
"recovered" from, as ANTLR does by default.
"""

from __future__ import annotations

import re
from typing import Any

from antlr4.error.ErrorListener import ErrorListener
from google.protobuf import descriptor_pb2
from proto_schema_parser import ast
from proto_schema_parser.parser import Parser

from broker_sim.registry.types.errors import MAX_SCHEMA_DEPTH, SchemaError

F = descriptor_pb2.FieldDescriptorProto
SCALAR_TYPES = {
    "double": F.TYPE_DOUBLE, "float": F.TYPE_FLOAT, "int64": F.TYPE_INT64, "uint64": F.TYPE_UINT64,
    "int32": F.TYPE_INT32, "fixed64": F.TYPE_FIXED64, "fixed32": F.TYPE_FIXED32, "bool": F.TYPE_BOOL,
    "string": F.TYPE_STRING, "bytes": F.TYPE_BYTES, "uint32": F.TYPE_UINT32, "sfixed32": F.TYPE_SFIXED32,
    "sfixed64": F.TYPE_SFIXED64, "sint32": F.TYPE_SINT32, "sint64": F.TYPE_SINT64,
}
_LABELS = {ast.FieldCardinality.OPTIONAL: F.LABEL_OPTIONAL, ast.FieldCardinality.REQUIRED: F.LABEL_REQUIRED,
           ast.FieldCardinality.REPEATED: F.LABEL_REPEATED}
FIELD_NUMBER_MAX = 536870911  # 2^29 - 1
ENUM_NUMBER_MAX = 2147483647
# A string literal, a comment, or one brace: the nesting scan skips the first two whole.  An unterminated
# string or comment runs to its line's or the text's end (the parser then reports it), so that the scan
# never retries inside it (quadratic in the text).
_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"?|\'(?:[^\'\\\n]|\\.)*\'?|//[^\n]*|/\*.*?(?:\*/|\Z)|[{}]', re.DOTALL)
_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{1,2}|[0-7]{1,3}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|.)", re.DOTALL)
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v"}


class _Raise(ErrorListener):
    def syntaxError(self, recognizer: Any, offendingSymbol: Any, line: int, column: int, msg: str,  # noqa: N802
                    e: Any) -> None:
        raise SchemaError(f"Invalid Protobuf schema: line {line}:{column} {msg}")


def _raising(recognizer: Any) -> None:
    recognizer.removeErrorListeners()
    recognizer.addErrorListener(_Raise())


def parse_text(text: str) -> descriptor_pb2.FileDescriptorProto:
    """The FileDescriptorProto of a .proto text (type names unresolved).  Raises SchemaError."""
    depth = 0
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token == "{":
            depth += 1
            if depth > MAX_SCHEMA_DEPTH:
                raise SchemaError(f"Invalid Protobuf schema: nested deeper than {MAX_SCHEMA_DEPTH} levels")
        elif token == "}":
            depth -= 1
    tree = Parser(setup_lexer=_raising, setup_parser=_raising).parse(text)
    fdp = descriptor_pb2.FileDescriptorProto()
    if tree.edition:
        raise SchemaError("Invalid Protobuf schema: editions are not supported; use syntax proto2 or proto3")
    fdp.syntax = tree.syntax or "proto2"
    if fdp.syntax not in ("proto2", "proto3"):
        raise SchemaError(f"Invalid Protobuf schema: unknown syntax {fdp.syntax!r}")
    proto3 = fdp.syntax == "proto3"
    for element in tree.file_elements:
        if isinstance(element, ast.Package):
            fdp.package = element.name
        elif isinstance(element, ast.Import):
            if element.public:
                fdp.public_dependency.append(len(fdp.dependency))
            if element.weak:
                fdp.weak_dependency.append(len(fdp.dependency))
            fdp.dependency.append(element.name)
        elif isinstance(element, ast.Option):
            _set_option(fdp.options, element)
        elif isinstance(element, ast.Message):
            _message(fdp.message_type.add(), element, proto3)
        elif isinstance(element, ast.Enum):
            _enum(fdp.enum_type.add(), element)
        elif isinstance(element, ast.Extension):
            _extension(fdp.extension, element, proto3)
        elif isinstance(element, ast.Service):
            _service(fdp.service.add(), element)
    return fdp


def _message(out: descriptor_pb2.DescriptorProto, message: ast.Message | ast.Group, proto3: bool) -> None:
    out.name = message.name
    synthetic: list[descriptor_pb2.FieldDescriptorProto] = []
    for element in message.elements:
        if isinstance(element, ast.Field):
            field = _field(out.field.add(), element, proto3)
            if field.proto3_optional:
                synthetic.append(field)
        elif isinstance(element, ast.MapField):
            _map_field(out, element)
        elif isinstance(element, ast.Group):
            _group(out, element, proto3, oneof_index=None)
        elif isinstance(element, ast.OneOf):
            index = len(out.oneof_decl)
            out.oneof_decl.add(name=element.name)
            for member in element.elements:
                if isinstance(member, ast.Field):
                    _field(out.field.add(), member, proto3).oneof_index = index
                elif isinstance(member, ast.Group):
                    _group(out, member, proto3, oneof_index=index)
        elif isinstance(element, ast.Message):
            _message(out.nested_type.add(), element, proto3)
        elif isinstance(element, ast.Enum):
            _enum(out.enum_type.add(), element)
        elif isinstance(element, ast.Extension):
            _extension(out.extension, element, proto3)
        elif isinstance(element, ast.Reserved):
            for low, high in _ranges(element.ranges, FIELD_NUMBER_MAX):
                out.reserved_range.add(start=low, end=high + 1)
            out.reserved_name.extend(element.names)
        elif isinstance(element, ast.ExtensionRange):
            for low, high in _ranges(element.ranges, FIELD_NUMBER_MAX):
                out.extension_range.add(start=low, end=high + 1)
        elif isinstance(element, ast.Option):
            _set_option(out.options, element)
    # protoc puts the synthetic oneofs of proto3 optional fields after the real ones.
    for field in synthetic:
        field.oneof_index = len(out.oneof_decl)
        out.oneof_decl.add(name=_synthetic_oneof_name(field.name, out))


def _synthetic_oneof_name(name: str, message: descriptor_pb2.DescriptorProto) -> str:
    taken = {o.name for o in message.oneof_decl} | {f.name for f in message.field}
    candidate = "_" + name
    while candidate in taken:
        candidate = "X" + candidate
    return candidate


def _field(out: descriptor_pb2.FieldDescriptorProto, field: ast.Field, proto3: bool) -> F:
    out.name, out.number = field.name, field.number
    if proto3 and field.cardinality == ast.FieldCardinality.OPTIONAL:
        out.label, out.proto3_optional = F.LABEL_OPTIONAL, True
    else:
        out.label = _LABELS.get(field.cardinality, F.LABEL_OPTIONAL)
    if field.type in SCALAR_TYPES:
        out.type = SCALAR_TYPES[field.type]
    else:
        out.type_name = field.type
    for option in field.options:
        if option.name == "default":
            out.default_value = _default_text(option.value, field.type)
        elif option.name == "json_name":
            out.json_name = str(option.value)
        else:
            _set_option(out.options, option)
    return out


def _default_text(value: Any, type_name: str) -> str:
    if isinstance(value, ast.Identifier):
        return value.name
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return {float("inf"): "inf", float("-inf"): "-inf"}.get(value, "nan" if value != value else repr(value))
    if isinstance(value, str) and type_name == "string":
        return unescape(value)
    return str(value)


def unescape(text: str) -> str:
    """A proto string literal's body with its escapes decoded."""
    def one(match: re.Match[str]) -> str:
        code = match.group(1)
        if code[0] == "x":
            return chr(int(code[1:], 16))
        if code[0] in "uU" and len(code) > 1:
            return chr(int(code[1:], 16))
        if code[0].isdigit() and code[0] in "01234567":
            return chr(int(code, 8))
        return _SIMPLE_ESCAPES.get(code, code)
    return _ESCAPE.sub(one, text)


def _map_field(out: descriptor_pb2.DescriptorProto, field: ast.MapField) -> None:
    entry_name = "".join(part[:1].upper() + part[1:] for part in field.name.split("_")) + "Entry"
    entry = out.nested_type.add(name=entry_name)
    entry.options.map_entry = True
    for number, (name, type_name) in enumerate((("key", field.key_type), ("value", field.value_type)), 1):
        entry_field = entry.field.add(name=name, number=number, label=F.LABEL_OPTIONAL)
        if type_name in SCALAR_TYPES:
            entry_field.type = SCALAR_TYPES[type_name]
        else:
            entry_field.type_name = type_name
    map_field = out.field.add(name=field.name, number=field.number, label=F.LABEL_REPEATED, type_name=entry_name)
    for option in field.options:
        if option.name == "json_name":
            map_field.json_name = str(option.value)
        else:
            _set_option(map_field.options, option)


def _group(out: descriptor_pb2.DescriptorProto, group: ast.Group, proto3: bool, oneof_index: int | None) -> None:
    _message(out.nested_type.add(), group, proto3)
    field = out.field.add(name=group.name.lower(), number=group.number, type=F.TYPE_GROUP, type_name=group.name,
                          label=_LABELS.get(group.cardinality, F.LABEL_OPTIONAL))
    if oneof_index is not None:
        field.oneof_index = oneof_index


def _enum(out: descriptor_pb2.EnumDescriptorProto, enum: ast.Enum) -> None:
    out.name = enum.name
    for element in enum.elements:
        if isinstance(element, ast.EnumValue):
            value = out.value.add(name=element.name, number=element.number)
            for option in element.options:
                _set_option(value.options, option)
        elif isinstance(element, ast.EnumReserved):
            for low, high in _ranges(element.ranges, ENUM_NUMBER_MAX):
                out.reserved_range.add(start=low, end=high)  # inclusive, unlike messages'
            out.reserved_name.extend(element.names)
        elif isinstance(element, ast.Option):
            _set_option(out.options, element)


def _extension(out: Any, extension: ast.Extension, proto3: bool) -> None:
    for element in extension.elements:
        if isinstance(element, ast.Field):
            _field(out.add(), element, proto3).extendee = extension.typeName


def _service(out: descriptor_pb2.ServiceDescriptorProto, service: ast.Service) -> None:
    out.name = service.name
    for element in service.elements:
        if isinstance(element, ast.Method):
            method = out.method.add(name=element.name, input_type=element.input_type.type,
                                    output_type=element.output_type.type)
            if element.input_type.stream:
                method.client_streaming = True
            if element.output_type.stream:
                method.server_streaming = True
            for option in element.elements:
                if isinstance(option, ast.Option):
                    _set_option(method.options, option)
        elif isinstance(element, ast.Option):
            _set_option(out.options, element)


def _ranges(ranges: list[str], maximum: int) -> list[tuple[int, int]]:
    found = []
    for text in ranges:
        low, _, high = (part.strip() for part in text.partition(" to "))
        try:
            start = int(low, 0)
            end = maximum if high == "max" else int(high, 0) if high else start
        except ValueError:
            raise SchemaError(f"Invalid Protobuf schema: bad range {text!r}") from None
        found.append((start, end))
    return found


def _set_option(options: Any, option: ast.Option) -> None:
    """Set a standard option by name; custom options (``(name)``) and unknown names are not carried."""
    descriptor = options.DESCRIPTOR.fields_by_name.get(option.name)
    if descriptor is None:
        return
    value = option.value
    try:
        if descriptor.enum_type is not None:
            name = value.name if isinstance(value, ast.Identifier) else str(value)
            setattr(options, option.name, descriptor.enum_type.values_by_name[name].number)
        elif descriptor.message_type is None and not descriptor.is_repeated:
            setattr(options, option.name, value.name == "true" if isinstance(value, ast.Identifier) else value)
    except (KeyError, TypeError, ValueError) as e:
        raise SchemaError(f"Invalid Protobuf schema: option {option.name}: {e}") from None
