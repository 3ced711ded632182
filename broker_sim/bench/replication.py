"""``pylog bench --workload cluster``: the price of replication and the time to fail over.

Examples::

    $ pylog bench --workload cluster                          # 1,000,000 x 100 B, 3 rounds, 5 failovers
    $ pylog bench --workload cluster --cluster-records 100000 --rounds 1 --failover-rounds 3
    $ python -m broker_sim.bench.replication --output cluster.json

Theory of operation
-------------------
One run starts one 3-broker :class:`~broker_sim.local.cluster.LocalCluster`
(real ZooKeeper, broker processes on 127.0.0.1, the fast-failover settings of
the cluster tests) and measures two things on it:

1. *Replication cost*: confluent-kafka produces ``--cluster-records`` values of
   ``--record-size`` bytes to a fresh one-partition topic with RF=3,
   ``min.insync.replicas=2`` and ``acks=all``, and to a fresh one-partition
   topic with RF=1 and ``acks=1`` (the same timed workload as ``pylog bench``:
   first ``produce()`` to ``flush()`` returning). Rounds alternate which goes
   first; the report gives medians and their ratio RF=3/RF=1. The anchor is
   Kafka's own published figure: in "Benchmarking Apache Kafka: 2 Million
   Writes Per Second (On Three Cheap Machines)" (Jay Kreps, LinkedIn, 2014), one
   producer reached 821,557 records/s without replication and 421,823
   records/s with 3x synchronous replication (acks=all): 0.51x.
2. *Failover time*: a producer sends ``acks=all`` (idempotent) to an RF=3
   partition in a loop, one record every ``--failover-interval-ms``; the
   partition's leader is SIGKILLed; the time from the kill to the first
   acknowledgement of a record that was *enqueued after the kill* is the
   failover time (such a record can only have been acknowledged by the new
   leader: the old one was dead before it was sent). Each round then restarts
   the killed broker and waits for a full ISR. The time until a broker's
   Metadata names a new leader (polled every 100 ms) is reported next to it.
   Both are dominated by ``zookeeper.session.timeout.ms`` (the controller
   learns of the death when the broker's ephemeral znode expires), which the
   report states.

All brokers and the client share this machine's CPUs (the JSON gives the
count): RF=3 runs three broker processes' worth of work where RF=1 runs one,
so on a small machine the ratio measures CPU sharing as much as protocol cost.
The benchmark never fails a build: it prints JSON and exits 0 (2 for bad options).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from typing import TextIO

from broker_sim.arguments import positive_int
from broker_sim.bench import runner
from broker_sim.bench import workloads
from broker_sim.local.cluster import ClusterError, LocalCluster, free_port
from broker_sim.progress import Progress, progress_wanted

BROKERS = 3
KREPS_2014 = {
    "no_replication_records_per_s": 821_557,
    "three_x_sync_replication_records_per_s": 421_823,
    "ratio": 0.51,
    "source": "Jay Kreps, 'Benchmarking Apache Kafka: 2 Million Writes Per Second (On Three Cheap Machines)', "
              "LinkedIn engineering blog, 2014: single producer thread, 100-byte records, 3x synchronous "
              "replication (acks=all) vs no replication",
}
CLUSTER_CONFIGS = {
    "zookeeper.session.timeout.ms": "3000",
    "replica.lag.time.max.ms": "3000",
    "leader.imbalance.check.interval.seconds": "5",
}
FAILOVER_PRODUCER = {
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": 0,
    "retry.backoff.ms": 20,
    "retry.backoff.max.ms": 100,
    "reconnect.backoff.ms": 20,
    "reconnect.backoff.max.ms": 100,
    "topic.metadata.refresh.fast.interval.ms": 50,
    "message.timeout.ms": 60_000,
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``--workload cluster`` (``--rounds``, ``--record-size``, ``--timeout-s`` and
    ``--output`` are shared with the throughput workload)."""
    options = parser.add_argument_group("--workload cluster")
    options.add_argument("--cluster-records", type=positive_int, default=1_000_000,
                         help="records per produce measurement (default: 1000000)")
    options.add_argument("--failover-rounds", type=positive_int, default=5,
                         help="leader kills measured (default: 5)")
    options.add_argument("--failover-interval-ms", type=positive_int, default=2,
                         help="one acks=all record every this many ms during failover (default: 2)")


