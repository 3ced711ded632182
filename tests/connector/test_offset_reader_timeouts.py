"""A broker that takes connections and never answers fails the driver's offset lookup within its budgets, and the
error names the options that set them (kafka.request.timeout.ms, default.api.timeout.ms, fetchOffset.numRetries)."""
from __future__ import annotations

import socket
import threading
import time

import pytest

from connector.options import parse_source_options
from connector.source.offset_reader import OffsetReader


@pytest.fixture
def silent_broker():
    """A TCP listener that accepts connections, reads nothing and answers nothing."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held, stop = [], threading.Event()

    def accept():
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join(5)
    for connection in held:
        connection.close()
    server.close()


def test_a_broker_that_never_answers_fails_the_lookup_naming_the_timeouts(silent_broker, monkeypatch):
    monkeypatch.setattr("connector.source.offset_reader.DEFAULT_API_TIMEOUT_S", 1.0)
    reader = OffsetReader(parse_source_options({"kafka.bootstrap.servers": silent_broker, "subscribe": "t",
                                                "kafka.request.timeout.ms": "500", "fetchOffset.numRetries": "1"}))
    started = time.monotonic()
    try:
        with pytest.raises(TimeoutError) as raised:
            reader.partitions()
    finally:
        reader.close()
    assert time.monotonic() - started < 20
    message = str(raised.value)
    assert "kafka.request.timeout.ms=500" in message and "default.api.timeout.ms=1000" in message, message
    assert "fetchOffset.numRetries=1" in message and silent_broker in message, message
