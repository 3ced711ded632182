"""Kafka request framing and request memory, sans-IO.

Theory of operation: a Kafka connection carries frames, each an int32 size
followed by that many bytes.  ``FrameDecoder`` takes bytes in (``feed``, or
asyncio's buffered-protocol pair ``get_buffer``/``buffer_updated``) and hands
complete frames out; it never touches a socket, so framing is tested without
one.

What a client can make the decoder hold, and why:

* a size that is negative or above ``max_frame_bytes``
  (``socket.request.max.bytes``) raises ``FrameTooLarge`` before any of its
  body is buffered, as Kafka's ``NetworkReceive`` does;
* a frame's buffer grows as its bytes arrive (doubling, capped at the
  declared size), never ``bytearray(declared_size)`` up front: a header
  declaring 100 MB followed by nothing holds a few KB, a half-sent frame at
  most twice what was sent, and a 1 MB produce request is copied about once
  on its way in (the socket reads straight into the frame's buffer);
* small frames are cut out of a per-connection scratch buffer that starts at
  ``SCRATCH_MIN`` bytes, doubles up to ``SCRATCH_MAX`` while reads fill it (a
  burst of small requests) and goes back to ``SCRATCH_MIN`` on ``shrink`` (the
  network layer calls it for connections gone quiet);
* request bytes come from the broker-wide ``MemoryPool``
  (``queued.max.request.bytes``) and go back when the caller releases the
  answered frame: a small frame (one that fits the scratch buffer) reserves
  its declared size when its header is parsed; a large frame reserves its
  buffer as the buffer grows, so what it holds is what its sender actually
  sent (at most twice that).  Kafka reserves a large frame's whole declared
  size at its header; then two connections that each send only a header
  declaring 100 MB hold a 200 MB pool, and every other connection stops being
  read until they are closed.  When the pool is out of memory the decoder
  stops (``blocked``): the caller stops reading the socket, and ``resume``
  retries once memory was released.  Nothing is allocated while waiting.
  Partly received frames could all wait for each other to finish; so one
  growing frame at a time may go past the pool's size (``try_grow``), and
  ``reserved`` says what a decoder holds for an unfinished frame (the network
  layer closes a sender that stopped halfway while others wait for memory).

``MemoryPool`` is Kafka's ``SimpleMemoryPool`` in its non-strict mode (the one
Kafka's SocketServer uses): a reservation succeeds while *any* memory is
available, so a frame larger than the whole pool (a pool smaller than
``socket.request.max.bytes``) is still served once the pool is otherwise empty
instead of waiting forever; with the one growing frame allowed past the size,
usage peaks below ``size + 2 × socket.request.max.bytes``.

Every request frame starts with the same three fields (api key, api version,
correlation id): ``peek_header`` reads them so the dispatcher can choose the
schema class (and answer on the right correlation id) before decoding.
"""
from __future__ import annotations

import struct
from collections import deque
from typing import Callable

_SIZE = struct.Struct(">i")
# api key int16, api version int16, correlation id int32: the fixed start of every request header
_HEADER_START = struct.Struct(">hhi")


class FrameError(Exception):
    """The byte stream cannot be framed; the connection must be closed."""


class FrameTooLarge(FrameError):
    pass


