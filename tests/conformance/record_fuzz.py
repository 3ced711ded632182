"""Every reader of records in pylog against Kafka's own parser, on fuzzed record batches.

Theory of operation
-------------------
``generate(source)`` builds one input: the records field of a Produce request (one RecordBatch v2, or two), from
a valid batch mutated where readers have disagreed: a record attributes byte of 0x80 or more, varints written
in more bytes than needed (legal up to 5/10 bytes, "Varint is too long" past them), huge and negative lengths
and header counts, a wrong recordsCount, bytes flipped, inserted, dropped or cut off inside the records, the
LogAppendTime bit, a codec. The CRC is recomputed after the mutation (a wrong CRC would hide everything else).
``source`` is a :class:`RandomSource` (the stress run: fast, no shrinking) or a :class:`DrawSource` over
hypothesis' ``data.draw`` (the suite: hypothesis shrinks a disagreement to its smallest input).

:class:`KafkaOracle` runs tests/conformance/java/RecordOracle.java (Kafka 4.1's ``MemoryRecords`` ->
``batch.iterator()``) as one long-running JVM, fed length-prefixed buffers on stdin. :func:`disagreements`
compares, for one input, Kafka's answer with

1. the connector's compiled path (``decode(compiled=True)`` -> ``to_record_batch``: ``_records_arrow.decode_batches``),
2. its per-record path (``decode(include_headers=True)``: ``_records_arrow.read_records``, with headers; and without,
   as typed reads decode),
3. its pure path (the same without the C extension: ``broker_sim.protocol.records.walk_records``),
4. the broker's validator (``validate_records``: ``_records.scan`` or its pure twin): what it accepts must be
   read by Kafka without an error, the keys and values it saw must be Kafka's, and what it would store must
   read as the same records (timestamps aside where the broker rewrites a LogAppendTime header).

A reader must fail (ValueError in the connector) exactly where Kafka throws, and otherwise give Kafka's rows:
offset, timestamp, key, value, headers (key as UTF-8 bytes, value or None).
"""
from __future__ import annotations

import os
import random
import struct
import subprocess
import threading
from contextlib import contextmanager
from pathlib import Path

import batch_corpus as corpus

JAVA_SOURCE = Path(__file__).parent / "java" / "RecordOracle.java"
NOW_MS = 1_700_000_000_000
# values written where a length, count or delta is: the edges of int32 and int64, and small lies
EDGES = (0, 1, -1, -2, 2, 5, 7, 127, 128, 2**31 - 1, -2**31, 2**31, 2**32, 2**63 - 1, -2**63)
FIELDS = ("length", "timestamp_delta", "offset_delta", "key_length", "value_length", "header_count")


# --- where the randomness comes from ---------------------------------------------------------------------------

class RandomSource:
    """Draws from a seeded ``random.Random``."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def integer(self, low: int, high: int) -> int:
        return self.rng.randint(low, high)

    def choice(self, items):
        return items[self.rng.randrange(len(items))]

    def chance(self, percent: int) -> bool:
        return self.rng.randrange(100) < percent

    def blob(self, most: int) -> bytes:
        return self.rng.randbytes(self.rng.randint(0, most))


class DrawSource:
    """Draws through hypothesis' ``data.draw`` (so a failure shrinks)."""

    def __init__(self, data):
        from hypothesis import strategies as st

        self.data, self.st = data, st

    def integer(self, low: int, high: int) -> int:
        return self.data.draw(self.st.integers(low, high))

    def choice(self, items):
        return self.data.draw(self.st.sampled_from(items))

    def chance(self, percent: int) -> bool:
        return self.data.draw(self.st.integers(0, 99)) < percent

    def blob(self, most: int) -> bytes:
        return self.data.draw(self.st.binary(max_size=most))


# --- inputs ----------------------------------------------------------------------------------------------------

def _encoded(source, name: str, value: int) -> bytes:
    """``value`` as the field ``name`` is written, sometimes padded to more bytes than it needs (or too many)."""
    wide = name == "timestamp_delta"
    encoded = corpus.varlong(value) if wide else corpus.varint(value)
    if source.chance(15):
        limit = 10 if wide else 5
        encoded = corpus.padded(encoded, source.integer(len(encoded), limit + 2))
    return encoded


