"""Confluent Schema Registry's REST API v1 over ``RegistryService``: routing, request bodies, authorization.

Theory of operation.  ``RegistryRest(service, authorize).handle(request)`` takes one HTTP request (the
server's ``HttpRequest``: method, percent-decoded ``path``, ``raw_path`` as sent, ``query`` name -> values,
lower-case ``headers``, ``body``, the authenticated ``principal``) and answers a ``RestResponse`` (status,
headers, body) with Confluent's JSON shapes, content type ``application/vnd.schemaregistry.v1+json`` (or what
``Accept`` asks of Confluent's three), and errors ``{"error_code": n, "message": "..."}``.  In order:

1. route: the path's segments (split on the raw path, so ``%2F`` stays inside a subject; a trailing slash is
   ignored) and the method pick a route; none matches: 404, the path matches another method: 405;
2. authorize: the route's (operation, resource), below, through ``authorize(principal, op, resource)``;
   denied: 403 / 40301;
3. parse: query parameters as JAX-RS does (booleans are Java's ``Boolean.parseBoolean``: ``true`` in any case,
   anything else false; a malformed integer path or query parameter is 404), the JSON body with bounded
   nesting (``bounded_json``; not JSON: 400 / 400), its fields checked for type and range (422 / 422; unknown
   fields too, unless ``Confluent-Accept-Unknown-Properties: true``, which confluent-kafka sends);
4. forward: a write (POST, PUT, DELETE, except the read-only POSTs lookup and compatibility) on a broker that
   is not the writer goes to ``service.forward`` as it came (already authorized here); without one: 500 / 50004.
   A registration the subject already holds is answered locally first, in any mode (Confluent's
   ``registerOrForward``): serializers re-registering on start need neither the writer nor READWRITE;
5. answer from the service (``RegistryError`` -> its status and code).  GET /schemas, whose answer carries
   every schema's text, is a ``stream`` encoded slice by slice as the client reads (``JsonArray``).

Authorization model (after Redpanda's schema registry ACLs): resources are ("subject", name) and
("registry", ""); operations READ, WRITE, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS.

=========================================================  =========================================
route                                                      needs
=========================================================  =========================================
GET /, GET /schemas/types, GET /contexts                   nothing (any authenticated principal)
GET /subjects, GET /schemas                                the list shows only subjects the principal
                                                           may DESCRIBE (/subjects) or READ (/schemas)
GET /subjects/{s}/versions                                 DESCRIBE subject s
GET /subjects/{s}/versions/{v}[/schema|/referencedby]      READ subject s
POST /subjects/{s} (lookup)                                READ subject s
POST /subjects/{s}/versions (register)                     WRITE subject s
DELETE /subjects/{s}, DELETE /subjects/{s}/versions/{v}    DELETE subject s
POST /compatibility/subjects/{s}/versions[/{v}]            READ subject s
GET /schemas/ids/{id}[/schema]                             READ on one subject holding the id
GET /schemas/ids/{id}/subjects|versions                    lists only subjects the principal may DESCRIBE
GET /config, GET /mode                                     DESCRIBE_CONFIGS registry
PUT|DELETE /config, PUT|DELETE /mode                       ALTER_CONFIGS registry
GET /config/{s}, GET /mode/{s}                             DESCRIBE_CONFIGS subject s
PUT|DELETE /config/{s}, PUT|DELETE /mode/{s}               ALTER_CONFIGS subject s
=========================================================  =========================================

Without an authorizer everything is allowed.  An id no allowed subject holds answers 403 only when the id
exists (404 otherwise, as to everybody).
"""
from __future__ import annotations

import asyncio
import json
import logging
import re
from dataclasses import dataclass, field
from typing import AsyncIterator, Callable
from urllib.parse import unquote, urlsplit

from broker_sim.registry import bounded_json, errors, types
from broker_sim.registry.errors import NotWriterError, RegistryError
from broker_sim.registry.service import INT32_MAX, LATEST, RegistryService

log = logging.getLogger(__name__)

V1_JSON = "application/vnd.schemaregistry.v1+json"
ANY_JSON = "application/vnd.schemaregistry+json"
PLAIN_JSON = "application/json"
REQUEST_TYPES = (V1_JSON, ANY_JSON, PLAIN_JSON, "application/octet-stream")
MAX_BODY_DEPTH = 32  # request bodies are shallow: the schema itself travels as a string
ARRAY_SLICE_BYTES = 64 * 1024  # a streamed array answer is encoded this much at a time

