"""The README's secured quick start, run as written (paths and port moved into the test's own), with nothing
but what it tells the user to install: ``cryptography`` (the test extra) is made unimportable for every
command, as on a machine with ``pip install pylog`` alone."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from broker_sim.bench.brokers import accepts_connections
from broker_sim.local.zookeeper import free_port

README = Path(__file__).resolve().parents[2] / "README.md"


def quick_start_block() -> str:
    text = README.read_text()
    match = re.search(r"### Secured quick start\n\n```\n(.*?)\n```", text, re.S)
    assert match, "README has no secured quick start block"
    return match.group(1)


def split_at_broker(block: str) -> tuple[str, str, str]:
    """(commands before the broker, the broker command, commands after it)."""
    lines = block.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("pylog-broker "))
    end = start
    while lines[end].endswith("\\"):
        end += 1
    return "\n".join(lines[:start]), "\n".join(lines[start:end + 1]), "\n".join(lines[end + 1:])


def test_the_secured_quick_start_runs_as_written_without_the_test_extra(tmp_path):
    port = free_port()
    block = (quick_start_block().replace("/tmp/pki", str(tmp_path / "pki"))
             .replace("/tmp/secure", str(tmp_path / "secure")).replace("127.0.0.1:9094", f"127.0.0.1:{port}"))
    before, broker_command, after = split_at_broker(block)
    blocker = tmp_path / "no-extras" / "cryptography"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('cryptography is not installed (pylog[test] is not)')\n")
    # the running interpreter's scripts first: another install's `pylog` on PATH would run other code
    here = os.path.dirname(sys.executable)
    scripts = here if os.path.exists(os.path.join(here, "pylog")) else os.path.dirname(shutil.which("pylog") or here)
    env = {**os.environ, "PATH": f"{scripts}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": os.pathsep.join(p for p in (str(blocker.parent), os.environ.get("PYTHONPATH")) if p)}
    work = tmp_path / "work"
    work.mkdir()

    def bash(script: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=work, env=env,
                              capture_output=True, text=True, timeout=120)

    made = bash(before)
    assert made.returncode == 0, made.stderr
    with open(tmp_path / "broker.log", "w") as log:
        broker = subprocess.Popen(["bash", "-c", "exec " + broker_command], cwd=work, env=env,
                                  stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while not accepts_connections(port):
            assert broker.poll() is None, (tmp_path / "broker.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the quick start's broker did not accept connections in 60 s"
            time.sleep(0.1)
        ran = bash(after)
        assert ran.returncode == 0, ran.stdout + ran.stderr
        listed = bash(f"pylog --bootstrap-server 127.0.0.1:{port} --command-config admin.properties "
                      f"acls list --principal User:spark")
        assert listed.returncode == 0 and "READ" in listed.stdout and "events" in listed.stdout, listed
    finally:
        broker.terminate()
        try:
            broker.wait(30)
        except subprocess.TimeoutExpired:
            broker.kill()
            broker.wait(30)
