"""A streaming job for the stopped-query tests: pylog topic -> the same records -> pylog topic (exactly-once).

Run as its own process (its own local SparkSession and driver), so a test can SIGKILL it and so its Python
workers see the test hooks' environment (PYLOG_SINK_HOLD, PYLOG_SINK_FAIL_TASK, PYLOG_FAULT_MARKERS):

    python tests/spark/faults/stop_job.py BOOTSTRAP INPUT OUTPUT CHECKPOINT GROUP CONTROL
        --starting earliest|group --stop none|stop|stop_query|exception

Trigger.AvailableNow, ``maxOffsetsPerTrigger`` 60, local[3]. With ``--stop stop|stop_query`` the job waits for
the file CONTROL/stop-now, then stops the query by ``query.stop()`` or ``connector.stop_query`` (printing its
result as ``HANDED <json>``); with ``exception`` it waits for the query to fail. Either way it then prints
``STOPPED`` and waits for CONTROL/exit-now before it exits, so tasks the test holds outlive the stop (Spark
kills a task's Python worker only after ``spark.python.task.killTimeout``, set long here). ``none`` runs to
the end and prints ``DONE``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))   # connector.stop_query from this checkout

from broker_sim.testing.waiting import wait_until  # noqa: E402


def wait_for(path: str) -> None:
    """Until the test creates ``path`` (a control file), for at most 240 s."""
    wait_until(lambda: os.path.exists(path), timeout_s=240, what=f"stop_job: {path} to appear", interval_s=0.05)


def main() -> int:
    parser = argparse.ArgumentParser()
    for name in ("bootstrap", "input", "output", "checkpoint", "group", "control"):
        parser.add_argument(name)
    parser.add_argument("--starting", choices=("earliest", "group"), required=True)
    parser.add_argument("--stop", choices=("none", "stop", "stop_query", "exception"), required=True)
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[3]").appName("pylog-stop-job")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "3")
             .config("spark.python.task.killTimeout", "600s")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.driver.host", "127.0.0.1")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    source_options = {"kafka.bootstrap.servers": args.bootstrap, "subscribe": args.input,
                      "startingOffsets": args.starting, "groupId": args.group, "maxOffsetsPerTrigger": "60"}
    source = spark.readStream.format("pylog").options(**source_options).load()
    query = (source.selectExpr("key", "value").writeStream.format("pylog")
             .option("kafka.bootstrap.servers", args.bootstrap).option("topic", args.output)
             .option("checkpointLocation", args.checkpoint).trigger(availableNow=True).start())
    if args.stop == "none":
        query.awaitTermination()
        print(f"DONE batches={len(query.recentProgress)}", flush=True)
        spark.stop()
        return 0
    if args.stop == "exception":
        try:
            query.awaitTermination()
        except Exception as exc:  # noqa: BLE001 - the failure the test injected
            print(f"FAILED {type(exc).__name__}", flush=True)
        else:
            raise SystemExit("stop_job: the query ended without the injected failure")
    else:
        wait_for(os.path.join(args.control, "stop-now"))
        if args.stop == "stop":
            query.stop()
        else:
            import connector
            print("HANDED " + json.dumps(connector.stop_query(query, source_options)), flush=True)
    print("STOPPED", flush=True)
    wait_for(os.path.join(args.control, "exit-now"))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
