"""The one error of the schema types and the bounds every type module enforces on hostile input."""

# Schemas nested deeper than this (records in records, arrays of arrays, JSON Schema subschemas, Protobuf
# nested messages) are refused before any recursive parser sees them.
MAX_SCHEMA_DEPTH = 64
# JSON texts (Avro and JSON Schema) may nest this deep: an Avro record level costs three JSON levels
# (record, fields array, field object) and a JSON Schema level two (properties object, subschema).
MAX_JSON_DEPTH = 4 * MAX_SCHEMA_DEPTH
# References one schema may name (its own, not counting theirs).
MAX_REFERENCES = 256
# Differences one compared type keeps: a chain of message or subschema types repeats each difference below
# it at every level (as Confluent's diffs do), which would grow quadratically with the chain.
MAX_DIFFERENCES = 100


class SchemaError(ValueError):
    """An invalid schema; ``str(e)`` is the parser's reason (the REST layer answers 42201 with it)."""


def capped(diffs: list, compatible_kinds: frozenset[str]) -> list:
    """At most MAX_DIFFERENCES of ``diffs`` (objects with a ``kind``), keeping the verdict: when any is
    incompatible, the incompatible ones come first."""
    if len(diffs) <= MAX_DIFFERENCES:
        return diffs
    incompatible = [diff for diff in diffs if diff.kind not in compatible_kinds]
    return (incompatible or diffs)[:MAX_DIFFERENCES]
