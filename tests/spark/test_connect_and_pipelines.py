"""format("pylog") source -> sink under Spark Connect and Spark Declarative Pipelines: the two examples in
examples/ run as a user runs them, each in a subprocess, against ``pylog_broker``; the sink topic is read back
read_committed.

The test run's shared session is a classic one, and a process holds one kind, so the examples talk to a Spark
Connect server of this module's own: a local[2] driver with Spark's Connect plugin, in a subprocess, on a free
port of 127.0.0.1 that the clients are given (``--remote sc://127.0.0.1:<port>``). One server for the module
starts one JVM instead of one per run. A fixed port would not do: pyspark's ``remote("local[...]")`` and
``spark-pipelines`` without ``--remote`` start their own server on 15002 and dial it there, so two of them on a
host (two xdist workers) collide.
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pyspark
import pytest

from broker_sim.testing.spark import connect_server
from sink_helpers import read_topic
from spark_helpers import create_topic, numbered, produce

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
SPARK_PIPELINES = Path(pyspark.__file__).parent / "bin" / "spark-pipelines"


def _env(**extra: str) -> dict:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    # the server's Python workers find format("pylog") in this checkout
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def connect_url(tmp_path_factory):
    """``sc://127.0.0.1:<port>`` of a Spark Connect server (the kit's ``connect_server``) for this module."""
    with connect_server("pylog-connect-tests", log=tmp_path_factory.mktemp("connect-server") / "server.log",
                        env=_env()) as url:
        yield url


def _driver_java_options() -> str:
    """The suite's driver JVM options (tests/conftest.py: C1 only, the class archive), which pyspark's drivers
    take from PYSPARK_SUBMIT_ARGS, for spark-pipelines' driver, which spark-class starts with SPARK_SUBMIT_OPTS."""
    args = shlex.split(os.environ.get("PYSPARK_SUBMIT_ARGS", ""))
    return args[args.index("--driver-java-options") + 1] if "--driver-java-options" in args else ""


def _run(command: list[str], env: dict, cwd: Path) -> str:
    done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, f"{command[:2]} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    return done.stdout


def _topics(bootstrap: str, records) -> None:
    create_topic(bootstrap, "events", partitions=2)
    create_topic(bootstrap, "events-upper", partitions=2)
    produce(bootstrap, "events", records)


def _upper(records) -> list:
    return sorted((key, value.upper()) for _, key, value in records)


def _sink(bootstrap: str) -> list:
    """(key, value) of every committed record of events-upper, sorted; none is left open or aborted."""
    committed = read_topic(bootstrap, "events-upper")
    assert len(read_topic(bootstrap, "events-upper", isolation="read_uncommitted")) == len(committed)
    return sorted((key, value) for _, key, value, _ in committed)


def test_connect_example_copies_every_record_once(connect_url, pylog_broker, tmp_path):
    bootstrap = pylog_broker.bootstrap_servers
    records = numbered(0, 0, 150) + numbered(1, 0, 150)
    _topics(bootstrap, records)

    out = _run([sys.executable, str(EXAMPLES / "spark_connect.py"), "--bootstrap", bootstrap, "--remote", connect_url,
                "--source", "events", "--sink", "events-upper", "--checkpoint", str(tmp_path / "checkpoint")],
               _env(), cwd=tmp_path)

    assert json.loads(out.strip().splitlines()[-1]) == {"source": 300, "sink": 300}
    assert _sink(bootstrap) == _upper(records)


def test_pipeline_example_runs_and_reruns_incrementally(connect_url, pylog_broker, tmp_path):
    bootstrap = pylog_broker.bootstrap_servers
    first = numbered(0, 0, 100) + numbered(1, 0, 100)
    _topics(bootstrap, first)
    project = tmp_path / "pipelines"
    shutil.copytree(EXAMPLES / "pipelines", project, ignore=shutil.ignore_patterns("__pycache__"))
    spec = project / "spark-pipeline.yml"
    example_storage = "storage: file:///tmp/pylog-pipeline-storage\n"
    assert example_storage in spec.read_text()
    spec.write_text(spec.read_text().replace(example_storage, f"storage: {(tmp_path / 'storage').as_uri()}\n"))
    command = [str(SPARK_PIPELINES), "run", "--remote", connect_url]
    env = _env(PYLOG_BOOTSTRAP=bootstrap, PYLOG_SOURCE_TOPIC="events", PYLOG_SINK_TOPIC="events-upper",
               SPARK_SUBMIT_OPTS=_driver_java_options())

    _run(command, env, cwd=project)
    assert _sink(bootstrap) == _upper(first)

    more = numbered(0, 100, 20) + numbered(1, 100, 20)
    produce(bootstrap, "events", more)
    _run(command, env, cwd=project)   # the flow's checkpoint under storage: this run copies only the new records
    assert _sink(bootstrap) == _upper(first + more)
