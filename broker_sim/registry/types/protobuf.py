"""Protobuf schemas: .proto text or a base64 FileDescriptorProto, validated by google.protobuf's descriptor pool.

confluent-kafka's ProtobufSerializer registers a schema as the base64 of its serialized FileDescriptorProto
and each imported file as a reference named by its import path (except the well-known google/protobuf,
google/type and confluent/ files, skipped by default, which every pool here knows); Confluent's registry
also accepts .proto text.  Both become a FileDescriptorProto (text through ``protobuf_text``), which is
added, after its references and the well-known files, to a fresh DescriptorPool: unresolved types, duplicate
field numbers, missing imports are refused with the pool's reason.  The pool's resolved copy of the file
(type names fully qualified) is what the schema keeps.

- ``canonical``: that file printed as .proto text (``protobuf_print``), so the text and the base64 forms of
  one schema share it.  ``formatted("serialized")``: the base64 FileDescriptorProto, as the client's
  deserializer asks for it.  ``name``: the full name of the first message.
- Compatibility: ``protobuf_diff``, after Confluent's protobuf SchemaDiff.
"""

from __future__ import annotations

import base64
import binascii
import importlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.message import DecodeError

from broker_sim.registry.types import ParsedSchema
from broker_sim.registry.types.errors import MAX_SCHEMA_DEPTH, SchemaError
from broker_sim.registry.types.protobuf_print import print_file
from broker_sim.registry.types.protobuf_text import parse_text

_WELL_KNOWN_MODULES = (
    "google.protobuf.any_pb2", "google.protobuf.source_context_pb2", "google.protobuf.type_pb2",
    "google.protobuf.api_pb2", "google.protobuf.descriptor_pb2", "google.protobuf.duration_pb2",
    "google.protobuf.empty_pb2", "google.protobuf.field_mask_pb2", "google.protobuf.struct_pb2",
    "google.protobuf.timestamp_pb2", "google.protobuf.wrappers_pb2",
    # googleapis-common-protos, when installed (confluent-kafka's protobuf extra brings it)
    "google.type.calendar_period_pb2", "google.type.color_pb2", "google.type.date_pb2",
    "google.type.datetime_pb2", "google.type.dayofweek_pb2", "google.type.expr_pb2", "google.type.fraction_pb2",
    "google.type.latlng_pb2", "google.type.money_pb2", "google.type.month_pb2",
    "google.type.postal_address_pb2", "google.type.quaternion_pb2", "google.type.timeofday_pb2",
)
# The pool name of the file being parsed: no import path a user writes looks like it.
_SCHEMA_FILE = "<schema>.proto"
_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]+")


def _well_known() -> dict[str, descriptor_pb2.FileDescriptorProto]:
    files: dict[str, descriptor_pb2.FileDescriptorProto] = {}
    for name in _WELL_KNOWN_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        files[module.DESCRIPTOR.name] = descriptor_pb2.FileDescriptorProto.FromString(module.DESCRIPTOR.serialized_pb)
    return files


# The files Confluent's registry knows besides google's (its ProtobufSchema's known dependencies), which
# confluent-kafka's serializer never registers as references: field metadata and the Decimal type.
_CONFLUENT_FILES = {
    "confluent/meta.proto": """
        syntax = "proto3";
        package confluent;
        import "google/protobuf/descriptor.proto";
        option go_package = "../confluent";
        message Meta { string doc = 1; map<string, string> params = 2; repeated string tags = 3; }
        extend google.protobuf.FileOptions { Meta file_meta = 1088; }
        extend google.protobuf.MessageOptions { Meta message_meta = 1088; }
        extend google.protobuf.FieldOptions { Meta field_meta = 1088; }
        extend google.protobuf.EnumOptions { Meta enum_meta = 1088; }
        extend google.protobuf.EnumValueOptions { Meta enum_value_meta = 1088; }
    """,
    "confluent/type/decimal.proto": """
        syntax = "proto3";
        package confluent.type;
        option go_package = "../types";
        message Decimal { bytes value = 1; uint32 precision = 2; int32 scale = 3; }
    """,
}


def _known_files() -> dict[str, descriptor_pb2.FileDescriptorProto]:
    files = _well_known()
    for path, text in _CONFLUENT_FILES.items():
        files[path] = parse_text(text)
        files[path].name = path
    return files


WELL_KNOWN_FILES = _known_files()


@dataclass(frozen=True)
class ProtoModel:
    """What ``parse`` keeps: the resolved file, and every referenced schema, transitively, by import path,
    dependencies first."""

    file: descriptor_pb2.FileDescriptorProto
    dependencies: tuple[tuple[str, ParsedSchema], ...]


