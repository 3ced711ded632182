"""format("kafka") against format("pylog"): issue 38's throughput figures, one SparkSession, two brokers (JSON).

    pylog bench --workload spark-vs-kafka [--records 1000000] [--rounds 5] [--matrix-records 200000]
                [--spark-brokers pylog,kafka] [--headline-only] [--cells NAME,...] [--with-latency] [--quick]
                [--output FILE]
    python -m broker_sim.bench.spark_vs_kafka [the same options]

Theory of operation: one local[2] SparkSession with Spark's own connector (spark-sql-kafka-0-10, from
``broker_sim.local.spark_kafka``) on ``spark.jars`` runs the same query through both formats against each broker
in turn: broker_sim as a ``python -m broker_sim`` subprocess (its own interpreter, as Apache Kafka has its own
JVM: the Spark driver's GIL and the broker's are not shared), then Apache Kafka 4.1 (``KafkaServer``, one KRaft
node). A cell is (partitions, value bytes, compression); the headline cell is ``--records`` (1M) rows on 2
partitions, 100 B values, uncompressed (the issue's table), the matrix cells ``--matrix-records`` rows on 1 and 8
partitions, 100 B and 1 KB, none / lz4 / zstd. Per cell the figures are:

1. ``batch_read``: ``spark.read`` of the topic into ``noop``;
2. ``stream_available_now``: ``readStream`` with ``Trigger.AvailableNow`` into ``noop``, start() to termination;
3. ``stream_plain_trigger``: ``readStream`` with the default trigger (processingTime 0) into ``noop``, start() to
   the end of the micro-batch that brought the last row (Spark's progress timestamps), then stopped;
4. ``batch_write``: a Parquet file of the cell's rows (written once, outside the timing) to a fresh topic with
   ``df.write``: format("kafka") (at-least-once), format("pylog") exactly-once (its default) and at-least-once;
5. ``stream_write``: the same rows as a streaming Parquet source (AvailableNow) into each of the three sinks.

Topics to read are produced by confluent-kafka with the cell's ``compression.type`` (values: hex text, which
compresses about 2x, not a repeated byte); writers get ``kafka.compression.type``. Each figure runs ``--rounds``
(at least 5) alternating pairs, the order flipped every round (kafka, pylog, then pylog, kafka), after one
unreported warm-up of each query on each broker; the JSON gives every run's seconds, the medians, rows/s, MB/s
(value bytes, 10**6 per MB) and ``ratio``: the median of the per-round ratios pylog / kafka (above 1: pylog
faster). Streaming figures also give, per format, where the time went: start() to the first trigger, the summed
``durationMs`` phases of the micro-batches, and the batches' count; ``batch_rows_per_s`` is rows over the
batches' ``triggerExecution`` alone (``ratio_batches``): Spark starts a fresh Python process for a Python streaming
source's driver side per query, a cost format("kafka") does not have and start-to-termination includes.

``identical`` per cell: both formats read the same rows (count and a sum of ``xxhash64(key, value, partition,
offset)``) in a batch read and in an AvailableNow stream (``foreachBatch``), and every sink wrote the same rows
(count and hash over key, value, partition, read back read_committed; offsets are left out, as a transactional
writer's markers take offsets). ``latency``: with ``--with-latency``, ``bench.spark_latency``'s end-to-end
latency of format("kafka") and format("pylog") in both guarantees on each broker (its own SparkSession, its
in-process broker_sim). The benchmark never fails on speed; it exits 0 whatever it measured.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Callable, TextIO

FORMATS = ("kafka", "pylog")
BROKERS = ("pylog", "kafka")
READ_FIGURES = ("batch_read", "stream_available_now", "stream_plain_trigger")
WRITE_FIGURES = ("batch_write", "stream_write")
# sink name -> (format, options): format("kafka") only has at-least-once
WRITERS = {"kafka": ("kafka", {}),
           "pylog_exactly_once": ("pylog", {}),
           "pylog_at_least_once": ("pylog", {"deliveryGuarantee": "at_least_once"})}
MIN_ROUNDS = 5
QUERY_TIMEOUT_S = 600
_HASH = "sum(CAST(xxhash64({columns}) AS DECIMAL(38,0)))"


@dataclass(frozen=True)
class Cell:
    partitions: int
    value_bytes: int
    compression: str
    records: int
    headline: bool = False

    @property
    def name(self) -> str:
        return f"p{self.partitions}_v{self.value_bytes}_{self.compression}"


@dataclass
class Plan:
    cells: list[Cell]
    rounds: int
    brokers: list[str]
    quick: bool = False
    notes: list[str] = field(default_factory=list)
    latency: dict | None = None     # spark_latency.measure's keywords, or None: not measured


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``--workload spark-vs-kafka`` (``--records``, ``--rounds``, ``--output`` are the runner's)."""
    from broker_sim.arguments import positive_int

    parser.add_argument("--matrix-records", type=positive_int, default=200_000,
                        help="spark-vs-kafka: rows per matrix cell (1/8 partitions, 100 B/1 KB, none/lz4/zstd; "
                             "default: 200000; the headline cell has --records)")
    parser.add_argument("--spark-brokers", type=_spark_brokers, default=list(BROKERS),
                        help="spark-vs-kafka: comma-separated, from pylog,kafka (default: pylog,kafka)")
    parser.add_argument("--headline-only", action="store_true",
                        help="spark-vs-kafka: only the headline cell (2 partitions, 100 B, uncompressed)")
    parser.add_argument("--cells", type=_cell_names, default=None, metavar="NAME,...",
                        help="spark-vs-kafka: only these matrix cells, named p<partitions>_v<value bytes>_"
                             "<compression> (e.g. p8_v1000_zstd), or headline (default: all)")
    parser.add_argument("--with-latency", action="store_true",
                        help="spark-vs-kafka: also the end-to-end latency of both formats on each broker "
                             "(bench.spark_latency: --latency-runs, --latency-records, --interval-ms)")
    parser.add_argument("--quick", action="store_true",
                        help="spark-vs-kafka: a smoke run (5,000 rows, one round, the headline cell only)")


