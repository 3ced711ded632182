"""The ``_schemas`` records, byte for byte as Confluent Schema Registry's ``KafkaStore`` writes them.

Every record's key and value are compact JSON (Jackson's ``ObjectMapper`` output: no spaces, UTF-8 as is).
The key names the record type in ``keytype``, a ``magic`` (1 for SCHEMA, 0 for the others) and what it is
about; a null value is a tombstone (compaction then drops every earlier record of that key)::

    SCHEMA          {"keytype":"SCHEMA","subject":"s","version":1,"magic":1}
                    {"subject":"s","version":1,"id":7,"schemaType":"PROTOBUF",
                     "references":[{"name":"n","subject":"r","version":1}],"schema":"...","deleted":false}
                    (schemaType absent for AVRO, references absent when empty; ``deleted`` = soft-deleted)
    CONFIG          {"keytype":"CONFIG","subject":"s","magic":0}   (no "subject": the global config)
                    {"subject":"s","compatibilityLevel":"FULL","normalize":true}
    MODE            {"keytype":"MODE","subject":"s","magic":0}     (no "subject": the global mode)
                    {"subject":"s","mode":"READONLY"}
    DELETE_SUBJECT  {"keytype":"DELETE_SUBJECT","subject":"s","magic":0}
                    {"subject":"s","version":3}   (every version up to 3 is soft-deleted)
    CLEAR_SUBJECT   {"keytype":"CLEAR_SUBJECT","subject":"s","magic":0}   (no "subject": every subject)
                    {"subject":"s"}               (forget the soft-deleted versions; written on entering IMPORT)
    NOOP            {"keytype":"NOOP","magic":0}   value null (Confluent's reader-position marker)

pylog adds one record of its own, the id high-water mark, so that ids stay unique after a permanent delete
and compaction removed the schema with the highest id::

    ID_HIGH_WATER   {"keytype":"NOOP","magic":0,"pylog":"idHighWater"}   {"idHighWater":42}

It is a NOOP key for Confluent's reader (``KafkaStoreReaderThread.doWork``): a key that deserializes to a
``NoopKey`` (whose ``equals`` compares the class only) only moves the reader's offset, and one that fails to
deserialize (Jackson refusing the unknown ``pylog`` field) is logged and skipped; the value is never read.
One key for the whole log, so compaction keeps only the last.

Decoding never raises on what is in the log: ``decode`` returns ``None`` for a key or value it cannot read
(unknown keytype, not JSON, wrong field types) after logging one line, and replay goes on.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

SCHEMA = "SCHEMA"
CONFIG = "CONFIG"
MODE = "MODE"
DELETE_SUBJECT = "DELETE_SUBJECT"
CLEAR_SUBJECT = "CLEAR_SUBJECT"
NOOP = "NOOP"
ID_HIGH_WATER = "ID_HIGH_WATER"  # pylog's; a NOOP key on the wire
_HIGH_WATER_TAG = "idHighWater"
INT32_MAX = (1 << 31) - 1


class RecordError(ValueError):
    """A key or value that is not a record of the registry (the reason names the problem)."""


@dataclass(frozen=True)
class Key:
    keytype: str
    subject: str | None = None  # None: the global CONFIG / MODE, and NOOP
    version: int | None = None  # SCHEMA only


@dataclass(frozen=True)
class Reference:
    name: str
    subject: str
    version: int

    def to_json(self) -> dict:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True)
class SchemaValue:
    subject: str
    version: int
    id: int
    schema: str
    schema_type: str = "AVRO"
    references: tuple[Reference, ...] = ()
    deleted: bool = False


@dataclass(frozen=True)
class ConfigValue:
    subject: str | None
    compatibility_level: str | None = None
    normalize: bool | None = None
    extra: dict = field(default_factory=dict, compare=False)  # Confluent's fields pylog does not use, kept


@dataclass(frozen=True)
class ModeValue:
    subject: str | None
    mode: str


@dataclass(frozen=True)
class DeleteSubjectValue:
    subject: str
    version: int


@dataclass(frozen=True)
class ClearSubjectValue:
    subject: str | None


@dataclass(frozen=True)
class IdHighWaterValue:
    id_high_water: int


def _dumps(obj: dict) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def schema_key(subject: str, version: int) -> Key:
    return Key(SCHEMA, subject, version)


def config_key(subject: str | None) -> Key:
    return Key(CONFIG, subject)


def mode_key(subject: str | None) -> Key:
    return Key(MODE, subject)


def delete_subject_key(subject: str) -> Key:
    return Key(DELETE_SUBJECT, subject)


def clear_subject_key(subject: str | None) -> Key:
    return Key(CLEAR_SUBJECT, subject)


ID_HIGH_WATER_KEY = Key(ID_HIGH_WATER)


def encode_key(key: Key) -> bytes:
    if key.keytype == SCHEMA:
        return _dumps({"keytype": SCHEMA, "subject": key.subject, "version": key.version, "magic": 1})
    if key.keytype == ID_HIGH_WATER:
        return _dumps({"keytype": NOOP, "magic": 0, "pylog": _HIGH_WATER_TAG})
    if key.keytype == NOOP:
        return _dumps({"keytype": NOOP, "magic": 0})
    obj: dict = {"keytype": key.keytype}
    if key.subject is not None:  # Jackson's Include.NON_EMPTY
        obj["subject"] = key.subject
    obj["magic"] = 0
    return _dumps(obj)


def encode_value(value) -> bytes | None:
    """The value's JSON; None (a tombstone) for None."""
    if value is None:
        return None
    if isinstance(value, SchemaValue):
        obj: dict = {"subject": value.subject, "version": value.version, "id": value.id}
        if value.schema_type != "AVRO":
            obj["schemaType"] = value.schema_type
        if value.references:
            obj["references"] = [r.to_json() for r in value.references]
        obj["schema"] = value.schema
        obj["deleted"] = value.deleted
        return _dumps(obj)
    if isinstance(value, ConfigValue):
        obj = {}
        if value.subject is not None:
            obj["subject"] = value.subject
        if value.compatibility_level is not None:
            obj["compatibilityLevel"] = value.compatibility_level
        if value.normalize is not None:
            obj["normalize"] = value.normalize
        for name, item in value.extra.items():
            obj.setdefault(name, item)
        return _dumps(obj)
    if isinstance(value, ModeValue):
        obj = {} if value.subject is None else {"subject": value.subject}
        obj["mode"] = value.mode
        return _dumps(obj)
    if isinstance(value, DeleteSubjectValue):
        return _dumps({"subject": value.subject, "version": value.version})
    if isinstance(value, ClearSubjectValue):
        return _dumps({} if value.subject is None else {"subject": value.subject})
    if isinstance(value, IdHighWaterValue):
        return _dumps({_HIGH_WATER_TAG: value.id_high_water})
    raise TypeError(f"not a registry value: {value!r}")


