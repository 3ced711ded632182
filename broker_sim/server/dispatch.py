"""Request dispatch: frame in, response parts out.

Theory of operation: ``Dispatcher.handle`` peeks the fixed start of the
request header, finds the API's row in ``broker_sim.protocol.apis.APIS``,
decodes the request with kafka-python's schema class, awaits the bound
handler and encodes its answer on the request's version and correlation id.
Produce, the hot path, is read and answered by ``protocol.produce_codec``
without kafka-python's objects when the request is the plain case (anything
irregular falls back to kafka-python's decoder, so it is refused as before).

Kafka's rules for requests it cannot serve, which clients depend on:
* ApiVersions of a version the broker does not know is answered in the v0
  layout with UNSUPPORTED_VERSION and ApiVersions' own range (KIP-511), so a
  newer client can retry with a version both sides know;
* any other unknown API key or unsupported version, or a body that does not
  decode, closes the connection (Kafka's ``InvalidRequestException`` path);
  only this connection, with a log line.
On a SASL listener a connection that has not authenticated may send only
ApiVersions, SaslHandshake and SaslAuthenticate (after a SaslHandshake v0,
bare size-prefixed tokens); anything else closes it, as does any request
after its session expired (``connections.max.reauth.ms``, KIP-368).
A request whose frame is at least ``OFFLOAD_FRAME_BYTES`` is decoded, and its answer encoded, on the codec
thread (``server/request_slicing.py``), so that a request naming a million partitions does not hold the loop
while kafka-python reads or writes it, and the garbage collector's full passes wait until it is answered; the
handlers slice their own per-partition loops.
While a test has added fault rules (``broker.faults``, ``server/faults.py``) the handler is called through
the injector, which may refuse, rewrite, delay or drop the answer; without rules it costs one falsy check.
Handlers raise nothing for per-partition problems: they put error codes in
their responses.  An exception escaping a handler is a broker bug: it is
logged with its traceback and closes the connection, never the broker.
"""
from __future__ import annotations

import asyncio
import logging
import struct
import time
from typing import Awaitable, Callable, NamedTuple

from kafka.protocol.api_key import ApiKey

from broker_sim.protocol.apis import APIS, api_versions_response
from broker_sim.protocol.framing import FrameError, peek_header
from broker_sim.protocol.produce_codec import ProduceAnswer, decode_request as decode_produce
from broker_sim.protocol.validation import check_not_null
from broker_sim.security.quotas import REQUEST as REQUEST_PERCENTAGE
from broker_sim.security.sasl import AuthenticationFailed, IllegalSaslState
from broker_sim.server.faults import FaultInjector
from broker_sim.server.inter_broker import InterBrokerIdentity
from broker_sim.server.metrics import BrokerMetrics
from broker_sim.server.network import CloseConnection
from broker_sim.server.request_slicing import OFFLOAD_FRAME_BYTES, OFFLOAD_PARTITIONS, codec_thread, full_collections

log = logging.getLogger(__name__)
UNSUPPORTED_VERSION = 35
_SIZE = struct.Struct(">i")
# what a SASL listener serves before authentication completes (Kafka's SaslServerAuthenticator)
SASL_EXCHANGE = frozenset((int(ApiKey.ApiVersions), int(ApiKey.SaslHandshake), int(ApiKey.SaslAuthenticate)))
PRODUCE = int(ApiKey.Produce)


def _answered(answer: ProduceAnswer) -> int:
    return sum(len(topic.partition_responses) for topic in answer.responses)


def _decode(request_class, frame: bytes, version: int):
    request = request_class.decode(frame, version=version, header=True)
    check_not_null(request, version)
    return request


