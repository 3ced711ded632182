"""The main job: an exactly-once Spark pipeline on the embedded broker, with its proof.

1. Starts a pylog broker in-process (data in a temp dir) and creates the topics
   ``events`` (3 partitions) and ``purchases`` (3 partitions).
2. A kafka-python producer writes 20,000 JSON events
   ``{"id", "user", "kind": view|click|purchase, "amount"}`` — half before the
   query starts, half while it runs.
3. A Spark query (local[2]) reads them with ``format("pylog")``, parses the
   JSON, keeps the clicks and purchases, adds ``amount_cents`` and a ``big``
   flag, and writes them exactly-once (the sink's default) to ``purchases`` with
   ``format("pylog")``, keyed by user. Progress prints per micro-batch.
4. The proof: a read_committed consumer reads ``purchases``; the count and the
   content must equal the transform computed in plain Python, with no
   duplicates, and no transaction may be left open. Then the query's consumer
   group (the source mirrors its checkpoint there) is shown with
   ``python -m broker_sim.tools.cli groups describe``: lag 0.

Exit status 0 only when the proof holds.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic
from kafka.structs import TopicPartition

from broker_sim.server.broker import Broker

EVENTS, OUTPUT, GROUP = "events", "purchases", "demo-pipeline"
PARTITIONS = 3
TOTAL = 20_000
KINDS = ("view", "click", "purchase")


def say(message: str) -> None:
    print(f"[demo] {message}", flush=True)


def event(i: int) -> dict:
    return {"id": i, "user": f"user-{i % 97}", "kind": KINDS[i % 3] if i % 7 else "view", "amount": (i * 37) % 500}


def expected_output() -> Counter:
    """The transform in plain Python: (key, value dict) of every output record."""
    out = Counter()
    for i in range(TOTAL):
        e = event(i)
        if e["kind"] == "view":
            continue
        value = {"id": e["id"], "user": e["user"], "kind": e["kind"], "amount_cents": e["amount"] * 100,
                 "big": e["amount"] >= 400}
        out[(e["user"], json.dumps(value, sort_keys=True))] += 1
    return out


def produce(bootstrap: str, start: int, stop: int) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, acks="all")
    for i in range(start, stop):
        e = event(i)
        producer.send(EVENTS, key=e["user"].encode(), value=json.dumps(e).encode())
    producer.flush(30)
    producer.close()


def start_query(spark, bootstrap: str, checkpoint: str):
    events = (spark.readStream.format("pylog").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", EVENTS).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", "4000").option("groupId", GROUP).load())
    purchases = (events
                 .selectExpr("from_json(CAST(value AS STRING), "
                             "'id INT, user STRING, kind STRING, amount INT') AS e")
                 .where("e.kind IN ('click', 'purchase')")
                 .selectExpr("e.user AS key",
                             "to_json(named_struct('id', e.id, 'user', e.user, 'kind', e.kind, "
                             "'amount_cents', e.amount * 100, 'big', e.amount >= 400)) AS value"))
    return (purchases.writeStream.format("pylog").option("kafka.bootstrap.servers", bootstrap)
            .option("topic", OUTPUT).option("checkpointLocation", checkpoint)
            .trigger(processingTime="500 milliseconds").start())


def follow(query, expected_input: int, timeout_s: float) -> None:
    """Print each finished micro-batch until the query has read ``expected_input`` rows."""
    shown, read = 0, 0
    deadline = time.monotonic() + timeout_s
    while read < expected_input:
        if query.exception() is not None:
            raise SystemExit(f"[demo] the query failed: {query.exception()}")
        if time.monotonic() > deadline:
            raise SystemExit(f"[demo] the query read {read} of {expected_input} events in {timeout_s:.0f} s")
        progress = query.recentProgress
        for p in progress[shown:]:
            if p["numInputRows"]:
                read += p["numInputRows"]
                say(f"batch {p['batchId']}: {p['numInputRows']} events in, "
                    f"{p['durationMs'].get('addBatch', 0)} ms to write and commit "
                    f"(total {read}/{expected_input})")
        shown = len(progress)
        time.sleep(0.2)


def read_committed(bootstrap: str) -> tuple[list, bool]:
    """Every committed record of the output, and whether a transaction is still open there."""
    partitions = [TopicPartition(OUTPUT, p) for p in range(PARTITIONS)]
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed",
                             enable_auto_commit=False, group_id=None)
    uncommitted = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        ends = consumer.end_offsets(partitions)
        open_txn = ends != uncommitted.end_offsets(partitions)
        records = []
        deadline = time.monotonic() + 30
        while any(consumer.position(tp) < ends[tp] for tp in partitions) and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=200).values():
                records.extend(batch)
        return records, open_txn
    finally:
        consumer.close()
        uncommitted.close()


def group_lag(bootstrap: str) -> int:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        partitions = [TopicPartition(EVENTS, p) for p in range(PARTITIONS)]
        committed = admin.list_group_offsets({GROUP: partitions}).get(GROUP, {})
        ends = consumer.end_offsets(partitions)
        return sum(end - max(getattr(committed.get(tp), "offset", 0) or 0, 0) for tp, end in ends.items())
    finally:
        admin.close()
        consumer.close()


def main() -> int:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="pylog-demo-") as data_dir, Broker(data_dir, port=0) as broker:
        bootstrap = broker.bootstrap_servers
        say(f"embedded broker up on {bootstrap} (data dir {data_dir})")
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        admin.create_topics([NewTopic(EVENTS, PARTITIONS, 1), NewTopic(OUTPUT, PARTITIONS, 1)])
        admin.close()
        produce(bootstrap, 0, TOTAL // 2)
        say(f"produced {TOTAL // 2} JSON events to '{EVENTS}' with kafka-python")

        from pyspark.sql import SparkSession
        spark = (SparkSession.builder.master("local[2]").appName("pylog-demo")
                 .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                 .config("spark.sql.shuffle.partitions", "2")
                 .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
                 .getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        checkpoint = tempfile.mkdtemp(prefix="pylog-demo-ckpt-")
        query = start_query(spark, bootstrap, checkpoint)
        say(f"Spark query started: pylog '{EVENTS}' -> parse JSON, keep clicks and purchases, add amount_cents "
            f"-> pylog '{OUTPUT}' (exactly-once)")
        produce(bootstrap, TOTAL // 2, TOTAL)
        say(f"produced {TOTAL - TOTAL // 2} more events while the query runs")
        follow(query, TOTAL, timeout_s=90)
        deadline = time.monotonic() + 15   # the source commits a batch's end to the group on the next trigger
        while group_lag(bootstrap) and time.monotonic() < deadline:
            time.sleep(0.3)
        query.stop()
        spark.stop()

        records, open_txn = read_committed(bootstrap)
        got = Counter((r.key.decode(), json.dumps(json.loads(r.value), sort_keys=True)) for r in records)
        expected = expected_output()
        missing = sum((expected - got).values())
        extra = sum((got - expected).values())
        duplicated = sum(n - 1 for n in got.values() if n > 1)
        ok = not missing and not extra and not open_txn and len(records) == sum(expected.values())
        say(f"read_committed '{OUTPUT}': {len(records)} records, expected {sum(expected.values())}: "
            f"missing {missing}, unexpected {extra}, duplicated {duplicated}, "
            f"open transactions {'yes' if open_txn else 'none'} -> {'OK' if ok else 'FAILED'}")
        say(f"consumer group '{GROUP}' (the query's progress, mirrored from its checkpoint):")
        described = subprocess.run([sys.executable, "-m", "broker_sim.tools.cli", "--bootstrap-server", bootstrap,
                                    "groups", "describe", GROUP], capture_output=True, text=True)
        print(described.stdout.rstrip() or described.stderr.rstrip(), flush=True)
        lag = group_lag(bootstrap)
        ok = ok and lag == 0
        say(f"group lag {lag}; demo {'OK' if ok else 'FAILED'} in {time.monotonic() - began:.1f} s")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
