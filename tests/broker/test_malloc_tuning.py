"""The broker program fixes glibc's malloc thresholds (``broker_sim.server.cli.tune_malloc``).

A produce request's frame grows from 64 KiB to 1 MiB, the log append copies it and both are freed; with glibc's
default (dynamic) thresholds such buffers go back to the kernel and the next request faults their pages in again:
~720 page faults per request in the pattern below, and 370-460 ms instead of 210-260 ms of broker CPU per million
100-byte records with rdkafka_performance (the order of allocations at start decided which, e.g. the log level).
"""
from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt thresholds are glibc's")

# a produce request's buffers, as the broker allocates them: the frame grown by doubling, the log's copy, a small
# object kept (so the heap's top moves); then the page faults per request once warm
PATTERN = """
import resource

def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt

kept = []

def request():
    frame = bytearray(64 << 10)
    for size in (128 << 10, 256 << 10, 512 << 10, 1 << 20):
        grown = bytearray(size)
        grown[:len(frame)] = frame
        frame = grown
    copy = bytes(frame)
    kept.append(bytearray(200))
    del frame, copy

def faults_per_request():
    for _ in range(5):
        request()
    before = faults()
    for _ in range(200):
        request()
    return (faults() - before) / 200
"""


def _faults_per_request(main: str, env: dict | None = None) -> float:
    code = PATTERN + main
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, **(env or {})})
    assert run.returncode == 0, run.stderr
    return float(run.stdout.strip().splitlines()[-1])


# the broker program's entry (python -m broker_sim), the broker replaced by the pattern, run where the broker is
# serving (after its when_serving call)
AS_THE_PROGRAM = """
import sys
import broker_sim.cli as cli

def broker(argv, when_serving=None):
    if when_serving is not None:
        when_serving()
    print(faults_per_request())
    return 0

cli.broker_main = broker
sys.argv = ["pylog-broker", "--data-dir", "unused"]
cli.main()
"""


def test_the_broker_program_keeps_a_requests_buffers_from_faulting_their_pages_in_again():
    assert _faults_per_request(AS_THE_PROGRAM) < 5
    # the same pattern with glibc's own thresholds: the pages of every request's buffers fault in again
    assert _faults_per_request(AS_THE_PROGRAM, {"PYLOG_MALLOC_TUNING": "0"}) > 100


def test_a_caller_of_main_with_arguments_keeps_its_own_malloc_settings():
    """An application running the broker's main in its own process (argv given) is not retuned."""
    called = _faults_per_request(AS_THE_PROGRAM.replace("cli.main()", "cli.main(['--data-dir', 'unused'])"))
    assert called > 100


def test_serve_calls_when_serving_once_the_listeners_accept_connections(tmp_path):
    import asyncio
    import socket
    import threading

    from broker_sim.server.broker import Broker

    accepted = []
    broker = Broker(str(tmp_path), host="127.0.0.1", port=0)

    def when_serving():
        with socket.create_connection(("127.0.0.1", broker.port), timeout=5):
            accepted.append(True)
        broker._loop.call_soon(broker._stop_event.set)

    thread = threading.Thread(target=lambda: asyncio.run(broker.serve(when_serving=when_serving)))
    thread.start()
    thread.join(60)
    assert not thread.is_alive() and accepted == [True]


def test_the_operators_malloc_settings_win(monkeypatch):
    from broker_sim.server.cli import tune_malloc

    for name, value in (("MALLOC_TRIM_THRESHOLD_", "1048576"), ("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=1"),
                        ("PYLOG_MALLOC_TUNING", "0")):
        with monkeypatch.context() as patch:
            patch.setenv(name, value)
            assert tune_malloc() is False, name