def _record(source, index: int) -> bytes:
    key = None if source.chance(20) else source.blob(6)
    value = None if source.chance(15) else source.blob(12)
    headers = [(source.blob(4) if not source.chance(5) else b"\xff\xfe", None if source.chance(30) else source.blob(4))
               for _ in range(source.choice((0, 0, 1, 2)))]
    attributes = source.choice((0, 0, 0, 0x80, 0xFF, 0x81, 1))
    raw = {}
    for name in FIELDS:
        if source.chance(2):  # a lie: an edge value (long varints of huge values included)
            edge = source.choice(EDGES)
            raw[name] = corpus.uvarint(((edge << 1) ^ (edge >> 63)) & 0xFFFFFFFFFFFFFFFF) if source.chance(50) \
                else corpus.varint(edge & 0xFFFFFFFF if edge >= 2**31 else edge)
    offset_delta = index if not source.chance(5) else source.integer(-3, 5)
    timestamp_delta = source.choice((0, 1, 17, -5, 2**40))
    body = corpus.record(offset_delta, key, value, headers, attributes=attributes, timestamp_delta=timestamp_delta,
                         raw={**{name: _encoded(source, name, v) for name, v in (
                             ("timestamp_delta", timestamp_delta), ("offset_delta", offset_delta),
                             ("key_length", -1 if key is None else len(key)),
                             ("value_length", -1 if value is None else len(value)),
                             ("header_count", len(headers)))}, **raw})
    return body


def _mutated(source, body: bytes) -> bytes:
    data = bytearray(body)
    for _ in range(source.choice((0, 0, 0, 1, 2))):
        if not data:
            break
        at = source.integer(0, len(data) - 1)
        kind = source.choice(("flip", "high", "insert", "drop", "cut"))
        if kind == "flip":
            data[at] ^= 1 << source.integer(0, 7)
        elif kind == "high":
            data[at] |= 0x80
        elif kind == "insert":
            data[at:at] = bytes([source.integer(0, 255)])
        elif kind == "drop":
            del data[at]
        else:
            del data[at:]
    return bytes(data)


def one_batch(source) -> bytes:
    count = source.integer(1, 4)
    body = b"".join(_record(source, i) for i in range(count))
    body = _mutated(source, body)
    claimed = count if not source.chance(8) else source.choice((0, -1, count - 1, count + 1, 2**31 - 1))
    codec = 0 if source.chance(80) else source.integer(1, 4)
    attributes = codec | (corpus.TIMESTAMP_TYPE if source.chance(10) else 0)
    base_offset = source.choice((0, 0, 0, 7, 2**40))
    data = corpus.batch(body, max(claimed, 1), NOW_MS, codec=codec, attributes=attributes,
                        last_offset_delta=max(count - 1, 0), max_timestamp=NOW_MS + 5)
    out = bytearray(data)
    struct.pack_into(">q", out, 0, base_offset)
    struct.pack_into(">i", out, 57, claimed)
    struct.pack_into(">I", out, 17, corpus.crc32c(bytes(out[21:])))
    return bytes(out)


def generate(source) -> bytes:
    """One input: a batch, or two (the second's base offset after the first's)."""
    first = one_batch(source)
    if not source.chance(10):
        return first
    second = bytearray(one_batch(source))
    struct.pack_into(">q", second, 0, struct.unpack_from(">q", first, 0)[0] + 10)
    return first + bytes(second)


# --- Kafka's answer --------------------------------------------------------------------------------------------

