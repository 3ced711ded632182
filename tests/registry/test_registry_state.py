"""RegistryState: replaying ``_schemas`` records, what each record does, and ids that are never reused."""
import json

from broker_sim.registry import records
from broker_sim.registry.records import (
    ClearSubjectValue, ConfigValue, DeleteSubjectValue, IdHighWaterValue, ModeValue, Reference, SchemaValue,
)
from broker_sim.registry.state import RegistryState

STRING = '"string"'
RECORD = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})
USES_R = json.dumps({"type": "record", "name": "Outer", "fields": [{"name": "r", "type": "R"}]})


def replay(*pairs) -> RegistryState:
    state = RegistryState()
    for offset, (key, value) in enumerate(pairs):
        state.apply(offset, *records.encode(key, value))
    return state


def schema(subject, version, schema_id, text=STRING, deleted=False, refs=()):
    return records.schema_key(subject, version), SchemaValue(subject, version, schema_id, text, "AVRO", refs, deleted)


def test_schema_records_make_subjects_versions_and_ids():
    state = replay(schema("a", 1, 1), schema("b", 1, 1), schema("a", 2, 2, RECORD))
    assert state.subjects() == ["a", "b"]
    assert state.versions("a") == [1, 2]
    assert state.latest("a").id == 2
    stored = state.schema_by_id(1)
    assert (stored.id, stored.schema_type, stored.text, stored.references) == (1, "AVRO", STRING, ())
    assert stored.parsed is not None and stored.parsed.schema_type == "AVRO"
    assert state.subject_versions_of_id(1) == [("a", 1), ("b", 1)]
    assert state.next_id == 3


def test_a_soft_deleted_version_is_hidden_unless_asked_for():
    state = replay(schema("a", 1, 1), schema("a", 2, 2, RECORD), schema("a", 1, 1, deleted=True))
    assert state.versions("a") == [2]
    assert state.versions("a", include_deleted=True) == [1, 2]
    assert state.versions("a", deleted_only=True) == [1]
    assert state.subject_versions_of_id(1) == []
    assert state.subject_versions_of_id(1, include_deleted=True) == [("a", 1)]
    assert state.schema_by_id(1) is not None  # the id still decodes data


def test_delete_subject_soft_deletes_every_version_up_to_its_watermark():
    state = replay(schema("a", 1, 1), schema("a", 2, 2, RECORD),
                   (records.delete_subject_key("a"), DeleteSubjectValue("a", 2)), schema("a", 3, 1))
    assert state.versions("a") == [3]
    assert state.versions("a", deleted_only=True) == [1, 2]
    assert state.subjects() == ["a"]
    state = replay(schema("a", 1, 1), (records.delete_subject_key("a"), DeleteSubjectValue("a", 1)))
    assert state.subjects() == [] and state.subjects(include_deleted=True) == ["a"]
    assert state.subjects(deleted_only=True) == ["a"]
    assert not state.has_subject("a") and state.has_subject("a", include_deleted=True)


def test_a_tombstone_removes_a_version_and_an_id_nothing_holds():
    state = replay(schema("a", 1, 1), schema("b", 1, 1), schema("a", 2, 2, RECORD),
                   (records.schema_key("a", 2), None), (records.schema_key("a", 1), None))
    assert state.versions("a", include_deleted=True) == []
    assert state.schema_by_id(2) is None
    assert state.schema_by_id(1) is not None  # still held by b
    assert state.subjects(include_deleted=True) == ["b"]
    assert state.next_id == 3  # the high-water mark stays


def test_clear_subject_drops_the_soft_deleted_versions():
    state = replay(schema("a", 1, 1, deleted=True), schema("a", 2, 2, RECORD),
                   schema("b", 1, 3, RECORD.replace('"R"', '"Q"'), deleted=True),
                   (records.clear_subject_key("a"), ClearSubjectValue("a")))
    assert state.versions("a", include_deleted=True) == [2]
    assert state.schema_by_id(1) is None and state.next_id == 4
    assert state.versions("b", include_deleted=True) == [1]
    state.apply(9, *records.encode(records.clear_subject_key(None), ClearSubjectValue(None)))
    assert state.subjects(include_deleted=True) == ["a"]


