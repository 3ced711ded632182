"""One record means one thing: the broker's validator and the connector's three read paths against Kafka's own
parser (tests/conformance/record_fuzz.py), on fuzzed batches and on the inputs of issue 44's finding 1.

The suite runs a few thousand inputs; ``ci/stress_records.sh N`` runs N (PYLOG_STRESS_RECORDS). Kafka's parser
is its jars in one JVM: without them the tests skip, under CI=true they fail (``require_kafka``).
"""
from __future__ import annotations

import collections

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import batch_corpus as corpus
import record_fuzz as fuzz

from broker_sim.testing.hostile_records import kafka_key_of_shifted, shifted_record

SEEDED = fuzz.stress_count() or 3000
CHUNK = 2000  # inputs per round trip to the oracle


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    from broker_sim.testing.requirements import require_kafka

    require_kafka()
    kafka = fuzz.KafkaOracle(fuzz.compile_oracle(tmp_path_factory.mktemp("record-oracle")))
    yield kafka
    kafka.close()


def _check(oracle, inputs: list[bytes], tally: collections.Counter | None = None) -> list[str]:
    """Every disagreement of pylog's readers with Kafka over ``inputs`` (and the re-encoded stores)."""
    found = []
    answers = oracle.read(inputs)
    stores = {}
    for index, (data, answer) in enumerate(zip(inputs, answers)):
        broker = fuzz.broker_answer(data)
        problems = fuzz.disagreements(data, answer)
        if broker[0] == "accepted":
            stores[index] = fuzz.broker_answer(data, codec=corpus.GZIP)
        else:
            problems += fuzz.broker_disagreements(data, answer, broker)
        if problems:
            found.append(f"input {data.hex()}: " + "; ".join(p[:600] for p in problems))
        if tally is not None:
            tally["kafka reads" if answer[0] != "error" else "kafka refuses"] += 1
            tally[f"broker {broker[0]}"] += 1
            tally["attributes >= 0x80, read"] += answer[0] != "error" and _high_attributes(data)
    accepted = sorted(stores)
    restored = oracle.read([stores[i][3] for i in accepted if stores[i][0] == "accepted"])
    answers_of_stored = iter(restored)
    for index in accepted:
        data = inputs[index]
        broker = fuzz.broker_answer(data)
        stored = next(answers_of_stored) if stores[index][0] == "accepted" else None
        problems = fuzz.broker_disagreements(data, answers[index], broker, stored)
        if problems:
            found.append(f"input {data.hex()}: " + "; ".join(p[:600] for p in problems))
    return found


def _high_attributes(data: bytes) -> bool:
    """True when the first record's attributes byte has its high bit (a one-byte length before it)."""
    return len(data) > 62 and data[61] < 0x80 and data[62] >= 0x80


def test_every_reader_reads_fuzzed_batches_as_kafka_does(oracle):
    """Seeded inputs in chunks: zero disagreements, and the inputs reach every verdict."""
    tally = collections.Counter()
    found = []
    for start in range(0, SEEDED, CHUNK):
        inputs = [fuzz.generate(fuzz.RandomSource(seed)) for seed in range(start, min(start + CHUNK, SEEDED))]
        found += _check(oracle, inputs, tally)
    assert found == [], f"{len(found)} of {SEEDED} inputs read differently:\n" + "\n".join(found[:10])
    # the inputs mean something: each verdict is common, and records with a high attributes byte are read
    assert min(tally["kafka reads"], tally["kafka refuses"], tally["broker accepted"]) > SEEDED // 20, tally
    assert tally["attributes >= 0x80, read"] > SEEDED // 100, tally


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_every_reader_reads_hypothesis_batches_as_kafka_does(oracle, data):
    """The same comparison with hypothesis drawing the mutations, so a disagreement shrinks to its smallest."""
    assert _check(oracle, [fuzz.generate(fuzz.DrawSource(data))]) == []


