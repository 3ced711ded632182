"""One pylog topic to another, value upper-cased, exactly-once, as a Spark Declarative Pipeline.

``spark-pipelines run`` imports this file with its Spark Connect session active. The sink is a
``dp.create_sink`` of format ``pylog``; one append flow streams the source topic into it. Each run is
incremental: the flow's checkpoint (under the spec's ``storage``) makes a run copy only the records that
came since the last one.

Environment: ``PYLOG_BOOTSTRAP`` (kafka.bootstrap.servers, default 127.0.0.1:9092), ``PYLOG_SOURCE_TOPIC``
(default events), ``PYLOG_SINK_TOPIC`` (default events-upper).
"""
import os

from pyspark import pipelines as dp
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

BOOTSTRAP = os.environ.get("PYLOG_BOOTSTRAP", "127.0.0.1:9092")
SOURCE_TOPIC = os.environ.get("PYLOG_SOURCE_TOPIC", "events")
SINK_TOPIC = os.environ.get("PYLOG_SINK_TOPIC", "events-upper")

dp.create_sink("pylog_upper_sink", format="pylog",
               options={"kafka.bootstrap.servers": BOOTSTRAP, "topic": SINK_TOPIC})


@dp.append_flow(target="pylog_upper_sink")
def upper_values():
    return (SparkSession.active().readStream.format("pylog")
            .option("kafka.bootstrap.servers", BOOTSTRAP)
            .option("subscribe", SOURCE_TOPIC)
            .option("startingOffsets", "earliest")
            .load()
            .select("key", F.upper(F.col("value").cast("string")).alias("value")))
