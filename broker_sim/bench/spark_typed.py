"""Benchmark of typed columns: Avro through ``format("pylog")`` typed vs binary; prints one JSON document.

    python -m broker_sim.bench.spark_typed [--records 1000000] [--partitions 2] [--rounds 3]

Theory of operation: start the embedded broker (which serves the Schema
Registry) in a temp dir, register a 10-field Avro record (long, int, string,
double, boolean, nullable string, enum, timestamp-millis, decimal,
array<string>), produce ``--records`` records in Confluent's wire format
(fastavro's writer plus the 5-byte header) with confluent-kafka, then read the
same topic with ``readStream.format("pylog")`` and Trigger.AvailableNow into
the ``noop`` sink twice per round: ``valueFormat=avro`` (a struct column, decoded
straight into Arrow) and the default binary ``value``. Rounds alternate after
one unreported warm-up round; medians and their ratio are reported
(the issue's target: typed >= 0.5x binary). ``decode`` times the format
module's decoder alone, outside Spark (records/s for one core).
"""
from __future__ import annotations

import argparse
import io
import json
import os
import platform
import statistics
import struct
import sys
import tempfile
import time

TOPIC = "typed-bench"
SCHEMA = json.dumps({"type": "record", "name": "Reading", "namespace": "bench", "fields": [
    {"name": "id", "type": "long"},
    {"name": "sensor", "type": "int"},
    {"name": "site", "type": "string"},
    {"name": "value", "type": "double"},
    {"name": "ok", "type": "boolean"},
    {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "level", "type": {"type": "enum", "name": "Level", "symbols": ["LOW", "MID", "HIGH"]}},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
]})


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    from broker_sim.server.broker import Broker

    result = {"records": args.records, "partitions": args.partitions, "python": platform.python_version(),
              "schema_fields": 10}
    with tempfile.TemporaryDirectory(prefix="pylog-bench-") as data_dir:
        with Broker(data_dir, host="127.0.0.1", port=0,
                    config={"num.partitions": args.partitions, "schema.registry.listeners": "http://127.0.0.1:0"}
                    ) as broker:
            bootstrap, registry = broker.bootstrap_servers, broker.schema_registry_url
            schema_id = _register(registry)
            payloads = _payloads(schema_id, 5000)
            started = time.perf_counter()
            _produce(bootstrap, payloads, args.records, args.partitions)
            result["produce_seconds"] = round(time.perf_counter() - started, 2)
            result["value_bytes"] = round(statistics.mean(len(p) for p in payloads), 1)
            result["decode"] = _decode_rate(registry, payloads)
            spark = _spark_session()
            try:
                result["headline"] = _stream_rates(spark, bootstrap, registry, args)
            finally:
                spark.stop()
    print(json.dumps(result, indent=2))
    return 0


def _register(registry: str) -> int:
    import urllib.request
    request = urllib.request.Request(f"{registry}/subjects/{TOPIC}-value/versions",
                                     data=json.dumps({"schema": SCHEMA}).encode(), method="POST",
                                     headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return int(json.loads(response.read())["id"])


def _record(i: int) -> dict:
    import datetime as dt
    import decimal
    return {"id": i, "sensor": i % 1000, "site": f"site-{i % 97}", "value": i * 0.25, "ok": i % 3 != 0,
            "note": None if i % 2 else f"note {i}", "level": ("LOW", "MID", "HIGH")[i % 3],
            "at": dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(milliseconds=i),
            "price": decimal.Decimal(i % 100000) / 100, "tags": ["a", f"t{i % 10}"]}


def _payloads(schema_id: int, distinct: int) -> list[bytes]:
    import fastavro
    parsed = fastavro.parse_schema(json.loads(SCHEMA))
    header = struct.pack(">bI", 0, schema_id)
    out = []
    for i in range(distinct):
        buffer = io.BytesIO()
        fastavro.schemaless_writer(buffer, parsed, _record(i))
        out.append(header + buffer.getvalue())
    return out


def _produce(bootstrap: str, payloads: list[bytes], records: int, partitions: int) -> None:
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                         "queue.buffering.max.messages": 1_000_000, "compression.type": "none", "acks": 1})
    for i in range(records):
        while True:
            try:
                producer.produce(TOPIC, value=payloads[i % len(payloads)], key=b"%d" % i, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120):
        raise RuntimeError("records were not all delivered")


def _decode_rate(registry: str, payloads: list[bytes]) -> dict:
    """The connector's column decoder alone (framing, id lookup, format decoder, pa.array)."""
    from connector.options import parse_source_options
    from connector.typed.columns import ColumnDecoder
    options = parse_source_options({"kafka.bootstrap.servers": "unused:9092", "subscribe": TOPIC,
                                    "valueFormat": "avro", "schema.registry.url": registry}).resolve_typed()
    decoder = ColumnDecoder(options.value_typed, permissive=False)
    batch = (payloads * (100_000 // len(payloads) + 1))[:100_000]
    decoder.decode(batch[:100], str)   # fetch the writer schema once
    best = 0.0
    for _ in range(3):
        started = time.perf_counter()
        decoder.decode(batch, str)
        best = max(best, len(batch) / (time.perf_counter() - started))
    return {"what": "ColumnDecoder.decode: framed Avro payloads -> one Arrow struct array, one core",
            "records_per_s": round(best)}


def _spark_session():
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[2]").appName("pylog-bench-typed")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _stream_rates(spark, bootstrap: str, registry: str, args) -> dict:
    from broker_sim.bench.spark_source import _available_now_into_noop

    def load(typed: bool):
        reader = (spark.readStream.format("pylog").option("kafka.bootstrap.servers", bootstrap)
                  .option("subscribe", TOPIC).option("startingOffsets", "earliest"))
        if typed:
            reader = reader.option("valueFormat", "avro").option("schema.registry.url", registry)
        return reader.load()

    seconds: dict[str, list[float]] = {"typed_avro": [], "binary": []}
    for round_number in range(args.rounds + 1):   # round 0 warms up the JVM and the Python workers
        for name in seconds:
            elapsed, _ = _available_now_into_noop(load(name == "typed_avro"), name, args.records)
            if round_number:
                seconds[name].append(elapsed)
    rates = {name: round(args.records / statistics.median(values)) for name, values in seconds.items()}
    return {
        "what": "readStream AvailableNow -> writeStream noop, start() to termination, same topic",
        "typed_avro_rows_per_s": rates["typed_avro"],
        "binary_rows_per_s": rates["binary"],
        "ratio": round(rates["typed_avro"] / rates["binary"], 3),
        "target_ratio": 0.5,
        "rounds": args.rounds,
        "warmup_rounds": 1,
        "seconds": {name: [round(v, 2) for v in values] for name, values in seconds.items()},
    }


if __name__ == "__main__":
    sys.exit(main())