def _spark_brokers(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in BROKERS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown broker {', '.join(unknown) or text!r} for --spark-brokers; "
                                         f"choose from {','.join(BROKERS)}")
    return list(dict.fromkeys(names))


def _matrix() -> list[tuple[int, int, str]]:
    return [(p, v, c) for p in (1, 8) for v in (100, 1000) for c in ("none", "lz4", "zstd")]


def _cell_names(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    known = {Cell(p, v, c, 0).name for p, v, c in _matrix()} | {"headline"}
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown cell {', '.join(unknown) or text!r} for --cells; "
                                         f"choose from {','.join(sorted(known))}")
    return names


def plan_of(args) -> Plan:
    """The cells and rounds *args* ask for."""
    brokers = getattr(args, "spark_brokers", None) or list(BROKERS)
    if getattr(args, "quick", False):
        return Plan([Cell(2, 100, "none", 5_000, headline=True)], 1, brokers, quick=True,
                    notes=["--quick: a smoke run (5,000 rows, one round): the figures mean nothing"])
    rounds = max(getattr(args, "rounds", MIN_ROUNDS) or MIN_ROUNDS, MIN_ROUNDS)
    wanted = getattr(args, "cells", None)
    cells = [Cell(2, 100, "none", getattr(args, "records", 1_000_000), headline=True)]
    cells = cells if wanted is None or "headline" in wanted else []
    notes = [f"rounds: {rounds} alternating pairs per figure (at least {MIN_ROUNDS}, whatever --rounds says)"]
    if not getattr(args, "headline_only", False):
        matrix_records = getattr(args, "matrix_records", 200_000)
        cells += [cell for p, v, c in _matrix() for cell in [Cell(p, v, c, matrix_records)]
                  if wanted is None or cell.name in wanted]
        notes.append(f"matrix cells use {matrix_records:,} rows (--matrix-records), the headline cell "
                     f"{getattr(args, 'records', 1_000_000):,} (--records)")
    latency = None
    if getattr(args, "with_latency", False):
        latency = {"records": getattr(args, "latency_records", 300), "interval_ms": getattr(args, "interval_ms", 50),
                   "runs": max(getattr(args, "latency_runs", 1), MIN_ROUNDS)}
    return Plan(cells, rounds, brokers, notes=notes, latency=latency)


