"""The health check (the image's HEALTHCHECK): True only for a real ApiVersions answer, never raises."""
from __future__ import annotations

import socket
import struct
import threading

from broker_sim.tools import healthcheck


def test_a_running_broker_is_healthy(pylog_broker):
    assert healthcheck.api_versions_ok("127.0.0.1", pylog_broker.port)
    assert healthcheck.main([f"127.0.0.1:{pylog_broker.port}"]) == 0


def test_nothing_listening_is_unhealthy():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert not healthcheck.api_versions_ok("127.0.0.1", port, timeout_s=1)
    assert healthcheck.main([f"127.0.0.1:{port}"]) == 1


def _answering_once(answer: bytes) -> int:
    """A port where one connection gets ``answer`` after its request, then the connection is closed."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve():
        with server, server.accept()[0] as connection:
            connection.recv(1024)
            connection.sendall(answer)

    threading.Thread(target=serve, daemon=True).start()
    return server.getsockname()[1]


def test_an_oversize_or_garbled_answer_is_unhealthy_not_an_exception():
    assert not healthcheck.api_versions_ok("127.0.0.1", _answering_once(struct.pack(">i", 64 << 20)), timeout_s=2)
    assert not healthcheck.api_versions_ok("127.0.0.1", _answering_once(struct.pack(">i", 3) + b"\x00\x00\x00"),
                                           timeout_s=2)
    assert not healthcheck.api_versions_ok("127.0.0.1", _answering_once(b""), timeout_s=2)
