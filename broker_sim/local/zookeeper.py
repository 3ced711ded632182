"""A standalone ZooKeeper server process for tests and local clusters.

Theory of operation: pylog's clusters coordinate through a real ZooKeeper (the
Debian ``zookeeper`` package's jar), not an imitation.  ``ZooKeeperServer``
writes a ``zoo.cfg`` into its data directory, starts
``java ... QuorumPeerMain zoo.cfg`` in its own process group (so a stop never
touches anything else) with stdout/stderr going to ``zookeeper.log`` in the
data directory, and waits until the four-letter command ``ruok`` answers
``imok``.  ``stop()`` sends SIGTERM to that process group, then SIGKILL after a
grace period, always by the pid it started.

ZooKeeper cannot listen on port 0 and report the port back, so ``port=0`` means
"pick a free port": bind a socket to ``host:0``, read the port, close it, and
hand that to ZooKeeper (the small race with another process taking the port in
between is accepted; ``start`` then fails with the log tail in the message).
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
ZOOKEEPER_CONF_DIR = Path("/etc/zookeeper/conf")
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"


class ZooKeeperUnavailable(RuntimeError):
    """The ZooKeeper jar or java is not installed."""


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free a moment ago on ``host`` (bound to port 0, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct ports that were free a moment ago on ``host``."""
    ports: list[int] = []
    while len(ports) < count:
        port = free_port(host)
        if port not in ports:
            ports.append(port)
    return ports


def four_letter_word(host: str, port: int, word: str, timeout_s: float = 10.0) -> str:
    """Send a ZooKeeper four-letter command (``ruok``, ``stat``) and return the reply text (a loaded machine
    has kept a JVM from answering within 1 s; the start-up poll passes a short timeout of its own)."""
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        sock.sendall(word.encode())
        chunks = []
        while True:
            data = sock.recv(4096)
            if not data:
                break
            chunks.append(data)
    return b"".join(chunks).decode(errors="replace")


def zookeeper_available() -> str | None:
    """None when a ZooKeeper server can be started here, else the reason it cannot."""
    if not ZOOKEEPER_JAR.exists():
        return (f"{ZOOKEEPER_JAR} is missing: install Debian's 'zookeeper' package "
                "(apt-get install zookeeper; ci/setup.sh does it)")
    if not _java():
        return "no java executable on PATH (Debian's 'zookeeper' package depends on a JRE)"
    return None


def _java() -> str | None:
    from shutil import which
    return which("java")


class ZooKeeperServer:
    """One standalone ZooKeeper server process.  Methods are called from one thread."""

    def __init__(self, data_dir: str | os.PathLike, port: int = 0, host: str = "127.0.0.1",
                 tick_ms: int = 500) -> None:
        self.data_dir = Path(data_dir)
        self.host = host
        self.port = port
        self.tick_ms = tick_ms
        self.process: subprocess.Popen | None = None

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "zookeeper.log"

    def _write_config(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / "data").mkdir(exist_ok=True)
        cfg = self.data_dir / "zoo.cfg"
        cfg.write_text(
            f"tickTime={self.tick_ms}\n"
            f"dataDir={self.data_dir / 'data'}\n"
            f"clientPort={self.port}\n"
            f"clientPortAddress={self.host}\n"
            "admin.enableServer=false\n"
            "maxClientCnxns=0\n"
            "4lw.commands.whitelist=ruok,stat\n")
        return cfg

    def start(self, timeout: float = 30.0) -> "ZooKeeperServer":
        """Start the server and wait until it answers ``ruok``; raise naming the problem if not."""
        if self.process is not None:
            raise RuntimeError("ZooKeeperServer already started")
        reason = zookeeper_available()
        if reason:
            raise ZooKeeperUnavailable(reason)
        if self.port == 0:
            self.port = free_port(self.host)
        cfg = self._write_config()
        classpath = f"{ZOOKEEPER_CONF_DIR}:{ZOOKEEPER_JAR}"
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [_java(), "-Xmx256m", "-Dzookeeper.log.dir=" + str(self.data_dir),
                 "-Dzookeeper.root.logger=INFO,CONSOLE", "-cp", classpath, MAIN_CLASS, str(cfg)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, cwd=self.data_dir)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                code = self.process.returncode
                self.process = None
                raise RuntimeError(f"ZooKeeper exited with status {code} on start; "
                                   f"log tail:\n{self._log_tail()}")
            try:
                if four_letter_word(self.host, self.port, "ruok", 0.5) == "imok":
                    return self
            except OSError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"ZooKeeper on {self.connect_string} did not answer 'ruok' within "
                           f"{timeout} s; log tail:\n{self._log_tail()}")

    def _log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, grace_s: float = 5.0) -> None:
        """SIGTERM the server's process group, SIGKILL it after ``grace_s``; idempotent."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        try:
            os.killpg(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            process.wait(grace_s)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait(grace_s)

    def __enter__(self) -> "ZooKeeperServer":
        """Start unless already started (``with ZooKeeperServer(...).start(timeout=60) as zk:`` works too)."""
        return self if self.process is not None else self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
