"""A class-data-sharing archive of Spark's driver JVM, so test drivers start in about half the time.

Theory of operation:

1. A driver spends most of its first seconds loading and verifying some 10,000 classes from Spark's jars. The
   JDK's dynamic AppCDS (``-XX:ArchiveClassesAtExit``) dumps the classes one JVM loaded into an archive when it
   exits; later JVMs map it instead (``-XX:SharedArchiveFile``).
2. The archive is only valid for the JVM and class path that wrote it, so its file name carries a key of both
   (the JDK's modules file, pyspark's version, the jars directory of the SPARK_HOME in use and its jar names;
   ``spark_home.use()`` runs first wherever a driver starts): one archive per JVM and Spark version, in
   ``$XDG_CACHE_HOME/pylog`` (``~/.cache/pylog`` without it).
3. A JVM handed an archive it cannot use runs without it (``-Xlog:cds*=off`` keeps its warning out of the
   driver's stdout), so a stale or foreign archive costs speed, never a test.
4. A dumping JVM writes a partial file of its own (``<archive>.<pid>.partial``). ``publish`` renames it to the
   archive's name only if that JVM exited 0 and the file is there, and only if no archive is there yet: the
   first complete one wins, and no reader ever sees a half-written archive under the final name.

Two ways write it: ``broker_sim.testing.spark.spark_session`` lets the first session's own JVM dump at its end
(``stop_session``), and ``python -m broker_sim.testing.spark_cds`` (ci/setup.sh) runs the kind of work tests do
in a subprocess driver: a ``format("pylog")`` stream through a windowed aggregation into
``connector.foreach_batch``, an exactly-once ``format("pylog")`` stream, and batch reads and writes, against an
in-process broker.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from broker_sim.testing import spark_home
from broker_sim.testing.spark_home import cache_dir

# the JVM's warnings about an archive it cannot map would land in the driver's stdout
QUIET = "-Xlog:cds*=off"
# partial files older than this belong to a process that died while dumping
STALE_PARTIAL_SECONDS = 6 * 3600


def archive_key() -> str | None:
    """A key of this JVM and Spark (modules file, pyspark version, the jars directory a driver's class path
    names, which follows SPARK_HOME, and its jar names); None without java or pyspark."""
    java_home = os.environ.get("JAVA_HOME")
    java = shutil.which("java", path=os.path.join(java_home, "bin")) if java_home else shutil.which("java")
    try:
        import pyspark
    except ImportError:
        return None
    if not java:
        return None
    modules = Path(os.path.realpath(java)).parents[1] / "lib" / "modules"
    jars = Path(os.environ.get("SPARK_HOME") or Path(pyspark.__file__).parent) / "jars"
    try:
        stat = modules.stat()
        names = sorted(p.name for p in jars.iterdir())
    except OSError:
        return None
    text = "\n".join([str(modules), str(stat.st_size), str(stat.st_mtime_ns), pyspark.__version__, str(jars),
                      *names])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def archive_path() -> Path | None:
    """Where the archive for this JVM and Spark lives (there or not); None without java or pyspark."""
    key = archive_key()
    return cache_dir() / f"spark-driver-{key}.jsa" if key else None


def usable(path: Path | None) -> bool:
    """True when ``path`` can go into a JVM option: options are split on spaces on their way to the JVM."""
    return path is not None and " " not in str(path)


def java_options() -> str:
    """The driver JVM options that map the archive, or "" when there is none for this JVM and Spark."""
    path = archive_path()
    if not usable(path) or not path.is_file():
        return ""
    return f"-XX:SharedArchiveFile={path} {QUIET}"


def partial_path(path: Path, pid: int | None = None) -> Path:
    """The file a dumping process ``pid`` (this one by default) writes before ``publish`` names it ``path``."""
    return path.with_name(f"{path.name}.{os.getpid() if pid is None else pid}.partial")


def dump_options(partial: Path) -> str:
    """The driver JVM options that dump the classes it loaded into ``partial`` when it exits."""
    return f"-XX:ArchiveClassesAtExit={partial} {QUIET}"


def remove_stale_partials(path: Path, *, older_than: float = STALE_PARTIAL_SECONDS) -> None:
    """Delete partial files of ``path`` last written more than ``older_than`` seconds ago (a dead dumper's)."""
    now = time.time()
    for stale in path.parent.glob(f"{path.name}.*.partial"):
        try:
            if now - stale.stat().st_mtime > older_than:
                stale.unlink()
        except OSError:
            pass


def publish(partial: Path, path: Path, returncode: int | None) -> bool:
    """Name ``partial`` ``path`` if its JVM exited 0 (``returncode``), the file is there and no archive is there
    yet; remove the partial in every other case. True when ``path`` is now this partial's archive."""
    try:
        if returncode == 0 and partial.is_file() and partial.stat().st_size > 0 and not path.exists():
            os.replace(partial, path)   # atomic: a reader sees a whole archive or none
            return True
    except OSError:
        pass
    partial.unlink(missing_ok=True)
    return False


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


def package_roots() -> list[str]:
    """The directories that hold ``connector`` and ``broker_sim``, for the PYTHONPATH of Python workers."""
    import broker_sim
    import connector

    roots = [str(Path(m.__file__).resolve().parents[1]) for m in (connector, broker_sim)]
    return list(dict.fromkeys(roots))


def create() -> int:
    """Write the archive by the workload in a subprocess driver, unless it is there. Always 0: no archive only
    means slower Spark starts (the reason goes to stderr)."""
    spark_home.use()   # the drivers the archive is for run from this home: the class path names it
    path = archive_path()
    if path is None:
        print("spark_cds: no java or pyspark here; no archive", file=sys.stderr)
        return 0
    if path.is_file():
        print(f"spark_cds: {path} is there", file=sys.stderr)
        return 0
    if not usable(path):
        print(f"spark_cds: {path} has a space, which JVM options cannot carry; no archive", file=sys.stderr)
        return 0
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_partials(path)
    partial = partial_path(path)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               PYTHONPATH=os.pathsep.join(filter(None, [*package_roots(), os.environ.get("PYTHONPATH")])),
               PYSPARK_SUBMIT_ARGS=f"--driver-java-options \"-XX:TieredStopAtLevel=1 "
                                   f"{dump_options(partial)}\" pyspark-shell")
    with tempfile.TemporaryDirectory(prefix="pylog-cds-") as work:
        done = subprocess.run([sys.executable, "-m", "broker_sim.testing.spark_cds", "--workload", work], env=env,
                              timeout=600, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if not publish(partial, path, done.returncode):
        if path.is_file():
            print(f"spark_cds: {path} was written meanwhile by another process", file=sys.stderr)
            return 0
        print(f"spark_cds: the workload failed (exit {done.returncode}); Spark drivers will start without an "
              f"archive:\n{done.stderr[-3000:]}", file=sys.stderr)
        return 0
    print(f"spark_cds: wrote {path} ({path.stat().st_size // 2**20} MiB)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--workload":
        _workload(sys.argv[2])
        sys.exit(0)
    sys.exit(create())
