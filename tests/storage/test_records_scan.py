"""storage/_records.c, the validator's compiled walk: it accepts only what the reference walk (aiokafka's
reader) accepts, and answers the same timestamps and null keys; valid batches take it (no reference walk)."""
from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from kafka.errors import InvalidRecordError
from kafka.record.util import encode_varint

from broker_sim.storage import _records, validator  # setup.py builds _records (ci/setup.sh checks it is there)
from broker_sim.storage.batch import HEADER_SIZE, parse_batches
from broker_sim.storage.validator import RecordRules, validate_records

RULES = RecordRules(compact=False, max_message_bytes=1048588, max_decompressed_bytes=32 << 20)


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


def reference(records: bytes, count: int, base_timestamp: int = 1000):
    """What aiokafka's reader makes of the records: (min ts delta, max ts delta, null keys), or None."""
    from aiokafka.errors import CorruptRecordException
    from aiokafka.record._crecords import DefaultRecordBatch

    header = struct.pack(">qiibIhiqqqhii", 0, HEADER_SIZE - 12 + len(records), -1, 2, 0, 0, count - 1,
                         base_timestamp, base_timestamp, -1, -1, -1, count)
    copy = header + records + bytes(16)
    try:
        walked = [(r.offset, r.timestamp, r.key is None)
                  for r in DefaultRecordBatch(memoryview(copy)[:len(copy) - 16])]
    except (CorruptRecordException, ValueError):
        return None
    if [offset for offset, _, _ in walked] != list(range(count)):
        return None
    deltas = [(-1 if ts is None else ts) - base_timestamp for _, ts, _ in walked]
    return (min(deltas), max(deltas), sum(null for _, _, null in walked)) if walked else (0, 0, 0)


blobs = st.one_of(st.none(), st.binary(max_size=12))
records_st = st.lists(st.tuples(
    blobs, blobs, st.lists(st.tuples(st.binary(max_size=5), blobs), max_size=2),
    st.integers(-2**40, 2**40), st.sampled_from([0, 0, 1, 0x7f])), min_size=1, max_size=6)
# a mutation: (position as a fraction of the bytes, what to do, a byte)
mutations = st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.sampled_from(["set", "cut", "add"]),
                               st.integers(0, 255)), max_size=3)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records_st, mutations, st.integers(-1, 2))
def test_the_compiled_walk_accepts_only_what_the_reference_walk_accepts_and_answers_the_same(
        specs, changes, count_error):
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
    scanned = _records.scan(bytes(data), count)
    ascii_keys = all(hkey.isascii() for _, _, headers, _, _ in specs for hkey, _ in headers)
    if not changes and count_error == 0 and ascii_keys:  # non-ASCII header keys: the reference walk decodes
        assert scanned is not None, "a well-formed batch must take the compiled walk"
    if scanned is not None:
        assert count >= 1 and scanned == reference(bytes(data), count)


def test_each_rule_sends_the_batch_to_the_reference_walk():
    good = record(0, b"k", b"v") + record(1, None, b"v", [(b"h", None)], ts_delta=-5)
    assert _records.scan(good, 2) == (-5, 0, 1)
    broken = {
        "offset delta 2 at index 1": record(0, b"k", b"v") + record(2, b"k", b"v"),
        "one record fewer than the count": record(0, b"k", b"v"),
        "bytes after the last record": good + b"\x00",
        "a null header key": record(0, b"k", b"v")[:-1] + varint(1) + varint(-1) + varint(-1),
        "a non-ASCII header key": record(0, b"k", b"v", [("é".encode(), b"")]),
        "attributes >= 0x80": record(0, b"k", b"v", attributes=0x80),
        "a truncated value": record(0, b"k", b"vvvv")[:-3],
        "a record body longer than its fields": varint(len(record(0, b"k", b"v")))
        + record(0, b"k", b"v")[1:] + b"\x00",
        "a record whose length covers the next": varint(len(record(0, b"k", b"v")) - 1 + len(record(1, b"k", b"v")))
        + record(0, b"k", b"v")[1:] + record(1, b"k", b"v"),
        "no records at all": b"",
        "a 6-byte varint length": b"\x80\x80\x80\x80\x80\x00" + record(0, b"k", b"v")[1:],
    }
    for name, records in broken.items():
        count = 2 if name in ("offset delta 2 at index 1", "one record fewer than the count",
                              "a record whose length covers the next") else 1
        count = 0 if name == "no records at all" else count
        assert _records.scan(records, count) is None, name


def test_valid_batches_take_the_compiled_walk_and_broken_ones_are_still_named(monkeypatch):
    valid = b"".join(record(i, b"k", b"value") for i in range(100))
    bad = record(0, b"k", b"v") + record(5, b"k", b"v")

    def batch(records: bytes, count: int) -> bytes:
        from crc32c import crc32c

        data = bytearray(struct.pack(">qiibIhiqqqhii", 0, HEADER_SIZE - 12 + len(records), -1, 2, 0, 0, count - 1,
                                     1000, 1000, -1, -1, -1, count)) + records
        struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
        return bytes(data)

    walks = []
    reference_walk = validator._walk
    monkeypatch.setattr(validator, "_walk", lambda *args: walks.append(1) or reference_walk(*args))
    timestamps = RULES._replace(timestamps=(0, 10_000), compact=True)
    assert validate_records(batch(valid, 100), timestamps).batches == parse_batches(batch(valid, 100))
    assert walks == []
    with pytest.raises(InvalidRecordError, match="record 1 has offset delta 5, expected 1"):
        validate_records(batch(bad, 2), RULES)
    assert walks == [1]
