"""One bounded asyncio HTTP/1.1 server: what the broker's Schema Registry and its /metrics endpoint run on.

Theory of operation: ``HttpServer(handler, limits, ssl=...)`` listens on one
address; each connection reads requests one after the other (keep-alive, as
HTTP/1.1 defaults to; ``Connection: close`` or HTTP/1.0 without keep-alive end
it) and hands each to ``handler(request) -> HttpResponse`` (a coroutine
function).  Nothing a client sends can make the broker hold more than the
limits below, or hold it for long:

* ``max_connections`` at once, TLS handshakes included; a connection beyond
  is answered 503 (in plain text, even on a TLS port) and closed without
  reading anything;
* the request line: at most ``max_request_line_bytes``; a longer one that
  starts like a request (``METHOD /...``) gets 414, anything else (not HTTP at
  all) is closed silently; a malformed line (no method, target and version)
  gets 400;
* the header section: at most ``max_header_bytes`` and ``max_headers`` fields
  (431 beyond), all of it within ``header_timeout_s`` of the first byte (a
  slowloris client is closed);
* the body: ``Content-Length`` up to ``max_body_bytes`` (413 beyond, the
  connection closed without reading the body), or chunked, decoded up to the
  same total (413 beyond); both at once is request smuggling (400).  The
  bodies of all connections together, from the head until the answer, stay
  within ``max_buffered_body_bytes`` (a chunked one counts as
  ``max_body_bytes``): a request beyond gets 503, which clients retry.  The body
  must arrive within ``body_timeout_s``; ``Expect: 100-continue`` is answered
  once the length is accepted;
* an idle keep-alive connection closes after ``idle_timeout_s``; a response
  that the client does not read within ``write_timeout_s`` closes it.  A response
  is written in ``WRITE_SLICE_BYTES`` slices, each once the transport's buffer
  has drained, so a client that stops reading holds about one slice, not a copy
  of the whole response (the response's bytes are shared).  A response with a
  ``stream`` (an async iterator of byte chunks, for answers too big to build
  per request) is sent chunked (close-delimited when the connection closes after
  it), each chunk asked for only once the previous one has drained: a client
  that stops reading holds one chunk, and the handler builds no more;
* TLS (``ssl``): a handshake not finished within ``handshake_timeout_s`` closes it.

A handler that raises answers 500 (logged); the connection stays usable.
HEAD answers carry the headers of the GET and no body.  Header names reach
the handler in lower case; repeated fields are joined with ", " (RFC 9110).
"""
from __future__ import annotations

import asyncio
import logging
import ssl as ssl_module
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import AsyncIterator, Awaitable, Callable
from urllib.parse import parse_qs, unquote, urlsplit

log = logging.getLogger(__name__)

# request methods a too-long line may start with and still be answered 414 (else it is not HTTP: closed)
_LINGER_BYTES = 256 * 1024
WRITE_SLICE_BYTES = 64 * 1024
_METHODS = (b"GET", b"HEAD", b"POST", b"PUT", b"DELETE", b"PATCH", b"OPTIONS", b"TRACE", b"CONNECT")


@dataclass(frozen=True)
class HttpLimits:
    """What one server accepts (see the module docstring)."""
    max_request_line_bytes: int = 8192
    max_header_bytes: int = 16384
    max_headers: int = 100
    max_body_bytes: int = 1 << 20
    max_connections: int = 1000
    max_buffered_body_bytes: int = 64 << 20  # bodies of all connections held at once (503 beyond)
    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    idle_timeout_s: float = 30.0
    write_timeout_s: float = 30.0
    handshake_timeout_s: float = 10.0


@dataclass
class HttpRequest:
    """One request as the handler sees it.  ``path`` is percent-decoded; ``query`` maps each name to its values."""
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    raw_path: str = ""
    version: str = "HTTP/1.1"
    peer: str = ""
    principal: str | None = None  # set by whoever authenticates the request (not the HTTP layer)


@dataclass
class HttpResponse:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    stream: AsyncIterator[bytes] | None = None  # instead of ``body``: sent as it is produced