def _standalone_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m broker_sim.bench.replication",
                                     description="RF=3 acks=all vs RF=1 acks=1 throughput and failover time (JSON).")
    parser.add_argument("--rounds", type=positive_int, default=3, help="throughput rounds (default: 3)")
    parser.add_argument("--record-size", type=positive_int, default=100, help="value bytes (default: 100)")
    parser.add_argument("--timeout-s", type=positive_int, default=300, help="deadline per workload (default: 300)")
    parser.add_argument("--output", metavar="FILE", help="also write the JSON document to FILE")
    parser.add_argument("--progress", action="store_true", help="progress lines on stderr")
    add_arguments(parser)
    return parser


def run_from_args(args: argparse.Namespace, *, out: TextIO, err: TextIO) -> int:
    """Run the cluster benchmark for parsed *args*, print the JSON to *out*; return 0."""
    report = run_bench(args, err=err, show_progress=progress_wanted(getattr(args, "progress", False), err))
    runner.print_report(report, args.output, out=out)
    return 0


def run_bench(args: argparse.Namespace, *, err: TextIO, show_progress: bool) -> dict:
    """Start the cluster, run both measurements, stop it; return the report dict."""
    report: dict = {"workload": _workload(args)}
    ceiling = workloads.confluent_enqueue_ceiling(args.cluster_records, args.record_size, free_port())
    report["workload"]["confluent_enqueue_ceiling"] = ceiling
    print(f"bench cluster: confluent-kafka enqueue ceiling (no broker): {ceiling['records_per_s']:,.0f} records/s",
          file=err, flush=True)
    with tempfile.TemporaryDirectory(prefix="pylog-bench-cluster-") as directory:
        cluster = LocalCluster(directory, brokers=BROKERS, configs=CLUSTER_CONFIGS)
        try:
            started = time.perf_counter()
            cluster.start()
            report["workload"]["cluster_start_s"] = round(time.perf_counter() - started, 2)
            print(f"bench cluster: {BROKERS} brokers up at {cluster.bootstrap_servers}", file=err, flush=True)
            report["throughput"] = _throughput(cluster, args, err, show_progress)
            report["failover"] = _failover(cluster, args, err)
        except ClusterError as exc:
            report["error"] = str(exc)
            print(f"bench cluster: {exc}", file=err, flush=True)
        finally:
            cluster.stop_all()
    report["results"] = _results(report)
    return report


def _throughput(cluster: LocalCluster, args, err: TextIO, show_progress: bool) -> dict:
    runs = []
    kinds = (("rf3_acksall", 3, "all"), ("rf1_acks1", 1, "1"))
    for round_number in range(1, args.rounds + 1):
        order = kinds if round_number % 2 == 0 else tuple(reversed(kinds))
        for name, replication_factor, acks in order:
            topic = f"bench-{name.replace('_', '-')}-{round_number}"
            run = {"round": round_number, "kind": name, "topic": topic}
            try:
                _create_topic(cluster, topic, replication_factor, args.timeout_s)
                run["leader"] = cluster.leader_of(topic, 0)
                progress = Progress(f"cluster r{round_number} {name}", enabled=show_progress,
                                    total=args.cluster_records, stream=err)
                run.update(workloads.confluent_produce(cluster.bootstrap_servers, topic, args.cluster_records,
                                                       args.record_size, acks, args.timeout_s, progress))
            except Exception as exc:  # noqa: BLE001 - any failure is a result to report
                run["error"] = f"{type(exc).__name__}: {exc}"
            shown = (f"{run['records_per_s']:,.0f} records/s" if "records_per_s" in run
                     else f"error: {run.get('error')}")
            print(f"bench cluster: round {round_number} {name}: {shown}", file=err, flush=True)
            runs.append(run)
    return {"runs": runs}


