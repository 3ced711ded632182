"""``pylog bench --workload partitions``: what thousands of partitions cost a broker, and what fetch sessions save.

Examples::

    $ pylog bench --workload partitions                         # 1,000 and 10,000 partitions
    $ pylog bench --workload partitions --partition-counts 1000,5000 --idle-s 10
    $ python -m broker_sim.bench.partitions --sessions-partitions 5000   # also the follower's idle CPU

Theory of operation: for each count of ``--partition-counts`` a fresh broker process (``python -m broker_sim``,
its own data dir) gets that many partitions as topics of ``--partitions-per-topic`` (one CreateTopics request),
then the report measures, on that broker: the creation time (the request's round trip); its idle CPU (user +
system time from /proc over ``--idle-s`` seconds with no client, as a percentage of one core); its RSS; the time
of an all-topics Metadata request (median of 3); the clean stop time (SIGTERM to exit: every partition's
active segment is sealed and fsynced); and the restart time: a new process on the same data dir until an
all-topics Metadata names every partition.  ``growth`` divides each figure at the largest
count by the figure at the smallest.

``--sessions-partitions N`` (0: skipped) adds a 2-broker :class:`~broker_sim.local.cluster.LocalCluster` run:
a topic of N partitions with RF=2 (so each broker leads half and follows half), then both brokers' idle CPU
over ``--idle-s``, once with fetch sessions (KIP-227, the default) and once with
``max.incremental.fetch.session.cache.slots=0`` (every follower fetch names, and is answered for, every
partition); ``sessions_ratio`` is with / without.

Prints one JSON document; never fails a build (exit 0; 2 for bad options).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from typing import TextIO

from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.metadata import MetadataRequest

from broker_sim.arguments import positive_int
from broker_sim.bench.brokers import BrokerProcess, process_cpu_s, pylog_broker
from broker_sim.protocol.client import WireConnection

def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def idle_cpu_percent(pids: list[int], seconds: float) -> list[float]:
    before = [process_cpu_s(pid) for pid in pids]
    time.sleep(seconds)
    return [round((process_cpu_s(pid) - start) / seconds * 100, 2) for pid, start in zip(pids, before)]


def _metadata(connection: WireConnection) -> tuple[float, int]:
    """(seconds, partitions named) of one all-topics Metadata request."""
    started = time.perf_counter()
    response = connection.call(MetadataRequest[12](topics=None, allow_auto_topic_creation=False,
                                                   include_topic_authorized_operations=False), timeout_s=120)
    return time.perf_counter() - started, sum(len(topic.partitions) for topic in response.topics)


def _create(connection: WireConnection, count: int, per_topic: int) -> float:
    topics, left, number = [], count, 0
    while left > 0:
        size = min(per_topic, left)
        topics.append(CreateTopicsRequest.CreatableTopic(name=f"bench-{number:05d}", num_partitions=size,
                                                         replication_factor=1, assignments=[], configs=[]))
        left -= size
        number += 1
    started = time.perf_counter()
    response = connection.call(CreateTopicsRequest[7](topics=topics, timeout_ms=600_000, validate_only=False),
                               timeout_s=900)
    elapsed = time.perf_counter() - started
    errors = {t.name: t.error_message or t.error_code for t in response.topics if t.error_code}
    if errors:
        raise RuntimeError(f"CreateTopics failed: {dict(list(errors.items())[:3])}")
    return elapsed


def measure_single(count: int, per_topic: int, idle_s: float, err: TextIO) -> dict:
    """One broker process with ``count`` partitions: create time, idle CPU, RSS, Metadata time, restart time."""
    broker = BrokerProcess(pylog_broker())
    try:
        broker.start()
        pid = broker.process.pid
        rss_empty = rss_mb(pid)
        with WireConnection.to(broker.bootstrap_servers, timeout_s=30) as connection:
            create_s = _create(connection, count, per_topic)
            print(f"partitions bench: {count} partitions created in {create_s:.2f} s", file=err)
            time.sleep(min(5.0, idle_s))  # let the creation's garbage and timers settle
            (idle,) = idle_cpu_percent([pid], idle_s)
            rss = rss_mb(pid)
            samples = [_metadata(connection) for _ in range(3)]
        named = samples[0][1]
        stop_started = time.perf_counter()
        broker.process.send_signal(signal.SIGTERM)
        broker.process.wait(900)
        stop_s = time.perf_counter() - stop_started
        restart_started = time.perf_counter()
        broker.start(timeout_s=600)
        with WireConnection.to(broker.bootstrap_servers, timeout_s=30) as connection:
            while _metadata(connection)[1] < count:
                time.sleep(0.05)
        restart_s = time.perf_counter() - restart_started
        return {"partitions": count, "named_by_metadata": named, "create_s": round(create_s, 3),
                "idle_cpu_percent": idle, "rss_mb": round(rss, 1), "rss_empty_mb": round(rss_empty, 1),
                "metadata_all_topics_s": round(statistics.median(s for s, _ in samples), 3),
                "stop_s": round(stop_s, 3), "restart_s": round(restart_s, 3)}
    finally:
        broker.stop()


def measure_sessions(count: int, idle_s: float, err: TextIO) -> dict:
    """Both brokers' idle CPU with RF=2 and ``count`` partitions, with and without fetch sessions."""
    from broker_sim.local.cluster import LocalCluster

    results = {}
    for label, slots in (("with_sessions", "1000"), ("without_sessions", "0")):
        with tempfile.TemporaryDirectory(prefix="pylog-bench-sessions-") as directory:
            cluster = LocalCluster(directory, 2, configs={"max.incremental.fetch.session.cache.slots": slots},
                                   schema_registry=False, log_level="WARNING")
            try:
                cluster.start()
                with WireConnection.to(cluster.bootstrap_servers.split(",")[0], timeout_s=30) as connection:
                    response = connection.call(CreateTopicsRequest[7](topics=[CreateTopicsRequest.CreatableTopic(
                        name="sessions", num_partitions=count, replication_factor=2, assignments=[], configs=[])],
                        timeout_ms=600_000, validate_only=False), timeout_s=900)
                    if response.topics[0].error_code:
                        raise RuntimeError(f"CreateTopics failed: {response.topics[0].error_message}")
                pids = [cluster.pid(broker_id) for broker_id in range(2)]
                _wait_for_full_isr(cluster, count)
                time.sleep(min(5.0, idle_s))
                cpu = idle_cpu_percent(pids, idle_s)
                results[label] = {"idle_cpu_percent_per_broker": cpu, "idle_cpu_percent": round(sum(cpu), 2)}
                print(f"partitions bench: {label}: idle CPU {cpu}", file=err)
            finally:
                cluster.stop_all()
    ratio = (results["with_sessions"]["idle_cpu_percent"] / results["without_sessions"]["idle_cpu_percent"]
             if results["without_sessions"]["idle_cpu_percent"] else None)
    return {"partitions": count, "replication_factor": 2, **results,
            "sessions_ratio": round(ratio, 3) if ratio is not None else None}


