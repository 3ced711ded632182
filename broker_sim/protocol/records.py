"""The one definition of a Kafka record (RecordBatch v2): Kafka 4.1's ``DefaultRecord.readFrom`` and the
``DefaultRecordBatch`` iterator, rule for rule, for everything in pylog that reads records.

Theory of operation: a record's bytes mean one thing to every reader, or a broker can accept what its consumers
read differently (a record whose attributes byte is 0x80 or more, read as a varint, shifts every later field).
So the broker's validator (``broker_sim.storage.validator``), its compiled walk (``broker_sim/storage/_records.c``)
and the connector's source (``connector.source.arrow_records`` and its compiled decoder
``connector/source/_records_arrow.c``) all read records by these rules, and a differential test
(tests/conformance/test_record_parsers.py) holds them to Kafka's own parser:

1. a varint is at most 5 bytes, the fifth shifted into bit 28 of a 32-bit int (its bits past the 32nd are
   dropped, as Java's shift drops them); a varlong at most 10, the tenth into bit 63; both zig-zag; a longer
   one is ByteUtils' IllegalArgumentException ("Varint is too long");
2. a record is its length (varint), then exactly that many bytes: attributes (ONE byte, any value, never read
   further), timestampDelta (varlong), offsetDelta (varint), key length (any negative: null) and key, value
   length (negative: null) and value, header count (negative, or more than the bytes left: invalid), and per
   header a key length (negative: invalid), the key's bytes (never decoded here), a value length (negative:
   null) and value;
3. a batch holds exactly recordsCount records and nothing after them;
4. a record's timestamp is baseTimestamp + timestampDelta and its offset baseOffset + offsetDelta in Java longs
   (:func:`java_long`: they wrap), and a header key is text as Java's ``new String(bytes, UTF_8)`` makes it
   (:func:`java_utf8`: malformed bytes replaced as Java replaces them, not as Python's "replace" does).

Errors are Kafka's (kafka-python's error classes): INVALID_RECORD (InvalidRecordError) for a record that does
not parse, UNKNOWN_SERVER_ERROR (UnknownError) where Kafka throws no ApiException (a record length that is not a
varint of at most 5 bytes; a negative one in a compressed batch). Nothing here does I/O or imports pylog.
"""
from __future__ import annotations

import kafka.errors as Errors


# What a walk is asked to list besides its summary: the keys, the values, the timestamp deltas, the headers,
# the offset deltas.
WANT_KEYS, WANT_VALUES, WANT_TIMESTAMPS, WANT_HEADERS, WANT_OFFSETS = 1, 2, 4, 8, 16


class RecordUnderflow(Exception):
    """Kafka's BufferUnderflowException: a read past the end of the records."""


class VarintTooLong(Exception):
    """ByteUtils' IllegalArgumentException: a varint of more than 5 bytes, a varlong of more than 10."""