def _create_topic(cluster: LocalCluster, topic: str, replication_factor: int, timeout_s: float) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    configs = {"min.insync.replicas": "2"} if replication_factor >= 2 else {}
    futures = admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=replication_factor,
                                            config=configs)], operation_timeout=30, request_timeout=30)
    futures[topic].result(30)
    cluster.wait_for_full_isr(topic, 1, timeout_s=min(timeout_s, 60))


class _LoopProducer(threading.Thread):
    """Sends one acks=all record every *interval_s*; records when each acknowledgement arrived."""

    def __init__(self, bootstrap: str, topic: str, interval_s: float) -> None:
        super().__init__(name="bench-failover-producer", daemon=True)
        self.bootstrap, self.topic, self.interval_s = bootstrap, topic, interval_s
        self.stop_event = threading.Event()
        self.kill_time: float | None = None        # set by the main thread just before the kill
        self.first_ack_after_kill: float | None = None
        self.acked = 0
        self.errors: list[str] = []

    def run(self) -> None:
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.bootstrap, **FAILOVER_PRODUCER, "log_level": 2})
        seq = 0
        while not self.stop_event.is_set():
            enqueued = time.monotonic()
            after_kill = self.kill_time is not None and enqueued > self.kill_time
            producer.produce(self.topic, f"failover-{seq}".encode(), partition=0,
                             on_delivery=lambda err, msg, a=after_kill: self._delivered(err, a))
            seq += 1
            producer.poll(self.interval_s)
        producer.flush(10)

    def _delivered(self, err, enqueued_after_kill: bool) -> None:
        if err is not None:
            if len(self.errors) < 5:
                self.errors.append(str(err))
            return
        self.acked += 1
        if enqueued_after_kill and self.first_ack_after_kill is None:
            self.first_ack_after_kill = time.monotonic()


def _failover(cluster: LocalCluster, args, err: TextIO) -> dict:
    topic = "bench-failover"
    runs = []
    try:
        _create_topic(cluster, topic, 3, args.timeout_s)
    except Exception as exc:  # noqa: BLE001
        return {"error": f"creating {topic} failed: {type(exc).__name__}: {exc}", "runs": []}
    for round_number in range(1, args.failover_rounds + 1):
        run: dict = {"round": round_number}
        producer = _LoopProducer(cluster.bootstrap_servers, topic, args.failover_interval_ms / 1000)
        try:
            cluster.wait_for_full_isr(topic, 1, timeout_s=60)
            old = cluster.leader_of(topic, 0)
            run["killed_leader"] = old
            producer.start()
            _wait(lambda: producer.acked >= 200, 30, "the producer to get acknowledgements before the kill")
            killed = time.monotonic()
            cluster.kill(old)                      # returns once the process is dead and reaped
            producer.kill_time = time.monotonic()  # records enqueued from now on cannot reach the old leader
            elected = cluster.wait_for(
                lambda md: md.partitions.get((topic, 0)) if md.partitions.get((topic, 0)) is not None
                and md.partitions[(topic, 0)].leader not in (-1, old) else None,
                topics=[topic], timeout_s=60, what=f"a new leader of {topic}-0")
            run["leader_elected_ms"] = round((time.monotonic() - killed) * 1000, 1)
            run["new_leader"] = elected.leader
            _wait(lambda: producer.first_ack_after_kill is not None, 60,
                  "an acknowledgement from the new leader")
            run["failover_ms"] = round((producer.first_ack_after_kill - killed) * 1000, 1)
            print(f"bench cluster: failover {round_number}: killed {old}, new leader {elected.leader} after "
                  f"{run['leader_elected_ms']:.0f} ms (metadata), first ack after {run['failover_ms']:.0f} ms",
                  file=err, flush=True)
        except Exception as exc:  # noqa: BLE001
            run["error"] = f"{type(exc).__name__}: {exc}"
            print(f"bench cluster: failover {round_number}: {run['error']}", file=err, flush=True)
        finally:
            producer.stop_event.set()
            producer.join(30)
            run["acked"] = producer.acked
            if producer.errors:
                run["delivery_errors"] = producer.errors
            try:
                cluster.heal(wait=True)
            except ClusterError as exc:
                run["heal_error"] = str(exc)
        runs.append(run)
    return {"runs": runs}


