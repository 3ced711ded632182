"""Benchmark of the pylog source; prints one JSON document (not a test, never pass/fail).

    python -m broker_sim.bench.spark_source [--records 2000000] [--value-bytes 100] [--partitions 2] [--rounds 3]
                                            [--headline-only]

Theory of operation: start the embedded broker in a temp dir, produce the
records with confluent-kafka, then measure

* ``headline`` (the issue's figure): rows/s of ``spark.readStream.format("pylog")``
  with ``Trigger.AvailableNow`` into the ``noop`` sink, against
  ``format("pylog_synthetic")`` — a minimal Arrow ``DataSourceStreamReader``
  that builds the same rows (schema, partitions, row count, batch size) in
  memory, so it is the ceiling of any Python streaming source on this
  machine. The two run alternately in the same Spark session, ``--rounds``
  times each after one unreported warm-up round; medians and their ratio are
  reported (target, issue 25: ratio >= 0.9);
* ``spark_batch_arrow``: rows/s of ``spark.read.format("pylog")`` written to
  the ``noop`` sink (the connector's real path: Arrow RecordBatches);
* ``spark_batch_tuples``: the same read with ``read()`` yielding one tuple
  per row (what a row-based source would cost);
* ``executor_fetch``: one partition read outside Spark, raw Fetch + compiled
  decoder into Arrow versus kafka-python's ``KafkaConsumer`` (assign + seek);
* ``decode``: records/s decoding the same record-batch bytes with aiokafka's
  compiled reader versus kafka-python's pure-Python reader.

Before/after in one run (``--pairs N --baseline-pythonpath DIR``): one broker
and one produce, then ``N`` pairs of child processes, each a fresh Spark
session measuring the headline (``--bootstrap``, ``--headline-only``): the
child of a pair runs this file with ``PYTHONPATH`` set to ``DIR`` (say a clone
of main) and then to ``--candidate-pythonpath`` (default: this checkout), so
Spark's Python workers import that tree's connector. Both trees' bytecode is
written first (``compileall``), as an install would. Each child's ratio is
against the synthetic source measured in the same child; the JSON has every
child's figures and the medians over the pairs.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

from connector.datasource import PylogDataSource
from connector.source.readers import PylogBatchReader

TOPIC = "bench"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3,
                        help="timed Spark reads per path (headline: median; batch figures: best)")
    parser.add_argument("--headline-only", action="store_true", help="measure only the streaming headline")
    parser.add_argument("--bootstrap", help="a running broker whose topic 'bench' already holds --records records "
                                            "(no broker is started, nothing is produced)")
    parser.add_argument("--pairs", type=int, default=0,
                        help="before/after: this many pairs of child runs, baseline then candidate (see above)")
    parser.add_argument("--baseline-pythonpath", help="with --pairs: the tree the baseline children import")
    parser.add_argument("--candidate-pythonpath", default=str(_ROOT),
                        help="with --pairs: the tree the candidate children import (default: this checkout)")
    args = parser.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if args.pairs and not args.baseline_pythonpath:
        parser.error("--pairs needs --baseline-pythonpath")

    from broker_sim.server.broker import Broker

    result = {"records": args.records, "value_bytes": args.value_bytes, "partitions": args.partitions,
              "python": platform.python_version()}
    if args.bootstrap:
        result.update(_measure(args.bootstrap, args))
        print(json.dumps(result, indent=2))
        return 0
    with tempfile.TemporaryDirectory(prefix="pylog-bench-") as data_dir:
        with Broker(data_dir, host="127.0.0.1", port=0, config={"num.partitions": args.partitions}) as broker:
            bootstrap = broker.bootstrap_servers
            started = time.perf_counter()
            _produce(bootstrap, args.records, args.value_bytes, args.partitions)
            result["produce_seconds"] = round(time.perf_counter() - started, 2)
            if args.pairs:
                result["pairs"] = _pairs(bootstrap, args)
            else:
                result.update(_measure(bootstrap, args))
    print(json.dumps(result, indent=2))
    return 0


_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _measure(bootstrap: str, args) -> dict:
    result = {}
    spark = _spark_session()
    try:
        result["headline"] = _stream_rates(spark, bootstrap, args)
        if not args.headline_only:
            result["decode"] = _decode_rates(bootstrap)
            result["executor_fetch"] = _fetch_rates(bootstrap)
            result.update(_spark_rates(spark, bootstrap, args.records, args.rounds))
    finally:
        spark.stop()
    return result


def _pairs(bootstrap: str, args) -> dict:
    """``args.pairs`` pairs of child runs (baseline tree, then candidate tree), each a fresh Spark session."""
    import statistics
    import subprocess

    trees = {"baseline": os.path.abspath(args.baseline_pythonpath),
             "candidate": os.path.abspath(args.candidate_pythonpath)}
    for tree in trees.values():
        _compile(tree)
    runs: dict[str, list[dict]] = {name: [] for name in trees}
    child = [sys.executable, "-c", "import runpy, sys; sys.argv[0] = sys.argv[1]; del sys.argv[1]; "
             "runpy.run_path(sys.argv[0], run_name='__main__')", os.path.abspath(__file__),
             "--bootstrap", bootstrap, "--headline-only", "--rounds", str(args.rounds), "--records", str(args.records),
             "--value-bytes", str(args.value_bytes), "--partitions", str(args.partitions)]
    for _ in range(args.pairs):
        for name, tree in trees.items():
            env = {**os.environ, "PYTHONPATH": tree, "PYSPARK_PYTHON": sys.executable}
            with tempfile.TemporaryDirectory(prefix="pylog-bench-child-") as cwd:
                done = subprocess.run(child, env=env, cwd=cwd, capture_output=True, text=True, timeout=3600)
            if done.returncode != 0:
                raise RuntimeError(f"the {name} child failed ({done.returncode}): {done.stderr[-3000:]}")
            headline = json.loads(done.stdout[done.stdout.index("{"):])["headline"]
            runs[name].append({key: headline[key] for key in ("pylog_rows_per_s", "synthetic_arrow_rows_per_s",
                                                              "ratio", "seconds", "query_durations_ms")})
    summary = {}
    for name, entries in runs.items():
        summary[name] = {
            "pythonpath": trees[name],
            "median_ratio": round(statistics.median(e["ratio"] for e in entries), 3),
            "median_pylog_rows_per_s": round(statistics.median(e["pylog_rows_per_s"] for e in entries)),
            "median_synthetic_arrow_rows_per_s": round(statistics.median(e["synthetic_arrow_rows_per_s"]
                                                                         for e in entries)),
            "ratios": [e["ratio"] for e in entries],
            "runs": entries,
        }
    return {"what": "pairs of child runs (baseline, candidate), each a fresh Spark session: the headline's ratio "
                    "against the synthetic source of the same child", "pairs": args.pairs, **summary}


def _compile(tree: str) -> None:
    """Write the bytecode of *tree*'s packages, as an install does: a tree edited since its last run and used
    under PYTHONDONTWRITEBYTECODE would otherwise recompile its changed modules in every Python worker and
    streaming source runner, a cost of the tree's history that neither side of a pair should pay."""
    import compileall

    for package in ("connector", "broker_sim"):
        if os.path.isdir(os.path.join(tree, package)):
            compileall.compile_dir(os.path.join(tree, package), quiet=1)


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

    from connector.source.arrow_records import decode, to_record_batch
    from connector.source.readers import source_schema
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

    from connector.options import parse_source_options
    from connector.source.offset_reader import OffsetReader
    from connector.source.offsets import OffsetRange
    from connector.source.partition_reader import RangeInputPartition, read_range
    from connector.source.readers import source_schema

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


