"""server/http.py's streamed responses: chunked on a kept-alive connection, close-delimited otherwise, nothing
for HEAD, and a chunk asked for only once the last one drained."""
import asyncio
import socket

from broker_sim.server.http import HttpResponse, HttpServer


CHUNKS = 40


def _serve(produced: list[int], count: int = CHUNKS):
    async def chunks():
        for i in range(count):
            produced.append(i)
            yield bytes([65 + i % 26]) * 65536

    async def handler(request):
        return HttpResponse(200, {"Content-Type": "text/plain"}, stream=chunks())
    return handler


def _dechunk(data: bytes) -> tuple[bytes, bytes]:
    """(the body of one chunked message, what follows it)."""
    body = bytearray()
    while True:
        line, _, data = data.partition(b"\r\n")
        size = int(line, 16)
        if size == 0:
            return bytes(body), data[2:]
        body += data[:size]
        data = data[size + 2:]


def _exchange(port: int, requests: bytes, read_until_close: bool = True) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(requests)
        if not read_until_close:
            sock.shutdown(socket.SHUT_WR)
        received = bytearray()
        while chunk := sock.recv(1 << 20):
            received += chunk
        return bytes(received)


def test_a_stream_is_chunked_on_keep_alive_and_close_delimited_on_close():
    async def main():
        produced: list[int] = []
        server = await HttpServer(_serve(produced)).start("127.0.0.1", 0)
        loop = asyncio.get_running_loop()
        two = (b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n" b"GET /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = await loop.run_in_executor(None, _exchange, server.port, two)
        head, _, rest = data.partition(b"\r\n\r\n")
        assert b"Transfer-Encoding: chunked" in head and b"Content-Length" not in head
        first, rest = _dechunk(rest)
        expected = b"".join(bytes([65 + i % 26]) * 65536 for i in range(40))
        assert first == expected
        head, _, second = rest.partition(b"\r\n\r\n")  # the connection served the next request
        assert b"Connection: close" in head and b"Transfer-Encoding" not in head and b"Content-Length" not in head
        assert second == expected
        head_only = await loop.run_in_executor(None, _exchange, server.port,
                                               b"HEAD /a HTTP/1.0\r\nHost: x\r\n\r\n")
        assert head_only.endswith(b"\r\n\r\n") and head_only.startswith(b"HTTP/1.1 200")
        server.close()
    asyncio.run(main())


def test_a_client_that_stops_reading_stops_the_stream():
    async def main():
        produced: list[int] = []
        server = await HttpServer(_serve(produced, 400)).start("127.0.0.1", 0)  # 26 MB
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", server.port))
        sock.sendall(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
        await asyncio.sleep(1.0)
        # what the kernel's socket buffers take (a few MB on loopback), then one chunk
        assert len(produced) < 150, f"{len(produced)} of 400 chunks built for a client that reads nothing"
        sock.close()
        server.close()
    asyncio.run(main())
