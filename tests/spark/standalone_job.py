"""The driver of test_standalone_kafka_cluster: a format("pylog") stream into the exactly-once sink, on a Spark
standalone cluster.

Run as its own process, so its SparkContext (master ``spark://...``) does not meet the test session's local one:

    python tests/spark/standalone_job.py MASTER BOOTSTRAP INPUT OUTPUT CHECKPOINT STOP_FILE [--deadline-s 240]

The transform is ``value -> "seen-" + value`` with the key kept. The query runs on a 500 ms trigger until
STOP_FILE exists (the test creates it once it has read every row back), then stops. Exit status 0 when the
query stopped without an error, 1 when it failed (its exception on stderr), 2 at the deadline.
"""
from __future__ import annotations

import argparse
import os
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser()
    for name in ("master", "bootstrap", "input", "output", "checkpoint", "stop_file"):
        parser.add_argument(name)
    parser.add_argument("--deadline-s", type=float, default=240)
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master(args.master).appName("pylog-standalone-kafka")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.executor.memory", "512m")
             .config("spark.executor.cores", "1")
             .config("spark.cores.max", "2")
             .config("spark.pyspark.python", sys.executable)
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    source = (spark.readStream.format("pylog").option("kafka.bootstrap.servers", args.bootstrap)
              .option("subscribe", args.input).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", "60").load())
    query = (source.selectExpr("key", "concat(CAST('seen-' AS BINARY), value) AS value")
             .writeStream.format("pylog").option("kafka.bootstrap.servers", args.bootstrap)
             .option("topic", args.output).option("checkpointLocation", args.checkpoint)
             .trigger(processingTime="500 milliseconds").start())
    deadline = time.monotonic() + args.deadline_s
    while not os.path.exists(args.stop_file) and query.isActive and time.monotonic() < deadline:
        query.awaitTermination(0.5)
    failure = query.exception()
    timed_out = query.isActive and not os.path.exists(args.stop_file)
    query.stop()
    print(f"DONE batches={len(query.recentProgress)}", flush=True)
    spark.stop()
    if failure is not None:
        print(f"the query failed: {failure}", file=sys.stderr, flush=True)
        return 1
    return 2 if timed_out else 0


if __name__ == "__main__":
    sys.exit(main())
