"""The ``_schemas`` records: byte-exact Confluent JSON out, tolerant decoding in."""
import logging

import pytest

from broker_sim.registry import records
from broker_sim.registry.records import (
    ClearSubjectValue, ConfigValue, DeleteSubjectValue, IdHighWaterValue, Key, ModeValue, Reference, SchemaValue,
)


@pytest.mark.parametrize("key, expected", [
    (records.schema_key("orders-value", 3), b'{"keytype":"SCHEMA","subject":"orders-value","version":3,"magic":1}'),
    (records.config_key(None), b'{"keytype":"CONFIG","magic":0}'),
    (records.config_key("s"), b'{"keytype":"CONFIG","subject":"s","magic":0}'),
    (records.mode_key(None), b'{"keytype":"MODE","magic":0}'),
    (records.mode_key("s"), b'{"keytype":"MODE","subject":"s","magic":0}'),
    (records.delete_subject_key("s"), b'{"keytype":"DELETE_SUBJECT","subject":"s","magic":0}'),
    (records.clear_subject_key("s"), b'{"keytype":"CLEAR_SUBJECT","subject":"s","magic":0}'),
    (records.clear_subject_key(None), b'{"keytype":"CLEAR_SUBJECT","magic":0}'),
    (Key(records.NOOP), b'{"keytype":"NOOP","magic":0}'),
    (records.ID_HIGH_WATER_KEY, b'{"keytype":"NOOP","magic":0,"pylog":"idHighWater"}'),
])
def test_keys_are_confluents_json_byte_for_byte(key, expected):
    assert records.encode_key(key) == expected
    assert records.decode_key(expected) == key


def test_non_ascii_subjects_are_utf8_not_escaped_as_jackson_writes_them():
    assert records.encode_key(records.schema_key("zoë", 1)) == \
        '{"keytype":"SCHEMA","subject":"zoë","version":1,"magic":1}'.encode()


@pytest.mark.parametrize("value, expected", [
    (SchemaValue("s", 1, 7, '"string"'),
     b'{"subject":"s","version":1,"id":7,"schema":"\\"string\\"","deleted":false}'),
    (SchemaValue("s", 2, 8, "syntax = \"proto3\";", "PROTOBUF", (Reference("a.proto", "a", 1),), deleted=True),
     b'{"subject":"s","version":2,"id":8,"schemaType":"PROTOBUF","references":[{"name":"a.proto",'
     b'"subject":"a","version":1}],"schema":"syntax = \\"proto3\\";","deleted":true}'),
    (ConfigValue(None, "FULL"), b'{"compatibilityLevel":"FULL"}'),
    (ConfigValue("s", "NONE", True), b'{"subject":"s","compatibilityLevel":"NONE","normalize":true}'),
    (ModeValue(None, "IMPORT"), b'{"mode":"IMPORT"}'),
    (ModeValue("s", "READONLY"), b'{"subject":"s","mode":"READONLY"}'),
    (DeleteSubjectValue("s", 4), b'{"subject":"s","version":4}'),
    (ClearSubjectValue("s"), b'{"subject":"s"}'),
    (ClearSubjectValue(None), b'{}'),
    (IdHighWaterValue(42), b'{"idHighWater":42}'),
    (None, None),
])
def test_values_are_confluents_json_byte_for_byte(value, expected):
    assert records.encode_value(value) == expected


@pytest.mark.parametrize("key, value", [
    (records.schema_key("s", 2), SchemaValue("s", 2, 9, "{}", "JSON", (Reference("r", "t", 3),), True)),
    (records.config_key("s"), ConfigValue("s", "BACKWARD_TRANSITIVE", False)),
    (records.mode_key(None), ModeValue(None, "READONLY")),
    (records.delete_subject_key("s"), DeleteSubjectValue("s", 2)),
    (records.clear_subject_key("s"), ClearSubjectValue("s")),
    (records.ID_HIGH_WATER_KEY, IdHighWaterValue(5)),
    (records.schema_key("s", 2), None),
])
def test_every_record_decodes_to_what_was_encoded(key, value):
    assert records.decode(*records.encode(key, value)) == (key, value)


def test_records_a_confluent_registry_wrote_are_read():
    """Confluent's own variants: a null subject written out, fields pylog does not use (md5, metadata, ...)."""
    key, value = records.decode(b'{"keytype":"CONFIG","subject":null,"magic":0}',
                                b'{"compatibilityLevel":"FULL","alias":null,"compatibilityGroup":"g"}')
    assert key == records.config_key(None)
    assert value.compatibility_level == "FULL" and value.extra["compatibilityGroup"] == "g"
    key, value = records.decode(
        b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}',
        b'{"subject":"s","version":1,"id":3,"md5":"abc","metadata":{"properties":{}},"schema":"\\"int\\""}')
    assert value == SchemaValue("s", 1, 3, '"int"')
    assert records.decode(b'{"keytype":"NOOP","magic":0}', None) == (Key(records.NOOP), None)


def test_unknown_config_fields_survive_a_rewrite():
    _, value = records.decode(b'{"keytype":"CONFIG","magic":0}', b'{"compatibilityLevel":"FULL","alias":"x"}')
    assert records.encode_value(value) == b'{"compatibilityLevel":"FULL","alias":"x"}'


@pytest.mark.parametrize("key, value", [
    (b"not json", b"{}"),
    (b'["a list"]', b"{}"),
    (b'{"keytype":"CONTEXT","tenant":"t","context":"c","magic":0}', b"{}"),
    (b'{"keytype":"SCHEMA","subject":"s","version":0,"magic":1}', b"{}"),
    (b'{"keytype":"SCHEMA","subject":"s","version":"1","magic":1}', b"{}"),
    (b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}', b'{"subject":"s","version":1}'),
    (b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}',
     b'{"subject":"s","version":1,"id":99999999999,"schema":"x"}'),
    (b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}', b'\xff\xfe'),
    (b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}',
     b'{"subject":"s","version":1,"id":1,"schema":"x","deleted":"yes"}'),
    (b'{"keytype":"MODE","magic":0}', b'{"mode":7}'),
    (b'{"keytype":"DELETE_SUBJECT","subject":"s","magic":0}', b'[1]'),
    (b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}', b"[" * 100000),
    (None, b"{}"),
])
def test_what_is_not_a_registry_record_is_skipped_with_a_log_line(key, value, caplog):
    with caplog.at_level(logging.WARNING, logger="broker_sim.registry.records"):
        assert records.decode(key, value, offset=12) is None
    assert "offset 12" in caplog.text
