"""A streaming job for the group handoff tests: pylog topic -> the same records -> pylog topic (exactly-once).

Run as its own process (its own local SparkSession and driver), so a test can SIGKILL the driver and read the
driver's log (a stream reader's WARNINGs reach the driver's stderr):

    python tests/spark/faults/handoff_job.py BOOTSTRAP INPUT OUTPUT CHECKPOINT GROUP --starting earliest|group
        [--max-offsets 400]

Trigger.AvailableNow with the consumer group GROUP; crash points come from the environment
(PYLOG_SINK_CRASH_AT, see connector.sink.commit). Exit status 0 when the query processed everything available.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))   # broker_sim.testing from this checkout


def main() -> int:
    parser = argparse.ArgumentParser()
    for name in ("bootstrap", "input", "output", "checkpoint", "group"):
        parser.add_argument(name)
    parser.add_argument("--starting", choices=("earliest", "group"), required=True)
    parser.add_argument("--max-offsets", default="400")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ["PYLOG_SINK_DRIVER_PGID"] = str(os.getpgid(0))   # what PYLOG_SINK_CRASH_AT kills

    from broker_sim.testing.spark import spark_session
    spark = spark_session("pylog-handoff-job")
    source = (spark.readStream.format("pylog").option("kafka.bootstrap.servers", args.bootstrap)
              .option("subscribe", args.input).option("startingOffsets", args.starting)
              .option("groupId", args.group).option("maxOffsetsPerTrigger", args.max_offsets).load())
    query = (source.selectExpr("key", "value").writeStream.format("pylog")
             .option("kafka.bootstrap.servers", args.bootstrap).option("topic", args.output)
             .option("checkpointLocation", args.checkpoint).trigger(availableNow=True).start())
    query.awaitTermination()
    print(f"DONE batches={len(query.recentProgress)}", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
