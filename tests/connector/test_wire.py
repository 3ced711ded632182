"""BrokerConnection over the one wire client: every failure is BrokerUnavailable naming the broker's address."""
from __future__ import annotations

import socket
import threading

import pytest

from connector.wire import BrokerConnection, BrokerUnavailable


def test_a_refused_connection_is_unavailable_naming_the_address():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(BrokerUnavailable, match=f"cannot connect to 127.0.0.1:{port}: .*Connection refused"):
        BrokerConnection("127.0.0.1", port, timeout_s=5, client_id="pylog-test")


def test_a_broker_that_hangs_up_mid_request_is_unavailable_naming_the_address():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]

        def read_the_request_and_hang_up():
            connection, _ = server.accept()
            with connection:
                connection.recv(1024)

        hang_up = threading.Thread(target=read_the_request_and_hang_up)
        hang_up.start()
        with pytest.raises(BrokerUnavailable, match=f"request to 127.0.0.1:{port} failed: .*closed the connection"):
            BrokerConnection("127.0.0.1", port, timeout_s=5, client_id="pylog-test")
        hang_up.join()