class MemoryPool:
    """The broker-wide budget of request bytes (``queued.max.request.bytes``); ``size`` <= 0: unbounded.

    ``try_reserve(n)`` returns whether ``n`` bytes were taken; ``release(n)`` gives them back and calls
    the waiters registered with ``wait`` (oldest first) while memory is available.  Single-threaded:
    owned by the broker's event loop.
    """

    __slots__ = ("size", "used", "releases", "_waiters", "_priority")

    def __init__(self, size: int) -> None:
        self.size = size
        self.used = 0
        self.releases = 0  # count of release() calls: the network layer sees whether memory moved
        self._waiters: deque[tuple[Callable[[], None], bool]] = deque()  # (callback, wants to grow a frame)
        self._priority: object | None = None  # the one growing frame that may go past the size

    @property
    def bounded(self) -> bool:
        return self.size > 0

    @property
    def available(self) -> int:
        """Bytes left (negative after a non-strict reservation went past the size)."""
        return self.size - self.used if self.bounded else 2**63 - 1

    def try_reserve(self, nbytes: int) -> bool:
        # non-strict, as Kafka's SocketServer pool: any memory left admits a whole frame
        if self.available <= 0:
            return False
        self.used += nbytes
        return True

    def try_grow(self, nbytes: int, owner: object) -> bool:
        """Reserve ``nbytes`` more for ``owner``'s partly received frame.

        Like ``try_reserve``, and when the pool is out of memory one frame at a time — the first to ask,
        until ``done_growing`` — may grow anyway: partly received frames then never all wait for each other
        (each holds only what arrived), and usage stays below ``size`` + one frame.
        """
        if self.try_reserve(nbytes):
            return True
        if self._priority is None or self._priority is owner:
            self._priority = owner
            self.used += nbytes
            return True
        return False

    def done_growing(self, owner: object) -> None:
        """``owner``'s frame is complete (or abandoned): another frame may take the priority."""
        if self._priority is owner:
            self._priority = None
            self._wake()

    def release(self, nbytes: int) -> None:
        self.used -= nbytes
        self.releases += 1
        self._wake()

    def _wake(self) -> None:
        """Let waiters retry, oldest first, while memory is left — or, with none left, let the oldest
        waiter growing a frame take a free growing-frame priority; a waiter that still does not fit
        registers again."""
        if self.available > 0:
            while self._waiters and self.available > 0:
                self._waiters.popleft()[0]()
        elif self._priority is None:
            for waiter in self._waiters:
                if waiter[1]:
                    self._waiters.remove(waiter)
                    waiter[0]()
                    return

    @property
    def waiting(self) -> int:
        """How many reservations wait for memory."""
        return len(self._waiters)

    def wait(self, callback: Callable[[], None], *, growing: bool = False) -> None:
        """Call ``callback`` (once) when memory is released; a waiter should retry its reservation then."""
        self._waiters.append((callback, growing))

    def cancel_wait(self, callback: Callable[[], None]) -> None:
        for waiter in self._waiters:
            if waiter[0] == callback:
                self._waiters.remove(waiter)
                return


UNBOUNDED = MemoryPool(-1)


