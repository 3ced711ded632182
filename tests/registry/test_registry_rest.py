"""The REST API v1 through ``RegistryRest.handle``: every route, every error code, authorization, forwarding,
hostile input, and confluent-kafka's own client driven against it."""
import asyncio
import json
from urllib.parse import parse_qs, unquote

import pytest
from memory_log import AVRO_BAD_V2, AVRO_V1, AVRO_V2, MemoryLog, Registry, request

from broker_sim.registry import errors

# the HTTP library confluent-kafka's client itself uses (httpx2, or httpx)
from confluent_kafka.schema_registry.common._httpx_compat import httpx  # noqa: E402

V1 = "application/vnd.schemaregistry.v1+json"
RECORD_R = json.dumps({"type": "record", "name": "R", "namespace": "n", "fields": [{"name": "a", "type": "int"}]})
USES_R = json.dumps({"type": "record", "name": "Outer", "namespace": "n", "fields": [{"name": "r", "type": "n.R"}]})


@pytest.fixture
def reg():
    registry = Registry()
    yield registry
    registry.close()


def test_root_types_contexts_and_content_type(reg):
    response = reg.run(reg.rest.handle(request("GET", "/")))
    assert (response.status, response.body, response.headers["Content-Type"]) == (200, b"{}", V1)
    assert reg.call("GET", "/schemas/types")[1] == ["AVRO", "JSON", "PROTOBUF"]
    assert reg.call("GET", "/contexts") == (200, ["."])


def test_register_get_and_list_routes(reg):
    assert reg.call("POST", "/subjects/a/versions", {"schema": AVRO_V1}) == (200, {"id": 1})
    assert reg.call("POST", "/subjects/a/versions/", {"schema": AVRO_V2}) == (200, {"id": 2})  # trailing slash
    assert reg.call("GET", "/subjects") == (200, ["a"])
    assert reg.call("GET", "/subjects/a/versions") == (200, [1, 2])
    status, entity = reg.call("GET", "/subjects/a/versions/latest")
    assert status == 200 and (entity["subject"], entity["version"], entity["id"]) == ("a", 2, 2)
    assert "schemaType" not in entity and "references" not in entity
    assert reg.call("GET", "/subjects/a/versions/1")[1]["id"] == 1
    assert reg.call("GET", "/subjects/a/versions/-1")[1]["version"] == 2
    first = reg.call("GET", "/subjects/a/versions/1")[1]
    assert reg.call("GET", "/subjects/a/versions/1/schema") == (200, json.loads(first["schema"]))
    assert reg.call("GET", "/schemas/ids/1")[1] == {"schema": reg.call("GET", "/subjects/a/versions/1")[1]["schema"]}
    assert reg.call("GET", "/schemas/ids/2/subjects") == (200, ["a"])
    assert reg.call("GET", "/schemas/ids/2/versions") == (200, [{"subject": "a", "version": 2}])
    assert reg.call("GET", "/schemas/ids/1/schema") == (200, json.loads(first["schema"]))
    assert [s["version"] for s in reg.call("GET", "/schemas")[1]] == [1, 2]
    assert [s["version"] for s in reg.call("GET", "/schemas?latestOnly=true")[1]] == [2]
    assert reg.call("POST", "/subjects/a", {"schema": AVRO_V1})[1]["version"] == 1
    assert reg.call("GET", "/subjects?subjectPrefix=b") == (200, [])
    assert reg.call("GET", "/subjects/a/versions?offset=1&limit=1") == (200, [2])


def test_subjects_with_slashes_and_unicode_travel_percent_encoded(reg):
    assert reg.call("POST", "/subjects/a%2Fb%20%C3%A9/versions", {"schema": AVRO_V1}) == (200, {"id": 1})
    assert reg.call("GET", "/subjects") == (200, ["a/b é"])
    assert reg.call("GET", "/subjects/a%2Fb%20%C3%A9/versions/1")[1]["subject"] == "a/b é"


