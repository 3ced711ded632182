"""RegistryService: Confluent's register / delete / mode / reference rules over a log, replay, the writer."""
import asyncio
import json

import pytest
from memory_log import AVRO_BAD_V2, AVRO_V1, AVRO_V2, MemoryLog, Registry

from broker_sim.registry import errors, records
from broker_sim.registry.errors import NotWriterError, RegistryError
from broker_sim.registry.service import LATEST, RegistryService

RECORD_R = json.dumps({"type": "record", "name": "R", "namespace": "n", "fields": [{"name": "a", "type": "int"}]})
USES_R = json.dumps({"type": "record", "name": "Outer", "namespace": "n", "fields": [{"name": "r", "type": "n.R"}]})


def schema_text(i: int) -> str:
    return json.dumps({"type": "record", "name": f"S{i}", "fields": [{"name": "f", "type": "int"}]})


@pytest.fixture
def reg():
    registry = Registry()
    yield registry
    registry.close()


def fails(reg, coroutine, code: int) -> RegistryError:
    with pytest.raises(RegistryError) as info:
        reg.run(coroutine)
    assert info.value.error_code == code, info.value
    return info.value


def test_registering_the_same_schema_again_answers_the_same_id_and_writes_nothing(reg):
    svc = reg.service
    assert reg.run(svc.register("a", AVRO_V1)) == {"id": 1}
    appended = len(reg.log.entries)
    assert reg.run(svc.register("a", json.dumps(json.loads(AVRO_V1), indent=2))) == {"id": 1}
    assert len(reg.log.entries) == appended
    assert reg.run(svc.register("b", AVRO_V1)) == {"id": 1}  # same id, the subject's own version 1
    assert reg.run(svc.get_version("b", 1))["id"] == 1
    assert reg.run(svc.register("a", AVRO_V2)) == {"id": 2}
    assert reg.run(svc.versions("a")) == [1, 2]


def test_an_incompatible_schema_is_refused_with_the_checkers_messages(reg):
    svc = reg.service
    reg.run(svc.register("a", AVRO_V1))
    error = fails(reg, svc.register("a", AVRO_BAD_V2), errors.INCOMPATIBLE_SCHEMA)
    assert error.http_status == 409
    assert "incompatible with an earlier schema for subject \"a\"" in error.message
    assert "{oldSchemaVersion: 1}" in error.message and "{compatibility: 'BACKWARD'}" in error.message
    reg.run(svc.set_config("a", "NONE"))
    assert reg.run(svc.register("a", AVRO_BAD_V2)) == {"id": 2}


def test_transitive_levels_check_every_live_version(reg):
    svc = reg.service
    reg.run(svc.set_config("a", "NONE"))
    reg.run(svc.register("a", AVRO_BAD_V2))  # requires age
    reg.run(svc.register("a", AVRO_V1))
    reg.run(svc.set_config("a", "FORWARD"))
    reg.run(svc.test_compatibility("a", LATEST, AVRO_V2))
    reg.run(svc.set_config("a", "FORWARD_TRANSITIVE"))
    answer = reg.run(svc.test_compatibility("a", None, AVRO_V1, verbose=True))
    assert answer["is_compatible"] is False
    assert "{oldSchemaVersion: 1}" in answer["messages"]


def test_an_invalid_schema_is_42201_with_the_parsers_reason(reg):
    error = fails(reg, reg.service.register("a", '{"type": "recrd"}'), errors.INVALID_SCHEMA)
    assert error.http_status == 422 and "recrd" in error.message
    fails(reg, reg.service.register("a", AVRO_V1, "XML"), errors.INVALID_SCHEMA)
    fails(reg, reg.service.register("a", ""), errors.INVALID_SCHEMA)
    fails(reg, reg.service.register("bad\x01subject", AVRO_V1), errors.INVALID_SUBJECT)


def test_versions_are_dense_and_a_deleted_schema_comes_back_as_a_new_version_with_its_id(reg):
    svc = reg.service
    reg.run(svc.register("a", AVRO_V1))
    reg.run(svc.register("a", AVRO_V2))
    assert reg.run(svc.delete_version("a", 2)) == 2
    assert reg.run(svc.register("a", AVRO_V2)) == {"id": 2}
    assert reg.run(svc.versions("a")) == [1, 3]
    # Confluent tombstones the soft-deleted version that held the same id
    assert reg.run(svc.versions("a", include_deleted=True)) == [1, 3]
    fails(reg, svc.register("a", AVRO_V1, version=7), errors.INVALID_SCHEMA)


