"""Hostile clients against request memory and connections (issue 10): lying frame headers, half-sent
frames, an exhausted queued.max.request.bytes pool, idle connections, connection floods.

Each test attacks a broker process, then checks what the broker answered (or that it closed the
connection where Kafka closes it), that its RSS grew by no more than the bound the test states, that
kafka-python and confluent-kafka still round-trip, that acknowledged data is intact, and that it
restarts cleanly.
"""
from __future__ import annotations

import re
import socket
import struct
import threading
import time
import urllib.request

from broker_sim.protocol.client import ConnectionClosed
from hostile import assert_alive, assert_serving, rss_bytes, wait_read_or_refused
from kafka.protocol.metadata import ApiVersionsRequest
from kafka_wire import (LATEST, WireClient, fetch_request, list_offsets, metadata, produce_request, produce_result,
                        record_batch)
from broker_sim.testing.waiting import wait_until

MB = 1 << 20


def _connect(broker) -> socket.socket:
    return socket.create_connection(("127.0.0.1", broker.port), timeout=10)


def _api_versions_ok(client: WireClient) -> bool:
    return client.call(ApiVersionsRequest[3](client_software_name="hostile", client_software_version="1")) \
        .error_code == 0


def _closed_by_peer(sock: socket.socket, timeout: float) -> bool:
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


def _pool_used(broker) -> int:
    """The broker's queued.max.request.bytes pool usage, from its /metrics (started with metrics.port=0)."""
    url = re.search(r"metrics at (http://\S+)", broker.log_path.read_text()).group(1)
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    return int(float(re.search(r"^kafka_network_socketserver_memorypoolused (\S+)$", text, re.M).group(1)))


def _settled_rss(broker) -> int:
    """RSS once the broker has read all that was sent to it, or stopped reading (not after a fixed sleep)."""
    wait_read_or_refused(broker.port)
    return rss_bytes(broker.process.pid)


def test_headers_declaring_100_mb_allocate_nothing_and_idle_senders_are_closed(hostile_broker):
    # a short idle timeout, so the senders that stopped are closed within the test
    broker = hostile_broker(config={"connections.max.idle.ms": 2000, "metrics.port": 0})
    with WireClient(broker.bootstrap_servers) as client:
        assert _api_versions_ok(client)
    before = rss_bytes(broker.process.pid)
    attackers = [_connect(broker) for _ in range(40)]
    for sock in attackers:
        sock.sendall(struct.pack(">i", 100 * MB) + struct.pack(">hhi", 0, 9, 1) + b"\0" * 100)
    grown = _settled_rss(broker) - before
    assert grown < 50 * MB, f"40 headers declaring 100 MB grew RSS by {grown / MB:.0f} MB (bound 50 MB)"
    # they hold only the buffers of what they sent, not 40 x 100 MB of the 200 MB pool: others are still read
    assert _pool_used(broker) < 8 * MB
    with WireClient(broker.bootstrap_servers, timeout=1.0) as client:
        assert _api_versions_ok(client)
    # Kafka's idle expiry: no bytes for connections.max.idle.ms closes a connection, mid-frame or not
    assert all(_closed_by_peer(sock, 20) for sock in attackers)
    for sock in attackers:
        sock.close()
    assert wait_until(lambda: _pool_used(broker) == 0, timeout_s=10, what="the closed senders' reservations released")
    assert_serving(broker)
    assert_serving(hostile_broker.restart(broker))


def test_a_half_sent_50_mb_frame_holds_about_its_bytes(hostile_broker):
    broker = hostile_broker()
    topic = "half-sent"
    with WireClient(broker.bootstrap_servers) as client:
        metadata(client, [topic])
        wait_until(lambda: produce_result(client.call(produce_request(topic, 0, record_batch([b"kept"]))))[0] == 0,
                   timeout_s=10, what="first produce acknowledged")
    before = rss_bytes(broker.process.pid)
    sent = 8 * MB
    with _connect(broker) as sock:
        sock.sendall(struct.pack(">i", 50 * MB) + bytes(sent))
        grown = _settled_rss(broker) - before
        # the frame's buffer doubles as bytes arrive: at most twice what was sent, plus slack
        assert grown < 2 * sent + 16 * MB, f"{sent / MB:.0f} MB of a 50 MB frame grew RSS by {grown / MB:.0f} MB"
    assert_serving(broker)
    broker = hostile_broker.restart(broker)
    with WireClient(broker.bootstrap_servers) as client:
        assert list_offsets(client, topic, 0, LATEST)[2] == 1
    assert_serving(broker)


