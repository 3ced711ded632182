"""A sink whose brokers went away between micro-batches: the query fails soon, naming the address and the reason."""
from __future__ import annotations

import tempfile
import time

import pytest

from spark_helpers import create_topic

pytestmark = pytest.mark.spark


def _wait_for_new_batch(query, after: int, timeout_s: float = 120) -> int:
    deadline = time.monotonic() + timeout_s
    while True:
        last = query.lastProgress
        if last and last["batchId"] > after and last["numInputRows"] > 0:
            return last["batchId"]
        assert time.monotonic() < deadline and query.isActive, f"no batch after {after}: {query.exception()}"
        time.sleep(0.05)


def test_a_broker_gone_mid_stream_fails_the_query_naming_the_address_and_the_refusal(spark, pylog_broker_factory):
    broker = pylog_broker_factory()
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, "ticks", partitions=1)
    query = (spark.readStream.format("rate").option("rowsPerSecond", "20").load()
             .selectExpr("CAST(value AS STRING) AS value")
             .writeStream.format("pylog").option("kafka.bootstrap.servers", bootstrap).option("topic", "ticks")
             .option("kafka.delivery.timeout.ms", "3000")
             .option("checkpointLocation", tempfile.mkdtemp(prefix="pylog-ckpt-"))
             .trigger(processingTime="8 seconds").start())
    try:
        _wait_for_new_batch(query, _wait_for_new_batch(query, -1))   # two batches: the query is under way
        broker.stop()   # right after a batch: the next one finds the broker gone
        started = time.monotonic()
        with pytest.raises(Exception):
            query.awaitTermination(240)
        message = str(query.exception())
    finally:
        query.stop()
    assert f"Cannot connect to kafka.bootstrap.servers={bootstrap}" in message
    assert "Connection refused" in message
    # mid-stream the brokers get the writes' patience (kafka.delivery.timeout.ms), not bootstrapTimeoutMs, and
    # no more: before, the sink log lookup waited 60 s and said only "Unable to bootstrap"
    assert "within kafka.delivery.timeout.ms=3000" in message
    assert time.monotonic() - started < 50
