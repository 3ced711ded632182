"""Feeding the broker and reading results back, for the Spark source tests."""
from __future__ import annotations

import itertools
import json
import re
import tempfile
import time
from pathlib import Path

import pytest

from broker_sim.testing.data import create_topics, seed
from connector.source.offsets import without_group

_query_names = itertools.count()
# A test that takes ``broker`` (tests/spark/conftest.py) but runs on broker_sim only, with the reason beside it
broker_sim_only = pytest.mark.parametrize("broker", ["pylog"], indirect=True)


def create_topic(bootstrap: str, topic: str, partitions: int = 1, config: dict | None = None) -> None:
    """``topic`` with ``partitions``, every partition led before this returns (``testing.data.create_topics``)."""
    create_topics(bootstrap, {topic: (partitions, config or {})})


def produce(bootstrap: str, topic: str, records) -> None:
    """``records``: (partition, key, value[, timestamp_ms[, headers]]) tuples, sent in order and flushed
    (``testing.data.seed``)."""
    rows = []
    for record in records:
        partition, key, value, *rest = record
        rows.append({"partition": partition, "key": key, "value": value,
                     "timestamp": rest[0] if rest else None, "headers": rest[1] if len(rest) > 1 else None})
    seed(bootstrap, topic, rows, timeout_s=30)


def numbered(partition: int, start: int, count: int, prefix: str = "v"):
    return [(partition, f"k{i}".encode(), f"{prefix}{partition}-{i}".encode()) for i in range(start, start + count)]


def stream(spark, bootstrap: str, **options):
    reader = spark.readStream.format("pylog").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load()


def batch(spark, bootstrap: str, **options):
    reader = spark.read.format("pylog").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load()


def to_memory(df, checkpoint: str | None = None, *, available_now: bool = False):
    """Start ``df`` into a fresh memory table; returns (query, table name)."""
    name = f"pylog_out_{next(_query_names)}"
    writer = (df.writeStream.format("memory").queryName(name)
              .option("checkpointLocation", checkpoint or tempfile.mkdtemp(prefix="pylog-ckpt-")))
    if available_now:
        writer = writer.trigger(availableNow=True)
    return writer.start(), name


def rows_of(spark, table: str):
    return [(r.partition, r.offset, r.key, r.value) for r in
            spark.sql(f"SELECT partition, offset, key, value FROM {table} ORDER BY partition, offset").collect()]


def run_available_now(df, checkpoint: str | None = None, timeout_s: float = 120):
    """Run ``df`` with Trigger.AvailableNow into foreachBatch (which, unlike memory, resumes from a checkpoint).

    Returns (query, rows) with rows as sorted (partition, offset, key, value) tuples.
    """
    collected = []

    def collect(batch_df, _batch_id):
        collected.extend((r.partition, r.offset, r.key, r.value)
                         for r in batch_df.select("partition", "offset", "key", "value").collect())

    query = (df.writeStream.foreachBatch(collect).trigger(availableNow=True)
             .option("checkpointLocation", checkpoint or tempfile.mkdtemp(prefix="pylog-ckpt-")).start())
    assert query.awaitTermination(timeout_s), "AvailableNow query did not finish"
    if query.exception() is not None:
        raise query.exception()
    return query, sorted(collected)


def source_progress(query, field: str, index: int = -1):
    """A source field of the query's progress (offsets are JSON text there), decoded; offsets without the
    query's default consumer group (``offsets.with_group``, tested in test_source_progress)."""
    value = query.recentProgress[index]["sources"][0][field]
    value = json.loads(value) if isinstance(value, str) else value
    return without_group(value) if isinstance(value, dict) else value


_BATCH_FILE = re.compile(r"\d+")


def checkpoint_source_offsets(checkpoint: str) -> list:
    """The source offset JSON of every batch in the checkpoint's ``offsets/`` log, by batch id.

    Only the batch files themselves (named by batch id) are read: Hadoop's
    local file system writes a ``.<name>.crc`` checksum beside each file, and
    Spark writes through ``.<name>.<uuid>.tmp`` files that may be renamed
    away while the directory is listed.
    """
    files = [p for p in Path(checkpoint, "offsets").iterdir() if _BATCH_FILE.fullmatch(p.name)]
    # A batch file is "v1", the batch metadata, then one line per source.
    return [json.loads(p.read_text().splitlines()[2]) for p in sorted(files, key=lambda p: int(p.name))]


def create_replicated_topics(cluster, partitions: dict[str, int], config: dict | None = None) -> None:
    """Topics with replication factor 3 on a 3-node ``cluster`` (LocalCluster or KafkaCluster), each with every
    replica in sync before this returns."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    futures = admin.create_topics([NewTopic(t, num_partitions=n, replication_factor=3, config=config or {})
                                   for t, n in partitions.items()], operation_timeout=30, request_timeout=30)
    for topic, future in futures.items():
        future.result(30)
        cluster.wait_for_full_isr(topic, partitions[topic], timeout_s=60)


def produce_acks_all(bootstrap: str, topic: str, numbers: range, partitions: int) -> None:
    """Values ``str(i)`` with keys ``k<i>`` into partition ``i % partitions``, idempotent with acks=all."""
    from confluent_kafka import Producer

    failures = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "message.timeout.ms": 60000})
    for i in numbers:
        producer.produce(topic, str(i).encode(), key=f"k{i}".encode(), partition=i % partitions,
                         on_delivery=lambda err, _msg: err is not None and failures.append(err))
        producer.poll(0)
    assert producer.flush(90) == 0 and not failures, failures


def kill_and_restart(cluster, topic: str, partition: int, down_s: float, while_down=None) -> tuple[int, int]:
    """SIGKILL the partition's leader, wait until another broker leads it, run ``while_down()``, restart the
    old one ``down_s`` after the kill (or once ``while_down`` returns); (old leader, leader while it was down)."""
    leader = cluster.leader_of(topic, partition)
    killed_at = time.monotonic()
    cluster.kill(leader)
    deadline = killed_at + 60
    while True:
        try:
            moved_to = cluster.leader_of(topic, partition, timeout_s=5.0)
        except Exception:  # noqa: BLE001 - no leader during the election: ask again
            moved_to = leader
        if moved_to not in (leader, -1):
            break
        assert time.monotonic() < deadline, f"leadership of {topic}-{partition} stayed on broker {leader}"
        time.sleep(0.2)
    if while_down is not None:
        while_down()
    time.sleep(max(0.0, down_s - (time.monotonic() - killed_at)))
    cluster.restart(leader)
    return leader, moved_to