class KafkaOracle:
    """RecordOracle.java in one JVM: ``read(buffers)`` -> per buffer, ("error", class) or the records."""

    def __init__(self, classes: Path):
        from broker_sim.local.kafka import java_command

        self.process = subprocess.Popen(java_command("RecordOracle", extra_classpath=[classes], heap="512m",
                                                     jvm_options=["-Xlog:disable", "-Xshare:off"]),
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=1 << 16)

    def read(self, buffers: list[bytes]) -> list:
        def feed():
            for buffer in buffers:
                self.process.stdin.write(struct.pack(">i", len(buffer)) + buffer)
            self.process.stdin.flush()

        writer = threading.Thread(target=feed, daemon=True)
        writer.start()
        answers = [_parse(self._line()) for _ in buffers]
        writer.join()
        return answers

    def _line(self) -> str:
        """The oracle's next answer (a line starting with "@"; anything else the JVM printed is skipped)."""
        while True:
            line = self.process.stdout.readline().decode()
            if not line or line.startswith("@"):
                return line[1:]

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(30)


def compile_oracle(out: Path) -> Path:
    from broker_sim.local.kafka import compile_java

    return compile_java([JAVA_SOURCE], out)


def _hex(token: str):
    return None if token == "-" else b"" if token == "=" else bytes.fromhex(token)


def _parse(line: str):
    """RecordOracle's line -> ("error", class) or [(crc valid, control, next offset, [row, ...]), ...]."""
    tokens = line.split()
    if not tokens:
        raise RuntimeError("RecordOracle ended without an answer")
    if tokens[0] == "ERR":
        return ("error", tokens[1])
    batches, at = [], 1
    while at < len(tokens):
        if tokens[at] == "B":
            batches.append((tokens[at + 1] == "1", tokens[at + 2] == "1", int(tokens[at + 3]), []))
            at += 4
            continue
        offset, timestamp, key, value, count = tokens[at + 1:at + 6]
        at += 6
        headers = []
        for _ in range(int(count)):
            headers.append((_hex(tokens[at]) or b"", _hex(tokens[at + 1])))
            at += 2
        batches[-1][3].append((int(offset), int(timestamp), _hex(key), _hex(value), tuple(headers)))
    return batches


# --- pylog's answers -------------------------------------------------------------------------------------------

@contextmanager
def without_extension():
    """The connector's source as built without a C compiler: records by the pure walk."""
    from connector.source import arrow_records

    compiled, arrow_records._compiled = arrow_records._compiled, None
    try:
        yield
    finally:
        arrow_records._compiled = compiled


def _schema(headers: bool):
    from pyspark.sql.pandas.types import to_arrow_schema

    from connector.source.readers import source_schema

    return to_arrow_schema(source_schema(headers), timezone="UTC")


_SCHEMAS = {}


def connector_rows(data: bytes, path: str):
    """The rows the connector's source gives for ``data`` on ``path`` ("compiled": decode_batches; "records":
    read_records with headers; "typed": read_records without, as typed reads decode; "pure": walk_records), or
    ("error", message) when it refuses them."""
    from connector.source.arrow_records import decode, to_record_batch

    headers = path in ("records", "pure")
    schema = _SCHEMAS.get(headers) or _SCHEMAS.setdefault(headers, _schema(headers))
    try:
        if path == "pure":
            with without_extension():
                columns = decode(data, 0, 2**62, include_headers=True)
        else:
            columns = decode(data, 0, 2**62, include_headers=headers, compiled=path == "compiled")
        table = to_record_batch("t", 0, columns, schema)
    except ValueError as exc:
        return ("error", str(exc))
    import pyarrow as pa

    micros = table.column("timestamp").view(pa.int64()).to_pylist()
    offsets, keys, values = (table.column(name).to_pylist() for name in ("offset", "key", "value"))
    pairs = table.column("headers").to_pylist() if headers else None
    return [(offsets[i], micros[i], keys[i], values[i],
             tuple((h["key"].encode("utf-8"), h["value"]) for h in pairs[i] or ()) if headers else None)
            for i in range(table.num_rows)]


def _micros(millis: int) -> int:
    """Kafka's timestamp (ms) as the source's timestamp column holds it: microseconds, in 64 bits."""
    return (millis * 1000 + (1 << 63)) % (1 << 64) - (1 << 63)