def _read_unsigned(buf, pos: int, end: int, width: int) -> tuple[int, int]:
    """ByteUtils.readUnsignedVarint/Varlong: at most ``width`` bytes (5, 10), the last one's bits past 32/64
    dropped, as Java's shift drops them."""
    raw = 0
    for shift in range(0, 7 * width, 7):
        if pos >= end:
            raise RecordUnderflow
        byte = buf[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if byte < 0x80:
            return raw & ((1 << (width * 32 // 5)) - 1), pos
    raise VarintTooLong


def java_long(value: int) -> int:
    """``value`` wrapped to 64 bits, as Java's long arithmetic wraps it: a record's timestamp is baseTimestamp +
    timestampDelta, and its offset baseOffset + offsetDelta, in Java longs."""
    return (value + (1 << 63)) % (1 << 64) - (1 << 63)


def java_utf8(data) -> str:
    """``data`` decoded as Java's ``new String(bytes, UTF_8)`` decodes it (JDK 17's String.decodeUTF8_UTF16):
    Kafka's header keys. Valid UTF-8 decodes as in Python; each malformed sequence becomes U+FFFD, but Java
    takes more bytes into one replacement than Python in places (an encoded surrogate, ED A0 80, is one; a
    sequence cut short by the end of the input is one)."""
    data = bytes(data)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    out, sp, sl = [], 0, len(data)

    def tail(b: int) -> bool:  # isNotContinuation
        return b & 0xC0 != 0x80

    while sp < sl:
        b1 = data[sp]
        sp += 1
        if b1 < 0x80:
            out.append(chr(b1))
        elif b1 >> 5 == 0b110 and b1 & 0x1E:
            if sp < sl:
                b2 = data[sp]
                if tail(b2):
                    out.append(_REPLACEMENT)
                else:
                    out.append(chr((b1 & 0x1F) << 6 | b2 & 0x3F))
                    sp += 1
                continue
            out.append(_REPLACEMENT)
            break
        elif b1 >> 4 == 0b1110:
            if sp + 1 < sl:
                b2, b3 = data[sp], data[sp + 1]
                if (b1 == 0xE0 and b2 & 0xE0 == 0x80) or tail(b2) or tail(b3):
                    out.append(_REPLACEMENT)
                    sp += 0 if (b1 == 0xE0 and b2 & 0xE0 == 0x80) or tail(b2) else 1  # malformed3: 1 or 2 bytes
                else:
                    sp += 2
                    c = (b1 & 0x0F) << 12 | (b2 & 0x3F) << 6 | b3 & 0x3F
                    out.append(_REPLACEMENT if 0xD800 <= c <= 0xDFFF else chr(c))
                continue
            if sp < sl and ((b1 == 0xE0 and data[sp] & 0xE0 == 0x80) or tail(data[sp])):
                out.append(_REPLACEMENT)
                continue
            out.append(_REPLACEMENT)
            break
        elif b1 >> 3 == 0b11110:
            if sp + 2 < sl:
                b2, b3, b4 = data[sp], data[sp + 1], data[sp + 2]
                uc = (b1 & 0x07) << 18 | (b2 & 0x3F) << 12 | (b3 & 0x3F) << 6 | b4 & 0x3F
                if tail(b2) or tail(b3) or tail(b4) or not 0x10000 <= uc <= 0x10FFFF:
                    out.append(_REPLACEMENT)
                    if not (b1 > 0xF4 or (b1 == 0xF0 and not 0x90 <= b2 <= 0xBF)
                            or (b1 == 0xF4 and b2 & 0xF0 != 0x80) or tail(b2)):  # malformed4: 1, 2 or 3 bytes
                        sp += 1 if tail(b3) else 2
                else:
                    out.append(chr(uc))
                    sp += 3
                continue
            if b1 > 0xF4 or (sp < sl and ((b1 == 0xF0 and not 0x90 <= data[sp] <= 0xBF)
                                         or (b1 == 0xF4 and data[sp] & 0xF0 != 0x80) or tail(data[sp]))):
                out.append(_REPLACEMENT)
                continue
            sp += 1
            out.append(_REPLACEMENT)
            if sp < sl and tail(data[sp]):
                continue
            break
        else:
            out.append(_REPLACEMENT)
    return "".join(out)


_REPLACEMENT = "\ufffd"


def read_varint(buf, pos: int, end: int) -> tuple[int, int]:
    """A zig-zag varint (32-bit) at ``buf[pos]``, as Kafka reads it, and the position after it."""
    raw, pos = _read_unsigned(buf, pos, end, 5)
    return (raw >> 1) ^ -(raw & 1), pos


def read_varlong(buf, pos: int, end: int) -> tuple[int, int]:
    """A zig-zag varlong (64-bit) at ``buf[pos]``, as Kafka reads it, and the position after it."""
    raw, pos = _read_unsigned(buf, pos, end, 10)
    return (raw >> 1) ^ -(raw & 1), pos


def walk_records(records, count: int, want: int = 0, *, compressed: bool = False, partial: bool = False) -> tuple:
    """The pure twin of ``_records.scan`` (the one definition of a record: Kafka 4.1's ``DefaultRecord`` and the
    ``DefaultRecordBatch`` iterator): the same answer for what it accepts, plus the records' headers ((key,
    value) lists) with ``want & WANT_HEADERS`` and their offset deltas with ``want & WANT_OFFSETS`` (the
    ninth item); for what it refuses, Kafka's error:

    1. ``count`` records must be there and nothing after them (INVALID_RECORD);
    2. a record length that is not a varint of at most 5 bytes is UNKNOWN_SERVER_ERROR: Kafka reads it outside
       the checks that turn a bad record into an InvalidRecordException; so is a negative length in a
       ``compressed`` batch (the buffer Kafka allocates for the record);
    3. anything else wrong inside a record (its fields past its length, a varint too long, a header count or
       header key length below 0, bytes left in its length) is INVALID_RECORD.

    ``partial``: a compressed batch kept in its codec, which Kafka walks with ``readPartiallyFrom``: the fields
    one after the other, the length read but never compared with them (nor the header count with what is
    left), every error INVALID_RECORD. What the length rules accept, this accepts alike, so the compiled walk
    (length rules only) answers for it wherever it accepts.
    Attributes are one byte, never read further; negative key and value lengths are null; header keys are
    never decoded.
    """
    buf = memoryview(records)
    end = len(buf)
    lists = [[] if want & bit else None
             for bit in (WANT_KEYS, WANT_VALUES, WANT_TIMESTAMPS, WANT_HEADERS, WANT_OFFSETS)]
    low, high, nulls, in_order, pos = None, None, 0, True, 0
    if count < 1:
        raise Errors.InvalidRecordError(f"Invalid reported count for record batch: {count}")
    for index in range(count):
        try:
            length, pos = read_varint(buf, pos, end)
        except RecordUnderflow:
            raise Errors.InvalidRecordError("Incorrect declared batch size, premature EOF reached") from None
        except VarintTooLong:
            if partial:
                raise Errors.InvalidRecordError(f"record {index}: Found invalid record structure") from None
            raise Errors.UnknownError(f"record {index}: its length is not a varint of at most 5 bytes") from None
        if not partial:
            if length < 0 and compressed:
                raise Errors.UnknownError(f"record {index}: negative record length {length}")
            if end - pos < length:
                raise Errors.InvalidRecordError(f"record {index}: Invalid record size: expected {length} bytes in "
                                                f"record payload, but only {end - pos} remain")
        start = pos
        try:
            delta, offset, key, value, pairs, pos = _read_fields(buf, pos + 1, end, index, partial)  # past attributes
        except (RecordUnderflow, VarintTooLong):
            raise Errors.InvalidRecordError(f"record {index}: Found invalid record structure") from None
        if not partial and pos - start != length:
            raise Errors.InvalidRecordError(f"record {index}: Invalid record size: expected to read {length} bytes "
                                            f"in record payload, but instead read {pos - start}")
        in_order &= offset == index
        nulls += key is None
        low = delta if low is None else min(low, delta)
        high = delta if high is None else max(high, delta)
        for kept, item in zip(lists, (key, value, delta, pairs, offset)):
            if kept is not None:
                kept.append(item)
    if pos != end:
        raise Errors.InvalidRecordError("Incorrect declared batch size, records still remaining in file")
    return (low, high, nulls, in_order, *lists)


def _read_fields(buf, pos: int, end: int, index: int, partial: bool) -> tuple:
    """(timestampDelta, offsetDelta, key, value, headers, position after them) of the record whose fields start
    at ``pos``; raises RecordUnderflow/VarintTooLong, or InvalidRecordError for a header count or header key length."""
    delta, pos = read_varlong(buf, pos, end)
    offset, pos = read_varint(buf, pos, end)
    key, pos = _read_bytes(buf, pos, end)
    value, pos = _read_bytes(buf, pos, end)
    header_count, pos = read_varint(buf, pos, end)
    if header_count < 0 or (not partial and header_count > end - pos):
        raise Errors.InvalidRecordError(f"record {index}: Found invalid number of record headers {header_count}")
    pairs = []
    for _ in range(header_count):
        key_size, pos = read_varint(buf, pos, end)
        if key_size < 0:
            raise Errors.InvalidRecordError(f"record {index}: Invalid negative header key size {key_size}")
        header_key, pos = _read_bytes(buf, pos, end, key_size)
        header_value, pos = _read_bytes(buf, pos, end)
        pairs.append((header_key, header_value))
    return delta, offset, key, value, pairs, pos


def _read_bytes(buf, pos: int, end: int, size: int | None = None) -> tuple[bytes | None, int]:
    """Utils.readBytes after a varint size (or ``size``): None for a negative size; past ``end`` is refused."""
    if size is None:
        size, pos = read_varint(buf, pos, end)
    if size < 0:
        return None, pos
    if size > end - pos:
        raise RecordUnderflow
    return bytes(buf[pos:pos + size]), pos + size
