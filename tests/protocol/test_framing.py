"""Request framing without sockets."""
import struct

import pytest

from broker_sim.protocol.framing import FrameDecoder, FrameError, FrameTooLarge, MemoryPool, frame, peek_header


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


def _receive(decoder, data: bytes, chunk: int) -> list:
    """Deliver ``data`` as a socket would: into get_buffer's memory, at most ``chunk`` bytes per read."""
    frames, view = [], memoryview(data)
    while view:
        buf = decoder.get_buffer(-1)
        n = min(len(buf), len(view), chunk)
        buf[:n] = view[:n]
        view = view[n:]
        frames += decoder.buffer_updated(n)
    return frames


def test_a_header_declaring_100_mb_holds_only_a_few_kb():
    decoder = FrameDecoder(200 << 20)
    assert decoder.feed(struct.pack(">i", 100 << 20) + b"x" * 10) == []
    assert decoder.capacity < 128 * 1024


def test_a_half_sent_frame_holds_at_most_twice_its_bytes():
    decoder = FrameDecoder(200 << 20)
    sent = 5 << 20
    assert _receive(decoder, struct.pack(">i", 50 << 20) + bytes(sent), 64 * 1024) == []
    assert decoder.buffered == sent
    assert decoder.capacity <= 2 * sent + FrameDecoder.SCRATCH_MAX


def test_a_large_frame_arrives_whole_in_order_with_the_frames_around_it():
    body = bytes(range(256)) * 4096  # 1 MB
    stream = frame(b"before") + frame(body) + frame(b"after")
    decoder = FrameDecoder(2 << 20)
    assert _receive(decoder, stream, 65536) == [b"before", body, b"after"]
    assert decoder.buffered == 0


def test_scratch_grows_for_a_burst_and_shrinks_back():
    decoder = FrameDecoder(1 << 20)
    burst = b"".join(frame(b"r" * 100) for _ in range(2000))
    assert len(_receive(decoder, burst, 1 << 20)) == 2000
    assert decoder.capacity == FrameDecoder.SCRATCH_MAX
    decoder.shrink()
    assert decoder.capacity == FrameDecoder.SCRATCH_MIN


def test_each_frame_reserves_its_size_from_the_pool():
    pool = MemoryPool(1000)
    decoder = FrameDecoder(1000, pool)
    frames = decoder.feed(frame(b"a" * 100) + frame(b"b" * 200) + struct.pack(">i", 300) + b"c" * 10)
    assert frames == [b"a" * 100, b"b" * 200]
    assert pool.used == 600  # the third frame's size is reserved as its header arrives
    decoder.close()  # the connection went away mid-frame
    assert pool.used == 300


def test_a_frame_that_does_not_fit_blocks_until_memory_is_released():
    pool = MemoryPool(250)
    decoder = FrameDecoder(1000, pool)
    # non-strict, as Kafka: the 50 bytes left admit the whole 100-byte frame
    assert decoder.feed(frame(b"a" * 200) + frame(b"b" * 100)) == [b"a" * 200, b"b" * 100]
    assert decoder.feed(frame(b"c" * 10)) == []
    assert decoder.blocked and pool.used == 300
    woken = []
    pool.wait(lambda: woken.append(decoder.resume()))
    pool.release(200)
    assert woken == [[b"c" * 10]]
    assert pool.used == 110


def test_a_frame_larger_than_the_whole_pool_is_served_when_the_pool_is_empty():
    pool = MemoryPool(100)
    decoder = FrameDecoder(1000, pool)
    assert decoder.feed(frame(b"x" * 500)) == [b"x" * 500]
    assert pool.used == 500
    assert decoder.feed(frame(b"y")) == [] and decoder.blocked
    pool.release(500)
    assert decoder.resume() == [b"y"]


def test_waiters_are_woken_oldest_first_while_memory_lasts():
    pool = MemoryPool(100)
    assert pool.try_reserve(150)
    order = []
    for name in "abc":
        pool.wait(lambda name=name: (order.append(name), pool.try_reserve(60)))
    pool.release(150)
    assert order == ["a", "b"]  # after b the pool is full again; c waits for the next release
    pool.release(60)
    assert order == ["a", "b", "c"]


def test_frames_parsed_before_a_bad_size_give_their_memory_back():
    pool = MemoryPool(1000)
    decoder = FrameDecoder(100, pool)
    with pytest.raises(FrameTooLarge):
        decoder.feed(frame(b"ok") + struct.pack(">i", 101))
    assert pool.used == 0


def test_an_unbounded_pool_still_counts_usage():
    pool = MemoryPool(-1)
    assert pool.try_reserve(10 << 30) and pool.used == 10 << 30


def test_a_large_frame_reserves_what_arrived_not_what_its_header_declares():
    pool = MemoryPool(1 << 20)
    decoder = FrameDecoder(100 << 20, pool)
    decoder.feed(struct.pack(">i", 50 << 20) + b"x" * 10)
    assert pool.used == decoder.reserved == FrameDecoder.BODY_MIN  # not 50 MB
    other = FrameDecoder(100 << 20, pool)  # a second connection's small frame still fits
    assert other.feed(struct.pack(">i", 3) + b"abc") == [b"abc"] and not other.blocked
    decoder.close()
    assert pool.used == 3


def test_partly_received_frames_never_all_wait_for_each_other():
    pool = MemoryPool(200 * 1024)
    decoders = [FrameDecoder(1 << 20, pool) for _ in range(3)]
    body = b"y" * (512 * 1024)
    sent = 150 * 1024
    for decoder in decoders:
        assert decoder.feed(struct.pack(">i", len(body)) + body[:sent]) == []
    assert pool.available <= 0 and any(d.blocked for d in decoders)
    assert not all(d.blocked for d in decoders)  # one frame at a time may grow past the pool
    received: dict[int, list] = {i: [] for i in range(3)}

    def take(i, frames):
        received[i] += frames
        if decoders[i].blocked:
            pool.wait(lambda: take(i, decoders[i].resume()), growing=True)

    for i, decoder in enumerate(decoders):  # the rest of every frame arrives (kept aside while blocked)
        if decoder.blocked:
            pool.wait(lambda i=i: take(i, decoders[i].resume()), growing=True)
            decoder.feed(body[sent:])
        else:
            take(i, decoder.feed(body[sent:]))
    answered = set()
    for _ in range(10):  # answer what is complete; its release lets the next frame grow
        for i in range(3):
            if received[i] == [body] and i not in answered:
                answered.add(i)
                pool.release(len(body))
    assert answered == {0, 1, 2} and pool.used == 0


def test_the_growing_priority_goes_to_a_growing_waiter_once_free():
    pool = MemoryPool(10)
    a, b = object(), object()
    assert pool.try_reserve(10)          # the pool is full
    assert pool.try_grow(50, a)          # out of memory: a takes the priority
    assert not pool.try_grow(5, b)       # only one frame at a time
    order = []
    pool.wait(lambda: order.append("small"), growing=False)
    pool.wait(lambda: order.append("b") or pool.try_grow(5, b), growing=True)
    pool.done_growing(a)
    assert order == ["b"] and pool.used == 65  # b took the free priority; the small frame still waits
