"""BrokerClient: the broker's own asyncio Kafka client for inter-broker requests.

Theory of operation: one TCP connection to one broker, opened lazily by the
first ``request`` and again after it broke.  kafka-python's generated classes
encode the request (``Cls[version](...)``, header included) and decode the
response: the response class comes from the request header's API key and
version.  Requests are pipelined: each gets the next correlation id and a
future in ``_pending``; one reader task reads frames and completes the future
whose correlation id the response header carries (responses come in order,
but matching by id also catches a confused peer).  A request that is not
answered within ``timeout_s`` closes the connection (its stream position is
unknown after that), failing every request in flight with ConnectionError, as
Kafka's NetworkClient does on a request timeout.  Requests without a response
(Produce acks=0) return None once written.

Re-authentication (KIP-368): when the peer's SaslAuthenticate answer gives a
session lifetime (its ``connections.max.reauth.ms``), the client logs in again
on the same connection at 85-95 % of it, as Kafka's clients do: the next
request waits while the requests in flight are answered (the peer serves only
the SASL exchange meanwhile), then SaslHandshake + SaslAuthenticate run again.
A session that would end before that can finish (an idle fetcher, a long
answer in flight) is not left for the peer to close: the client closes the
connection itself and opens a new one, logged in afresh.  Followers therefore
keep replicating across session ends, with no closed connection and no
``replica.fetch.backoff.ms`` pause in acks=all produces.

Used by the replica fetcher (Fetch, OffsetForLeaderEpoch) and by the lead's
glue for WriteTxnMarkers.  Single event loop; not thread-safe.
"""
from __future__ import annotations

import asyncio
import ssl as ssl_module
import itertools
import logging
import random
import struct

log = logging.getLogger(__name__)
_SIZE = struct.Struct(">i")
_CORRELATION_ID = struct.Struct(">i")
MAX_RESPONSE_BYTES = 256 * 1024 * 1024
# Kafka's clients re-authenticate at 85 % of the session lifetime plus up to 10 % jitter
REAUTH_AT, REAUTH_JITTER = 0.85, 0.10


