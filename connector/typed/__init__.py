"""Typed columns: Avro, Protobuf and JSON records (Confluent's wire format, or bare) as Spark structs, and back.

Theory of operation: a *format module* (``avro_format``, ``protobuf_format``,
``json_format``) knows one schema language. It maps a schema to a Spark type
(``spark_type``), builds a decoder from a reader and a writer schema to the
Python values ``pyarrow.array`` takes for that type (``decoder``), derives a
schema from a Spark type for ``auto.register.schemas`` (``schema_for``) and
builds an encoder from ``to_pylist()`` values to bytes (``encoder``). Schemas
are parsed by the registry's own parsers (``broker_sim.registry.types``), so
the connector and the broker agree on what a schema means.

``connector.typed.columns`` strips Confluent's framing (magic byte 0, a 4-byte
big-endian schema id), fetches writer schemas from the registry
(``connector.typed.registry_client``) by id and turns a column of payloads into
one Arrow array, applying ``mode`` (FAILFAST / PERMISSIVE) to bad records.
"""
from __future__ import annotations

FORMATS = ("binary", "string", "json", "avro", "protobuf")
SCHEMA_TYPES = {"avro": "AVRO", "protobuf": "PROTOBUF", "json": "JSON"}  # format option -> registry schemaType


class RowMismatch(ValueError):
    """A value does not fit the schema it is written with (sink) — ``path`` names the field, dotted."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"field '{path}': {reason}" if path else reason)
        self.path = path
        self.reason = reason


def arrow_type(spark_type):
    """The Arrow type Spark's Arrow exchange uses for ``spark_type`` (timestamps in UTC microseconds)."""
    from pyspark.sql.pandas.types import to_arrow_type
    return to_arrow_type(spark_type, timezone="UTC")


def format_module(fmt: str):
    """The format module of a ``valueFormat`` / ``keyFormat`` value with a schema: avro, protobuf or json."""
    if fmt == "avro":
        from connector.typed import avro_format as module
    elif fmt == "protobuf":
        from connector.typed import protobuf_format as module
    elif fmt == "json":
        from connector.typed import json_format as module
    else:
        raise ValueError(f"format {fmt!r} has no schema")
    return module