def encode(key: Key, value) -> tuple[bytes, bytes | None]:
    return encode_key(key), encode_value(value)


def _object(data: bytes, what: str) -> dict:
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise RecordError(f"{what} is not JSON: {e}") from None
    if not isinstance(obj, dict):
        raise RecordError(f"{what} is not a JSON object")
    return obj


def _str(obj: dict, name: str, optional: bool = False) -> str | None:
    item = obj.get(name)
    if item is None and optional:
        return None
    if not isinstance(item, str):
        raise RecordError(f"field {name!r} is not a string: {item!r}")
    return item


def _int(obj: dict, name: str, low: int = 0) -> int:
    item = obj.get(name)
    if not isinstance(item, int) or isinstance(item, bool) or not low <= item <= INT32_MAX:
        raise RecordError(f"field {name!r} is not an int in [{low}, 2^31-1]: {item!r}")
    return item


def decode_key(data: bytes) -> Key:
    obj = _object(data, "key")
    keytype = obj.get("keytype")
    if keytype == SCHEMA:
        return Key(SCHEMA, _str(obj, "subject"), _int(obj, "version", 1))
    if keytype in (CONFIG, MODE, CLEAR_SUBJECT):
        return Key(keytype, _str(obj, "subject", optional=True))
    if keytype == DELETE_SUBJECT:
        return Key(keytype, _str(obj, "subject"))
    if keytype == NOOP:
        return ID_HIGH_WATER_KEY if obj.get("pylog") == _HIGH_WATER_TAG else Key(NOOP)
    raise RecordError(f"unknown keytype {keytype!r}")


def _references(obj: dict) -> tuple[Reference, ...]:
    items = obj.get("references") or []
    if not isinstance(items, list):
        raise RecordError("field 'references' is not a list")
    refs = []
    for item in items:
        if not isinstance(item, dict):
            raise RecordError("a reference is not an object")
        refs.append(Reference(_str(item, "name"), _str(item, "subject"), _int(item, "version", 1)))
    return tuple(refs)


def decode_value(key: Key, data: bytes | None):
    """The value of ``key``'s record; None for a tombstone (and for NOOP, which carries nothing)."""
    if data is None or key.keytype == NOOP:
        return None
    obj = _object(data, "value")
    if key.keytype == SCHEMA:
        deleted = obj.get("deleted", False)
        if not isinstance(deleted, bool):
            raise RecordError(f"field 'deleted' is not a boolean: {deleted!r}")
        return SchemaValue(subject=_str(obj, "subject"), version=_int(obj, "version", 1), id=_int(obj, "id"),
                           schema=_str(obj, "schema"), schema_type=_str(obj, "schemaType", True) or "AVRO",
                           references=_references(obj), deleted=deleted)
    if key.keytype == CONFIG:
        normalize = obj.get("normalize")
        if normalize is not None and not isinstance(normalize, bool):
            raise RecordError(f"field 'normalize' is not a boolean: {normalize!r}")
        extra = {k: v for k, v in obj.items() if k not in ("subject", "compatibilityLevel", "normalize")}
        return ConfigValue(_str(obj, "subject", True), _str(obj, "compatibilityLevel", True), normalize, extra)
    if key.keytype == MODE:
        return ModeValue(_str(obj, "subject", True), _str(obj, "mode"))
    if key.keytype == DELETE_SUBJECT:
        return DeleteSubjectValue(_str(obj, "subject"), _int(obj, "version", 0))
    if key.keytype == CLEAR_SUBJECT:
        return ClearSubjectValue(_str(obj, "subject", True))
    if key.keytype == ID_HIGH_WATER:
        return IdHighWaterValue(_int(obj, _HIGH_WATER_TAG))
    raise RecordError(f"unknown keytype {key.keytype!r}")


def decode(key: bytes | None, value: bytes | None, offset: int = -1) -> tuple[Key, object] | None:
    """``(key, value)`` of one ``_schemas`` record, or None (logged) when it is not one the registry reads."""
    if key is None:
        log.warning("_schemas offset %d: a record without a key, skipped", offset)
        return None
    try:
        parsed = decode_key(key)
        return parsed, decode_value(parsed, value)
    except RecordError as e:
        log.warning("_schemas offset %d: unreadable record skipped (%s): key %r", offset, e, key[:200])
        return None