def test_delete_routes_and_the_deleted_flags(reg):
    reg.call("POST", "/subjects/a/versions", {"schema": AVRO_V1})
    reg.call("POST", "/subjects/a/versions", {"schema": AVRO_V2})
    assert reg.call("DELETE", "/subjects/a/versions/1") == (200, 1)
    assert reg.call("GET", "/subjects/a/versions") == (200, [2])
    assert reg.call("GET", "/subjects/a/versions?deleted=true") == (200, [1, 2])
    assert reg.call("GET", "/subjects/a/versions?deletedOnly=true") == (200, [1])
    assert reg.call("GET", "/subjects/a/versions/1")[1]["error_code"] == errors.VERSION_NOT_FOUND
    assert reg.call("GET", "/subjects/a/versions/1?deleted=true")[1]["version"] == 1
    assert reg.call("DELETE", "/subjects/a") == (200, [2])
    assert reg.call("GET", "/subjects") == (200, [])
    assert reg.call("GET", "/subjects?deleted=True") == (200, ["a"])  # Java's parseBoolean: any case
    assert reg.call("DELETE", "/subjects/a?permanent=true") == (200, [1, 2])
    assert reg.call("GET", "/subjects?deleted=true") == (200, [])


@pytest.mark.parametrize("method, target, body, status, error_code", [
    ("GET", "/subjects/nope/versions", None, 404, errors.SUBJECT_NOT_FOUND),
    ("GET", "/subjects/nope/versions/1", None, 404, errors.SUBJECT_NOT_FOUND),
    ("GET", "/subjects/a/versions/9", None, 404, errors.VERSION_NOT_FOUND),
    ("GET", "/schemas/ids/99", None, 404, errors.SCHEMA_NOT_FOUND),
    ("GET", "/schemas/ids/99/subjects", None, 404, errors.SCHEMA_NOT_FOUND),
    ("POST", "/subjects/a", {"schema": '"long"'}, 404, errors.SCHEMA_NOT_FOUND),
    ("POST", "/subjects/nope", {"schema": '"long"'}, 404, errors.SUBJECT_NOT_FOUND),
    ("DELETE", "/subjects/a?permanent=true", None, 404, errors.SUBJECT_NOT_SOFT_DELETED),
    ("DELETE", "/subjects/a/versions/1?permanent=true", None, 404, errors.SCHEMAVERSION_NOT_SOFT_DELETED),
    ("GET", "/config/a", None, 404, errors.SUBJECT_COMPATIBILITY_NOT_CONFIGURED),
    ("GET", "/mode/a", None, 404, errors.SUBJECT_MODE_NOT_CONFIGURED),
    ("DELETE", "/config/a", None, 404, errors.SUBJECT_NOT_FOUND),
    ("DELETE", "/mode/a", None, 404, errors.SUBJECT_NOT_FOUND),
    ("POST", "/subjects/a/versions", {"schema": AVRO_BAD_V2}, 409, errors.INCOMPATIBLE_SCHEMA),
    ("POST", "/subjects/a/versions", {"schema": "{\"type\": \"nonsense\"}"}, 422, errors.INVALID_SCHEMA),
    ("POST", "/subjects/a/versions", {"schema": AVRO_V1, "schemaType": "XML"}, 422, errors.INVALID_SCHEMA),
    ("GET", "/subjects/a/versions/0", None, 422, errors.INVALID_VERSION),
    ("GET", "/subjects/a/versions/abc", None, 422, errors.INVALID_VERSION),
    ("GET", "/subjects/a/versions/99999999999", None, 422, errors.INVALID_VERSION),
    ("PUT", "/config", {"compatibility": "SIDEWAYS"}, 422, errors.INVALID_COMPATIBILITY_LEVEL),
    ("PUT", "/mode", {"mode": "SOMETIMES"}, 422, errors.INVALID_MODE),
    ("PUT", "/mode", {"mode": "IMPORT"}, 422, errors.OPERATION_NOT_PERMITTED),
    ("POST", "/subjects/a%01/versions", {"schema": AVRO_V1}, 422, errors.INVALID_SUBJECT),
    ("POST", "/compatibility/subjects/a/versions/7", {"schema": AVRO_V1}, 404, errors.VERSION_NOT_FOUND),
    ("POST", "/compatibility/subjects/nope/versions/1", {"schema": AVRO_V1}, 404, errors.VERSION_NOT_FOUND),
    ("POST", "/compatibility/subjects/a/versions/1", {"schema": "{\"type\": 1}"}, 422, errors.INVALID_SCHEMA),
    ("GET", "/nowhere", None, 404, 404),
    ("GET", "/schemas/ids/abc", None, 404, 404),
    ("GET", "/subjects/a/versions?offset=x", None, 404, 404),
    ("PUT", "/subjects", None, 405, 405),
    ("DELETE", "/schemas/ids/1", None, 405, 405),
])
def test_error_codes(reg, method, target, body, status, error_code):
    reg.call("POST", "/subjects/a/versions", {"schema": AVRO_V1})
    answer = reg.call(method, target, body)
    assert answer[0] == status and answer[1]["error_code"] == error_code, answer
    assert isinstance(answer[1]["message"], str)


