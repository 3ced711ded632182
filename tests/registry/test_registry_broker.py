"""The Schema Registry served by a broker process: real clients, a restart replaying ``_schemas``, hostile HTTP."""
from __future__ import annotations

import asyncio
import json
import socket
import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from registry_process import RegistryBrokerProcess, http

V1 = "application/vnd.schemaregistry.v1+json"


def avro(name: str, *fields: str) -> str:
    return json.dumps({"type": "record", "name": name, "namespace": "pylog.test",
                       "fields": [{"name": f, "type": "string", "default": ""} for f in fields]})


@pytest.fixture
def registry_broker(tmp_path):
    started: list[RegistryBrokerProcess] = []

    def start(**kwargs) -> RegistryBrokerProcess:
        kwargs.setdefault("config", {"group.initial.rebalance.delay.ms": 0})
        broker = RegistryBrokerProcess(tmp_path / f"broker-{len(started)}", **kwargs).start()
        started.append(broker)
        return broker

    yield start
    for broker in started:
        broker.kill()


def test_the_fixture_broker_serves_a_registry(pylog_broker, pylog_schema_registry_url):
    assert pylog_schema_registry_url == pylog_broker.schema_registry_url
    assert pylog_schema_registry_url.startswith("http://127.0.0.1:")
    status, body = http("GET", pylog_schema_registry_url + "/subjects")
    assert (status, json.loads(body)) == (200, [])


def test_confluent_client_and_plain_http_against_a_broker_process(registry_broker):
    broker = registry_broker()
    client = SchemaRegistryClient({"url": broker.url})
    first = client.register_schema("orders-value", Schema(avro("Order", "id"), "AVRO"))
    again = client.register_schema("orders-value", Schema(avro("Order", "id"), "AVRO"))
    assert first == again  # identical schema: the same id
    second = client.register_schema("orders-value", Schema(avro("Order", "id", "note"), "AVRO"))
    assert second != first
    assert client.get_subjects() == ["orders-value"]
    assert client.get_versions("orders-value") == [1, 2]
    assert json.loads(client.get_schema(first).schema_str) == json.loads(avro("Order", "id"))
    latest = client.get_latest_version("orders-value")
    assert (latest.version, latest.schema_id) == (2, second)
    with pytest.raises(SchemaRegistryError) as incompatible:  # a field without a default: not BACKWARD
        client.register_schema("orders-value", Schema(json.dumps(
            {"type": "record", "name": "Order", "namespace": "pylog.test",
             "fields": [{"name": "id", "type": "string"}, {"name": "must", "type": "int"}]}), "AVRO"))
    assert incompatible.value.http_status_code == 409

    status, body = http("GET", f"{broker.url}/subjects/orders-value/versions/latest")
    assert status == 200 and json.loads(body)["id"] == second
    status, body = http("GET", f"{broker.url}/schemas/ids/{first}")
    assert status == 200 and json.loads(json.loads(body)["schema"]) == json.loads(avro("Order", "id"))
    status, body = http("GET", f"{broker.url}/subjects/nope/versions")
    assert status == 404 and json.loads(body)["error_code"] == 40401

    # the broker still serves Kafka, and _schemas is a compacted internal topic there
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce("events", b"v")
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g", "auto.offset.reset": "earliest"})
    try:
        topics = consumer.list_topics(timeout=10).topics
        assert "_schemas" in topics
    finally:
        consumer.close()


def _state(url: str) -> dict:
    """Everything a client can read: subjects (deleted too), versions, schemas by id, configs, modes."""
    def get(path):
        status, body = http("GET", url + path)
        return status, json.loads(body)

    snapshot = {"subjects": get("/subjects"), "deleted": get("/subjects?deleted=true"),
                "config": get("/config"), "mode": get("/mode")}
    for subject in snapshot["deleted"][1]:
        snapshot[f"versions {subject}"] = get(f"/subjects/{subject}/versions?deleted=true")
        for version in snapshot[f"versions {subject}"][1]:
            snapshot[f"{subject} v{version}"] = get(f"/subjects/{subject}/versions/{version}?deleted=true")
        snapshot[f"config {subject}"] = get(f"/config/{subject}")
        snapshot[f"mode {subject}"] = get(f"/mode/{subject}")
    for schema_id in range(1, 12):
        snapshot[f"id {schema_id}"] = get(f"/schemas/ids/{schema_id}")
        snapshot[f"id {schema_id} versions"] = get(f"/schemas/ids/{schema_id}/versions?deleted=true")
    return snapshot


