"""A corpus of raw RecordBatch v2 bytes, malformed and unusual, built field by field.

Theory of operation
-------------------
Every case is a function ``(now_ms) -> bytes``: the records field of one partition of a ProduceRequest, built
here byte by byte so that a field can be written in any form the wire allows (a varint of six bytes, a length
of 2**31 - 1, a record attributes byte of 0xff), with a valid CRC unless the case is about the CRC.
``CASES`` lists them with what a case needs besides its bytes: the Produce version and acks, and the topic
configs of its fresh topic. tests/conformance/test_record_batches.py produces each to Apache Kafka and to
broker_sim and compares the answers, and for an accepted case what each stored and what a reader sees.

What a reader sees in the stored batches is Kafka's own reader's answer (tests/conformance/java/RecordOracle.java
through ``record_fuzz.KafkaOracle``), not a Python copy of its rules: the one Python definition of a record is
``broker_sim.protocol.records``, which tests/conformance/test_record_parsers.py holds to that same reader. The
rules, for writing cases: a varint is at most 5 bytes (the fifth shifted into bit 28 of a Java int, its bits
past the 32nd dropped; a fifth byte with its continuation bit is "Varint is too long"), a varlong at most 10,
both zig-zag; a record is ``length`` then, inside that many bytes, ``attributes`` (ONE byte, never a varint),
``timestampDelta`` (varlong), ``offsetDelta``, ``keyLength`` (any negative: null), key, ``valueLength``
(negative: null), value, ``headerCount`` (negative: invalid) and per header a key length (negative: invalid),
key, value length (negative: null), value; a batch holds exactly ``recordsCount`` records.
"""
from __future__ import annotations

import gzip
import struct
from dataclasses import dataclass, field
from typing import Callable

from crc32c import crc32c

# The batch header, as broker_sim.storage.batch.HEADER spells it field by field.
HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
# the header bytes a broker rewrites on append, outside the CRC: baseOffset, partitionLeaderEpoch
REWRITTEN = ((0, 8), (12, 16))
GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4
TIMESTAMP_TYPE, TRANSACTIONAL, CONTROL = 0x08, 0x10, 0x20
HOUR_MS = 3_600_000


# --- writing ---------------------------------------------------------------------------------------------------

def uvarint(raw: int) -> bytes:
    """``raw`` (>= 0) as base-128 groups, low first: as many bytes as it takes, no bound."""
    out = bytearray()
    while raw >= 0x80:
        out.append(raw & 0x7F | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def varint(value: int) -> bytes:
    """A zig-zag varint of a 32-bit value (ByteUtils.writeVarint)."""
    return uvarint(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def varlong(value: int) -> bytes:
    """A zig-zag varlong of a 64-bit value (ByteUtils.writeVarlong)."""
    return uvarint(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def padded(encoded: bytes, width: int) -> bytes:
    """The same varint written in ``width`` bytes: continuation bits on zero groups (a legal, redundant form
    up to 5 or 10 bytes; past them, too long)."""
    body = bytearray(encoded)
    body[-1] |= 0x80
    body += b"\x80" * (width - len(body) - 1) + b"\x00"
    return bytes(body)


def record(offset_delta: int = 0, key: bytes | None = b"k", value: bytes | None = b"v", headers=(), *,
           attributes: int = 0, timestamp_delta: int = 0, raw: dict[str, bytes] | None = None) -> bytes:
    """One record v2. ``raw`` replaces fields' encodings by the bytes given (by name: ``length``,
    ``attributes``, ``timestamp_delta``, ``offset_delta``, ``key_length``, ``value_length``, ``header_count``);
    the key, value and headers themselves are written as given. ``headers``: (key, value) pairs, either may be
    None."""
    def field_(name: str, encoded: bytes) -> bytes:
        return (raw or {}).get(name, encoded)

    body = field_("attributes", bytes([attributes]))
    body += field_("timestamp_delta", varlong(timestamp_delta)) + field_("offset_delta", varint(offset_delta))
    body += field_("key_length", varint(-1 if key is None else len(key))) + (key or b"")
    body += field_("value_length", varint(-1 if value is None else len(value))) + (value or b"")
    body += field_("header_count", varint(len(headers)))
    for header_key, header_value in headers:
        body += varint(-1 if header_key is None else len(header_key)) + (header_key or b"")
        body += varint(-1 if header_value is None else len(header_value)) + (header_value or b"")
    return field_("length", varint(len(body))) + body


def records(count: int, **fields) -> bytes:
    """``count`` records with offset deltas 0, 1, 2, ... (``fields`` as for :func:`record`)."""
    return b"".join(record(i, **fields) for i in range(count))


def compress(data: bytes, codec: int) -> bytes:
    """``data`` in Kafka's framing for ``codec``: gzip, xerial snappy (Java's), an lz4 frame, zstd."""
    if codec == GZIP:
        return gzip.compress(data, mtime=0)
    if codec == SNAPPY:
        import cramjam
        block = bytes(cramjam.snappy.compress_raw(data))
        return b"\x82SNAPPY\x00" + struct.pack(">iii", 1, 1, len(block)) + block
    if codec == LZ4:
        import lz4.frame
        return lz4.frame.compress(data)
    if codec == ZSTD:
        import zstandard
        return zstandard.ZstdCompressor().compress(data)
    return data


def batch(body: bytes, count: int, now_ms: int, *, codec: int = 0, attributes: int | None = None,
          payload: bytes | None = None, last_offset_delta: int | None = None, base_timestamp: int | None = None,
          max_timestamp: int | None = None, producer_id: int = -1, producer_epoch: int = -1,
          base_sequence: int = -1, magic: int = 2, crc: int | None = None, length_delta: int = 0) -> bytes:
    """A batch claiming ``count`` records around ``body`` (the records, compressed with ``codec`` unless a
    ``payload`` is given in their place), timestamped ``now_ms``; every header field can be set to lie.
    ``length_delta`` is added to the batchLength field; ``crc`` replaces the computed CRC32C."""
    data = payload if payload is not None else compress(body, codec)
    base = now_ms if base_timestamp is None else base_timestamp
    header = HEADER.pack(0, HEADER_SIZE - 12 + len(data) + length_delta, -1, magic, 0,
                         codec if attributes is None else attributes,
                         count - 1 if last_offset_delta is None else last_offset_delta,
                         base, base if max_timestamp is None else max_timestamp,
                         producer_id, producer_epoch, base_sequence, count)
    out = bytearray(header + data)
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])) if crc is None else crc)
    return bytes(out)


