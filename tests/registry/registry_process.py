"""A ``python -m broker_sim`` process serving a Schema Registry, for the registry's broker tests."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from broker_sim.local.zookeeper import free_port

ROOT = Path(__file__).resolve().parents[2]


class RegistryBrokerProcess:
    """One broker process with ``--schema-registry-port``; ``url`` is its registry, ``bootstrap`` its Kafka port."""

    def __init__(self, data_dir: Path, *, port: int | None = None, registry_port: int | None = None,
                 config: dict | None = None, args: list[str] | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        self.registry_port = registry_port or free_port()
        self.config = dict(config or {})
        self.args = list(args or [])
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}.log"
        self.process: subprocess.Popen | None = None
        self.scheme = "https" if any("https://" in str(v) for v in self.config.values()) else "http"

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.registry_port}"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 60.0) -> "RegistryBrokerProcess":
        command = [sys.executable, "-m", "broker_sim", "--data-dir", str(self.data_dir), "--port", str(self.port),
                   "--host", "127.0.0.1"]
        if "schema.registry.listeners" not in self.config:
            command += ["--schema-registry-port", str(self.registry_port)]
        for key, value in self.config.items():
            command += ["--config", f"{key}={str(value).replace('{registry_port}', str(self.registry_port))}"]
        env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0  # the log is kept across restarts
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(command + self.args, stdout=log, stderr=subprocess.STDOUT, env=env,
                                            start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"broker exited with {self.process.returncode}:\n{self.log_tail()}")
            text = self.log_path.read_text()[offset:]
            if re.search(r"schema registry at \S+:%d\b" % self.registry_port, text) and "listening on" in text:
                return self
            time.sleep(0.1)
        raise TimeoutError(f"broker did not start within {timeout_s} s:\n{self.log_tail()}")

    def log_tail(self, size: int = 4000) -> str:
        return self.log_path.read_text()[-size:] if self.log_path.exists() else ""

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(30)

    def terminate(self, timeout_s: float = 60.0) -> int:
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else 0
        self.process.terminate()
        try:
            return self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            return -9

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


def http(method: str, url: str, body: bytes | None = None, headers: dict | None = None, *, context=None,
         timeout: float = 30.0) -> tuple[int, bytes]:
    """(status, body) of one request; HTTP errors are answers too."""
    request = urllib.request.Request(url, data=body, method=method, headers={
        "Content-Type": "application/vnd.schemaregistry.v1+json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
