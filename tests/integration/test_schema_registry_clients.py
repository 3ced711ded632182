"""confluent-kafka's SchemaRegistryClient, every call it has, against pylog's registry.

Each test gets a fresh broker's registry (the pytest plugin's ``pylog_schema_registry_url``), so schema ids
and versions are exact: the first schema registered gets id 1. A client caches ids, schemas and
versions; where a test must see what the registry answers (not the cache), it asks a new client
(``fresh()``). The errors are Confluent's: ``SchemaRegistryError(http_status, error_code, message)``
as confluent-kafka raises them from the registry's JSON error body.
"""
import json

import pytest
from confluent_kafka.schema_registry import (
    ConfigCompatibilityLevel, Schema, SchemaReference, SchemaRegistryClient, SchemaRegistryError, ServerConfig,
)
from confluent_kafka.schema_registry.common.schema_registry_client import SchemaVersion


from schema_samples import CUSTOMER, INCOMPATIBLE, ORDER, V1, V2

SUBJECT = "events-value"


@pytest.fixture
def fresh(pylog_schema_registry_url):
    """A factory of clients with empty caches, closed at teardown; ``fresh()`` is also the test's client."""
    clients = []

    def make() -> SchemaRegistryClient:
        clients.append(SchemaRegistryClient({"url": pylog_schema_registry_url, "max.retries": 0}))
        return clients[-1]

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def sr(fresh):
    return fresh()


def refused(call, *args, **kwargs) -> tuple[int, int, str]:
    with pytest.raises(SchemaRegistryError) as info:
        call(*args, **kwargs)
    return info.value.http_status_code, info.value.error_code, info.value.error_message


def registered(sr: SchemaRegistryClient, subject: str, *schemas: str) -> list[int]:
    return [sr.register_schema(subject, Schema(text, "AVRO")) for text in schemas]


def test_register_returns_ids_and_the_full_response(sr, fresh):
    assert sr.register_schema(SUBJECT, Schema(V1, "AVRO")) == 1
    full = sr.register_schema_full_response(SUBJECT, Schema(V2, "AVRO"))
    assert (full.schema_id, full.subject, full.schema.schema_type) == (2, SUBJECT, "AVRO")
    assert full.version is None   # Confluent's answer to a registration is {"id": N} only
    # an identical schema again: the same id and no new version (asked of the registry, not a cache)
    assert fresh().register_schema(SUBJECT, Schema(V1, "AVRO")) == 1
    assert fresh().get_versions(SUBJECT) == [1, 2]
    # the same schema under another subject keeps its id there too
    assert fresh().register_schema("other-value", Schema(V2, "AVRO")) == 2
    assert fresh().get_versions("other-value") == [1]


def test_get_schema_by_id_with_and_without_subject(sr, fresh):
    registered(sr, SUBJECT, V1, V2)
    assert fresh().get_schema(1) == Schema(V1, "AVRO", [])
    assert fresh().get_schema(2, subject_name=SUBJECT) == Schema(V2, "AVRO", [])
    assert refused(fresh().get_schema, 99) == (404, 40403, "Schema 99 not found")
    assert sorted(fresh().get_schema_types()) == ["AVRO", "JSON", "PROTOBUF"]
    assert fresh().get_subjects_by_schema_id(2) == [SUBJECT]
    assert fresh().get_schema_versions(2) == [SchemaVersion(SUBJECT, 2)]


def test_subjects_versions_latest_and_lookup(sr, fresh):
    registered(sr, SUBJECT, V1, V2)
    registered(sr, "audit-value", V1)
    assert fresh().get_subjects() == ["audit-value", SUBJECT]
    assert fresh().get_subjects(subject_prefix="events") == [SUBJECT]
    assert fresh().get_subjects(offset=1, limit=1) == [SUBJECT]
    assert fresh().get_subjects(limit=1) == ["audit-value"]
    assert fresh().get_contexts() == ["."]
    latest = fresh().get_latest_version(SUBJECT)
    assert (latest.subject, latest.version, latest.schema_id, latest.schema) == (SUBJECT, 2, 2, Schema(V2, "AVRO"))
    first = fresh().get_version(SUBJECT, 1)
    assert (first.subject, first.version, first.schema_id, first.schema) == (SUBJECT, 1, 1, Schema(V1, "AVRO"))
    assert fresh().get_versions(SUBJECT) == [1, 2]
    found = fresh().lookup_schema(SUBJECT, Schema(V1, "AVRO"))
    assert (found.subject, found.version, found.schema_id) == (SUBJECT, 1, 1)
    assert refused(fresh().lookup_schema, SUBJECT, Schema(INCOMPATIBLE, "AVRO")) == (404, 40403, "Schema not found")
    assert refused(fresh().lookup_schema, "nope", Schema(V1, "AVRO")) == (404, 40401, "Subject 'nope' not found.")
    assert refused(fresh().get_version, SUBJECT, 7) == (404, 40402, "Version 7 not found.")
    assert refused(fresh().get_versions, "nope") == (404, 40401, "Subject 'nope' not found.")


