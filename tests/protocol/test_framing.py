"""Request framing without sockets."""
import struct

import pytest

from broker_sim.protocol.framing import FrameDecoder, FrameError, FrameTooLarge, frame, peek_header


def test_frames_split_across_feeds_are_reassembled_in_order():
    decoder = FrameDecoder(1024)
    stream = frame(b"first") + frame(b"") + frame(b"third frame")
    frames = []
    for i in range(len(stream)):
        frames += decoder.feed(stream[i:i + 1])
    assert frames == [b"first", b"", b"third frame"]
    assert decoder.buffered == 0


def test_many_frames_in_one_feed():
    decoder = FrameDecoder(1024)
    assert decoder.feed(b"".join(frame(bytes([i]) * i) for i in range(10))) == [bytes([i]) * i for i in range(10)]


def test_frame_larger_than_socket_request_max_bytes_is_refused_before_buffering():
    decoder = FrameDecoder(100)
    with pytest.raises(FrameTooLarge, match="socket.request.max.bytes=100"):
        decoder.feed(struct.pack(">i", 101))
    assert decoder.buffered == 4


def test_negative_frame_size_is_refused():
    with pytest.raises(FrameTooLarge):
        FrameDecoder(100).feed(struct.pack(">i", -5) + b"xx")


def test_peek_header_reads_key_version_and_correlation_id():
    assert peek_header(struct.pack(">hhi", 3, 12, 77) + b"rest") == (3, 12, 77)
    with pytest.raises(FrameError):
        peek_header(b"\x00\x03\x00")
