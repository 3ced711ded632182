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
  (``queued.max.request.bytes``, see ``framing.MemoryPool``) — a small frame
  its size at its header, a large one its buffer as its bytes arrive — and
  releases once its response has been written; a connection whose next bytes
  do not fit stops being read until memory is released.  When connections
  have waited ``STALLED_FRAME_S`` for memory and none was released meanwhile,
  those holding memory for a frame they stopped sending are closed (a sender
  that stopped halfway cannot keep everyone else waiting);
* queued requests: at most ``MAX_QUEUED_REQUESTS`` frames or
  ``MAX_QUEUED_REQUEST_BYTES`` bytes wait behind the one being handled, then
  reading pauses (until half of both is left);
* responses: the transport's write buffer pauses the connection above
  ``WRITE_BUFFER_HIGH`` bytes and the next response waits until it drained, so
  a client that does not read its responses holds at most one response (a
  Fetch response is at most ``fetch.max.bytes`` plus headers) and
  ``WRITE_BUFFER_HIGH``; its queue then fills and reading stops.

``Connections`` owns the live connections: ``ConnectionQuotas``
(``max.connections``, ``max.connections.per.ip[.overrides]``) at accept, and
a periodic sweep (every tenth of ``connections.max.idle.ms``, at most
``MAX_SWEEP_INTERVAL_S``) that closes connections idle that long — no request
being handled and no bytes read or written — as Kafka's Selector does; a long
poll Fetch in progress is being handled, so it is not idle.  The sweep also
gives back the grown read buffers of connections that went quiet (it runs
with ``connections.max.idle.ms=-1`` too, then closing nothing).
"""
from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections import deque
from typing import Awaitable, Callable

from broker_sim.protocol.framing import FrameDecoder, FrameError, MemoryPool
from broker_sim.security.tls import ANONYMOUS, principal_of
from broker_sim.server.connection_quotas import ConnectionQuotas

log = logging.getLogger(__name__)

MAX_QUEUED_REQUESTS = 64
MAX_QUEUED_REQUEST_BYTES = 16 * 1024 * 1024
WRITE_BUFFER_HIGH = 256 * 1024
SENDFILE_MIN_BYTES = 64 * 1024
MAX_SWEEP_INTERVAL_S = 10.0
STARVED_CHECK_S = 1.0  # how often the sweep looks for connections starved of request memory
CLOSE_GRACE_S = 0.5  # after a final error answer (failed SASL) before the broker closes the connection
STALLED_FRAME_S = 5.0  # starved this long with no memory released: the largest partial-frame holder is closed


class CloseConnection(Exception):
    """Raised by a handler when Kafka would close the connection (malformed or unsupported request)."""


class Connections:
    """The listener's live connections, their quotas, the request memory pool and the idle sweep.

    ``pool.used`` / ``pool.size`` are the request bytes held now and the bound (metrics read them);
    ``len(connections)`` is the number of admitted connections.
    """

    def __init__(self, *, max_frame_bytes: int, queued_max_request_bytes: int, idle_ms: int,
                 quotas: ConnectionQuotas) -> None:
        self.max_frame_bytes = max_frame_bytes
        self.pool = MemoryPool(queued_max_request_bytes)
        self.idle_ms = idle_ms
        self.quotas = quotas
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
                                           config.get("max.connections.per.ip.overrides")))

    def __iter__(self):
        return iter(list(self._live))

    def __len__(self) -> int:
        return len(self._live)

    def admit(self, connection: "KafkaConnection") -> bool:
        refused = self.quotas.admit(connection.ip)
        if refused is not None:
            message = self.quotas.refusal_to_log(connection.ip, refused)
            if message is not None:
                log.warning("%s", message)
            return False
        self._live.add(connection)
        return True

    def discard(self, connection: "KafkaConnection") -> None:
        if connection in self._live:
            self._live.remove(connection)
            self.quotas.release(connection.ip)

    def start(self) -> None:
        """Start the idle sweep (on the running loop)."""
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
        self._pool = connections.pool
        self._decoder = FrameDecoder(connections.max_frame_bytes, connections.pool)
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
            self.principal = principal_of(transport, self._principal_mapper)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sendfile_ok = sock is not None and transport.get_extra_info("sslcontext") is None
        transport.set_write_buffer_limits(high=WRITE_BUFFER_HIGH)
        loop = asyncio.get_running_loop()
        self._last_active = loop.time()
        self._task = loop.create_task(self._serve())

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
        if self._closed:
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
        """SASL completed: the connection is ``principal``'s and may send frames up to socket.request.max.bytes."""
        self.principal = principal
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
        if not self._closed:
            self._closed = True
            if self.transport is not None:
                self.transport.close()

    async def _serve(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while not self._closed:
                if not self._queue:
                    self._wakeup = loop.create_future()
                    await self._wakeup
                    self._wakeup = None
                    continue
                frame = self._queue.popleft()
                self._queued_bytes -= len(frame)
                self._update_reading()
                try:
                    self._handling = True
                    try:
                        parts = await self._handle(self, frame)
                    finally:
                        self._handling = False
                    if parts:
                        await self._send(parts)
                    if self.close_after_response:
                        # the answer (a failed authentication) is sent; read nothing more and close after a
                        # grace period, so the client reads the error before it sees the connection end
                        self.transport.pause_reading()
                        loop.call_later(CLOSE_GRACE_S, self.close)
                        return
                except CloseConnection as exc:
                    log.warning("closing connection from %s: %s", self.peer, exc)
                    self.close()
                    return
                finally:
                    # answered (or never will be): its bytes go back to the pool
                    self._pool.release(len(frame))
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
            self.transport.write(os.pread(region.file.fileno(), region.size, region.position))
            self._connections.copied_bytes += region.size
        except (OSError, RuntimeError, ValueError) as exc:
            log.warning("closing connection from %s: sendfile failed: %s", self.peer, exc)
            self.close()
