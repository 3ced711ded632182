"""End-to-end latency through Spark (JSON on stdout, never pass/fail): produce -> format("pylog") -> transform ->
exactly-once pylog sink -> a read_committed consumer sees the record.

    python -m broker_sim.bench.spark_latency [--latency-records 300] [--interval-ms 50] [--output FILE]
    pylog bench --workload spark-latency [--latency-records N] [--interval-ms MS]

Theory of operation: an embedded broker, a streaming query (``readStream.format("pylog")`` from ``lat_in``,
``startingOffsets=latest``, a ``selectExpr`` that appends the input partition and offset to the value,
``writeStream.format("pylog")`` exactly-once into ``lat_out``, ``trigger(processingTime="0 seconds")``,
local[2]) and, in this process, a confluent-kafka producer (acks=all, linger.ms=0) and a read_committed
consumer. Warm-up records go first until one comes out (the query's start is not a latency); then
``--latency-records`` records are produced one every ``--interval-ms``, each carrying its send time.

Per record, measured, never estimated: ``t0`` its send time, ``t1`` its CreateTime in ``lat_out`` (the
moment the sink task had the transformed row: after the batch was planned, the task launched and the source
fetched it), ``t2`` when the read_committed consumer got it; and from the query's progress, for the
micro-batch whose offset range holds the record's input offset: the trigger's start and Spark's phase
durations. The report gives p50/p99 of ``t2 - t0`` and of its parts, which add up to it:

* ``wait_for_batch_ms``: trigger start - t0 — the record waits for the running batch to finish (the
  source's "fetch wait": with a 0-second trigger a batch starts as soon as the previous one ends);
  negative when the record arrived after the trigger started but before its latestOffset call;
* ``batch_planning_ms``: the batch's latestOffset + getBatch + queryPlanning + walCommit;
* ``execute_ms``: t1 - (trigger start + planning) — task launch, the Fetch and the transform;
* ``produce_and_commit_ms``: t2 - t1 — the task's Produce, the driver's transaction commit (sink log
  intent, EndTxn, markers) and the consumer's fetch of the committed record.

Per batch: medians of every ``durationMs`` phase (``addBatch`` holds the tasks and the sink commit).
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid

IN_TOPIC, OUT_TOPIC = "lat_in", "lat_out"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from broker_sim.arguments import positive_int
    parser.add_argument("--latency-records", type=positive_int, default=300,
                        help="spark-latency: records measured, produced one at a time (default: 300)")
    parser.add_argument("--interval-ms", type=positive_int, default=50,
                        help="spark-latency: milliseconds between two produced records (default: 50)")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    parser.add_argument("--output", metavar="FILE", help="also write the JSON document to FILE")
    args = parser.parse_args(argv)
    return run_from_args(args, out=sys.stdout, err=sys.stderr)


def run_from_args(args, *, out, err) -> int:
    report = measure(getattr(args, "latency_records", 300), getattr(args, "interval_ms", 50), err)
    document = json.dumps(report, indent=2)
    print(document, file=out)
    if getattr(args, "output", None):
        with open(args.output, "w") as f:
            f.write(document + "\n")
    return 0


def measure(records: int, interval_ms: int, err) -> dict:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic
    from pyspark.sql import SparkSession

    from broker_sim.server.broker import Broker

    spark = (SparkSession.builder.master("local[2]").appName("pylog-bench-latency")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.streaming.numRecentProgressUpdates", "100000")
             .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        with tempfile.TemporaryDirectory(prefix="pylog-bench-latency-") as data_dir, \
                Broker(data_dir, host="127.0.0.1", port=0) as broker:
            bootstrap = broker.bootstrap_servers
            admin = KafkaAdminClient(bootstrap_servers=bootstrap)
            admin.create_topics([NewTopic(t, 2, 1) for t in (IN_TOPIC, OUT_TOPIC)])
            admin.close()
            checkpoint = os.path.join(data_dir, "checkpoint")
            query = (spark.readStream.format("pylog").option("kafka.bootstrap.servers", bootstrap)
                     .option("subscribe", IN_TOPIC).option("startingOffsets", "latest").load()
                     .selectExpr("key", "concat(CAST(value AS STRING), ':', CAST(partition AS STRING), ':', "
                                 "CAST(offset AS STRING)) AS value")
                     .writeStream.format("pylog").option("kafka.bootstrap.servers", bootstrap)
                     .option("topic", OUT_TOPIC).option("checkpointLocation", checkpoint)
                     .trigger(processingTime="0 seconds").start())
            try:
                samples, warmup = _run_traffic(bootstrap, query, records, interval_ms, err)
                progress = _progress_covering(query, samples)
            finally:
                query.stop()
    finally:
        spark.stop()
    report = _report(samples, progress)
    report.update({"records": records, "interval_ms": interval_ms, "warmup_records": warmup,
                   "trigger": "processingTime=0 seconds", "spark_master": "local[2]",
                   "producer": _PRODUCER, "consumer": _CONSUMER})
    return report


_PRODUCER = {"acks": "all", "linger.ms": 0}
_CONSUMER = {"isolation.level": "read_committed", "fetch.wait.max.ms": 10, "fetch.min.bytes": 1}


def _run_traffic(bootstrap: str, query, records: int, interval_ms: int, err) -> tuple[list, int]:
    """Produce warm-up records until one is seen, then the measured ones; (samples, warm-up records)."""
    from confluent_kafka import Consumer, Producer

    producer = Producer({"bootstrap.servers": bootstrap, **_PRODUCER})
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"latency-{uuid.uuid4().hex[:8]}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False, **_CONSUMER})
    consumer.subscribe([OUT_TOPIC])
    seen: dict[str, tuple] = {}
    stop = threading.Event()

    def consume() -> None:
        while not stop.is_set():
            message = consumer.poll(0.05)
            if message is None or message.error():
                continue
            received = time.time()
            seen[message.value().decode()] = (received, message.timestamp()[1] / 1000)

    reader = threading.Thread(target=consume, name="latency-consumer", daemon=True)
    reader.start()
    try:
        warmup, deadline = 0, time.monotonic() + 300
        while not any(v.startswith("warmup|") for v in seen):
            if time.monotonic() > deadline or query.exception() is not None:
                raise RuntimeError(f"no warm-up record came out of the query: {query.exception()}")
            producer.produce(IN_TOPIC, key=b"w", value=f"warmup|{warmup}".encode())
            producer.flush(30)
            warmup += 1
            time.sleep(0.5)
        print(f"spark-latency: warm after {warmup} records; measuring {records}", file=err, flush=True)
        sent = {}
        for i in range(records):
            t0 = time.time()
            producer.produce(IN_TOPIC, key=b"%d" % i, value=f"{i}|{t0!r}".encode())
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


def _progress_covering(query, samples: list[dict]) -> list[dict]:
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
            for partition, offset in _offsets(entry["sources"][0].get("endOffset")).items():
                ends[partition] = max(ends.get(partition, 0), offset)
        if all(ends.get(p, 0) >= end for p, end in needed.items()) or time.monotonic() > deadline:
            return progress
        time.sleep(0.1)


def _report(samples: list[dict], progress: list[dict]) -> dict:
    batches = []
    for entry in progress:
        if not entry.get("numInputRows"):
            continue
        source = entry["sources"][0]
        start, end = _offsets(source.get("startOffset")), _offsets(source.get("endOffset"))
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
        "what": "produce -> readStream pylog -> selectExpr -> writeStream pylog exactly_once -> read_committed "
                "consumer",
        "latency": {name: _summary(values) for name, values in parts.items()},
        "records_without_their_batch": unmatched,
        "batches": len(batches),
        "rows_per_batch_median": statistics.median([e["numInputRows"] for e in progress if e.get("numInputRows")])
        if batches else 0,
        "batch_phase_ms_median": {phase: statistics.median(values) for phase, values in sorted(phases.items())},
    }


def _offsets(value) -> dict[int, int]:
    """``{partition: offset}`` of ``lat_in`` from a progress offset (the connector's JSON)."""
    if isinstance(value, str):
        value = json.loads(value)
    return {int(p): int(o) for p, o in ((value or {}).get(IN_TOPIC) or {}).items()}


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
