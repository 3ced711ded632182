"""Benchmark of the pylog source; prints one JSON document (not a test, never pass/fail).

    python -m connector.bench [--records 1000000] [--value-bytes 100] [--partitions 2]

Theory of operation: start the embedded broker in a temp dir, produce the
records with confluent-kafka, then measure

* ``spark_batch_arrow``: rows/s of ``spark.read.format("pylog")`` written to
  the ``noop`` sink (the connector's real path: Arrow RecordBatches);
* ``spark_batch_tuples``: the same read with ``read()`` yielding one tuple
  per row (what a row-based source would cost);
* ``executor_fetch``: one partition read outside Spark, raw Fetch + compiled
  decoder into Arrow versus kafka-python's ``KafkaConsumer`` (assign + seek);
* ``decode``: records/s decoding the same record-batch bytes with aiokafka's
  compiled reader versus kafka-python's pure-Python reader.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time

from connector.source import PylogBatchReader, PylogDataSource

TOPIC = "bench"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2, help="timed Spark reads per path (best is reported)")
    args = parser.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    from broker_sim.server.broker import Broker

    result = {"records": args.records, "value_bytes": args.value_bytes, "partitions": args.partitions,
              "python": platform.python_version()}
    with tempfile.TemporaryDirectory(prefix="pylog-bench-") as data_dir:
        with Broker(data_dir, host="127.0.0.1", port=0, config={"num.partitions": args.partitions}) as broker:
            bootstrap = broker.bootstrap_servers
            started = time.perf_counter()
            _produce(bootstrap, args.records, args.value_bytes, args.partitions)
            result["produce_seconds"] = round(time.perf_counter() - started, 2)
            result["decode"] = _decode_rates(bootstrap)
            result["executor_fetch"] = _fetch_rates(bootstrap)
            result.update(_spark_rates(bootstrap, args.records, args.rounds))
    print(json.dumps(result, indent=2))
    return 0


def _produce(bootstrap: str, records: int, value_bytes: int, partitions: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                         "queue.buffering.max.messages": 1_000_000, "compression.type": "none", "acks": 1})
    value = b"x" * value_bytes
    for i in range(records):
        while True:
            try:
                producer.produce(TOPIC, value=value, key=b"%d" % i, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120):
        raise RuntimeError("records were not all delivered")


def _all_records_bytes(bootstrap: str, partition: int = 0) -> list[bytes]:
    from connector.wire import BrokerConnection

    host, port = bootstrap.rsplit(":", 1)
    connection = BrokerConnection(host, int(port), timeout_s=30, client_id="pylog-bench")
    chunks, position = [], 0
    try:
        while True:
            answer = connection.fetch(TOPIC, partition, position, isolation_level=0, max_wait_ms=0,
                                      max_bytes=1 << 20, partition_max_bytes=1 << 20)
            if not answer.records:
                return chunks
            chunks.append(answer.records)
            from aiokafka.record.memory_records import MemoryRecords
            memory = MemoryRecords(answer.records)
            while memory.has_next():
                batch = memory.next_batch()
                if batch is None:
                    break
                position = batch.next_offset
    finally:
        connection.close()


def _decode_rates(bootstrap: str) -> dict:
    from aiokafka.record.memory_records import MemoryRecords as CompiledMemoryRecords
    from kafka.record.memory_records import MemoryRecords as PureMemoryRecords

    from connector.arrow_records import decode, to_record_batch
    from connector.source import source_schema
    from pyspark.sql.pandas.types import to_arrow_schema

    chunks = _all_records_bytes(bootstrap)

    def iterate(memory_class):
        count = 0
        for chunk in chunks:
            memory = memory_class(chunk)
            while memory.has_next():
                batch = memory.next_batch()
                if batch is None:
                    break
                for record in batch:
                    record.value
                    count += 1
        return count

    rates = {"bytes": sum(map(len, chunks))}
    for name, memory_class in (("aiokafka_compiled_records_per_s", CompiledMemoryRecords),
                               ("kafka_python_pure_records_per_s", PureMemoryRecords)):
        started = time.perf_counter()
        count = iterate(memory_class)
        rates[name] = round(count / (time.perf_counter() - started))
    schema = to_arrow_schema(source_schema(), timezone="UTC")
    started, count = time.perf_counter(), 0
    for chunk in chunks:
        columns = decode(chunk, 0, 1 << 62)
        count += to_record_batch(TOPIC, 0, columns, schema).num_rows
    rates["compiled_to_arrow_rows_per_s"] = round(count / (time.perf_counter() - started))
    rates["records"] = count
    return rates


def _fetch_rates(bootstrap: str) -> dict:
    from kafka import KafkaConsumer, TopicPartition
    from pyspark.sql.pandas.types import to_arrow_schema

    from connector.cluster import OffsetReader
    from connector.offsets import OffsetRange
    from connector.options import parse_source_options
    from connector.partition_reader import RangeInputPartition, read_range
    from connector.source import source_schema

    options = parse_source_options({"kafka.bootstrap.servers": bootstrap, "subscribe": TOPIC}).for_batch()
    reader = OffsetReader(options)
    end = reader.latest([(TOPIC, 0)])[(TOPIC, 0)]
    reader.close()
    schema = to_arrow_schema(source_schema(), timezone="UTC")
    started = time.perf_counter()
    rows = sum(b.num_rows for b in read_range(RangeInputPartition(OffsetRange(TOPIC, 0, 0, end), options), schema))
    raw_rate = rows / (time.perf_counter() - started)

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                             max_partition_fetch_bytes=1 << 20, fetch_max_bytes=50 << 20)
    tp = TopicPartition(TOPIC, 0)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    started, seen = time.perf_counter(), 0
    deadline = started + 300
    while seen < end and time.perf_counter() < deadline:
        for records in consumer.poll(timeout_ms=1000, max_records=100_000).values():
            seen += len(records)
    consumer_rate = seen / (time.perf_counter() - started)
    consumer.close()
    return {"records": rows, "raw_fetch_to_arrow_rows_per_s": round(raw_rate),
            "kafka_python_consumer_records_per_s": round(consumer_rate)}


def _spark_rates(bootstrap: str, records: int, rounds: int) -> dict:
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("pylog-bench")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    # Under ``python -m`` this module is __main__, which Python workers cannot import: register the
    # class through its importable name so it pickles by reference.
    from connector.bench import TupleSource as importable_tuple_source
    spark.dataSource.register(importable_tuple_source)
    result = {"spark_master": "local[2]"}
    try:
        for key, name in (("spark_batch_arrow_rows_per_s", "pylog"),
                          ("spark_batch_tuples_rows_per_s", "pylog_tuples")):
            best = 0.0
            for _ in range(rounds):
                df = (spark.read.format(name).option("kafka.bootstrap.servers", bootstrap)
                      .option("subscribe", TOPIC).load())
                started = time.perf_counter()
                df.write.format("noop").mode("overwrite").save()
                best = max(best, records / (time.perf_counter() - started))
            result[key] = round(best)
        count = (spark.read.format("pylog").option("kafka.bootstrap.servers", bootstrap)
                 .option("subscribe", TOPIC).load().count())
        result["spark_rows_counted"] = count
    finally:
        spark.stop()
    return result


class TupleReader(PylogBatchReader):
    """The connector's reader, but yielding one tuple per row instead of Arrow batches."""

    def read(self, partition):
        for batch in super().read(partition):
            yield from zip(*(column.to_pylist() for column in batch.columns))


class TupleSource(PylogDataSource):
    """format("pylog_tuples"): the row-at-a-time baseline of the benchmark."""

    @classmethod
    def name(cls) -> str:
        return "pylog_tuples"

    def reader(self, schema):
        return TupleReader(self.source_options.for_batch(), schema)


if __name__ == "__main__":
    sys.exit(main())
