"""pylog as users install it: a fresh virtualenv, `pip install .`, `pip install -e .` and a wheel, each followed by a
Spark job run from a directory outside the checkout.

The suite runs `pip install .` and `pip install -e .` (``PYLOG_INSTALL_MODES``, default ``install,editable``);
ci/stress_install.sh adds the wheel, which `pip install .` already builds and installs on the way.

The checkout is copied (without .git, tests and build leftovers) so the
editable install points at a tree of its own, and the job runs with no
PYTHONPATH: whatever it imports comes from the virtualenv (or, editable,
from the copy). One plain virtualenv (no system site-packages) serves the
three installs in turn, since the first one brings pyspark and the other
dependencies from pip's cache or the registry, which takes the longest.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import venv
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[2]
JOB = Path(__file__).with_name("install_job.py")
PIP_TIMEOUT_S = 1200
JOB_TIMEOUT_S = 600


@pytest.fixture(scope="module")
def environment(tmp_path_factory):
    """(virtualenv python, copy of the checkout, a directory outside both, environment variables)."""
    base = tmp_path_factory.mktemp("pylog-install")
    source = base / "pylog-src"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", "tests", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache", ".hypothesis", ".venv",
        "*.so"))  # the C extension an in-place build left: each install must build its own
    venv.EnvBuilder(with_pip=True, clear=True).create(base / "venv")
    python = base / "venv" / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(PYSPARK_PYTHON=str(python), PYSPARK_DRIVER_PYTHON=str(python), PIP_DISABLE_PIP_VERSION_CHECK="1")
    outside = base / "elsewhere"
    outside.mkdir()
    return python, source, outside, env


def _run(args, cwd, env, timeout):
    done = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(map(str, args))} failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return done.stdout


def _install(mode: str, python: Path, source: Path, outside: Path, env, extras: str = "spark") -> None:
    _run([python, "-m", "pip", "uninstall", "-q", "-y", "pylog"], outside, env, PIP_TIMEOUT_S)
    pip = [python, "-m", "pip", "install", "-q"]
    if mode == "wheel":
        wheels = outside / "wheels"
        shutil.rmtree(wheels, ignore_errors=True)
        _run([python, "-m", "pip", "wheel", "-q", "--no-deps", "-w", wheels, source], outside, env, PIP_TIMEOUT_S)
        _run(pip + [f"{next(wheels.glob('pylog-*.whl'))}[{extras}]"], outside, env, PIP_TIMEOUT_S)
    elif mode == "editable":
        _run(pip + ["-e", f"{source}[{extras}]"], outside, env, PIP_TIMEOUT_S)
    elif mode == "install":  # the Spark connector is the `spark` extra: `pip install pylog` is the broker and tools
        _run(pip + [f"{source}[{extras}]"], outside, env, PIP_TIMEOUT_S)
    else:
        raise ValueError(f"PYLOG_INSTALL_MODES: unknown mode {mode!r} (install, editable, wheel)")


MODES = os.environ.get("PYLOG_INSTALL_MODES", "install,editable").split(",")


@pytest.mark.parametrize("mode", MODES)
def test_format_pylog_works_after_each_kind_of_install_from_outside_the_checkout(environment, mode):
    python, source, outside, env = environment
    _install(mode, python, source, outside, env)
    output = _run([python, JOB], outside, env, JOB_TIMEOUT_S)
    report = json.loads(next(line for line in output.splitlines() if line.startswith("PYLOG-REPORT "))[13:])

    home = source if mode == "editable" else python.parent.parent
    assert Path(report["connector"]).resolve().is_relative_to(home.resolve()), report["connector"]
    assert report["discovered"] == ["pyspark_pylog"]             # what Spark's lookup iterates
    assert report["values"] == ["x", "y", "z"]                     # format("pylog") with no registration
    assert 'does not support save mode Overwrite' in report["overwrite"]
    assert 'mode("append")' in report["overwrite"]
    assert report["update"] == ["a=2", "b=1"]                      # update mode through foreach_batch
    assert report["typed"] == [[1, "a", 1], [2, None, 1]]          # valueFormat=avro, written and read back
    # the registry's parsers are installed with the broker: one schema of each type registers and reads back
    assert report["registered"] == {"AVRO": [1, "AVRO"], "JSON": [2, "JSON"], "PROTOBUF": [3, "PROTOBUF"]}
    # packaging: test tools only as extras, schemas inside the package, no top-level "schemas"
    runtime = [r for r in report["requires"] if "extra ==" not in r]
    assert not [r for r in runtime if r.split(">")[0].split("=")[0].strip() in ("pytest", "testcontainers")]
    assert "source-offsets.json" in report["schemas"] and not report["top_level_schemas"]
    # the C extension (optional in setup.py, but this machine has a compiler) is built by each kind of install
    assert Path(report["avro_arrow"]["file"]).resolve().is_relative_to(home.resolve()), report["avro_arrow"]
    assert report["avro_arrow"]["decoded"] == [1, 0, 42]
    assert sorted(report["compiled"]) == ["broker_sim.storage._records", "connector.sink._arrow_batches",
                                          "connector.source._records_arrow"], report["compiled"]
    for name, file in report["compiled"].items():
        assert Path(file).resolve().is_relative_to(home.resolve()) and file.endswith(".so"), (name, file)


KIT_EXAMPLE = ROOT / "examples" / "testing" / "test_avro_pipeline.py"
# a pipeline author's test without Spark: the kit's topics marker, seeding, a fault and the exactly-once check
KIT_BROKER_TEST = """
import pytest
from broker_sim.testing import assert_exactly_once, inject, seed


@pytest.mark.pylog_topics(events=2)
def test_seeded_rows_survive_an_injected_produce_error(pylog_broker, pylog_topics):
    rule = inject(pylog_broker, "Produce", error="NOT_LEADER_OR_FOLLOWER", count=2, topic="events")
    seed(pylog_broker, "events", [{"id": i, "n": i * i} for i in range(50)], format="json", key="id")
    assert rule.injected == 2
    assert_exactly_once([{"id": i, "n": i * i} for i in range(50)], "events", bootstrap=pylog_broker,
                        key="id", format="json")
"""


def test_the_test_kit_runs_from_a_wheel_outside_the_checkout_under_xdist(environment):
    """``pip install "pylog[testing]"`` from a wheel: the plugin's fixtures (pylog_spark, pylog_topics,
    pylog_broker) and the kit's functions run a user's tests from a directory of their own, in two xdist
    workers, with nothing of the checkout on the path."""
    python, source, outside, env = environment
    _install("wheel", python, source, outside, env, extras="spark,testing")
    _run([python, "-m", "pip", "install", "-q", "pytest-xdist>=3.5"], outside, env, PIP_TIMEOUT_S)
    project = outside / "user-project"
    shutil.rmtree(project, ignore_errors=True)
    project.mkdir()
    shutil.copy(KIT_EXAMPLE, project / KIT_EXAMPLE.name)
    (project / "test_broker_only.py").write_text(KIT_BROKER_TEST)
    output = _run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--strict-markers", "."],
                  project, env, JOB_TIMEOUT_S)
    assert "2 passed" in output, output[-3000:]
    where = _run([python, "-c", "import broker_sim.testing.data as d; print(d.__file__)"], project, env, 60)
    assert Path(where.strip()).resolve().is_relative_to((python.parent.parent).resolve()), where