async def _timed(coroutine):
    """(result, seconds the coroutine itself ran on the loop): its own steps, not the time it waited
    (a long-poll Fetch waiting for records costs no request time, as in Kafka's request-time quota)."""
    busy = 0.0
    error = None
    while True:
        step = time.perf_counter()
        try:
            yielded = coroutine.send(None) if error is None else coroutine.throw(error)
        except StopIteration as done:
            return done.value, busy + time.perf_counter() - step
        busy += time.perf_counter() - step
        error = None
        try:
            if yielded is None:
                await asyncio.sleep(0)
            else:  # the future the coroutine awaits; it reads the outcome itself when resumed
                await asyncio.wait([yielded])
        except BaseException as exc:  # cancelled (the broker stops): the coroutine gets it
            error = exc


class RequestContext(NamedTuple):
    api_key: int
    version: int
    correlation_id: int
    client_id: str | None
    connection: object

    @property
    def inter_broker(self) -> bool:
        """True when the request came from another broker of this cluster (may use inter-broker APIs:
        WriteTxnMarkers, follower Fetch); clients get CLUSTER_AUTHORIZATION_FAILED for those."""
        return self.connection.inter_broker


Handler = Callable[[RequestContext, object], Awaitable[object]]


class Dispatcher:
    def __init__(self, handlers: dict[int, Handler], inter_broker: InterBrokerIdentity | None = None,
                 metrics: BrokerMetrics | None = None, quotas=None, inter_broker_listener: str | None = None,
                 faults: FaultInjector | None = None) -> None:
        missing = set(APIS) - set(handlers)
        if missing:
            raise ValueError(f"no handler for API keys {sorted(missing)}")
        self.handlers = handlers
        self.inter_broker = inter_broker  # None on a single node: no connection is a broker's
        # the proof counts only on inter.broker.listener.name: a client listener (with its own TLS or SASL)
        # never turns a client into a broker, whatever client id it sends
        self.inter_broker_listener = inter_broker_listener
        self.metrics = metrics
        self.quotas = quotas  # QuotaManager: request_percentage quotas are measured here
        self.requests_handled = 0
        self.faults = faults if faults is not None else FaultInjector()  # no rules: one falsy check per request

    async def handle(self, connection, frame: bytes) -> list | None:
        if len(frame) < OFFLOAD_FRAME_BYTES:
            return await self._handle(connection, frame, None)
        release = full_collections.hold()  # a large request's objects are not scanned again and again meanwhile
        try:
            return await self._handle(connection, frame, release)
        finally:
            release()

    async def _handle(self, connection, frame: bytes, release_collections) -> list | None:
        authenticator = connection.authenticator
        if authenticator is not None and authenticator.raw_tokens:  # after SaslHandshake v0: bare tokens
            return await self._raw_token(connection, authenticator, frame)
        try:
            api_key, version, correlation_id = peek_header(frame)
        except FrameError as exc:
            raise CloseConnection(str(exc)) from None
        spec = APIS.get(api_key)
        if spec is None:
            raise CloseConnection(f"unknown API key {api_key} (version {version})")
        if authenticator is not None:
            if not authenticator.complete and api_key not in SASL_EXCHANGE:
                raise CloseConnection(f"unexpected {spec.key.name} request during SASL authentication "
                                      f"(only ApiVersions, SaslHandshake and SaslAuthenticate are served before it)")
            if authenticator.expired() and api_key not in SASL_EXCHANGE:
                raise CloseConnection(f"SASL session of {authenticator.principal} expired "
                                      f"(connections.max.reauth.ms): the client did not re-authenticate")
        if not spec.supports(version):
            if api_key == ApiKey.ApiVersions:
                return [self._encode(api_versions_response(0, UNSUPPORTED_VERSION), 0, correlation_id)]
            raise CloseConnection(f"unsupported version {version} of {spec.key.name} "
                                  f"(supported {spec.min_version}-{spec.max_version})")
        # a plain produce request is read without kafka-python's schema objects; anything else (and any
        # irregular produce request) is decoded by kafka-python, as before
        request = decode_produce(frame, version) if api_key == PRODUCE else None
        large = len(frame) >= OFFLOAD_FRAME_BYTES
        if request is not None and release_collections is not None:
            release_collections()  # a plain produce request is a few objects, whatever its size
        if request is None:
            try:
                if large:  # kafka-python's decoder, pure Python: beside the loop (server/request_slicing.py)
                    request = await codec_thread.run(_decode, spec.request, frame, version)
                else:
                    request = _decode(spec.request, frame, version)
            except Exception as exc:  # any decode failure means a malformed body
                raise CloseConnection(f"malformed {spec.key.name} v{version} request: {exc!r}") from None
        client_id = request.header.client_id
        if (self.inter_broker is not None and not connection.inter_broker
                and self.inter_broker_listener in (None, connection.listener)
                and self.inter_broker.proves(client_id)):
            connection.inter_broker = True
        ctx = RequestContext(api_key, version, correlation_id, client_id, connection)
        started = time.monotonic()
        if self.faults.rules:  # faults on demand (server/faults.py): only while a test has added rules
            result = await self.faults.apply(ctx, request, self._run)
        else:
            result = await self._run(ctx, request)
        self.requests_handled += 1
        elapsed = time.monotonic() - started
        if self.metrics is not None:
            self.metrics.observe_request(spec.key.name, version, elapsed)
        if elapsed > 1.0 and api_key != ApiKey.Fetch:
            log.info("%s v%d from %s took %.1f s", spec.key.name, version, connection.peer, elapsed)
        if result is None:
            return None
        if isinstance(result, list):
            return result
        if large and (type(result) is not ProduceAnswer or _answered(result) >= OFFLOAD_PARTITIONS):
            # the answer to a large request (a produce answer: only one naming many partitions, since most large
            # produce requests carry few partitions of records): encoded beside the loop
            return [await codec_thread.run(self._encode, result, version, correlation_id)]
        return [self._encode(result, version, correlation_id)]

    async def _run(self, ctx: RequestContext, request):
        """The handler's answer; with request_percentage quotas, its own time on the loop is measured."""
        quotas = self.quotas
        connection = ctx.connection
        if quotas is not None and quotas.any_request_quota and not connection.inter_broker:
            result, busy_s = await _timed(self.handlers[ctx.api_key](ctx, request))
            throttle = quotas.record(REQUEST_PERCENTAGE, connection.principal, ctx.client_id, busy_s * 1000.0)
            if throttle:
                if hasattr(result, "throttle_time_ms"):
                    result.throttle_time_ms = max(result.throttle_time_ms or 0, throttle)
                connection.throttle(throttle)
            return result
        return await self.handlers[ctx.api_key](ctx, request)

    async def _raw_token(self, connection, authenticator, token: bytes) -> list:
        """A SASL token framed only by its size (SaslHandshake v0, KIP-43): answered the same way; a failure
        closes the connection (v0 has no error field), after connection.failed.authentication.delay.ms."""
        try:
            answer = authenticator.evaluate(bytes(token))
        except (AuthenticationFailed, IllegalSaslState) as exc:
            if self.metrics is not None:
                self.metrics.failed_authentications += 1
            await asyncio.sleep(authenticator.listener.failure_delay_ms / 1000.0)
            raise CloseConnection(f"SASL authentication failed: {exc}") from None
        if authenticator.complete:
            connection.authenticated(authenticator.principal)
            if self.metrics is not None:
                self.metrics.successful_authentications += 1
        return [_SIZE.pack(len(answer)) + answer]

    @staticmethod
    def _encode(response, version: int, correlation_id: int) -> bytes:
        if type(response) is ProduceAnswer:  # written directly (produce_codec)
            return response.encode(version, correlation_id)
        response.API_VERSION = version  # before with_header: kafka-python's setter touches the header
        response.with_header(correlation_id=correlation_id)
        return bytes(response.encode(header=True, framed=True))