def _spark_session():
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("pylog-bench")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    # Under ``python -m`` this module is __main__, which Python workers cannot import: register the
    # classes through their importable names so they pickle by reference.
    from broker_sim.bench.spark_source import SyntheticArrowSource, TupleSource
    spark.dataSource.register(TupleSource)
    spark.dataSource.register(SyntheticArrowSource)
    return spark


def _stream_rates(spark, bootstrap: str, args) -> dict:
    """The headline: AvailableNow into noop, pylog vs the synthetic Arrow source, alternating rounds."""
    import statistics

    readers = {
        "pylog": lambda: (spark.readStream.format("pylog").option("kafka.bootstrap.servers", bootstrap)
                          .option("subscribe", TOPIC).option("startingOffsets", "earliest").load()),
        "synthetic_arrow": lambda: (spark.readStream.format("pylog_synthetic")
                                    .option("records", str(args.records)).option("partitions", str(args.partitions))
                                    .option("valueBytes", str(args.value_bytes)).load()),
    }
    seconds: dict[str, list[float]] = {name: [] for name in readers}
    batch_ms: dict[str, list[dict]] = {name: [] for name in readers}
    # Round 0 warms up the JVM, the Python workers and their imports; it is not reported.
    retries = 0
    for round_number in range(args.rounds + 1):
        for name, load in readers.items():
            for attempt in range(_ATTEMPTS):
                try:
                    elapsed, progress = _available_now_into_noop(load(), name, args.records)
                    break
                except WorkerStartTimeout:  # a loaded machine, not the source: run the round again
                    if attempt == _ATTEMPTS - 1:
                        raise
                    retries += 1
            if round_number:
                seconds[name].append(elapsed)
                batch_ms[name].append(_durations(progress))
    rates = {name: round(args.records / statistics.median(values)) for name, values in seconds.items()}
    return {
        "what": "readStream AvailableNow -> writeStream noop, start() to termination",
        "pylog_rows_per_s": rates["pylog"],
        "synthetic_arrow_rows_per_s": rates["synthetic_arrow"],
        "ratio": round(rates["pylog"] / rates["synthetic_arrow"], 3),
        "target_ratio": 0.9,
        "rounds": args.rounds,
        "warmup_rounds": 1,
        "rounds_rerun_after_a_python_worker_start_timeout": retries,
        "seconds": {name: [round(v, 2) for v in values] for name, values in seconds.items()},
        "query_durations_ms": batch_ms,
    }


