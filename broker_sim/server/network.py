"""asyncio network layer: one ``KafkaConnection`` per client socket, all of them in ``Connections``.

Theory of operation: the socket reads straight into buffers of the sans-IO
``FrameDecoder`` (asyncio's buffered protocol); complete frames queue up and one task per
connection handles them strictly in order (Kafka answers requests on a
connection in the order they were sent, and clients rely on it).  The handler
returns the parts of the response: ``bytes`` are written to the transport,
``FileRegion`` s are sent with ``os.sendfile`` from the segment file (zero
copy) once the transport's buffer has drained, or read with ``os.pread`` when
small, where a syscall round trip costs more than the copy.

A frame that cannot be framed or decoded closes this connection only, with a
log line naming the peer and the problem; the broker goes on serving every
other connection.

What one connection can make the broker hold (back-pressure instead of
buffering without bound):

* request bytes: each frame reserves from the broker-wide pool
  (``queued.max.request.bytes``, see ``framing.MemoryPool``) — a SASL
  connection, until it authenticated, from a separate small one
  (``queued.max.unauthenticated.request.bytes``: unauthenticated clients cannot
  take authenticated ones' memory; it moves to the shared pool once nothing it
  sent holds memory of the small one) — a small frame
  its size at its header, a large one its buffer as its bytes arrive — and
  releases once its response has been written; a connection whose next bytes
  do not fit stops being read until memory is released.  When connections
  have waited ``STALLED_FRAME_S`` for memory and none was released meanwhile,
  those holding memory for a frame they stopped sending are closed (a sender
  that stopped halfway cannot keep everyone else waiting);
* queued requests: at most ``MAX_QUEUED_REQUESTS`` frames or
  ``MAX_QUEUED_REQUEST_BYTES`` bytes wait behind the one being handled, then
  reading pauses (until half of both is left) — one read may bring more frames than that at once, all queued;
* loop time: a connection's task handles its queued requests one after the other, and once it has held the
  loop ``PIPELINE_TURN_S`` since its turn began it yields before the next one, so every other ready
  connection is served first.  Thousands of small requests pipelined on one connection then delay another
  client by about one turn per busy connection, as Kafka's request queue (one request in flight per
  connection: the channel is muted until its response is sent) delays it by one request per connection;
  a turn of a few milliseconds keeps the tiny requests of a pipelining client from paying a loop round trip
  each.  Within one request, the handlers' own loops yield (``server/request_slicing.py``);
* responses: the transport's write buffer pauses the connection above
  ``WRITE_BUFFER_HIGH`` bytes and the next response waits until it drained, so
  a client that does not read its responses holds at most one response (a
  Fetch response is at most ``fetch.max.bytes`` plus headers) and
  ``WRITE_BUFFER_HIGH``; its queue then fills and reading stops.

``Connections`` owns the live connections: ``ConnectionQuotas``
(``max.connections`` — -1, the default, derived from the open-file limit —
and ``max.connections.per.ip[.overrides]``) at accept — on TLS listeners a
``TlsAcceptor`` counts the socket before its handshake, runs at most
``MAX_TLS_HANDSHAKES`` at once and hands the TLS transport to the
``KafkaConnection`` —, a deadline for SASL connections to authenticate
(``sasl.server.authentication.timeout.ms``), and
a periodic sweep (every tenth of ``connections.max.idle.ms``, at most
``MAX_SWEEP_INTERVAL_S``) that closes connections idle that long — no request
being handled and no bytes read or written — as Kafka's Selector does; a long
poll Fetch in progress is being handled, so it is not idle.  The sweep also
gives back the grown read buffers of connections that went quiet (it runs
with ``connections.max.idle.ms=-1`` too, then closing nothing).

Every ending of a connection gives its socket back: ``close`` flushes, and a
transport still open ``CLOSE_TIMEOUT_S`` later is aborted (a TLS shutdown
waiting for a peer that closed first while reading was paused — after a
failed SASL login — would otherwise hold the socket in CLOSE-WAIT for good).
And its memory: ``connection_lost`` drops the transport (asyncio's SSLProtocol
keeps bound methods of its protocol, a cycle only a full collection would
free), a failed handshake's traceback is cut, and after a burst of ended TLS
connections the sweep gives freed heap back (``malloc_trim``).
"""
from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections import deque
from typing import Awaitable, Callable