class FrameDecoder:
    """Splits a byte stream into frames (sans-IO), in asyncio's buffered-protocol shape.

    ``get_buffer`` hands out the memory the next received bytes should land in
    and ``buffer_updated`` reports how many did, returning the frames now
    complete.  Each returned frame holds ``len(frame)`` bytes reserved from the
    pool; the caller releases them.  Buffers are always replaced, never resized
    in place, so a memoryview the transport still holds never blocks a resize.
    """

    __slots__ = ("max_frame_bytes", "limit_name", "pool", "blocked", "_scratch", "_view", "_start", "_end", "_grow",
                 "_reserved", "_body", "_size", "_filled", "_backlog")
    SCRATCH_MIN = 4 * 1024
    SCRATCH_MAX = 64 * 1024
    BODY_MIN = 64 * 1024  # first buffer of a large frame; doubles as its bytes arrive

    def __init__(self, max_frame_bytes: int, pool: MemoryPool = UNBOUNDED) -> None:
        self.max_frame_bytes = max_frame_bytes
        self.limit_name = "socket.request.max.bytes"  # the config named when a frame is over the limit
        self.pool = pool
        self.blocked = False  # the next frame's size could not be reserved; see resume()
        self._new_scratch(self.SCRATCH_MIN)
        self._start = 0  # unparsed bytes are scratch[_start:_end]
        self._end = 0
        self._grow = False  # the last read filled the scratch: make it bigger when it is next empty
        self._reserved = False  # the frame at scratch[_start] holds its pool reservation
        self._body: bytearray | None = None  # a large frame being received in place
        self._size = 0  # its declared size
        self._filled = 0
        self._backlog = b""  # bytes given to feed() while blocked

    def _new_scratch(self, size: int) -> None:
        self._scratch = bytearray(size)
        self._view = memoryview(self._scratch)

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        if self._body is not None:  # never full here: buffer_updated grew it (or blocked reading)
            return memoryview(self._body)[self._filled:]
        tail = self._end - self._start
        if self._grow and len(self._scratch) < self.SCRATCH_MAX and (tail == 0 or self._end == len(self._scratch)):
            unparsed = self._view[self._start:self._end]
            self._new_scratch(2 * len(self._scratch))
            self._scratch[:tail] = unparsed
            self._start, self._end, self._grow = 0, tail, False
        elif tail == 0:
            self._start = self._end = 0
        elif self._end == len(self._scratch):
            # move the unparsed tail to the front so the socket has room to write
            self._scratch[:tail] = self._view[self._start:self._end]
            self._start, self._end = 0, tail
        return self._view[self._end:]

    def buffer_updated(self, nbytes: int) -> list[bytearray | bytes]:
        """Account for ``nbytes`` received into the last buffer; return complete frames.

        Raises FrameTooLarge for a size outside [0, max_frame_bytes].
        """
        if self._body is not None:
            self._filled += nbytes
            if self._filled < self._size:
                if self._filled == len(self._body):
                    self._grow_body()
                return []
            body, self._body = self._body, None
            self.pool.done_growing(self)
            return [body]
        if self._end + nbytes == len(self._scratch):
            self._grow = True
        self._end += nbytes
        return self._parse()

    def _grow_body(self) -> None:
        """Double a large frame's full buffer (capped at its size), reserving the growth; else block."""
        grown_size = min(self._size, 2 * len(self._body))
        if not self.pool.try_grow(grown_size - len(self._body), self):
            self.blocked = True
            return
        grown = bytearray(grown_size)
        grown[:self._filled] = self._body
        self._body = grown

    def resume(self) -> list[bytearray | bytes]:
        """Retry the reservation a blocked decoder waits for; return the frames that completes."""
        self.blocked = False
        if self._body is not None:
            self._grow_body()
            frames = []
        else:
            frames = self._parse()
        if self._backlog and not self.blocked:
            backlog, self._backlog = self._backlog, b""
            frames += self.feed(backlog)
        return frames

    def close(self) -> None:
        """Release the reservation of a frame still being received (the connection is gone)."""
        if self._body is not None:
            self.pool.release(len(self._body))
            self._body = None
            self.pool.done_growing(self)
        elif self._reserved:
            self.pool.release(_SIZE.unpack_from(self._scratch, self._start)[0])
            self._reserved = False
        self._start = self._end = 0

    def shrink(self) -> None:
        """Give back a grown scratch buffer (for a connection gone quiet); no-op while bytes are buffered."""
        if self._start == self._end and self._body is None and len(self._scratch) > self.SCRATCH_MIN:
            self._start = self._end = 0
            self._new_scratch(self.SCRATCH_MIN)

    def _parse(self) -> list[bytearray | bytes]:
        frames: list[bytearray | bytes] = []
        scratch, view = self._scratch, self._view
        while not self.blocked and self._end - self._start >= 4:
            (size,) = _SIZE.unpack_from(scratch, self._start)
            if size < 0 or size > self.max_frame_bytes:
                for done in frames:  # the connection closes: nobody will answer them
                    self.pool.release(len(done))
                raise FrameTooLarge(
                    f"frame size {size} outside [0, {self.limit_name}={self.max_frame_bytes}]")
            available = self._end - self._start - 4
            if available < size and size > len(scratch) // 2 and not self._reserved:
                # a large frame: received in its own buffer, reserved as that buffer grows
                initial = min(size, max(self.BODY_MIN, 2 * available))
                if not self.pool.try_grow(initial, self):
                    self.blocked = True
                    break
                self._body = bytearray(initial)
                self._body[:available] = view[self._start + 4:self._end]
                self._size, self._filled = size, available
                self._start = self._end = 0
                break
            if not self._reserved:
                if not self.pool.try_reserve(size):
                    self.blocked = True
                    break
                self._reserved = True
            if available >= size:
                frames.append(bytes(view[self._start + 4:self._start + 4 + size]))
                self._start += 4 + size
                self._reserved = False
            else:
                break
        return frames

    def feed(self, data) -> list[bytearray | bytes]:
        """Copy ``data`` in through get_buffer/buffer_updated (for callers holding bytes).

        Bytes that arrive while the pool blocks the decoder are kept and parsed by ``resume``.
        """
        frames: list[bytearray | bytes] = []
        data = memoryview(data)
        while data:
            if self.blocked:
                self._backlog += bytes(data)
                break
            buf = self.get_buffer(len(data))
            n = min(len(buf), len(data))
            buf[:n] = data[:n]
            data = data[n:]
            frames += self.buffer_updated(n)
        return frames

    @property
    def buffered(self) -> int:
        """Bytes received and not yet returned in a frame."""
        return self._filled if self._body is not None else self._end - self._start

    @property
    def growing(self) -> bool:
        """A large frame is being received (a block now waits to grow it, see MemoryPool.try_grow)."""
        return self._body is not None

    @property
    def reserved(self) -> int:
        """Pool bytes held for a frame not yet complete."""
        if self._body is not None:
            return len(self._body)
        return _SIZE.unpack_from(self._scratch, self._start)[0] if self._reserved else 0

    @property
    def capacity(self) -> int:
        """Bytes of buffer this decoder holds (what a connection costs while idle or mid-frame)."""
        return len(self._scratch) + (len(self._body) if self._body is not None else 0)


def peek_header(frame: bytes) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) of a request frame; FrameError if it is too short."""
    if len(frame) < _HEADER_START.size:
        raise FrameError(f"request of {len(frame)} bytes is shorter than a request header")
    return _HEADER_START.unpack_from(frame, 0)


def frame(payload: bytes) -> bytes:
    return _SIZE.pack(len(payload)) + payload