def test_config_and_mode_records_and_their_tombstones():
    state = replay((records.config_key(None), ConfigValue(None, "FULL")),
                   (records.config_key("a"), ConfigValue("a", "NONE", True)),
                   (records.mode_key(None), ModeValue(None, "READONLY")),
                   (records.mode_key("a"), ModeValue("a", "IMPORT")))
    assert state.compatibility_level("a") == "NONE" and state.compatibility_level("b") == "FULL"
    assert state.normalize("a") and not state.normalize("b")
    assert state.mode_in_scope("a") == "IMPORT" and state.mode_in_scope("b") == "READONLY"
    for offset, key in enumerate([records.config_key("a"), records.config_key(None), records.mode_key("a"),
                                  records.mode_key(None)], start=10):
        state.apply(offset, records.encode_key(key), None)
    assert state.compatibility_level("a") == "BACKWARD"
    assert state.mode_in_scope("a") == "READWRITE"
    assert state.config("a") is None and state.mode("a") is None


def test_references_resolve_and_record_who_refers_to_whom():
    state = replay(schema("r", 1, 1, RECORD), schema("o", 1, 2, USES_R, refs=(Reference("R", "r", 1),)))
    assert state.schema_by_id(2).parsed is not None
    assert state.referrers("r", 1) == [("o", 1)]
    assert state.referenced_by_ids("r", 1) == [2]
    state.apply(9, *records.encode(records.schema_key("o", 1), None))
    assert state.referrers("r", 1) == []


def test_a_schema_whose_reference_is_missing_is_kept_unparsed():
    state = replay(schema("o", 1, 2, USES_R, refs=(Reference("R", "r", 1),)))
    assert state.schema_by_id(2).text == USES_R and state.schema_by_id(2).parsed is None


def test_a_stored_schema_the_parsers_refuse_is_kept_as_text():
    state = replay(schema("x", 1, 5, "{not avro"))
    assert state.schema_by_id(5).parsed is None
    assert state.versions("x") == [1] and state.next_id == 6


def test_corrupt_and_foreign_records_are_skipped_and_replay_goes_on():
    state = RegistryState()
    state.apply(0, b"garbage", b"garbage")
    state.apply(1, b'{"keytype":"CONTEXT","tenant":"default","context":".x","magic":0}', b"{}")
    state.apply(2, None, None)
    state.apply(3, b'{"keytype":"SCHEMA","subject":"a","version":1,"magic":1}',
                b'{"subject":"OTHER","version":1,"id":4,"schema":"\\"int\\""}')
    state.apply(4, *records.encode(*schema("a", 1, 1)))
    assert state.subjects() == ["a"] and state.next_id == 2 and state.applied == 5


def test_the_id_high_water_record_keeps_ids_after_compaction_removed_them():
    state = replay((records.ID_HIGH_WATER_KEY, IdHighWaterValue(41)), schema("a", 1, 3))
    assert state.next_id == 42


def test_a_version_rewritten_with_another_id_moves_the_id():
    state = replay(schema("a", 1, 1), schema("a", 1, 7, RECORD))
    assert state.schema_by_id(1) is None and state.schema_by_id(7).text == RECORD


def test_states_replayed_from_the_same_records_are_equal():
    pairs = [schema("a", 1, 1), schema("b", 1, 1), schema("a", 2, 2, RECORD),
             (records.config_key("a"), ConfigValue("a", "FULL")),
             (records.delete_subject_key("b"), DeleteSubjectValue("b", 1))]
    assert replay(*pairs).snapshot() == replay(*pairs).snapshot()