def _wait(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} within {timeout_s:g} s")
        time.sleep(0.005)


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 1) if values else None


def _results(report: dict) -> dict:
    runs = report.get("throughput", {}).get("runs", [])
    rates = {kind: [r["records_per_s"] for r in runs if r["kind"] == kind and "records_per_s" in r]
             for kind in ("rf3_acksall", "rf1_acks1")}
    rf3, rf1 = _median(rates["rf3_acksall"]), _median(rates["rf1_acks1"])
    failovers = report.get("failover", {}).get("runs", [])
    results = {
        "produce_rf3_acksall_records_per_s": rf3,
        "produce_rf1_acks1_records_per_s": rf1,
        "produce_rf3_acksall_rounds": len(rates["rf3_acksall"]),
        "produce_rf1_acks1_rounds": len(rates["rf1_acks1"]),
        "ratio_rf3_acksall_over_rf1_acks1": round(rf3 / rf1, 3) if rf3 and rf1 else None,
        "anchor_kafka_ratio": KREPS_2014["ratio"],
        "failover_ms_median": _median([r["failover_ms"] for r in failovers if "failover_ms" in r]),
        "failover_ms": [r["failover_ms"] for r in failovers if "failover_ms" in r],
        "leader_elected_ms_median": _median([r["leader_elected_ms"] for r in failovers if "leader_elected_ms" in r]),
        "failover_rounds": len([r for r in failovers if "failover_ms" in r]),
    }
    errors = [f"throughput round {r['round']} {r['kind']}: {r['error']}" for r in runs if "error" in r]
    errors += [f"failover round {r['round']}: {r['error']}" for r in failovers if "error" in r]
    if errors:
        results["errors"] = errors
    return results


def _workload(args) -> dict:
    return {
        "brokers": BROKERS,
        "broker_configs": CLUSTER_CONFIGS,
        "records": args.cluster_records,
        "record_size_bytes": args.record_size,
        "partitions": 1,
        "throughput_rounds": args.rounds,
        "throughput_order": "alternating: round 1 rf1_acks1 then rf3_acksall, round 2 the other way, ...",
        "rf3": {"replication_factor": 3, "min.insync.replicas": 2, "acks": "all"},
        "rf1": {"replication_factor": 1, "acks": "1"},
        "confluent_producer_config": {**workloads.CONFLUENT_PRODUCER, "acks": "1 | all"},
        "failover_rounds": args.failover_rounds,
        "failover_producer_config": FAILOVER_PRODUCER,
        "failover_interval_ms": args.failover_interval_ms,
        "failover_definition": "SIGKILL of the partition leader -> first acknowledgement of a record enqueued "
                               "after the kill (so acknowledged by the new leader); leader_elected_ms: kill -> "
                               "a broker's Metadata names another leader (polled every 100 ms)",
        "anchor": KREPS_2014,
        "clients": runner.client_versions(),
        **runner.machine(),
        "notes": [
            "All brokers, ZooKeeper and the client share this machine's CPUs.",
            "Failover time is bounded below by zookeeper.session.timeout.ms: the controller acts when the dead "
            "broker's ephemeral registration expires.",
            "librdkafka looks the lost leader up about once a second while the partition has none (seen in its "
            "debug log), so failover_ms includes up to ~1 s of client-side discovery after the election; "
            "leader_elected_ms is the broker-side part.",
            "confluent_enqueue_ceiling is produce() calls into librdkafka with no broker: throughput close to it "
            "means the Python client loop, not the cluster, was the limit, and the ratio understates the cost of "
            "replication.",
        ],
    }


def main(argv=None) -> int:
    args = _standalone_parser().parse_args(argv)
    return run_from_args(args, out=sys.stdout, err=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
