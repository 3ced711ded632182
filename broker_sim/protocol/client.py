"""The one blocking framed-request client: send a Kafka request, read its framed response.

Theory of operation: kafka-python's generated message classes encode the
request (header included, ``request.encode(header=True, framed=True)``) and
decode the response; the response class comes from the request header
(``request.header.get_response_class()``, kafka-python's registry by API key
and version).  ``WireConnection`` only frames: an int32 size, then that many
bytes, over one blocking socket (TLS when given a context), one request
answered at a time.  Every place that talks to a broker without a full Kafka
client uses it: the connector's executors (``connector.wire``), the ``pylog``
tools and health check, the local cluster launcher, the benchmarks and the
tests that must control exact bytes (``send_bytes``, ``recv_frame``).

Bounds: a response larger than ``max_response_bytes`` (or negative) fails
with ``ResponseTooLarge`` before its body is read; a ``deadline`` (a
``time.monotonic()`` value) bounds the whole read of one response, not only
each ``recv``.

Errors: every failure is a ``WireError`` (a ``ConnectionError``, so an
``OSError``): ``ConnectionClosed`` when the peer closed mid-response,
``ResponseTooLarge``, ``socket.timeout`` (also an ``OSError``) past the
deadline, and a correlation id that does not match.  The connection should be
closed after any of them: its stream position is unknown.
"""
from __future__ import annotations

import socket
import ssl
import struct
import time

_SIZE = struct.Struct(">i")  # the frame size: int32, big-endian, not counting itself
DEFAULT_PORT = 9092
MAX_RESPONSE_BYTES = 256 * 1024 * 1024  # as the broker's own inter-broker client


class WireError(ConnectionError):
    """The connection failed, closed, timed out or answered out of order; close it."""


class ConnectionClosed(WireError):
    """The broker closed the connection before a whole response arrived."""


class ResponseTooLarge(WireError):
    """A response frame declared a size above ``max_response_bytes`` (or below zero)."""


def split_address(address: str, default_port: int = DEFAULT_PORT) -> tuple[str, int]:
    """``(host, port)`` of ``host:port`` (``[::1]:9092`` and a bare host too); ValueError for a bad port."""
    host, sep, port = address.strip().rpartition(":")
    if not sep:
        host, port = port, ""
    if host.count(":") and not host.startswith("["):  # a bare IPv6 address without a port
        host, port = address.strip(), ""
    return host.strip("[]") or "localhost", int(port) if port else default_port


class WireConnection:
    """One blocking TCP (or TLS) connection to one broker; requests are answered in order.

    >>> with WireConnection.connect("127.0.0.1", 9092, timeout_s=5) as conn:   # doctest: +SKIP
    ...     response = conn.call(MetadataRequest[12](topics=None, ...))
    """

    def __init__(self, sock: socket.socket, *, address: str, client_id: str = "pylog",
                 max_response_bytes: int = MAX_RESPONSE_BYTES) -> None:
        self.sock = sock
        self.address = address
        self.client_id = client_id
        self.max_response_bytes = max_response_bytes
        self._correlation_id = 0

    @classmethod
    def connect(cls, host: str, port: int, *, timeout_s: float, client_id: str = "pylog",
                ssl_context: ssl.SSLContext | None = None, receive_buffer: int | None = None,
                max_response_bytes: int = MAX_RESPONSE_BYTES) -> "WireConnection":
        """Open a connection (TCP_NODELAY; TLS when ``ssl_context``); raises ``OSError`` (refused, unknown host,
        timed out, TLS handshake failed) naming the address."""
        address = f"{host}:{port}"
        try:
            sock = socket.create_connection((host, port), timeout=timeout_s)
        except OSError as exc:
            raise WireError(f"cannot connect to {address}: {exc}") from exc
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if receive_buffer:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
            if ssl_context is not None:
                sock = ssl_context.wrap_socket(sock, server_hostname=host)
        except OSError as exc:
            sock.close()
            raise WireError(f"cannot connect to {address}: {exc}") from exc
        return cls(sock, address=address, client_id=client_id, max_response_bytes=max_response_bytes)

    @classmethod
    def to(cls, address: str, **kwargs) -> "WireConnection":
        """``connect`` to a ``host:port`` string."""
        host, port = split_address(address)
        return cls.connect(host, port, **kwargs)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "WireConnection":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- the pieces, for callers that must control exact bytes -------------------------------------

    def encode(self, request) -> tuple[int, bytes]:
        """(correlation id, framed bytes) of a versioned request (``Cls[version](...)``), on the next id."""
        self._correlation_id += 1
        request.with_header(correlation_id=self._correlation_id, client_id=self.client_id)
        return self._correlation_id, bytes(request.encode(header=True, framed=True))

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv_frame(self, deadline: float | None = None) -> bytes:
        """The next response frame's payload (size prefix stripped)."""
        (size,) = _SIZE.unpack(self._recv_exact(4, deadline))
        if not 0 <= size <= self.max_response_bytes:
            raise ResponseTooLarge(f"{self.address} sent a response of {size} bytes "
                                   f"(at most {self.max_response_bytes} accepted)")
        return self._recv_exact(size, deadline)

    def read_response(self, request, correlation_id: int, deadline: float | None = None):
        """Read and decode the response to ``request`` (sent with ``correlation_id``)."""
        response = request.header.get_response_class().decode(self.recv_frame(deadline), header=True)
        if response.header.correlation_id != correlation_id:
            raise WireError(f"{self.address} answered correlation id {response.header.correlation_id}, "
                            f"expected {correlation_id}")
        return response

    # -- the one call -------------------------------------------------------------------------------

    def call(self, request, *, timeout_s: float | None = None):
        """Send one request and return its decoded response; ``None`` for a request without one (acks=0).

        ``timeout_s`` bounds the whole exchange (else the socket's timeout bounds each read).
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        correlation_id, data = self.encode(request)
        self.send_bytes(data)
        if not request.expect_response():
            return None
        return self.read_response(request, correlation_id, deadline)

    def is_closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True when the broker closes the connection within ``timeout`` without sending anything."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(1)
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False
        return data == b""

    def _recv_exact(self, n: int, deadline: float | None) -> bytes:
        buffer = bytearray(n)
        view, got = memoryview(buffer), 0
        while got < n:
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise socket.timeout(f"{self.address} did not answer in time ({got} of {n} bytes)")
                self.sock.settimeout(remaining)
            try:
                read = self.sock.recv_into(view[got:], n - got)
            except ConnectionResetError:
                read = 0
            if not read:
                raise ConnectionClosed(f"{self.address} closed the connection after {got} of {n} bytes")
            got += read
        return bytes(buffer)
