"""A streaming job for the sink's fault tests: pylog topic -> transform -> pylog topic, exactly-once, AvailableNow.

Run as its own process (its own local SparkSession and driver), so a test can SIGKILL the driver:

    python tests/spark/faults/sink_job.py BOOTSTRAP INPUT OUTPUT CHECKPOINT [--master local[2,4]]
        [--max-offsets 300] [--txn-timeout-ms 60000]

The transform is ``value -> "out:" + value`` with the key kept, so the expected output is computable from the
input. Crash points come from the environment (PYLOG_SINK_CRASH_AT, PYLOG_SINK_FAIL_TASK; see connector.sink).
Exit status 0 when the query processed everything available.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))   # broker_sim.testing from this checkout


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("bootstrap")
    parser.add_argument("input")
    parser.add_argument("output")
    parser.add_argument("checkpoint")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--max-offsets", default="300")
    parser.add_argument("--txn-timeout-ms", default="60000")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ["PYLOG_SINK_DRIVER_PGID"] = str(os.getpgid(0))   # what PYLOG_SINK_CRASH_AT kills

    from broker_sim.testing.spark import spark_session
    spark = spark_session("pylog-sink-fault-job", conf={"spark.master": args.master})
    source = (spark.readStream.format("pylog").option("kafka.bootstrap.servers", args.bootstrap)
              .option("subscribe", args.input).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", args.max_offsets).load())
    query = (source.selectExpr("key", "concat(CAST('out:' AS BINARY), value) AS value")
             .writeStream.format("pylog").option("kafka.bootstrap.servers", args.bootstrap)
             .option("topic", args.output).option("transactionTimeoutMs", args.txn_timeout_ms)
             .option("checkpointLocation", args.checkpoint).trigger(availableNow=True).start())
    query.awaitTermination()
    print(f"DONE batches={len(query.recentProgress)}", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