Handler = Callable[[HttpRequest], Awaitable[HttpResponse]]


class _Refused(Exception):
    """A request answered with ``status`` and the connection closed (``body`` None: closed silently)."""

    def __init__(self, status: int, message: str | None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def error_response(status: int, message: str) -> HttpResponse:
    return HttpResponse(status, {"Content-Type": "text/plain; charset=utf-8"}, (message + "\n").encode())


class HttpServer:
    """A listening HTTP/1.1 server; ``await start(host, port)``, then ``close()``."""

    def __init__(self, handler: Handler, limits: HttpLimits = HttpLimits(), *,
                 ssl: ssl_module.SSLContext | None = None, name: str = "http") -> None:
        self.handler = handler
        self.limits = limits
        self.ssl = ssl
        self.name = name
        self.connections: set[asyncio.Task] = set()
        self.refused_connections = 0
        self.buffered_body_bytes = 0  # reserved by requests whose body is being read or handled
        self._server: asyncio.AbstractServer | None = None
        self.host = ""
        self.port = 0

    @property
    def scheme(self) -> str:
        return "https" if self.ssl is not None else "http"

    @property
    def sockets(self):
        return self._server.sockets if self._server is not None else ()

    async def start(self, host: str, port: int) -> "HttpServer":
        # the reader's buffer limit bounds one line (request line or header field)
        limit = max(self.limits.max_request_line_bytes, self.limits.max_header_bytes) + 2
        # TLS is started per connection in _serve, so that handshakes count against max_connections too
        self._server = await asyncio.start_server(self._serve, host, port, limit=limit, reuse_address=True)
        self.host = host
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self.connections):
            task.cancel()

    async def wait_closed(self) -> None:
        if self._server is not None:
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if len(self.connections) >= self.limits.max_connections:
            self.refused_connections += 1
            try:
                writer.write(_encode(error_response(503, "too many connections"), head_only=False, close=True))
                await asyncio.wait_for(writer.drain(), 1.0)
                writer.close()
            except (OSError, asyncio.TimeoutError, ConnectionError):
                writer.transport.abort()
            return
        self.connections.add(task)
        try:
            if self.ssl is not None:
                await writer.start_tls(self.ssl, ssl_handshake_timeout=self.limits.handshake_timeout_s)
            await self._requests(reader, writer)
        except (ConnectionError, OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                asyncio.TimeoutError, ssl_module.SSLError):
            pass
        except asyncio.CancelledError:
            pass
        except Exception:  # a connection must never take the broker down
            log.exception("%s: connection failed", self.name)
        finally:
            self.connections.discard(task)
            writer.transport.abort()

    async def _requests(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        peer_host = peer[0] if isinstance(peer, tuple) else ""
        while True:
            try:
                # idle: the first byte of the next request (asyncio.timeout, not wait_for: no task per read)
                async with asyncio.timeout(self.limits.idle_timeout_s):
                    first = await reader.read(1)
            except asyncio.TimeoutError:
                return
            if not first:
                return
            reserved = [0]
            try:
                try:
                    async with asyncio.timeout(self.limits.header_timeout_s):
                        request, close = await self._read_head(first, reader)
                    request.peer = peer_host
                    await self._read_body(request, reader, writer, reserved)
                except _Refused as refused:
                    if refused.message is not None:
                        writer.write(_encode(error_response(refused.status, refused.message), head_only=False,
                                             close=True))
                        await asyncio.wait_for(writer.drain(), self.limits.write_timeout_s)
                        await _linger(reader, writer)
                    return
                try:
                    response = await self.handler(request)
                except Exception:
                    log.exception("%s: %s %s failed", self.name, request.method, request.raw_path)
                    response = error_response(500, "Internal Server Error")
            finally:
                self.buffered_body_bytes -= reserved[0]
            async with asyncio.timeout(self.limits.write_timeout_s):
                if response.stream is not None:
                    try:
                        await _write_stream(writer, response, close=close, head_only=request.method == "HEAD")
                    finally:
                        await response.stream.aclose()
                else:
                    await _write(writer, _head(response, close=close),
                                 b"" if request.method == "HEAD" else response.body)
            if close:
                return

    async def _read_head(self, first: bytes, reader: asyncio.StreamReader) -> tuple[HttpRequest, bool]:
        limits = self.limits
        try:
            line = first + await reader.readuntil(b"\n")
            if not line.strip():  # RFC 9112 2.2: an empty line before the request line is ignored (once)
                line = await reader.readuntil(b"\n")
        except asyncio.LimitOverrunError:
            start = first + await reader.read(16)
            if start.split(b" ", 1)[0] in _METHODS and b" " in start:
                raise _Refused(414, "URI Too Long") from None
            raise _Refused(400, None) from None  # not HTTP: closed without an answer
        if len(line) > limits.max_request_line_bytes + 2:
            raise _Refused(414, "URI Too Long")
        parts = line.rstrip(b"\r\n").split(b" ")
        if len(parts) != 3 or not parts[0].isalpha() or not parts[2].startswith(b"HTTP/1."):
            raise _Refused(400, "Bad Request: malformed request line")
        method, target, version = (p.decode("latin-1") for p in parts)
        headers: dict[str, str] = {}
        size = count = 0
        while True:
            try:
                header = await reader.readuntil(b"\n")
            except asyncio.LimitOverrunError:
                raise _Refused(431, "Request Header Fields Too Large") from None
            size += len(header)
            if size > limits.max_header_bytes:
                raise _Refused(431, "Request Header Fields Too Large")
            header = header.rstrip(b"\r\n")
            if not header:
                break
            count += 1
            if count > limits.max_headers:
                raise _Refused(431, "Request Header Fields Too Large: too many fields")
            name, colon, value = header.partition(b":")
            if not colon or not name or name != name.strip() or header[:1] in (b" ", b"\t"):
                raise _Refused(400, "Bad Request: malformed header field")
            key = name.decode("latin-1").lower()
            text = value.strip().decode("latin-1")
            headers[key] = f"{headers[key]}, {text}" if key in headers else text
        split = urlsplit(target)
        if not split.path.startswith("/") and target != "*":
            raise _Refused(400, "Bad Request: the target is not a path")
        request = HttpRequest(method.upper(), unquote(split.path), parse_qs(split.query, keep_blank_values=True),
                              headers, b"", raw_path=target, version=version)
        connection = {t.strip() for t in headers.get("connection", "").lower().split(",")}
        close = "close" in connection or (version == "HTTP/1.0" and "keep-alive" not in connection)
        return request, close

    async def _read_body(self, request: HttpRequest, reader: asyncio.StreamReader,
                         writer: asyncio.StreamWriter, reserved: list[int]) -> None:
        limits = self.limits
        headers = request.headers
        chunked = "transfer-encoding" in headers
        if chunked and "content-length" in headers:
            raise _Refused(400, "Bad Request: both Content-Length and Transfer-Encoding")
        if chunked and headers["transfer-encoding"].strip().lower() != "chunked":
            raise _Refused(501, "Not Implemented: only the chunked transfer coding")
        length = 0
        if "content-length" in headers:
            text = headers["content-length"]
            if not text.isdigit() or len(text) > 18:
                raise _Refused(400, "Bad Request: invalid Content-Length")
            length = int(text)
            if length > limits.max_body_bytes:
                raise _Refused(413, f"Payload Too Large: at most {limits.max_body_bytes} bytes")
        if not chunked and not length:
            return
        reserve = limits.max_body_bytes if chunked else length
        if self.buffered_body_bytes + reserve > limits.max_buffered_body_bytes:
            raise _Refused(503, "Service Unavailable: too many request bodies in flight; retry")
        self.buffered_body_bytes += reserve
        reserved[0] = reserve
        if headers.get("expect", "").lower() == "100-continue":
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        try:
            if chunked:
                request.body = await asyncio.wait_for(self._read_chunks(reader), limits.body_timeout_s)
            else:
                request.body = await asyncio.wait_for(reader.readexactly(length), limits.body_timeout_s)
        except asyncio.TimeoutError:
            raise _Refused(408, "Request Timeout") from None

    async def _read_chunks(self, reader: asyncio.StreamReader) -> bytes:
        body = bytearray()
        while True:
            try:
                line = await reader.readuntil(b"\n")
            except asyncio.LimitOverrunError:
                raise _Refused(400, "Bad Request: malformed chunk") from None
            size_text = line.split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise _Refused(400, "Bad Request: malformed chunk size") from None
            if size < 0 or len(body) + size > self.limits.max_body_bytes:
                raise _Refused(413, f"Payload Too Large: at most {self.limits.max_body_bytes} bytes")
            if size == 0:
                trailer_bytes = 0
                while True:  # trailers: read and dropped, bounded like headers
                    trailer = await reader.readuntil(b"\n")
                    trailer_bytes += len(trailer)
                    if trailer_bytes > self.limits.max_header_bytes:
                        raise _Refused(431, "Request Header Fields Too Large")
                    if not trailer.strip():
                        return bytes(body)
            body += await reader.readexactly(size)
            if await reader.readexactly(2) != b"\r\n":
                raise _Refused(400, "Bad Request: malformed chunk")


async def _linger(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Before closing on a refused request: read (and drop) a little of what the client still sends, so that
    closing with unread input does not reset the connection before the client has read the answer."""
    if writer.can_write_eof():
        writer.write_eof()
    try:
        async with asyncio.timeout(1.0):
            dropped = 0
            while dropped < _LINGER_BYTES:
                data = await reader.read(65536)
                if not data:
                    return
                dropped += len(data)
    except (asyncio.TimeoutError, ConnectionError, OSError, asyncio.LimitOverrunError):
        pass


async def _write(writer: asyncio.StreamWriter, head: bytes, body: bytes) -> None:
    """The head, then the body in WRITE_SLICE_BYTES slices, each after the transport's buffer drained (a small
    answer goes out in one write; a client that stops reading holds about one slice)."""
    if len(body) <= WRITE_SLICE_BYTES:
        writer.write(head + body)
    else:
        writer.write(head)
        view = memoryview(body)
        for start in range(0, len(body), WRITE_SLICE_BYTES):
            if writer.transport.get_write_buffer_size():
                await writer.drain()
            writer.write(view[start:start + WRITE_SLICE_BYTES])
    if writer.transport.get_write_buffer_size():  # drain only what the socket did not take at once
        await writer.drain()


async def _write_stream(writer: asyncio.StreamWriter, response: HttpResponse, *, close: bool,
                        head_only: bool) -> None:
    """The head, then each chunk of ``response.stream`` once the transport's buffer has drained: chunked
    transfer coding on a connection that stays open, the bare bytes up to the close on one that does not."""
    chunked = not close
    writer.write(_encode(response, head_only=True, close=close, length=False, chunked=chunked))
    if head_only:
        return
    async for chunk in response.stream:
        if not chunk:
            continue
        if writer.transport.get_write_buffer_size():
            await writer.drain()
        writer.write(b"%x\r\n%b\r\n" % (len(chunk), chunk) if chunked else chunk)
    if chunked:
        writer.write(b"0\r\n\r\n")
    if writer.transport.get_write_buffer_size():
        await writer.drain()


def _head(response: HttpResponse, *, close: bool) -> bytes:
    return _encode(response, head_only=True, close=close)


def _encode(response: HttpResponse, *, head_only: bool, close: bool, length: bool = True,
            chunked: bool = False) -> bytes:
    try:
        reason = HTTPStatus(response.status).phrase
    except ValueError:
        reason = "Unknown"
    lines = [f"HTTP/1.1 {response.status} {reason}"]
    for name, value in response.headers.items():
        if name.lower() not in ("content-length", "connection", "transfer-encoding"):
            lines.append(f"{name}: {value}")
    if length:
        lines.append(f"Content-Length: {len(response.body)}")
    elif chunked:
        lines.append("Transfer-Encoding: chunked")
    lines.append("Connection: close" if close else "Connection: keep-alive")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head if head_only else head + response.body
