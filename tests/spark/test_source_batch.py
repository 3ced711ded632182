"""Batch reads with spark.read.format("pylog")."""
from __future__ import annotations

import json

import pytest
from spark_helpers import batch, create_topic, produce

pytestmark = pytest.mark.spark


@pytest.fixture
def two_partitions(pylog_broker):
    bootstrap = pylog_broker.bootstrap_servers
    create_topic(bootstrap, "history", partitions=2)
    base = 1_700_000_000_000
    produce(bootstrap, "history", [(p, f"k{i}".encode(), f"{p}-{i}".encode(), base + 1000 * i)
                                   for p in (0, 1) for i in range(50)])
    return bootstrap


def _positions(df):
    return [(r.partition, r.offset) for r in df.select("partition", "offset").orderBy("partition", "offset").collect()]


def test_batch_reads_between_starting_and_ending_offsets(spark, two_partitions):
    df = batch(spark, two_partitions, subscribe="history",
               startingOffsets=json.dumps({"history": {"0": 10, "1": -2}}),
               endingOffsets=json.dumps({"history": {"0": 13, "1": 2}}))
    assert _positions(df) == [(0, 10), (0, 11), (0, 12), (1, 0), (1, 1)]


def test_batch_defaults_to_earliest_through_latest(spark, two_partitions):
    df = batch(spark, two_partitions, subscribe="history")
    assert df.count() == 100
    assert df.schema.simpleString() == ("struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
                                        "timestamp:timestamp,timestampType:int>")


def test_batch_by_timestamps_and_assign(spark, two_partitions):
    base = 1_700_000_000_000
    df = batch(spark, two_partitions, assign=json.dumps({"history": [1]}),
               startingTimestamp=base + 47_000, endingOffsetsByTimestamp=json.dumps({"history": {"1": base + 49_000}}))
    assert _positions(df) == [(1, 47), (1, 48)]


@pytest.mark.parametrize("options, tasks", [
    ({}, 2),
    ({"minPartitions": "6"}, 6),
    ({"maxRecordsPerPartition": "20"}, 6),
])
def test_big_ranges_are_split_across_tasks(spark, two_partitions, options, tasks):
    df = batch(spark, two_partitions, subscribe="history", **options)
    assert df.rdd.getNumPartitions() == tasks
    assert _positions(df) == [(p, o) for p in (0, 1) for o in range(50)]


def test_explicit_registration_works_alongside_auto_registration(spark, two_partitions):
    from connector.datasource import PylogDataSource

    spark.dataSource.register(PylogDataSource)
    assert batch(spark, two_partitions, subscribe="history", endingOffsets='{"history":{"0":3,"1":0}}').count() == 3
