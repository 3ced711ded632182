"""``pylog bench --workload kafka-start``: Apache Kafka's start and memory beside broker_sim's, in one run.

Example::

    $ pylog bench --workload kafka-start --rounds 5
    $ python -m broker_sim.bench.kafka_start --pairs 5

Each pair starts one Apache Kafka node (``broker_sim.local.kafka.KafkaServer``: KRaft, broker and controller,
from the cached jars, its directory copied from a formatted one) and one broker_sim process (``python -m
broker_sim``), alternating which goes first, each from spawn until it answers a Metadata request listing itself
(what a client needs, not only a TCP accept). Then both stay idle for ``--settle-s`` and their resident memory is
read from /proc, with the process's CPU time over the start. Kafka runs with the launcher's settings (C1 only, a
class-data-sharing archive when the cache has one, ``-Xmx512m``); ``kafka_plain`` starts it without the archive
too, so the archive's share is visible.

The report (JSON on stdout): ``{"workload": "kafka-start", "results": {kind: {"ready_ms": median, "rss_mb":
median, "cpu_ms": median, "samples": [...]}}, "ratios": {"ready_ms": kafka / pylog, "rss_mb": kafka / pylog}}``;
above 1 means Kafka needs more. The benchmark never fails a build.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TextIO

from broker_sim.local.cluster import fetch_metadata
from broker_sim.local.kafka import KafkaServer, kafka_available
from broker_sim.local.zookeeper import free_port

HOST = "127.0.0.1"
READY_TIMEOUT_S = 120.0


def _rss_mb(pid: int) -> float:
    pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    return round(pages * os.sysconf("SC_PAGE_SIZE") / 2**20, 1)


def _cpu_ms(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return round((int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK"), 1)


def _wait_ready(port: int, process: subprocess.Popen, started: float) -> float:
    deadline = started + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the broker exited with status {process.returncode} before it was ready")
        try:
            if fetch_metadata(HOST, port, (), timeout_s=1.0).brokers:
                return (time.monotonic() - started) * 1000
        except (OSError, ValueError):
            pass
        time.sleep(0.01)
    raise RuntimeError(f"no Metadata answer on port {port} within {READY_TIMEOUT_S:g} s")


def sample_pylog(idle_s: float) -> dict:
    with tempfile.TemporaryDirectory() as data_dir:
        port = free_port()
        started = time.monotonic()
        process = subprocess.Popen([sys.executable, "-m", "broker_sim", "--data-dir", data_dir, "--host", HOST,
                                    "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            ready_ms = _wait_ready(port, process, started)
            cpu_ms = _cpu_ms(process.pid)
            time.sleep(idle_s)
            return {"ready_ms": round(ready_ms, 1), "cpu_ms": cpu_ms, "rss_mb": _rss_mb(process.pid)}
        finally:
            process.terminate()
            process.wait(30)


def sample_kafka(idle_s: float, *, class_archive: bool = True) -> dict:
    with tempfile.TemporaryDirectory() as data_dir:
        server = KafkaServer(data_dir, use_class_archive=class_archive)
        started = time.monotonic()
        server.start(wait=False)
        process = server.nodes[1].process
        try:
            ready_ms = _wait_ready(server.port, process, started)
            cpu_ms = _cpu_ms(process.pid)
            time.sleep(idle_s)
            return {"ready_ms": round(ready_ms, 1), "cpu_ms": cpu_ms, "rss_mb": _rss_mb(process.pid)}
        finally:
            server.stop_all()


def run(pairs: int, idle_s: float, err: TextIO) -> dict:
    reason = kafka_available()
    if reason:
        return {"workload": "kafka-start", "skipped": reason}
    samples: dict[str, list[dict]] = {"kafka": [], "kafka_plain": [], "pylog": []}
    for i in range(pairs):
        order = [("pylog", lambda: sample_pylog(idle_s)), ("kafka", lambda: sample_kafka(idle_s)),
                 ("kafka_plain", lambda: sample_kafka(idle_s, class_archive=False))]
        if i % 2:
            order.reverse()
        for kind, sample in order:
            samples[kind].append(sample())
            print(f"kafka-start: pair {i + 1}/{pairs} {kind} {samples[kind][-1]}", file=err, flush=True)
    results = {kind: {key: statistics.median(s[key] for s in runs) for key in ("ready_ms", "cpu_ms", "rss_mb")}
               | {"samples": runs} for kind, runs in samples.items()}
    return {"workload": "kafka-start", "pairs": pairs, "idle_s": idle_s,
            "results": results,
            "ratios": {key: round(results["kafka"][key] / results["pylog"][key], 2)
                       for key in ("ready_ms", "cpu_ms", "rss_mb")}}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--settle-s", type=float, default=2.0,
                        help="kafka-start: idle seconds after the start before memory is read (default: 2)")


def run_from_args(args: argparse.Namespace, *, out: TextIO, err: TextIO) -> int:
    """``pylog bench --workload kafka-start``: --rounds alternating pairs."""
    from broker_sim.bench import runner

    runner.print_report(run(args.rounds, args.settle_s, err), args.output, out=out)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m broker_sim.bench.kafka_start",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=5, help="alternating samples per kind (default: 5)")
    add_arguments(parser)
    args = parser.parse_args(argv)
    print(json.dumps(run(args.pairs, args.settle_s, sys.stderr), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
