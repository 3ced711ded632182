"""librdkafka's own producer benchmark, ``rdkafka_performance``, as a ``pylog bench`` workload.

``rdkafka_performance`` is librdkafka's examples/rdkafka_performance.c: a C producer with no Python in the
client, so its figure is the broker's (plus librdkafka's) and not a Python client loop's. It is not packaged
by Debian; ``ci/build_rdkafka_perf.sh`` builds it from Debian's librdkafka source package against
librdkafka-dev (``ci/bench.sh`` calls it), and ``pylog bench --rdkafka-performance PATH`` adds the workloads
``rdkafka_produce_acks1`` and ``rdkafka_produce_acksall`` to every round of the throughput workload.

The run: ``rdkafka_performance -P -t TOPIC -p 0 -s SIZE -c RECORDS -a ACKS`` with :data:`RDKAFKA_PRODUCER`
(the confluent-kafka workload's batching), to the same one-partition topic kind. Its own summary line gives
the time from its first produce to the last delivery report; a run whose records were not all delivered
(``N delivered``, ``0 failed``), that exits non-zero or outlives the deadline is a workload error.
"""
from __future__ import annotations

import os
import re
import resource
import signal
import subprocess
import tempfile

from broker_sim.bench.workloads import _failure, _result

# Same batching as the confluent-kafka workload (workloads.CONFLUENT_PRODUCER).
RDKAFKA_PRODUCER = {"linger.ms": "5", "batch.size": "1000000", "queue.buffering.max.messages": "2000000"}
# "% 300000 messages produced (30000000 bytes), 300000 delivered (offset 299999, 0 failed) in 1575ms: ..."
SUMMARY = re.compile(r"% (\d+) messages produced \((\d+) bytes\), (\d+) delivered \(offset -?\d+, (\d+) failed\) "
                     r"in (\d+)ms")


def rdkafka_produce(binary: str, bootstrap_servers: str | None, topic: str, records: int, record_size: int,
                    acks: str, timeout_s: float) -> dict:
    """Produce *records* of *record_size* bytes to partition 0 of *topic* with rdkafka_performance; to librdkafka's
    in-process mock broker (``test.mock.num.brokers=1``) when *bootstrap_servers* is None: the client's ceiling.
    The result adds ``client_cpu_ms``, the tool's own CPU (all its threads; from the parent's rusage of its
    children, so nothing else may end as a child meanwhile: the bench runs one workload at a time)."""
    argv = [binary, "-P", "-t", topic, "-p", "0", "-s", str(record_size), "-c", str(records),
            "-a", "-1" if acks == "all" else acks]
    argv += ["-b", bootstrap_servers] if bootstrap_servers is not None else ["-X", "test.mock.num.brokers=1"]
    for name, value in {**RDKAFKA_PRODUCER, "message.timeout.ms": str(int(timeout_s * 1000))}.items():
        argv += ["-X", f"{name}={value}"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryFile() as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            status = process.wait(timeout=timeout_s + 10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            status = None
        out.seek(0)
        text = out.read().decode("utf-8", errors="replace")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    lines = [line for line in text.splitlines() if "CONFWARN" not in line]
    matches = SUMMARY.findall(text)
    if status is None:
        return _failure(f"timeout after {timeout_s:g} s: {' | '.join(lines[-3:])[-400:]}", 0)
    if status != 0 or not matches:
        return _failure(f"rdkafka_performance exited {status}: {' | '.join(lines[-3:])[-400:]}", 0)
    produced, _, delivered, failed, elapsed_ms = (int(v) for v in matches[-1])
    if delivered != records or failed:
        return _failure(f"{delivered} of {records} records delivered, {failed} failed", delivered)
    client_cpu_s = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return {**_result(delivered, record_size, max(elapsed_ms, 1) / 1000),
            "client_cpu_ms": round(client_cpu_s * 1000, 1)}


def executable(path: str) -> str:
    """``--rdkafka-performance``'s argparse type: an executable file, else an error naming it."""
    import argparse

    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise argparse.ArgumentTypeError(f"{path!r} is not an executable file (build it with "
                                         f"ci/build_rdkafka_perf.sh)")
    return os.path.abspath(path)
