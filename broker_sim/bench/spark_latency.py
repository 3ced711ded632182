"""End-to-end latency through Spark (JSON on stdout, never pass/fail): produce -> a streaming query -> a
consumer sees the record, for format("pylog") in both guarantees and Spark's own format("kafka").

    python -m broker_sim.bench.spark_latency [--formats kafka,pylog] [--guarantees at_least_once,exactly_once]
        [--broker pylog|kafka] [--latency-runs 5] [--latency-records 300] [--interval-ms 50] [--output FILE]
    pylog bench --workload spark-latency [--formats ...] [--broker ...] [--latency-runs N] ...

Theory of operation: one broker (pylog's embedded ``Broker``, or Apache Kafka 4.1 through
``broker_sim.local.kafka.KafkaServer`` with ``--broker kafka``), one local[2] SparkSession (Spark's connector
on ``spark.jars`` when ``kafka`` is among ``--formats``), and per run a fresh pair of 2-partition topics and a
streaming query: ``readStream.format(F)`` from the input topic, ``startingOffsets=latest``, a ``selectExpr``
that appends the input partition and offset to the value, ``writeStream.format(F)`` into the output topic,
``trigger(processingTime="0 seconds")``. F is ``kafka`` (Spark's connector, source and sink: the reference)
or ``pylog`` with ``deliveryGuarantee`` at_least_once or exactly_once. The runs alternate the
configurations (kafka, pylog at_least_once, pylog exactly_once, kafka, ...) ``--latency-runs`` times, so a
noisy machine loads them alike. In this process a confluent-kafka producer (acks=all, linger.ms=0) and a
read_committed consumer (assigned, no group) carry the traffic. Warm-up records go first until one comes
out (the query's start is not a latency); then ``--latency-records`` records are produced one every
``--interval-ms``, each carrying its send time.

Per record, measured, never estimated: ``t0`` its send time, ``t1`` its CreateTime in the output topic (the
moment the sink task had the transformed row: after the batch was planned, the task launched and the source
fetched it), ``t2`` when the consumer got it; and from the query's progress, for the micro-batch whose
offset range holds the record's input offset: the trigger's start and Spark's phase durations. Each run
gives p50/p99 of ``t2 - t0`` and of its parts, which add up to it:

* ``wait_for_batch_ms``: trigger start - t0 — the record waits for the running batch to finish (the
  source's "fetch wait": with a 0-second trigger a batch starts as soon as the previous one ends);
  negative when the record arrived after the trigger started but before its latestOffset call;
* ``batch_planning_ms``: the batch's latestOffset + getBatch + queryPlanning + walCommit;
* ``execute_ms``: t1 - (trigger start + planning) — task launch, the Fetch and the transform;
* ``produce_and_commit_ms``: t2 - t1 — the task's Produce, the sink's commit (exactly_once: the driver's
  transaction commit) and the consumer's fetch of the record.

Per batch: medians of every ``durationMs`` phase (``addBatch`` holds the tasks and the sink commit). The
summary gives, per configuration, the median over runs of each run's p50 and p99, and the ratios of pylog's
to format("kafka")'s.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid

FORMATS = ("kafka", "pylog")
GUARANTEES = ("at_least_once", "exactly_once")
BROKERS = ("pylog", "kafka")


def _choices(allowed: tuple, what: str):
    def parse(text: str) -> list[str]:
        names = [n.strip() for n in text.split(",") if n.strip()]
        unknown = [n for n in names if n not in allowed]
        if unknown or not names:
            raise argparse.ArgumentTypeError(f"unknown {what} {', '.join(unknown) or text!r}; "
                                             f"choose from {','.join(allowed)}")
        return list(dict.fromkeys(names))
    return parse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from broker_sim.arguments import positive_int
    parser.add_argument("--latency-records", type=positive_int, default=300,
                        help="spark-latency: records measured per run, produced one at a time (default: 300)")
    parser.add_argument("--interval-ms", type=positive_int, default=50,
                        help="spark-latency: milliseconds between two produced records (default: 50)")
    parser.add_argument("--formats", type=_choices(FORMATS, "format"), default=["pylog"],
                        help="spark-latency: the query's source and sink formats, comma-separated: kafka "
                             "(Spark's connector), pylog (default: pylog)")
    parser.add_argument("--guarantees", type=_choices(GUARANTEES, "delivery guarantee"), default=["exactly_once"],
                        help="spark-latency: format(\"pylog\")'s deliveryGuarantee values, comma-separated "
                             "(default: exactly_once)")
    parser.add_argument("--broker", choices=BROKERS, default="pylog",
                        help="spark-latency: pylog's embedded broker or Apache Kafka 4.1 (default: pylog)")
    parser.add_argument("--latency-runs", type=positive_int, default=1,
                        help="spark-latency: runs of every configuration, alternating (default: 1)")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    parser.add_argument("--output", metavar="FILE", help="also write the JSON document to FILE")
    args = parser.parse_args(argv)
    return run_from_args(args, out=sys.stdout, err=sys.stderr)


def run_from_args(args, *, out, err) -> int:
    report = measure(getattr(args, "latency_records", 300), getattr(args, "interval_ms", 50), err,
                     formats=getattr(args, "formats", ["pylog"]),
                     guarantees=getattr(args, "guarantees", ["exactly_once"]),
                     broker=getattr(args, "broker", "pylog"), runs=getattr(args, "latency_runs", 1))
    document = json.dumps(report, indent=2)
    print(document, file=out)
    if getattr(args, "output", None):
        with open(args.output, "w") as f:
            f.write(document + "\n")
    return 0


def configurations(formats: list[str], guarantees: list[str]) -> list[str]:
    """The measured configurations, in the order of each run: ``kafka``, ``pylog-<guarantee>``..."""
    names = []
    for fmt in formats:
        names += ["kafka"] if fmt == "kafka" else [f"pylog-{g}" for g in guarantees]
    return names


@contextlib.contextmanager
def _broker(kind: str, data_dir: str):
    """The bootstrap servers of a running broker of ``kind`` (stopped on exit)."""
    if kind == "kafka":
        from broker_sim.local.kafka import KafkaServer
        with KafkaServer(os.path.join(data_dir, "kafka")) as server:
            yield server.bootstrap_servers
    else:
        from broker_sim.server.broker import Broker
        with Broker(os.path.join(data_dir, "pylog"), host="127.0.0.1", port=0) as broker:
            yield broker.bootstrap_servers


def measure(records: int, interval_ms: int, err, *, formats=("pylog",), guarantees=("exactly_once",),
            broker: str = "pylog", runs: int = 1) -> dict:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    names = configurations(list(formats), list(guarantees))
    builder = (SparkSession.builder.master("local[2]").appName("pylog-bench-latency")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.streaming.numRecentProgressUpdates", "100000")
               .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1"))
    if "kafka" in names:
        from broker_sim.local.spark_kafka import spark_kafka_jars
        builder = builder.config("spark.jars", ",".join(spark_kafka_jars()))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    results: dict[str, list] = {name: [] for name in names}
    try:
        with tempfile.TemporaryDirectory(prefix="pylog-bench-latency-") as data_dir, \
                _broker(broker, data_dir) as bootstrap:
            for run in range(runs):
                for name in names:
                    print(f"spark-latency: run {run + 1}/{runs}: {name}", file=err, flush=True)
                    results[name].append(_one_run(spark, bootstrap, name, f"{run}-{name}", data_dir, records,
                                                  interval_ms, err))
    finally:
        spark.stop()
    report = {"what": "produce -> readStream F -> selectExpr -> writeStream F -> read_committed consumer",
              "broker": broker, "records": records, "interval_ms": interval_ms, "runs": runs,
              "trigger": "processingTime=0 seconds", "spark_master": "local[2]",
              "producer": _PRODUCER, "consumer": _CONSUMER, "summary": _summarize(results),
              "configurations": results}
    return report


def _one_run(spark, bootstrap: str, name: str, tag: str, data_dir: str, records: int, interval_ms: int,
             err) -> dict:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    in_topic, out_topic = f"lat_in_{tag}".replace("_", "-"), f"lat_out_{tag}".replace("_", "-")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(t, 2, 1) for t in (in_topic, out_topic)])
    finally:
        admin.close()
    fmt, _, guarantee = name.partition("-")
    checkpoint = os.path.join(data_dir, f"checkpoint-{tag}")
    source = (spark.readStream.format(fmt).option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", in_topic).option("startingOffsets", "latest").load()
              .selectExpr("key", "concat(CAST(value AS STRING), ':', CAST(partition AS STRING), ':', "
                          "CAST(offset AS STRING)) AS value"))
    sink = (source.writeStream.format(fmt).option("kafka.bootstrap.servers", bootstrap)
            .option("topic", out_topic).option("checkpointLocation", checkpoint))
    if guarantee:
        sink = sink.option("deliveryGuarantee", guarantee)
    query = sink.trigger(processingTime="0 seconds").start()
    try:
        samples, warmup = _run_traffic(bootstrap, in_topic, out_topic, query, records, interval_ms, err)
        progress = _progress_covering(query, samples, in_topic)
    finally:
        query.stop()
    report = _report(samples, progress, in_topic)
    report["warmup_records"] = warmup
    return report


def _summarize(results: dict[str, list]) -> dict:
    """Per configuration the median over runs of each run's p50/p99 (and per phase); pylog's ratios to kafka's."""
    summary: dict[str, dict] = {}
    for name, runs in results.items():
        entry: dict = {}
        for part in runs[0]["latency"] if runs else ():
            for q in ("p50", "p99"):
                values = [r["latency"][part].get(q) for r in runs if r["latency"][part].get(q) is not None]
                if values:
                    entry[f"{part}_{q}_median"] = round(statistics.median(values), 1)
        entry["end_to_end_p50_runs"] = [r["latency"]["end_to_end_ms"].get("p50") for r in runs]
        entry["end_to_end_p99_runs"] = [r["latency"]["end_to_end_ms"].get("p99") for r in runs]
        phases: dict[str, list] = {}
        for r in runs:
            for phase, ms in r["batch_phase_ms_median"].items():
                phases.setdefault(phase, []).append(ms)
        entry["batch_phase_ms_median"] = {p: statistics.median(v) for p, v in sorted(phases.items())}
        summary[name] = entry
    kafka = summary.get("kafka")
    if kafka:
        ratios = {}
        for name, entry in summary.items():
            if name == "kafka":
                continue
            for q in ("p50", "p99"):
                key = f"end_to_end_ms_{q}_median"
                if entry.get(key) and kafka.get(key):
                    ratios[f"{name}_{q}_to_kafka"] = round(entry[key] / kafka[key], 3)
        summary["ratios"] = ratios
    return summary


