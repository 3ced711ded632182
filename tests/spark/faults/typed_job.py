"""A typed exactly-once pipeline for the typed-column fault test: Avro in, windowed aggregate, Avro out.

    python tests/spark/faults/typed_job.py BOOTSTRAP REGISTRY INPUT OUTPUT CHECKPOINT

Reads ``Reading`` records (site string, amount long, at timestamp-millis) with ``valueFormat=avro``, counts
and sums them per site and 10-second window of ``at`` with a zero watermark (append mode: a window is written
once, when the watermark passes it), and writes ``struct(site, window_start, readings, total)`` with
``valueFormat=avro`` — its schema registered under ``OUTPUT-value`` — exactly-once, Trigger.AvailableNow, 20
offsets per batch. Crash points come from the environment (PYLOG_SINK_CRASH_AT; see connector.sink).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))   # broker_sim.testing from this checkout


def main() -> int:
    bootstrap, registry, source_topic, output, checkpoint = sys.argv[1:6]
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ["PYLOG_SINK_DRIVER_PGID"] = str(os.getpgid(0))

    from broker_sim.testing.spark import spark_session
    spark = spark_session("pylog-typed-fault-job")
    readings = (spark.readStream.format("pylog").option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", source_topic).option("startingOffsets", "earliest")
                .option("maxOffsetsPerTrigger", "40").option("valueFormat", "avro")
                .option("schema.registry.url", registry).load()
                .select("value.*"))
    from pyspark.sql import functions as F
    totals = (readings.withWatermark("at", "0 seconds")
              .groupBy("site", F.window("at", "10 seconds"))
              .agg(F.count("*").alias("readings"), F.sum("amount").alias("total")))
    out = totals.selectExpr("CAST(site AS STRING) AS key",
                            "struct(site, window.start AS window_start, readings, total) AS value")
    query = (out.writeStream.format("pylog").outputMode("append").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", output).option("valueFormat", "avro").option("schema.registry.url", registry)
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    query.awaitTermination()
    print(f"DONE batches={len(query.recentProgress)}", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
