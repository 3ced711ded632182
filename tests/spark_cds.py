"""A class-data-sharing archive of Spark's driver JVM, so the suite's Spark drivers start in about half the time.

The suite starts many Spark drivers: the shared session, and every crash-and-restart test's own driver
processes. A driver spends most of its first seconds loading and verifying some 10,000 classes from Spark's
jars. The JDK's dynamic AppCDS (``-XX:ArchiveClassesAtExit``) dumps the classes one JVM loaded into an archive;
later JVMs map it instead (``-XX:SharedArchiveFile``). On this project's 2-core machines a driver's session and
first job went from 22-32 s to 12-16 s (3 pairs, under load).

The archive is only valid for the JVM and class path that wrote it, so its file name carries a key of both (the
JDK's modules file, pyspark's version and its jars). A JVM handed an archive it cannot use runs without it (and
``-Xlog:cds*=off`` keeps its warning out of the driver's stdout), so a stale archive costs speed, never a test.

``python3 tests/spark_cds.py`` (run by ci/setup.sh) writes the archive by running the kind of work the tests do:
a ``format("pylog")`` stream through a windowed aggregation into ``connector.foreach_batch``, an exactly-once
``format("pylog")`` stream, and batch reads and writes, against an in-process broker. ``java_options()`` gives
the options for ``PYSPARK_SUBMIT_ARGS`` (tests/conftest.py): empty when there is no archive for this key.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pylog"


def _key() -> str | None:
    java = shutil.which("java", path=os.path.join(os.environ["JAVA_HOME"], "bin")) if os.environ.get("JAVA_HOME") \
        else shutil.which("java")
    try:
        import pyspark
    except ImportError:
        return None
    if not java:
        return None
    modules = Path(os.path.realpath(java)).parents[1] / "lib" / "modules"
    jars = Path(pyspark.__file__).parent / "jars"
    try:
        stat = modules.stat()
        names = sorted(p.name for p in jars.iterdir())
    except OSError:
        return None
    text = "\n".join([str(modules), str(stat.st_size), str(stat.st_mtime_ns), pyspark.__version__, *names])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def archive_path() -> Path | None:
    key = _key()
    return CACHE / f"spark-driver-{key}.jsa" if key else None


def java_options() -> str:
    """The driver JVM options that use the archive, or "" when there is none for this JVM and Spark."""
    path = archive_path()
    if path is None or not path.is_file() or " " in str(path):   # PYSPARK_SUBMIT_ARGS is split on spaces
        return ""
    return f"-XX:SharedArchiveFile={path} -Xlog:cds*=off"


def _workload(root: str) -> None:
    """What a typical test driver does, so its classes are in the archive (runs in the dumping JVM's driver)."""
    import json

    from kafka import KafkaProducer
    from pyspark.sql import SparkSession
    from pyspark.sql.functions import col, from_json, struct, timestamp_millis, to_json, window

    import connector
    from broker_sim.server.broker import Broker

    spark = (SparkSession.builder.master("local[2]").appName("pylog-cds")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    with Broker(port=0) as broker:
        bootstrap = broker.bootstrap_servers
        producer = KafkaProducer(bootstrap_servers=bootstrap)
        for i in range(200):
            event = {"page": f"p{i % 3}", "ts": 1_700_000_000_000 + i * 1000}
            producer.send("clicks", key=event["page"].encode(), value=json.dumps(event).encode())
        producer.flush(30)
        producer.close()
        source = (spark.readStream.format("pylog").option("kafka.bootstrap.servers", bootstrap)
                  .option("subscribe", "clicks").option("startingOffsets", "earliest").load())
        counts = (source.select(from_json(col("value").cast("string"), "page STRING, ts LONG").alias("e"))
                  .select("e.page", timestamp_millis(col("e.ts")).alias("at"))
                  .withWatermark("at", "10 minutes").groupBy(col("page"), window(col("at"), "1 minute")).count()
                  .select(to_json(struct("page", "window")).alias("key"), col("count").cast("string").alias("value")))
        (counts.writeStream.outputMode("update")
         .foreachBatch(connector.foreach_batch(**{"kafka.bootstrap.servers": bootstrap, "topic": "counts"}))
         .option("checkpointLocation", os.path.join(root, "c1")).trigger(availableNow=True).start()
         .awaitTermination())
        (source.select("key", "value").writeStream.format("pylog").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", "copy").option("checkpointLocation", os.path.join(root, "c2"))
         .trigger(availableNow=True).start().awaitTermination())
        copied = (spark.read.format("pylog").option("kafka.bootstrap.servers", bootstrap)
                  .option("subscribe", "copy").load())
        if copied.count() != 200:
            raise SystemExit("spark_cds: the workload's copy is not 200 records")
        copied.select("key", "value").write.format("pylog").option("kafka.bootstrap.servers", bootstrap) \
            .option("topic", "again").mode("append").save()
    spark.stop()


def create() -> int:
    path = archive_path()
    if path is None:
        print("spark_cds: no java or pyspark here; no archive", file=sys.stderr)
        return 0
    if path.is_file():
        print(f"spark_cds: {path} is there", file=sys.stderr)
        return 0
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.partial")
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               PYTHONPATH=os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])),
               PYSPARK_SUBMIT_ARGS=f"--driver-java-options \"-XX:TieredStopAtLevel=1 "
                                   f"-XX:ArchiveClassesAtExit={partial} -Xlog:cds*=off\" pyspark-shell")
    with tempfile.TemporaryDirectory(prefix="pylog-cds-") as work:
        done = subprocess.run([sys.executable, __file__, "--workload", work], env=env, timeout=600,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0 or not partial.is_file():
        partial.unlink(missing_ok=True)
        print(f"spark_cds: the workload failed (exit {done.returncode}); Spark drivers will start without an "
              f"archive:\n{done.stderr[-3000:]}", file=sys.stderr)
        return 0
    os.replace(partial, path)   # a reader sees a whole archive or none
    print(f"spark_cds: wrote {path} ({path.stat().st_size // 2**20} MiB)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--workload":
        _workload(sys.argv[2])
        sys.exit(0)
    sys.exit(create())
