"""FileDescriptorProto -> .proto text, deterministically: the canonical text of a Protobuf schema.

The input is a descriptor the pool resolved (``FileDescriptor.CopyToProto``): type names fully qualified,
field types set.  Names in the file's own package are printed relative to it, others in full; map entry
messages print as ``map<K, V>`` fields, proto3 synthetic oneofs as ``optional``.  Within a message: options,
fields (a oneof where its first field is), reserved ranges and names, extension ranges, enums, messages,
``extend`` blocks.  ``normalized=True`` (Confluent's normalize) also sorts imports, fields by number, and
types and services by name.  Recursion follows message nesting, which parse bounded by MAX_SCHEMA_DEPTH.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2

from broker_sim.registry.types.protobuf_text import ENUM_NUMBER_MAX, FIELD_NUMBER_MAX, SCALAR_TYPES

F = descriptor_pb2.FieldDescriptorProto
_SCALAR_NAMES = {number: name for name, number in SCALAR_TYPES.items()}
_LABEL_NAMES = {F.LABEL_OPTIONAL: "optional", F.LABEL_REQUIRED: "required", F.LABEL_REPEATED: "repeated"}
_INDENT = "  "


def print_file(fdp: descriptor_pb2.FileDescriptorProto, normalized: bool = False) -> str:
    printer = _Printer(fdp, normalized)
    return printer.file()


def quote(text: str) -> str:
    """A proto string literal for ``text``."""
    out = []
    for char in text:
        if char in '"\\':
            out.append("\\" + char)
        elif char == "\n":
            out.append("\\n")
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\{ord(char):03o}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


class _Printer:
    def __init__(self, fdp: descriptor_pb2.FileDescriptorProto, normalized: bool) -> None:
        self.fdp = fdp
        self.normalized = normalized
        self.proto3 = fdp.syntax == "proto3"
        self.lines: list[str] = []

    def emit(self, depth: int, text: str) -> None:
        self.lines.append(_INDENT * depth + text)

    def file(self) -> str:
        fdp = self.fdp
        self.emit(0, f'syntax = "{"proto3" if self.proto3 else "proto2"}";')
        if fdp.package:
            self.emit(0, f"package {fdp.package};")
        imports = []
        for index, path in enumerate(fdp.dependency):
            kind = "public " if index in fdp.public_dependency else "weak " if index in fdp.weak_dependency else ""
            imports.append(f"import {kind}{quote(path)};")
        if imports:
            self.lines.append("")
            self.lines.extend(sorted(imports) if self.normalized else imports)
        options = self.options(fdp.options)
        if options:
            self.lines.append("")
            self.lines.extend(f"option {option};" for option in options)
        for enum in self.ordered(fdp.enum_type):
            self.lines.append("")
            self.enum(enum, 0)
        for message in self.ordered(fdp.message_type):
            self.lines.append("")
            self.message(message, 0)
        if fdp.extension:
            self.lines.append("")
            self.extensions(fdp.extension, 0)
        for service in self.ordered(fdp.service):
            self.lines.append("")
            self.service(service)
        return "\n".join(self.lines) + "\n"

    def ordered(self, items: Any) -> list[Any]:
        return sorted(items, key=lambda item: item.name) if self.normalized else list(items)

    def type_name(self, name: str) -> str:
        name = name.lstrip(".")
        package = self.fdp.package
        if package and name.startswith(package + "."):
            return name[len(package) + 1:]
        return name

    def message(self, message: descriptor_pb2.DescriptorProto, depth: int, group_header: str = "") -> None:
        self.emit(depth, group_header or f"message {message.name} {{")
        inner = depth + 1
        for option in self.options(message.options, skip=("map_entry",)):
            self.emit(inner, f"option {option};")
        entries = {m.name: m for m in message.nested_type if m.options.map_entry}
        groups = {m.name for m in message.nested_type if any(
            f.type == F.TYPE_GROUP and f.type_name.rsplit(".", 1)[-1] == m.name for f in message.field)}
        fields = sorted(message.field, key=lambda f: f.number) if self.normalized else list(message.field)
        printed_oneofs: set[int] = set()
        for field in fields:
            real_oneof = field.HasField("oneof_index") and not field.proto3_optional
            if not real_oneof:
                self.field(field, message, entries, inner)
            elif field.oneof_index not in printed_oneofs:
                printed_oneofs.add(field.oneof_index)
                self.emit(inner, f"oneof {message.oneof_decl[field.oneof_index].name} {{")
                for option in self.options(message.oneof_decl[field.oneof_index].options):
                    self.emit(inner + 1, f"option {option};")
                for member in fields:
                    if member.HasField("oneof_index") and member.oneof_index == field.oneof_index:
                        self.field(member, message, entries, inner + 1, in_oneof=True)
                self.emit(inner, "}")
        if message.reserved_range:
            self.emit(inner, "reserved " + ", ".join(
                _range(r.start, r.end - 1, FIELD_NUMBER_MAX) for r in message.reserved_range) + ";")
        if message.reserved_name:
            self.emit(inner, "reserved " + ", ".join(quote(n) for n in message.reserved_name) + ";")
        if message.extension_range:
            self.emit(inner, "extensions " + ", ".join(
                _range(r.start, r.end - 1, FIELD_NUMBER_MAX) for r in message.extension_range) + ";")
        for enum in self.ordered(message.enum_type):
            self.enum(enum, inner)
        for nested in self.ordered(message.nested_type):
            if nested.name not in entries and nested.name not in groups:
                self.message(nested, inner)
        self.extensions(message.extension, inner)
        self.emit(depth, "}")

    def field(self, field: descriptor_pb2.FieldDescriptorProto, message: descriptor_pb2.DescriptorProto,
              entries: dict[str, descriptor_pb2.DescriptorProto], depth: int, in_oneof: bool = False) -> None:
        entry = entries.get(field.type_name.rsplit(".", 1)[-1]) if field.type == F.TYPE_MESSAGE else None
        options = self.field_options(field)
        suffix = f" [{', '.join(options)}]" if options else ""
        if entry is not None and field.label == F.LABEL_REPEATED:
            key, value = (self.field_type(f) for f in sorted(entry.field, key=lambda f: f.number))
            self.emit(depth, f"map<{key}, {value}> {field.name} = {field.number}{suffix};")
            return
        label = self.label(field, in_oneof)
        if field.type == F.TYPE_GROUP:
            nested = next(m for m in message.nested_type if m.name == field.type_name.rsplit(".", 1)[-1])
            self.message(nested, depth, f"{label}group {nested.name} = {field.number}{suffix} {{")
            return
        self.emit(depth, f"{label}{self.field_type(field)} {field.name} = {field.number}{suffix};")

    def label(self, field: descriptor_pb2.FieldDescriptorProto, in_oneof: bool) -> str:
        if in_oneof:
            return ""
        if field.label == F.LABEL_REPEATED:
            return "repeated "
        if self.proto3:
            return "optional " if field.proto3_optional else ""
        return _LABEL_NAMES[field.label] + " "

    def field_type(self, field: descriptor_pb2.FieldDescriptorProto) -> str:
        if field.type in _SCALAR_NAMES:
            return _SCALAR_NAMES[field.type]
        return self.type_name(field.type_name)

    def field_options(self, field: descriptor_pb2.FieldDescriptorProto) -> list[str]:
        options = []
        if field.HasField("default_value"):
            value = field.default_value
            literal = quote(value) if field.type == F.TYPE_STRING else f'"{value}"' if field.type == F.TYPE_BYTES \
                else value
            options.append(f"default = {literal}")
        if field.HasField("json_name") and field.json_name != _default_json_name(field.name):
            options.append(f"json_name = {quote(field.json_name)}")
        return options + self.options(field.options)

    def enum(self, enum: descriptor_pb2.EnumDescriptorProto, depth: int) -> None:
        self.emit(depth, f"enum {enum.name} {{")
        for option in self.options(enum.options):
            self.emit(depth + 1, f"option {option};")
        values = sorted(enum.value, key=lambda v: v.number) if self.normalized else list(enum.value)
        for value in values:
            options = self.options(value.options)
            suffix = f" [{', '.join(options)}]" if options else ""
            self.emit(depth + 1, f"{value.name} = {value.number}{suffix};")
        if enum.reserved_range:
            self.emit(depth + 1, "reserved " + ", ".join(
                _range(r.start, r.end, ENUM_NUMBER_MAX) for r in enum.reserved_range) + ";")
        if enum.reserved_name:
            self.emit(depth + 1, "reserved " + ", ".join(quote(n) for n in enum.reserved_name) + ";")
        self.emit(depth, "}")

    def extensions(self, fields: Any, depth: int) -> None:
        by_extendee: dict[str, list[descriptor_pb2.FieldDescriptorProto]] = {}
        for field in fields:
            by_extendee.setdefault(field.extendee, []).append(field)
        for extendee, members in by_extendee.items():
            self.emit(depth, f"extend {self.type_name(extendee)} {{")
            for field in members:
                self.field(field, descriptor_pb2.DescriptorProto(), {}, depth + 1)
            self.emit(depth, "}")

    def service(self, service: descriptor_pb2.ServiceDescriptorProto) -> None:
        self.emit(0, f"service {service.name} {{")
        for option in self.options(service.options):
            self.emit(1, f"option {option};")
        for method in self.ordered(service.method):
            request = ("stream " if method.client_streaming else "") + self.type_name(method.input_type)
            response = ("stream " if method.server_streaming else "") + self.type_name(method.output_type)
            options = self.options(method.options)
            if options:
                self.emit(1, f"rpc {method.name}({request}) returns ({response}) {{")
                for option in options:
                    self.emit(2, f"option {option};")
                self.emit(1, "}")
            else:
                self.emit(1, f"rpc {method.name}({request}) returns ({response});")
        self.emit(0, "}")

    def options(self, options: Any, skip: tuple[str, ...] = ()) -> list[str]:
        """``name = value`` of every standard option set, in field-number order (custom ones are dropped)."""
        found = []
        for descriptor, value in options.ListFields():
            if descriptor.is_extension or descriptor.name in skip or descriptor.message_type is not None:
                continue
            if descriptor.is_repeated:
                continue
            if descriptor.enum_type is not None:
                text = descriptor.enum_type.values_by_number[value].name
            elif isinstance(value, bool):
                text = "true" if value else "false"
            elif isinstance(value, str):
                text = quote(value)
            else:
                text = str(value)
            found.append(f"{descriptor.name} = {text}")
        return found


def _range(start: int, end: int, maximum: int) -> str:
    if start == end:
        return str(start)
    return f"{start} to {'max' if end >= maximum else end}"


def _default_json_name(name: str) -> str:
    """protoc's json_name for a field: lowerCamelCase of its name."""
    out, upper = [], False
    for char in name:
        if char == "_":
            upper = True
        elif upper:
            out.append(char.upper())
            upper = False
        else:
            out.append(char)
    return "".join(out)
