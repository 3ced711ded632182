"""A new user's walkthrough: a typical Spark + Kafka job ported to pylog, crashed, restarted, and proved exact.

The job (``job()`` below) is what a Spark user writes for Kafka, with
``format("kafka")`` changed to ``format("pylog")``: read JSON click events,
parse them, take event time with a 10-minute watermark, count clicks per page
in 1-minute windows, and write the counts in **update** mode — each
micro-batch emits the windows it changed — through the exactly-once
``connector.foreach_batch`` writer (Spark refuses update mode for Python data
source sinks; see the README's "Output and save modes").

The walkthrough runs it three times against one checkpoint, each run a
separate driver process with ``Trigger.AvailableNow``:

1. events A (3 pages, 4 windows) -> counts of A;
2. events B: more clicks in A's last windows, a new window, and two clicks
   20 minutes older than A's newest (behind the watermark, so dropped). The
   driver is SIGKILLed right after the sink committed the batch
   (``PYLOG_SINK_CRASH_AT=after_completed``), before Spark recorded it: the
   classic window for duplicates;
3. events C, then a restart from the checkpoint: Spark replays B's batch —
   the writer finds it COMPLETED in the sink log and aborts the replay's
   transactions — then processes C.

The proof: a read_committed consumer of ``page_counts`` sees exactly the
updates computed here in plain Python (cumulative count per page and window,
once per batch that touched it, late clicks dropped), no more and no less,
while read_uncommitted also shows the replay's aborted copies. Exit status 0
only when the proof holds.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

INPUT, OUTPUT = "clicks", "page_counts"
MINUTE = 60_000
T0 = 1_700_000_040_000          # 2023-11-14 22:14:00 UTC, a minute boundary
WATERMARK_MS = 10 * MINUTE

# (page, minute after T0, clicks)
EVENTS_A = [("home", 0, 5), ("home", 1, 3), ("cart", 1, 2), ("help", 3, 1)]
EVENTS_B = [("home", 1, 2), ("help", 3, 4), ("cart", 4, 3)]
LATE_B = [("home", -17, 2)]      # 20 minutes before A's newest click (minute 3): behind the watermark
EVENTS_C = [("cart", 4, 1), ("home", 6, 2)]


def say(message: str) -> None:
    print(f"[walkthrough] {message}", flush=True)


def clicks(spec) -> list[dict]:
    return [{"user": f"u{i % 4}", "page": page, "ts": T0 + minute * MINUTE + i * 1000}
            for page, minute, count in spec for i in range(count)]


# -- the user's job -------------------------------------------------------------------------------------------------

def job(bootstrap: str, checkpoint: str) -> None:
    """The ported Kafka job; runs in its own driver process (``walkthrough.py job``)."""
    from pyspark.sql import SparkSession
    from pyspark.sql.functions import col, from_json, struct, timestamp_millis, to_json, window

    import connector

    spark = (SparkSession.builder.master("local[2]").appName("pylog-walkthrough")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").config("spark.sql.session.timeZone", "UTC")
             .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    clicks_df = (spark.readStream.format("pylog")                      # was: format("kafka")
                 .option("kafka.bootstrap.servers", bootstrap)
                 .option("subscribe", INPUT)
                 .option("startingOffsets", "earliest")
                 .load()
                 .select(from_json(col("value").cast("string"), "user STRING, page STRING, ts LONG").alias("e"))
                 .select("e.page", timestamp_millis(col("e.ts")).alias("at")))
    counts = (clicks_df.withWatermark("at", "10 minutes")
              .groupBy(col("page"), window(col("at"), "1 minute"))
              .count()
              .select(to_json(struct(col("page"), col("window.start").alias("minute"))).alias("key"),
                      col("count").cast("string").alias("value")))
    query = (counts.writeStream.outputMode("update")                     # was: format("kafka").option(...)
             .foreachBatch(connector.foreach_batch(**{"kafka.bootstrap.servers": bootstrap, "topic": OUTPUT}))
             .option("checkpointLocation", checkpoint)
             .trigger(availableNow=True)
             .start())
    query.awaitTermination()
    for source in connector.progress(query):
        say(f"  source {source['subscription']}: consumer group {source['consumerGroup']}, "
            f"offsets behind latest {source['metrics']}")
    spark.stop()


# -- the driver of the walkthrough ----------------------------------------------------------------------------------

def expected_updates() -> Counter:
    """(key, count) of every update the three runs must leave committed, computed without Spark."""
    totals: Counter = Counter()
    updates: Counter = Counter()
    newest = None
    for spec, late in ((EVENTS_A, []), (EVENTS_B, LATE_B), (EVENTS_C, [])):
        watermark = newest - WATERMARK_MS if newest is not None else None
        touched = set()
        for event in clicks(spec) + clicks(late):
            if watermark is not None and event["ts"] <= watermark:
                continue   # Spark drops rows behind the watermark before aggregating
            window = (event["page"], (event["ts"] // MINUTE) * MINUTE)
            totals[window] += 1
            touched.add(window)
        for page, start in touched:
            key = json.dumps({"page": page, "minute": _utc(start)}, separators=(",", ":"))
            updates[(key, totals[(page, start)])] += 1
        newest = max([newest or 0] + [e["ts"] for e in clicks(spec) + clicks(late)])
    return updates


def _utc(ms: int) -> str:
    from datetime import datetime, timezone
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def produce(bootstrap: str, events: list[dict]) -> None:
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    for event in events:
        producer.send(INPUT, key=event["page"].encode(), value=json.dumps(event).encode())
    producer.flush(timeout=60)
    producer.close()


def read_output(bootstrap: str, isolation: str) -> Counter:
    from kafka import KafkaConsumer
    from kafka.structs import TopicPartition
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False,
                             group_id=None)
    partitions = [TopicPartition(OUTPUT, p) for p in sorted(consumer.partitions_for_topic(OUTPUT) or ())]
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    ends = consumer.end_offsets(partitions)   # read_committed: the last stable offsets
    found: Counter = Counter()
    deadline = time.monotonic() + 60
    while any(consumer.position(tp) < ends[tp] for tp in partitions):
        if time.monotonic() > deadline:
            raise TimeoutError(f"read {[consumer.position(tp) for tp in partitions]} of {ends} in 60 s")
        for records in consumer.poll(timeout_ms=500).values():
            found.update((r.key.decode(), int(r.value)) for r in records)
    consumer.close()
    return found


def last_committed_batch(checkpoint: str) -> int:
    commits = Path(checkpoint, "commits")
    return max((int(p.name) for p in commits.iterdir() if p.name.isdigit()), default=-1)


def run_job(bootstrap: str, checkpoint: str, crash_at: str | None = None) -> int:
    """Run ``job`` in a driver process of its own (its own process group, which a crash point kills)."""
    env = dict(os.environ)
    env.pop("PYLOG_SINK_CRASH_AT", None)
    if crash_at:
        env["PYLOG_SINK_CRASH_AT"] = crash_at
    done = subprocess.run([sys.executable, __file__, "job", "--bootstrap", bootstrap, "--checkpoint", checkpoint],
                          env=env, start_new_session=True, timeout=900)
    return done.returncode


def main() -> int:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    from broker_sim.server.broker import Broker

    with tempfile.TemporaryDirectory(prefix="pylog-walkthrough-") as work, Broker(port=0) as broker:
        bootstrap = broker.bootstrap_servers
        checkpoint = str(Path(work, "checkpoint"))
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        admin.create_topics([NewTopic(INPUT, 2, 1), NewTopic(OUTPUT, 2, 1)])
        admin.close()
        say(f"broker on {bootstrap}; topics {INPUT} and {OUTPUT}")

        produce(bootstrap, clicks(EVENTS_A))
        say(f"run 1: {len(clicks(EVENTS_A))} clicks")
        if run_job(bootstrap, checkpoint) != 0:
            say("FAIL: run 1 did not finish")
            return 1

        produce(bootstrap, clicks(EVENTS_B) + clicks(LATE_B))
        crash = f"after_completed:{last_committed_batch(checkpoint) + 1}"
        say(f"run 2: {len(clicks(EVENTS_B))} clicks and {len(clicks(LATE_B))} late ones; the driver is killed "
            f"right after the sink commits the batch (PYLOG_SINK_CRASH_AT={crash})")
        code = run_job(bootstrap, checkpoint, crash)
        if code != -signal.SIGKILL:
            say(f"FAIL: run 2 should have been killed at {crash}, exit status {code}")
            return 1

        produce(bootstrap, clicks(EVENTS_C))
        say(f"run 3: restart from the checkpoint (replays run 2's batch), then {len(clicks(EVENTS_C))} new clicks")
        if run_job(bootstrap, checkpoint) != 0:
            say("FAIL: run 3 did not finish")
            return 1

        expected = expected_updates()
        committed = read_output(bootstrap, "read_committed")
        uncommitted = read_output(bootstrap, "read_uncommitted")
        say(f"{OUTPUT}, read_committed: {sum(committed.values())} updates; read_uncommitted also shows "
            f"{sum(uncommitted.values()) - sum(committed.values())} aborted by the replay")
        for (key, count), times in sorted(committed.items()):
            say(f"  {key} -> {count}" + (f"  (x{times})" if times > 1 else ""))
        if committed != expected:
            say(f"FAIL: expected {sorted(expected.items())}, missing {sorted((expected - committed).items())}, "
                f"extra {sorted((committed - expected).items())}")
            return 1
        if sum(uncommitted.values()) <= sum(committed.values()):
            say("FAIL: the replayed batch left no aborted copies, so the crash did not exercise the replay")
            return 1
    say("OK: every window update is committed exactly once, late clicks dropped, the replayed batch not duplicated")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", nargs="?", choices=["job"], help="internal: run the Spark job once")
    parser.add_argument("--bootstrap")
    parser.add_argument("--checkpoint")
    args = parser.parse_args()
    if args.command == "job":
        os.environ["PYLOG_SINK_DRIVER_PGID"] = str(os.getpgid(0))   # crash points kill this driver's group
        job(args.bootstrap, args.checkpoint)
        sys.exit(0)
    sys.exit(main())