def run_from_args(args, *, out: TextIO, err: TextIO) -> int:
    """Run the benchmark for parsed *args*, print the JSON to *out* (and ``--output``); return 0."""
    # printed here, as spark_latency does: runner imports this module for its arguments
    document = json.dumps(run(plan_of(args), err), indent=2)
    print(document, file=out)
    output = getattr(args, "output", None)
    if output:
        with open(output, "w") as f:
            f.write(document + "\n")
    return 0


def main(argv=None) -> int:
    from broker_sim.arguments import positive_int

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=positive_int, default=1_000_000)
    parser.add_argument("--rounds", type=positive_int, default=MIN_ROUNDS)
    parser.add_argument("--output", metavar="FILE", help="also write the JSON document to FILE")
    add_arguments(parser)
    return run_from_args(parser.parse_args(argv), out=sys.stdout, err=sys.stderr)


# --------------------------------------------------------------------------- the run

def run(plan: Plan, err: TextIO) -> dict:
    """Every cell of *plan* on every broker; the report (see the module docstring)."""
    from broker_sim.local.spark_kafka import spark_kafka_jars, spark_kafka_version

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    jars = spark_kafka_jars()  # SparkKafkaUnavailable names the fetch command
    spark = _spark_session(jars)
    report: dict = {
        "workload": {"what": "format('kafka') vs format('pylog') in one SparkSession, alternating pairs",
                     "spark": spark.version, "spark_kafka_connector": spark_kafka_version(),
                     "spark_master": "local[2]", "rounds": plan.rounds, "warmup": "one unreported run of each "
                     "query per broker", "order": "kafka, pylog in odd rounds; pylog, kafka in even ones",
                     "mb": "value bytes, 10**6 per MB", "ratio": "median of per-round pylog / kafka",
                     "cells": [vars(c) | {"name": c.name} for c in plan.cells], "notes": plan.notes},
        "brokers": {},
    }
    try:
        for broker_name in plan.brokers:
            with _broker(broker_name) as (bootstrap, version):
                print(f"spark-vs-kafka: broker {broker_name} ({version}) at {bootstrap}", file=err, flush=True)
                bench = _BrokerBench(spark, bootstrap, plan, err)
                report["brokers"][broker_name] = {"broker": version, "cells": bench.run_all()}
    finally:
        spark.stop()
    report["latency"] = _latency_section(plan, err)
    report["identical"] = all(cell["identical"] for broker in report["brokers"].values()
                              for cell in broker["cells"].values())
    return report


def _spark_session(jars: list[str]):
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("pylog-bench-spark-vs-kafka")
             .config("spark.jars", ",".join(jars))
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.streaming.numRecentProgressUpdates", "100000")
             .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


class _broker:
    """``with _broker(name) as (bootstrap, version)``: broker_sim as a subprocess, or Apache Kafka."""

    def __init__(self, name: str) -> None:
        self.name, self.server, self.temp = name, None, None

    def __enter__(self) -> tuple[str, str]:
        if self.name == "pylog":
            from broker_sim.bench.brokers import BrokerProcess, pylog_broker

            kind = pylog_broker()
            self.server = BrokerProcess(kind)
            self.server.start()
            return self.server.bootstrap_servers, f"{kind.version}, python -m broker_sim subprocess"
        from broker_sim.local.kafka import KAFKA_VERSION, KafkaServer

        self.temp = tempfile.TemporaryDirectory(prefix="pylog-bench-svk-kafka-")
        self.server = KafkaServer(self.temp.name).start()
        return self.server.bootstrap_servers, f"Apache Kafka {KAFKA_VERSION} (KRaft, one node, heap 512m)"

    def __exit__(self, *exc) -> None:
        if self.name == "pylog":
            self.server.stop()
        else:
            self.server.stop_all()
            self.temp.cleanup()