def test_delete_version_soft_then_permanent(sr, fresh):
    registered(sr, SUBJECT, V1, V2)
    assert sr.delete_version(SUBJECT, 1) == 1
    assert fresh().get_versions(SUBJECT) == [2]
    assert fresh().get_versions(SUBJECT, deleted=True) == [1, 2]
    assert fresh().get_versions(SUBJECT, deleted_only=True) == [1]
    assert refused(fresh().get_version, SUBJECT, 1) == (404, 40402, "Version 1 not found.")
    soft = fresh().get_version(SUBJECT, 1, deleted=True)
    assert (soft.version, soft.schema_id) == (1, 1)
    # the id still resolves: records written with it stay readable
    assert fresh().get_schema(1) == Schema(V1, "AVRO", [])
    assert refused(sr.delete_version, SUBJECT, 2, permanent=True) == (
        404, 40407, f"Subject '{SUBJECT}' Version 2 was not deleted first before being permanently deleted")
    assert sr.delete_version(SUBJECT, 1, permanent=True) == 1
    assert fresh().get_versions(SUBJECT, deleted=True) == [2]
    # a new version after a deleted one takes the next number, never a deleted one's
    # its only version permanently deleted, the schema registered again is a new schema: id 3, version 3
    # (as Confluent's lookup cache forgets a schema when its last subject version is tombstoned)
    assert fresh().register_schema(SUBJECT, Schema(V1, "AVRO")) == 3
    assert fresh().get_versions(SUBJECT) == [2, 3]


def test_delete_subject_soft_then_permanent(sr, fresh):
    registered(sr, SUBJECT, V1, V2)
    assert refused(sr.delete_subject, SUBJECT, permanent=True) == (
        404, 40405, f"Subject '{SUBJECT}' was not deleted first before being permanently deleted")
    assert sr.delete_subject(SUBJECT) == [1, 2]
    assert fresh().get_subjects() == []
    assert fresh().get_subjects(deleted=True) == [SUBJECT]
    assert fresh().get_subjects(deleted_only=True) == [SUBJECT]
    assert refused(fresh().get_versions, SUBJECT) == (404, 40401, f"Subject '{SUBJECT}' not found.")
    assert sr.delete_subject(SUBJECT, permanent=True) == [1, 2]
    assert fresh().get_subjects(deleted=True) == []
    assert refused(sr.delete_subject, SUBJECT) == (404, 40401, f"Subject '{SUBJECT}' not found.")


def test_compatibility_checks_and_an_incompatible_registration_is_refused(sr, fresh):
    registered(sr, SUBJECT, V1, V2)
    assert sr.test_compatibility(SUBJECT, Schema(V2, "AVRO")) is True
    assert sr.test_compatibility(SUBJECT, Schema(INCOMPATIBLE, "AVRO")) is False
    assert sr.test_compatibility(SUBJECT, Schema(INCOMPATIBLE, "AVRO"), version=1, verbose=True) is False
    assert sr.test_compatibility(SUBJECT, Schema(V1, "AVRO"), version=1) is True
    assert sr.test_compatibility_all_versions(SUBJECT, Schema(V2, "AVRO")) is True
    assert sr.test_compatibility_all_versions(SUBJECT, Schema(INCOMPATIBLE, "AVRO"), verbose=True) is False
    # test_compatibility(verbose=True) returns only the flag; the messages it asked for, through the client's
    # own REST transport, are Confluent's: the difference, the version compared, its schema, the level
    verbose = sr._rest_client.post(f"compatibility/subjects/{SUBJECT}/versions/1?verbose=true",
                                   body=Schema(INCOMPATIBLE, "AVRO").to_dict())
    assert verbose["is_compatible"] is False
    difference, version, old_schema, level = verbose["messages"]
    assert difference == ("{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'owner' at path "
                          "'/fields/1' in the new schema has no default value and is missing in the old schema', "
                          "additionalInfo:'owner'}")
    assert (version, level) == ("{oldSchemaVersion: 1}", "{compatibility: 'BACKWARD'}")
    assert old_schema.startswith("{oldSchema: '{") and '"name":"Event"' in old_schema
    status, code, message = refused(sr.register_schema, SUBJECT, Schema(INCOMPATIBLE, "AVRO"))
    assert (status, code) == (409, 40901)
    assert message.startswith(f'Schema being registered is incompatible with an earlier schema for subject '
                              f'"{SUBJECT}", details: [{difference}, {{oldSchemaVersion: 2}}, {{oldSchema: ')
    assert fresh().get_versions(SUBJECT) == [1, 2]
    # with the subject at NONE, the same schema is accepted as version 3
    assert sr.set_compatibility(SUBJECT, "NONE") == {"compatibility": "NONE"}
    assert fresh().register_schema(SUBJECT, Schema(INCOMPATIBLE, "AVRO")) == 3
    assert refused(sr.register_schema, SUBJECT, Schema('{"type": "recrod"}', "AVRO"))[:2] == (422, 42201)


