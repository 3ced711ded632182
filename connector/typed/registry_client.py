"""A Schema Registry client over Confluent's REST API v1 (urllib only): schemas by id, subject versions, register.

Theory of operation: one ``RegistryClient`` per process and configuration
(``RegistryClient.shared``), so a Python worker that reads many partitions asks
the registry once per schema id. Schemas come back parsed by the registry's own
parsers (``broker_sim.registry.types.parse``) with their references resolved,
recursively, through ``GET /subjects/{subject}/versions/{version}`` — the same
walk confluent-kafka's clients make. It speaks only the REST API, so it works
against pylog's brokers and Confluent's own registry alike.

Options are confluent-kafka's SchemaRegistryClient names under the
``schema.registry.`` prefix: ``url`` (comma-separated; tried in turn when one is
unreachable), ``basic.auth.user.info`` (``user:password``) with
``basic.auth.credentials.source`` USER_INFO (default), URL (user info in the
URL) or SASL_INHERIT (the Kafka client's SASL/PLAIN or SCRAM username and
password), ``ssl.ca.location``, ``ssl.certificate.location``,
``ssl.key.location``, ``ssl.key.password``, and ``timeout.ms`` (pylog's: per
request, default 30 s).
"""
from __future__ import annotations

import base64
import json
import ssl
import threading
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

MAX_RESPONSE_BYTES = 64 << 20   # a registry answer larger than this is refused, not buffered
MAX_REFERENCE_DEPTH = 32


class RegistryError(RuntimeError):
    """The registry refused a request or could not be reached: ``status`` (HTTP, 0 unreachable), ``code``
    (Confluent's error_code, e.g. 40403 schema not found)."""

    def __init__(self, message: str, status: int = 0, code: int = 0) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


@dataclass(frozen=True)
class RegistryConfig:
    """The ``schema.registry.*`` options, parsed; frozen and picklable (it travels to executors)."""

    urls: tuple[str, ...]
    user_info: str | None = None
    ca_location: str | None = None
    certificate_location: str | None = None
    key_location: str | None = None
    key_password: str | None = None
    timeout_ms: int = 30_000

    def describe(self) -> str:
        return ",".join(self.urls)


@dataclass(frozen=True)
class RegisteredSchema:
    """One schema as the registry serves it: its id, type, text and references (name, subject, version)."""

    schema_id: int
    schema_type: str
    text: str
    references: tuple[tuple[str, str, int], ...] = ()
    subject: str | None = None
    version: int | None = None


