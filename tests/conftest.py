import os
import sys

import pytest
from broker_sim.testing.spark import submit_args

# Spark workers and subprocess-based tests run the interpreter that runs the tests.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
# Every Spark driver JVM a test starts in a subprocess gets the kit's driver options (broker_sim/testing/spark.py:
# C1 only, and the class-data-sharing archive of broker_sim/testing/spark_cds.py when there is one). The shared
# session (pylog_spark) adds its own on top and, with no archive yet, dumps one when the test run ends.
os.environ.setdefault("PYSPARK_SUBMIT_ARGS", submit_args())

try:  # the plugin registers itself through its entry point once pylog is installed
    import importlib.metadata as _md
    _installed = any(ep.value == "broker_sim.testing.pytest_plugin"
                     for ep in _md.entry_points(group="pytest11"))
except Exception:
    _installed = False
if not _installed:
    pytest_plugins = ["broker_sim.testing.pytest_plugin"]


def pytest_collection_modifyitems(config, items):
    """Under xdist workers (``bash ci/test.sh`` runs two), files with a test marked ``slow`` run
    first, each file's tests in their own order: whole files go to the workers in this order, the longest start
    first, so the run does not end with one worker still in a minutes-long file while the other has nothing left.
    In one process the order stays the files' own."""
    if not hasattr(config, "workerinput"):
        return
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)   # stable: the order within a file is kept


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under CI=true a skipped test fails: every skip here is a missing dependency (ZooKeeper, Docker, a
    package), and CI installs them all, so a skip there means the strongest tests silently did not run."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and not hasattr(report, "wasxfail") and _strict_ci():
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped under CI=true, where nothing may be missing: {reason}"


def _strict_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes", "on")


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory):
    """A real ZooKeeper server for one test module (a skip naming what to install, or a failure under CI)."""
    from broker_sim.local.zookeeper import ZooKeeperServer
    from broker_sim.testing.requirements import require_zookeeper

    require_zookeeper()
    with ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"), tick_ms=500).start(timeout=60) as server:
        yield server