def test_soft_deleted_subject_and_version_codes(reg):
    reg.call("POST", "/subjects/a/versions", {"schema": AVRO_V1})
    reg.call("POST", "/subjects/a/versions", {"schema": AVRO_V2})
    reg.call("DELETE", "/subjects/a/versions/2")
    assert reg.call("DELETE", "/subjects/a/versions/2")[1]["error_code"] == errors.SCHEMAVERSION_SOFT_DELETED
    reg.call("DELETE", "/subjects/a")
    assert reg.call("DELETE", "/subjects/a")[1]["error_code"] == errors.SUBJECT_SOFT_DELETED


def test_reference_exists_and_referencedby(reg):
    reg.call("POST", "/subjects/r/versions", {"schema": RECORD_R})
    refs = [{"name": "n.R", "subject": "r", "version": 1}]
    assert reg.call("POST", "/subjects/o/versions", {"schema": USES_R, "references": refs}) == (200, {"id": 2})
    assert reg.call("GET", "/subjects/r/versions/1/referencedby") == (200, [2])
    assert reg.call("GET", "/subjects/o/versions/1")[1]["references"] == refs
    assert reg.call("GET", "/schemas/ids/2")[1]["references"] == refs
    answer = reg.call("DELETE", "/subjects/r/versions/1")
    assert answer[0] == 422 and answer[1]["error_code"] == errors.REFERENCE_EXISTS


def test_config_and_mode_routes(reg):
    assert reg.call("GET", "/config") == (200, {"compatibilityLevel": "BACKWARD"})
    assert reg.call("PUT", "/config", {"compatibility": "FULL"}) == (200, {"compatibility": "FULL"})
    assert reg.call("PUT", "/config/a", {"compatibility": "NONE", "normalize": True}) == \
        (200, {"compatibility": "NONE", "normalize": True})
    assert reg.call("GET", "/config/a") == (200, {"normalize": True, "compatibilityLevel": "NONE"})
    assert reg.call("GET", "/config/b?defaultToGlobal=true") == (200, {"compatibilityLevel": "FULL"})
    assert reg.call("DELETE", "/config/a") == (200, {"normalize": True, "compatibilityLevel": "NONE"})
    assert reg.call("DELETE", "/config") == (200, {"compatibilityLevel": "FULL"})
    assert reg.call("GET", "/mode") == (200, {"mode": "READWRITE"})
    assert reg.call("PUT", "/mode/a", {"mode": "READONLY"}) == (200, {"mode": "READONLY"})
    assert reg.call("GET", "/mode/a") == (200, {"mode": "READONLY"})
    assert reg.call("GET", "/mode/b?defaultToGlobal=true") == (200, {"mode": "READWRITE"})
    answer = reg.call("POST", "/subjects/a/versions", {"schema": AVRO_V1})
    assert answer[0] == 422 and answer[1]["error_code"] == errors.OPERATION_NOT_PERMITTED
    assert reg.call("DELETE", "/mode/a") == (200, {"mode": "READONLY"})
    assert reg.call("PUT", "/mode?force=true", {"mode": "IMPORT"}) == (200, {"mode": "IMPORT"})
    assert reg.call("POST", "/subjects/a/versions", {"schema": AVRO_V1, "id": 7, "version": 3}) == (200, {"id": 7})