def test_config_global_and_per_subject(sr, fresh):
    registered(sr, SUBJECT, V1)
    assert sr.get_config().compatibility_level == ConfigCompatibilityLevel.BACKWARD
    assert sr.get_compatibility() == "BACKWARD"
    assert refused(sr.get_config, SUBJECT) == (
        404, 40408, f"Subject '{SUBJECT}' does not have subject-level compatibility configured")
    assert sr.set_config(SUBJECT, ServerConfig(compatibility=ConfigCompatibilityLevel.FULL_TRANSITIVE)) == {
        "compatibility": "FULL_TRANSITIVE"}
    assert sr.get_config(SUBJECT).compatibility_level == ConfigCompatibilityLevel.FULL_TRANSITIVE
    assert sr.get_compatibility(SUBJECT) == "FULL_TRANSITIVE"
    assert sr.delete_config(SUBJECT).compatibility_level == ConfigCompatibilityLevel.FULL_TRANSITIVE
    assert refused(sr.get_config, SUBJECT)[:2] == (404, 40408)
    assert sr.set_config(config=ServerConfig(compatibility=ConfigCompatibilityLevel.FORWARD)) == {
        "compatibility": "FORWARD"}
    assert sr.set_compatibility(level="full") == {"compatibility": "FULL"}
    assert sr.get_compatibility() == "FULL"
    assert sr.delete_config().compatibility_level == ConfigCompatibilityLevel.FULL
    assert sr.get_config().compatibility_level == ConfigCompatibilityLevel.BACKWARD
    assert refused(sr.set_compatibility, SUBJECT, "SIDEWAYS") == (
        422, 42203, "Invalid compatibility level. Valid values are none, backward, forward, full, "
                    "backward_transitive, forward_transitive, and full_transitive")


def test_mode_global_and_per_subject(sr, fresh):
    registered(sr, SUBJECT, V1)
    assert sr.get_global_mode() == "READWRITE"
    assert refused(sr.get_mode, SUBJECT) == (
        404, 40409, f"Subject '{SUBJECT}' does not have subject-level mode configured")
    assert sr.update_mode(SUBJECT, "READONLY") == "READONLY"
    assert sr.get_mode(SUBJECT) == "READONLY"
    status, code, _ = refused(fresh().register_schema, SUBJECT, Schema(V2, "AVRO"))
    assert (status, code) == (422, 42205)
    assert fresh().register_schema("audit-value", Schema(V2, "AVRO")) == 2   # only the subject is read-only
    assert sr.delete_mode(SUBJECT) == "READONLY"
    assert refused(sr.get_mode, SUBJECT)[:2] == (404, 40409)
    assert fresh().register_schema(SUBJECT, Schema(V2, "AVRO")) == 2

    assert sr.update_global_mode("READONLY") == "READONLY"
    assert sr.get_global_mode() == "READONLY"
    assert refused(fresh().register_schema, "new-value", Schema(V1, "AVRO"))[:2] == (422, 42205)
    assert fresh().get_versions(SUBJECT) == [1, 2]   # reads still work
    # IMPORT needs an empty registry unless forced
    assert refused(sr.update_global_mode, "IMPORT")[:2] == (422, 42205)
    assert sr.update_global_mode("IMPORT", force=True) == "IMPORT"
    assert sr.update_global_mode("READWRITE") == "READWRITE"
    assert refused(sr.update_global_mode, "SIDEWAYS") == (
        422, 42204, "Invalid mode. Valid values are READWRITE, READONLY, and IMPORT.")