def test_an_exhausted_request_pool_makes_connections_wait_then_answers_all(hostile_broker):
    # a 1 MB pool and requests of 1.5 MB each: every frame is bigger than the whole pool, so only one
    # fits at a time (Kafka's non-strict pool admits a frame while any memory is left) and the others wait
    broker = hostile_broker(config={"queued.max.request.bytes": MB, "message.max.bytes": 4 * MB,
                                    "metrics.port": 0})
    topic = "pooled"
    with WireClient(broker.bootstrap_servers) as client:
        metadata(client, [topic])
        wait_until(lambda: produce_result(client.call(produce_request(topic, 0, record_batch([b"x"]))))[0] == 0,
                   timeout_s=10, what="topic ready")
    batch = record_batch([bytes(1536 * 1024)], key=None)
    clients, per_client = 16, 4
    errors: list = []
    before = rss_bytes(broker.process.pid)

    def produce_pipelined():
        try:
            with WireClient(broker.bootstrap_servers, timeout=60) as client:
                requests = [produce_request(topic, 0, batch) for _ in range(per_client)]
                sent = [(request, *client.encode(request)) for request in requests]
                for _, _, data in sent:
                    client.send_bytes(data)
                for request, correlation_id, _ in sent:
                    response = client.read_response(request, correlation_id)
                    errors.append(produce_result(response)[0])
        except Exception as exc:  # surfaced by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=produce_pipelined) for _ in range(clients)]
    peak = before
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        peak = max(peak, rss_bytes(broker.process.pid))
        time.sleep(0.05)
    for thread in threads:
        thread.join()
    assert errors == [0] * (clients * per_client), errors
    grown = peak - before
    # 96 MB were sent at once; the pool admits one 1.5 MB frame at a time (plus its decoded copy), the
    # rest waits in the clients' socket buffers (measured: 5.5 MB; 33 MB without the pool)
    assert grown < 20 * MB, f"RSS grew by {grown / MB:.0f} MB (bound 20 MB)"
    with WireClient(broker.bootstrap_servers) as client:
        assert list_offsets(client, topic, 0, LATEST)[2] == 1 + clients * per_client
    assert _pool_used(broker) == 0, "request memory leaked from the pool"
    assert_serving(broker)
    broker = hostile_broker.restart(broker)
    with WireClient(broker.bootstrap_servers) as client:
        assert list_offsets(client, topic, 0, LATEST)[2] == 1 + clients * per_client


def test_idle_connections_are_closed_but_a_long_poll_is_not(hostile_broker):
    broker = hostile_broker(config={"connections.max.idle.ms": 1500})
    topic = "long-poll"
    with WireClient(broker.bootstrap_servers) as client:
        metadata(client, [topic])
        wait_until(lambda: produce_result(client.call(produce_request(topic, 0, record_batch([b"a"]))))[0] == 0,
                   timeout_s=10, what="topic ready")
    idle = WireClient(broker.bootstrap_servers)
    assert _api_versions_ok(idle)
    polling = WireClient(broker.bootstrap_servers, timeout=30)
    started = time.monotonic()
    # waits at the log end for 5 s, longer than the idle timeout: in progress, so not idle
    response = polling.call(fetch_request(topic, 0, 1, max_wait_ms=5000))
    assert time.monotonic() - started >= 4.5
    assert response.responses[0].partitions[0].error_code == 0
    assert idle.is_closed_by_peer(timeout=10), "an idle connection outlived connections.max.idle.ms"
    assert polling.is_closed_by_peer(timeout=10), "the poller, idle after its answer, is closed too"
    idle.close()
    polling.close()
    before = rss_bytes(broker.process.pid)
    # many idle connections cost little each (a 4 KB read buffer, not 256 KB) and all get closed
    many = [_connect(broker) for _ in range(300)]
    for sock in many:
        sock.sendall(struct.pack(">i", 20) + b"\0" * 6)  # a header and a few bytes, then silence
    grown = _settled_rss(broker) - before
    assert grown < 300 * 40 * 1024, f"300 idle connections grew RSS by {grown / MB:.1f} MB (bound 40 KB each)"
    assert all(_closed_by_peer(sock, 20) for sock in many)
    for sock in many:
        sock.close()
    assert_serving(broker)
    assert_serving(hostile_broker.restart(broker))


def _refused(broker) -> bool:
    """A new connection is closed at accept (nothing answered)."""
    client = WireClient(broker.bootstrap_servers)
    try:
        _api_versions_ok(client)
        return False
    except (ConnectionClosed, ConnectionResetError, BrokenPipeError):
        return True
    finally:
        client.close()