class _BrokerBench:
    """The cells of one broker."""

    def __init__(self, spark, bootstrap: str, plan: Plan, err: TextIO) -> None:
        self.spark, self.bootstrap, self.plan, self.err = spark, bootstrap, plan, err
        self.topics = 0
        self.warm = plan.quick  # a smoke run has no warm-up
        self.work_dir = tempfile.TemporaryDirectory(prefix="pylog-bench-svk-")

    def run_all(self) -> dict:
        try:
            return {cell.name: self._cell(cell) for cell in self.plan.cells}
        finally:
            self.work_dir.cleanup()

    def _say(self, text: str) -> None:
        print(f"spark-vs-kafka: {text}", file=self.err, flush=True)

    def _show(self, cell: Cell, figure: str, summary: dict) -> None:
        rates = ", ".join(f"{name} {value['rows_per_s']:,} rows/s" for name, value in summary.items()
                          if isinstance(value, dict))
        ratios = ", ".join(f"{key} {value}" for key, value in summary.items() if key.startswith("ratio")
                           and not key.endswith("_per_round"))
        self._say(f"{cell.name} {figure}: {rates}; {ratios}")

    def _cell(self, cell: Cell) -> dict:
        started = time.perf_counter()
        topic = self._new_topic(cell)
        _produce(self.bootstrap, topic, cell)
        source = self._parquet(cell)
        result = {"records": cell.records, "partitions": cell.partitions, "value_bytes": cell.value_bytes,
                  "compression": cell.compression, "headline": cell.headline}
        identity = {"read": {fmt: self._read_identity(fmt, topic) for fmt in FORMATS},
                    "stream": {fmt: self._stream_identity(fmt, topic) for fmt in FORMATS}}
        reads: dict[str, Callable[[str], dict]] = {
            "batch_read": lambda fmt: self._batch_read(fmt, topic),
            "stream_available_now": lambda fmt: self._stream_read(fmt, topic, cell.records, available_now=True),
            "stream_plain_trigger": lambda fmt: self._stream_read(fmt, topic, cell.records, available_now=False),
        }
        if not self.warm:
            for figure, measure in reads.items():
                for fmt in FORMATS:
                    measure(fmt)
        for figure, measure in reads.items():
            result[figure] = self._pairs(cell, {fmt: (lambda f=fmt: measure(f)) for fmt in FORMATS})
            self._show(cell, figure, result[figure])
        written: dict[str, dict] = {}
        for figure, streaming in (("batch_write", False), ("stream_write", True)):
            def write(writer: str, streaming=streaming, figure=figure, check=True) -> dict:
                out = self._new_topic(cell)
                measured = self._write(writer, source, out, cell, streaming)
                if check and f"{figure}/{writer}" not in written:
                    written[f"{figure}/{writer}"] = self._written_identity(out)
                self._delete_topic(out)
                return measured
            if not self.warm:
                for writer in WRITERS:
                    write(writer, check=False)
            result[figure] = self._pairs(cell, {writer: (lambda w=writer: write(w)) for writer in WRITERS})
            self._show(cell, figure, result[figure])
        self.warm = True
        self._delete_topic(topic)
        result["identity"] = {**identity, "written": written}
        result["identical"] = identical(result["identity"], cell.records)
        result["seconds"] = round(time.perf_counter() - started, 1)
        self._say(f"{cell.name} done in {result['seconds']} s, identical: {result['identical']}")
        return result

    # ----------------------------------------------------------------- pairs

    def _pairs(self, cell: Cell, runs: dict[str, Callable[[], dict]]) -> dict:
        """``plan.rounds`` rounds of every run in *runs*, the order flipped each round; medians and ratios."""
        names = list(runs)
        samples: dict[str, list[dict]] = {name: [] for name in names}
        for round_number in range(self.plan.rounds):
            for name in (names if round_number % 2 == 0 else names[::-1]):
                samples[name].append(runs[name]())
        summary: dict = {}
        mb = cell.records * cell.value_bytes / 1e6
        for name, measured in samples.items():
            seconds = [m["seconds"] for m in measured]
            median = statistics.median(seconds)
            summary[name] = {"rows_per_s": round(cell.records / median), "mb_per_s": round(mb / median, 1),
                             "median_seconds": round(median, 3), "seconds": [round(s, 3) for s in seconds]}
            if "time_went" in measured[0]:
                went = summary[name]["time_went"] = _median_breakdown([m["time_went"] for m in measured])
                if went.get("triggerExecution"):
                    summary[name]["batch_rows_per_s"] = round(cell.records * 1000 / went["triggerExecution"])
        base = "kafka"
        for name in names:
            if name == base:
                continue
            per_round = [b["seconds"] / m["seconds"] for b, m in zip(samples[base], samples[name])]
            key = "ratio" if name == "pylog" else f"ratio_{name.removeprefix('pylog_')}"
            summary[key] = round(statistics.median(per_round), 3)
            summary[f"{key}_per_round"] = [round(r, 3) for r in per_round]
            if "batch_rows_per_s" in summary[name]:   # the micro-batches alone, without the query's start
                summary["ratio_batches"] = round(summary[name]["batch_rows_per_s"]
                                                 / summary[base]["batch_rows_per_s"], 3)
        return summary

    # ----------------------------------------------------------------- reads

    def _reader(self, fmt: str, streaming: bool):
        reader = self.spark.readStream if streaming else self.spark.read
        reader = reader.format(fmt).option("kafka.bootstrap.servers", self.bootstrap)
        return reader.option("startingOffsets", "earliest") if streaming else reader

    def _batch_read(self, fmt: str, topic: str) -> dict:
        df = self._reader(fmt, False).option("subscribe", topic).load()
        started = time.perf_counter()
        _with_retries(lambda: df.write.format("noop").mode("overwrite").save())
        return {"seconds": time.perf_counter() - started}

    def _stream_read(self, fmt: str, topic: str, records: int, *, available_now: bool) -> dict:
        df = self._reader(fmt, True).option("subscribe", topic).load()

        def once() -> dict:
            with tempfile.TemporaryDirectory(prefix="pylog-bench-svk-ckpt-") as checkpoint:
                writer = df.writeStream.format("noop").option("checkpointLocation", checkpoint)
                if available_now:
                    writer = writer.trigger(availableNow=True)
                started_wall, started = time.time(), time.perf_counter()
                query = writer.start()
                try:
                    if available_now:
                        _await(query)
                        elapsed = time.perf_counter() - started
                        progress = query.recentProgress
                    else:
                        progress = _await_rows(query, records)
                        last = progress[-1]
                        elapsed = (_epoch(last["timestamp"]) + last["durationMs"]["triggerExecution"] / 1000
                                   - started_wall)
                finally:
                    query.stop()
            rows = sum(p["numInputRows"] for p in progress)
            if rows != records:
                raise RuntimeError(f"format({fmt!r}) streamed {rows} rows of {topic}, expected {records}")
            return {"seconds": elapsed, "time_went": _breakdown(progress, started_wall, elapsed)}
        return _with_retries(once)

    def _read_identity(self, fmt: str, topic: str) -> dict:
        df = self._reader(fmt, False).option("subscribe", topic).load()
        row = _with_retries(lambda: df.selectExpr(
            "count(*) AS n", _HASH.format(columns="key, value, partition, offset") + " AS h").first())
        return {"count": row["n"], "hash": str(row["h"])}

    def _stream_identity(self, fmt: str, topic: str) -> dict:
        """Count and hash of what an AvailableNow stream of *fmt* delivers, summed over its micro-batches."""
        totals = {"count": 0, "hash": 0}

        def add(batch, _batch_id) -> None:
            row = batch.selectExpr("count(*) AS n", _HASH.format(columns="key, value, partition, offset")
                                   + " AS h").first()
            totals["count"] += row["n"]
            totals["hash"] += int(row["h"] or 0)

        def once() -> None:
            totals.update(count=0, hash=0)
            with tempfile.TemporaryDirectory(prefix="pylog-bench-svk-ckpt-") as checkpoint:
                query = (self._reader(fmt, True).option("subscribe", topic).load().writeStream
                         .foreachBatch(add).trigger(availableNow=True)
                         .option("checkpointLocation", checkpoint).start())
                _await(query)
        _with_retries(once)
        return {"count": totals["count"], "hash": str(totals["hash"])}

    # ----------------------------------------------------------------- writes

    def _parquet(self, cell: Cell) -> str:
        """The cell's rows (key: the row number as a string, value: hex text) as Parquet, written once."""
        path = os.path.join(self.work_dir.name, f"rows-{cell.records}-{cell.value_bytes}")
        if not os.path.exists(path):
            repeats = cell.value_bytes // 64 + 1
            (self.spark.range(cell.records, numPartitions=2)
             .selectExpr("CAST(CAST(id AS STRING) AS BINARY) AS key",
                         f"CAST(substr(repeat(sha2(CAST(id AS STRING), 256), {repeats}), 1, {cell.value_bytes})"
                         " AS BINARY) AS value")
             .write.parquet(path))
        return path

    def _write(self, writer: str, source: str, topic: str, cell: Cell, streaming: bool) -> dict:
        fmt, options = WRITERS[writer]
        options = {"kafka.bootstrap.servers": self.bootstrap, "topic": topic,
                   "kafka.compression.type": cell.compression, **options}

        def once() -> dict:
            if not streaming:
                df = self.spark.read.parquet(source)
                started = time.perf_counter()
                df.write.format(fmt).mode("append").options(**options).save()
                return {"seconds": time.perf_counter() - started}
            df = self.spark.readStream.schema("key BINARY, value BINARY").parquet(source)
            with tempfile.TemporaryDirectory(prefix="pylog-bench-svk-ckpt-") as checkpoint:
                started = time.perf_counter()
                query = (df.writeStream.format(fmt).options(**options).trigger(availableNow=True)
                         .option("checkpointLocation", checkpoint).start())
                _await(query)
                return {"seconds": time.perf_counter() - started}
        return _with_retries(once)

    def _written_identity(self, topic: str) -> dict:
        df = (self.spark.read.format("kafka").option("kafka.bootstrap.servers", self.bootstrap)
              .option("subscribe", topic).option("kafka.isolation.level", "read_committed").load())
        row = df.selectExpr("count(*) AS n", _HASH.format(columns="key, value, partition") + " AS h").first()
        return {"count": row["n"], "hash": str(row["h"])}

    # ----------------------------------------------------------------- topics

    def _new_topic(self, cell: Cell) -> str:
        from kafka import KafkaAdminClient
        from kafka.admin import NewTopic

        self.topics += 1
        name = f"svk-{self.topics}-{cell.name}"
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, client_id="pylog-bench-svk")
        try:
            admin.create_topics([NewTopic(name, cell.partitions, 1)], timeout_ms=30_000)
        finally:
            admin.close()
        _wait_for_leaders(self.bootstrap, name, cell.partitions)
        return name

    def _delete_topic(self, name: str) -> None:
        from kafka import KafkaAdminClient

        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, client_id="pylog-bench-svk")
        try:
            admin.delete_topics([name], timeout_ms=30_000)
        finally:
            admin.close()


