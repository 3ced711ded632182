"""Spark's own Kafka connector (``format("kafka")``, spark-sql-kafka-0-10) beside ``format("pylog")``.

Examples::

    $ python -m broker_sim.local.spark_kafka fetch     # jars from Maven Central into the cache (ci/setup.sh)
    $ python -m broker_sim.local.spark_kafka jars      # the comma-separated list for spark.jars / --jars

    SparkSession.builder.config("spark.jars", ",".join(spark_kafka_jars()))

Theory of operation
-------------------
Spark's connector is not part of pyspark's wheel: ``spark-submit --packages`` would fetch it through Ivy at every
start. Here Maven copies ``org.apache.spark:spark-sql-kafka-0-10_2.13`` with its runtime dependencies once, and
only the jars pyspark does not already carry are kept (the connector, its token provider, ``kafka-clients`` and
``commons-pool2``; pyspark's own Scala, Hadoop, lz4 and snappy jars win, as ``--packages`` leaves them).

Which version: the newest one Maven Central serves that is not newer than the installed Spark, tried from
pyspark's own version down (patch releases, then minor releases of the same major: pyspark 4.3.0 tries 4.3.0,
then 4.2.9 ... 4.2.0, then 4.1.9 ...), and checked by loading its data source in a Spark session on this
machine. The chosen version and its jars go to ``~/.cache/pylog/spark-sql-kafka/pyspark-<version>/``, with
``VERSION`` naming the connector's version: a later fetch with the same pyspark does nothing.
``$PYLOG_SPARK_KAFKA_JARS`` (a comma-separated list of jar paths) overrides the cache.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Sequence

GROUP, ARTIFACT = "org.apache.spark", "spark-sql-kafka-0-10_2.13"
_PATCHES_TRIED = 9          # x.y.9 down to x.y.0 for each older minor release
_MAVEN_TIMEOUT_S = 600


class SparkKafkaUnavailable(RuntimeError):
    """Spark's Kafka connector is not here and cannot be fetched; the message says why."""


def _pyspark() -> tuple[str, Path]:
    try:
        import pyspark
    except ImportError as exc:
        raise SparkKafkaUnavailable("pyspark is not installed (pip install 'pylog[spark]')") from exc
    return pyspark.__version__, Path(pyspark.__file__).parent / "jars"


def cache_dir(pyspark_version: str | None = None) -> Path:
    version = pyspark_version or _pyspark()[0]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "pylog" / "spark-sql-kafka" / f"pyspark-{version}"


def candidates(pyspark_version: str) -> list[str]:
    """Connector versions to try for a pyspark version, newest first, never newer than it."""
    parts = pyspark_version.split(".")
    major, minor = int(parts[0]), int(parts[1])
    patch = int("".join(ch for ch in parts[2] if ch.isdigit()) or 0) if len(parts) > 2 else 0
    found = [f"{major}.{minor}.{p}" for p in range(patch, -1, -1)]
    for older in range(minor - 1, -1, -1):
        found += [f"{major}.{older}.{p}" for p in range(_PATCHES_TRIED, -1, -1)]
    return found


def spark_kafka_version() -> str | None:
    """The connector version fetched for the installed pyspark, or None."""
    try:
        return (cache_dir() / "VERSION").read_text().strip() or None
    except (OSError, SparkKafkaUnavailable):
        return None


def spark_kafka_jars() -> list[str]:
    """The jars ``spark.jars`` needs for ``format("kafka")``; raises SparkKafkaUnavailable naming the fix."""
    explicit = os.environ.get("PYLOG_SPARK_KAFKA_JARS")
    if explicit:
        jars = [j.strip() for j in explicit.split(",") if j.strip()]
        missing = [j for j in jars if not Path(j).is_file()]
        if missing:
            raise SparkKafkaUnavailable(f"PYLOG_SPARK_KAFKA_JARS names jars that do not exist: {missing}")
        return jars
    reason = spark_kafka_available()
    if reason:
        raise SparkKafkaUnavailable(reason)
    return sorted(str(p) for p in (cache_dir() / "jars").glob("*.jar"))


def spark_kafka_available() -> str | None:
    """None when ``format("kafka")`` can be loaded into a session here, else the reason it cannot."""
    if os.environ.get("PYLOG_SPARK_KAFKA_JARS"):
        return None
    try:
        home = cache_dir()
    except SparkKafkaUnavailable as exc:
        return str(exc)
    version = spark_kafka_version()
    if not version or not (home / "jars" / f"{ARTIFACT}-{version}.jar").is_file():
        return (f"Spark's Kafka connector ({ARTIFACT}) is not in {home}: run `python -m broker_sim.local.spark_kafka "
                "fetch` (ci/setup.sh does it; it needs Maven and Maven Central)")
    return None


