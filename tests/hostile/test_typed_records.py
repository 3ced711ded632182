"""Hostile records in a Spark task's typed decoding (valueFormat=avro): payloads a few bytes long that declare
2^62 items of no bytes, arrays of such arrays, map keys chosen to collide in an unkeyed hash, a recursive writer
type nested 100,000 deep. Each must fail its record (ValueError; MalformedRecordError naming the offset in
FAILFAST mode, null with its bytes in PERMISSIVE mode) in bounded time and memory, on the compiled path
(``connector/typed/_avro_arrow.c``) and on the per-record path (fastavro behind ``avro_format``'s guard), and
cost no more than a benign control record decoded in the same test.

Every attack runs in a child process (``_run``): on the code before the bounds it looped for ever, filled memory
or crashed the interpreter, and the child's timeout, address-space limit and exit status turn each of those
into a failed assertion instead of a stuck or dead test run. The child reports the decode's own seconds and
its peak resident memory growth (VmHWM)."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from broker_sim.registry.types import parse
from connector.typed import avro_arrow
from connector.typed import avro_format as A

ROOT = Path(__file__).resolve().parents[2]
LATENCY_BOUND_S = 0.5          # what one hostile record may cost a task
RSS_GROWTH_BOUND = 64 << 20    # what it may add to the task's peak memory
CHILD_TIMEOUT_S = 60           # a decode still running then is the loop the bounds stop

needs_extension = pytest.mark.skipif(not avro_arrow.available(), reason="the _avro_arrow extension is not built")

_CHILD = r"""
import json, resource, sys, time
spec = json.loads(sys.stdin.read())
from broker_sim.registry.types import parse
from connector.typed import avro_format as A
from connector.typed.columns import ColumnDecoder

