"""asyncio network layer: one ``KafkaConnection`` per client socket.

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
other connection.  Reading pauses while many requests are queued or the
client is not reading its responses (back-pressure instead of buffering
without bound).
"""
from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections import deque
from typing import Awaitable, Callable

from broker_sim.protocol.framing import FrameDecoder, FrameError

log = logging.getLogger(__name__)

MAX_QUEUED_REQUESTS = 64
SENDFILE_MIN_BYTES = 64 * 1024


class CloseConnection(Exception):
    """Raised by a handler when Kafka would close the connection (malformed or unsupported request)."""


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, handle: Callable[["KafkaConnection", bytes], Awaitable[list | None]],
                 max_frame_bytes: int, connections: set) -> None:
        self._handle = handle
        self._decoder = FrameDecoder(max_frame_bytes)
        self._connections = connections
        self._queue: deque[bytes] = deque()
        self._wakeup: asyncio.Future | None = None
        self._drained: asyncio.Future | None = None
        self._reading_paused = False
        self._closed = False
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.sendfile_ok = True
        self.inter_broker = False  # set by the dispatcher once the peer proved it is a broker of this cluster
        self._task: asyncio.Task | None = None

    # --- asyncio.BufferedProtocol -------------------------------------------------
    def connection_made(self, transport) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sendfile_ok = sock is not None and transport.get_extra_info("sslcontext") is None
        self._connections.add(self)
        self._task = asyncio.get_running_loop().create_task(self._serve())

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._decoder.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        try:
            frames = self._decoder.buffer_updated(nbytes)
        except FrameError as exc:
            log.warning("closing connection from %s: %s", self.peer, exc)
            self.close()
            return
        if frames:
            self._queue.extend(frames)
            if len(self._queue) >= MAX_QUEUED_REQUESTS and not self._reading_paused:
                self._reading_paused = True
                self.transport.pause_reading()
            if self._wakeup is not None and not self._wakeup.done():
                self._wakeup.set_result(None)

    def eof_received(self):
        return False

    def connection_lost(self, exc) -> None:
        self._closed = True
        self._connections.discard(self)
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
                if self._reading_paused and len(self._queue) < MAX_QUEUED_REQUESTS // 2:
                    self._reading_paused = False
                    self.transport.resume_reading()
                try:
                    parts = await self._handle(self, frame)
                except CloseConnection as exc:
                    log.warning("closing connection from %s: %s", self.peer, exc)
                    self.close()
                    return
                if parts:
                    await self._send(parts)
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
            if isinstance(part, (bytes, bytearray, memoryview)):
                transport.write(part)
            elif part.size >= SENDFILE_MIN_BYTES and self.sendfile_ok:
                await self._sendfile(part)
            else:
                transport.write(os.pread(part.file.fileno(), part.size, part.position))
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
            await asyncio.get_running_loop().sendfile(self.transport, region.file, region.position, region.size)
        except (OSError, RuntimeError, ValueError) as exc:
            log.warning("closing connection from %s: sendfile failed: %s", self.peer, exc)
            self.close()
