"""Structural checks kafka-python's decoders leave to the caller.

kafka-python decodes a null array or string even where the schema says the
field is not nullable in that version (its decoders are shared with
responses, where being lenient is harmless).  Kafka's generated parsers
reject such a request, and the connection is closed; ``check_not_null`` does
the same for us, walking the decoded request once, with the per-(struct,
version) field lists cached so the walk costs a few attribute reads per
partition.
"""
from __future__ import annotations

_PLANS: dict[tuple[int, int], tuple] = {}


class MalformedRequest(ValueError):
    pass


def _plan(struct, version: int) -> tuple:
    key = (id(struct), version)  # schema structs live for the process and are not hashable
    cached = _PLANS.get(key)
    if cached is not None:
        return cached
    plan = []
    for field in struct._fields:
        if field.tag is not None or not field.for_version_q(version) or field.type_str == "uuid":
            continue  # kafka-python decodes the all-zero uuid as None; it is a valid value
        nullable = field.nullable_for_version_q(version)
        child = field if (field.is_struct() or field.is_struct_array()) else None
        if nullable and child is None:
            continue
        plan.append((field.name, nullable, child, field.is_struct_array()))
    _PLANS[key] = tuple(plan)
    return _PLANS[key]


def check_not_null(message, version: int) -> None:
    """Raise MalformedRequest naming the first non-nullable field that decoded as null."""
    for name, nullable, child, is_array in _plan(message._struct, version):
        value = getattr(message, name)
        if value is None:
            if nullable:
                continue
            raise MalformedRequest(f"non-nullable field {name} is null")
        if child is not None:
            for item in (value if is_array else (value,)):
                check_not_null(item, version)
