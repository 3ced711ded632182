"""The broker's Schema Registry endpoint: its HTTP listeners, authentication, authorization and forwarding.

Theory of operation: ``schema.registry.listeners`` (``http://host:port`` or
``https://host:port``, comma-separated; port 0 = any free port) turns the
registry on; ``SchemaRegistry`` binds one ``HttpServer`` (``server/http.py``,
bodies up to ``schema.registry.max.request.bytes``, at most
``schema.registry.max.connections`` connections) per URL and hands every request to the
registry's REST layer (``registry/rest.py``) over the ``RegistryService``
that ``registry/wiring.py`` builds on ``_schemas``-0.  The first bound URL is
``broker.schema_registry_url`` and is published in the broker's ZooKeeper
registration (``pylog_schema_registry_url``), which is how the other brokers
find the writer's registry.

Per request, in order:

1. authentication (``registry/auth.py``): HTTP Basic against the broker's
   SASL users when ``schema.registry.authentication.method=BASIC``, or when it
   is unset and the broker has a SASL listener.  No or wrong credentials: 401
   with ``WWW-Authenticate: Basic`` and Confluent's ``{"error_code": 40101}``;
   the principal is ``User:<name>`` (``User:ANONYMOUS`` without authentication);
2. ``_schemas`` is created on first use, as the coordinators create theirs;
3. a broker that hosts no replica of ``_schemas`` has nothing to answer reads
   from: it forwards every request to the writer; otherwise the REST layer
   answers, checking each route with ``authorize`` (below) and forwarding
   writes to the writer when this broker is not it;
4. a read a follower answers 404 is asked of the writer too (its answer, unless
   the writer cannot be reached): the follower may not have replicated a
   registration that was just answered through another broker, and a
   deserializer fetching that id must not fail.

Forwarding: the writer is the leader of ``_schemas``-0 as the cluster
metadata says; the request goes to its published registry URL with the
client's ``Authorization`` (the writer authenticates and authorizes again),
``Content-Type`` and body, and an ``X-Pylog-Forwarded`` header: a forwarded
request is never forwarded again (leadership that moved meanwhile answers
50004 instead of looping).  Bounded by ``schema.registry.forward.timeout.ms``.
No leader (an election in progress), or a writer without a registry URL:
Confluent's 50004 "unknown leader"; the writer unreachable or failing: 50003
"forwarding failed" — both HTTP 500, which clients retry.

Authorization: with ``authorizer.class.name`` set, every route is checked
through the broker's ``acl.Authorizer`` on pylog's Schema Registry resource
types (``security/acl.py``): SUBJECT (a subject; literal or prefixed bindings)
and REGISTRY (``schema-registry``: the global config and mode), with the
operation the REST layer names (READ, WRITE, DELETE, DESCRIBE,
DESCRIBE_CONFIGS, ALTER_CONFIGS); super users pass, everything else is denied
unless a binding allows it (``allow.everyone.if.no.acl.found`` as for Kafka
resources).  The host checked is the client's address on the broker that
received the request; a forwarded request is checked on both brokers, so
registry ACLs should use host ``*``.

Followers keep their registry current by replaying their replica of
``_schemas`` every ``TAIL_INTERVAL_S`` (a comparison of offsets when nothing
changed), each new schema parsed on the registry's compute lane first.
"""
from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import ssl as ssl_module
from dataclasses import dataclass
from urllib.parse import urlsplit

from broker_sim.config import BrokerConfig, ConfigError
from broker_sim.registry import errors as registry_errors
from broker_sim.registry.schema_log import SCHEMAS_TOPIC
from broker_sim.registry.wiring import registry_for
from broker_sim.registry.auth import REALM, AuthenticationFailed, BasicAuthenticator, unauthorized_body
from broker_sim.security import acl, sasl, tls
from broker_sim.server.http import HttpLimits, HttpRequest, HttpResponse, HttpServer

log = logging.getLogger(__name__)

