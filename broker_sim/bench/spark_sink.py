"""Sink benchmark (JSON on stdout, never pass/fail): rows/s of a streaming query into the pylog sink.

    python -m broker_sim.bench.spark_sink [--rows 2000000] [--partitions 4]

Starts an embedded broker, loads ``--rows`` records (key ``k<i>``, a 100-byte
value) into an input topic with a batch write, then runs the same streaming
query (pylog source, Trigger.AvailableNow, local[2]) three times into:
a no-op Arrow stream writer that drops every batch (the cost of everything but
the sink; run first and last, the faster counts), the pylog sink with
``exactly_once`` and with ``at_least_once``. Prints rows/s of each and the
ratios to the no-op run (the target, issue 25: exactly_once >= 0.8x).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

from pyspark.sql.datasource import DataSource, DataSourceStreamArrowWriter, WriterCommitMessage


class _Dropped(WriterCommitMessage):
    pass


class NoopWriter(DataSourceStreamArrowWriter):
    """Consumes and drops every Arrow batch."""

    def write(self, iterator):
        for _ in iterator:
            pass
        return _Dropped()


class NoopSink(DataSource):
    @classmethod
    def name(cls) -> str:
        return "pylog_noop"

    def streamWriter(self, schema, overwrite):
        return NoopWriter()


def _worker_start_timeout(exc) -> bool:
    """Spark's Python worker start timing out (10 s for it to connect back, its socket to the JVM)."""
    return any(sign in str(exc) for sign in ("Python worker failed to connect back", "CANNOT_OPEN_SOCKET"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic
    from pyspark.sql import SparkSession

    from broker_sim.server.broker import Broker

    spark = (SparkSession.builder.master("local[2]").appName("pylog-bench-sink")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(NoopSink)
    results = {"rows": args.rows, "partitions": args.partitions, "value_bytes": 100}
    with tempfile.TemporaryDirectory(prefix="pylog-bench-sink-") as data_dir, Broker(data_dir, port=0) as broker:
        bootstrap = broker.bootstrap_servers
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        admin.create_topics([NewTopic(t, args.partitions, 1) for t in ("input", "out_eos", "out_alo")])
        admin.close()
        started = time.perf_counter()
        (spark.range(args.rows, numPartitions=args.partitions)
         .selectExpr("CAST(concat('k', id) AS STRING) AS key", "repeat('x', 100) AS value")
         .write.format("pylog").mode("append").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", "input").option("deliveryGuarantee", "at_least_once").save())
        results["load_rows_per_s"] = round(args.rows / (time.perf_counter() - started))

        def run(name: str, fmt: str, **options) -> float:
            source = (spark.readStream.format("pylog").option("kafka.bootstrap.servers", bootstrap)
                      .option("subscribe", "input").option("startingOffsets", "earliest")
                      .option("maxOffsetsPerTrigger", str(args.rows // 4)).load())
            writer = (source.select("key", "value").writeStream.format(fmt).trigger(availableNow=True)
                      .option("checkpointLocation", tempfile.mkdtemp(prefix="pylog-bench-ckpt-")))
            for key, value in options.items():
                writer = writer.option(key, value)
            for attempt in range(4):
                begin = time.perf_counter()
                query = writer.start()
                try:
                    query.awaitTermination()
                    break
                except Exception as exc:  # noqa: BLE001 - Spark's hard-coded 10 s for a Python worker to start
                    if not _worker_start_timeout(exc) or attempt == 3:
                        raise
                    results["rounds_rerun_after_a_python_worker_start_timeout"] = results.get(
                        "rounds_rerun_after_a_python_worker_start_timeout", 0) + 1
                    writer = writer.option("checkpointLocation", tempfile.mkdtemp(prefix="pylog-bench-ckpt-"))
            elapsed = time.perf_counter() - begin
            rows = sum(p["numInputRows"] for p in query.recentProgress)
            assert rows == args.rows, f"{name}: {rows} rows of {args.rows}"
            results[f"{name}_rows_per_s"] = round(rows / elapsed)
            results[f"{name}_seconds"] = round(elapsed, 2)
            return rows / elapsed

        # The no-op runs first and last (the first pays for JVM warm-up and Python worker start); the best counts.
        first_noop = run("noop_first", "pylog_noop")
        sink = {"kafka.bootstrap.servers": bootstrap}
        eos = run("exactly_once", "pylog", topic="out_eos", **sink)
        alo = run("at_least_once", "pylog", topic="out_alo", deliveryGuarantee="at_least_once", **sink)
        noop = max(first_noop, run("noop_last", "pylog_noop"))
        results["exactly_once_vs_noop"] = round(eos / noop, 3)
        results["at_least_once_vs_noop"] = round(alo / noop, 3)
        results["target_exactly_once_vs_noop"] = 0.8
    spark.stop()
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