def test_ids_are_never_reused_even_after_permanent_deletes_and_compaction():
    log = MemoryLog()
    first = Registry(log)
    svc = first.service
    first.run(svc.set_config(None, "NONE"))
    for i in range(1, 4):
        assert first.run(svc.register("a", schema_text(i))) == {"id": i}
    first.run(svc.delete_subject("a"))
    assert first.run(svc.delete_subject("a", permanent=True)) == [1, 2, 3]
    log.compact()
    assert not any(b'"SCHEMA"' in key for _, key, _ in log.entries)
    second = Registry(log)
    assert second.run(second.service.register("b", schema_text(9))) == {"id": 4}
    first.close()
    second.close()


def test_ids_stay_above_the_checkpoint_when_the_log_lost_its_records(tmp_path):
    from broker_sim.registry.id_checkpoint import IdCheckpoint

    first = Registry()
    first.service.id_checkpoint = IdCheckpoint(tmp_path)
    for i in range(1, 4):
        assert first.run(first.service.register(f"s{i}", schema_text(i))) == {"id": i}
    assert IdCheckpoint(tmp_path).value == 3  # on disk before the registration was answered
    emptied = Registry(MemoryLog())  # a log that lost every record, the same data dir
    emptied.service.id_checkpoint = IdCheckpoint(tmp_path)
    assert emptied.run(emptied.service.register("later", schema_text(9))) == {"id": 4}
    with pytest.raises(RegistryError):  # an old id is unknown, never the new schema
        emptied.run(emptied.service.schema_by_id(1))
    assert IdCheckpoint(tmp_path).value == 4
    (tmp_path / "schema-registry-id-checkpoint").write_text("garbage")
    assert IdCheckpoint(tmp_path).value == 0  # unreadable: logged, the log alone decides
    first.close()
    emptied.close()


def test_concurrent_registrations_get_unique_ids_and_dense_versions(reg):
    svc = reg.service
    reg.run(svc.set_config(None, "NONE"))

    async def many():
        return await asyncio.gather(*(svc.register("a", schema_text(i)) for i in range(30)))

    ids = [answer["id"] for answer in reg.run(many())]
    assert sorted(ids) == list(range(1, 31))
    assert reg.run(svc.versions("a")) == list(range(1, 31))


def test_soft_then_permanent_delete_rules(reg):
    svc = reg.service
    reg.run(svc.register("a", AVRO_V1))
    reg.run(svc.register("a", AVRO_V2))
    fails(reg, svc.delete_version("a", 1, permanent=True), errors.SCHEMAVERSION_NOT_SOFT_DELETED)
    fails(reg, svc.delete_subject("a", permanent=True), errors.SUBJECT_NOT_SOFT_DELETED)
    assert reg.run(svc.delete_version("a", 1)) == 1
    fails(reg, svc.delete_version("a", 1), errors.SCHEMAVERSION_SOFT_DELETED)
    assert reg.run(svc.delete_version("a", 1, permanent=True)) == 1
    fails(reg, svc.delete_version("a", 1), errors.VERSION_NOT_FOUND)
    fails(reg, svc.delete_version("a", 9), errors.VERSION_NOT_FOUND)
    assert reg.run(svc.delete_subject("a")) == [2]
    fails(reg, svc.delete_subject("a"), errors.SUBJECT_SOFT_DELETED)
    assert reg.run(svc.delete_subject("a", permanent=True)) == [2]
    fails(reg, svc.delete_subject("a"), errors.SUBJECT_NOT_FOUND)
    fails(reg, svc.delete_version("a", 2), errors.SUBJECT_NOT_FOUND)
    fails(reg, svc.schema_by_id(1), errors.SCHEMA_NOT_FOUND)  # no version holds it any longer
    fails(reg, svc.schema_by_id(2), errors.SCHEMA_NOT_FOUND)


def test_soft_deleting_a_subject_drops_its_config_and_mode(reg):
    svc = reg.service
    reg.run(svc.register("a", AVRO_V1))
    reg.run(svc.set_config("a", "FULL"))
    reg.run(svc.set_mode("a", "READWRITE"))
    reg.run(svc.delete_subject("a"))
    fails(reg, svc.get_config("a"), errors.SUBJECT_COMPATIBILITY_NOT_CONFIGURED)
    fails(reg, svc.get_mode("a"), errors.SUBJECT_MODE_NOT_CONFIGURED)