def test_the_shifted_record_is_read_alike_everywhere(oracle):
    """Issue 44's record (attributes 0x80, see broker_sim.testing.hostile_records): Kafka reads the value
    b"EVIL"; so do the broker's validator and the connector's three paths (one read a framed value)."""
    data = corpus.batch(shifted_record(1), 1, fuzz.NOW_MS)
    [answer] = oracle.read([data])
    [(_, _, _, [row])] = answer
    assert row[2:4] == (kafka_key_of_shifted(1), b"EVIL")
    assert fuzz.disagreements(data, answer) == []
    assert fuzz.broker_answer(data)[:3] == ("accepted", [kafka_key_of_shifted(1)], [b"EVIL"])


@pytest.mark.parametrize("field,encoded,broker_error", [
    ("key_length", corpus.padded(corpus.varint(1), 6), "InvalidRecordError"),
    ("offset_delta", corpus.padded(corpus.varint(0), 6), "InvalidRecordError"),
    ("header_count", corpus.padded(corpus.varint(0), 6), "InvalidRecordError"),
    ("length", corpus.padded(corpus.varint(8), 6), "UnknownError"),
    ("key_length", corpus.uvarint(((2**63 - 1) << 1) & (2**64 - 1)), "InvalidRecordError"),
    ("value_length", corpus.varint(2**31 - 1), "InvalidRecordError"),
])
def test_what_kafka_refuses_every_reader_refuses(oracle, field, encoded, broker_error):
    """Varints past 5 bytes ("Varint is too long"), a key length of 2**63-1 (10 bytes: too long for a varint,
    once an uncaught OverflowError), a length past the record: Kafka's reader throws, the connector refuses on
    every path, and the broker answers Kafka's code (INVALID_RECORD; UNKNOWN_SERVER_ERROR for a record length
    that is not a varint, which Kafka reads outside its InvalidRecordException)."""
    data = corpus.batch(corpus.record(0, b"k", b"v", raw={field: encoded}), 1, fuzz.NOW_MS)
    [answer] = oracle.read([data])
    assert answer[0] == "error"
    assert fuzz.disagreements(data, answer) == []
    assert fuzz.broker_answer(data) == ("refused", broker_error)


def test_timestamps_wrap_as_java_longs_when_the_broker_reencodes(oracle):
    """baseTimestamp + timestampDelta past 2**63 wraps in Kafka (Java longs): the broker reads the same
    timestamp and re-encodes it (compression.type) instead of failing to pack it (struct.error)."""
    delta = 2**63 - 1000
    data = corpus.batch(corpus.record(0, b"k", b"v", timestamp_delta=delta), 1, fuzz.NOW_MS)
    [answer] = oracle.read([data])
    [(_, _, _, [row])] = answer
    assert row[1] == fuzz.NOW_MS + delta - 2**64
    assert fuzz.disagreements(data, answer) == []
    stored = fuzz.broker_answer(data, codec=corpus.GZIP)
    assert stored[0] == "accepted"
    [restored] = oracle.read([stored[3]])
    assert [r[1:] for r in restored[0][3]] == [row[1:]]


@pytest.mark.parametrize("key", [b"\xed\xad", b"\xed\xa0\x80", b"\xf0\x90", b"U\xe4", b"\xe0\x80\x80",
                                 b"\xf4\x90\x80\x80", b"\xc0\xaf", b"ok \xff"])
def test_header_keys_that_are_not_utf8_read_as_java_decodes_them(oracle, key):
    """Kafka's header key is ``new String(bytes, UTF_8)``: the connector's paths (and the broker's re-encode,
    which writes the key back as Kafka does) replace malformed bytes as Java does, where Python's "replace"
    gives another number of U+FFFD (two for ED AD, Java one)."""
    data = corpus.batch(corpus.record(0, b"k", b"v", [(key, b"x")]), 1, fuzz.NOW_MS)
    [answer] = oracle.read([data])
    assert fuzz.disagreements(data, answer) == []
    stored = fuzz.broker_answer(data, codec=corpus.GZIP)
    [restored] = oracle.read([stored[3]])
    assert restored[0][3][0][4] == answer[0][3][0][4]