def identical(identity: dict, records: int) -> bool:
    """Whether a cell's *identity* shows the same *records* rows everywhere: each format's batch read and stream
    (count, hash over key, value, partition, offset) and every sink's output (count, hash without offsets)."""
    reads = [identity[kind][fmt] for kind in ("read", "stream") for fmt in FORMATS]
    writes = list(identity["written"].values())
    return (all(read == {"count": records, "hash": reads[0]["hash"]} for read in reads)
            and len(writes) == len(WRITE_FIGURES) * len(WRITERS)
            and all(write == {"count": records, "hash": writes[0]["hash"]} for write in writes))


# --------------------------------------------------------------------------- helpers

def _wait_for_leaders(bootstrap: str, topic: str, partitions: int, timeout_s: float = 60) -> None:
    """Until every partition of *topic* answers ListOffsets (a leader that serves it, not only Metadata's word)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "pylog-bench-svk-probe"})
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            try:
                for p in range(partitions):
                    consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=5)
                return
            except Exception:  # noqa: BLE001 - not served yet; bounded by the deadline
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
    finally:
        consumer.close()


def value_pool(value_bytes: int) -> bytes:
    """Hex text to cut values from: a compressor finds about 2x in it, as in typical payloads."""
    import hashlib

    pool = b"".join(hashlib.sha256(b"%d" % i).hexdigest().encode() for i in range(value_bytes // 64 + 64))
    return pool


def _produce(bootstrap: str, topic: str, cell: Cell) -> None:
    """*cell.records* records, key the row number, round-robin over the partitions, compressed as the cell says."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                         "queue.buffering.max.messages": 1_000_000, "compression.type": cell.compression,
                         "acks": "all"})
    pool = value_pool(cell.value_bytes)
    span = len(pool) - cell.value_bytes
    for i in range(cell.records):
        start = (i * 61) % span
        while True:
            try:
                producer.produce(topic, value=pool[start:start + cell.value_bytes], key=b"%d" % i,
                                 partition=i % cell.partitions)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(300):
        raise RuntimeError(f"records to {topic} were not all delivered")


