"""``python -m broker_sim.tools.healthcheck HOST:PORT``: exit 0 when a broker there answers ApiVersions.

A real request, not a port probe (a broker that accepts connections but cannot answer is unhealthy): the
container image's HEALTHCHECK, and the readiness check of ``broker_sim.testing.containers``.
"""
from __future__ import annotations

import socket
import struct
import sys


def api_versions_ok(host: str, port: int, timeout_s: float = 3.0) -> bool:
    """True when the broker at host:port answers an ApiVersions v0 request with error code 0."""
    client_id = b"pylog-healthcheck"
    body = struct.pack(">hhih", 18, 0, 1, len(client_id)) + client_id  # api key 18, v0, correlation id 1
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.settimeout(timeout_s)
            sock.sendall(struct.pack(">i", len(body)) + body)
            header = _read(sock, 4)
            (size,) = struct.unpack(">i", header)
            if not 6 <= size <= 1 << 20:
                return False
            payload = _read(sock, size)
    except OSError:
        return False
    correlation_id, error_code = struct.unpack_from(">ih", payload)
    return correlation_id == 1 and error_code == 0


def _read(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    address = args[0] if args else "127.0.0.1:9092"
    host, _, port = address.rpartition(":")
    ok = api_versions_ok(host.strip("[]") or "127.0.0.1", int(port))
    print("ok" if ok else f"no ApiVersions answer from {address}", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