def masked(stored: bytes) -> bytes:
    """A stored batch with the header fields a broker rewrites (and the CRC does not cover) zeroed."""
    out = bytearray(stored)
    for start, end in REWRITTEN:
        out[start:end] = bytes(end - start)
    return bytes(out)


# --- reading -------------------------------------------------------------------------------------------------

def split_batches(data: bytes) -> list[bytes]:
    """The whole batches of a Fetch response's records (a partial one at the end is dropped, as clients do)."""
    out, position = [], 0
    while position + 12 <= len(data):
        (length,) = struct.unpack_from(">i", data, position + 8)
        if position + 12 + length > len(data):
            break
        out.append(data[position:position + 12 + length])
        position += 12 + length
    return out


# --- the cases -------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Case:
    """One corpus case: ``build(now_ms)`` -> the partition's records field; how to produce it."""
    name: str
    build: Callable[[int], bytes]
    version: int = 9
    acks: int = 1
    configs: dict = field(default_factory=dict)
    partition: int = 0

    def __str__(self) -> str:
        return self.name


def _plain(now: int) -> bytes:
    return batch(records(3, headers=[(b"h", b"1")]), 3, now)


def _one(now: int, codec: int = 0, **fields) -> bytes:
    return batch(record(**fields), 1, now, codec=codec)


def _record_attributes(value: int, codec: int = 0):
    return lambda now: batch(records(2, attributes=value), 2, now, codec=codec)


def _overlong(name: str, width: int):
    """A record whose field ``name`` (its plain value: 0, or the length) is written in ``width`` bytes."""
    def build(now: int) -> bytes:
        if name == "length":
            body = record()[1:]
            return batch(padded(varint(len(body)), width) + body, 1, now)
        plain = {"key_length": varint(1), "header_count": varint(0)}.get(name, varint(0))
        return batch(record(raw={name: padded(plain, width)}), 1, now)
    return build


def _high_bits_in_fifth_byte(now: int) -> bytes:
    # offsetDelta 0 in 5 bytes whose fifth holds bit 32: Kafka's Java int drops it and reads 0
    return batch(record(raw={"offset_delta": b"\x80\x80\x80\x80\x10"}), 1, now)


def _high_bits_in_tenth_byte(now: int) -> bytes:
    # timestampDelta 0 in 10 bytes whose tenth holds bits past 64: Kafka keeps only the tenth byte's lowest bit
    return batch(record(raw={"timestamp_delta": b"\x80" * 9 + b"\x7e"}), 1, now)


def _key_length(encoded: bytes):
    return lambda now: batch(record(raw={"key_length": encoded}), 1, now)


def _two_records(now: int, first: bytes, count: int = 2, **fields) -> bytes:
    return batch(first + record(1), count, now, **fields)


def _trailing(codec: int):
    return lambda now: batch(records(1) + b"\x00\x00\x00", 1, now, codec=codec)


def _offset_deltas(codec: int):
    return lambda now: batch(record(0) + record(5), 2, now, codec=codec)


