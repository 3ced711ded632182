"""startingOffsets=group hands a query's progress over exactly (connector.stop_query): a stop between batches
and a stop during a batch, each followed by a second query from the group into the same exactly-once pylog
sink, counting the output records exactly; after a driver SIGKILL the second query names, in a WARNING, the
offset ranges the dead run may already have written — exactly the duplicates it then produces. The stop during
a batch runs on Apache Kafka too (``broker``)."""
from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import pytest
from kafka import KafkaAdminClient
from pyspark.sql.functions import udf
from pyspark.sql.types import BinaryType

import connector
from broker_sim.tools.cli import main as cli_main
from connector.source.offsets import from_json_dict, parse_group_metadata
from sink_helpers import read_topic
from spark_helpers import create_topic, produce, stream

PER_PARTITION = {0: 3000, 1: 1000}
TOTAL = sum(PER_PARTITION.values())
JOB = Path(__file__).parent / "faults" / "handoff_job.py"
JOB_DEADLINE_S = 180


def _feed(bootstrap: str, topic: str) -> None:
    create_topic(bootstrap, topic, partitions=len(PER_PARTITION))
    produce(bootstrap, topic, [(p, f"k{i}".encode(), f"{p}-{i}".encode())
                               for p, count in PER_PARTITION.items() for i in range(count)])


def _options(bootstrap: str, topic: str, group: str, starting: str) -> dict:
    return {"kafka.bootstrap.servers": bootstrap, "subscribe": topic, "groupId": group, "startingOffsets": starting,
            "maxOffsetsPerTrigger": "400"}


def _start(spark, bootstrap: str, options: dict, out: str, *, trigger: dict, transform=None):
    source = stream(spark, bootstrap, **{k: v for k, v in options.items() if k != "kafka.bootstrap.servers"})
    frame = source.selectExpr("key", "value")
    if transform is not None:
        frame = frame.withColumn("value", transform(frame.value))
    writer = (frame.writeStream.format("pylog").option("kafka.bootstrap.servers", bootstrap).option("topic", out)
              .option("checkpointLocation", tempfile.mkdtemp(prefix="pylog-ckpt-")))
    return writer.trigger(**trigger).start()


def _data_batches(query) -> int:
    return sum(1 for p in query.recentProgress if p["numInputRows"] > 0)