@pytest.mark.parametrize("stop", ["SIGKILL", "SIGTERM"])
def test_a_restart_replays_schemas_exactly(registry_broker, stop):
    broker = registry_broker()
    client = SchemaRegistryClient({"url": broker.url})
    ids = [client.register_schema(f"s{i}-value", Schema(avro(f"R{i}", "a"), "AVRO")) for i in range(4)]
    ids.append(client.register_schema("s0-value", Schema(avro("R0", "a", "b"), "AVRO")))
    ids.append(client.register_schema("json-value", Schema(json.dumps(
        {"type": "object", "properties": {"a": {"type": "string"}}}), "JSON")))
    for path, body in (("/config/s1-value", {"compatibility": "NONE"}), ("/config", {"compatibility": "FULL"})):
        status, _ = http("PUT", broker.url + path, json.dumps(body).encode())
        assert status == 200
    status, _ = http("PUT", broker.url + "/mode/s2-value", json.dumps({"mode": "READONLY"}).encode())
    assert status == 200
    client.delete_subject("s3-value")  # soft
    client.delete_version("s0-value", 1)  # soft
    client.delete_subject("s1-value")
    client.delete_subject("s1-value", permanent=True)
    before = _state(broker.url)
    if stop == "SIGKILL":
        broker.kill()
    else:
        assert broker.terminate() == 0, broker.log_tail()
    again = RegistryBrokerProcess(broker.data_dir, port=broker.port, registry_port=broker.registry_port,
                                  config=broker.config).start()
    try:
        assert _state(again.url) == before
        # ids are never reused, not even the permanently deleted subject's
        new_id = SchemaRegistryClient({"url": again.url}).register_schema(
            "fresh-value", Schema(avro("Fresh", "x"), "AVRO"))
        assert new_id > max(ids)
    finally:
        again.kill()


# --- hostile HTTP ------------------------------------------------------------------------------------------

def _raw(port: int, data: bytes, *, read_timeout: float = 15.0) -> bytes:
    """Send ``data`` on a fresh connection; everything the server answers until it closes (or the timeout)."""
    with socket.create_connection(("127.0.0.1", port), timeout=read_timeout) as sock:
        try:
            sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        chunks = []
        try:
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
        except (ConnectionResetError, socket.timeout):
            pass
        return b"".join(chunks)


def _still_serving(broker: RegistryBrokerProcess) -> None:
    assert broker.alive(), broker.log_tail()
    client = SchemaRegistryClient({"url": broker.url})
    schema_id = client.register_schema(f"alive-{time.monotonic_ns()}", Schema(avro("Alive", "a"), "AVRO"))
    assert schema_id >= 1
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce("alive", b"x")
    assert producer.flush(30) == 0


