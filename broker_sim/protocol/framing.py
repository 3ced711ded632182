"""Kafka request framing, sans-IO.

Theory of operation: a Kafka connection carries frames, each an int32 size
followed by that many bytes.  ``FrameDecoder`` takes bytes in (``feed``) and
hands complete frames out; it never touches a socket, so framing is tested
without one.  A frame whose size is negative or above ``max_frame_bytes``
(``socket.request.max.bytes``) raises ``FrameTooLarge`` before any of its body
is buffered, as Kafka's ``NetworkReceive`` does, so a hostile length cannot
make the broker allocate.

Every request frame starts with the same three fields (api key, api version,
correlation id): ``peek_header`` reads them so the dispatcher can choose the
schema class (and answer on the right correlation id) before decoding.
"""
from __future__ import annotations

import struct

_SIZE = struct.Struct(">i")
# api key int16, api version int16, correlation id int32: the fixed start of every request header
_HEADER_START = struct.Struct(">hhi")


class FrameError(Exception):
    """The byte stream cannot be framed; the connection must be closed."""


class FrameTooLarge(FrameError):
    pass


class FrameDecoder:
    """Splits a byte stream into frames (sans-IO), in asyncio's buffered-protocol shape.

    ``get_buffer`` hands out the memory the next received bytes should land in
    and ``buffer_updated`` reports how many did, returning the frames now
    complete.  Small frames are cut out of a shared scratch buffer; once a
    frame is known to be larger than what has arrived, the decoder allocates
    its final buffer and the socket reads straight into it, so a 1 MB produce
    request is not copied on its way in.
    """

    __slots__ = ("max_frame_bytes", "_scratch", "_view", "_start", "_end", "_body", "_filled")
    SCRATCH_BYTES = 256 * 1024

    def __init__(self, max_frame_bytes: int) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._scratch = bytearray(self.SCRATCH_BYTES)
        self._view = memoryview(self._scratch)
        self._start = 0  # unparsed bytes are scratch[_start:_end]
        self._end = 0
        self._body: bytearray | None = None  # a large frame being received in place
        self._filled = 0

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        if self._body is not None:
            return memoryview(self._body)[self._filled:]
        if self._end == len(self._scratch):
            # move the unparsed tail to the front so the socket has room to write
            tail = self._end - self._start
            self._scratch[:tail] = self._scratch[self._start:self._end]
            self._start, self._end = 0, tail
        return self._view[self._end:]

    def buffer_updated(self, nbytes: int) -> list[bytes]:
        """Account for ``nbytes`` received into the last buffer; return complete frames.

        Raises FrameTooLarge for a size outside [0, max_frame_bytes].
        """
        if self._body is not None:
            self._filled += nbytes
            if self._filled < len(self._body):
                return []
            body, self._body = self._body, None
            return [body]
        self._end += nbytes
        frames: list[bytes] = []
        scratch = self._scratch
        while self._end - self._start >= 4:
            (size,) = _SIZE.unpack_from(scratch, self._start)
            if size < 0 or size > self.max_frame_bytes:
                raise FrameTooLarge(
                    f"frame size {size} outside [0, socket.request.max.bytes={self.max_frame_bytes}]")
            available = self._end - self._start - 4
            if available >= size:
                frames.append(bytes(scratch[self._start + 4:self._start + 4 + size]))
                self._start += 4 + size
            elif size > len(scratch) // 2:
                self._body = bytearray(size)
                self._body[:available] = scratch[self._start + 4:self._end]
                self._filled = available
                self._start = self._end = 0
                break
            else:
                break
        if self._start == self._end:
            self._start = self._end = 0
        return frames

    def feed(self, data) -> list[bytes]:
        """Copy ``data`` in through get_buffer/buffer_updated (for callers holding bytes)."""
        frames: list[bytes] = []
        data = memoryview(data)
        while data:
            buf = self.get_buffer(len(data))
            n = min(len(buf), len(data))
            buf[:n] = data[:n]
            data = data[n:]
            frames += self.buffer_updated(n)
        return frames

    @property
    def buffered(self) -> int:
        return self._filled if self._body is not None else self._end - self._start


def peek_header(frame: bytes) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) of a request frame; FrameError if it is too short."""
    if len(frame) < _HEADER_START.size:
        raise FrameError(f"request of {len(frame)} bytes is shorter than a request header")
    return _HEADER_START.unpack_from(frame, 0)


def frame(payload: bytes) -> bytes:
    return _SIZE.pack(len(payload)) + payload