TLS_LISTENER = "SCHEMA_REGISTRY"  # listener.name.schema_registry.ssl.* override the broker's ssl.* for https
TAIL_INTERVAL_S = 0.1
FORWARDED_HEADER = "x-pylog-forwarded"
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
_MAX_FORWARDED_RESPONSE_BYTES = 64 * 1024 * 1024
_peer_host: contextvars.ContextVar[str] = contextvars.ContextVar("schema_registry_peer", default="*")


@dataclass(frozen=True)
class RegistryListener:
    scheme: str
    host: str
    port: int

    def url(self, port: int | None = None) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port if port is None else port}"


def parse_listeners(value: str) -> list[RegistryListener]:
    """``schema.registry.listeners``: ``http://host:port`` / ``https://host:port``, comma-separated."""
    listeners = []
    for item in (part.strip() for part in value.split(",")):
        if not item:
            continue
        split = urlsplit(item)
        try:
            port = split.port
        except ValueError:
            port = None
        if split.scheme not in ("http", "https") or not split.hostname or port is None or split.path not in ("", "/"):
            raise ConfigError(f"schema.registry.listeners={value}: {item!r} is not http://host:port or "
                              f"https://host:port")
        listeners.append(RegistryListener(split.scheme, split.hostname, port))
    return listeners


def _tls_listener(config: BrokerConfig, broker_listeners) -> str:
    """Whose ssl.keystore.* an https registry uses: listener.name.schema_registry.* or the broker-wide ones,
    else those of the broker's first TLS listener."""
    own = [tls.setting(config, TLS_LISTENER, name).strip() for name in
           ("ssl.keystore.location", "ssl.keystore.certificate.chain")]
    if any(own):
        return TLS_LISTENER
    secured = [l.name for l in broker_listeners if l.protocol in ("SSL", "SASL_SSL")]
    return secured[0] if secured else TLS_LISTENER


def authentication_on(config: BrokerConfig, broker_listeners) -> bool:
    method = config.raw("schema.registry.authentication.method").strip().upper()
    if method:
        return method == "BASIC"
    return any(l.protocol.startswith("SASL_") for l in broker_listeners)


def json_response(status: int, body: dict, headers: dict | None = None) -> HttpResponse:
    return HttpResponse(status, {"Content-Type": CONTENT_TYPE, **(headers or {})},
                        json.dumps(body, separators=(",", ":")).encode())


def error_response(error: registry_errors.RegistryError) -> HttpResponse:
    return json_response(error.http_status, error.body())


