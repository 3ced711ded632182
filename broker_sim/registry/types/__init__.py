"""The schema types the registry accepts (AVRO, JSON Schema, PROTOBUF): parsing, canonical forms, compatibility.

Theory of operation.  ``parse(schema_type, text, references)`` hands the text to the type's module, which
validates it with the type's maintained parser (Apache ``avro``, ``jsonschema``, ``proto-schema-parser`` +
``google.protobuf``'s descriptor pool) and returns an immutable ``ParsedSchema``.  Two texts that differ only
in whitespace or key order share one ``canonical`` form; the registry compares schemas by it (registering an
identical schema again answers the existing id).  ``references`` maps each reference's name (Avro: the named
type's full name; Protobuf: the import path; JSON Schema: the ``$ref`` URL) to its already parsed schema.

``check_compatibility(level, new, previous)`` follows Confluent's ``SchemaValidatorBuilder``: BACKWARD asks
whether the new schema reads data written with the previous one (``new.isBackwardCompatible(old)``), FORWARD
whether the previous one reads data of the new one (``old.isBackwardCompatible(new)``), FULL both; the
``*_TRANSITIVE`` levels check every previous version, newest first, and stop at the first incompatible one.
Messages are each type's Confluent wording (Avro ``{errorType:'...', description:'...', additionalInfo:'...'}``,
JSON Schema ``{errorType:"...", description:"..."}``, Protobuf ``Difference{fullPath='...', type=...}``),
then ``{oldSchema: '...'}``; the caller adds ``{oldSchemaVersion: n}`` and ``{compatibility: '...'}``.

Everything hostile input controls is bounded: JSON nesting (``bounded_json``), schema nesting, through
references too (``MAX_SCHEMA_DEPTH``), the number of references (``MAX_REFERENCES``), the subschema pairs a
JSON Schema comparison visits and the differences each compared type keeps; no parser or checker recurses
unboundedly, and no scan or error message grows faster than the text.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from typing import Any

from broker_sim.registry.types.errors import MAX_REFERENCES, MAX_SCHEMA_DEPTH, SchemaError

__all__ = [
    "COMPATIBILITY_LEVELS",
    "MAX_REFERENCES",
    "MAX_SCHEMA_DEPTH",
    "SCHEMA_TYPES",
    "ParsedSchema",
    "SchemaError",
    "check_compatibility",
    "parse",
]

SCHEMA_TYPES = ("AVRO", "JSON", "PROTOBUF")
COMPATIBILITY_LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE",
                        "FULL", "FULL_TRANSITIVE")

# Confluent's SchemaValidatorBuilder cuts the old schema it quotes in a message at this many characters.
_MAX_SCHEMA_SIZE_FOR_LOGGING = 10 * 1024


@dataclasses.dataclass(frozen=True, eq=True)
class ParsedSchema:
    """One parsed, validated schema.  Equal (and hashed) by ``(schema_type, canonical)``.

    ``text`` is the text as registered; ``canonical`` the form identical schemas share; ``name`` the record
    name RecordNameStrategy uses (None when the schema has none).  ``references`` are the parsed schemas it
    was parsed with (name -> schema); ``model`` is the type module's own (AvroModel, JsonModel, ProtoModel),
    for that module only.
    """

    schema_type: str
    text: str = dataclasses.field(compare=False)
    canonical: str
    name: str | None = dataclasses.field(compare=False)
    references: Mapping[str, ParsedSchema] = dataclasses.field(compare=False, repr=False)
    model: Any = dataclasses.field(compare=False, repr=False)

    @property
    def stored_text(self) -> str:
        """The text the registry stores and GET answers, as Confluent stores ``canonicalString()``: Avro in
        Java's ``Schema.toString()`` form, Protobuf as .proto text (also when registered as a base64
        descriptor), JSON Schema as compact JSON with its keys in the order given (Jackson's ``toString``)."""
        if self.schema_type == "JSON":
            return json.dumps(json.loads(self.text), separators=(",", ":"), ensure_ascii=False)
        return self.canonical

    def normalized(self) -> ParsedSchema:
        """Confluent's ``normalize=true`` form of this schema (a ParsedSchema whose text is that form)."""
        return _module(self.schema_type).normalize(self)

    def formatted(self, fmt: str | None = None) -> str:
        """The text ``GET ...?format=fmt`` answers: None/"default" the registered text; Avro "resolved" with
        the referenced named types inlined; Protobuf "serialized" the base64 FileDescriptorProto.  An unknown
        format answers the registered text, as Confluent does (forward compatibility of formats)."""
        if fmt is None or fmt.strip() == "" or fmt.lower() == "default":
            return self.text
        return _module(self.schema_type).formatted(self, fmt.lower())


def parse(schema_type: str, text: str, references: Mapping[str, ParsedSchema] | None = None) -> ParsedSchema:
    """Parse and validate ``text`` as a ``schema_type`` schema.  Raises SchemaError naming the problem."""
    references = dict(references or {})
    if len(references) > MAX_REFERENCES:
        raise SchemaError(f"too many references: {len(references)} (at most {MAX_REFERENCES})")
    for ref_name, ref in references.items():
        if ref.schema_type != schema_type:
            raise SchemaError(f"reference {ref_name!r} is a {ref.schema_type} schema, not {schema_type}")
    if not isinstance(text, str):
        raise SchemaError("the schema must be a string")
    module = _module(schema_type)
    try:
        return module.parse(text, references)
    except RecursionError:
        # The depth bounds keep every parser far below the interpreter's limit; this only answers a caller
        # that was itself deep in the stack.
        raise SchemaError(f"Invalid {schema_type} schema: nested too deeply to parse") from None


def check_compatibility(level: str, new: ParsedSchema, previous: list[ParsedSchema]) -> list[str]:
    """The incompatibility messages of ``new`` against ``previous`` (oldest first) at ``level``; empty when
    compatible.  Non-transitive levels look at the last previous schema only."""
    if level not in COMPATIBILITY_LEVELS:
        raise ValueError(f"unknown compatibility level {level!r}")
    if level == "NONE" or not previous:
        return []
    checks = [previous[-1]] if not level.endswith("_TRANSITIVE") else list(reversed(previous))
    base = level.removesuffix("_TRANSITIVE")
    for old in checks:
        messages = _check_pair(base, new, old)
        if messages:
            return messages
    return []


def _check_pair(base: str, new: ParsedSchema, old: ParsedSchema) -> list[str]:
    messages: list[str] = []
    if base in ("FORWARD", "FULL"):
        messages += _format(_reader_errors(old, new, "old", "new"), old, quote_old=base == "FORWARD")
    if base in ("BACKWARD", "FULL"):
        messages += _format(_reader_errors(new, old, "new", "old"), old, quote_old=True)
    return messages


def _reader_errors(reader: ParsedSchema, writer: ParsedSchema, reader_role: str, writer_role: str) -> list[str]:
    """Confluent's ``reader.isBackwardCompatible(writer)``, its ``%s`` filled with the two roles."""
    if reader.schema_type != writer.schema_type:
        return ["Incompatible because of different schema type"]
    return _module(reader.schema_type).incompatibilities(reader, writer, reader_role, writer_role)


def _format(messages: list[str], old: ParsedSchema, quote_old: bool) -> list[str]:
    if messages and quote_old:
        if len(old.canonical) <= _MAX_SCHEMA_SIZE_FOR_LOGGING:
            messages.append(f"{{oldSchema: '{old.canonical}'}}")
        else:
            messages.append(f"{{oldSchema: <truncated to {_MAX_SCHEMA_SIZE_FOR_LOGGING} characters> "
                            f"'{old.canonical[:_MAX_SCHEMA_SIZE_FOR_LOGGING]}'}}")
    return messages


def _module(schema_type: str) -> Any:
    loader = _MODULES.get(schema_type)
    if loader is None:
        raise SchemaError(f"unknown schema type {schema_type!r}: one of {', '.join(SCHEMA_TYPES)}")
    return loader()


def _avro() -> Any:
    from broker_sim.registry.types import avro
    return avro


def _json() -> Any:
    from broker_sim.registry.types import json_schema
    return json_schema


def _protobuf() -> Any:
    from broker_sim.registry.types import protobuf
    return protobuf


# Each type module is imported on first use: a broker that never sees a Protobuf schema never loads protobuf.
_MODULES: dict[str, Callable[[], Any]] = {"AVRO": _avro, "JSON": _json, "PROTOBUF": _protobuf}
