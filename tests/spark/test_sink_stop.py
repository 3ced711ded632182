"""A stopped query leaves no sink transaction open: read_committed readers see every committed row at once.

One input (3 partitions, 300 records) flows to one output through ``faults/stop_job.py`` (its own driver, five
batches of 60) in a chain of runs that each stop mid-batch, the way a user's query stops:

1. ``connector.stop_query`` (checkpoint A, group G from earliest), then a successor on a new checkpoint B from
   group G;
2. ``query.stop()`` (checkpoint B);
3. an exception: a task fails for good (``PYLOG_SINK_FAIL_TASK``, restart on B);
4. a driver crash (SIGKILL, restart on B), followed by a restart that runs to the end.

In each stopped batch the test holds (``PYLOG_SINK_HOLD``) Spark partition 0 after it wrote and flushed its
records and before it reports (its transaction is open and only the sink log knows it), and partition 1 before
its InitProducerId: it is released only after the driver's abort ran, so it starts writing when the abort can
no longer see it. Partition 2 is held after writing too (in the exception run its release is the failure).
Within a few seconds of each stop the output's last stable offset must equal its high watermark on every
partition (no transaction holds it back), and after the crash the restart must have fenced the crashed run's
transactions *before* its tasks write. At the end the read_committed output holds every input record exactly
once.

On a sink whose abort does nothing when no task reported (Spark reports running tasks as None), every check
after a stop fails with the output's LSO behind its HW until ``transaction.timeout.ms``.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from kafka import KafkaConsumer
from kafka.structs import TopicPartition

from sink_helpers import read_topic
from spark_helpers import create_topic, produce

pytestmark = [pytest.mark.spark, pytest.mark.slow]

JOB = Path(__file__).parent / "faults" / "stop_job.py"
RECORDS, PARTITIONS = 300, 3
JOB_DEADLINE_S = 150
SETTLE_S = 3   # after the held tasks are released: what "within a few seconds of the stop" allows them


class Run:
    """One stop_job.py process and the files that steer its holds."""

    def __init__(self, bootstrap, control: Path, checkpoint: Path, *, starting: str, stop: str, env=None):
        self.control = control
        self.log = control.parent / f"job-{len(list(control.parent.glob('job-*.log')))}.log"
        self.job = subprocess.Popen(
            [sys.executable, str(JOB), bootstrap, "in", "out", str(checkpoint), "G", str(control),
             "--starting", starting, "--stop", stop],
            env={**os.environ, "PYLOG_SINK_HOLD": str(control), "PYLOG_FAULT_MARKERS": str(control), **(env or {})},
            start_new_session=True, stdout=subprocess.PIPE, stderr=self.log.open("w"), text=True)
        self.lines: list[str] = []

    def wait_files(self, names, what: str, limit_s: float = JOB_DEADLINE_S) -> None:
        deadline = time.monotonic() + limit_s
        while not all((self.control / n).exists() for n in names):
            if self.job.poll() is not None:
                raise AssertionError(f"the job ended ({self.job.returncode}) before {what}:\n{self.stderr()}")
            if time.monotonic() > deadline:
                self.kill()
                raise AssertionError(f"timed out waiting for {what} ({names}):\n{self.stderr()}")
            time.sleep(0.05)

    def wait_marker(self, prefix: str, before: set, limit_s: float = 60) -> bool:
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            if markers(self.control, prefix) - before:
                return True
            time.sleep(0.05)
        return False

    def read_line(self, prefix: str, limit_s: float = 60) -> str:
        """The rest of the first line of the job's output starting with ``prefix`` (read before or now)."""
        for line in self.lines:
            if line.startswith(prefix):
                return line[len(prefix):].strip()
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            line = self.job.stdout.readline()
            if not line:
                break
            self.lines.append(line)
            if line.startswith(prefix):
                return line[len(prefix):].strip()
        self.kill()
        raise AssertionError(f"the job never printed {prefix!r}: {self.lines}\n{self.stderr()}")

    def finish(self) -> int:
        try:
            self.job.wait(timeout=JOB_DEADLINE_S)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"the job did not end:\n{self.stderr()}")
        return self.job.returncode

    def kill(self) -> None:
        if self.job.poll() is None:
            os.killpg(self.job.pid, signal.SIGKILL)
            self.job.wait()

    def stderr(self) -> str:
        """The job's log: where its first error starts, and its end."""
        text = self.log.read_text(errors="replace")
        at = next((i for i in (text.find("Traceback"), text.find("Exception")) if i >= 0), 0)
        return text[at:at + 2500] + "\n...\n" + text[-1500:]


def markers(control: Path, prefix: str) -> set:
    return {p.name for p in control.iterdir() if p.name.startswith(prefix)}


def hold(control: Path, point: str, partition: int, from_batch: int) -> str:
    (control / f"hold-{point}-p{partition}").write_text(str(from_batch))
    return f"held-{point}-batch{from_batch}-p{partition}"


def release(control: Path, point: str, partition: int) -> None:
    (control / f"hold-{point}-p{partition}").unlink(missing_ok=True)


def ends(bootstrap: str) -> tuple[dict, dict]:
    """(last stable offsets, high watermarks) of the output's partitions."""
    partitions = [TopicPartition("out", p) for p in range(PARTITIONS)]
    out = []
    for isolation in ("read_committed", "read_uncommitted"):
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation)
        try:
            out.append({tp.partition: o for tp, o in consumer.end_offsets(partitions).items()})
        finally:
            consumer.close()
    return out[0], out[1]