def _magic(value: int):
    return lambda now: batch(records(1), 1, now, magic=value)


def _batch_attributes(value: int):
    return lambda now: batch(records(1), 1, now, attributes=value)


def _garbage(codec: int, payload: bytes):
    return lambda now: batch(records(1), 1, now, codec=codec, payload=payload)


def _large(size: int):
    return lambda now: batch(record(value=bytes(size)), 1, now)


def _with_base_offset(data: bytes, base_offset: int) -> bytes:
    return struct.pack(">q", base_offset) + data[8:]  # outside the CRC


def _timestamps(*deltas: int, base: int = 0):
    return lambda now: batch(b"".join(record(i, timestamp_delta=d) for i, d in enumerate(deltas)), len(deltas),
                             now + base)


CASES = [
    Case("plain: three records with a header", _plain),
    Case("record attributes 0x80", _record_attributes(0x80)),
    Case("record attributes 0xff", _record_attributes(0xFF)),
    Case("record attributes 0xff, zstd", _record_attributes(0xFF, ZSTD)),
    Case("record attributes 0x81, gzip", _record_attributes(0x81, GZIP)),
    Case("record length varint of 5 bytes (redundant)", _overlong("length", 5)),
    Case("record length varint of 6 bytes", _overlong("length", 6)),
    Case("record length varint of 6 bytes, gzip", lambda now: batch(_overlong("length", 6)(now)[HEADER_SIZE:], 1, now,
                                                                     codec=GZIP)),
    Case("record length -3", lambda now: batch(record(raw={"length": varint(-3)}), 1, now)),
    Case("record length -3, gzip", lambda now: batch(record(raw={"length": varint(-3)}), 1, now, codec=GZIP)),
    Case("offset delta varint of 6 bytes", _overlong("offset_delta", 6)),
    Case("key length varint of 6 bytes", _overlong("key_length", 6)),
    Case("header count varint of 6 bytes", _overlong("header_count", 6)),
    Case("timestamp delta varlong of 10 bytes (redundant)", _overlong("timestamp_delta", 10)),
    Case("timestamp delta varlong of 11 bytes", _overlong("timestamp_delta", 11)),
    Case("offset delta varint with bits past 32 in its fifth byte", _high_bits_in_fifth_byte),
    Case("timestamp delta varlong with bits past 64 in its tenth byte", _high_bits_in_tenth_byte),
    Case("key length 2**63-1 as a varlong", _key_length(varlong(2**63 - 1))),
    Case("key length 2**31-1", _key_length(varint(2**31 - 1))),
    Case("key length -2 (null)", lambda now: batch(record(key=None, raw={"key_length": varint(-2)}), 1, now)),
    Case("value length -7 (null)", lambda now: batch(record(value=None, raw={"value_length": varint(-7)}), 1, now)),
    Case("key length overruns its record, not the batch",
         lambda now: _two_records(now, record(0, raw={"key_length": varint(3)}))),
    Case("value length overruns the batch", lambda now: _one(now, raw={"value_length": varint(200)})),
    Case("record length overruns the batch", lambda now: batch(record(raw={"length": varint(40)}), 1, now)),
    Case("record length short of its fields", lambda now: _two_records(now, record(0, raw={"length": varint(4)}))),
    Case("trailing bytes after the last record", _trailing(0)),
    Case("trailing bytes after the last record, gzip", _trailing(GZIP)),
    Case("recordsCount more than the records", lambda now: batch(records(1), 3, now)),
    Case("recordsCount fewer than the records", lambda now: batch(records(2), 1, now)),
    Case("recordsCount more than the records, lz4", lambda now: batch(records(1), 3, now, codec=LZ4)),
    Case("recordsCount more than the records, gzip", lambda now: batch(records(1), 3, now, codec=GZIP)),
    Case("lastOffsetDelta past recordsCount", lambda now: batch(records(2), 2, now, last_offset_delta=5)),
    Case("zero records, lastOffsetDelta -1", lambda now: batch(b"", 0, now)),
    Case("offset deltas 0, 5", _offset_deltas(0)),
    Case("offset deltas 0, 5, gzip", _offset_deltas(GZIP)),
    Case("offset deltas 0, 5, zstd", _offset_deltas(ZSTD)),
    Case("bad CRC", lambda now: batch(records(1), 1, now, crc=0x12345678)),
    Case("batchLength smaller than the header", lambda now: batch(records(1), 1, now, length_delta=-30)),
    Case("batchLength runs past the end", lambda now: batch(records(1), 1, now, length_delta=20)),
    Case("stray bytes after the batch", lambda now: batch(records(1), 1, now) + b"\x00\x01\x02"),
    Case("magic 0", _magic(0)),
    Case("magic 1", _magic(1)),
    Case("magic 3", _magic(3)),
    Case("unused batch attribute bits 7-14", _batch_attributes(0x7F80)),
    Case("batch attribute bit 6 (delete horizon)", _batch_attributes(0x40)),
    Case("codec 5", _batch_attributes(5)),
    Case("codec 6", _batch_attributes(6)),
    Case("codec 7", _batch_attributes(7)),
    Case("garbage gzip", _garbage(GZIP, b"\x1f\x8b" + b"not gzip at all" * 4)),
    Case("garbage snappy (xerial)", _garbage(SNAPPY, b"\x82SNAPPY\x00" + struct.pack(">iii", 1, 1, 9) + b"\xff" * 9)),
    Case("garbage snappy (raw block)", _garbage(SNAPPY, b"\x05\xff\xff\xff\xff\xff\xff")),
    Case("garbage lz4", _garbage(LZ4, b"\x04\x22\x4d\x18" + b"not lz4 at all" * 4)),
    Case("garbage zstd", _garbage(ZSTD, b"\x28\xb5\x2f\xfd" + b"not zstd at all" * 4)),
    Case("zstd on Produce v3", lambda now: _one(now, ZSTD), version=3),
    Case("zstd on Produce v6", lambda now: _one(now, ZSTD), version=6),
    Case("zstd on Produce v7", lambda now: _one(now, ZSTD), version=7),
    Case("a batch larger than segment.bytes", _large(1_100_000),
         configs={"segment.bytes": "1048576", "max.message.bytes": "2000000"}),
    Case("a batch larger than max.message.bytes", _large(2000), configs={"max.message.bytes": "1000"}),
    Case("empty records field", lambda now: b""),
    Case("two batches in one partition", lambda now: batch(records(1), 1, now) + batch(records(1), 1, now)),
    Case("control batch from a client", lambda now: batch(
        record(key=b"\x00\x00\x00\x00", value=b"\x00\x00\x00\x00\x00\x00"), 1, now, attributes=CONTROL | TRANSACTIONAL,
        producer_id=7, producer_epoch=0, base_sequence=0)),
    Case("control batch, not transactional", lambda now: batch(
        record(key=b"\x00\x00\x00\x00", value=b"\x00\x00\x00\x00\x00\x00"), 1, now, attributes=CONTROL)),
    Case("transactional flag with producer id -1", _batch_attributes(TRANSACTIONAL)),
    Case("baseOffset 5 from a client", lambda now: _with_base_offset(batch(records(1), 1, now), 5)),
    Case("producer id set, sequence -1", lambda now: batch(records(1), 1, now, producer_id=4242, producer_epoch=0)),
    Case("producer id -1 with an epoch and a sequence",
         lambda now: batch(records(1), 1, now, producer_epoch=3, base_sequence=9)),
    Case("header count -1", lambda now: _one(now, raw={"header_count": varint(-1)})),
    Case("header count -3", lambda now: _one(now, raw={"header_count": varint(-3)})),
    Case("header count larger than the record", lambda now: _one(now, raw={"header_count": varint(1000)})),
    Case("null header key", lambda now: _one(now, headers=[(None, b"v")])),
    Case("null header value", lambda now: _one(now, headers=[(b"a", None)])),
    Case("header key not UTF-8", lambda now: _one(now, headers=[(b"\xff\xfe", b"v")])),
    Case("key and value not UTF-8", lambda now: _one(now, key=b"\xc3\x28", value=b"\xff")),
    Case("timestamp type LogAppendTime set by the client", _batch_attributes(TIMESTAMP_TYPE)),
    Case("timestamp two hours ahead (KIP-937)", _timestamps(0, 2 * HOUR_MS)),
    Case("LogAppendTime set by the client on a LogAppendTime topic", _batch_attributes(TIMESTAMP_TYPE),
         configs={"message.timestamp.type": "LogAppendTime"}),
    Case("LogAppendTime set by the client, maxTimestamp -1",
         lambda now: batch(records(1), 1, now, attributes=TIMESTAMP_TYPE, max_timestamp=-1)),
    Case("timestamp of 1970 (KIP-937: no lower bound by default)", lambda now: batch(records(1), 1, 0)),
    Case("timestamps -1 (none)", lambda now: batch(records(2), 2, -1)),
    Case("header maxTimestamp below the records'", lambda now: batch(
        record(0) + record(1, timestamp_delta=500), 2, now, max_timestamp=now)),
    Case("header maxTimestamp above the records'", lambda now: batch(records(2), 2, now, max_timestamp=now + 900)),
    Case("acks 0", _plain, acks=0),
    Case("acks -1", _plain, acks=-1),
    Case("acks 2 (invalid)", _plain, acks=2),
    Case("acks -2 (invalid)", _plain, acks=-2),
    Case("an out-of-range partition", _plain, partition=7),
    Case("Produce v3, plain", _plain, version=3),
]
