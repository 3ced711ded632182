"""One streaming query's checkpoint moved between Spark's own format("kafka") and format("pylog"), both ways.

A user who tries pylog on a query that ran with Spark's connector, or goes back, keeps its place: each run of the
query resumes where the previous one (with the other format) ended, so the rows of all runs together are every
record exactly once. On broker_sim and on Apache Kafka (``broker``), with Spark's connector 4.2 (``spark_kafka``).
"""
from __future__ import annotations

import tempfile

import pytest

from connector.source.offsets import group_of, without_group
from spark_helpers import checkpoint_source_offsets, create_topic, numbered, produce, run_available_now

pytestmark = pytest.mark.spark


def _read(spark, fmt: str, bootstrap: str, topic: str):
    return (spark.readStream.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
            .option("startingOffsets", "earliest").load())


def _run(spark, fmt, broker, topic, checkpoint, first: int, count: int) -> list:
    """Produce ``count`` more records per partition, then run the query once with ``fmt``: its rows."""
    bootstrap = broker.bootstrap_servers
    produce(bootstrap, topic, numbered(0, first, count) + numbered(1, first, count))
    _, rows = run_available_now(_read(spark, fmt, bootstrap, topic), checkpoint)
    return rows


@pytest.mark.parametrize("formats", [("pylog", "kafka", "pylog"), ("kafka", "pylog", "kafka")],
                         ids=["pylog-kafka-pylog", "kafka-pylog-kafka"])
def test_a_query_resumes_exactly_when_its_checkpoint_changes_format(spark_kafka, broker, formats):
    topic = broker.name("migrate")
    create_topic(broker.bootstrap_servers, topic, partitions=2)
    checkpoint = tempfile.mkdtemp(prefix="pylog-ckpt-migrate-")
    runs = [_run(spark_kafka, fmt, broker, topic, checkpoint, 10 * i, 10) for i, fmt in enumerate(formats)]

    # every run read exactly the records produced since the previous one, whatever format wrote the checkpoint
    for i, rows in enumerate(runs):
        expected = sorted((p, o, f"k{n}".encode(), f"v{p}-{n}".encode())
                          for p in (0, 1) for o, n in zip(range(10 * i, 10 * i + 10), range(10 * i, 10 * i + 10)))
        assert rows == expected, f"run {i + 1} ({formats[i]})"
    offsets = checkpoint_source_offsets(checkpoint)
    assert without_group(offsets[-1]) == {topic: {"0": 30, "1": 30}}
    if formats[-1] == "pylog" and formats[0] == "pylog":
        # pylog's offsets carry its consumer group where Spark's connector sees a topic without partitions
        assert group_of(offsets[0]) is not None