def assert_nothing_open(bootstrap: str, when: str) -> None:
    lso, hw = ends(bootstrap)
    assert lso == hw, f"{when}: transactions hold the output back: last stable offsets {lso}, high watermarks {hw}"


def forget_held(control: Path, *, kill: bool = False) -> None:
    """Delete the held-* markers of the last run; ``kill``: SIGKILL the Python workers they name first (a crashed
    driver's workers, which sit in process groups of their own, must not write after the crash)."""
    for path in control.glob("held-*"):
        if kill:
            try:
                os.kill(int(path.read_text()), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        path.unlink()


def hold_mid_batch(control: Path, batch: int) -> list[str]:
    """Partition 0 and 2 after writing, partition 1 before InitProducerId, in ``batch`` and later."""
    forget_held(control)
    return [hold(control, "task_written", 0, batch), hold(control, "before_init", 1, batch),
            hold(control, "task_written", 2, batch)]


def stop_and_check(run: Run, bootstrap: str, batch: int, *, trigger) -> None:
    """Stop the held batch with ``trigger``, let partition 1 go once the abort ran, and check nothing is open."""
    before = markers(run.control, f"abort-batch{batch}-")
    trigger()
    aborted = run.wait_marker(f"abort-batch{batch}-", before)
    for point, partition in (("before_init", 1), ("task_written", 0), ("task_written", 2)):
        release(run.control, point, partition)
    run.read_line("STOPPED")
    time.sleep(SETTLE_S)
    assert_nothing_open(bootstrap, f"{SETTLE_S} s after the stop of batch {batch}")
    assert aborted, f"the driver's abort of batch {batch} never ran"


@pytest.mark.timeout(6 * JOB_DEADLINE_S)
def test_a_query_stopped_mid_batch_leaves_no_transaction_open(pylog_broker, tmp_path):
    bootstrap = pylog_broker.bootstrap_servers
    create_topic(bootstrap, "in", partitions=PARTITIONS)
    create_topic(bootstrap, "out", partitions=PARTITIONS)
    produce(bootstrap, "in", [(i % PARTITIONS, f"k{i}".encode(), f"v{i}".encode()) for i in range(RECORDS)])
    control = tmp_path / "control"
    control.mkdir()
    a, b = tmp_path / "ckpt-a", tmp_path / "ckpt-b"

    # 1. connector.stop_query in batch 1 (batch 0 committed); the group keeps batch 0's end
    run = Run(bootstrap, control, a, starting="earliest", stop="stop_query")
    run.wait_files(hold_mid_batch(control, 1), "batch 1's tasks held")
    stop_and_check(run, bootstrap, 1, trigger=lambda: (control / "stop-now").touch())
    handed = json.loads(run.read_line("HANDED "))
    assert [h["consumerGroup"] for h in handed] == ["G"], handed
    (control / "exit-now").touch()
    assert run.finish() == 0
    for name in ("stop-now", "exit-now"):
        (control / name).unlink()
    assert len(read_topic(bootstrap, "out")) == 60, "only batch 0 was committed"

    # 2. a successor from the group on a new checkpoint, stopped by query.stop() in its batch 1
    run = Run(bootstrap, control, b, starting="group", stop="stop")
    run.wait_files(hold_mid_batch(control, 1), "the successor's batch 1 held")
    stop_and_check(run, bootstrap, 1, trigger=lambda: (control / "stop-now").touch())
    (control / "exit-now").touch()
    assert run.finish() == 0
    (control / "exit-now").unlink()

    # 3. restarted on B: partition 2 fails for good in the re-run of batch 1, the query ends with its exception
    run = Run(bootstrap, control, b, starting="group", stop="exception", env={"PYLOG_SINK_FAIL_TASK": "2:1"})
    run.wait_files(hold_mid_batch(control, 1), "the restart's batch 1 held")
    stop_and_check(run, bootstrap, 1, trigger=lambda: release(control, "task_written", 2))
    assert any(line.startswith("FAILED") for line in run.lines), run.lines
    (control / "exit-now").touch()
    assert run.finish() == 0
    (control / "exit-now").unlink()

    # 4. restarted on B and SIGKILLed while batch 1's tasks hold open transactions ...
    run = Run(bootstrap, control, b, starting="group", stop="none")
    run.wait_files(hold_mid_batch(control, 1), "batch 1 held before the crash")
    run.kill()
    forget_held(control, kill=True)
    lso, hw = ends(bootstrap)
    assert lso != hw, "the crashed run left no open transaction: the crash came too early to test anything"
    # ... and restarted: the crashed run's transactions are fenced before the restart's tasks write
    for point, partition in (("before_init", 1), ("task_written", 0), ("task_written", 2)):
        release(control, point, partition)
    gates = [hold(control, "before_init", p, 1) for p in range(PARTITIONS)]
    run = Run(bootstrap, control, b, starting="group", stop="none")
    run.wait_files(gates, "the restart's batch 1 held before InitProducerId")
    assert_nothing_open(bootstrap, "the restart planned its first batch")
    for p in range(PARTITIONS):
        release(control, "before_init", p)
    run.read_line("DONE", limit_s=JOB_DEADLINE_S)
    assert run.finish() == 0

    output = Counter(r[2] for r in read_topic(bootstrap, "out"))
    expected = Counter(f"v{i}".encode() for i in range(RECORDS))
    assert output == expected, (f"missing {sum((expected - output).values())}, "
                                f"duplicated {sum((output - expected).values())}")
    assert_nothing_open(bootstrap, "the end")
