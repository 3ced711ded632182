"""The Spark drivers' class archive (broker_sim/testing/spark_cds.py): one per JVM and Spark in the user's cache,
published whole or not at all, and the driver options that map or dump it (broker_sim/testing/spark.py)."""
from __future__ import annotations

import os
import shlex
import sys
import time

import pytest

from broker_sim.testing import spark as kit_spark
from broker_sim.testing import spark_cds
from broker_sim.testing.spark_cds import archive_path, java_options

needs_java_and_pyspark = pytest.mark.skipif(archive_path() is None, reason="no java or pyspark here")


@pytest.mark.skipif(os.environ.get("PYLOG_SETUP_SPARK_CDS") != "1", reason="only ci/test.sh writes the archive")
def test_ci_setup_wrote_the_archive_and_every_test_driver_is_given_it():
    path = archive_path()
    assert path is not None and path.is_file(), (
        f"ci/setup.sh wrote no Spark class archive at {path} for this process's drivers (SPARK_HOME="
        f"{os.environ.get('SPARK_HOME')!r}, PYSPARK_PYTHON={os.environ.get('PYSPARK_PYTHON')!r}, interpreter "
        f"{sys.executable}): setup and the suite must key the archive by the same Spark home")
    assert path.stat().st_size > 50 * 2**20, "an archive of Spark's classes is well over 50 MiB"
    options = shlex.split(os.environ["PYSPARK_SUBMIT_ARGS"])
    assert options[:2] == ["--driver-java-options", f"-XX:TieredStopAtLevel=1 {java_options()}"], options


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS", raising=False)
    monkeypatch.setenv("SPARK_HOME", "")   # restored after the test, whatever spark_home.use() sets in it
    return tmp_path / "pylog"


@needs_java_and_pyspark
def test_the_archive_is_keyed_by_spark_version_in_the_users_cache(cache, monkeypatch):
    import pyspark

    path = archive_path()
    assert path.parent == cache and path.name.startswith("spark-driver-") and path.suffix == ".jsa"
    monkeypatch.setattr(pyspark, "__version__", pyspark.__version__ + ".other")
    assert archive_path() != path and archive_path().parent == cache


@needs_java_and_pyspark
def test_driver_options_map_the_archive_only_when_it_is_there(cache):
    assert java_options() == ""
    assert kit_spark.submit_args() == '--driver-java-options "-XX:TieredStopAtLevel=1" pyspark-shell'
    cache.mkdir(exist_ok=True)   # submit_args() may have built the fast SPARK_HOME in it
    archive_path().write_bytes(b"archive")
    assert java_options() == f"-XX:SharedArchiveFile={archive_path()} -Xlog:cds*=off"
    assert shlex.split(kit_spark.submit_args())[1] == f"-XX:TieredStopAtLevel=1 {java_options()}"


def test_a_partial_becomes_the_archive_only_after_a_clean_exit(tmp_path):
    final = tmp_path / "spark-driver-k.jsa"
    partial = spark_cds.partial_path(final, pid=41)
    assert partial.name == "spark-driver-k.jsa.41.partial"

    partial.write_bytes(b"half")
    assert not spark_cds.publish(partial, final, returncode=1)
    assert not partial.exists() and not final.exists()

    partial.write_bytes(b"killed")
    assert not spark_cds.publish(partial, final, returncode=None)
    assert not partial.exists() and not final.exists()

    assert not spark_cds.publish(partial, final, returncode=0)   # the JVM wrote nothing
    assert not final.exists()

    partial.write_bytes(b"whole")
    assert spark_cds.publish(partial, final, returncode=0)
    assert final.read_bytes() == b"whole" and not partial.exists()


def test_the_first_complete_archive_wins(tmp_path):
    final = tmp_path / "spark-driver-k.jsa"
    first, second = spark_cds.partial_path(final, pid=1), spark_cds.partial_path(final, pid=2)
    first.write_bytes(b"first")
    second.write_bytes(b"second")
    assert spark_cds.publish(first, final, returncode=0)
    assert not spark_cds.publish(second, final, returncode=0)
    assert final.read_bytes() == b"first" and not second.exists()


def test_only_stale_partials_are_removed(tmp_path):
    final = tmp_path / "spark-driver-k.jsa"
    old, fresh = spark_cds.partial_path(final, pid=1), spark_cds.partial_path(final, pid=2)
    old.write_bytes(b"dead dumper")
    fresh.write_bytes(b"running dumper")
    hours_ago = time.time() - 7 * 3600
    os.utime(old, (hours_ago, hours_ago))
    spark_cds.remove_stale_partials(final)
    assert not old.exists() and fresh.exists()


@needs_java_and_pyspark
def test_a_first_session_dumps_into_its_own_partial_and_a_later_one_maps_the_archive(cache):
    options, partial = kit_spark._launch_java_options({})
    assert partial == spark_cds.partial_path(archive_path())
    assert options == f"-XX:TieredStopAtLevel=1 -XX:ArchiveClassesAtExit={partial} -Xlog:cds*=off"

    archive_path().write_bytes(b"archive")
    options, partial = kit_spark._launch_java_options({"spark.driver.defaultJavaOptions": "-Dmine=1"})
    assert partial is None
    assert options == f"-XX:TieredStopAtLevel=1 {java_options()} -Dmine=1"   # the caller's come last and win


@needs_java_and_pyspark
@pytest.mark.parametrize("where", ["PYSPARK_SUBMIT_ARGS", "spark.driver.extraJavaOptions"])
def test_options_that_name_an_archive_of_their_own_get_none_from_pylog(cache, monkeypatch, where):
    theirs = "-XX:SharedArchiveFile=/theirs.jsa"
    settings = {}
    if where == "PYSPARK_SUBMIT_ARGS":
        monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", f'--driver-java-options "{theirs}" pyspark-shell')
    else:
        settings[where] = theirs
    assert kit_spark._launch_java_options(settings) == ("-XX:TieredStopAtLevel=1", None)
