"""The hostile clients' wire helpers: Kafka requests framed with kafka-python's protocol classes, raw connections,
hand-built record batches (valid CRCs around lying contents) and compression bombs.

``hostile_soak`` and the attack modules of each hardening round (``hostile_records``, ``hostile_requests``,
``hostile_registry``, ``hostile_misc``) build their attacks from these, so the soak can import the attacks
without an import circle.
"""
from __future__ import annotations

import socket
import struct
import time
import zlib

# --- frames and connections ------------------------------------------------------------------------------

def _encode(request, correlation_id: int = 1, client_id: str = "hostile") -> bytes:
    request.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(request.encode(header=True, framed=True))


def _connect(port: int, timeout: float = 5.0) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=timeout)


def _send_and_drain(port: int, frames: list[bytes], *, read_s: float = 3.0, expect: int | None = None) -> int:
    """Send ``frames`` on a new connection and read what comes back until ``expect`` responses (default: one per
    frame) have arrived, the broker closes the connection, or ``read_s`` passes; returns the requests sent."""
    expect = len(frames) if expect is None else expect
    with _connect(port) as sock:
        try:
            for data in frames:
                sock.sendall(data)
            _read_answers(sock, expect, read_s)
        except OSError:  # the broker closed the connection: an expected answer to many attacks
            pass
    return len(frames)


def _read_answers(sock: socket.socket, expect: int, read_s: float) -> int:
    """Read response frames from ``sock`` until ``expect`` have arrived, the broker closes the connection, or
    ``read_s`` passes; how many arrived."""
    deadline = time.monotonic() + read_s
    sock.settimeout(0.5)
    received, start, answered = bytearray(), 0, 0   # start: where the next response frame begins
    while time.monotonic() < deadline and answered < expect:
        try:
            chunk = sock.recv(1 << 20)
        except socket.timeout:
            continue
        if not chunk:
            break
        received += chunk
        while len(received) - start >= 4:
            end = start + 4 + max(struct.unpack_from(">i", received, start)[0], 0)
            if end > len(received):
                break
            start, answered = end, answered + 1
    return answered


def _varint(value: int) -> bytes:
    value = (value << 1) ^ (value >> 63)  # zigzag
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _batch(records: bytes, *, count: int, codec: int = 0, last_offset_delta: int | None = None) -> bytes:
    """A RecordBatch v2 around already encoded (and maybe compressed) ``records``, with a valid CRC."""
    from crc32c import crc32c
    now = int(time.time() * 1000)
    delta = count - 1 if last_offset_delta is None else last_offset_delta
    body = struct.pack(">hiqqqhii", codec, delta, now, now, -1, -1, -1, count) + records
    crc = crc32c(body)
    return struct.pack(">qiibI", 0, len(body) + 9, 0, 2, crc) + body


def _record(key: bytes | None, value_len: int, offset_delta: int = 0) -> tuple[bytes, int]:
    """(the bytes of one record up to its value, total record bytes incl. the value and the headers count)."""
    key_part = _varint(-1) if key is None else _varint(len(key)) + key
    after_length = b"\x00" + _varint(0) + _varint(offset_delta) + key_part + _varint(value_len)
    body_len = len(after_length) + value_len + 1
    return _varint(body_len) + after_length, body_len


def _bomb(codec: int, size: int) -> bytes:
    """A batch of one keyed record whose value is ``size`` zero bytes, compressed without holding it."""
    head, _ = _record(b"k", size)
    chunk = bytes(1 << 20)
    if codec == 1:
        compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
        parts = [compressor.compress(head)]
        parts += [compressor.compress(chunk) for _ in range(size >> 20)]
        parts += [compressor.compress(b"\x00"), compressor.flush()]
    elif codec == 3:
        import lz4.frame
        compressor = lz4.frame.LZ4FrameCompressor()
        parts = [compressor.begin(), compressor.compress(head)]
        parts += [compressor.compress(chunk) for _ in range(size >> 20)]
        parts += [compressor.compress(b"\x00"), compressor.flush()]
    else:
        import zstandard
        compressor = zstandard.ZstdCompressor().compressobj()
        parts = [compressor.compress(head)]
        parts += [compressor.compress(chunk) for _ in range(size >> 20)]
        parts += [compressor.compress(b"\x00"), compressor.flush()]
    return _batch(b"".join(parts), count=1, codec=codec)


def _produce(topic: str, partition: int, records: bytes, acks: int = 1):
    from kafka.protocol.producer import ProduceRequest
    return ProduceRequest[9](transactional_id=None, acks=acks, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=partition, records=records)])])


def _fetch(topic: str, partition_count: int, *, replica_id: int = -1, max_bytes: int = 2**31 - 1):
    from kafka.protocol.consumer import FetchRequest
    partition = FetchRequest.FetchTopic.FetchPartition
    return FetchRequest[12](
        replica_id=replica_id, max_wait_ms=0, min_bytes=1, max_bytes=max_bytes, isolation_level=0,
        session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(topic=topic, partitions=[
            partition(partition=0, fetch_offset=0, partition_max_bytes=max_bytes, current_leader_epoch=-1,
                      last_fetched_epoch=-1, log_start_offset=-1) for _ in range(partition_count)])],
        forgotten_topics_data=[], rack_id="")


def _create_topics(names_and_counts):
    from kafka.protocol.admin import CreateTopicsRequest
    topic = CreateTopicsRequest.CreatableTopic
    return CreateTopicsRequest[5](topics=[
        topic(name=name, num_partitions=count, replication_factor=1, assignments=[], configs=[])
        for name, count in names_and_counts], timeout_ms=10000, validate_only=False)


def _ensure_topic(port: int, name: str, configs: dict[str, str]) -> None:
    """CreateTopics for ``name`` (TOPIC_ALREADY_EXISTS after the first time: nothing changes)."""
    from kafka.protocol.admin import CreateTopicsRequest
    topic = CreateTopicsRequest.CreatableTopic
    request = CreateTopicsRequest[5](topics=[topic(
        name=name, num_partitions=1, replication_factor=1, assignments=[],
        configs=[topic.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])],
        timeout_ms=10000, validate_only=False)
    _send_and_drain(port, [_encode(request)], read_s=1)