_PRODUCER = {"acks": "all", "linger.ms": 0}
_CONSUMER = {"isolation.level": "read_committed", "fetch.wait.max.ms": 10, "fetch.min.bytes": 1}


def _run_traffic(bootstrap: str, in_topic: str, out_topic: str, query, records: int, interval_ms: int,
                 err) -> tuple[list, int]:
    """Produce warm-up records until one is seen, then the measured ones; (samples, warm-up records)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": bootstrap, **_PRODUCER})
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"latency-{uuid.uuid4().hex[:8]}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False, **_CONSUMER})
    consumer.assign([TopicPartition(out_topic, p, OFFSET_BEGINNING) for p in (0, 1)])
    seen: dict[str, tuple] = {}
    stop = threading.Event()

    def consume() -> None:
        while not stop.is_set():
            message = consumer.poll(0.05)
            if message is None or message.error():
                continue
            received = time.time()
            seen.setdefault(message.value().decode(), (received, message.timestamp()[1] / 1000))

    reader = threading.Thread(target=consume, name="latency-consumer", daemon=True)
    reader.start()
    try:
        warmup, deadline = 0, time.monotonic() + 300
        while not any(v.startswith("warmup|") for v in seen):
            if time.monotonic() > deadline or query.exception() is not None:
                raise RuntimeError(f"no warm-up record came out of the query: {query.exception()}")
            producer.produce(in_topic, key=b"w", value=f"warmup|{warmup}".encode())
            producer.flush(30)
            warmup += 1
            time.sleep(0.5)
        print(f"spark-latency: warm after {warmup} records; measuring {records}", file=err, flush=True)
        sent = {}
        for i in range(records):
            t0 = time.time()
            producer.produce(in_topic, key=b"%d" % i, value=f"{i}|{t0!r}".encode())
            producer.poll(0)
            sent[i] = t0
            time.sleep(interval_ms / 1000)
        if producer.flush(60):
            raise RuntimeError("the measured records were not all delivered")
        deadline = time.monotonic() + 300
        while sum(1 for v in seen if not v.startswith("warmup|")) < records:
            if time.monotonic() > deadline or query.exception() is not None:
                raise RuntimeError(f"only {len(seen)} records came out: {query.exception()}")
            time.sleep(0.05)
    finally:
        stop.set()
        reader.join(10)
        consumer.close()
    samples = []
    for value, (t2, t1) in seen.items():
        if value.startswith("warmup|"):
            continue
        payload, partition, offset = value.rsplit(":", 2)
        i, t0 = payload.split("|")
        samples.append({"t0": float(t0), "t1": t1, "t2": t2, "partition": int(partition), "offset": int(offset)})
    return samples, warmup


_PLANNING = ("latestOffset", "getBatch", "queryPlanning", "walCommit")


def _progress_covering(query, samples: list[dict], in_topic: str) -> list[dict]:
    """The query's progress once it reports the batches of every sample (a batch's records are visible to the
    consumer before Spark posts its progress)."""
    needed = {}
    for s in samples:
        needed[s["partition"]] = max(needed.get(s["partition"], -1), s["offset"] + 1)
    deadline = time.monotonic() + 60
    while True:
        progress = list(query.recentProgress)
        ends: dict[int, int] = {}
        for entry in progress:
            for partition, offset in _offsets(entry["sources"][0].get("endOffset"), in_topic).items():
                ends[partition] = max(ends.get(partition, 0), offset)
        if all(ends.get(p, 0) >= end for p, end in needed.items()) or time.monotonic() > deadline:
            return progress
        time.sleep(0.1)


def _report(samples: list[dict], progress: list[dict], in_topic: str) -> dict:
    batches = []
    for entry in progress:
        if not entry.get("numInputRows"):
            continue
        source = entry["sources"][0]
        start, end = _offsets(source.get("startOffset"), in_topic), _offsets(source.get("endOffset"), in_topic)
        started = dt.datetime.fromisoformat(entry["timestamp"].replace("Z", "+00:00")).timestamp()
        durations = entry.get("durationMs") or {}
        batches.append((start, end, started, sum(durations.get(p, 0) for p in _PLANNING) / 1000, durations))
    parts = {"end_to_end_ms": [], "wait_for_batch_ms": [], "batch_planning_ms": [], "execute_ms": [],
             "produce_and_commit_ms": []}
    unmatched = 0
    for s in samples:
        batch = next((b for b in batches if b[0].get(s["partition"], 0) <= s["offset"] < b[1].get(s["partition"], -1)),
                     None)
        parts["end_to_end_ms"].append((s["t2"] - s["t0"]) * 1000)
        parts["produce_and_commit_ms"].append((s["t2"] - s["t1"]) * 1000)
        if batch is None:
            unmatched += 1
            continue
        _, _, started, planning, _ = batch
        parts["wait_for_batch_ms"].append((started - s["t0"]) * 1000)
        parts["batch_planning_ms"].append(planning * 1000)
        parts["execute_ms"].append((s["t1"] - started - planning) * 1000)
    phases: dict[str, list] = {}
    for *_, durations in batches:
        for phase, ms in durations.items():
            phases.setdefault(phase, []).append(ms)
    return {
        "latency": {name: _summary(values) for name, values in parts.items()},
        "records_without_their_batch": unmatched,
        "batches": len(batches),
        "rows_per_batch_median": statistics.median([e["numInputRows"] for e in progress if e.get("numInputRows")])
        if batches else 0,
        "batch_phase_ms_median": {phase: statistics.median(values) for phase, values in sorted(phases.items())},
    }


def _offsets(value, topic: str) -> dict[int, int]:
    """``{partition: offset}`` of ``topic`` from a progress offset (both connectors' JSON)."""
    if isinstance(value, str):
        value = json.loads(value)
    return {int(p): int(o) for p, o in ((value or {}).get(topic) or {}).items()}


def _summary(values: list[float]) -> dict:
    if not values:
        return {"count": 0}
    ordered = sorted(values)

    def quantile(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)
    return {"count": len(values), "p50": quantile(0.5), "p99": quantile(0.99), "min": round(ordered[0], 1),
            "max": round(ordered[-1], 1), "mean": round(statistics.fmean(values), 1)}


if __name__ == "__main__":
    sys.exit(main())
