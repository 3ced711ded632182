"""A missing ZooKeeper/Docker skips on a laptop but fails under CI=true or PYLOG_REQUIRE_<NAME>=1.

Runs pytest in a subprocess on a tiny test file that needs a dependency that is never there, once per
environment, and reads the outcome: a run that would exit 0 with the strongest tests skipped is the bug.
Mutation: `required()` returning False -> the CI=true run passed with 1 skipped, this test failed.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

NEEDS_SOMETHING = textwrap.dedent("""
    from broker_sim.testing.requirements import missing

    def test_needs_a_server():
        missing("zookeeper", "no ZooKeeper: install Debian's zookeeper package")
""")


def _run(tmp_path, **env) -> subprocess.CompletedProcess:
    (tmp_path / "test_needs.py").write_text(NEEDS_SOMETHING)
    clean = {k: v for k, v in os.environ.items() if k not in ("CI", "PYLOG_REQUIRE_ZOOKEEPER")}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rsf",
                           str(tmp_path / "test_needs.py")], cwd=tmp_path, env=dict(clean, **env),
                          capture_output=True, text=True, timeout=120)


def test_a_missing_dependency_skips_with_its_reason_outside_ci(tmp_path):
    result = _run(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 skipped" in result.stdout and "install Debian's zookeeper package" in result.stdout


@pytest.mark.parametrize("env", [{"CI": "true"}, {"PYLOG_REQUIRE_ZOOKEEPER": "1"}])
def test_a_missing_dependency_fails_under_ci_or_when_required(tmp_path, env):
    result = _run(tmp_path, **env)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "1 failed" in result.stdout and "install Debian's zookeeper package" in result.stdout
