"""Exactly-once under driver crashes and task failures: SIGKILLed drivers restart from their checkpoint.

Each round runs ``faults/sink_job.py`` (pylog topic -> pylog topic, its own SparkSession and driver process)
seven times on one checkpoint:

1. SIGKILL by pid while tasks write (the output has open transactions: its last stable offset is behind its
   high watermark);
2. killed between the tasks' pre-commit and the driver's commit (PYLOG_SINK_CRASH_AT=before_intent);
3. killed at each of the four points of the driver's commit in turn (after INTENT, after the first EndTxn,
   before and after COMPLETED): a restart rolls the batch with an INTENT forward and crashes in the next one;
4. to the end on local[2,4] with attempt 0 of Spark partition 1 failing after writing, in every batch.

Then the read_committed output must equal the transform of the input exactly — no loss, no duplicates — and
no transaction may be left open. ``PYLOG_SINK_FAULT_ROUNDS`` (default 1: every commit point once) sets the
rounds; ci/stress_sink.sh runs more.  The input is five batches, so the last run always has a batch left in
which to fail its task, even when the first kill comes in the second batch.

Every injected fault must be seen to fire: the hooks (``connector.sink.commit.mark_fault``) leave a marker file
in PYLOG_FAULT_MARKERS before they kill or fail, a crash run must end by SIGKILL *and* leave its point's marker,
and a job that overruns its deadline fails the test as a timeout — it is never counted as a crash.
Mutation: crash_point and the injected task failure as no-ops -> "PYLOG_SINK_CRASH_AT=before_intent did not
fire"; a sleep before the crash so the deadline kills the job -> "timed out ... not a crash".
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import pytest
from kafka import KafkaConsumer
from kafka.structs import TopicPartition

from sink_helpers import read_topic
from spark_helpers import create_topic, produce

pytestmark = [pytest.mark.spark, pytest.mark.slow]

JOB = Path(__file__).parent / "faults" / "sink_job.py"
ROUNDS = int(os.environ.get("PYLOG_SINK_FAULT_ROUNDS", "1"))
COMMIT_POINTS = ("after_intent", "mid_commit", "before_completed", "after_completed")  # after_completed last
RECORDS = 600
# five batches: a crash after INTENT is rolled forward by the next run, which then crashes in the next batch, so
# the four commit points in turn need three batches after the first crash's, plus one for the failing task
BATCH = RECORDS // 5


# one Spark job's deadline; a round runs seven, so the test's own timeout is above 7 x JOB_DEADLINE_S
JOB_DEADLINE_S = 120
ROUND_TIMEOUT_S = 7 * JOB_DEADLINE_S + 60


def start_job(bootstrap, checkpoint, *, env=None, master="local[2]", topics=("in", "out")):
    return subprocess.Popen(
        [sys.executable, str(JOB), bootstrap, *topics, checkpoint, "--master", master, "--max-offsets", str(BATCH)],
        env={**os.environ, **(env or {})}, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)


class JobTimedOut(AssertionError):
    pass


def finish(job, timeout=JOB_DEADLINE_S) -> tuple[int, str]:
    """The job's exit code and stderr; a job still running at the deadline is killed and fails the test."""
    try:
        _, err = job.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)
        _, err = job.communicate()
        raise JobTimedOut(f"the Spark job {job.args[2:5]} timed out after {timeout} s and was killed by the test "
                          f"(not a crash):\n{err[-3000:]}")
    return job.returncode, err


def fired(markers: Path, prefix: str) -> list[str]:
    return sorted(p.name for p in markers.iterdir() if p.name.startswith(prefix))


def run_crashing(bootstrap, checkpoint, topics, markers: Path, point: str) -> None:
    """A run that must die by SIGKILL at ``point``: the hook's marker proves the crash was the injected one."""
    before = set(fired(markers, f"crash-{point}-"))
    code, err = finish(start_job(bootstrap, checkpoint, topics=topics,
                                 env={"PYLOG_SINK_CRASH_AT": point, "PYLOG_FAULT_MARKERS": str(markers)}))
    new = set(fired(markers, f"crash-{point}-")) - before
    assert new, f"PYLOG_SINK_CRASH_AT={point} did not fire (exit code {code}):\n{err[-3000:]}"
    assert code == -signal.SIGKILL, f"the job fired {point} but exited {code}, not by SIGKILL:\n{err[-3000:]}"