def test_compatibility_routes(reg):
    reg.call("POST", "/subjects/a/versions", {"schema": AVRO_V1})
    assert reg.call("POST", "/compatibility/subjects/a/versions/latest", {"schema": AVRO_V2}) == \
        (200, {"is_compatible": True})
    status, body = reg.call("POST", "/compatibility/subjects/a/versions/1?verbose=true", {"schema": AVRO_BAD_V2})
    assert status == 200 and body["is_compatible"] is False and body["messages"]
    assert reg.call("POST", "/compatibility/subjects/a/versions", {"schema": AVRO_V2}) == \
        (200, {"is_compatible": True})
    assert reg.call("POST", "/compatibility/subjects/new/versions/latest", {"schema": AVRO_V2}) == \
        (200, {"is_compatible": True})
    status, body = reg.call("POST", "/compatibility/subjects/a/versions/latest?verbose=true", {"schema": "{"})
    assert status == 200 and body["is_compatible"] is False and body["messages"][0].startswith("Invalid schema")


@pytest.mark.parametrize("body, status, error_code", [
    (b"{not json", 400, 400),
    (b"", 400, 400),
    (b"[" * 100000, 400, 400),
    (b'"just a string"', 422, 422),
    (b'{"schema": 5}', 422, 422),
    (b'{"schema": "\\"int\\"", "version": "1"}', 422, 422),
    (b'{"schema": "\\"int\\"", "version": 1e400}', 422, 422),
    (b'{"schema": "\\"int\\"", "id": 123456789012345678901234567890}', 422, 422),
    (b'{"schema": "\\"int\\"", "version": true}', 422, 422),
    (b'{"schema": "\\"int\\"", "references": {"a": 1}}', 422, 422),
    (b'{"schema": "\\"int\\"", "references": [{"name": "x"}]}', 422, 422),
    (b'{"schema": "\\"int\\"", "references": [{"name": "x", "subject": "y", "version": 0}]}', 422, 422),
    (b'{"schema": "\\"int\\"", "surprise": 1}', 422, 422),
    (b'\xff\xfe\x00', 400, 400),
    (b'{"schema": "\\"int\\"", "schema": NaN}', 400, 400),
])
def test_bad_bodies_are_4xx_never_500(reg, body, status, error_code):
    answer = reg.call("POST", "/subjects/a/versions", body)
    assert answer[0] == status and answer[1]["error_code"] == error_code, answer


def test_too_many_references_are_refused_before_any_is_resolved(reg):
    from broker_sim.registry.types import MAX_REFERENCES
    refs = [{"name": f"n{i}", "subject": "s", "version": 1} for i in range(MAX_REFERENCES + 1)]
    answer = reg.call("POST", "/subjects/a/versions", {"schema": AVRO_V1, "references": refs})
    assert answer[0] == 422 and answer[1]["error_code"] == errors.INVALID_SCHEMA


def test_unknown_fields_pass_when_the_client_says_it_accepts_them(reg):
    body = {"schema": AVRO_V1, "metadata": None, "ruleSet": None, "surprise": 1}
    assert reg.call("POST", "/subjects/a/versions", body,
                    headers={"Confluent-Accept-Unknown-Properties": "true"}) == (200, {"id": 1})