def _limits_hold(broker, limit: int) -> None:
    # one at a time, each answered: the fixture's readiness probe may still be closing a moment
    clients = [wait_until(lambda: _accepted_client(broker), timeout_s=10, what="a connection below the limit")
               for _ in range(limit)]
    assert _refused(broker), f"connection {limit + 1} was accepted"
    before = rss_bytes(broker.process.pid)
    refused = sum(_refused(broker) for _ in range(200))
    assert refused == 200
    grown = _settled_rss(broker) - before
    assert grown < 20 * MB, f"200 refused connections grew RSS by {grown / MB:.1f} MB (bound 20 MB)"
    clients.pop().close()
    # the count drops once the broker saw the close; then one more is accepted, and only one
    replacement = wait_until(lambda: _accepted_client(broker), timeout_s=10, what="a slot freed by a close")
    assert _refused(broker)
    replacement.close()
    for client in clients:
        client.close()
    warnings = broker.log_path.read_text().count("refused connection from 127.0.0.1")
    assert 1 <= warnings <= 5, f"{warnings} warnings logged for ~200 refusals in a few seconds"


def _accepted_client(broker) -> WireClient | None:
    client = WireClient(broker.bootstrap_servers)
    try:
        if _api_versions_ok(client):
            return client
    except (ConnectionClosed, ConnectionResetError, BrokenPipeError):
        pass
    client.close()
    return None


def test_max_connections_per_ip_refuses_the_next_and_accepts_after_a_close(hostile_broker):
    broker = hostile_broker(config={"max.connections.per.ip": 8})
    _limits_hold(broker, 8)
    assert_serving(broker)
    assert_serving(hostile_broker.restart(broker))


def test_max_connections_per_ip_overrides_and_max_connections(hostile_broker):
    broker = hostile_broker(config={"max.connections.per.ip": 1, "max.connections.per.ip.overrides": "127.0.0.1:8",
                                    "max.connections": 10})
    _limits_hold(broker, 8)
    assert_serving(broker)
    broker.terminate()
    broker = hostile_broker(config={"max.connections": 8})
    _limits_hold(broker, 8)
    assert_serving(broker)
    assert_serving(hostile_broker.restart(broker))


def test_invalid_overrides_stop_the_broker_at_start_with_a_clear_error(hostile_broker):
    try:
        hostile_broker(config={"max.connections.per.ip.overrides": "127.0.0.1=5"})
    except AssertionError as exc:
        assert "max.connections.per.ip.overrides" in str(exc)
    else:
        raise AssertionError("a broker started with overrides it cannot parse")


def test_the_broker_survives_a_connection_flood(hostile_broker):
    broker = hostile_broker(config={"max.connections": 50})
    before = rss_bytes(broker.process.pid)
    for _ in range(5):
        socks = []
        for _ in range(100):
            try:
                socks.append(_connect(broker))
            except OSError:
                pass
        for sock in socks:
            sock.close()
    assert_alive(broker)
    grown = _settled_rss(broker) - before
    assert grown < 20 * MB, f"500 connects grew RSS by {grown / MB:.1f} MB (bound 20 MB)"
    # closed connections gave their slots back: the count is exact after churn
    wait_until(lambda: _fifty_accepted(broker), timeout_s=15, what="all 50 slots free again")
    assert_serving(broker)
    assert_serving(hostile_broker.restart(broker))


def _fifty_accepted(broker) -> bool:
    clients = []
    try:
        for _ in range(50):
            client = _accepted_client(broker)
            if client is None:
                return False
            clients.append(client)
        return True
    finally:
        for client in clients:
            client.close()


def test_a_sender_that_stops_halfway_is_closed_while_others_wait_for_request_memory(hostile_broker):
    # a 1 MB pool; the attacker's frame grows past it (one growing frame may) and then stops coming, with
    # Kafka's 10 min idle timeout still far away: the broker closes it once others have waited 5 s for memory
    broker = hostile_broker(config={"queued.max.request.bytes": MB, "message.max.bytes": 4 * MB})
    topic = "stalled"
    with WireClient(broker.bootstrap_servers) as client:
        metadata(client, [topic])
        wait_until(lambda: produce_result(client.call(produce_request(topic, 0, record_batch([b"x"]))))[0] == 0,
                   timeout_s=10, what="topic ready")
    attacker = _connect(broker)
    attacker.sendall(struct.pack(">i", 50 * MB) + bytes(2 * MB))
    wait_read_or_refused(broker.port)   # the attacker's 2 MB are in the broker's pool (or refused) first
    started = time.monotonic()
    with WireClient(broker.bootstrap_servers, timeout=30) as client:
        answer = client.call(produce_request(topic, 0, record_batch([bytes(1536 * 1024)], key=None)))
    assert produce_result(answer)[0] == 0
    assert time.monotonic() - started < 25
    assert _closed_by_peer(attacker, 10)
    attacker.close()
    assert_serving(broker)
    assert_serving(hostile_broker.restart(broker))