def _wait_for_full_isr(cluster, count: int, timeout_s: float = 600) -> None:
    deadline = time.monotonic() + timeout_s
    with WireConnection.to(cluster.bootstrap_servers.split(",")[0], timeout_s=30) as connection:
        while time.monotonic() < deadline:
            response = connection.call(MetadataRequest[12](topics=[MetadataRequest.MetadataRequestTopic(
                name="sessions")], allow_auto_topic_creation=False, include_topic_authorized_operations=False),
                timeout_s=120)
            partitions = response.topics[0].partitions if response.topics else []
            if len(partitions) == count and all(len(p.isr_nodes) == 2 for p in partitions):
                return
            time.sleep(1)
    raise RuntimeError(f"the ISR of {count} partitions did not fill within {timeout_s} s")


def run(counts: list[int], per_topic: int, idle_s: float, sessions_partitions: int, err: TextIO) -> dict:
    results = {}
    for count in counts:
        try:
            results[str(count)] = measure_single(count, per_topic, idle_s, err)
        except Exception as exc:  # recorded, never fatal
            results[str(count)] = {"error": f"{type(exc).__name__}: {exc}"}
        print(f"partitions bench: {json.dumps(results[str(count)])}", file=err)  # progress: a long run shows it
    low, high = results.get(str(min(counts)), {}), results.get(str(max(counts)), {})
    growth = {key: round(high[key] / low[key], 2) for key in ("create_s", "idle_cpu_percent", "rss_mb",
                                                              "metadata_all_topics_s", "stop_s", "restart_s")
              if isinstance(low.get(key), (int, float)) and isinstance(high.get(key), (int, float)) and low[key]}
    report = {"workload": {"partition_counts": counts, "partitions_per_topic": per_topic, "idle_s": idle_s,
                           "cpus": os.cpu_count(), "open_file_limit": _open_file_limit()},
              "results": results, "growth": growth}
    if sessions_partitions:
        try:
            report["fetch_sessions"] = measure_sessions(sessions_partitions, idle_s, err)
        except Exception as exc:
            report["fetch_sessions"] = {"error": f"{type(exc).__name__}: {exc}"}
    return report


def _open_file_limit() -> list[int]:
    import resource
    return list(resource.getrlimit(resource.RLIMIT_NOFILE))


def _counts(text: str) -> list[int]:
    try:
        counts = [int(item) for item in text.split(",") if item.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--partition-counts: {text!r} is not a comma-separated list") from None
    if not counts or any(count < 1 for count in counts):
        raise argparse.ArgumentTypeError(f"--partition-counts: {text!r} needs counts >= 1")
    return counts


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--partition-counts", type=_counts, default=[1000, 10000], metavar="N,N",
                        help="partition counts measured, each on a fresh broker (default: 1000,10000)")
    parser.add_argument("--partitions-per-topic", type=positive_int, default=100,
                        help="partitions per topic (default: 100)")
    parser.add_argument("--idle-s", type=float, default=10.0, help="seconds of idle CPU sampling (default: 10)")
    parser.add_argument("--sessions-partitions", type=int, default=0, metavar="N",
                        help="also measure 2 brokers' idle CPU with RF=2 and N partitions, with and without "
                             "fetch sessions (default: 0, skipped)")


def run_from_args(args: argparse.Namespace, *, out: TextIO, err: TextIO) -> int:
    report = run(args.partition_counts, args.partitions_per_topic, args.idle_s, args.sessions_partitions, err)
    text = json.dumps(report, indent=2)
    print(text, file=out)
    if getattr(args, "output", None):
        with open(args.output, "w") as f:
            f.write(text + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m broker_sim.bench.partitions",
                                     description=__doc__.split("\n")[0])
    add_arguments(parser)
    parser.add_argument("--output", metavar="FILE", help="also write the JSON document to FILE")
    return run_from_args(parser.parse_args(argv), out=sys.stdout, err=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
