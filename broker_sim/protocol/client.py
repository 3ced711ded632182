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
closed after any of them: its stream position is unknown.  Two say more:
``TlsHandshakeFailed`` names the certificate problem (unknown CA, host name,
expiry) or a peer that does not speak TLS at all, and ``TlsAnswered`` is a
plaintext request answered with a TLS record (an alert from a TLS listener).

Security probe: ``probe_security`` makes one connection with a client's TLS
context and SASL login, as its real clients would, and turns the ways a
wrong ``security.protocol``, truststore, mechanism or password shows up on the
wire (a handshake error, a hang-up, an alert, a SASL error code) into one
``SecurityMismatch`` whose message names the cause and the setting to change.
A hang-up alone is ambiguous, so the probe then asks the listener what it is
(``discover_listener``: TLS or not, SASL mechanisms or none) and says so.
Kafka clients (the Java ones, kafka-python) instead retry such a connection
until their bootstrap timeout and report only that no broker answered.
"""
from __future__ import annotations

import socket
import ssl
import struct
import time
from dataclasses import dataclass
from typing import Mapping

from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from broker_sim.protocol.produce_codec import read_uvarint

_SIZE = struct.Struct(">i")  # the frame size: int32, big-endian, not counting itself
DEFAULT_PORT = 9092
MAX_RESPONSE_BYTES = 256 * 1024 * 1024  # as the broker's own inter-broker client


class WireError(ConnectionError):
    """The connection failed, closed, timed out or answered out of order; close it."""


class ConnectionClosed(WireError):
    """The broker closed the connection before a whole response arrived."""


class ResponseTooLarge(WireError):
    """A response frame declared a size above ``max_response_bytes`` (or below zero)."""


class TlsAnswered(WireError):
    """A plaintext request was answered with a TLS record (a TLS listener's alert)."""


class TlsHandshakeFailed(WireError):
    """The TLS handshake failed. ``problem`` is a ``TLS_PROBLEMS`` key, ``reason`` OpenSSL's own words."""

    def __init__(self, message: str, problem: str, reason: str) -> None:
        super().__init__(message)
        self.problem = problem
        self.reason = reason


class SaslRefused(Exception):
    """The broker refused a SASL login: ``error_code`` 33 (mechanism not enabled; ``offered`` lists the enabled
    ones), 34 (the listener has no SASL), 58 (authentication failed) or -1 (the client refused the broker's
    answer, e.g. a SCRAM server signature that does not verify)."""

    def __init__(self, message: str, *, error_code: int, offered: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.offered = offered


# What went wrong in a TLS handshake, in words; ``_tls_problem`` picks one.
TLS_PROBLEMS = {
    "unknown-ca": "the broker's certificate is not signed by a CA this client trusts",
    "hostname": "the broker's certificate is not valid for the host name the client connected to",
    "expired": "the broker's certificate has expired or is not valid yet",
    "certificate": "the broker's certificate was not accepted",
    "client-certificate": "the broker requires a client certificate (mutual TLS) and got none it accepts",
    "not-tls": "the broker did not answer the TLS handshake in TLS",
    "refused": "the broker refused the TLS handshake",
}
# OpenSSL's X509_V_ERR_* codes (x509_vfy.h) by problem.
_VERIFY_CODES = {2: "unknown-ca", 18: "unknown-ca", 19: "unknown-ca", 20: "unknown-ca", 21: "unknown-ca",
                 62: "hostname", 64: "hostname", 9: "expired", 10: "expired"}
# OpenSSL reasons of a peer that answered a ClientHello with something that is not TLS.
_NOT_TLS_REASONS = ("WRONG_VERSION_NUMBER", "UNEXPECTED_EOF_WHILE_READING", "PACKET_LENGTH_TOO_LONG",
                    "RECORD_LAYER_FAILURE", "HTTP_REQUEST", "UNKNOWN_PROTOCOL")


def _tls_problem(exc: OSError) -> tuple[str, str]:
    """(``TLS_PROBLEMS`` key, OpenSSL's words) of a failed ``wrap_socket``."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return _VERIFY_CODES.get(exc.verify_code, "certificate"), str(exc.verify_message)
    reason = str(getattr(exc, "reason", "") or "")
    if isinstance(exc, (ssl.SSLEOFError, ssl.SSLZeroReturnError, ConnectionResetError, BrokenPipeError)) \
            or reason in _NOT_TLS_REASONS:
        return "not-tls", reason or str(exc) or type(exc).__name__
    if "CERTIFICATE_REQUIRED" in reason or "BAD_CERTIFICATE" in reason or "UNKNOWN_CA" in reason:
        return "client-certificate", reason
    return "refused", reason or str(exc)


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
                try:
                    sock = ssl_context.wrap_socket(sock, server_hostname=host)
                except (ssl.SSLError, ConnectionResetError, BrokenPipeError) as exc:
                    problem, reason = _tls_problem(exc)
                    raise TlsHandshakeFailed(f"TLS handshake with {address} failed: {TLS_PROBLEMS[problem]} "
                                             f"({reason})", problem, reason) from exc
        except WireError:
            sock.close()
            raise
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
        return bytes(self._recv_frame(deadline))

    def _recv_frame(self, deadline: float | None) -> bytearray:
        header = self._recv_exact(4, deadline)
        (size,) = _SIZE.unpack(header)
        if not 0 <= size <= self.max_response_bytes:
            # a TLS record (alert 21, handshake 22; version 3.x) read as a size: far above any bound
            if header[:2] in (b"\x15\x03", b"\x16\x03") and header[2] <= 4 \
                    and not isinstance(self.sock, ssl.SSLSocket):
                raise TlsAnswered(f"{self.address} answered in TLS: it is a TLS listener")
            raise ResponseTooLarge(f"{self.address} sent a response of {size} bytes "
                                   f"(at most {self.max_response_bytes} accepted)")
        return self._recv_exact(size, deadline)

    def read_response(self, request, correlation_id: int, deadline: float | None = None):
        """Read and decode the response to ``request`` (sent with ``correlation_id``)."""
        answered, response = decode_response(self._recv_frame(deadline), request.header.get_response_class())
        if answered != correlation_id:
            raise WireError(f"{self.address} answered correlation id {answered}, expected {correlation_id}")
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

    def authenticate(self, login, *, version: int = 1, timeout_s: float | None = None) -> None:
        """Log in with SASL: SaslHandshake v1, then SaslAuthenticate ``version`` (KIP-152) carrying the tokens.

        ``login`` is a ``broker_sim.security.sasl.SaslLogin`` (its ``mechanism``, ``username`` and
        ``exchange()``, a generator of client tokens that is sent each server token).  Raises ``SaslRefused``
        naming the mechanism and the user.
        """
        handshake = self.call(SaslHandshakeRequest[1](mechanism=login.mechanism), timeout_s=timeout_s)
        if handshake.error_code == 34:  # ILLEGAL_SASL_STATE: a listener without SASL
            raise SaslRefused(f"{self.address} does not use SASL on this listener", error_code=34)
        if handshake.error_code:
            offered = tuple(handshake.mechanisms)
            raise SaslRefused(f"{self.address} does not enable SASL mechanism {login.mechanism}; it enables "
                              f"{', '.join(offered) or 'none'}", error_code=handshake.error_code, offered=offered)
        steps = login.exchange()
        token = next(steps)
        while True:
            answer = self.call(SaslAuthenticateRequest[version](auth_bytes=token), timeout_s=timeout_s)
            if answer.error_code:
                raise SaslRefused(f"{self.address} refused the SASL {login.mechanism} login of user "
                                  f"{login.username!r}: {answer.error_message}", error_code=answer.error_code)
            try:
                token = steps.send(bytes(answer.auth_bytes))
            except StopIteration:
                return
            except Exception as exc:  # the login's own check of the broker's answer (SCRAM's server signature)
                raise SaslRefused(f"{self.address}: SASL {login.mechanism} login of user {login.username!r} "
                                  f"failed: {exc}", error_code=-1) from None

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

    def _recv_exact(self, n: int, deadline: float | None) -> bytearray:
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
        return buffer


def decode_response(frame: bytes | bytearray, response_class) -> tuple[int, object]:
    """(correlation id, response) of a response frame (size prefix stripped) of ``response_class`` (versioned).

    kafka-python's ``decode(header=True)`` copies the whole frame to read its header, 4 MiB for a bulk Fetch:
    here the header is read in place (v0: the correlation id; v1, a flexible version: with tagged fields,
    skipped) and the body decoded from a view of ``frame``.  ApiVersions keeps kafka-python's own decode (its
    header is v0 in every version, and an error answer has a v0 body)."""
    if response_class.API_KEY == ApiVersionsRequest.API_KEY:
        response = response_class.decode(bytes(frame), header=True)
        return response.header.correlation_id, response
    view = memoryview(frame)
    if len(view) < 4:
        raise WireError(f"a response of {len(view)} bytes has no correlation id")
    (correlation_id,) = _SIZE.unpack_from(view)
    position = 4
    if response_class.flexible_version_q(response_class._class_version):
        try:
            count, position = read_uvarint(view, position, len(view))
            for _ in range(count):
                _, position = read_uvarint(view, position, len(view))
                size, position = read_uvarint(view, position, len(view))
                position += size
                if position > len(view):
                    raise WireError("a response header's tagged fields run past the response")
        except ValueError:
            raise WireError("a response header ends inside a varint (or holds one longer than 5 bytes)") from None
    response = response_class.decode(view[position:])
    response._header = response_class.header_class(correlation_id=correlation_id)
    return correlation_id, response


# -- the security probe ---------------------------------------------------------------------------------------


def principal_for(settings: Mapping) -> str:
    """The principal a broker's default principal builder gives connections made with kafka-python settings
    (``security_protocol``, ``sasl_plain_username``, ``ssl_certfile``): ``User:<SASL user>``, the client
    certificate's subject on SSL, else ``User:ANONYMOUS``."""
    protocol = str(settings.get("security_protocol", "PLAINTEXT")).upper()
    if protocol.startswith("SASL_"):
        return f"User:{settings.get('sasl_plain_username')}"
    if protocol == "SSL" and settings.get("ssl_certfile"):
        return "User:<the subject of the client certificate>"
    return "User:ANONYMOUS"


def client_ssl_context(*, cafile: str | None = None, cadata: str | None = None, check_hostname: bool = True,
                       certfile: str | None = None, keyfile: str | None = None, password: str | None = None,
                       crlfile: str | None = None) -> ssl.SSLContext:
    """A client's TLS context as Kafka clients build it from their ssl.* settings: trust ``cafile`` /
    ``cadata`` (else the system's CAs), check the host name unless ``check_hostname`` is off
    (ssl.endpoint.identification.algorithm="" stops only that check: the chain is always verified, as Kafka's
    clients and kafka-python verify it), a client certificate for mutual TLS, a CRL checked on the leaf."""
    context = ssl.create_default_context(cafile=cafile, cadata=cadata)
    context.check_hostname = check_hostname
    if certfile:
        context.load_cert_chain(certfile, keyfile, password)
    if crlfile:
        context.load_verify_locations(crlfile)
        context.verify_flags |= ssl.VERIFY_CRL_CHECK_LEAF
    return context


class SecurityMismatch(Exception):
    """A client's security settings do not fit the listener. ``kind``: ``tls:<TLS_PROBLEMS key>``,
    ``protocol`` (TLS or SASL on one side only), ``sasl-mechanism``, ``sasl-login``."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class Listener:
    """What a listener speaks, as ``discover_listener`` found it; ``mechanisms`` is None without SASL."""

    tls: bool
    mechanisms: tuple[str, ...] | None

    @property
    def protocol(self) -> str:
        """Kafka's name of it: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."""
        if self.mechanisms is None:
            return "SSL" if self.tls else "PLAINTEXT"
        return "SASL_SSL" if self.tls else "SASL_PLAINTEXT"


def discover_listener(host: str, port: int, timeout_s: float) -> Listener | None:
    """Ask a listener whether it speaks TLS (a handshake that verifies nothing, only to learn that it is TLS)
    and SASL (a SaslHandshake: the enabled mechanisms, or ILLEGAL_SASL_STATE without SASL); None when it
    answers neither way (not a Kafka listener, or gone)."""
    for tls in (False, True):
        context = None
        if tls:
            context = ssl.create_default_context()
            context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        try:
            with WireConnection.connect(host, port, timeout_s=timeout_s, client_id="pylog-probe",
                                        ssl_context=context) as conn:
                answer = conn.call(SaslHandshakeRequest[1](mechanism="PLAIN"), timeout_s=timeout_s)
        except OSError:
            continue
        return Listener(tls, None if answer.error_code == 34 else tuple(answer.mechanisms))
    return None


def probe_security(address: str, *, protocol: str, ssl_context: ssl.SSLContext | None, login,
                   timeout_s: float, names: Mapping[str, str]) -> None:
    """Connect to ``address`` as a client with ``protocol`` (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) would:
    TLS with ``ssl_context``, ApiVersions, then a SASL login with ``login`` (a ``SaslLogin``) or, without
    SASL, a Metadata request that a SASL listener refuses before a login.  Returns when all that works.

    Raises ``SecurityMismatch`` naming the cause and the settings to change, worded with ``names``: the
    caller's names of its settings under the keys ``protocol``, ``truststore``, ``hostname``, ``keystore``,
    ``mechanism`` and ``credentials``.  Raises ``WireError`` when the broker cannot be reached or answers
    nothing recognisable (the caller's own retries and errors apply then).
    """
    host, port = split_address(address)
    try:
        conn = WireConnection.connect(host, port, timeout_s=timeout_s, client_id="pylog-probe",
                                      ssl_context=ssl_context)
    except TlsHandshakeFailed as exc:
        if exc.problem == "not-tls":
            raise _mismatch(address, protocol, discover_listener(host, port, timeout_s), names, exc) from None
        raise SecurityMismatch(f"{exc}: {_tls_advice(exc.problem, host, names)}", f"tls:{exc.problem}") from None
    with conn:
        first = True  # the first request, right after the handshake
        try:
            conn.call(ApiVersionsRequest[0](), timeout_s=timeout_s)
            first = False
            if login is not None:
                conn.authenticate(login, timeout_s=timeout_s)
            else:
                conn.call(MetadataRequest[1](topics=[]), timeout_s=timeout_s)
        except SaslRefused as refused:
            if refused.error_code == 34:
                listener = Listener(ssl_context is not None, None)
                raise _mismatch(address, protocol, listener, names, refused) from None
            if refused.error_code == 33:
                raise SecurityMismatch(f"{refused}: set {names['mechanism']} to one of them",
                                       "sasl-mechanism") from None
            raise SecurityMismatch(f"{refused}. Check the user name and password in {names['credentials']}",
                                   "sasl-login") from None
        except ssl.SSLError as exc:  # TLS 1.3: the broker checks the client's certificate after the handshake
            problem, reason = _tls_problem(exc)
            raise SecurityMismatch(f"{address} ended the TLS session: {TLS_PROBLEMS[problem]} ({reason}): "
                                   f"{_tls_advice(problem, host, names)}", f"tls:{problem}") from None
        except (ConnectionClosed, TlsAnswered) as exc:
            listener = discover_listener(host, port, timeout_s)
            if listener is None and first and ssl_context is not None:
                # TLS 1.3 clients finish their handshake before the broker checks their certificate; a broker
                # that wants one then hangs up on the first request (no listener answers that early otherwise)
                raise SecurityMismatch(f"{address} closed the connection right after the TLS handshake: "
                                       f"{TLS_PROBLEMS['client-certificate']}, most likely: "
                                       f"{_tls_advice('client-certificate', host, names)}",
                                       "tls:client-certificate") from None
            if listener is None and isinstance(exc, TlsAnswered):  # TLS for sure; SASL or not, unknown
                raise _mismatch(address, protocol, None, names, exc) from None
            if listener is None or listener.protocol == protocol:
                raise
            raise _mismatch(address, protocol, listener, names, exc) from None


def _tls_advice(problem: str, host: str, names: Mapping[str, str]) -> str:
    """What to change for a failed certificate check."""
    if problem == "unknown-ca":
        return f"set {names['truststore']} to the CA certificate (PEM) that signed the broker's certificate"
    if problem == "hostname":
        return (f"connect to a name the broker's certificate lists instead of {host}, or turn the host name check "
                f"off with {names['hostname']}")
    if problem == "expired":
        return "the broker needs a new certificate (or this machine's clock is wrong)"
    if problem == "client-certificate":
        return f"set {names['keystore']} to a client certificate and key signed by a CA the broker trusts"
    return f"check {names['truststore']} and the broker's certificate"


def _mismatch(address: str, protocol: str, listener: Listener | None, names: Mapping[str, str],
              seen: Exception) -> SecurityMismatch:
    """The error for a client whose ``protocol`` is not the listener's (``listener`` None: not found out)."""
    if listener is None:
        if protocol in ("SSL", "SASL_SSL"):
            guess = f"it is probably a PLAINTEXT or SASL_PLAINTEXT listener: check {names['protocol']}={protocol}"
        else:
            guess = f"it may be a TLS (SSL, SASL_SSL) or SASL listener: check {names['protocol']}={protocol}"
        return SecurityMismatch(f"{seen}; {guess}", "protocol")
    what = f"{address} is {'an' if listener.protocol == 'SSL' else 'a'} {listener.protocol} listener"
    if listener.mechanisms is not None:
        what += f" (SASL mechanisms {', '.join(listener.mechanisms) or 'none'})"
    advice = f"set {names['protocol']}={listener.protocol}"
    if listener.tls and protocol not in ("SSL", "SASL_SSL"):
        advice += f" and {names['truststore']} to the CA certificate that signed the broker's certificate"
    if listener.mechanisms is not None and not protocol.startswith("SASL_"):
        advice += f", with {names['mechanism']} and {names['credentials']}"
    return SecurityMismatch(f"{what}, but this client uses {names['protocol']}={protocol} ({seen}): {advice}",
                            "protocol")
