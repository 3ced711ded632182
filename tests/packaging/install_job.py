"""A user's first Spark job after installing pylog, run by tests/packaging from outside the checkout.

Prints one JSON object: where pylog was imported from, what Spark's own
data source discovery saw, and the results of a batch write/read with
format("pylog") (no explicit registration), an overwrite attempt, an
update-mode aggregation through connector.foreach_batch, a typed (Avro) write and read through the broker's
Schema Registry, and one schema of each type registered with it.
"""
from __future__ import annotations

import importlib.metadata
import importlib.resources
import importlib.util
import json
import pkgutil
import sys
import tempfile
import urllib.request

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
        "avro_arrow": _avro_arrow(),
        "compiled": _compiled(),
    }
    report["registered"] = _register_each_schema_type()
    with Broker(port=0, config={"schema.registry.listeners": "http://127.0.0.1:0"}) as broker:
        servers = broker.bootstrap_servers
        report["typed"] = _typed_round_trip(spark, servers, broker.schema_registry_url)
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


def _typed_round_trip(spark, servers: str, registry: str) -> list:
    """A struct written with valueFormat=avro (its schema registered) and read back typed: what the `spark`
    extra must bring (fastavro, the registry client, the compiled decoder)."""
    options = {"kafka.bootstrap.servers": servers, "valueFormat": "avro", "schema.registry.url": registry}
    typed = spark.createDataFrame([(1, "a"), (2, None)], "id long, name string").selectExpr("struct(id, name) AS value")
    typed.write.format("pylog").mode("append").options(**options).option("topic", "typed").save()
    back = spark.read.format("pylog").options(**options).option("subscribe", "typed").load()
    return sorted([r.value.id, r.value.name, r.valueSchemaId] for r in back.collect())


def _avro_arrow():
    """Where the C extension decoding Avro into Arrow was imported from, and one Avro long it decoded (a
    one-op program: a varint into an 8-byte column; see connector/typed/avro_arrow.py)."""
    from connector.typed import _avro_arrow
    program = _avro_arrow.compile([(2, 8, ())], (3, 0, 2, 1, 0, (), None))
    (length, nulls, _, _, data), = _avro_arrow.decode(program, [b"\x54"], 0)
    return {"file": _avro_arrow.__file__, "decoded": [length, nulls, int.from_bytes(data, "little")]}


def _compiled() -> dict:
    """Where the other C extensions were imported from (the validator's record walk, the source's Arrow
    decoder, the sink's batch encoder): each is optional in setup.py, so a packaging slip would only show as
    the slow fallback."""
    import importlib
    return {name: importlib.import_module(name).__file__ for name in (
        "broker_sim.storage._records", "connector.source._records_arrow", "connector.sink._arrow_batches")}


SCHEMAS = {
    "AVRO": '{"type": "record", "name": "E", "fields": [{"name": "a", "type": "long"}]}',
    "JSON": '{"type": "object", "properties": {"a": {"type": "integer"}}}',
    "PROTOBUF": 'syntax = "proto3";\nmessage E {\n  int64 a = 1;\n}\n',
}


def _register_each_schema_type() -> dict:
    """The installed broker's Schema Registry parses all three types (their parsers are the package's
    dependencies): type -> (id, the schema type GET answers)."""
    registered = {}
    with Broker(port=0, config={"schema.registry.listeners": "http://127.0.0.1:0"}) as broker:
        for schema_type, text in SCHEMAS.items():
            body = json.dumps({"schema": text, "schemaType": schema_type}).encode()
            request = urllib.request.Request(f"{broker.schema_registry_url}/subjects/{schema_type}-value/versions",
                                             body, {"Content-Type": "application/vnd.schemaregistry.v1+json"})
            with urllib.request.urlopen(request, timeout=30) as answer:
                schema_id = json.loads(answer.read())["id"]
            with urllib.request.urlopen(f"{broker.schema_registry_url}/schemas/ids/{schema_id}", timeout=30) as got:
                registered[schema_type] = [schema_id, json.loads(got.read()).get("schemaType", "AVRO")]
    return registered


if __name__ == "__main__":
    sys.exit(main())