def test_references_to_another_subjects_named_type(sr, fresh):
    assert sr.register_schema("customer-value", Schema(CUSTOMER, "AVRO")) == 1
    reference = SchemaReference("com.acme.Customer", "customer-value", 1)
    assert sr.register_schema("order-value", Schema(ORDER, "AVRO", [reference])) == 2
    # stored in Java's Schema.toString form: the referenced type named relative to the namespace
    stored = json.dumps(json.loads(ORDER), separators=(",", ":")).replace('"com.acme.Customer"', '"Customer"')
    assert fresh().get_schema(2) == Schema(stored, "AVRO", [reference])
    latest = fresh().get_latest_version("order-value")
    assert (latest.version, latest.schema_id, latest.schema.references) == (1, 2, [reference])
    assert fresh().get_referenced_by("customer-value", 1) == [2]
    assert fresh().get_referenced_by("order-value", 1) == []
    # without the reference the named type is unknown
    assert refused(fresh().register_schema, "lonely-value", Schema(ORDER, "AVRO"))[:2] == (422, 42201)
    # a referenced version cannot be deleted while a live schema points at it
    assert refused(sr.delete_version, "customer-value", 1) == (
        422, 42206, "One or more references exist to the schema "
                    "{magic=1,keytype=SCHEMA,subject=customer-value,version=1}.")
    # a soft-deleted referrer still holds it (its id stays readable); a permanently deleted one no longer does
    assert sr.delete_subject("order-value") == [1]
    assert refused(sr.delete_version, "customer-value", 1)[:2] == (422, 42206)
    assert sr.delete_subject("order-value", permanent=True) == [1]
    assert sr.delete_version("customer-value", 1) == 1


def test_normalize_protobuf_orders_fields_by_number(sr, fresh):
    in_order = 'syntax = "proto3";\npackage acme;\n\nmessage Ping {\n  int64 id = 1;\n  string note = 2;\n}\n'
    shuffled = 'syntax = "proto3"; package acme;\nmessage Ping { string note = 2;   int64 id = 1; }'
    assert sr.register_schema("pings-value", Schema(shuffled, "PROTOBUF"), normalize_schemas=True) == 1
    assert fresh().get_schema(1) == Schema(in_order, "PROTOBUF", [])   # stored normalized
    assert fresh().register_schema("pings-value", Schema(in_order, "PROTOBUF"), normalize_schemas=True) == 1
    assert fresh().get_versions("pings-value") == [1]
    found = fresh().lookup_schema("pings-value", Schema(shuffled, "PROTOBUF"), normalize_schemas=True)
    assert (found.schema_id, found.version) == (1, 1)
    # without normalize the field order is part of the schema: another schema, another id
    assert fresh().register_schema("other-value", Schema(shuffled, "PROTOBUF")) == 2
    assert fresh().get_schema(2).schema_str == (   # the canonical text, fields in the order given
        'syntax = "proto3";\npackage acme;\n\nmessage Ping {\n  string note = 2;\n  int64 id = 1;\n}\n')


def test_normalize_avro_stores_confluents_normalized_form(sr, fresh):
    text = json.dumps({"type": "record", "name": "Event", "namespace": "com.acme", "aliases": ["old.Event", "Legacy"],
                       "fields": [{"name": "id", "type": "long"}]})
    reordered = json.dumps({"namespace": "com.acme", "fields": [{"type": "long", "name": "id"}], "name": "Event",
                            "aliases": ["Legacy", "old.Event"], "type": "record"})
    assert sr.register_schema("events-value", Schema(text, "AVRO"), normalize_schemas=True) == 1
    # AvroSchemaUtils.toNormalizedString (sorted aliases), stored as the normalized schema's canonicalString()
    # (Java's Schema.toString): AvroSchema.normalize() parses the normalized text into a new AvroSchema
    assert fresh().get_schema(1).schema_str == (
        '{"type":"record","name":"Event","namespace":"com.acme","fields":[{"name":"id","type":"long"}],'
        '"aliases":["Legacy","old.Event"]}')
    assert fresh().register_schema("events-value", Schema(reordered, "AVRO"), normalize_schemas=True) == 1
    found = fresh().lookup_schema("events-value", Schema(reordered, "AVRO"), normalize_schemas=True)
    assert (found.schema_id, found.version) == (1, 1)
    assert fresh().get_versions("events-value") == [1]


def test_data_contract_and_guid_calls_are_not_served(sr):
    """Confluent 7.4+/8 data contracts (metadata), schema GUIDs and Cloud associations are outside pylog's
    registry: the client gets Confluent's 404 for an unknown path, not a hang or a malformed answer."""
    registered(sr, SUBJECT, V1)
    assert refused(sr.get_latest_with_metadata, SUBJECT, {"owner": "ops"}) == (404, 404, "HTTP 404 Not Found")
    assert refused(sr.get_schema_by_guid, "3f1c0c6e-0000-0000-0000-000000000000") == (404, 404, "HTTP 404 Not Found")
    assert refused(sr.get_associations_by_resource_name, "events", "-") == (404, 404, "HTTP 404 Not Found")
