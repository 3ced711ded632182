"""storage/_records.c, the validator's compiled walk: it accepts exactly what its pure twin
(``validator.walk_records``, Kafka's DefaultRecord rules) accepts and answers the same; valid batches take it."""
from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from kafka.errors import InvalidRecordError, KafkaError
from kafka.record.util import encode_varint

from broker_sim.storage import _records, validator  # setup.py builds _records (ci/setup.sh checks it is there)
from broker_sim.storage.batch import HEADER_SIZE, parse_batches
from broker_sim.storage.validator import RecordRules, validate_records, walk_records

RULES = RecordRules(compact=False, max_message_bytes=1048588, max_decompressed_bytes=32 << 20)
EVERYTHING = validator.WANT_KEYS | validator.WANT_VALUES | validator.WANT_TIMESTAMPS | 8 | 16  # headers, offsets


def varint(value: int) -> bytes:
    out = bytearray()
    encode_varint(value, out.append)
    return bytes(out)


def record(offset_delta: int, key, value, headers=(), *, ts_delta: int = 0, attributes: int = 0) -> bytes:
    body = bytes([attributes]) + varint(ts_delta) + varint(offset_delta)
    body += varint(-1) if key is None else varint(len(key)) + key
    body += varint(-1) if value is None else varint(len(value)) + value
    body += varint(len(headers))
    for hkey, hvalue in headers:
        body += varint(len(hkey)) + hkey + (varint(-1) if hvalue is None else varint(len(hvalue)) + hvalue)
    return varint(len(body)) + body


def twin(records: bytes, count: int, want: int = EVERYTHING):
    """What the pure twin makes of the records, or None where it raises."""
    try:
        return walk_records(records, count, want)
    except KafkaError:
        return None


blobs = st.one_of(st.none(), st.binary(max_size=12))
records_st = st.lists(st.tuples(
    blobs, blobs, st.lists(st.tuples(st.binary(max_size=5), blobs), max_size=2),
    st.integers(-2**40, 2**40), st.sampled_from([0, 0, 1, 0x7f, 0x80, 0xff])), min_size=1, max_size=6)
# a mutation: (position as a fraction of the bytes, what to do, a byte)
mutations = st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.sampled_from(["set", "cut", "add"]),
                               st.integers(0, 255)), max_size=3)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records_st, mutations, st.integers(-1, 2), st.sampled_from([0, 1, 2, 4, 7, 8, 16, 31]))
def test_the_compiled_walk_accepts_exactly_what_its_pure_twin_accepts_and_answers_the_same(
        specs, changes, count_error, want):
    data = bytearray(b"".join(record(i, key, value, headers, ts_delta=ts, attributes=attributes)
                              for i, (key, value, headers, ts, attributes) in enumerate(specs)))
    for where, what, byte in changes:
        position = int(where * len(data)) if data else 0
        if what == "set" and data:
            data[position] = byte
        elif what == "cut":
            del data[position:]
        else:
            data[position:position] = bytes([byte])
    count = len(specs) + count_error
    scanned = _records.scan(bytes(data), count, want)
    if not changes and count_error == 0:
        assert scanned is not None, "a well-formed batch must take the compiled walk"
    assert scanned == twin(bytes(data), count, want)


def test_what_kafka_reads_alike_the_compiled_walk_reads_alike():
    """One record, one meaning: the attributes byte is one byte whatever its value, a fifth varint byte's bits
    past 32 and a tenth varlong byte's past 64 are dropped (Java's shifts), header keys are never decoded."""
    plain = record(0, b"k", b"v")
    for attributes in (0x80, 0xFF):
        assert _records.scan(record(0, b"k", b"v", attributes=attributes), 1) == _records.scan(plain, 1)
    body = b"\x00" + b"\x80" * 9 + b"\x7e" + b"\x80\x80\x80\x80\x10" + plain[4:]  # deltas 0 in 10 and 5 bytes
    assert _records.scan(varint(len(body)) + body, 1) == _records.scan(plain, 1)
    assert _records.scan(record(0, b"k", b"v", [(b"\xff\xfe", b"")]), 1) is not None
    assert _records.scan(record(0, b"k", b"v") + record(2, b"k", b"v"), 2)[3] is False  # offsets: the caller's


def test_each_rule_sends_the_batch_to_the_pure_twin():
    good = record(0, b"k", b"v") + record(1, None, b"v", [(b"h", None)], ts_delta=-5)
    assert _records.scan(good, 2) == (-5, 0, 1, True, None, None, None, None, None)
    broken = {
        "one record fewer than the count": record(0, b"k", b"v"),
        "bytes after the last record": good + b"\x00",
        "a null header key": record(0, b"k", b"v")[:-1] + varint(1) + varint(-1) + varint(-1),
        "a negative header count": record(0, b"k", b"v")[:-1] + varint(-1),
        "a truncated value": record(0, b"k", b"vvvv")[:-3],
        "a record body longer than its fields": varint(len(record(0, b"k", b"v")))
        + record(0, b"k", b"v")[1:] + b"\x00",
        "a record whose length covers the next": varint(len(record(0, b"k", b"v")) - 1 + len(record(1, b"k", b"v")))
        + record(0, b"k", b"v")[1:] + record(1, b"k", b"v"),
        "no records at all": b"",
        "a 6-byte varint length": b"\x80\x80\x80\x80\x80\x00" + record(0, b"k", b"v")[1:],
    }
    for name, records in broken.items():
        count = 2 if name in ("one record fewer than the count", "a record whose length covers the next") else 1
        count = 0 if name == "no records at all" else count
        assert _records.scan(records, count) is None, name
        assert twin(records, count) is None, name


def test_valid_batches_take_the_compiled_walk_and_broken_ones_are_still_named(monkeypatch):
    valid = b"".join(record(i, b"k", b"value") for i in range(100))
    bad = record(0, b"k", b"v") + record(1, b"k", b"v")[:-1] + varint(-1)

    def batch(records: bytes, count: int) -> bytes:
        from crc32c import crc32c

        data = bytearray(struct.pack(">qiibIhiqqqhii", 0, HEADER_SIZE - 12 + len(records), -1, 2, 0, 0, count - 1,
                                     1000, 1000, -1, -1, -1, count)) + records
        struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
        return bytes(data)

    walks = []
    pure = validator.walk_records
    monkeypatch.setattr(validator, "walk_records", lambda *args, **kwargs: walks.append(1) or pure(*args, **kwargs))
    timestamps = RULES._replace(timestamps=(0, 10_000), compact=True)
    assert validate_records(batch(valid, 100), timestamps).batches == parse_batches(batch(valid, 100))
    assert walks == []
    with pytest.raises(InvalidRecordError, match="record 1: Found invalid number of record headers -1"):
        validate_records(batch(bad, 2), RULES)
    assert walks == [1]