def _wait(condition, what: str, query=None, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if query is not None:
            assert query.exception() is None, query.exception()
        assert time.monotonic() < deadline, f"{what}: not within {timeout_s} s"
        time.sleep(0.05)


def _group_commits(bootstrap: str, group: str) -> dict:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        answer = admin.list_group_offsets({group: None}).get(group, {})
        return {(tp.topic, tp.partition): (meta.offset, parse_group_metadata(meta.metadata))
                for tp, meta in answer.items()}
    finally:
        admin.close()


def _planned_from_last_batch(bootstrap: str, group: str, query) -> bool:
    """The group is at the end of the query's last completed batch, with the batch planned from it beside it."""
    commits = _group_commits(bootstrap, group)
    return ({tp: offset for tp, (offset, _) in commits.items()} == _end_of_last_batch(query)
            and all(meta and "next" in meta for _, meta in commits.values()))


def _finish_from_group(spark, bootstrap: str, topic: str, out: str, group: str) -> None:
    query = _start(spark, bootstrap, _options(bootstrap, topic, group, "group"), out,
                   trigger={"availableNow": True})
    assert query.awaitTermination(180), "the query from the group did not finish"
    assert query.exception() is None, query.exception()


def _values(bootstrap: str, out: str) -> list:
    return [r[2] for r in read_topic(bootstrap, out)]


def _pylog_cli(bootstrap: str, *argv: str) -> str:
    out = io.StringIO()
    assert cli_main(["--bootstrap-server", bootstrap, *argv], stdout=out, stderr=io.StringIO()) == 0
    return out.getvalue()


def _end_of_last_batch(query) -> dict:
    end = json.loads(query.lastProgress["sources"][0]["endOffset"])
    return from_json_dict(end)


# broker_sim only: its 20 s trigger interval is a third of the suite's Kafka budget; the handoff on Kafka is
# proven by the stop during a batch
def test_a_stop_between_batches_hands_over_exactly(spark, pylog_broker):
    bootstrap = pylog_broker.bootstrap_servers
    _feed(bootstrap, "handoff-idle")
    options = _options(bootstrap, "handoff-idle", "handoff-idle", "earliest")
    interval = 20
    query = _start(spark, bootstrap, options, "handoff-idle-out", trigger={"processingTime": f"{interval} seconds"})
    try:
        # stop in the trigger interval's wait after a batch, at least 5 s before the next trigger fires
        _wait(lambda: _data_batches(query) >= 2 and not query.status["isTriggerActive"]
              and interval - time.time() % interval > 5, "two batches, then the wait for the next trigger", query)
        batches = _data_batches(query)
        # while the query runs, its group (Empty: the source commits as a non-member) names the run, and the
        # batch that completed but that nothing told the source about yet
        end = _end_of_last_batch(query)
        (row,) = [r for r in json.loads(_pylog_cli(bootstrap, "groups", "list", "--format", "json"))
                  if r["group"] == "handoff-idle"]
        assert row["state"] == "Empty" and row["committed_by"]["batches"] == batches, row
        assert row["committed_by"]["in_flight"] == {f"handoff-idle-{p}": [end[("handoff-idle", p)] - n,
                                                                           end[("handoff-idle", p)]]
                                                    for p, n in ((0, 300), (1, 100))}
        handed = connector.stop_query(query, options)
    finally:
        query.stop()
    assert _data_batches(query) == batches
    end = _end_of_last_batch(query)
    assert handed == [{"consumerGroup": "handoff-idle", "offsets": {"handoff-idle": {"0": end[("handoff-idle", 0)],
                       "1": end[("handoff-idle", 1)]}}, "unconfirmed": {}}]
    assert {tp: offset for tp, (offset, _) in _group_commits(bootstrap, "handoff-idle").items()} == end
    assert len(_values(bootstrap, "handoff-idle-out")) == 400 * batches
    _finish_from_group(spark, bootstrap, "handoff-idle", "handoff-idle-out", "handoff-idle")
    values = _values(bootstrap, "handoff-idle-out")
    assert len(values) == TOTAL and len(set(values)) == TOTAL


@udf(BinaryType())
def _slowly(value):
    time.sleep(0.01)
    return value


def test_a_stop_during_a_batch_hands_over_exactly(spark, broker):
    topic = broker.name("handoff-busy")
    out = broker.name("handoff-busy-out")
    bootstrap = broker.bootstrap_servers
    _feed(bootstrap, topic)
    options = _options(bootstrap, topic, topic, "earliest")
    query = _start(spark, bootstrap, options, out, trigger={"processingTime": "0 seconds"},
                   transform=_slowly)
    try:
        # a batch of 400 records takes seconds (10 ms each); the group's metadata shows when the next one is planned
        _wait(lambda: _data_batches(query) >= 1, "a first batch", query)
        done = _data_batches(query)
        _wait(lambda: _planned_from_last_batch(bootstrap, topic, query), "the next batch planned", query)
        handed = connector.stop_query(query, options)
    finally:
        query.stop()
    assert _data_batches(query) == done, "the batch completed before the stop; the test did not stop during it"
    end = _end_of_last_batch(query)
    assert handed[0]["offsets"] == {topic: {"0": end[(topic, 0)], "1": end[(topic, 1)]}}
    # the interrupted batch is named (its sink could have committed before Spark's commit log)
    planned = {str(p): [end[(topic, p)], end[(topic, p)] + n] for p, n in ((0, 300), (1, 100))}
    assert handed[0]["unconfirmed"] == {topic: planned}
    assert len(_values(bootstrap, out)) == 400 * done
    _finish_from_group(spark, bootstrap, topic, out, topic)
    values = _values(bootstrap, out)
    assert len(values) == TOTAL and len(set(values)) == TOTAL


def _job(bootstrap, checkpoint, starting, env=None):
    job = subprocess.Popen(
        [sys.executable, str(JOB), bootstrap, "handoff-kill", "handoff-kill-out", checkpoint, "handoff-kill",
         "--starting", starting], env={**os.environ, **(env or {})}, start_new_session=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _, err = job.communicate(timeout=JOB_DEADLINE_S)
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)
        _, err = job.communicate()
        raise AssertionError(f"the handoff job timed out after {JOB_DEADLINE_S} s:\n{err[-3000:]}")
    return job.returncode, err


WARNED = re.compile(r"handoff-kill-(\d) offsets \[(\d+), (\d+)\)")


# broker_sim only (a driver process of its own; its crash hook is the same on Kafka)
@pytest.mark.slow
def test_after_a_driver_sigkill_the_next_query_names_the_ranges_it_may_duplicate(pylog_broker, tmp_path):
    bootstrap = pylog_broker.bootstrap_servers
    _feed(bootstrap, "handoff-kill")
    # the sink commits batch 2's records, then the driver dies before Spark's commit log names the batch
    code, err = _job(bootstrap, str(tmp_path / "first"), "earliest",
                     {"PYLOG_SINK_CRASH_AT": "after_completed:2", "PYLOG_FAULT_MARKERS": str(tmp_path)})
    assert code == -signal.SIGKILL, f"the first run was not SIGKILLed (exit {code}):\n{err[-3000:]}"
    assert len(_values(bootstrap, "handoff-kill-out")) == 1200
    code, err = _job(bootstrap, str(tmp_path / "second"), "group")
    assert code == 0, err[-3000:]
    warned = [line for line in err.splitlines() if "consumer group 'handoff-kill'" in line]
    assert len(warned) == 1, err[-3000:]
    ranges = {(int(p), int(a), int(b)) for p, a, b in WARNED.findall(warned[0])}
    assert ranges == {(0, 600, 900), (1, 200, 300)}, warned[0]
    counts = Counter(_values(bootstrap, "handoff-kill-out"))
    assert set(counts) == {f"{p}-{i}".encode() for p, n in PER_PARTITION.items() for i in range(n)}
    duplicated = {value for value, count in counts.items() if count > 1}
    assert duplicated == {f"{p}-{i}".encode() for p, a, b in ranges for i in range(a, b)}
    assert max(counts.values()) == 2