class SchemaRegistry:
    """The registry endpoints of one broker (built with the broker: bad listeners or TLS fail its start)."""

    def __init__(self, broker) -> None:
        self.broker = broker
        config = broker.config
        self.listeners = parse_listeners(config.raw("schema.registry.listeners"))
        if not self.listeners:
            raise ConfigError("schema.registry.listeners is empty")
        self.limits = HttpLimits(max_body_bytes=config.get("schema.registry.max.request.bytes"),
                                 max_connections=config.get("schema.registry.max.connections"))
        https = any(l.scheme == "https" for l in self.listeners)
        tls_name = _tls_listener(config, broker.listeners)
        self.server_ssl = tls.server_context(config, tls_name) if https else None
        self.client_ssl = tls.client_context(config, tls_name) if https else None
        self.forward_timeout_s = config.get("schema.registry.forward.timeout.ms") / 1000.0
        self.plain_users: dict[str, str] = {}
        if authentication_on(config, broker.listeners):
            for listener in broker.listeners:
                if listener.protocol.startswith("SASL_") and "PLAIN" in sasl.enabled_mechanisms(config, listener.name):
                    self.plain_users.update(sasl.plain_users(config, listener.name))
            self.authenticator: BasicAuthenticator | None = BasicAuthenticator(self.plain_users)
        else:
            self.authenticator = None
        self.servers: list[HttpServer] = []
        self.urls: list[str] = []
        self.log = None  # BrokerSchemaLog, once started
        self.service = None  # RegistryService
        self.rest = None
        self._tailing: asyncio.Task | None = None

    @property
    def url(self) -> str | None:
        return self.urls[0] if self.urls else None

    async def start(self) -> None:

        if self.authenticator is not None:
            self.authenticator.credentials = self.broker.entity_configs  # SCRAM users, opened by now
            self.broker.metrics.schema_registry_logins = self.authenticator  # counted in /metrics
        self.log, self.service, self.rest = registry_for(self.broker, forward=self.forward,
                                                         authorize=self.authorize)
        # _schemas as the coordinators' topics: created by the registry with its configs (also when a client's
        # Metadata names it first), never by CreateTopics, and written by the registry only, never by Produce
        self.broker.internal_topics[SCHEMAS_TOPIC] = self.log.ensure_topic
        for listener in self.listeners:
            server = HttpServer(self.handle, self.limits, name=f"schema-registry {listener.url()}",
                                ssl=self.server_ssl if listener.scheme == "https" else None)
            await server.start(listener.host, listener.port)
            self.servers.append(server)
            url = listener.url(server.port)
            if listener.host in ("0.0.0.0", "::", ""):  # published for peers: where they reach this broker
                url = RegistryListener(listener.scheme, self.broker.endpoint().host, server.port).url()
            self.urls.append(url)
            log.info("schema registry at %s", url)
        self._tailing = asyncio.get_running_loop().create_task(self._tail())

    def close(self) -> None:
        if self._tailing is not None:
            self._tailing.cancel()
        for server in self.servers:
            server.close()
        if self.service is not None:
            self.service.compute.close()

    # --- requests ---------------------------------------------------------------------------------
    async def handle(self, request: HttpRequest) -> HttpResponse:
        if self.authenticator is not None:
            try:
                request.principal = self.authenticator.authenticate(request.headers.get("authorization"))
            except AuthenticationFailed as exc:
                log.info("schema registry: authentication of %s failed: %s", request.peer, exc)
                return json_response(401, unauthorized_body(), {"WWW-Authenticate": f'Basic realm="{REALM}"'})
        else:
            request.principal = tls.ANONYMOUS
        _peer_host.set(request.peer or "*")
        try:
            self.log.ensure_topic()
        except Exception as exc:  # no live broker to place it on yet, ZooKeeper trouble: retriable
            log.warning("schema registry: creating _schemas failed: %r", exc)
            return error_response(registry_errors.unknown_leader(f"the _schemas topic is not available: {exc}"))
        if self.broker.cluster is not None and not self.log.has_replica():
            if not self._may_forward(request):
                return error_response(registry_errors.unknown_leader())
            return await self.forward(request)
        response = await self.rest.handle(request)
        if response.status == 404 and request.method in ("GET", "HEAD") and self._may_forward(request) \
                and self.broker.cluster is not None and not self.log.is_writer():
            # read-your-writes across brokers: what is missing here may be a write this follower has not
            # replicated yet (a serializer registers through one broker, a deserializer asks another)
            answer = await self.forward(request)
            if answer.status < 500:
                return answer
        return response

    def authorize(self, principal: str | None, operation: str, resource: tuple[str, str]) -> bool:
        authorizer = self.broker.authorizer
        if authorizer is None:
            return True
        kind, name = resource
        if kind == "subject":
            rtype = acl.ResourceType.SUBJECT
        else:
            rtype, name = acl.ResourceType.REGISTRY, acl.REGISTRY_NAME
        try:
            op = acl.Operation[operation.upper()]
        except KeyError:
            log.error("schema registry: unknown operation %r for %r; denied", operation, resource)
            return False
        return authorizer.authorize(principal or tls.ANONYMOUS, _peer_host.get(), op, rtype, name)

    # --- forwarding to the writer -----------------------------------------------------------------
    def writer_url(self) -> str | None:
        leader = self.log.leader_id()
        if leader is None:
            return None
        if leader == self.broker.broker_id:
            return self.url if self.log.is_writer() else None
        endpoint = self.broker.metadata.brokers.get(leader) if self.broker.cluster is not None else None
        return endpoint.schema_registry_url if endpoint is not None else None

    @staticmethod
    def _may_forward(request) -> bool:
        return FORWARDED_HEADER not in request.headers

    async def forward(self, request) -> HttpResponse:
        """The writer's answer to ``request`` (or Confluent's 50003/50004 when it cannot be had)."""
        if not self._may_forward(request):
            return error_response(registry_errors.unknown_leader(
                f"broker {self.broker.broker_id} no longer leads _schemas (a forwarded request is not "
                f"forwarded again)"))
        url = self.writer_url()
        if url is None or url == self.url:
            return error_response(registry_errors.unknown_leader())
        try:
            return await asyncio.wait_for(self._call(url, request), self.forward_timeout_s)
        except asyncio.TimeoutError:
            message = f"the writer at {url} did not answer within {self.forward_timeout_s:g} s"
        except (OSError, ConnectionError, asyncio.IncompleteReadError, ValueError, ssl_module.SSLError) as exc:
            message = f"forwarding to the writer at {url} failed: {exc!r}"
        log.warning("schema registry: %s", message)
        return error_response(registry_errors.forwarding_failed(
            f"Error while forwarding the request to the leader: {message}"))

    async def _call(self, url: str, request) -> HttpResponse:
        split = urlsplit(url)
        secure = split.scheme == "https"
        reader, writer = await asyncio.open_connection(split.hostname, split.port,
                                                       ssl=self.client_ssl if secure else None,
                                                       server_hostname=split.hostname if secure else None)
        try:
            target = getattr(request, "raw_path", "") or request.path
            headers = {"Host": split.netloc, "Content-Length": str(len(request.body)), "Connection": "close",
                       "X-Pylog-Forwarded": str(self.broker.broker_id)}
            for name in ("authorization", "content-type", "accept"):
                if name in request.headers:
                    headers[name.title()] = request.headers[name]
            head = f"{request.method} {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
            writer.write(head.encode("latin-1") + b"\r\n" + request.body)
            await writer.drain()
            status_line = await reader.readuntil(b"\n")
            parts = status_line.split(b" ", 2)
            if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
                raise ValueError(f"not an HTTP response: {status_line[:80]!r}")
            status = int(parts[1])
            response_headers: dict[str, str] = {}
            while True:
                line = (await reader.readuntil(b"\n")).rstrip(b"\r\n")
                if not line:
                    break
                name, _, value = line.partition(b":")
                response_headers[name.decode("latin-1").strip().lower()] = value.strip().decode("latin-1")
            length = int(response_headers.get("content-length", "-1"))
            if length > _MAX_FORWARDED_RESPONSE_BYTES:
                raise ValueError(f"the writer's answer is {length} bytes")
            body = await (reader.readexactly(length) if length >= 0 else _read_to_close(reader))
        finally:
            writer.close()
        kept = {k.title(): v for k, v in response_headers.items() if k in ("content-type", "www-authenticate")}
        return HttpResponse(status, kept, body)

    # --- followers ----------------------------------------------------------------------------------
    async def _tail(self) -> None:
        """Replay what the local replica of ``_schemas`` gained (followers; the writer catches up itself)."""
        while True:
            await asyncio.sleep(TAIL_INTERVAL_S)
            try:
                if self.log.has_replica():
                    await self.service.catch_up_off_loop()
            except asyncio.CancelledError:
                raise
            except Exception:  # must keep running; the next pass retries
                log.exception("schema registry: replaying _schemas failed")


async def _read_to_close(reader: asyncio.StreamReader) -> bytes:
    """A close-delimited body (the writer streams GET /schemas so to a forwarded request, which says
    ``Connection: close``), at most ``_MAX_FORWARDED_RESPONSE_BYTES``."""
    body = bytearray()
    while chunk := await reader.read(65536):
        body += chunk
        if len(body) > _MAX_FORWARDED_RESPONSE_BYTES:
            raise ValueError(f"the writer's answer is over {_MAX_FORWARDED_RESPONSE_BYTES} bytes")
    return bytes(body)
