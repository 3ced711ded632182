"""Batch reads with spark.read.format("pylog"), on broker_sim and on Apache Kafka (``broker``)."""
from __future__ import annotations

import json

import pytest
from spark_helpers import batch, create_topic, produce

pytestmark = pytest.mark.spark
BASE = 1_700_000_000_000


@pytest.fixture
def history(broker):
    """A topic of two partitions, 50 records each, timestamps a second apart from 2023 (kept: retention.ms=-1,
    or Kafka's first retention pass deletes them)."""
    bootstrap, topic = broker.bootstrap_servers, broker.name("history")
    create_topic(bootstrap, topic, partitions=2, config={"retention.ms": "-1"})
    produce(bootstrap, topic, [(p, f"k{i}".encode(), f"{p}-{i}".encode(), BASE + 1000 * i)
                               for p in (0, 1) for i in range(50)])
    return topic


def _positions(df):
    return [(r.partition, r.offset) for r in df.select("partition", "offset").orderBy("partition", "offset").collect()]


def test_batch_reads_between_starting_and_ending_offsets(spark, broker, history):
    df = batch(spark, broker.bootstrap_servers, subscribe=history,
               startingOffsets=json.dumps({history: {"0": 10, "1": -2}}),
               endingOffsets=json.dumps({history: {"0": 13, "1": 2}}))
    assert _positions(df) == [(0, 10), (0, 11), (0, 12), (1, 0), (1, 1)]


def test_batch_defaults_to_earliest_through_latest(spark, broker, history):
    df = batch(spark, broker.bootstrap_servers, subscribe=history)
    assert df.count() == 100
    assert df.schema.simpleString() == ("struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
                                        "timestamp:timestamp,timestampType:int>")


def test_batch_by_timestamps_and_assign(spark, broker, history):
    df = batch(spark, broker.bootstrap_servers, assign=json.dumps({history: [1]}),
               startingTimestamp=BASE + 47_000, endingOffsetsByTimestamp=json.dumps({history: {"1": BASE + 49_000}}))
    assert _positions(df) == [(1, 47), (1, 48)]


@pytest.mark.parametrize("options, tasks", [
    ({}, 2),
    ({"minPartitions": "6"}, 6),
    ({"maxRecordsPerPartition": "20"}, 6),
])
def test_big_ranges_are_split_across_tasks(spark, broker, history, options, tasks):
    df = batch(spark, broker.bootstrap_servers, subscribe=history, **options)
    assert df.rdd.getNumPartitions() == tasks
    assert _positions(df) == [(p, o) for p in (0, 1) for o in range(50)]


def test_explicit_registration_works_alongside_auto_registration(spark, broker, history):
    from connector.datasource import PylogDataSource

    spark.dataSource.register(PylogDataSource)
    ending = json.dumps({history: {"0": 3, "1": 0}})
    assert batch(spark, broker.bootstrap_servers, subscribe=history, endingOffsets=ending).count() == 3
