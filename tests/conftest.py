import os
import sys

# Spark workers and subprocess-based tests run the interpreter that runs the tests.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

try:  # the plugin registers itself through its entry point once pylog is installed
    import importlib.metadata as _md
    _installed = any(ep.value == "broker_sim.testing.pytest_plugin"
                     for ep in _md.entry_points(group="pytest11"))
except Exception:
    _installed = False
if not _installed:
    pytest_plugins = ["broker_sim.testing.pytest_plugin"]
