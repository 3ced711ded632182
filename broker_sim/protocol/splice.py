"""Splicing file regions into an encoded response, for zero-copy Fetch.

Theory of operation: kafka-python encodes a whole response into one buffer,
but a Fetch response's record data should go from the segment file to the
socket with ``os.sendfile`` and never pass through Python.  The Fetch handler
therefore encodes the response with a unique 16-byte placeholder in each
partition's ``records`` field, then ``splice`` cuts the encoding at each
placeholder, rewrites the length prefix in front of it for the real size
(int32 before flexible versions, unsigned varint of size+1 after), and fixes
the frame size.  The result is a list of parts — ``bytes`` to write and
``FileRegion`` s to sendfile — that together are byte-for-byte the response
the schema class would have encoded with the data inline.

Placeholders are random per response (``os.urandom``), so they cannot collide
with anything else in the encoding except with probability 2**-128.
"""
from __future__ import annotations

import os
import struct
from typing import Sequence

_INT32 = struct.Struct(">i")
PLACEHOLDER_SIZE = 16


def new_placeholder() -> bytes:
    return os.urandom(PLACEHOLDER_SIZE)


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def splice(encoded: bytes, regions: Sequence[tuple[bytes, Sequence, int]], flexible: bool) -> list:
    """Replace each ``(placeholder, file_regions, total_size)`` in a framed ``encoded`` response.

    Returns the parts to send in order: ``bytes`` and the given region objects.
    """
    old_prefix = _uvarint(PLACEHOLDER_SIZE + 1) if flexible else _INT32.pack(PLACEHOLDER_SIZE)
    parts: list = []
    pos = 4  # the frame size is rewritten at the end
    growth = 0
    for placeholder, file_regions, size in regions:
        at = encoded.find(placeholder, pos)
        if at < 0 or encoded[at - len(old_prefix):at] != old_prefix:
            raise ValueError("placeholder not found in encoded response")
        new_prefix = _uvarint(size + 1) if flexible else _INT32.pack(size)
        parts.append(bytes(encoded[pos:at - len(old_prefix)]) + new_prefix)
        parts.extend(file_regions)
        growth += size + len(new_prefix) - PLACEHOLDER_SIZE - len(old_prefix)
        pos = at + PLACEHOLDER_SIZE
    parts.append(bytes(encoded[pos:]))
    (frame_size,) = _INT32.unpack_from(encoded, 0)
    parts[0] = _INT32.pack(frame_size + growth) + parts[0]
    return parts
