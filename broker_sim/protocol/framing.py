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
    """Splits a byte stream into frames (sans-IO)."""

    __slots__ = ("max_frame_bytes", "_buf", "_need")

    def __init__(self, max_frame_bytes: int) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()
        self._need = -1  # body size of the frame being read, -1 while reading its size

    def feed(self, data) -> list[bytes]:
        """Add received bytes; return the frames (bodies, without size) now complete.

        Raises FrameTooLarge for a size outside [0, max_frame_bytes].
        """
        buf = self._buf
        buf += data
        frames: list[bytes] = []
        pos = 0
        end = len(buf)
        while True:
            if self._need < 0:
                if end - pos < 4:
                    break
                (size,) = _SIZE.unpack_from(buf, pos)
                if size < 0 or size > self.max_frame_bytes:
                    raise FrameTooLarge(
                        f"frame size {size} outside [0, socket.request.max.bytes={self.max_frame_bytes}]")
                self._need = size
                pos += 4
            if end - pos < self._need:
                break
            frames.append(bytes(buf[pos:pos + self._need]))
            pos += self._need
            self._need = -1
        if pos:
            del buf[:pos]
        return frames

    @property
    def buffered(self) -> int:
        return len(self._buf)


def peek_header(frame: bytes) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) of a request frame; FrameError if it is too short."""
    if len(frame) < _HEADER_START.size:
        raise FrameError(f"request of {len(frame)} bytes is shorter than a request header")
    return _HEADER_START.unpack_from(frame, 0)


def frame(payload: bytes) -> bytes:
    return _SIZE.pack(len(payload)) + payload
