"""pylog-broker --help names what the README says it runs; the console scripts point at real functions."""
from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from broker_sim import cli as broker_entry
from broker_sim.server.cli import build_parser

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def test_broker_help_lists_the_cluster_command_and_where_the_broker_logs():
    text = " ".join(build_parser().format_help().split())
    assert "pylog-broker cluster --brokers N --data-dir DIR" in text
    assert "A broker logs to stderr (--log-level)" in text


@pytest.mark.parametrize("script", ["pylog", "pylog-broker"])
def test_each_console_script_names_a_function_that_exists(script):
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    target = tomllib.loads(PYPROJECT.read_text())["project"]["scripts"][script]
    module, _, function = target.partition(":")
    assert callable(getattr(importlib.import_module(module), function))


def test_pylog_broker_sends_cluster_to_the_local_launcher_and_the_rest_to_the_broker(capsys):
    with pytest.raises(SystemExit):
        broker_entry.main(["cluster", "--help"])
    assert "usage: pylog-broker cluster" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        broker_entry.main(["--help"])
    assert "usage: pylog-broker [-h] --data-dir" in capsys.readouterr().out