def test_content_negotiation(reg):
    response = reg.run(reg.rest.handle(request("GET", "/", headers={"accept": "application/json"})))
    assert response.headers["Content-Type"] == "application/json"
    response = reg.run(reg.rest.handle(request("GET", "/", headers={"accept": "text/html"})))
    assert response.status == 406
    response = reg.run(reg.rest.handle(request("POST", "/subjects/a/versions", {"schema": AVRO_V1},
                                               headers={"content-type": "text/plain"})))
    assert response.status == 415


def authorizer(grants: set):
    def authorize(principal, operation, resource):
        return (principal, operation, resource) in grants
    return authorize


def test_authorization_follows_the_route_table():
    grants = {("alice", "WRITE", ("subject", "a")), ("alice", "DESCRIBE", ("subject", "a")),
              ("alice", "READ", ("subject", "a")), ("root", "WRITE", ("subject", "b")),
              ("root", "DESCRIBE", ("subject", "b")), ("root", "READ", ("subject", "b")),
              ("root", "ALTER_CONFIGS", ("registry", "")), ("root", "DESCRIBE_CONFIGS", ("registry", ""))}
    reg = Registry(authorize=authorizer(grants))
    assert reg.call("POST", "/subjects/a/versions", {"schema": AVRO_V1}, principal="alice") == (200, {"id": 1})
    assert reg.call("POST", "/subjects/b/versions", {"schema": AVRO_V2}, principal="root") == (200, {"id": 2})
    denied = reg.call("POST", "/subjects/b/versions", {"schema": AVRO_V1}, principal="alice")
    assert denied[0] == 403 and denied[1]["error_code"] == errors.FORBIDDEN
    assert reg.call("GET", "/subjects", principal="alice") == (200, ["a"])
    assert reg.call("GET", "/subjects", principal="root") == (200, ["b"])
    assert reg.call("GET", "/schemas/ids/1", principal="alice")[0] == 200
    assert reg.call("GET", "/schemas/ids/2", principal="alice")[0] == 403
    assert reg.call("GET", "/schemas/ids/3", principal="alice")[0] == 404
    assert reg.call("DELETE", "/subjects/a", principal="alice")[0] == 403  # no DELETE grant
    assert reg.call("PUT", "/config", {"compatibility": "NONE"}, principal="alice")[0] == 403
    assert reg.call("PUT", "/config", {"compatibility": "NONE"}, principal="root")[0] == 200
    assert reg.call("GET", "/mode", principal="alice")[0] == 403
    assert reg.call("GET", "/schemas/types", principal="alice")[0] == 200
    assert reg.call("GET", "/schemas/ids/1/subjects", principal="root") == (200, [])
    assert reg.call("GET", "/subjects/a/versions/1", principal=None)[0] == 403
    reg.close()


def test_a_follower_forwards_writes_to_the_writer_and_answers_reads_itself():
    log = MemoryLog()
    writer = Registry(log)
    forwarded = []

    async def forward(req):
        forwarded.append((req.method, req.path))
        return await writer.rest.handle(req)

    follower = Registry(log.follower(), forward=forward)
    assert follower.run(follower.acall("POST", "/subjects/a/versions", {"schema": AVRO_V1})) == (200, {"id": 1})
    assert follower.call("GET", "/subjects/a/versions/1")[1]["id"] == 1
    assert follower.call("POST", "/subjects/a", {"schema": AVRO_V1})[0] == 200  # lookup is a read
    assert follower.call("PUT", "/config/a", {"compatibility": "FULL"}) == (200, {"compatibility": "FULL"})
    assert follower.call("GET", "/config/a") == (200, {"compatibilityLevel": "FULL"})
    assert forwarded == [("POST", "/subjects/a/versions"), ("PUT", "/config/a")]
    writer.close()
    follower.close()


def test_a_follower_without_a_forwarder_answers_unknown_leader():
    follower = Registry(MemoryLog(writer=False))
    answer = follower.call("POST", "/subjects/a/versions", {"schema": AVRO_V1})
    assert answer[0] == 500 and answer[1]["error_code"] == errors.UNKNOWN_LEADER
    follower.close()