class BrokerClient:
    """Pipelined requests to one broker; see the module docstring.

    >>> client = BrokerClient("127.0.0.1", 9092, client_id="broker-1-fetcher", timeout_s=30)  # doctest: +SKIP
    >>> response = await client.request(FetchRequest[12](...))                               # doctest: +SKIP
    """

    def __init__(self, host: str, port: int, *, client_id: str, timeout_s: float,
                 ssl: "ssl_module.SSLContext | None" = None, sasl=None) -> None:
        self.host = host
        self.ssl = ssl  # the peer's inter-broker listener speaks TLS: verify it, present our certificate
        self.sasl = sasl  # a SaslLogin: the peer's inter-broker listener speaks SASL (logged in at connect)
        self.port = port
        self.client_id = client_id
        self.timeout_s = timeout_s
        self._correlation_ids = itertools.count(1)
        self._pending: dict[int, tuple[asyncio.Future, type]] = {}
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._read_task: asyncio.Task | None = None
        self._connecting: asyncio.Lock | None = None
        self._closed = False
        self._reauth_at: float | None = None  # loop time to log in again (KIP-368); None: the session never ends
        self._session_ends: float | None = None  # loop time the peer ends the session (estimated from our side)

    def __repr__(self) -> str:
        return f"BrokerClient({self.host}:{self.port}, {self.client_id!r})"

    @property
    def connected(self) -> bool:
        return self._writer is not None and not self._writer.is_closing()

    async def _connect(self) -> None:
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            if self.connected:
                return
            await self._open()

    async def _open(self) -> None:
        """Connect (and log in); the caller holds ``_connecting``."""
        if self._closed:
            raise ConnectionError(f"{self!r} is closed")
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(
                self.host, self.port, ssl=self.ssl, server_hostname=self.host if self.ssl else None),
                                                    self.timeout_s)
        except asyncio.TimeoutError:
            raise ConnectionError(f"connecting to {self.host}:{self.port} timed out after {self.timeout_s} s") \
                from None
        self._reader, self._writer = reader, writer
        self._read_task = asyncio.get_running_loop().create_task(self._read_responses(reader))
        if self.sasl is not None:
            try:
                await self._login()
            except BaseException:
                self._disconnect(ConnectionError(f"SASL login to {self.host}:{self.port} failed"))
                raise

    async def _login(self) -> None:
        """SaslHandshake v1 + SaslAuthenticate v1 with this client's login; ConnectionError naming the refusal."""
        from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

        from broker_sim.security.sasl import AuthenticationFailed

        loop = asyncio.get_running_loop()
        started = loop.time()  # the peer's session starts later than this: ending it from here errs early
        self._reauth_at = self._session_ends = None
        handshake = await self._request(SaslHandshakeRequest[1](mechanism=self.sasl.mechanism))
        if handshake.error_code:
            raise ConnectionError(f"{self.host}:{self.port} refused SASL mechanism {self.sasl.mechanism} "
                                  f"(error {handshake.error_code}; it offers {handshake.mechanisms})")
        steps = self.sasl.exchange()
        token = next(steps)
        while True:
            answer = await self._request(SaslAuthenticateRequest[1](auth_bytes=token))
            if answer.error_code:
                raise ConnectionError(f"SASL login of {self.sasl.username!r} to {self.host}:{self.port} failed: "
                                      f"{answer.error_message} (error {answer.error_code})")
            try:
                token = steps.send(bytes(answer.auth_bytes))
            except StopIteration:
                lifetime_s = answer.session_lifetime_ms / 1000.0
                if lifetime_s > 0:
                    self._session_ends = started + lifetime_s
                    self._reauth_at = started + lifetime_s * (REAUTH_AT + REAUTH_JITTER * random.random())
                return
            except AuthenticationFailed as exc:
                raise ConnectionError(f"{self.host}:{self.port}: {exc}") from None

    async def request(self, request):
        """Send ``request`` (a versioned kafka-python request object); return its decoded response.

        Raises ConnectionError when the connection fails, breaks or the
        request times out (every request in flight then fails).
        """
        if not self.connected or (self._connecting is not None and self._connecting.locked()):
            await self._connect()  # (waits for a SASL login in progress on the new connection)
        if self._reauth_at is not None and asyncio.get_running_loop().time() >= self._reauth_at:
            await self._reauthenticate()
        return await self._request(request)

    async def _reauthenticate(self) -> None:
        """KIP-368: log in again on this connection once the requests in flight are answered, or, when the session
        would end first, on a new connection (see the module docstring)."""
        loop = asyncio.get_running_loop()
        async with self._connecting:
            if not self.connected:
                await self._open()
                return
            if self._reauth_at is None or loop.time() < self._reauth_at:
                return  # another request re-authenticated meanwhile
            margin = min(1.0, (self._session_ends - self._reauth_at) / 2)
            in_flight = [future for future, _ in self._pending.values()]
            if in_flight:
                await asyncio.wait(in_flight, timeout=max(0.0, self._session_ends - margin - loop.time()))
            if self._pending or loop.time() >= self._session_ends - margin:
                log.info("%r: SASL session ends before a re-authentication could finish: new connection", self)
                self._disconnect(ConnectionError(f"{self!r}: SASL session ended"))
                await self._open()
                return
            try:
                await self._login()
            except BaseException:
                self._disconnect(ConnectionError(f"SASL re-authentication to {self.host}:{self.port} failed"))
                raise
            log.debug("%r: re-authenticated", self)

    async def _request(self, request):
        correlation_id = next(self._correlation_ids) & 0x7FFFFFFF
        request.with_header(correlation_id=correlation_id, client_id=self.client_id)
        data = bytes(request.encode(header=True, framed=True))
        writer = self._writer
        if not request.expect_response():
            writer.write(data)
            await writer.drain()
            return None
        future = asyncio.get_running_loop().create_future()
        self._pending[correlation_id] = (future, request.header.get_response_class())
        try:
            writer.write(data)
            await writer.drain()
            return await asyncio.wait_for(asyncio.shield(future), self.timeout_s)
        except asyncio.TimeoutError:
            self._disconnect(ConnectionError(
                f"{type(request).__name__} to {self.host}:{self.port} got no response in {self.timeout_s} s"))
            raise ConnectionError(f"{type(request).__name__} to {self.host}:{self.port} timed out "
                                  f"after {self.timeout_s} s") from None
        except OSError as exc:
            self._disconnect(ConnectionError(f"connection to {self.host}:{self.port} failed: {exc}"))
            raise ConnectionError(f"connection to {self.host}:{self.port} failed: {exc}") from exc
        finally:
            self._pending.pop(correlation_id, None)
            if not future.done():
                future.cancel()

    async def _read_responses(self, reader: asyncio.StreamReader) -> None:
        from broker_sim.protocol.client import decode_response  # not at import: a single broker never calls out

        error: Exception = ConnectionError(f"{self.host}:{self.port} closed the connection")
        try:
            while True:
                (size,) = _SIZE.unpack(await reader.readexactly(4))
                if not 4 <= size <= MAX_RESPONSE_BYTES:
                    raise ConnectionError(f"{self.host}:{self.port} sent a frame of {size} bytes")
                payload = await reader.readexactly(size)
                (correlation_id,) = _CORRELATION_ID.unpack_from(payload)
                entry = self._pending.pop(correlation_id, None)
                if entry is None:
                    log.debug("%r: response for unknown correlation id %d dropped", self, correlation_id)
                    continue
                future, response_class = entry
                try:
                    _, response = decode_response(payload, response_class)
                except Exception as exc:  # a frame we cannot decode: the stream is no longer trustworthy
                    raise ConnectionError(f"{self.host}:{self.port}: undecodable {response_class.__name__}: "
                                          f"{exc!r}") from exc
                if not future.done():
                    future.set_result(response)
        except asyncio.CancelledError:
            raise
        except (asyncio.IncompleteReadError, OSError) as exc:
            if isinstance(exc, ConnectionError):
                error = exc
        finally:
            if self._reader is reader:
                self._disconnect(error)

    def _disconnect(self, error: Exception) -> None:
        writer, self._writer, self._reader = self._writer, None, None
        task, self._read_task = self._read_task, None
        if writer is not None:
            writer.close()
        if task is not None and task is not asyncio.current_task():
            task.cancel()
        pending, self._pending = self._pending, {}
        for future, _ in pending.values():
            if not future.done():
                future.set_exception(error)

    def close(self) -> None:
        """Close the connection and fail requests in flight; later requests raise ConnectionError."""
        self._closed = True
        self._disconnect(ConnectionError(f"{self!r} closed"))
