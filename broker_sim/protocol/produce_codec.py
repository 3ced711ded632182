"""Produce (API 0) v3-v9 without kafka-python's schema objects: the request read with ``struct.unpack_from``,
the response written straight to bytes.

Theory of operation: a produce request is a header, a transactional id, acks, a timeout and, per topic and
partition, an index and a record set.  ``decode_request`` reads exactly that from the frame and hands the record
sets on as memoryview slices of it (no copy: the frame is the request's own buffer, never reused, and the log
copies what it stores).  It answers only the plain case: everything present and well formed, no null where the
schema allows none, no tagged fields, UTF-8 names, not a byte more or less than the frame.  Anything else —
truncated, negative or oversized lengths and counts, nulls, tagged fields, trailing bytes — returns None, and the
dispatcher decodes the frame with kafka-python as before, so a hostile or unusual request meets exactly the
errors and connection closes it met before this path existed (tests/protocol/test_produce_codec.py proves the
decode equal to kafka-python's for every version, flexible or not, and the fallback for each irregularity).

``ProduceAnswer`` is the handler's answer (``responses`` of ``TopicAnswer``/``PartitionAnswer``, the same field
names as kafka-python's ProduceResponse, and ``throttle_time_ms``); ``encode`` writes the framed response for a
version and correlation id, byte for byte what kafka-python's encoder writes.
"""
from __future__ import annotations

import struct
from typing import NamedTuple

MIN_VERSION = 3  # the first with a transactional id: older ones are refused before decoding
MAX_VERSION = 9
FLEXIBLE_VERSION = 9  # compact strings and arrays, tagged fields

_HEADER = struct.Struct(">hhih")  # api key, api version, correlation id, client id length
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_ACKS_TIMEOUT = struct.Struct(">hi")
_I32_I32 = struct.Struct(">ii")  # partition index, records length
_PARTITION_V3 = struct.Struct(">ihqq")  # index, error code, base offset, log append time
_PARTITION_V5 = struct.Struct(">ihqqq")  # + log start offset


class RequestHeader(NamedTuple):
    request_api_key: int
    request_api_version: int
    correlation_id: int
    client_id: str | None


class PartitionData(NamedTuple):
    index: int
    records: memoryview


class TopicData(NamedTuple):
    name: str
    partition_data: list


class ProduceRequest:
    """A decoded produce request: the attributes the Produce handler reads of kafka-python's ProduceRequest."""

    __slots__ = ("header", "transactional_id", "acks", "timeout_ms", "topic_data")

    def __init__(self, header: RequestHeader, transactional_id: str | None, acks: int, timeout_ms: int,
                 topic_data: list) -> None:
        self.header = header
        self.transactional_id = transactional_id
        self.acks = acks
        self.timeout_ms = timeout_ms
        self.topic_data = topic_data

    def __repr__(self) -> str:
        return (f"ProduceRequest(header={self.header}, transactional_id={self.transactional_id!r}, "
                f"acks={self.acks}, timeout_ms={self.timeout_ms}, topics={len(self.topic_data)})")


class _Irregular(ValueError):
    """The frame is not the plain case: kafka-python decodes it instead."""


def read_uvarint(data, pos: int, end: int) -> tuple[int, int]:
    """An unsigned varint at ``pos`` (at most 5 bytes, as Kafka's readUnsignedVarint): (value, next pos); a
    ValueError when it runs to ``end`` or past 5 bytes."""
    value = 0
    shift = 0
    while pos < end and shift <= 28:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
    raise _Irregular