def test_leadership_lost_during_a_write_is_forwarded():
    log = MemoryLog()
    writer = Registry(log)
    stale = MemoryLog(shared=log)  # thinks it writes; its append is refused

    async def refused(records):
        raise errors.NotWriterError("moved")

    stale.append = refused

    async def forward(req):
        return await writer.rest.handle(req)

    old_leader = Registry(stale, forward=forward)
    assert old_leader.call("POST", "/subjects/a/versions", {"schema": AVRO_V1}) == (200, {"id": 1})
    async def broken(req):
        raise OSError("connection refused")

    failing = Registry(stale, forward=broken)
    answer = failing.call("POST", "/subjects/b/versions", {"schema": AVRO_V2})
    assert answer[0] == 500 and answer[1]["error_code"] == errors.REQUEST_FORWARDING_FAILED
    for registry in (writer, old_leader, failing):
        registry.close()


# ---- confluent-kafka's SchemaRegistryClient, every call it has, through an in-process transport ----

def client_for(reg):
    from confluent_kafka.schema_registry import SchemaRegistryClient
    client = SchemaRegistryClient({"url": "http://registry.invalid:8081", "max.retries": 0})

    def transport(http_request: httpx.Request) -> httpx.Response:
        raw = http_request.url.raw_path.decode()
        path, _, query = raw.partition("?")
        req = request(http_request.method, raw, http_request.content or None,
                      headers={k: v for k, v in http_request.headers.items()})
        req.path, req.query = unquote(path), parse_qs(query, keep_blank_values=True)
        response = reg.run(reg.rest.handle(req))
        return httpx.Response(response.status, headers=response.headers, content=response.body)

    client._rest_client.session = httpx.Client(transport=httpx.MockTransport(transport))
    return client


def test_confluent_kafka_client_calls_all_work(reg):
    from confluent_kafka.schema_registry import Schema, SchemaReference
    from confluent_kafka.schema_registry.error import SchemaRegistryError
    client = client_for(reg)
    v1, v2 = Schema(AVRO_V1, "AVRO"), Schema(AVRO_V2, "AVRO")
    assert client.register_schema("t-value", v1) == 1
    full = client.register_schema_full_response("t-value", v2, normalize_schemas=False)
    assert full.schema_id == 2
    assert client.get_schema(1).schema_str == reg.call("GET", "/schemas/ids/1")[1]["schema"]
    assert client.get_schema(2, subject_name="t-value", fmt="resolved").schema_type == "AVRO"
    assert set(client.get_schema_types()) == {"AVRO", "JSON", "PROTOBUF"}
    assert client.get_subjects_by_schema_id(1) == ["t-value"]
    assert [(v.subject, v.version) for v in client.get_schema_versions(2)] == [("t-value", 2)]
    assert client.lookup_schema("t-value", v1).version == 1
    assert client.get_subjects() == ["t-value"]
    assert client.get_latest_version("t-value").version == 2
    assert client.get_version("t-value", 1).schema_id == 1
    assert client.get_versions("t-value") == [1, 2]
    assert client.test_compatibility("t-value", Schema(AVRO_BAD_V2, "AVRO")) is True
    assert client.test_compatibility("t-value", Schema(AVRO_BAD_V2, "AVRO"), version=1, verbose=True) is False
    assert client.test_compatibility_all_versions("t-value", v2) is True
    assert client.set_compatibility("t-value", "FULL")["compatibility"] == "FULL"
    assert client.get_compatibility("t-value") == "FULL"
    from confluent_kafka.schema_registry import ServerConfig
    from confluent_kafka.schema_registry.common.schema_registry_client import ConfigCompatibilityLevel
    client.set_config(config=ServerConfig(compatibility=ConfigCompatibilityLevel.NONE))
    assert client.get_config().compatibility_level == ConfigCompatibilityLevel.NONE
    assert client.delete_config("t-value").compatibility_level == ConfigCompatibilityLevel.FULL
    assert client.update_mode("t-value", "READONLY") == "READONLY"
    assert client.get_mode("t-value") == "READONLY"
    assert client.delete_mode("t-value") == "READONLY"
    assert client.get_global_mode() == "READWRITE"
    assert client.update_global_mode("READWRITE") == "READWRITE"
    client.register_schema("r", Schema(RECORD_R, "AVRO"))
    client.register_schema("o", Schema(USES_R, "AVRO", [SchemaReference("n.R", "r", 1)]))
    assert client.get_referenced_by("r", 1) == [4]
    assert client.delete_version("t-value", 1) == 1
    assert client.get_versions("t-value", deleted=True) == [1, 2]
    assert client.delete_subject("t-value") == [2]
    assert client.delete_subject("t-value", permanent=True) == [1, 2]
    with pytest.raises(SchemaRegistryError) as info:
        client.get_version("t-value", 1)
    assert (info.value.http_status_code, info.value.error_code) == (404, errors.SUBJECT_NOT_FOUND)
    assert client.get_contexts() == ["."]
    client.set_compatibility("o", "BACKWARD")
    with pytest.raises(SchemaRegistryError) as info:
        client.register_schema("o", Schema(AVRO_BAD_V2, "AVRO"))
    assert info.value.http_status_code == 409


