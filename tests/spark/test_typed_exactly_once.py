"""An exactly-once typed pipeline under driver crashes: Avro in (two schema versions), a watermarked window
aggregate, Avro out; the driver is SIGKILLed after a batch's completed commit (before Spark records it), then
restarted on its checkpoint; the output, read by confluent-kafka's AvroDeserializer, is exactly the expected
aggregates — each window once.

Mutation: the driver's commit not consulting the sink log (``entry = None`` in ``commit_batch``) -> windows written
twice (``('s1', 00:00:00, 10, 100): 2``).
"""
from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from spark_helpers import create_topic
from test_sink_faults import finish, fired
from typed_samples import produce_serialized

pytestmark = [pytest.mark.spark, pytest.mark.slow]
JOB = Path(__file__).parent / "faults" / "typed_job.py"
UTC = dt.timezone.utc
READING_V1 = {"type": "record", "name": "Reading", "namespace": "com.acme", "fields": [
    {"name": "site", "type": "string"}, {"name": "amount", "type": "long"},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}
READING_V2 = {**READING_V1, "fields": READING_V1["fields"] + [{"name": "unit", "type": "string", "default": "kWh"}]}
BASE = dt.datetime(2026, 6, 1, tzinfo=UTC)


def _readings() -> list[tuple[bool, dict]]:
    """(written with V2?, reading): two sites, one reading per second for 60 s, then one at 100 s that moves
    the watermark past every window of the first minute (its own window stays open, never written)."""
    out = [(i >= 60, {"site": f"s{i % 2}", "amount": i, "at": BASE + dt.timedelta(seconds=i // 2)})
           for i in range(120)]
    out.append((True, {"site": "s0", "amount": 1000, "at": BASE + dt.timedelta(seconds=100)}))
    return [(v2, {**r, "unit": "kWh"} if v2 else r) for v2, r in out]


def _expected() -> Counter:
    windows = Counter()
    totals = Counter()
    for _, r in _readings()[:-1]:
        start = BASE + dt.timedelta(seconds=(r["at"] - BASE).seconds // 10 * 10)
        windows[(r["site"], start)] += 1
        totals[(r["site"], start)] += r["amount"]
    return Counter({(site, start, windows[(site, start)], totals[(site, start)]) for site, start in windows})


def _start(bootstrap, registry, checkpoint, env=None):
    return subprocess.Popen([sys.executable, str(JOB), bootstrap, registry, "readings", "totals", checkpoint],
                            env={**os.environ, **(env or {})}, start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _crash(bootstrap, registry, checkpoint, markers: Path, spec: str) -> None:
    point = spec.split(":")[0]
    before = set(fired(markers, f"crash-{point}-"))
    code, err = finish(_start(bootstrap, registry, checkpoint,
                              {"PYLOG_SINK_CRASH_AT": spec, "PYLOG_FAULT_MARKERS": str(markers)}))
    assert set(fired(markers, f"crash-{point}-")) - before, f"{spec} did not fire (exit {code}):\n{err[-3000:]}"
    assert code == -signal.SIGKILL, f"{spec} fired but the job exited {code}:\n{err[-3000:]}"


@pytest.mark.timeout(600)
def test_typed_avro_pipeline_survives_driver_crashes_with_exact_output(pylog_broker, tmp_path):
    bootstrap, registry_url = pylog_broker.bootstrap_servers, pylog_broker.schema_registry_url
    create_topic(bootstrap, "readings")
    create_topic(bootstrap, "totals")
    registry = SchemaRegistryClient({"url": registry_url})
    v1 = AvroSerializer(registry, json.dumps(READING_V1))
    v2 = AvroSerializer(registry, json.dumps(READING_V2))
    produce_serialized(bootstrap, "readings", [(v2 if is_v2 else v1, r) for is_v2, r in _readings()])
    checkpoint = tempfile.mkdtemp(prefix="pylog-typed-ckpt-")
    markers = tmp_path / "markers"
    markers.mkdir()

    # after batch 1's transactions are committed and its sink log entry COMPLETED, before Spark's own commit
    # log has it: the restart re-runs batch 1, which emits the windows batch 0's 20 s of readings closed, and
    # that output must not appear twice (the INTENT-roll-forward and task-crash points are
    # tests/spark/test_sink_faults.py's)
    _crash(bootstrap, registry_url, checkpoint, markers, "after_completed:1")
    code, err = finish(_start(bootstrap, registry_url, checkpoint))
    assert code == 0, err[-3000:]

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "check-totals", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    consumer.assign([TopicPartition("totals", 0, 0)])
    deserialize = AvroDeserializer(registry)
    context = SerializationContext("totals", MessageField.VALUE)
    got = Counter()
    try:
        for _ in range(50):
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                v = deserialize(message.value(), context)
                got[(v["site"], v["window_start"], v["readings"], v["total"])] += 1
    finally:
        consumer.close()
        registry.close()
    assert got == _expected()