READ, WRITE, DELETE, DESCRIBE = "READ", "WRITE", "DELETE", "DESCRIBE"
DESCRIBE_CONFIGS, ALTER_CONFIGS = "DESCRIBE_CONFIGS", "ALTER_CONFIGS"
REGISTRY = ("registry", "")

_INT = re.compile(r"[+-]?[0-9]+\Z")
_SCHEMA_FIELDS = {"schema": str, "schemaType": str, "references": list, "version": int, "id": int,
                  "metadata": (dict, type(None)), "ruleSet": (dict, type(None)), "schemaTagsToAdd": list,
                  "schemaTagsToRemove": list, "propagateSchemaTags": bool}
_CONFIG_FIELDS = {"compatibility": (str, type(None)), "compatibilityLevel": (str, type(None)),
                  "normalize": (bool, type(None)), "alias": (str, type(None)),
                  "compatibilityGroup": (str, type(None)), "validateFields": (bool, type(None)),
                  "validateRules": (bool, type(None)), "defaultMetadata": (dict, type(None)),
                  "overrideMetadata": (dict, type(None)), "defaultRuleSet": (dict, type(None)),
                  "overrideRuleSet": (dict, type(None))}
_MODE_FIELDS = {"mode": (str, type(None))}

Authorize = Callable[[str | None, str, tuple[str, str]], bool]


@dataclass
class RestResponse:
    """What ``handle`` answers; the HTTP server's ``HttpResponse`` has the same fields."""
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    stream: AsyncIterator[bytes] | None = None  # instead of ``body`` (``JsonArray`` answers)


class JsonArray(list):
    """A JSON array answer that may be too big to build per request (GET /schemas: every schema's text):
    ``stream`` encodes it item by item as the client reads, so a client that stops reading holds one slice
    of it, and encoding never holds the event loop for more than one slice."""