def _await(query) -> None:
    """Until *query* terminates (bounded); its failure raised."""
    if not query.awaitTermination(QUERY_TIMEOUT_S):
        query.stop()
        raise RuntimeError(f"query {query.name or query.id} did not finish within {QUERY_TIMEOUT_S} s")
    if query.exception() is not None:
        raise RuntimeError(f"query failed: {query.exception()}")


def _await_rows(query, records: int) -> list:
    """The progress of a query with a plain trigger once its batches hold *records* rows (bounded)."""
    deadline = time.monotonic() + QUERY_TIMEOUT_S
    while True:
        progress = query.recentProgress
        if sum(p["numInputRows"] for p in progress) >= records:
            # the batch that brought the last row: the last one with rows
            while progress and not progress[-1]["numInputRows"]:
                progress = progress[:-1]
            return progress
        if query.exception() is not None:
            raise RuntimeError(f"query failed: {query.exception()}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"the query did not stream {records} rows within {QUERY_TIMEOUT_S} s")
        time.sleep(0.05)


def _epoch(timestamp: str) -> float:
    import datetime as dt

    return dt.datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def _breakdown(progress: list, started_wall: float, elapsed: float) -> dict:
    """Where a streaming query's time went: start() to its first trigger, each ``durationMs`` phase summed over
    its micro-batches, the rest (after the last batch, to termination), and the batches with rows."""
    phases: dict[str, int] = {}
    for entry in progress:
        for phase, ms in (entry.get("durationMs") or {}).items():
            phases[phase] = phases.get(phase, 0) + int(ms)
    first = _epoch(progress[0]["timestamp"]) if progress else started_wall
    start_ms = (first - started_wall) * 1000
    return {"start_to_first_trigger_ms": round(start_ms), **phases,
            "after_last_batch_ms": round(elapsed * 1000 - start_ms - phases.get("triggerExecution", 0)),
            "batches": len(progress), "batches_with_rows": sum(1 for p in progress if p["numInputRows"])}


def _median_breakdown(breakdowns: list[dict]) -> dict:
    keys = {key for b in breakdowns for key in b}
    return {key: statistics.median(b.get(key, 0) for b in breakdowns) for key in sorted(keys)}


def _worker_start_timeout(exc: BaseException) -> bool:
    """Spark's Python worker start timing out (10 s for it to connect back): a loaded machine, not the format."""
    return any(sign in str(exc) for sign in ("Python worker failed to connect back", "CANNOT_OPEN_SOCKET"))


def _with_retries(action: Callable, attempts: int = 4):
    for attempt in range(attempts):
        try:
            return action()
        except Exception as exc:  # noqa: BLE001 - only a worker start timeout is retried
            if attempt == attempts - 1 or not _worker_start_timeout(exc):
                raise


def _latency_section(plan: Plan, err: TextIO) -> dict:
    """End-to-end latency of format("kafka") and format("pylog") (both guarantees) on each broker, measured by
    ``broker_sim.bench.spark_latency.measure`` in a SparkSession of its own (this one is stopped by then)."""
    if plan.latency is None:
        return {"skipped": "not asked for: --with-latency runs broker_sim.bench.spark_latency (pylog bench "
                           "--workload spark-latency --formats kafka,pylog) on each broker"}
    from broker_sim.bench import spark_latency

    return {broker: spark_latency.measure(plan.latency["records"], plan.latency["interval_ms"], err,
                                          formats=FORMATS, guarantees=("at_least_once", "exactly_once"),
                                          broker=broker, runs=plan.latency["runs"])
            for broker in plan.brokers}


if __name__ == "__main__":
    sys.exit(main())