class RegistryClient:
    """Cached lookups against one registry (see the module docstring). Thread-safe."""

    _shared: dict[RegistryConfig, "RegistryClient"] = {}
    _shared_lock = threading.Lock()

    @classmethod
    def shared(cls, config: RegistryConfig) -> "RegistryClient":
        with cls._shared_lock:
            client = cls._shared.get(config)
            if client is None:
                client = cls._shared[config] = cls(config)
            return client

    def __init__(self, config: RegistryConfig) -> None:
        self.config = config
        self._lock = threading.Lock()
        self._by_id: dict[int, RegisteredSchema] = {}
        self._parsed: dict[tuple, object] = {}
        self._versions: dict[tuple[str, int], RegisteredSchema] = {}
        self._registered: dict[tuple, int] = {}
        self._ssl = _ssl_context(config) if any(u.startswith("https:") for u in config.urls) else None

    # -- lookups ---------------------------------------------------------------------------------------------------

    def schema(self, schema_id: int) -> RegisteredSchema:
        """``GET /schemas/ids/{id}``; cached forever (an id never changes meaning)."""
        with self._lock:
            found = self._by_id.get(schema_id)
        if found is not None:
            return found
        body = self._get(f"/schemas/ids/{int(schema_id)}")
        found = RegisteredSchema(int(schema_id), body.get("schemaType", "AVRO"), body["schema"],
                                 _references(body.get("references")))
        with self._lock:
            self._by_id[schema_id] = found
        return found

    def version(self, subject: str, version: int | str = "latest") -> RegisteredSchema:
        """``GET /subjects/{subject}/versions/{version}``; numbered versions are cached, ``latest`` never is."""
        key = (subject, version) if isinstance(version, int) else None
        if key is not None:
            with self._lock:
                found = self._versions.get(key)
            if found is not None:
                return found
        body = self._get(f"/subjects/{_quote(subject)}/versions/{_quote(str(version))}")
        found = RegisteredSchema(int(body["id"]), body.get("schemaType", "AVRO"), body["schema"],
                                 _references(body.get("references")), body.get("subject", subject),
                                 int(body["version"]))
        with self._lock:
            self._versions[(found.subject, found.version)] = found
            self._by_id.setdefault(found.schema_id, RegisteredSchema(found.schema_id, found.schema_type, found.text,
                                                                     found.references))
        return found

    def register(self, subject: str, schema_type: str, text: str, normalize: bool = False) -> int:
        """``POST /subjects/{subject}/versions``: the id (the existing one when the schema is already there)."""
        key = ("register", subject, schema_type, text, normalize)
        with self._lock:
            found = self._registered.get(key)
        if found is not None:   # a streaming sink resolves its schema for every micro-batch
            return found
        payload = {"schema": text}
        if schema_type != "AVRO":
            payload["schemaType"] = schema_type
        query = "?normalize=true" if normalize else ""
        body = self._request("POST", f"/subjects/{_quote(subject)}/versions{query}", payload)
        with self._lock:
            self._registered[key] = int(body["id"])
        return int(body["id"])

    def lookup(self, subject: str, schema_type: str, text: str, normalize: bool = False) -> int:
        """``POST /subjects/{subject}``: the id of ``text`` under ``subject`` (auto.register.schemas=false)."""
        payload = {"schema": text}
        if schema_type != "AVRO":
            payload["schemaType"] = schema_type
        query = "?normalize=true" if normalize else ""
        body = self._request("POST", f"/subjects/{_quote(subject)}{query}", payload)
        return int(body["id"])

    def subjects(self) -> list[str]:
        """``GET /subjects``: every subject's name (not cached: an error message lists what exists now)."""
        body = self._request("GET", "/subjects", None, shape=list)
        return [str(name) for name in body]

    def versions(self, subject: str) -> list[int]:
        """``GET /subjects/{subject}/versions``: the subject's version numbers."""
        body = self._request("GET", f"/subjects/{_quote(subject)}/versions", None, shape=list)
        return [int(v) for v in body]

    def parsed(self, registered: RegisteredSchema):
        """``registered`` parsed with its references (``broker_sim.registry.types.ParsedSchema``); cached."""
        return self._parse(registered, 0)

    def _parse(self, registered: RegisteredSchema, depth: int):
        from broker_sim.registry.types import SchemaError, parse
        key = (registered.schema_type, registered.text, registered.references)
        with self._lock:
            found = self._parsed.get(key)
        if found is not None:
            return found
        if depth > MAX_REFERENCE_DEPTH:
            raise RegistryError(f"schema references nest deeper than {MAX_REFERENCE_DEPTH}")
        references = {name: self._parse(self.version(subject, version), depth + 1)
                      for name, subject, version in registered.references}
        try:
            found = parse(registered.schema_type, registered.text, references)
        except SchemaError as exc:
            raise RegistryError(f"the registry's {registered.schema_type} schema does not parse: {exc}") from None
        with self._lock:
            self._parsed[key] = found
        return found

    # -- HTTP ------------------------------------------------------------------------------------------------------

    def _get(self, path: str) -> dict:
        return self._request("GET", path, None)

    def _request(self, method: str, path: str, payload: dict | None, shape: type = dict):
        data = None if payload is None else json.dumps(payload).encode()
        last: Exception | None = None
        for base in self.config.urls:
            url, auth = _split_user_info(base.rstrip("/") + path)
            request = urllib.request.Request(url, data=data, method=method)
            request.add_header("Accept", "application/vnd.schemaregistry.v1+json, application/json")
            if data is not None:
                request.add_header("Content-Type", "application/vnd.schemaregistry.v1+json")
            user_info = self.config.user_info or auth
            if user_info:
                request.add_header("Authorization", "Basic " + base64.b64encode(user_info.encode()).decode())
            try:
                with urllib.request.urlopen(request, timeout=self.config.timeout_ms / 1000,
                                            context=self._ssl) as response:
                    return _json_body(response.read(MAX_RESPONSE_BYTES + 1), url, shape)
            except urllib.error.HTTPError as exc:
                body = exc.read(65536)
                try:
                    answer = json.loads(body)
                    code, message = int(answer.get("error_code", exc.code)), str(answer.get("message", ""))
                except (ValueError, AttributeError):
                    code, message = exc.code, body.decode(errors="replace")[:500]
                if exc.code >= 500 or exc.code == 421:
                    last = RegistryError(f"Schema Registry {url} answered {exc.code}: {message}", exc.code, code)
                    continue   # another registry URL may be able to answer
                raise RegistryError(f"Schema Registry {url} answered {exc.code} (error {code}): {message}",
                                    exc.code, code) from None
            except (urllib.error.URLError, OSError) as exc:
                reason = getattr(exc, "reason", exc)
                last = RegistryError(f"Schema Registry {url} is unreachable: {reason}")
        raise last or RegistryError("no schema.registry.url configured")


def _json_body(raw: bytes, url: str, shape: type = dict):
    if len(raw) > MAX_RESPONSE_BYTES:
        raise RegistryError(f"Schema Registry {url} answered more than {MAX_RESPONSE_BYTES} bytes")
    try:
        body = json.loads(raw)
    except ValueError:
        raise RegistryError(f"Schema Registry {url} answered something that is not JSON") from None
    if not isinstance(body, shape):
        wanted = "a JSON object" if shape is dict else "a JSON array"
        raise RegistryError(f"Schema Registry {url} answered {type(body).__name__}, not {wanted}")
    return body


def _references(raw) -> tuple[tuple[str, str, int], ...]:
    return tuple((str(r["name"]), str(r["subject"]), int(r["version"])) for r in raw or ())


def _quote(part: str) -> str:
    return urllib.parse.quote(part, safe="")


def _split_user_info(url: str) -> tuple[str, str | None]:
    """``https://user:pw@host/...`` -> (``https://host/...``, ``user:pw``): credentials.source=URL."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None:
        return url, None
    netloc = parts.hostname + (f":{parts.port}" if parts.port else "")
    if ":" in (parts.hostname or ""):
        netloc = f"[{parts.hostname}]" + (f":{parts.port}" if parts.port else "")
    user_info = urllib.parse.unquote(parts.username) + ":" + urllib.parse.unquote(parts.password or "")
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment)), user_info


def _ssl_context(config: RegistryConfig) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=config.ca_location)
    if config.certificate_location:
        context.load_cert_chain(config.certificate_location, config.key_location, config.key_password)
    return context