async def _array_slices(items: list) -> AsyncIterator[bytes]:
    parts: list[bytes] = [b"["]
    size = 1
    for i, item in enumerate(items):
        part = json.dumps(item, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        parts.append(b"," + part if i else part)
        size += len(part) + 1
        if size >= ARRAY_SLICE_BYTES:
            yield b"".join(parts)
            parts, size = [], 0
            await asyncio.sleep(0)  # other clients' requests between slices
    parts.append(b"]")
    yield b"".join(parts)


def _allow_all(principal, operation, resource) -> bool:
    return True


class _NoRoute(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


def _jersey(status: int) -> RegistryError:
    text = {404: "HTTP 404 Not Found", 405: "HTTP 405 Method Not Allowed", 406: "HTTP 406 Not Acceptable",
            415: "HTTP 415 Unsupported Media Type"}[status]
    return RegistryError(status, status, text)


def _flag(query: dict, name: str) -> bool:
    values = query.get(name)
    return bool(values) and values[-1].strip().lower() == "true"


def _text(query: dict, name: str, default: str | None = None) -> str | None:
    values = query.get(name)
    return values[-1] if values else default


def _java_int(text: str) -> int | None:
    if not _INT.match(text):
        return None
    number = int(text)
    return number if -INT32_MAX - 1 <= number <= INT32_MAX else None


def _query_int(query: dict, name: str, default: int) -> int:
    text = _text(query, name)
    if text is None or text == "":
        return default
    number = _java_int(text.strip())
    if number is None:
        raise _jersey(404)
    return number


def _version(text: str) -> int:
    """Confluent's ``VersionId``: "latest" or -1 is the latest, else an int in [1, 2^31-1] (42202)."""
    if text.lower() == "latest":
        return LATEST
    number = _java_int(text)
    if number == -1:
        return LATEST
    if number is None or number < 1:
        raise errors.invalid_version(text)
    return number


def _schema_id(text: str) -> int:
    number = _java_int(text)
    if number is None:
        raise _jersey(404)
    return number


def _page(items: list, query: dict) -> list:
    offset = max(_query_int(query, "offset", 0), 0)
    limit = _query_int(query, "limit", -1)
    items = items[offset:]
    return items[:limit] if limit > 0 else items


class RegistryRest:
    def __init__(self, service: RegistryService, authorize: Authorize | None = None) -> None:
        self.service = service
        self.authorize = authorize or _allow_all

    # ---- the entry point ----

    async def handle(self, request) -> RestResponse:
        try:
            content_type = self._negotiate(request)
            status, body = await self._dispatch(request)
            if isinstance(body, RestResponse):  # forwarded: the writer's answer as it came
                return body
            return self._respond(status, body, content_type)
        except RegistryError as e:
            return self._respond(e.http_status, e.body(), V1_JSON)
        except Exception:
            log.exception("schema registry: %s %s failed", request.method, request.path)
            return self._respond(500, {"error_code": 500, "message": "Internal Server Error"}, V1_JSON)

    @staticmethod
    def _respond(status: int, body, content_type: str) -> RestResponse:
        if isinstance(body, JsonArray):
            return RestResponse(status, {"Content-Type": content_type}, stream=_array_slices(body))
        if isinstance(body, bytes):
            data = body
        else:
            data = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        return RestResponse(status, {"Content-Type": content_type}, data)

    @staticmethod
    def _negotiate(request) -> str:
        ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if request.body and ctype and ctype not in REQUEST_TYPES:
            raise _jersey(415)
        accept = request.headers.get("accept", "")
        if not accept.strip():
            return V1_JSON
        offered = [part.split(";")[0].strip().lower() for part in accept.split(",")]
        for media in offered:
            if media in (V1_JSON, "*/*", "application/*"):
                return V1_JSON
            if media in (ANY_JSON, PLAIN_JSON):
                return media
        raise _jersey(406)

    @staticmethod
    def _segments(request) -> list[str]:
        raw = getattr(request, "raw_path", "") or ""
        if raw:
            raw = urlsplit(raw).path if "://" in raw.split("?", 1)[0] else raw.split("?", 1)[0].split("#", 1)[0]
            parts = [unquote(p) if "%" in p else p for p in raw.split("/")]
        else:
            parts = request.path.split("/")
        if parts and parts[0] == "":
            parts = parts[1:]
        if parts and parts[-1] == "":
            parts = parts[:-1]
        return parts

    # ---- authorization ----

    def _require(self, request, operation: str, resource: tuple[str, str]) -> None:
        if not self.authorize(request.principal, operation, resource):
            raise errors.forbidden(request.principal, operation, resource)

    def _may(self, request, operation: str, subject: str) -> bool:
        return self.authorize(request.principal, operation, ("subject", subject))

    # ---- bodies ----

    @staticmethod
    def _body(request, fields: dict) -> dict:
        if not request.body:
            raise errors.bad_request("No content to map due to end-of-input")
        try:
            obj = bounded_json.loads(request.body, MAX_BODY_DEPTH)
        except ValueError as e:
            raise errors.bad_request(f"Unexpected character or malformed JSON: {e}") from None
        if not isinstance(obj, dict):
            raise errors.unprocessable(f"The request body must be a JSON object, not {type(obj).__name__}")
        lenient = request.headers.get("confluent-accept-unknown-properties", "").strip().lower() == "true"
        for name, item in obj.items():
            expected = fields.get(name)
            if expected is None:
                if lenient:
                    continue
                raise errors.unprocessable(f"Unrecognized field \"{name}\"")
            allowed = expected if isinstance(expected, tuple) else (expected,)
            if item is None:
                continue  # Jackson reads null as absent
            if (isinstance(item, bool) and bool not in allowed) or not isinstance(item, allowed):
                raise errors.unprocessable(f"Field \"{name}\" has the wrong type: {type(item).__name__}")
            if int in allowed and not -INT32_MAX - 1 <= item <= INT32_MAX:
                raise errors.unprocessable(f"Field \"{name}\" is out of the range of a 32-bit int: {item}")
        return obj

    def _schema_request(self, request) -> dict:
        """A RegisterSchemaRequest: schema, schemaType, references, version, id (checked)."""
        obj = self._body(request, _SCHEMA_FIELDS)
        schema = obj.get("schema")
        if schema is not None and not isinstance(schema, str):
            raise errors.unprocessable("Field \"schema\" must be a string")
        references = []
        if len(obj.get("references") or []) > types.MAX_REFERENCES:
            raise errors.invalid_schema(f"too many references (at most {types.MAX_REFERENCES})")
        for ref in obj.get("references") or []:
            if not isinstance(ref, dict):
                raise errors.unprocessable("A reference must be an object")
            name, subject, version = ref.get("name"), ref.get("subject"), ref.get("version", -1)
            if not isinstance(name, str) or not isinstance(subject, str) or not name or not subject:
                raise errors.unprocessable("A reference needs a string name and subject")
            if isinstance(version, bool) or not isinstance(version, int) or not -1 <= version <= INT32_MAX \
                    or version == 0:
                raise errors.unprocessable(f"Invalid reference version: {version!r}")
            references.append({"name": name, "subject": subject, "version": version})
        return {"schema": schema, "schema_type": (obj.get("schemaType") or "AVRO").upper(),
                "references": references, "version": max(obj.get("version") or 0, 0),
                "schema_id": obj["id"] if obj.get("id") is not None and obj["id"] >= 0 else -1}

    # ---- routing ----

    async def _dispatch(self, request):
        method = "GET" if request.method.upper() == "HEAD" else request.method.upper()
        parts = self._segments(request)
        query = request.query or {}
        routes = self._routes(parts)
        if routes is None:
            raise _jersey(404)
        action = routes.get(method)
        if action is None:
            raise _jersey(405)
        operation, resource, handler, write = action
        if operation is not None:
            self._require(request, operation, resource)
        if write and not self.service.log.is_writer():
            return 200, await self._forward(request)
        try:
            return await handler(request, query)
        except NotWriterError:
            return 200, await self._forward(request)

    async def _forward(self, request):
        if self.service.forward is None:
            raise errors.unknown_leader()
        try:
            response = await self.service.forward(request)
        except RegistryError:
            raise
        except Exception as e:
            raise errors.forwarding_failed(f"Unexpected error while forwarding the request: {e}") from None
        if isinstance(response, RestResponse):
            return response
        return RestResponse(response.status, dict(response.headers), response.body)

    def _routes(self, parts: list[str]) -> dict | None:
        """method -> (operation, resource, handler, is_write) for the path, or None (404)."""
        n = len(parts)
        head = parts[0] if parts else ""
        if n == 0:
            return {"GET": (None, None, self._root, False)}
        if head == "subjects":
            if n == 1:
                return {"GET": (None, None, self._list_subjects, False)}
            subject = parts[1]
            res = ("subject", subject)
            if n == 2:
                return {"POST": (READ, res, lambda r, q: self._lookup(r, q, subject), False),
                        "DELETE": (DELETE, res, lambda r, q: self._delete_subject(r, q, subject), True)}
            if parts[2] != "versions":
                return None
            if n == 3:
                # register forwards by itself: an existing registration is answered here first
                return {"GET": (DESCRIBE, res, lambda r, q: self._versions(r, q, subject), False),
                        "POST": (WRITE, res, lambda r, q: self._register(r, q, subject), False)}
            version = parts[3]
            if n == 4:
                return {"GET": (READ, res, lambda r, q: self._get_version(r, q, subject, version), False),
                        "DELETE": (DELETE, res, lambda r, q: self._delete_version(r, q, subject, version), True)}
            if n == 5 and parts[4] == "schema":
                return {"GET": (READ, res, lambda r, q: self._get_version(r, q, subject, version, True), False)}
            if n == 5 and parts[4] == "referencedby":
                return {"GET": (READ, res, lambda r, q: self._referenced_by(r, q, subject, version), False)}
            return None
        if head == "schemas":
            if n == 1:
                return {"GET": (None, None, self._list_schemas, False)}
            if n == 2 and parts[1] == "types":
                return {"GET": (None, None, self._types, False)}
            if parts[1] == "ids" and n in (3, 4):
                schema_id = parts[2]
                tail = parts[3] if n == 4 else ""
                if tail not in ("", "schema", "subjects", "versions"):
                    return None
                return {"GET": (None, None, lambda r, q: self._by_id(r, q, schema_id, tail), False)}
            return None
        if head in ("config", "mode") and n <= 2:
            subject = parts[1] if n == 2 else None
            res = ("subject", subject) if subject is not None else REGISTRY
            get, put, delete = ((self._get_config, self._put_config, self._delete_config) if head == "config"
                                else (self._get_mode, self._put_mode, self._delete_mode))
            return {"GET": (DESCRIBE_CONFIGS, res, lambda r, q: get(r, q, subject), False),
                    "PUT": (ALTER_CONFIGS, res, lambda r, q: put(r, q, subject), True),
                    "DELETE": (ALTER_CONFIGS, res, lambda r, q: delete(r, q, subject), True)}
        if head == "compatibility" and n in (4, 5) and parts[1] == "subjects" and parts[3] == "versions":
            subject = parts[2]
            version = parts[4] if n == 5 else None
            return {"POST": (READ, ("subject", subject),
                             lambda r, q: self._compatibility(r, q, subject, version), False)}
        if head == "contexts" and n == 1:
            return {"GET": (None, None, self._contexts, False)}
        return None

    # ---- handlers: each answers (status, JSON value or raw bytes) ----

    async def _root(self, request, query):
        return 200, {}

    async def _contexts(self, request, query):
        return 200, ["."]

    async def _types(self, request, query):
        return 200, self.service.schema_types()

    async def _list_subjects(self, request, query):
        deleted_only = _flag(query, "deletedOnly") or _flag(query, "deleted_only")
        subjects = await self.service.subjects(_text(query, "subjectPrefix", "") or "", _flag(query, "deleted"),
                                               deleted_only)
        return 200, _page([s for s in subjects if self._may(request, DESCRIBE, s)], query)

    async def _list_schemas(self, request, query):
        schemas = await self.service.schemas(_text(query, "subjectPrefix", "") or "", _flag(query, "deleted"),
                                             _flag(query, "latestOnly"))
        return 200, JsonArray(_page([s for s in schemas if self._may(request, READ, s["subject"])], query))

    async def _versions(self, request, query, subject):
        deleted_only = _flag(query, "deletedOnly") or _flag(query, "deleted_only")
        versions = await self.service.versions(subject, _flag(query, "deleted"), deleted_only)
        return 200, _page(versions, query)

    async def _register(self, request, query, subject):
        body = self._schema_request(request)
        normalize = _flag(query, "normalize")
        answer = await self.service.registered(subject, normalize=normalize, **body)
        if answer is not None:
            return 200, answer
        if not self.service.log.is_writer():
            return 200, await self._forward(request)
        return 200, await self.service.register(subject, normalize=normalize, **body)

    async def _lookup(self, request, query, subject):
        body = self._schema_request(request)
        if body["schema"] is None:
            raise errors.invalid_schema("Empty schema")
        return 200, await self.service.lookup(subject, body["schema"], body["schema_type"], body["references"],
                                              _flag(query, "normalize"), _flag(query, "deleted"))

    async def _get_version(self, request, query, subject, version, raw=False):
        entity = await self.service.get_version(subject, _version(version), _flag(query, "deleted"),
                                                _text(query, "format"))
        return 200, entity["schema"].encode("utf-8") if raw else entity

    async def _referenced_by(self, request, query, subject, version):
        return 200, _page(await self.service.referenced_by(subject, _version(version)), query)

    async def _delete_version(self, request, query, subject, version):
        return 200, await self.service.delete_version(subject, _version(version), _flag(query, "permanent"))

    async def _delete_subject(self, request, query, subject):
        return 200, await self.service.delete_subject(subject, _flag(query, "permanent"))

    async def _by_id(self, request, query, schema_id, tail):
        number = _schema_id(schema_id)
        include_deleted = _flag(query, "deleted")
        if tail in ("", "schema"):
            entity = await self.service.schema_by_id(number, _text(query, "format"), _flag(query, "fetchMaxId"))
            if self.authorize is not _allow_all:
                holders = self.service.state.subject_versions_of_id(number, include_deleted=True)
                if not any(self._may(request, READ, s) for s, _ in holders):
                    raise errors.forbidden(request.principal, READ, ("subject", holders[0][0] if holders else ""))
            return 200, entity["schema"].encode("utf-8") if tail == "schema" else entity
        only = _text(query, "subject")
        if tail == "subjects":
            subjects = await self.service.subjects_of_id(number, include_deleted)
            subjects = [s for s in subjects if (only is None or s == only) and self._may(request, DESCRIBE, s)]
            return 200, _page(subjects, query)
        versions = await self.service.versions_of_id(number, include_deleted)
        versions = [v for v in versions
                    if (only is None or v["subject"] == only) and self._may(request, DESCRIBE, v["subject"])]
        return 200, _page(versions, query)

    async def _compatibility(self, request, query, subject, version):
        body = self._schema_request(request)
        if body["schema"] is None:
            raise errors.invalid_schema("Empty schema")
        number = _version(version) if version is not None else None
        return 200, await self.service.test_compatibility(
            subject, number, body["schema"], body["schema_type"], body["references"], _flag(query, "normalize"),
            _flag(query, "verbose"))

    async def _get_config(self, request, query, subject):
        return 200, await self.service.get_config(subject, _flag(query, "defaultToGlobal"))

    async def _put_config(self, request, query, subject):
        obj = self._body(request, _CONFIG_FIELDS)
        level = obj.get("compatibility") if obj.get("compatibility") is not None else obj.get("compatibilityLevel")
        return 200, await self.service.set_config(subject, level, obj.get("normalize"))

    async def _delete_config(self, request, query, subject):
        return 200, await self.service.delete_config(subject)

    async def _get_mode(self, request, query, subject):
        return 200, await self.service.get_mode(subject, _flag(query, "defaultToGlobal"))

    async def _put_mode(self, request, query, subject):
        obj = self._body(request, _MODE_FIELDS)
        return 200, await self.service.set_mode(subject, obj.get("mode"), _flag(query, "force"))

    async def _delete_mode(self, request, query, subject):
        return 200, await self.service.delete_mode(subject)