def _available_now_into_noop(df, name: str, records: int) -> tuple[float, list]:
    """Seconds from start() to termination of ``df`` with Trigger.AvailableNow into noop, and its progress."""
    with tempfile.TemporaryDirectory(prefix="pylog-bench-ckpt-") as checkpoint:
        started = time.perf_counter()
        query = (df.writeStream.format("noop").trigger(availableNow=True)
                 .option("checkpointLocation", checkpoint).start())
        try:
            query.awaitTermination()
        except Exception:  # noqa: BLE001 - reported from query.exception() below
            pass
        elapsed = time.perf_counter() - started
    if query.exception() is not None:
        if _worker_start_timeout(query.exception()):
            raise WorkerStartTimeout(f"{name}: {query.exception()}")
        raise RuntimeError(f"{name} query failed: {query.exception()}")
    rows = sum(p["numInputRows"] for p in query.recentProgress)
    if rows != records:
        raise RuntimeError(f"{name} read {rows} rows, expected {records}")
    return elapsed, query.recentProgress


def _worker_start_timeout(exc) -> bool:
    """Spark's Python worker start timing out (10 s for it to connect back, its socket to the JVM)."""
    return any(sign in str(exc) for sign in ("Python worker failed to connect back", "CANNOT_OPEN_SOCKET"))


_ATTEMPTS = 4  # per round, when Spark's Python workers miss their start timeout


class WorkerStartTimeout(RuntimeError):
    """Spark gave a Python worker 10 s (hard-coded) to start and connect back; a loaded machine can miss that."""


