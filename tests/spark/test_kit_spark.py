"""What the kit's Spark fixtures guarantee (broker_sim/testing/spark.py): ``pylog_spark`` runs the tests'
interpreter, local[2] with UI off and 2 partitions, its driver JVM on C1 with the class archive's options and
its slow class initializers run ahead, its workers on compiled pyspark;
``pylog_spark_factory`` sessions keep their runtime confs to themselves and refuse static ones by name;
``spark_session`` refuses a static conf a running session cannot take; ``pylog_spark_connect`` is a Connect
session that leaves the process classic after its test."""
from __future__ import annotations

import sys
from pathlib import Path

import pyspark
import pytest

from broker_sim.testing import spark as kit_spark
from broker_sim.testing import spark_cds, spark_home
from broker_sim.testing.spark import StaticConfError, spark_session

pytestmark = pytest.mark.spark


def _jvm_arguments(session) -> list[str]:
    bean = session._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    return list(bean.getInputArguments())


def test_pylog_spark_runs_this_interpreter_on_local2_with_ui_off_and_two_partitions(pylog_spark):
    context = pylog_spark.sparkContext
    workers = context.parallelize(range(4), 2).map(lambda _: __import__("sys").executable).distinct().collect()
    assert workers == [sys.executable]
    assert context.master == "local[2]"
    assert context.uiWebUrl is None
    assert pylog_spark.conf.get("spark.sql.shuffle.partitions") == "2"
    assert context.defaultParallelism == 2
    assert context.getConf().get("spark.driver.host") == "127.0.0.1"


def test_pylog_spark_driver_compiles_with_c1_and_maps_or_dumps_the_class_archive(pylog_spark):
    arguments = _jvm_arguments(pylog_spark)
    assert "-XX:TieredStopAtLevel=1" in arguments
    archive = spark_cds.archive_path()
    if not spark_cds.usable(archive):
        pytest.skip(f"no usable archive path here: {archive}")
    cds = [a for a in arguments if "SharedArchiveFile" in a or "ArchiveClassesAtExit" in a]
    # the archive there at the JVM's start is mapped; without one, this JVM dumps its own at its end
    assert cds == [f"-XX:SharedArchiveFile={archive}"] or cds == [
        f"-XX:ArchiveClassesAtExit={spark_cds.partial_path(archive)}"], cds
    assert "-Xlog:cds*=off" in arguments


def test_pylog_spark_initializes_the_slow_case_mapping_class_while_the_test_sets_up(pylog_spark):
    """Spark 4's upper/lower build a table of 1.1M code points in a static initializer (1.4 s on C1): the
    session's warm-up thread runs it, so a Spark upgrade that renames the class fails here, not silently."""
    thread, done = kit_spark._warming[id(pylog_spark.sparkContext._gateway)]
    thread.join(60)
    assert done == list(kit_spark.WARM_UP_CLASSES)
    assert pylog_spark.sql("select upper('straße') as u").first().u == "STRASSE"


def test_pylog_spark_python_workers_import_compiled_pyspark_not_sparks_zip(pylog_spark):
    package = Path(pyspark.__file__).resolve().parent
    if not (package / "python" / "lib" / "pyspark.zip").is_file():
        pytest.skip("this pyspark is not pip's layout: no python/lib/pyspark.zip")
    home = pylog_spark._jvm.java.lang.System.getenv("SPARK_HOME")
    assert Path(home).name.startswith(spark_home.PREFIX), home
    where = pylog_spark.sparkContext.parallelize([0], 1).map(lambda _: __import__("pyspark").__file__).first()
    assert ".zip" not in where and Path(where).resolve().parent == package, where


def test_factory_sessions_keep_their_runtime_confs_to_themselves(pylog_spark, pylog_spark_factory):
    wide = pylog_spark_factory({"spark.sql.shuffle.partitions": 5}, **{"spark.sql.ansi.enabled": False})
    plain = pylog_spark_factory()
    assert wide.conf.get("spark.sql.shuffle.partitions") == "5"
    assert wide.conf.get("spark.sql.ansi.enabled") == "false"
    assert plain.conf.get("spark.sql.shuffle.partitions") == "2"
    assert pylog_spark.conf.get("spark.sql.shuffle.partitions") == "2"
    assert wide.sparkContext is pylog_spark.sparkContext
    assert wide.range(10).repartition(3).groupBy().count().collect()[0][0] == 10


@pytest.mark.parametrize("name", ["spark.sql.warehouse.dir", "spark.ui.enabled"])
def test_factory_refuses_a_static_conf_naming_it_and_pylog_spark_config(pylog_spark_factory, name):
    with pytest.raises(StaticConfError, match=rf"{name} cannot be set.*pylog_spark_config"):
        pylog_spark_factory(**{name: "/elsewhere" if "dir" in name else "true"})


def test_spark_session_returns_the_running_session_and_refuses_a_static_conf_it_cannot_take(pylog_spark):
    assert spark_session(conf={"spark.sql.shuffle.partitions": "2"}) is pylog_spark
    with pytest.raises(StaticConfError, match=r"conf spark\.ui\.enabled='true' cannot apply.*'false'"):
        spark_session(conf={"spark.ui.enabled": True})


def test_a_connect_session_runs_a_query_on_the_kits_server(pylog_spark_connect):
    from pyspark.sql import functions as F

    assert type(pylog_spark_connect).__module__.startswith("pyspark.sql.connect")
    rows = pylog_spark_connect.range(6).select((F.col("id") * 2).alias("twice")).collect()
    assert [row.twice for row in rows] == [0, 2, 4, 6, 8, 10]


def test_classic_functions_work_again_after_a_connect_test(pylog_spark):
    from pyspark.sql import functions as F

    assert pylog_spark.range(3).select(F.sum(F.col("id"))).collect()[0][0] == 3