def test_read_only_mode_refuses_writes(reg):
    svc = reg.service
    reg.run(svc.register("a", AVRO_V1))
    reg.run(svc.set_mode("a", "READONLY"))
    error = fails(reg, svc.register("a", AVRO_V2), errors.OPERATION_NOT_PERMITTED)
    assert error.message == "Subject a is in read-only mode"
    fails(reg, svc.delete_version("a", 1), errors.OPERATION_NOT_PERMITTED)
    fails(reg, svc.delete_subject("a"), errors.OPERATION_NOT_PERMITTED)
    assert reg.run(svc.register("b", AVRO_V2)) == {"id": 2}
    reg.run(svc.set_mode(None, "READONLY"))
    fails(reg, svc.register("b", AVRO_V1), errors.OPERATION_NOT_PERMITTED)
    assert reg.run(svc.delete_mode("a")) == {"mode": "READONLY"}
    assert reg.run(svc.get_mode("a", default_to_global=True)) == {"mode": "READONLY"}
    reg.run(svc.set_mode(None, "READONLY_OVERRIDE"))
    reg.run(svc.set_mode("b", "READWRITE"))
    fails(reg, svc.register("b", AVRO_V1), errors.OPERATION_NOT_PERMITTED)  # the override wins


def test_import_mode_takes_explicit_ids_and_versions(reg):
    svc = reg.service
    fails(reg, svc.register("a", AVRO_V1, schema_id=10), errors.OPERATION_NOT_PERMITTED)  # not in import mode
    reg.run(svc.set_mode(None, "IMPORT"))
    fails(reg, svc.register("a", AVRO_V1), errors.OPERATION_NOT_PERMITTED)  # import needs an id
    assert reg.run(svc.register("a", AVRO_V1, version=5, schema_id=10)) == {"id": 10}
    assert reg.run(svc.get_version("a", 5))["id"] == 10
    error = fails(reg, svc.register("b", AVRO_V2, schema_id=10), errors.OPERATION_NOT_PERMITTED)
    assert "Overwrite new schema with id 10" in error.message
    assert reg.run(svc.register("b", AVRO_V1, version=1, schema_id=10)) == {"id": 10}
    appended = len(reg.log.entries)
    assert reg.run(svc.register("b", AVRO_V1, version=1, schema_id=10)) == {"id": 10}  # an import run again
    assert len(reg.log.entries) == appended
    reg.run(svc.set_mode(None, "READWRITE"))
    assert reg.run(svc.register("c", AVRO_V2)) == {"id": 11}


def test_entering_import_mode_forgets_soft_deleted_schemas(reg):
    svc = reg.service
    reg.run(svc.register("a", AVRO_V1))
    reg.run(svc.delete_subject("a"))
    assert reg.run(svc.set_mode("a", "IMPORT")) == {"mode": "IMPORT"}
    assert reg.run(svc.subjects(include_deleted=True)) == []
    assert reg.run(svc.register("a", AVRO_V2, version=1, schema_id=1)) == {"id": 1}
    assert reg.run(svc.set_mode("a", "IMPORT")) == {"mode": "IMPORT"}  # already importing: no check


def test_import_mode_over_existing_subjects_needs_force(reg):
    svc = reg.service
    reg.run(svc.register("a", AVRO_V1))
    error = fails(reg, svc.set_mode(None, "IMPORT"), errors.OPERATION_NOT_PERMITTED)
    assert error.message == "Cannot import since found existing subjects"
    assert reg.run(svc.set_mode(None, "IMPORT", force=True)) == {"mode": "IMPORT"}
    fails(reg, svc.set_mode(None, "SOMETIMES"), errors.INVALID_MODE)