def _durations(progress: list) -> dict:
    """Spark's per-phase durations summed over the query's micro-batches (where the time went)."""
    total: dict[str, int] = {}
    for entry in progress:
        for phase, ms in (entry.get("durationMs") or {}).items():
            total[phase] = total.get(phase, 0) + int(ms)
    return total


def _spark_rates(spark, bootstrap: str, records: int, rounds: int) -> dict:
    result = {"spark_master": "local[2]"}
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


class SyntheticArrowSource(DataSource):
    """format("pylog_synthetic"): the headline's baseline, pylog's rows built in memory as Arrow batches.

    Options: ``records``, ``partitions``, ``valueBytes``. Offsets are ``{"<partition>": rows}``;
    rows are split evenly over the partitions, as the benchmark's producer does.
    """

    @classmethod
    def name(cls) -> str:
        return "pylog_synthetic"

    def schema(self):
        from connector.source.readers import source_schema
        return source_schema()

    def streamReader(self, schema):
        return SyntheticArrowStreamReader(int(self.options["records"]), int(self.options["partitions"]),
                                          int(self.options["valueBytes"]), schema)


class _SyntheticPartition(InputPartition):
    def __init__(self, partition: int, from_offset: int, until_offset: int, value_bytes: int) -> None:
        super().__init__(partition)
        self.partition, self.from_offset, self.until_offset = partition, from_offset, until_offset
        self.value_bytes = value_bytes


class SyntheticArrowStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Everything is available from the start; ``read`` yields batches the size of a 1 MiB fetch."""

    # about one 1 MiB Fetch of 100-byte records, what pylog yielded per RecordBatch when issue 25's figures were
    # first taken; kept as the anchor of those figures although pylog now fetches 4 MiB (~33,000 rows) at a time
    ROWS_PER_BATCH = 7_000

    def __init__(self, records: int, partitions: int, value_bytes: int, schema) -> None:
        self.records, self.num_partitions, self.value_bytes = records, partitions, value_bytes
        self.schema = schema

    def _rows_of(self, partition: int) -> int:
        return self.records // self.num_partitions + (partition < self.records % self.num_partitions)

    def initialOffset(self) -> dict:
        return {str(p): 0 for p in range(self.num_partitions)}

    def prepareForTriggerAvailableNow(self) -> None:
        pass

    def latestOffset(self, start: dict, limit) -> dict:
        return {str(p): self._rows_of(p) for p in range(self.num_partitions)}

    def partitions(self, start: dict, end: dict) -> list:
        return [_SyntheticPartition(int(p), start.get(p, 0), end[p], self.value_bytes)
                for p in sorted(end, key=int) if end[p] > start.get(p, 0)]

    def read(self, partition):
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc
        from pyspark.sql.pandas.types import to_arrow_schema

        schema = to_arrow_schema(self.schema, timezone="UTC")
        width = partition.value_bytes
        values_data = pa.py_buffer(b"x" * (width * self.ROWS_PER_BATCH))
        now_us = int(time.time() * 1_000_000)
        for low in range(partition.from_offset, partition.until_offset, self.ROWS_PER_BATCH):
            n = min(self.ROWS_PER_BATCH, partition.until_offset - low)
            offsets = np.arange(low, low + n, dtype=np.int64)
            keys = pc.cast(pc.cast(pa.array(offsets * self.num_partitions + partition.partition), pa.string()),
                           pa.binary())
            values = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(
                np.arange(0, (n + 1) * width, width, dtype=np.int32)), values_data])
            yield pa.RecordBatch.from_arrays([
                keys, values, pa.repeat(pa.scalar(TOPIC), n), pa.repeat(pa.scalar(partition.partition, pa.int32()), n),
                pa.array(offsets), pa.repeat(pa.scalar(now_us, schema.field("timestamp").type), n),
                pa.repeat(pa.scalar(0, pa.int32()), n)], schema=schema)


if __name__ == "__main__":
    sys.exit(main())