from broker_sim.protocol.framing import FrameDecoder, FrameError, MemoryPool
from broker_sim.security.acl import ANONYMOUS
from broker_sim.server.connection_quotas import DERIVED_MAX_CONNECTIONS, ConnectionQuotas, derived_max_connections

log = logging.getLogger(__name__)

MAX_QUEUED_REQUESTS = 64
MAX_QUEUED_REQUEST_BYTES = 16 * 1024 * 1024
WRITE_BUFFER_HIGH = 256 * 1024
SENDFILE_MIN_BYTES = 64 * 1024
MAX_SWEEP_INTERVAL_S = 10.0
STARVED_CHECK_S = 1.0  # how often the sweep looks for connections starved of request memory
CLOSE_GRACE_S = 0.5  # after a final error answer (failed SASL) before the broker closes the connection
STALLED_FRAME_S = 5.0  # starved this long with no memory released: the largest partial-frame holder is closed
TRIM_AFTER_TLS_ENDED = 32  # TLS connections ended (~300 KB of buffers each) before the heap is trimmed
CLOSE_TIMEOUT_S = 2.0  # a closed transport not gone this long (a TLS shutdown the peer never finishes) is aborted
MAX_TLS_HANDSHAKES = 128  # TLS handshakes in flight broker-wide (each holds ~300 KB of TLS buffers); beyond: refused
PIPELINE_TURN_S = 0.002  # loop time one connection's queued requests take before the other connections get a turn


def _trim_memory() -> None:
    """Give freed heap memory back to the system (glibc's malloc_trim): a burst of TLS connections frees
    256 KB buffers that glibc would otherwise keep; elsewhere a no-op."""
    global _libc
    if _libc is None:
        try:
            import ctypes  # only once TLS connections have ended

            _libc = ctypes.CDLL("libc.so.6")
            _libc.malloc_trim  # noqa: B018 - glibc only
        except (OSError, AttributeError):
            _libc = False
    if _libc:
        _libc.malloc_trim(0)


_libc = None


