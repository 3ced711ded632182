"""A hostile Avro record in a Spark task (valueFormat=avro): 12 bytes declaring 2^62 nulls in a field the reader
schema dropped. fastavro skipped them one by one and the task never ended (still running at 200 s against a
13 s control); now the record fails in FAILFAST mode with an error naming its partition and offset, or is kept
as null with its bytes in PERMISSIVE mode, in about the time of the control query."""
from __future__ import annotations

import json
import struct
import threading
import time

import pytest
from spark_helpers import batch, create_topic
from typed_samples import produce_raw

from connector.typed.registry_client import RegistryClient, RegistryConfig

pytestmark = pytest.mark.spark

WRITER = json.dumps({"type": "record", "name": "Event", "fields": [
    {"name": "id", "type": "long"}, {"name": "junk", "type": {"type": "array", "items": "null"}}]})
READER = json.dumps({"type": "record", "name": "Event", "fields": [{"name": "id", "type": "long"}]})
STALL_S = 120   # a query still running then is the endless loop: its jobs are cancelled and the test fails


def _zigzag(n: int) -> bytes:
    v, out = (n << 1) ^ (n >> 63), bytearray()
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _timed(spark, action):
    """(seconds, result or the exception) of ``action()``; jobs still running after STALL_S are cancelled."""
    timer = threading.Timer(STALL_S, spark.sparkContext.cancelAllJobs)
    timer.start()
    started = time.monotonic()
    try:
        result = action()
    except Exception as exc:  # noqa: BLE001 - the failure is what the test looks at
        result = exc
    finally:
        timer.cancel()
    return time.monotonic() - started, result


def test_a_record_declaring_2_62_skipped_nulls_fails_its_task_in_bounded_time(spark, pylog_broker):
    bootstrap, url = pylog_broker.bootstrap_servers, pylog_broker.schema_registry_url
    client = RegistryClient(RegistryConfig((url,)))
    topic, control_topic = "hostile-avro", "benign-avro"
    writer_id = client.register(f"{topic}-value", "AVRO", WRITER)
    client.register(f"{topic}-value", "AVRO", READER)           # the latest version: the reader drops junk
    client.register(f"{control_topic}-value", "AVRO", WRITER)
    client.register(f"{control_topic}-value", "AVRO", READER)
    frame = b"\x00" + struct.pack(">I", writer_id)
    good = [frame + _zigzag(i) + _zigzag(2) + b"\x00" for i in range(3)]
    hostile = frame + _zigzag(1) + _zigzag(2**62) + b"\x00"
    for name, values in ((topic, [good[0], hostile, good[2]]), (control_topic, good)):
        create_topic(bootstrap, name)
        produce_raw(bootstrap, name, values)
    options = {"valueFormat": "avro", "schema.registry.url": url}

    control_s, rows = _timed(spark, lambda: batch(spark, bootstrap, subscribe=control_topic, **options)
                             .orderBy("offset").select("value.id").collect())
    assert [r.id for r in rows] == [0, 1, 2], rows

    attack_s, failure = _timed(spark, lambda: batch(spark, bootstrap, subscribe=topic, **options).collect())
    assert isinstance(failure, Exception), failure
    assert (f"Malformed value at topic {topic} partition 0 offset 1 with schema id {writer_id}" in str(failure)
            and "too many zero-size items" in str(failure)), str(failure)[-3000:]
    assert attack_s < control_s + 30, (attack_s, control_s)

    permissive_s, rows = _timed(spark, lambda: batch(spark, bootstrap, subscribe=topic, mode="PERMISSIVE", **options)
                                .orderBy("offset").select("offset", "value.id", "_corrupt_value").collect())
    assert [(r.offset, r.id, r._corrupt_value) for r in rows] == [(0, 0, None), (1, None, hostile), (2, 2, None)]
    assert permissive_s < control_s + 30, (permissive_s, control_s)