def test_references_resolve_to_versions_and_protect_what_they_reference(reg):
    svc = reg.service
    assert reg.run(svc.register("r", RECORD_R)) == {"id": 1}
    fails(reg, svc.register("o", USES_R), errors.INVALID_SCHEMA)  # n.R unknown without the reference
    fails(reg, svc.register("o", USES_R, references=[{"name": "n.R", "subject": "r", "version": 2}]),
          errors.INVALID_SCHEMA)
    fails(reg, svc.register("o", USES_R, references=[{"name": "n.R", "subject": "zz", "version": -1}]),
          errors.INVALID_SCHEMA)
    assert reg.run(svc.register("o", USES_R, references=[{"name": "n.R", "subject": "r", "version": -1}])) \
        == {"id": 2}
    entity = reg.run(svc.get_version("o", LATEST))
    assert entity["references"] == [{"name": "n.R", "subject": "r", "version": 1}]
    assert reg.run(svc.referenced_by("r", 1)) == [2]
    fails(reg, svc.delete_version("r", 1), errors.REFERENCE_EXISTS)
    fails(reg, svc.delete_subject("r"), errors.REFERENCE_EXISTS)
    lookup = reg.run(svc.lookup("o", USES_R, references=[{"name": "n.R", "subject": "r", "version": 1}]))
    assert lookup["id"] == 2 and lookup["version"] == 1
    reg.run(svc.delete_subject("o"))
    reg.run(svc.delete_subject("o", permanent=True))
    assert reg.run(svc.delete_version("r", 1)) == 1


def test_lookup_answers_the_subjects_version_or_40401_40403(reg):
    svc = reg.service
    reg.run(svc.register("a", AVRO_V1))
    reg.run(svc.register("a", AVRO_V2))
    assert reg.run(svc.lookup("a", AVRO_V2)) == reg.run(svc.get_version("a", 2))
    fails(reg, svc.lookup("b", AVRO_V1), errors.SUBJECT_NOT_FOUND)
    fails(reg, svc.lookup("a", schema_text(1)), errors.SCHEMA_NOT_FOUND)
    reg.run(svc.delete_version("a", 2))
    fails(reg, svc.lookup("a", AVRO_V2), errors.SCHEMA_NOT_FOUND)
    assert reg.run(svc.lookup("a", AVRO_V2, include_deleted=True))["version"] == 2


def test_config_get_put_delete_and_default_to_global(reg):
    svc = reg.service
    assert reg.run(svc.get_config(None)) == {"compatibilityLevel": "BACKWARD"}
    assert reg.run(svc.set_config(None, "full")) == {"compatibility": "FULL"}
    fails(reg, svc.set_config(None, "SIDEWAYS"), errors.INVALID_COMPATIBILITY_LEVEL)
    fails(reg, svc.get_config("a"), errors.SUBJECT_COMPATIBILITY_NOT_CONFIGURED)
    assert reg.run(svc.get_config("a", default_to_global=True)) == {"compatibilityLevel": "FULL"}
    assert reg.run(svc.set_config("a", "NONE", normalize=True)) == {"compatibility": "NONE", "normalize": True}
    assert reg.run(svc.set_config("a", None, normalize=False)) == {"compatibility": "NONE", "normalize": False}
    assert reg.run(svc.get_config("a")) == {"normalize": False, "compatibilityLevel": "NONE"}
    assert reg.run(svc.delete_config("a")) == {"normalize": False, "compatibilityLevel": "NONE"}
    fails(reg, svc.delete_config("a"), errors.SUBJECT_NOT_FOUND)
    assert reg.run(svc.delete_config(None)) == {"compatibilityLevel": "FULL"}
    assert reg.run(svc.get_config(None)) == {"compatibilityLevel": "BACKWARD"}


def test_a_state_rebuilt_from_the_log_answers_the_same():
    log = MemoryLog()
    first = Registry(log)
    svc = first.service
    first.run(svc.register("a", AVRO_V1))
    first.run(svc.register("a", AVRO_V2))
    first.run(svc.register("b", AVRO_V1))
    first.run(svc.register("r", RECORD_R))
    first.run(svc.register("o", USES_R, references=[{"name": "n.R", "subject": "r", "version": 1}]))
    first.run(svc.set_config("a", "FULL"))
    first.run(svc.set_mode("b", "READONLY"))
    first.run(svc.delete_version("a", 1))
    first.run(svc.set_config(None, "NONE"))
    first.run(svc.register("c", schema_text(1)))
    first.run(svc.delete_subject("c"))
    first.run(svc.delete_subject("c", permanent=True))
    second = Registry(log)
    second.run(second.service.subjects())
    assert second.service.state.snapshot() == svc.state.snapshot()
    log.compact()
    third = Registry(log)
    third.run(third.service.subjects())
    assert third.service.state.snapshot() == svc.state.snapshot()
    for registry in (first, second, third):
        registry.close()


