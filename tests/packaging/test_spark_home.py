"""The fast SPARK_HOME of broker_sim/testing/spark_home.py: a mirror of pip's pyspark without the source-only
zips Spark puts first on its Python workers' path, used only where it changes nothing but speed."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from broker_sim.testing import spark_cds, spark_home

pyspark = pytest.importorskip("pyspark")
PACKAGE = Path(pyspark.__file__).resolve().parent
needs_zip = pytest.mark.skipif(not (PACKAGE / "python" / "lib" / "pyspark.zip").is_file(),
                               reason="this pyspark has no python/lib/pyspark.zip (not pip's layout)")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty user cache; SPARK_HOME and PYSPARK_PYTHON as a fresh process of the running interpreter has
    them (both are restored after the test, whatever ``use()`` set)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("SPARK_HOME", "")
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    return tmp_path / "pylog"


@needs_zip
def test_the_home_mirrors_pips_pyspark_without_the_zips(cache):
    home = spark_home.home()
    assert home is not None and home.parent == cache and home.name.startswith(spark_home.PREFIX)
    for entry in PACKAGE.iterdir():
        if entry.name != "python":
            assert (home / entry.name).is_symlink() and (home / entry.name).resolve() == entry.resolve()
    lib = sorted(p.name for p in (home / "python" / "lib").iterdir())
    assert "pyspark.zip" not in lib and not any(name.startswith("py4j-") for name in lib), lib
    assert (PACKAGE / "python" / "lib" / "pyspark.zip").is_file()   # the install itself is untouched
    assert os.access(home / "bin" / "spark-submit", os.X_OK)
    assert spark_home.home() == home   # built once
    assert [p.name for p in cache.iterdir() if p.name.startswith(".")] == []   # no half-built home left


@needs_zip
def test_a_home_another_process_finished_first_is_the_one_used(cache):
    """Two processes building at once: the one whose rename lands second uses the first one's home."""
    target = cache / f"{spark_home.PREFIX}{spark_home.key(PACKAGE)}"
    (target / "jars").mkdir(parents=True)
    assert spark_home.home() == target
    assert sorted(p.name for p in target.iterdir()) == ["jars"]   # not rebuilt over


@needs_zip
def test_use_points_spark_home_at_the_mirror_and_the_archive_key_follows(cache):
    key_of_pip = spark_cds.archive_key()
    home = spark_home.use()
    assert home is not None and os.environ["SPARK_HOME"] == str(home)
    assert spark_cds.archive_key() != key_of_pip   # the driver's class path names the mirror's jars
    assert spark_home.use() == home                # a mirror already in use stays


@needs_zip
def test_use_keeps_a_spark_distribution_of_the_users_own(cache, tmp_path, monkeypatch):
    distribution = tmp_path / "spark-4.3.0-bin"
    (distribution / "jars").mkdir(parents=True)
    monkeypatch.setenv("SPARK_HOME", str(distribution))
    assert spark_home.use() is None and os.environ["SPARK_HOME"] == str(distribution)


@needs_zip
def test_use_keeps_sparks_layout_for_workers_of_another_python(cache, monkeypatch):
    """Another worker interpreter may have no pyspark of its own: the zip is how it finds one."""
    monkeypatch.setenv("PYSPARK_PYTHON", "/usr/bin/python3-of-someone-else")
    assert spark_home.use() is None and os.environ["SPARK_HOME"] == ""


@needs_zip
def test_use_gives_the_mirror_to_workers_whose_python_is_a_launcher_of_this_one(cache, tmp_path, monkeypatch):
    """A pyenv shim or a wrapper script runs the running interpreter under another path (ci/setup.sh on a
    pyenv machine printed the shim, and the suite's drivers lost the mirror and their class archive)."""
    launcher = tmp_path / "python3"
    launcher.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    launcher.chmod(0o755)
    monkeypatch.setenv("PYSPARK_PYTHON", str(launcher))
    home = spark_home.use()
    assert home is not None and os.environ["SPARK_HOME"] == str(home)


@needs_zip
def test_use_keeps_sparks_layout_for_a_virtualenv_of_this_interpreter(cache, tmp_path, monkeypatch):
    """A virtualenv's python links to the same interpreter file but has packages of its own."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    monkeypatch.setenv("PYSPARK_PYTHON", str(venv / "bin" / "python"))
    assert spark_home.use() is None and os.environ["SPARK_HOME"] == ""


@needs_zip
def test_use_sets_nothing_when_the_cache_cannot_be_written(cache, tmp_path, monkeypatch):
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache directory would be")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    assert spark_home.use() is None and os.environ["SPARK_HOME"] == ""


@needs_zip
def test_a_spark_started_from_the_mirror_runs_python_workers_on_compiled_pyspark(tmp_path):
    """A real driver (spark-submit from the kit's home) whose Python UDF reports where its worker imported
    pyspark from: site-packages, not the zip; and the job's answer is right."""
    script = tmp_path / "where.py"
    script.write_text(
        "import os, sys\n"
        "from broker_sim.testing.spark import spark_session, stop_session\n"
        "spark = spark_session('pylog-spark-home')\n"
        "def where(_):\n"
        "    import pyspark, py4j\n"
        "    yield (pyspark.__file__, py4j.__file__)\n"
        "rows = spark.sparkContext.parallelize([0], 1).mapPartitions(where).collect()\n"
        "print('HOME', os.environ.get('SPARK_HOME', ''))\n"
        "print('WORKER', *rows[0])\n"
        "stop_session(spark)\n")
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_HOME", "PYSPARK_SUBMIT_ARGS")}
    env.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               PYTHONPATH=os.pathsep.join(filter(None, [*spark_cds.package_roots(), env.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-4000:]
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines() if line.startswith(("HOME", "WORKER")))
    assert Path(lines["HOME"]).name.startswith(spark_home.PREFIX), lines
    pyspark_file, py4j_file = lines["WORKER"].split(" ")
    assert ".zip" not in pyspark_file and Path(pyspark_file).resolve().parent == PACKAGE, pyspark_file
    assert ".zip" not in py4j_file, py4j_file