def broker_answer(data: bytes, codec: int | None = None):
    """("refused", error class) or ("accepted", keys, values, stored bytes) from the broker's checks of a
    Produce v9 partition's records (``codec``: the topic's compression.type re-encodes them to it)."""
    import kafka.errors as Errors

    from broker_sim.storage.validator import RecordRules, check_produce_records, validate_records

    seen = []

    class Inspect:
        keys = values = True

        def __call__(self, batch, keys, values):
            seen.append((keys, values))

    rules = RecordRules(compact=False, max_message_bytes=1 << 24, max_decompressed_bytes=1 << 24, codec=codec)
    try:
        valid = validate_records(bytes(check_produce_records(data, 9).records), rules, inspect=Inspect())
    except Errors.KafkaError as exc:
        return ("refused", type(exc).__name__)
    keys = [k for batch_keys, _ in seen for k in batch_keys]
    values = [v for _, batch_values in seen for v in batch_values]
    return ("accepted", keys, values, bytes(valid.records))


def _kafka_rows(answer) -> list | None:
    if answer[0] == "error":
        return None
    return [row for crc, control, _, rows in answer if not control for row in rows]


def disagreements(data: bytes, kafka_answer) -> list[str]:
    """How the connector's readers of ``data`` differ from Kafka's answer (empty: they agree)."""
    found = []
    kafka_rows = _kafka_rows(kafka_answer)
    for path in ("compiled", "records", "typed", "pure"):
        rows = connector_rows(data, path)
        if kafka_rows is None:
            if rows and rows[0] != "error" or rows == []:
                found.append(f"connector {path}: rows {rows!r} where Kafka throws {kafka_answer[1]}")
            continue
        if rows and rows[0] == "error":
            found.append(f"connector {path}: refused ({rows[1]}) where Kafka reads {kafka_rows!r}")
            continue
        want = [(offset, _micros(timestamp), key, value, headers if path in ("records", "pure") else None)
                for offset, timestamp, key, value, headers in kafka_rows]
        if rows != want:
            found.append(f"connector {path}: rows {rows!r} where Kafka reads {want!r}")
    return found


def kept_compressed(data: bytes) -> bool:
    """True when ``data`` holds a compressed batch: Kafka's LogValidator walks one kept in its codec with
    ``skipKeyValueIterator`` (``DefaultRecord.readPartiallyFrom``: record lengths never compared with the fields,
    header counts never with what is left), so Kafka's broker, and broker_sim with it, accepts some that its
    consumers' full reading refuses."""
    position = 0
    while position + 23 <= len(data):
        if data[position + 22] & 0x07:
            return True
        position += 12 + struct.unpack_from(">i", data, position + 8)[0]
    return False


def broker_disagreements(data: bytes, kafka_answer, broker, stored_answer=None) -> list[str]:
    """How the broker's validator differs from Kafka's reading of ``data``: it may refuse more (Kafka's broker
    rules), but what it accepts Kafka must read (except as :func:`kept_compressed` says), as the records the
    validator saw; ``stored_answer``, Kafka's reading of what it would store (re-encoded), must hold the same
    keys, values and headers."""
    if broker[0] == "refused":
        return []
    kafka_rows = _kafka_rows(kafka_answer)
    if kafka_rows is None:
        if kept_compressed(data):
            return []  # Kafka's broker accepts it too (see kept_compressed); every reader refuses it
        return [f"broker accepts what Kafka's reader refuses ({kafka_answer[1]})"]
    found = []
    if broker[1] != [row[2] for row in kafka_rows] or broker[2] != [row[3] for row in kafka_rows]:
        found.append(f"broker saw keys {broker[1]!r}, values {broker[2]!r}; Kafka reads {kafka_rows!r}")
    if stored_answer is not None:
        stored_rows = _kafka_rows(stored_answer)
        if stored_rows is None:
            found.append(f"what the broker would store does not read in Kafka ({stored_answer[1]})")
        elif [row[2:] for row in stored_rows] != [row[2:] for row in kafka_rows]:
            found.append(f"stored records {stored_rows!r} differ from the produced {kafka_rows!r}")
    return found


def stress_count() -> int:
    return int(os.environ.get("PYLOG_STRESS_RECORDS", "0") or 0)
