"""A user's first Spark job after installing pylog, run by tests/packaging from outside the checkout.

Prints one JSON object: where pylog was imported from, what Spark's own
data source discovery saw, and the results of a batch write/read with
format("pylog") (no explicit registration), an overwrite attempt, and an
update-mode aggregation through connector.foreach_batch.
"""
from __future__ import annotations

import importlib.metadata
import importlib.resources
import importlib.util
import json
import pkgutil
import sys
import tempfile

from pyspark.sql import SparkSession

import connector
from broker_sim.server.broker import Broker


def main() -> None:
    spark = (SparkSession.builder.master("local[1]").appName("pylog-install-check")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "1")
             .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    report = {
        "connector": connector.__file__,
        "discovered": sorted(m.name for m in pkgutil.iter_modules() if m.name.startswith("pyspark_")),
        "requires": importlib.metadata.requires("pylog"),
        "schemas": sorted(p.name for package in ("broker_sim", "connector")
                          for p in (importlib.resources.files(package) / "schemas").iterdir()
                          if p.name.endswith(".json")),
        "top_level_schemas": importlib.util.find_spec("schemas") is not None,
    }
    with Broker(port=0) as broker:
        servers = broker.bootstrap_servers
        df = spark.createDataFrame([("a", "x"), ("b", "y"), ("a", "z")], "key STRING, value STRING")
        df.write.format("pylog").mode("append").option("kafka.bootstrap.servers", servers) \
            .option("topic", "events").save()
        try:
            df.write.format("pylog").mode("overwrite").option("kafka.bootstrap.servers", servers) \
                .option("topic", "events").save()
            report["overwrite"] = "accepted"
        except Exception as exc:  # the refusal's message is the result
            report["overwrite"] = str(exc)
        read = spark.read.format("pylog").option("kafka.bootstrap.servers", servers).option("subscribe", "events")
        report["values"] = sorted(r.value.decode() for r in read.load().collect())

        counts = (spark.readStream.format("pylog").option("kafka.bootstrap.servers", servers)
                  .option("subscribe", "events").option("startingOffsets", "earliest").load()
                  .groupBy("key").count().selectExpr("key", "CAST(count AS STRING) AS value"))
        query = (counts.writeStream.outputMode("update").trigger(availableNow=True)
                 .foreachBatch(connector.foreach_batch(**{"kafka.bootstrap.servers": servers, "topic": "counts"}))
                 .option("checkpointLocation", tempfile.mkdtemp()).start())
        query.awaitTermination()
        counted = read.option("subscribe", "counts").load().collect()
        report["update"] = sorted(f"{r.key.decode()}={r.value.decode()}" for r in counted)
    spark.stop()
    print("PYLOG-REPORT " + json.dumps(report))


if __name__ == "__main__":
    sys.exit(main())