def test_avro_serializer_round_trip_through_the_registry(reg):
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    client = client_for(reg)
    serializer = AvroSerializer(client, AVRO_V1)
    context = SerializationContext("t", MessageField.VALUE)
    data = serializer({"name": "ada"}, context)
    assert data[0] == 0 and int.from_bytes(data[1:5], "big") == 1
    assert AvroDeserializer(client)(data, context) == {"name": "ada"}


def test_many_concurrent_requests_through_handle_keep_ids_unique(reg):
    reg.call("PUT", "/config", {"compatibility": "NONE"})

    async def burst():
        bodies = [{"schema": json.dumps({"type": "record", "name": f"R{i}", "fields": []})} for i in range(25)]
        return await asyncio.gather(*(reg.acall("POST", f"/subjects/s{i % 3}/versions", body)
                                      for i, body in enumerate(bodies)))

    ids = [body["id"] for status, body in reg.run(burst())]
    assert sorted(ids) == list(range(1, 26))


def test_json_schemas_register_with_their_type(reg):
    text = json.dumps({"type": "object", "properties": {"a": {"type": "string"}}})
    assert reg.call("POST", "/subjects/j/versions", {"schema": text, "schemaType": "JSON"}) == (200, {"id": 1})
    assert reg.call("GET", "/schemas/ids/1")[1] == {"schemaType": "JSON", "schema": json.dumps(json.loads(text), separators=(",", ":"))}  # stored compact, as Confluent
    assert reg.call("GET", "/subjects/j/versions/1")[1]["schemaType"] == "JSON"
    assert reg.call("POST", "/subjects/j", {"schema": text, "schemaType": "JSON"})[1]["id"] == 1
    answer = reg.call("POST", "/subjects/j/versions", {"schema": '{"type": 5}', "schemaType": "JSON"})
    assert answer[1]["error_code"] == errors.INVALID_SCHEMA


def test_protobuf_schemas_register_with_their_type(reg):
    pytest.importorskip("broker_sim.registry.types.protobuf")
    text = 'syntax = "proto3";\npackage p;\nmessage M { string a = 1; }\n'
    assert reg.call("POST", "/subjects/p/versions", {"schema": text, "schemaType": "PROTOBUF"}) == (200, {"id": 1})
    assert reg.call("GET", "/schemas/ids/1")[1]["schemaType"] == "PROTOBUF"
    assert reg.call("POST", "/subjects/p", {"schema": text, "schemaType": "PROTOBUF"})[1]["version"] == 1