def decode_request(frame, version: int) -> ProduceRequest | None:
    """The produce request in ``frame`` (the bytes after the size prefix), or None when it is not the plain case
    (the caller decodes it with kafka-python then)."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        return None
    try:
        return _decode(frame, version)
    except (_Irregular, struct.error, UnicodeDecodeError, IndexError):
        return None


def _decode(frame, version: int) -> ProduceRequest:
    end = len(frame)
    api_key, api_version, correlation_id, length = _HEADER.unpack_from(frame, 0)
    if api_key != 0 or api_version != version or length < 0:  # a null client id is left to kafka-python
        raise _Irregular
    pos = 10 + length
    if pos > end:
        raise _Irregular
    view = memoryview(frame)
    client_id = str(view[10:pos], "utf-8")
    if version >= FLEXIBLE_VERSION:
        return _decode_flexible(frame, view, pos, end, RequestHeader(api_key, version, correlation_id, client_id))
    header = RequestHeader(api_key, version, correlation_id, client_id)
    (length,) = _I16.unpack_from(frame, pos)
    pos += 2
    if length < 0:
        transactional_id = None
        if length != -1:
            raise _Irregular
    else:
        if pos + length > end:
            raise _Irregular
        transactional_id = str(view[pos:pos + length], "utf-8")
        pos += length
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(frame, pos)
    (topics,) = _I32.unpack_from(frame, pos + 6)
    pos += 10
    if topics < 0:
        raise _Irregular
    topic_data = []
    for _ in range(topics):
        (length,) = _I16.unpack_from(frame, pos)
        pos += 2
        if length < 0 or pos + length > end:
            raise _Irregular
        name = str(view[pos:pos + length], "utf-8")
        pos += length
        (partitions,) = _I32.unpack_from(frame, pos)
        pos += 4
        if partitions < 0:
            raise _Irregular
        partition_data = []
        for _ in range(partitions):
            index, length = _I32_I32.unpack_from(frame, pos)
            pos += 8
            if length < 0 or pos + length > end:
                raise _Irregular
            partition_data.append(PartitionData(index, view[pos:pos + length]))
            pos += length
        topic_data.append(TopicData(name, partition_data))
    if pos != end:
        raise _Irregular
    return ProduceRequest(header, transactional_id, acks, timeout_ms, topic_data)


def _no_tags(frame, pos: int, end: int) -> int:
    """Past an empty tagged-field section; a non-empty one is irregular (kafka-python keeps unknown tags)."""
    if pos >= end or frame[pos] != 0:
        raise _Irregular
    return pos + 1


def _decode_flexible(frame, view, pos: int, end: int, header: RequestHeader) -> ProduceRequest:
    pos = _no_tags(frame, pos, end)  # the request header's tagged fields
    length, pos = read_uvarint(frame, pos, end)
    if length == 0:
        transactional_id = None
    else:
        length -= 1
        if pos + length > end:
            raise _Irregular
        transactional_id = str(view[pos:pos + length], "utf-8")
        pos += length
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(frame, pos)
    topics, pos = read_uvarint(frame, pos + 6, end)
    if topics == 0:  # a null array
        raise _Irregular
    topic_data = []
    for _ in range(topics - 1):
        length, pos = read_uvarint(frame, pos, end)
        if length == 0:
            raise _Irregular
        length -= 1
        if pos + length > end:
            raise _Irregular
        name = str(view[pos:pos + length], "utf-8")
        pos += length
        partitions, pos = read_uvarint(frame, pos, end)
        if partitions == 0:
            raise _Irregular
        partition_data = []
        for _ in range(partitions - 1):
            (index,) = _I32.unpack_from(frame, pos)
            length, pos = read_uvarint(frame, pos + 4, end)
            if length == 0:  # null records
                raise _Irregular
            length -= 1
            if pos + length > end:
                raise _Irregular
            partition_data.append(PartitionData(index, view[pos:pos + length]))
            pos = _no_tags(frame, pos + length, end)
        topic_data.append(TopicData(name, partition_data))
        pos = _no_tags(frame, pos, end)
    pos = _no_tags(frame, pos, end)
    if pos != end:
        raise _Irregular
    return ProduceRequest(header, transactional_id, acks, timeout_ms, topic_data)


# --- the response ----------------------------------------------------------------------------------------------

class RecordErrorAnswer(NamedTuple):
    batch_index: int
    batch_index_error_message: str | None


class PartitionAnswer(NamedTuple):
    index: int
    error_code: int
    base_offset: int
    log_append_time_ms: int
    log_start_offset: int
    error_message: str | None
    record_errors: list


class TopicAnswer(NamedTuple):
    name: str
    partition_responses: list


class ProduceAnswer:
    """The Produce handler's answer; ``encode`` writes it (the dispatcher may raise ``throttle_time_ms``)."""

    __slots__ = ("responses", "throttle_time_ms")

    def __init__(self, responses: list, throttle_time_ms: int = 0) -> None:
        self.responses = responses
        self.throttle_time_ms = throttle_time_ms

    def encode(self, version: int, correlation_id: int) -> bytes:
        """The framed response (size, response header, body) for request ``version`` / ``correlation_id``."""
        if not MIN_VERSION <= version <= MAX_VERSION:
            raise ValueError(f"ProduceResponse v{version} is not encoded here (v{MIN_VERSION}-v{MAX_VERSION})")
        if version >= FLEXIBLE_VERSION:
            return _encode_flexible(self, correlation_id)
        out = bytearray(8)
        _I32.pack_into(out, 4, correlation_id)
        out += _I32.pack(len(self.responses))
        partition_struct = _PARTITION_V5 if version >= 5 else _PARTITION_V3
        for topic in self.responses:
            name = topic.name.encode()
            out += _I16.pack(len(name))
            out += name
            out += _I32.pack(len(topic.partition_responses))
            for p in topic.partition_responses:
                if version >= 5:
                    out += partition_struct.pack(p.index, p.error_code, p.base_offset, p.log_append_time_ms,
                                                 p.log_start_offset)
                else:
                    out += partition_struct.pack(p.index, p.error_code, p.base_offset, p.log_append_time_ms)
                if version >= 8:
                    out += _I32.pack(len(p.record_errors))
                    for error in p.record_errors:
                        out += _I32.pack(error.batch_index)
                        _string(out, error.batch_index_error_message)
                    _string(out, p.error_message)
        out += _I32.pack(self.throttle_time_ms)
        _I32.pack_into(out, 0, len(out) - 4)
        return bytes(out)


def _string(out: bytearray, text: str | None) -> None:
    if text is None:
        out += b"\xff\xff"
    else:
        raw = text.encode()
        out += _I16.pack(len(raw))
        out += raw


def _put_uvarint(out: bytearray, value: int) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _compact_string(out: bytearray, text: str | None) -> None:
    if text is None:
        out.append(0)
    else:
        raw = text.encode()
        _put_uvarint(out, len(raw) + 1)
        out += raw


def _encode_flexible(answer: ProduceAnswer, correlation_id: int) -> bytes:
    out = bytearray(8)
    _I32.pack_into(out, 4, correlation_id)
    out.append(0)  # response header v1: no tagged fields
    _put_uvarint(out, len(answer.responses) + 1)
    for topic in answer.responses:
        _compact_string(out, topic.name)
        _put_uvarint(out, len(topic.partition_responses) + 1)
        for p in topic.partition_responses:
            out += _PARTITION_V5.pack(p.index, p.error_code, p.base_offset, p.log_append_time_ms, p.log_start_offset)
            _put_uvarint(out, len(p.record_errors) + 1)
            for error in p.record_errors:
                out += _I32.pack(error.batch_index)
                _compact_string(out, error.batch_index_error_message)
                out.append(0)
            _compact_string(out, p.error_message)
            out.append(0)
        out.append(0)
    out += _I32.pack(answer.throttle_time_ms)
    out.append(0)
    _I32.pack_into(out, 0, len(out) - 4)
    return bytes(out)