def status(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024

reader = parse("AVRO", spec["reader"])
writer = parse("AVRO", spec["writer"]) if spec["writer"] else None
payloads = [bytes.fromhex(p) for p in spec["payloads"]]
if spec["path"] == "record":
    decode = A.decoder(reader, writer, framed=False)
    run = lambda: [decode(p) for p in payloads]
elif spec["path"] == "column":
    decode = A.column_decoder(reader, writer, framed=False)
    assert decode is not None, "no compiled decoder for this schema pair"
    run = lambda: decode(payloads).to_pylist()
else:   # the task's ColumnDecoder, bare records of an inline schema
    from connector.options import parse_source_options
    options = parse_source_options({"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "events",
                                    "valueFormat": "avro", "valueSchema": spec["reader"],
                                    "mode": spec["path"]}).resolve_typed()
    decoder = ColumnDecoder(options.value_typed, spec["path"] == "PERMISSIVE")
    where = lambda i: f"topic events partition 0 offset {100 + i}"
    run = lambda: {k: v.to_pylist() for k, v in decoder.decode(payloads, where).items()}
limit = status("VmSize") + (2 << 30)     # 2 GiB more address space than the child has after its imports
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
before = status("VmHWM")
started = time.perf_counter()
error, result = None, None
try:
    result = run()
except Exception as exc:
    error = f"{type(exc).__name__}: {exc}"
seconds = time.perf_counter() - started
print(json.dumps({"seconds": seconds, "error": error, "rss_growth": status("VmHWM") - before,
                  "result": repr(result)[:300]}))
"""


def _run(path: str, reader, payloads: list[bytes], writer=None) -> dict:
    """Decode ``payloads`` in a child process on ``path``: "record" (avro_format.decoder, fastavro), "column"
    (the compiled column decoder) or "FAILFAST"/"PERMISSIVE" (the task's ColumnDecoder, bare records of the
    inline schema ``reader``). Returns the child's report, or {"timeout": True} / {"exit": status}."""
    spec = json.dumps({"path": path, "reader": json.dumps(reader),
                       "writer": json.dumps(writer) if writer is not None else None,
                       "payloads": [p.hex() for p in payloads]})
    try:
        done = subprocess.run([sys.executable, "-c", _CHILD], input=spec, capture_output=True, text=True,
                              cwd=ROOT, timeout=CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"timeout": True, "path": path}
    if done.returncode != 0:
        return {"exit": done.returncode, "path": path, "stderr": done.stderr[-2000:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _bounded(report: dict, control: dict, error: str | None) -> None:
    """The hostile decode ended (no hang, no crash) with ``error`` (None: decoded), within the latency and
    memory bounds, and the control decoded without error."""
    assert control.get("error") is None and "seconds" in control, control
    assert "seconds" in report, f"the hostile record's decode did not end: {report} (control: {control})"
    if error is None:
        assert report["error"] is None, report
    else:
        assert report["error"] is not None and error in report["error"], report
    # beyond what the same decode of harmless records took (on a loaded machine the control is slow too)
    assert report["seconds"] <= LATENCY_BOUND_S + control["seconds"], (report, control)
    assert report["rss_growth"] <= RSS_GROWTH_BOUND, (report, control)


def zz(n: int) -> bytes:
    """Avro's zigzag varint of ``n``."""
    v = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


EVENT = {"type": "record", "name": "Event", "fields": [{"name": "id", "type": "long"}]}
WITH_NULLS = {"type": "record", "name": "Event", "fields": [
    {"name": "id", "type": "long"}, {"name": "junk", "type": {"type": "array", "items": "null"}}]}
EMPTY = {"type": "record", "name": "Empty", "fields": []}
NESTED = {"type": "array", "items": {"type": "array", "items": EMPTY}}


# -- (a) a declared count of items of no bytes ----------------------------------------------------------------

def test_a_skipped_array_declaring_2_62_nulls_fails_its_record_at_once():
    """The reader lacks ``junk``: fastavro skips its items one by one, 2^62 of nothing (the task was still running
    at 200 s). The guard refuses the count before fastavro sees the record."""
    hostile = zz(1) + zz(2**62) + b"\x00"
    control = _run("record", EVENT, [zz(1) + zz(3) + b"\x00"] * 100, writer=WITH_NULLS)
    report = _run("record", EVENT, [hostile], writer=WITH_NULLS)
    _bounded(report, control, "too many zero-size items")


@pytest.mark.parametrize("mode", ["FAILFAST", "PERMISSIVE"])
def test_an_array_declaring_2_62_nulls_is_a_malformed_record_in_the_task(mode):
    """Read (not skipped) by the task's ColumnDecoder: the compiled path refuses the batch, the per-record path
    (which used to build a list of 2^62 Nones) refuses the record: FAILFAST names its offset, PERMISSIVE keeps its
    bytes and the other records."""
    good = zz(7) + zz(2) + b"\x00"
    hostile = zz(8) + zz(2**62) + b"\x00"
    control = _run(mode, WITH_NULLS, [good, good, good])
    report = _run(mode, WITH_NULLS, [good, hostile, good])
    if mode == "FAILFAST":
        _bounded(report, control, "MalformedRecordError: Malformed value at topic events partition 0 offset 101")
        assert "zero-size items" in report["error"]
    else:
        _bounded(report, control, None)
        assert "'value': [{'id': 7, 'junk': [None, None]}, None, {'id': 7" in report["result"], report
        assert f"'_corrupt_value': [None, {hostile!r}, None]" in report["result"], report


@pytest.mark.parametrize("path", [pytest.param("column", marks=needs_extension), "record"])
def test_nested_arrays_of_zero_size_items_share_one_budget_per_record(path):
    """256 inner arrays of 2^20 empty records each: 2^28 items in 1 KB. The compiled path allowed each inner
    array 2^20 of its own (and decoded all 2^28, hundreds of MB); fastavro built 2^28 dicts. One budget per
    record now covers every array in it."""
    hostile = zz(256) + (zz(1 << 20) + b"\x00") * 256 + b"\x00"
    control = _run(path, NESTED, [zz(256) + (zz(4) + b"\x00") * 256 + b"\x00"])
    report = _run(path, NESTED, [hostile])
    _bounded(report, control, "zero-size items")


@pytest.mark.parametrize("path", [pytest.param("column", marks=needs_extension), "record"])
def test_zero_size_items_stay_proportional_to_the_bytes_when_split_into_many_records(path):
    """200 records of 5 bytes, each one array of 2^20 empty records: a fixed budget per record (2^20) let 1 KB of
    records decode to 2^28 items (1-2 s and 300 MB on the compiled path, a dict each on the per-record path).
    The budget is ZERO_SIZE_ITEMS_BASE plus ZERO_SIZE_ITEMS_PER_BYTE per byte of the record: 104 here."""
    schema = {"type": "array", "items": EMPTY}
    most = zz(A.ZERO_SIZE_ITEMS_BASE + A.ZERO_SIZE_ITEMS_PER_BYTE * 3) + b"\x00"   # all a 3-byte record may declare
    assert len(most) == 3
    control = _run(path, schema, [most] * 200)
    assert f"[{{}}, {{}}" in control["result"], control
    report = _run(path, schema, [zz(1 << 20) + b"\x00"] * 200)
    _bounded(report, control, "zero-size items")


# -- (b) map keys chosen to collide -----------------------------------------------------------------------------

_FNV_PRIME, _FNV_OFFSET = 1099511628211, 1469598103934665603


def fnv_colliding_keys(n: int, bits: int) -> list[bytes]:
    """``n`` distinct 8-byte ASCII keys whose 64-bit FNV-1a hashes all end in the same ``bits`` bits (0): 6 bytes
    of a counter, then the 2 bytes that steer the low bits (FNV-1a's low bits depend only on low bits, and
    multiplying by its odd prime is invertible modulo 2^bits)."""
    mask = (1 << bits) - 1
    inverse = pow(_FNV_PRIME, -1, 1 << bits)
    steer = {}
    for last in range(0x80):               # the state before the last byte is (0 * inverse) ^ last = last
        v = (last * inverse) & mask        # the state before the second last byte, xor that byte, must be v
        steer.setdefault(v >> 7, (v, last))
    alphabet = np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", np.uint8)
    keys: list[bytes] = []
    start = 0
    while len(keys) < n:
        counter = np.arange(start, start + (1 << 18), dtype=np.uint64)
        start += 1 << 18
        prefix = np.stack([alphabet[((counter >> np.uint64(6 * j)) & np.uint64(63)).astype(np.int64)]
                           for j in range(6)], 1)
        h = np.full(len(counter), _FNV_OFFSET & mask, np.uint64)
        for j in range(6):
            h = ((h ^ prefix[:, j].astype(np.uint64)) * np.uint64(_FNV_PRIME)) & np.uint64(mask)
        for row, value in enumerate(h.tolist()):
            hit = steer.get(value >> 7)
            if hit is not None:
                v, last = hit
                keys.append(prefix[row].tobytes() + bytes(((value ^ v) & 0x7F, last)))
                if len(keys) == n:
                    break
    return keys


def _fnv1a(key: bytes) -> int:
    h = _FNV_OFFSET
    for c in key:
        h = ((h ^ c) * _FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return h


@needs_extension
def test_map_keys_colliding_in_fnv_cost_what_any_keys_cost():
    """50,000 distinct keys in one 450 KB record, all in one slot of the old unkeyed FNV-1a table with linear
    probing (n^2/2 key comparisons: 5-30 s); the keyed SipHash table does not know them apart from any others."""
    n = 50_000
    cap = 16
    while cap < 2 * n:   # the duplicate check's table size for n keys
        cap *= 2
    keys = fnv_colliding_keys(n, cap.bit_length() - 1)
    assert len(set(keys)) == n and {_fnv1a(k) & (cap - 1) for k in keys[:2000]} == {0}

    def record(keys):
        return zz(len(keys)) + b"".join(zz(len(k)) + k for k in keys) + b"\x00"

    hostile, benign = record(keys), record([b"%08d" % i for i in range(n)])
    assert len(hostile) == len(benign)
    decode = A.column_decoder(parse("AVRO", json.dumps({"type": "map", "values": "null"})), None, framed=False)

    def timed(payload):
        started = time.perf_counter()
        out = decode([payload])
        return time.perf_counter() - started, out

    control_s, control = timed(benign)
    attack_s, attacked = timed(hostile)
    assert len(control[0]) == len(attacked[0]) == n
    assert attack_s <= LATENCY_BOUND_S, (attack_s, control_s)
    # and a real duplicate among them is still found
    with pytest.raises(ValueError, match="duplicate map key"):
        decode([record(keys + keys[-1:])])


# -- a recursive writer type, nested as deep as the bytes allow -------------------------------------------------

NODE = {"type": "record", "name": "Node", "fields": [
    {"name": "v", "type": "int"}, {"name": "next", "type": ["null", "Node"]}]}
ROOT_ONLY = {"type": "record", "name": "Node", "fields": [{"name": "v", "type": "int"}]}


def test_a_recursive_writer_nested_100000_deep_fails_its_record_instead_of_crashing_the_worker():
    """fastavro recurses on the C stack per level of the writer's data: 100,000 levels (200 KB) crashed the
    Python worker with SIGSEGV. Nesting past RECURSIVE_DEPTH_MAX is a corrupt record; 150 levels still read."""
    deep = b"\x02\x02" * 100_000 + b"\x02\x00"
    control = _run("record", ROOT_ONLY, [b"\x02\x02" * 150 + b"\x02\x00"] * 10, writer=NODE)
    assert "{'v': 1}" in control["result"], control
    report = _run("record", ROOT_ONLY, [deep], writer=NODE)
    _bounded(report, control, "RECURSIVE_DEPTH_MAX")