def test_hostile_requests_get_4xx_or_a_closed_connection_and_the_broker_keeps_serving(registry_broker):
    broker = registry_broker(config={"schema.registry.max.request.bytes": 65536,
                                     "schema.registry.max.connections": 64})
    port = broker.registry_port
    # a body over schema.registry.max.request.bytes: 413 before it is read
    answer = _raw(port, b"POST /subjects/x/versions HTTP/1.1\r\nHost: a\r\nContent-Type: " + V1.encode()
                  + b"\r\nContent-Length: 1000000000\r\n\r\n" + b"{" * 100000)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    # a chunked body over the limit: 413 too
    chunk = b"10000\r\n" + b"a" * 0x10000 + b"\r\n"
    answer = _raw(port, b"POST /subjects/x/versions HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                  + chunk * 2)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    # huge headers: 431
    answer = _raw(port, b"GET /subjects HTTP/1.1\r\nHost: a\r\n" + b"X-Big: " + b"b" * 100000 + b"\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 431"), answer[:200]
    answer = _raw(port, b"GET /subjects HTTP/1.1\r\n" + b"".join(b"X-%d: v\r\n" % i for i in range(500)) + b"\r\n")
    assert answer.startswith(b"HTTP/1.1 431"), answer[:200]
    # a huge URI: 414; a malformed request line: 400; not HTTP at all: closed
    assert _raw(port, b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 414")
    assert _raw(port, b"GARBAGE\r\n\r\n").startswith(b"HTTP/1.1 400")
    assert _raw(port, b"\x16\x03\x01" + b"\x00" * 20000) == b""
    # deep JSON: a 4xx naming it, not a crash
    deep = b'{"schema": ' + b"[" * 50000 + b"]" * 50000 + b"}"
    status, body = http("POST", broker.url + "/subjects/deep/versions", deep)
    assert 400 <= status < 500, (status, body[:200])
    deep_schema = json.dumps({"schema": "[" * 20000 + "]" * 20000}).encode()
    status, body = http("POST", broker.url + "/subjects/deep/versions", deep_schema)
    assert 400 <= status < 500, (status, body[:200])
    status, body = http("POST", broker.url + "/subjects/bad/versions", b"{not json")
    assert 400 <= status < 500, (status, body[:200])
    _still_serving(broker)


def test_slowloris_connections_are_closed_after_the_header_timeout(registry_broker):
    broker = registry_broker()
    sock = socket.create_connection(("127.0.0.1", broker.registry_port), timeout=30)
    started = time.monotonic()
    try:
        sock.sendall(b"GET /subjects HTTP/1.1\r\n")
        closed = False
        while time.monotonic() - started < 25:
            try:
                sock.sendall(b"X-Slow: 1\r\n")
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            sock.settimeout(1.0)
            try:
                if sock.recv(1024) == b"":
                    closed = True
                    break
            except socket.timeout:
                pass
            except ConnectionResetError:
                closed = True
                break
        assert closed, "a client trickling headers kept its connection"
        assert time.monotonic() - started < 20
    finally:
        sock.close()
    _still_serving(broker)


def test_ten_thousand_connection_attempts_are_bounded(registry_broker):
    limit = 50
    broker = registry_broker(config={"schema.registry.max.connections": limit})
    port = broker.registry_port

    async def attempts() -> tuple[int, int]:
        held, refused = [], 0
        # hold connections open past the limit: the ones beyond it are answered 503 and closed
        for _ in range(limit + 50):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            held.append((reader, writer))
        await asyncio.sleep(0.5)
        for reader, _ in held[limit + 5:]:
            data = await asyncio.wait_for(reader.read(), 10)
            refused += data.startswith(b"HTTP/1.1 503")
        for _, writer in held:
            writer.close()
        opened = len(held)

        async def one():
            try:
                _, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 10)
                writer.close()
                return 1
            except (OSError, asyncio.TimeoutError):
                return 0
        for _ in range((10_000 - opened) // 200):
            opened += sum(await asyncio.gather(*(one() for _ in range(200))))
        return opened, refused

    opened, refused = asyncio.run(attempts())
    assert refused >= 40, refused
    assert opened > 5000
    time.sleep(1)
    _still_serving(broker)


def test_the_http_server_bounds_the_bodies_held_at_once_and_keeps_connections_alive():
    from broker_sim.server.http import HttpLimits, HttpResponse, HttpServer

    async def scenario():
        async def echo(request):
            return HttpResponse(200, {"Content-Type": "text/plain"}, b"%d" % len(request.body))

        server = await HttpServer(echo, HttpLimits(max_body_bytes=1000, max_buffered_body_bytes=2500)).start(
            "127.0.0.1", 0)
        try:
            held = []
            for _ in range(2):  # two bodies of 1000 bytes in flight (only their heads sent)
                reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
                writer.write(b"POST / HTTP/1.1\r\nContent-Length: 1000\r\n\r\n")
                held.append((reader, writer))
            await asyncio.sleep(0.2)
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(b"POST / HTTP/1.1\r\nContent-Length: 1000\r\n\r\n" + b"x" * 1000)
            busy = await asyncio.wait_for(reader.read(), 10)
            writer.close()
            # the held ones finish, and one connection then serves several requests (keep-alive)
            reader, writer = held[0]
            writer.write(b"x" * 1000)
            first = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            assert await reader.readexactly(4) == b"1000"
            writer.write(b"GET / HTTP/1.1\r\n\r\n")
            second = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            assert await reader.readexactly(1) == b"0"
            for _, held_writer in held:
                held_writer.close()
            return busy, first, second, server.buffered_body_bytes
        finally:
            server.close()

    busy, first, second, buffered = asyncio.run(scenario())
    assert busy.startswith(b"HTTP/1.1 503"), busy
    assert first.startswith(b"HTTP/1.1 200") and b"Connection: keep-alive" in first
    assert second.startswith(b"HTTP/1.1 200")
    assert buffered <= 1000  # released by the answered requests (the other held one may still count)