def _pom(version: str) -> str:
    return ('<?xml version="1.0" encoding="UTF-8"?><project xmlns="http://maven.apache.org/POM/4.0.0">'
            "<modelVersion>4.0.0</modelVersion><groupId>dev.pylog</groupId><artifactId>spark-kafka-jars"
            "</artifactId><version>1</version><packaging>pom</packaging><dependencies><dependency>"
            f"<groupId>{GROUP}</groupId><artifactId>{ARTIFACT}</artifactId><version>{version}</version>"
            "</dependency></dependencies></project>")


def _artifact_name(jar: str) -> str:
    """``kafka-clients-3.9.2.jar`` -> ``kafka-clients`` (the name before the version)."""
    stem = jar[:-4] if jar.endswith(".jar") else jar
    pieces = stem.split("-")
    for i, piece in enumerate(pieces):
        if i and piece[:1].isdigit():
            return "-".join(pieces[:i])
    return stem


def _copy(mvn: str, version: str, out: Path) -> bool:
    with tempfile.TemporaryDirectory() as work:
        (Path(work) / "pom.xml").write_text(_pom(version))
        done = subprocess.run([mvn, "-B", "-q", "dependency:copy-dependencies", f"-DoutputDirectory={out}",
                               "-DincludeScope=runtime"], cwd=work, capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=_MAVEN_TIMEOUT_S)
    return done.returncode == 0


def _loads_in_spark(jars: Sequence[Path]) -> str | None:
    """None when a local Spark session with ``jars`` finds the ``kafka`` data source, else the error."""
    probe = ("import sys\nfrom pyspark.sql import SparkSession\n"
             "s = SparkSession.builder.master('local[1]').config('spark.ui.enabled', 'false')"
             ".config('spark.jars', sys.argv[1]).getOrCreate()\n"
             "df = s.read.format('kafka').option('kafka.bootstrap.servers', '127.0.0.1:9')"
             ".option('subscribe', 'probe').load()\n"
             "print(','.join(f.name for f in df.schema.fields))\ns.stop()\n")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run([sys.executable, "-c", probe, ",".join(map(str, jars))], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=300, env=env)
    if done.returncode == 0 and "partition,offset" in done.stdout:
        return None
    return (done.stdout + done.stderr)[-2000:]


def fetch_spark_kafka(*, quiet: bool = True) -> Path:
    """Fetch the newest Spark Kafka connector that runs in the installed Spark (see the module docs).

    Does nothing when the cache has it. Returns the cache directory; raises SparkKafkaUnavailable naming why.
    """
    pyspark_version, pyspark_jars = _pyspark()
    home = cache_dir(pyspark_version)
    if spark_kafka_available() is None and not os.environ.get("PYLOG_SPARK_KAFKA_JARS"):
        return home
    mvn = shutil.which("mvn")
    if not mvn:
        raise SparkKafkaUnavailable("Maven (mvn) is needed to fetch Spark's Kafka connector: apt-get install maven")
    present = {_artifact_name(p.name) for p in pyspark_jars.glob("*.jar")}
    home.mkdir(parents=True, exist_ok=True)
    refused: list[str] = []
    for version in candidates(pyspark_version):
        with tempfile.TemporaryDirectory(dir=home) as staging:
            if not _copy(mvn, version, Path(staging)):
                refused.append(version)
                continue
            keep = [p for p in Path(staging).glob("*.jar") if _artifact_name(p.name) not in present]
            error = _loads_in_spark(keep)
            if error:
                refused.append(f"{version} (does not load in Spark {pyspark_version}: {error.splitlines()[-1:]})")
                continue
            jars = home / "jars"
            shutil.rmtree(jars, ignore_errors=True)
            jars.mkdir()
            for jar in keep:
                shutil.move(str(jar), jars / jar.name)
            (home / "VERSION").write_text(version + "\n")
            if not quiet:
                print(f"{ARTIFACT} {version} for pyspark {pyspark_version}: {len(keep)} jars in {jars}",
                      file=sys.stderr)
            return home
    raise SparkKafkaUnavailable(f"no {ARTIFACT} version up to {pyspark_version} could be fetched and loaded; "
                                f"tried {', '.join(refused)}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m broker_sim.local.spark_kafka",
                                     description="Fetch Spark's Kafka connector (format('kafka')) for the installed "
                                                 "pyspark.")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("fetch", help="copy the connector's jars from Maven Central into the cache")
    commands.add_parser("jars", help="print the jars, comma-separated (spark.jars)")
    args = parser.parse_args(argv)
    try:
        if args.command == "fetch":
            print(fetch_spark_kafka(quiet=False))
        else:
            print(",".join(spark_kafka_jars()))
        return 0
    except SparkKafkaUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