def test_normalize_registers_the_normalized_form_and_finds_it_again(reg):
    assert reg.call("POST", "/subjects/n/versions?normalize=true", {"schema": AVRO_V1}) == (200, {"id": 1})
    stored = reg.call("GET", "/subjects/n/versions/1")[1]["schema"]
    assert reg.call("POST", "/subjects/n?normalize=true", {"schema": AVRO_V1})[1]["id"] == 1
    assert reg.call("POST", "/subjects/n/versions?normalize=true", {"schema": AVRO_V1}) == (200, {"id": 1})
    reg.call("PUT", "/config/m", {"normalize": True})
    assert reg.call("POST", "/subjects/m/versions", {"schema": AVRO_V1}) == (200, {"id": 1})
    assert reg.call("GET", "/subjects/m/versions/1")[1]["schema"] == stored


def test_an_absolute_form_request_target_routes_by_its_path(reg):
    req = request("GET", "/subjects")
    req.raw_path = "http://registry.example:8081/subjects?deleted=true"
    assert reg.run(reg.rest.handle(req)).status == 200


def test_an_existing_registration_is_answered_locally_even_read_only_or_without_a_writer():
    log = MemoryLog()
    writer = Registry(log)
    writer.call("POST", "/subjects/a/versions", {"schema": AVRO_V1})
    writer.call("PUT", "/mode", {"mode": "READONLY"})
    assert writer.call("POST", "/subjects/a/versions", {"schema": AVRO_V1}) == (200, {"id": 1})
    assert writer.call("POST", "/subjects/a/versions", {"schema": AVRO_V2})[1]["error_code"] == \
        errors.OPERATION_NOT_PERMITTED
    follower = Registry(log.follower())  # no forwarder
    assert follower.call("POST", "/subjects/a/versions", {"schema": AVRO_V1}) == (200, {"id": 1})
    assert follower.call("POST", "/subjects/a/versions", {"schema": AVRO_V2})[1]["error_code"] == \
        errors.UNKNOWN_LEADER
    writer.close()
    follower.close()


def test_protobuf_and_json_references_resolve_and_replay():
    pytest.importorskip("broker_sim.registry.types.protobuf")
    reg = Registry()
    a = 'syntax = "proto3";\npackage p;\nmessage A { string x = 1; }\n'
    b = 'syntax = "proto3";\npackage p;\nimport "a.proto";\nmessage B { A a = 1; }\n'
    assert reg.call("POST", "/subjects/a/versions", {"schema": a, "schemaType": "PROTOBUF"}) == (200, {"id": 1})
    assert reg.call("POST", "/subjects/b/versions", {"schema": b, "schemaType": "PROTOBUF"})[1]["error_code"] \
        == errors.INVALID_SCHEMA  # the import is not there without its reference
    refs = [{"name": "a.proto", "subject": "a", "version": 1}]
    assert reg.call("POST", "/subjects/b/versions", {"schema": b, "schemaType": "PROTOBUF", "references": refs}) \
        == (200, {"id": 2})
    assert reg.call("GET", "/subjects/a/versions/1/referencedby") == (200, [2])
    ja = json.dumps({"type": "object", "properties": {"x": {"type": "string"}}})
    jb = json.dumps({"type": "object", "properties": {"a": {"$ref": "a.json"}}})
    reg.call("POST", "/subjects/ja/versions", {"schema": ja, "schemaType": "JSON"})
    jrefs = [{"name": "a.json", "subject": "ja", "version": 1}]
    assert reg.call("POST", "/subjects/jb/versions", {"schema": jb, "schemaType": "JSON", "references": jrefs}) \
        == (200, {"id": 4})
    again = Registry(reg.log)
    again.call("GET", "/subjects")
    assert again.service.state.snapshot() == reg.service.state.snapshot()
    assert all(again.service.state.schema_by_id(i).parsed is not None for i in (1, 2, 3, 4))
    reg.close()
    again.close()