def parse(text: str, references: Mapping[str, ParsedSchema]) -> ParsedSchema:
    fdp = _decode(text)
    if fdp is None:
        fdp = parse_text(text)
    _check_nesting(fdp)
    dependencies = _dependencies(references)
    resolved = _resolve(fdp, dependencies)
    first = resolved.message_type[0].name if resolved.message_type else None
    name = None if first is None else f"{resolved.package}.{first}" if resolved.package else first
    return ParsedSchema(
        schema_type="PROTOBUF",
        text=text,
        canonical=print_file(resolved),
        name=name,
        references=dict(references),
        model=ProtoModel(resolved, dependencies),
    )


def normalize(parsed: ParsedSchema) -> ParsedSchema:
    return parse(print_file(parsed.model.file, normalized=True), parsed.references)


def formatted(parsed: ParsedSchema, fmt: str) -> str:
    if fmt == "serialized":
        return base64.standard_b64encode(parsed.model.file.SerializeToString(deterministic=True)).decode("ascii")
    return parsed.text


def incompatibilities(reader: ParsedSchema, writer: ParsedSchema, reader_role: str, writer_role: str) -> list[str]:
    """Confluent's ``reader.isBackwardCompatible(writer)``: the diff from writer (original) to reader."""
    from broker_sim.registry.types import protobuf_diff
    return [str(diff) for diff in protobuf_diff.compare(writer.model, reader.model)
            if diff.kind not in protobuf_diff.COMPATIBLE_CHANGES]


def _decode(text: str) -> descriptor_pb2.FileDescriptorProto | None:
    """The FileDescriptorProto ``text`` is the base64 of, or None when it is not one (then it is .proto text)."""
    if not _BASE64.fullmatch(text):
        return None
    try:
        data = base64.b64decode("".join(text.split()), validate=True)
        fdp = descriptor_pb2.FileDescriptorProto()
        fdp.ParseFromString(data)
    except (binascii.Error, ValueError, DecodeError):
        return None
    return fdp


def _check_nesting(fdp: descriptor_pb2.FileDescriptorProto) -> None:
    stack = [(message, 1) for message in fdp.message_type]
    while stack:
        message, depth = stack.pop()
        if depth > MAX_SCHEMA_DEPTH:
            raise SchemaError(f"Invalid Protobuf schema: messages nested deeper than {MAX_SCHEMA_DEPTH} levels")
        stack.extend((nested, depth + 1) for nested in message.nested_type)


def _dependencies(references: Mapping[str, ParsedSchema]) -> tuple[tuple[str, ParsedSchema], ...]:
    ordered: dict[str, ParsedSchema] = {}
    for ref_name, ref in references.items():
        for path, dependency in (*ref.model.dependencies, (ref_name, ref)):
            ordered.setdefault(path, dependency)
    return tuple(ordered.items())


def _resolve(fdp: descriptor_pb2.FileDescriptorProto,
             dependencies: tuple[tuple[str, ParsedSchema], ...]) -> descriptor_pb2.FileDescriptorProto:
    """Add the file to a fresh pool after the well-known files and its references; its resolved copy."""
    pool = descriptor_pool.DescriptorPool()
    original_name = fdp.name
    provided = {path for path, _ in dependencies} | {original_name}
    loaded: set[str] = set()
    try:
        for path, dependency in dependencies:
            file = descriptor_pb2.FileDescriptorProto()
            file.CopyFrom(dependency.model.file)
            file.name = path
            add_well_known(pool, file.dependency, provided, loaded)
            pool.Add(file)
        add_well_known(pool, fdp.dependency, provided, loaded)
        candidate = descriptor_pb2.FileDescriptorProto()
        candidate.CopyFrom(fdp)
        candidate.name = _SCHEMA_FILE
        pool.Add(candidate)
    except (TypeError, ValueError) as e:
        raise SchemaError(f"Invalid Protobuf schema: {_reason(e)}") from None
    resolved = descriptor_pb2.FileDescriptorProto()
    pool.FindFileByName(_SCHEMA_FILE).CopyToProto(resolved)
    resolved.name = original_name
    return resolved


def add_well_known(pool: descriptor_pool.DescriptorPool, imports: Iterable[str], provided: set[str],
                    loaded: set[str]) -> None:
    """Add the well-known files among ``imports`` (and theirs) that no reference provides, each once."""
    pending = [path for path in imports if path in WELL_KNOWN_FILES]
    while pending:
        path = pending[-1]
        if path in loaded or path in provided:
            pending.pop()
            continue
        missing = [d for d in WELL_KNOWN_FILES[path].dependency
                   if d in WELL_KNOWN_FILES and d not in loaded and d not in provided]
        if missing:
            pending.extend(missing)
            continue
        pending.pop()
        pool.Add(WELL_KNOWN_FILES[path])
        loaded.add(path)


def _reason(error: Exception) -> str:
    return str(error).removeprefix("Couldn't build proto file into descriptor pool: ")