class OpenTransactions:
    """Whether a topic has open transactions: its last stable offset lags its high watermark somewhere."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.partitions = [TopicPartition(topic, p) for p in range(partitions)]
        self.committed = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed")
        self.uncommitted = KafkaConsumer(bootstrap_servers=bootstrap)

    def __call__(self) -> bool:
        lso = self.committed.end_offsets(self.partitions)
        hw = self.uncommitted.end_offsets(self.partitions)
        return any(lso[tp] < hw[tp] for tp in self.partitions)

    def close(self):
        self.committed.close()
        self.uncommitted.close()


def kill_while_tasks_write(bootstrap, checkpoint, topics) -> bool:
    """Run the job and SIGKILL its process group as soon as the output has an open transaction."""
    job = start_job(bootstrap, checkpoint, topics=topics)
    probe = OpenTransactions(bootstrap, topics[1], 3)
    deadline = time.monotonic() + JOB_DEADLINE_S
    try:
        while job.poll() is None:
            if time.monotonic() > deadline:
                break  # finish() below kills it and fails the test as a timeout
            if probe():
                os.killpg(job.pid, signal.SIGKILL)
                job.wait()
                return True
            time.sleep(0.02)
        return False
    finally:
        probe.close()
        finish(job)


@pytest.mark.timeout(ROUND_TIMEOUT_S)
@pytest.mark.parametrize("round_", range(ROUNDS))
def test_driver_crashes_and_task_failures_write_exactly_once(pylog_broker, round_, tmp_path):
    bootstrap = pylog_broker.bootstrap_servers
    topics = (f"in{round_}", f"out{round_}")
    create_topic(bootstrap, topics[0], partitions=3)
    create_topic(bootstrap, topics[1], partitions=3)
    produce(bootstrap, topics[0], [(i % 3, f"k{i}".encode(), f"v{i}".encode()) for i in range(RECORDS)])
    checkpoint = tempfile.mkdtemp(prefix="pylog-fault-ckpt-")

    markers = tmp_path / "faults"
    markers.mkdir()

    killed_while_writing = kill_while_tasks_write(bootstrap, checkpoint, topics)
    for point in ("before_intent", *COMMIT_POINTS):
        run_crashing(bootstrap, checkpoint, topics, markers, point)
    code, err = finish(start_job(bootstrap, checkpoint, master="local[2,4]", topics=topics,
                                 env={"PYLOG_SINK_FAIL_TASK": "1", "PYLOG_FAULT_MARKERS": str(markers)}))
    assert code == 0, err[-3000:]
    assert fired(markers, "failtask-p1-"), f"PYLOG_SINK_FAIL_TASK=1 never failed a task:\n{err[-3000:]}"

    output = Counter(r[2] for r in read_topic(bootstrap, topics[1]))
    expected = Counter(f"out:v{i}".encode() for i in range(RECORDS))
    assert output == expected, (f"missing {sum((expected - output).values())}, "
                                f"duplicated {sum((output - expected).values())}")
    probe = OpenTransactions(bootstrap, topics[1], 3)
    try:
        assert not probe(), "a transaction was left open"
    finally:
        probe.close()
    assert killed_while_writing, "the job finished before a transaction was seen open"


def test_recorded_transactions_aborted_by_timeout_are_replaced_by_the_rerun(pylog_broker_factory, tmp_path):
    """The driver dies after INTENT and stays down past transaction.timeout.ms: the broker aborts the recorded
    transactions, and the restarted query commits its own re-run of the batch in their place."""
    broker = pylog_broker_factory(config={"transaction.abort.timed.out.transaction.cleanup.interval.ms": "300"})
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, "in", partitions=3)
    create_topic(bootstrap, "out", partitions=3)
    produce(bootstrap, "in", [(i % 3, f"k{i}".encode(), f"v{i}".encode()) for i in range(RECORDS)])
    checkpoint = tempfile.mkdtemp(prefix="pylog-fault-ckpt-")

    def job(env=None):
        env = dict(env or {}, PYLOG_FAULT_MARKERS=str(tmp_path))
        return subprocess.Popen(
            [sys.executable, str(JOB), bootstrap, "in", "out", checkpoint, "--max-offsets", "300",
             "--txn-timeout-ms", "10000"], env={**os.environ, **(env or {})}, start_new_session=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    code, err = finish(job({"PYLOG_SINK_CRASH_AT": "after_intent"}))
    assert fired(tmp_path, "crash-after_intent-"), f"PYLOG_SINK_CRASH_AT=after_intent did not fire:\n{err[-3000:]}"
    assert code == -signal.SIGKILL, err[-3000:]
    probe = OpenTransactions(bootstrap, "out", 3)
    try:
        deadline = time.monotonic() + 30
        while probe():   # the broker's timeout aborts the recorded transactions
            assert time.monotonic() < deadline, "the broker did not abort the timed-out transactions"
            time.sleep(0.2)
    finally:
        probe.close()
    code, err = finish(job())
    assert code == 0, err[-3000:]
    expected = Counter(f"out:v{i}".encode() for i in range(RECORDS))
    assert Counter(r[2] for r in read_topic(bootstrap, "out")) == expected