def _drop_tracebacks(exc: BaseException | None) -> None:
    """Cut an exception (and its chain) from its traceback: asyncio's failed-handshake exception and the
    frames it passed through form a cycle holding the TLS protocol and its 256 KB buffer until a full
    garbage collection, which may not come for a long time."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        exc.__traceback__ = None
        exc = exc.__context__ or exc.__cause__


class CloseConnection(Exception):
    """Raised by a handler when Kafka would close the connection (malformed or unsupported request)."""


class Connections:
    """The listener's live connections, their quotas, the request memory pool and the idle sweep.

    ``pool.used`` / ``pool.size`` are the request bytes held now and the bound (metrics read them);
    ``len(connections)`` is the number of admitted connections.
    """

    def __init__(self, *, max_frame_bytes: int, queued_max_request_bytes: int, idle_ms: int,
                 quotas: ConnectionQuotas, unauthenticated_request_bytes: int = -1,
                 authentication_timeout_ms: int = 0) -> None:
        self.max_frame_bytes = max_frame_bytes
        self.pool = MemoryPool(queued_max_request_bytes)
        # SASL connections read into this pool until they authenticated, so that unauthenticated ones cannot
        # take the request memory of authenticated clients (queued.max.unauthenticated.request.bytes)
        self.unauthenticated_pool = MemoryPool(unauthenticated_request_bytes)
        self.authentication_timeout_ms = authentication_timeout_ms  # sasl.server.authentication.timeout.ms
        self.idle_ms = idle_ms
        self.quotas = quotas
        self.handshakes = 0  # TLS handshakes in flight (TlsAcceptor), at most MAX_TLS_HANDSHAKES
        self.tls_ended = 0  # TLS connections ended since the sweep last gave their buffers' memory back
        self._live: set[KafkaConnection] = set()
        self._sweeper: asyncio.Task | None = None
        # fetched log bytes sent: by os.sendfile from the page cache (zero-copy), or read and written (TLS,
        # small regions, no sendfile); the metrics endpoint exports both
        self.sendfile_bytes = 0
        self.copied_bytes = 0

    @classmethod
    def from_config(cls, config) -> "Connections":
        return cls(max_frame_bytes=config.get("socket.request.max.bytes"),
                   queued_max_request_bytes=config.get("queued.max.request.bytes"),
                   idle_ms=config.get("connections.max.idle.ms"),
                   quotas=ConnectionQuotas(config.get("max.connections"), config.get("max.connections.per.ip"),
                                           config.get("max.connections.per.ip.overrides")),
                   unauthenticated_request_bytes=config.get("queued.max.unauthenticated.request.bytes"),
                   authentication_timeout_ms=config.get("sasl.server.authentication.timeout.ms"))

    def __iter__(self):
        return iter(list(self._live))

    def __len__(self) -> int:
        return len(self._live)

    def admit_ip(self, ip: str) -> bool:
        """Count a connection from ``ip`` against max.connections[.per.ip]; False (logged, rate-limited) if over."""
        refused = self.quotas.admit(ip)
        if refused is not None:
            message = self.quotas.refusal_to_log(ip, refused)
            if message is not None:
                log.warning("%s", message)
            return False
        return True

    def admit(self, connection: "KafkaConnection") -> bool:
        """Count ``connection`` (unless its TlsAcceptor already did at accept) and make it live."""
        if not connection.counted and not self.admit_ip(connection.ip):
            return False
        connection.counted = True
        self._live.add(connection)
        return True

    def discard(self, connection: "KafkaConnection") -> None:
        if connection in self._live:
            self._live.remove(connection)
            self.quotas.release(connection.ip)

    def start(self) -> None:
        """Start the idle sweep (on the running loop); resolve a derived max.connections (-1, the default)."""
        if self.quotas.max_connections < 0:
            self.quotas.max_connections = derived_max_connections()
            log.info("max.connections=%d (derived: %s)", self.quotas.max_connections, DERIVED_MAX_CONNECTIONS)
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep_idle())

    def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
        for connection in self:
            connection.close()

    async def _sweep_idle(self) -> None:
        loop = asyncio.get_running_loop()
        closes = self.idle_ms >= 0
        every = min(max(self.idle_ms / 10_000.0, 0.05), MAX_SWEEP_INTERVAL_S) if closes else MAX_SWEEP_INTERVAL_S
        tick = min(every, STARVED_CHECK_S) if self.pool.bounded else every
        next_idle_pass = loop.time() + every
        starved: dict | None = None  # connection -> its read count when the starvation began
        releases = self.pool.releases
        starved_since = 0.0
        while True:
            await asyncio.sleep(tick)
            now = loop.time()
            if self.tls_ended >= TRIM_AFTER_TLS_ENDED and not self.handshakes:
                self.tls_ended = 0
                _trim_memory()
            if not self.pool.waiting or self.pool.releases != releases:
                starved, releases = None, self.pool.releases
            elif starved is None:
                starved, starved_since = {c: c.reads for c in self if c.reserved_for_partial_frame}, now
            elif now - starved_since >= STALLED_FRAME_S:
                self._close_stalled_senders(starved)
                starved = None
            if now < next_idle_pass:
                continue
            next_idle_pass = now + every
            for connection in self:
                if connection.idle_for(now) * 1000.0 >= self.idle_ms and closes:
                    log.info("closing connection from %s: idle for connections.max.idle.ms=%d",
                             connection.peer, self.idle_ms)
                    connection.close()

    def _close_stalled_senders(self, read_counts: dict) -> None:
        """Connections waited STALLED_FRAME_S for request memory and none was released: close those that
        hold some for a frame they stopped sending meanwhile (not those the pool itself keeps waiting)."""
        for connection, reads in read_counts.items():
            if (connection.reserved_for_partial_frame and connection.reads == reads
                    and not connection.waiting_for_memory):
                log.warning("closing connection from %s: it stopped sending a frame for which it holds %d bytes "
                            "of queued.max.request.bytes=%d while %d connection(s) waited %.0f s for memory",
                            connection.peer, connection.reserved_for_partial_frame, self.pool.size,
                            self.pool.waiting, STALLED_FRAME_S)
                connection.close()


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, handle: Callable[["KafkaConnection", bytes], Awaitable[list | None]],
                 connections: Connections, *, listener: str = "PLAINTEXT", principal=None, sasl=None) -> None:
        self._handle = handle
        self._principal_mapper = principal  # a TLS listener's ssl.principal.mapping.rules
        self.principal = ANONYMOUS  # User:<certificate subject> for mutual TLS, User:<name> once SASL completes
        # a SASL listener's per-connection state (security/sasl.py): None on PLAINTEXT and SSL listeners
        self.authenticator = sasl.authenticator() if sasl is not None else None
        self.close_after_response = False  # set by a handler whose answer ends the connection (failed SASL)
        self.listener = listener  # the listener name it came in on: Metadata answers that listener's addresses
        self._connections = connections
        self.counted = False  # counted against the connection quotas (at accept by a TlsAcceptor, else here)
        # the pool this connection's frames reserve from: the unauthenticated budget until SASL completes
        self._pool = connections.pool if sasl is None else connections.unauthenticated_pool
        self._decoder = FrameDecoder(connections.max_frame_bytes, self._pool)
        self._authenticated_pending = False  # SASL completed; the switch to the shared pool waits for a clean point
        self._deadline: asyncio.TimerHandle | None = None  # sasl.server.authentication.timeout.ms
        self._abort_handle: asyncio.TimerHandle | None = None
        if sasl is not None:  # Kafka's sasl.server.max.receive.size: small frames until the client authenticated
            self._decoder.max_frame_bytes = min(connections.max_frame_bytes, sasl.max_receive_size)
            self._decoder.limit_name = "sasl.server.max.receive.size (before SASL authentication completes)"
        self._queue: deque[bytes] = deque()
        self._queued_bytes = 0
        self._wakeup: asyncio.Future | None = None
        self._drained: asyncio.Future | None = None
        self._reading_paused = False
        self._muted = False  # a quota throttled this connection: nothing is read until the time has passed
        self._closed = False
        self._handling = False
        self._waiting_memory = False
        # activity as the idle sweep sees it: counters it compares between passes (cheaper than a clock per read)
        self._reads = self._writes = 0
        self._seen: tuple = ()
        self._last_active = 0.0
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.ip = "?"
        self.sendfile_ok = True
        self.inter_broker = False  # set by the dispatcher once the peer proved it is a broker of this cluster
        self._task: asyncio.Task | None = None

    # --- asyncio.BufferedProtocol -------------------------------------------------
    def connection_made(self, transport) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername")
        if peer:
            self.ip = peer[0]
            self.peer = f"{peer[0]}:{peer[1]}"
        if not self._connections.admit(self):
            self._closed = True
            transport.abort()  # refused at accept: nothing read, nothing to flush
            return
        if self._principal_mapper is not None and self.authenticator is None:  # SASL_SSL: SASL names the principal
            from broker_sim.security.tls import principal_of  # a TLS listener's: loaded with its PrincipalMapper

            self.principal = principal_of(transport, self._principal_mapper)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sendfile_ok = sock is not None and transport.get_extra_info("sslcontext") is None
        transport.set_write_buffer_limits(high=WRITE_BUFFER_HIGH)
        loop = asyncio.get_running_loop()
        self._last_active = loop.time()
        timeout_ms = self._connections.authentication_timeout_ms
        if self.authenticator is not None and timeout_ms > 0:
            self._deadline = loop.call_later(timeout_ms / 1000.0, self._authentication_deadline)
        self._task = loop.create_task(self._serve())
        self._update_reading()  # frames a TLS transport delivered before this (right after its handshake)

    def _authentication_deadline(self) -> None:
        self._deadline = None
        if not self._closed and self.authenticator is not None and self.authenticator.principal is None:
            log.info("closing connection from %s: not authenticated within sasl.server.authentication.timeout.ms=%d",
                     self.peer, self._connections.authentication_timeout_ms)
            self.close()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._decoder.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        self._reads += 1
        try:
            frames = self._decoder.buffer_updated(nbytes)
        except FrameError as exc:
            log.warning("closing connection from %s: %s", self.peer, exc)
            self.close()
            return
        self._take(frames)

    def _take(self, frames: list) -> None:
        if frames:
            self._queue.extend(frames)
            self._queued_bytes += sum(len(f) for f in frames)
            if self._wakeup is not None and not self._wakeup.done():
                self._wakeup.set_result(None)
        if self._decoder.blocked and not self._waiting_memory:
            self._waiting_memory = True
            self._pool.wait(self._memory_released, growing=self._decoder.growing)
        self._update_reading()

    def _memory_released(self) -> None:
        self._waiting_memory = False
        if not self._closed:
            self._take(self._decoder.resume())

    def throttle(self, milliseconds: int) -> None:
        """KIP-219: a quota was exceeded; read nothing more from this client for ``milliseconds``
        (its response, carrying throttle_time_ms, is sent meanwhile)."""
        if milliseconds <= 0 or self._closed or self.transport is None:
            return
        if not self._muted:
            self._muted = True
            self._update_reading()
        loop = asyncio.get_running_loop()
        until = loop.time() + milliseconds / 1000.0
        if until > getattr(self, "_muted_until", 0.0):
            self._muted_until = until
            loop.call_at(until, self._unmute, until)

    def _unmute(self, until: float) -> None:
        if self._muted and until >= self._muted_until:
            self._muted = False
            self._update_reading()

    def _update_reading(self) -> None:
        if self._closed or self.transport is None:
            return
        if self._reading_paused:
            if (not self._muted and not self._decoder.blocked and len(self._queue) < MAX_QUEUED_REQUESTS // 2
                    and self._queued_bytes < MAX_QUEUED_REQUEST_BYTES // 2):
                self._reading_paused = False
                self.transport.resume_reading()
        elif (self._muted or self._decoder.blocked or len(self._queue) >= MAX_QUEUED_REQUESTS
              or self._queued_bytes >= MAX_QUEUED_REQUEST_BYTES):
            self._reading_paused = True
            self.transport.pause_reading()

    def eof_received(self):
        return False

    def connection_lost(self, exc) -> None:
        self._closed = True
        self._connections.discard(self)
        if not self.sendfile_ok and self.transport is not None and self.transport.get_extra_info("sslcontext"):
            self._connections.tls_ended += 1
        # asyncio's SSLProtocol keeps bound methods of this protocol after the connection is lost: with this
        # reference to its transport (which references the SSLProtocol) they form a cycle holding the TLS
        # buffers until a full garbage collection
        self.transport = None
        for handle in (self._deadline, self._abort_handle):
            if handle is not None:
                handle.cancel()
        self._deadline = self._abort_handle = None
        self._pool.cancel_wait(self._memory_released)
        while self._queue:  # requests nobody will answer give their memory back
            self._pool.release(len(self._queue.popleft()))
        self._queued_bytes = 0
        self._decoder.close()
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    def pause_writing(self) -> None:
        if self._drained is None or self._drained.done():
            self._drained = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    def authenticated(self, principal: str) -> None:
        """SASL completed: the connection is ``principal``'s and, once nothing it sent holds memory of the
        unauthenticated budget (``_leave_unauthenticated_pool``), reads frames up to socket.request.max.bytes
        from the shared pool."""
        self.principal = principal
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        if self._pool is not self._connections.pool:
            self._authenticated_pending = True

    def _leave_unauthenticated_pool(self) -> None:
        """Move to the shared pool at a point where no frame holds a reservation of the unauthenticated one
        (nothing queued, no partial frame, not waiting): each reservation goes back to the pool it came from."""
        if (self._queue or self._decoder.reserved or self._waiting_memory or self._decoder.blocked
                or self._closed):
            return
        self._authenticated_pending = False
        self._pool = self._decoder.pool = self._connections.pool
        self._decoder.max_frame_bytes = self._connections.max_frame_bytes
        self._decoder.limit_name = "socket.request.max.bytes"

    # --- idle sweep ---------------------------------------------------------
    @property
    def reserved_for_partial_frame(self) -> int:
        """Request-pool bytes this connection holds for a frame it has not finished receiving."""
        return 0 if self._closed else self._decoder.reserved

    @property
    def reads(self) -> int:
        """How many times bytes arrived on this connection."""
        return self._reads

    @property
    def waiting_for_memory(self) -> bool:
        """The pool keeps this connection from being read (its next bytes do not fit)."""
        return self._waiting_memory

    def idle_for(self, now: float) -> float:
        """Seconds since this connection last read or wrote a byte or handled a request (0 when busy)."""
        activity = (self._reads, self._writes,
                    self.transport.get_write_buffer_size() if self.transport is not None else 0)
        if self._handling or activity != self._seen:
            self._seen = activity
            self._last_active = now
            return 0.0
        self._decoder.shrink()  # quiet since the last pass: drop a scratch buffer grown for a burst
        return now - self._last_active

    # --- request loop -----------------------------------------------------
    def close(self) -> None:
        """Close the transport (flushing what is written); if it is not gone within CLOSE_TIMEOUT_S — a TLS
        shutdown waiting for a peer that closed first, with reading paused — abort it, so no ending of a
        connection leaves its socket open."""
        if not self._closed:
            self._closed = True
            if self.transport is not None:
                self.transport.close()
                try:
                    self._abort_handle = asyncio.get_running_loop().call_later(CLOSE_TIMEOUT_S, self._abort)
                except RuntimeError:  # no loop running (the broker is being torn down): nothing left to wait for
                    self.transport.abort()

    @property
    def closed(self) -> bool:
        return self._closed

    def _abort(self) -> None:
        self._abort_handle = None
        if self.transport is not None:
            log.info("aborting connection from %s: not closed within %.0f s of closing", self.peer, CLOSE_TIMEOUT_S)
            self.transport.abort()

    async def _serve(self) -> None:
        loop = asyncio.get_running_loop()
        turn_ends = time.perf_counter() + PIPELINE_TURN_S
        try:
            while not self._closed:
                if not self._queue:
                    self._wakeup = loop.create_future()
                    await self._wakeup
                    self._wakeup = None
                    turn_ends = time.perf_counter() + PIPELINE_TURN_S
                    continue
                if time.perf_counter() >= turn_ends:  # the other connections' turn (see the module docstring)
                    await asyncio.sleep(0)
                    turn_ends = time.perf_counter() + PIPELINE_TURN_S
                    continue
                frame = self._queue.popleft()
                pool = self._pool  # the frame's reservation goes back where it was taken
                self._queued_bytes -= len(frame)
                self._update_reading()
                try:
                    self._handling = True
                    try:
                        parts = await self._handle(self, frame)
                    finally:
                        self._handling = False
                    if self._authenticated_pending:  # before the answer that lets the client send more
                        self._leave_unauthenticated_pool()
                    if parts:
                        await self._send(parts)
                    if self.close_after_response:
                        # the answer (a failed authentication) is sent; read nothing more and close after a
                        # grace period, so the client reads the error before it sees the connection end
                        if self.transport is not None:
                            self.transport.pause_reading()
                        loop.call_later(CLOSE_GRACE_S, self.close)
                        return
                except CloseConnection as exc:
                    log.warning("closing connection from %s: %s", self.peer, exc)
                    self.close()
                    return
                finally:
                    # answered (or never will be): its bytes go back to the pool
                    pool.release(len(frame))
                    del frame  # a large request is not kept alive while waiting for the next one
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("closing connection from %s after an unexpected error", self.peer)
            self.close()

    async def _send(self, parts: list) -> None:
        transport = self.transport
        for part in parts:
            if self._closed:
                return
            self._writes += 1
            if isinstance(part, (bytes, bytearray, memoryview)):
                transport.write(part)
            elif part.size >= SENDFILE_MIN_BYTES and self.sendfile_ok:
                await self._sendfile(part)
            else:
                transport.write(os.pread(part.file.fileno(), part.size, part.position))
                self._connections.copied_bytes += part.size
        if self._drained is not None and not self._drained.done():
            await self._drained

    async def _sendfile(self, region) -> None:
        """Send a file region with os.sendfile once everything written before it has left.

        asyncio's loop.sendfile drains the transport first and takes the socket from
        the transport for the duration (a transport-owned socket cannot be watched
        directly).  The segment file is opened O_APPEND, so the position
        loop.sendfile leaves behind does not move appends.
        """
        try:
            # fallback=False: a loop or transport without os.sendfile raises instead of quietly copying, so
            # the zero-copy count below is only ever bytes the kernel sent from the page cache
            await asyncio.get_running_loop().sendfile(self.transport, region.file, region.position, region.size,
                                                      fallback=False)
            self._connections.sendfile_bytes += region.size
        except asyncio.SendfileNotAvailableError:
            self.sendfile_ok = False
            if self.transport is None:
                return
            self.transport.write(os.pread(region.file.fileno(), region.size, region.position))
            self._connections.copied_bytes += region.size
        except (OSError, RuntimeError, ValueError) as exc:
            log.warning("closing connection from %s: sendfile failed: %s", self.peer, exc)
            self.close()


class TlsAcceptor(asyncio.Protocol):
    """A TLS listener's socket from the moment it is accepted, before any TLS byte is read.

    It is counted against ``max.connections`` / ``max.connections.per.ip`` at once (a refused socket is closed
    before a TLS buffer exists), then at most ``MAX_TLS_HANDSHAKES`` handshakes run broker-wide, each within
    ``handshake_timeout_s``; a completed one hands the TLS transport to its ``KafkaConnection`` (already
    counted), a failed one gives its count back.
    """

    def __init__(self, connections: Connections, context, handshake_timeout_s: float,
                 make_connection: Callable[[], "KafkaConnection"]) -> None:
        self._connections = connections
        self._context = context
        self._timeout_s = handshake_timeout_s
        self._make_connection = make_connection
        self._lost = False

    def connection_made(self, transport) -> None:
        transport.pause_reading()  # the ClientHello is read by the TLS protocol start_tls installs
        peer = transport.get_extra_info("peername")
        ip = peer[0] if peer else "?"
        connections = self._connections
        if not connections.admit_ip(ip):
            transport.abort()
            return
        if connections.handshakes >= MAX_TLS_HANDSHAKES:
            connections.quotas.release(ip)
            message = connections.quotas.refusal_to_log(ip, f"{MAX_TLS_HANDSHAKES} TLS handshakes in progress")
            if message is not None:
                log.warning("%s", message)
            transport.abort()
            return
        connections.handshakes += 1
        asyncio.get_running_loop().create_task(self._handshake(transport, ip))

    def connection_lost(self, exc) -> None:
        self._lost = True  # before start_tls took the transport over

    async def _handshake(self, transport, ip: str) -> None:
        connections = self._connections
        connection = self._make_connection()
        connection.counted = True
        try:
            if self._lost:
                raise ConnectionResetError("closed before the TLS handshake began")
            tls_transport = await asyncio.get_running_loop().start_tls(
                transport, connection, self._context, server_side=True, ssl_handshake_timeout=self._timeout_s)
        except Exception as exc:  # noqa: BLE001 - any failed handshake gives its count back
            log.debug("TLS handshake with %s failed: %r", ip, exc)
            _drop_tracebacks(exc)
            transport.abort()
            connections.quotas.release(ip)
            connections.tls_ended += 1
            return
        finally:
            connections.handshakes -= 1
        if tls_transport is None or tls_transport.is_closing() or connection.closed:
            transport.abort()
            connections.quotas.release(ip)
            return
        connection.connection_made(tls_transport)