def test_a_follower_reads_what_the_writer_appended_and_refuses_to_write():
    log = MemoryLog()
    writer = Registry(log)
    follower = Registry(log.follower())
    writer.run(writer.service.register("a", AVRO_V1))
    assert follower.run(follower.service.get_version("a", LATEST))["id"] == 1
    with pytest.raises(NotWriterError):
        follower.run(follower.service.register("a", AVRO_V2))
    # a registration that would write nothing needs no writer
    assert follower.run(follower.service.register("a", AVRO_V1)) == {"id": 1}
    writer.close()
    follower.close()


def test_a_log_whose_start_moved_past_our_position_is_replayed_from_its_start():
    log = MemoryLog()
    reg = Registry(log)
    reg.run(reg.service.register("a", AVRO_V1))
    reg.run(reg.service.register("b", AVRO_V2))
    log.entries = [(5, *records.encode(records.schema_key("z", 1),
                                       records.SchemaValue("z", 1, 9, AVRO_V1)))]
    log.start = 5
    assert reg.run(reg.service.subjects()) == ["z"]
    reg.close()


def test_schema_types_and_schemas_by_id(reg):
    svc = reg.service
    assert set(svc.schema_types()) == {"AVRO", "JSON", "PROTOBUF"}
    reg.run(svc.register("a", AVRO_V1))
    reg.run(svc.register("b", AVRO_V1))
    assert reg.run(svc.schema_by_id(1))["schema"] == reg.run(svc.get_version("a", 1))["schema"]
    assert "schemaType" not in reg.run(svc.schema_by_id(1))
    assert reg.run(svc.schema_by_id(1, fetch_max_id=True))["maxId"] == 1
    assert reg.run(svc.subjects_of_id(1)) == ["a", "b"]
    assert reg.run(svc.versions_of_id(1)) == [{"subject": "a", "version": 1}, {"subject": "b", "version": 1}]
    reg.run(svc.delete_subject("b"))
    assert reg.run(svc.subjects_of_id(1)) == ["a"]
    assert reg.run(svc.subjects_of_id(1, include_deleted=True)) == ["a", "b"]
    fails(reg, svc.subjects_of_id(7), errors.SCHEMA_NOT_FOUND)


def test_the_service_needs_no_running_loop_to_be_built():
    RegistryService(MemoryLog(), clock=lambda: 0.0)


def test_a_log_truncated_below_our_position_is_replayed_from_its_start():
    log = MemoryLog()
    log.end_offset = lambda: log.next_offset
    reg = Registry(log)
    reg.run(reg.service.register("a", AVRO_V1))
    reg.run(reg.service.register("b", AVRO_V2))
    assert reg.service.position == 2
    del log.entries[1:]  # the old leader's tail, dropped when it follows the new leader
    log.next_offset = 1
    assert reg.run(reg.service.subjects()) == ["a"]
    assert reg.service.position == 1 and reg.service.state.next_id == 2
    reg.close()


def test_reads_do_not_see_a_registration_before_its_commit():
    log = MemoryLog()
    reg = Registry(log)
    release = asyncio.Event()
    plain_append = log.append

    async def slow_append(recs):
        log.entries.append((log.next_offset, *recs[0]))  # in the log, not yet committed
        log.next_offset += 1
        await release.wait()
        return log.next_offset

    async def scenario():
        await reg.service.register("a", AVRO_V1)
        log.append = slow_append
        writing = asyncio.ensure_future(reg.service.register("a", AVRO_V2))
        await asyncio.sleep(0)
        seen_during = await reg.service.versions("a")
        release.set()
        answer = await writing
        log.append = plain_append
        return seen_during, answer, await reg.service.versions("a")

    assert reg.run(scenario()) == ([1], {"id": 2}, [1, 2])
    reg.close()


def test_delete_checks_existence_before_the_mode_as_confluent_does(reg):
    svc = reg.service
    reg.run(svc.set_mode(None, "READONLY"))
    fails(reg, svc.delete_subject("nope"), errors.SUBJECT_NOT_FOUND)
    fails(reg, svc.delete_version("nope", 1), errors.SUBJECT_NOT_FOUND)


def test_the_context_wildcard_prefix_lists_every_subject(reg):
    reg.run(reg.service.register("a", AVRO_V1))
    assert reg.run(reg.service.subjects(":*:")) == ["a"]
    assert [s["subject"] for s in reg.run(reg.service.schemas(":*:"))] == ["a"]
