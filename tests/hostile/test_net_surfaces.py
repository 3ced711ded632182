"""Hostile clients against the network surfaces (issue 23): TLS handshakes that never start, failed SASL
logins, frames held before authenticating, /metrics scrapers that amplify and stall, connection floods up to
the open-file limit.

Each test attacks a broker process (``hostile_broker``) while a kafka-python producer (acks=all) on an
already open connection measures its request latency (``LatencyProbe``: every answer within 0.5 s during
the attack), bounds the broker's descriptors (/proc/<pid>/fd) and RSS growth, then checks that kafka-python
and confluent-kafka still round-trip and that the broker restarts.  The attacks are the soak's
(``broker_sim/testing/hostile_soak.py``), held open here while the test measures.
"""
from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
import threading
import time
import urllib.request

from kafka import KafkaProducer

from broker_sim.server.broker import Broker
from broker_sim.testing.hostile_soak import (close_all, client_ssl_context, failed_scram_logins, many_groups,
                                             silent_connections, stalled_scrapers, surface_configs,
                                             unauthenticated_frames)
from client_helpers import BrokerProcess, free_port
from hostile import assert_serving, rss_bytes
from kafka_wire import WireClient, create_topics, produce_request, produce_result, record_batch
from broker_sim.testing.waiting import wait_until

MB = 1 << 20
LATENCY_BOUND_S = 0.5


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


class LatencyProbe(threading.Thread):
    """A kafka-python producer (acks=all) sending one record at a time and timing each acknowledgement;
    ``worst(since)`` is the slowest request that was in flight at or after ``since``."""

    def __init__(self, bootstrap: str, topic: str = "probe") -> None:
        super().__init__(daemon=True)
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0, retries=0,
                                      request_timeout_ms=30000, max_block_ms=30000)
        self.producer.send(topic, b"warm-up").get(30)  # connections open and metadata known before any attack
        self.topic = topic
        self.samples: list[tuple[float, float]] = []  # (start, seconds)
        self.errors: list[str] = []
        self.in_flight: float | None = None  # when the request being waited for was sent
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            start = self.in_flight = time.monotonic()
            try:
                self.producer.send(self.topic, b"x" * 1000).get(30)
            except Exception as exc:  # noqa: BLE001 - reported by the test
                self.errors.append(repr(exc))
            self.in_flight = None
            self.samples.append((start, time.monotonic() - start))
            time.sleep(0.02)

    def worst(self, since: float) -> float:
        """The slowest answer since ``since``, counting a request still unanswered for as long as it waited."""
        in_flight = self.in_flight
        waiting = time.monotonic() - in_flight if in_flight is not None else 0.0
        return max([seconds for start, seconds in self.samples if start + seconds >= since] + [waiting])

    def count(self, since: float) -> int:
        return sum(1 for start, _ in self.samples if start >= since)

    def stop(self) -> None:
        self._done.set()
        self.join(35)
        self.producer.close(5)


def _probe(broker) -> LatencyProbe:
    probe = LatencyProbe(broker.bootstrap_servers)
    probe.start()
    return probe


def _secured(hostile_broker, tmp_path, **config):
    """A broker with PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL listeners and /metrics; (broker, ports, CA)."""
    ports = {name: free_port() for name in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL", "METRICS")}
    configs = surface_configs(tmp_path, ports)
    truststore = configs.pop("truststore")
    configs.update({key.replace("_", "."): value for key, value in config.items()})
    return hostile_broker(config=configs, port=ports["PLAINTEXT"]), ports, truststore


def _assert_during(probe: LatencyProbe, since: float) -> None:
    assert probe.count(since) >= 3, f"the probe got {probe.count(since)} answers during the attack"
    worst = probe.worst(since)
    assert worst < LATENCY_BOUND_S, f"a Kafka client waited {worst:.2f} s during the attack (bound 0.5 s)"
    assert not probe.errors, probe.errors[:3]


def test_failed_logins_over_sasl_ssl_and_sasl_plaintext_leave_no_socket_open(hostile_broker, tmp_path):
    """100 failed SCRAM logins on each SASL listener: every broker-side socket is closed (the client closes
    first, as clients do after an authentication error).  Failed on main: each SASL_SSL failure left a socket
    in CLOSE-WAIT for good (the TLS shutdown waited for a close_notify with reading paused), and their memory
    stayed (asyncio's SSLProtocol and the connection formed a cycle that only a full collection frees)."""
    broker, ports, truststore = _secured(hostile_broker, tmp_path, connection_failed_authentication_delay_ms=0)
    pid = broker.process.pid
    probe = _probe(broker)
    before, rss_before = _fds(pid), rss_bytes(pid)
    since = time.monotonic()
    try:
        for listener, context in (("SASL_SSL", client_ssl_context(truststore)), ("SASL_PLAINTEXT", None)):
            assert failed_scram_logins(ports[listener], 100, context) == 100
        _assert_during(probe, since)
    finally:
        probe.stop()
    wait_until(lambda: _fds(pid) <= before + 5, timeout_s=15,
               what=f"the broker's descriptors back near {before} after 200 failed logins")
    wait_until(lambda: rss_bytes(pid) - rss_before < 10 * MB, timeout_s=10,
               what="the TLS connections' memory given back (RSS within 10 MB of before)")
    assert_serving(broker)
    assert_serving(hostile_broker.restart(broker))


def test_tls_connects_that_never_say_hello_are_counted_from_accept(hostile_broker, tmp_path):
    """1,000 TCP connects to the SSL listener that never send a ClientHello, max.connections.per.ip=50: the
    broker holds about 50 sockets and little memory, and Kafka clients are answered meanwhile.  Failed on
    main: the limits applied after the handshake, so the broker held ~1,000 sockets (+300 MB, kept after they
    closed); memory is given back once they end."""
    broker, ports, _ = _secured(hostile_broker, tmp_path, max_connections_per_ip=50)
    pid = broker.process.pid
    probe = _probe(broker)
    fds_before, rss_before = _fds(pid), rss_bytes(pid)
    since = time.monotonic()
    socks = silent_connections(ports["SSL"], 1000)  # from 127.0.0.2: its own per-IP count
    try:
        time.sleep(1.0)
        held, grown = _fds(pid) - fds_before, rss_bytes(pid) - rss_before
        assert held <= 60, f"the broker holds {held} more descriptors (max.connections.per.ip=50)"
        assert grown < 50 * MB, f"1,000 silent TLS connects grew RSS by {grown / MB:.0f} MB (bound 50 MB)"
        _assert_during(probe, since)
    finally:
        close_all(socks)
        probe.stop()
    wait_until(lambda: _fds(pid) <= fds_before + 5, timeout_s=15, what="the TLS attackers' sockets closed")
    wait_until(lambda: rss_bytes(pid) - rss_before < 10 * MB, timeout_s=10,
               what="the handshakes' memory given back (RSS within 10 MB of before)")
    assert_serving(broker)
    assert_serving(hostile_broker.restart(broker))


def test_unauthenticated_frames_cannot_take_the_request_memory_of_authenticated_clients(hostile_broker, tmp_path):
    """100 connections each holding most of a 500 KB frame before authenticating (a 40 MB attack, within
    sasl.server.max.receive.size) against queued.max.request.bytes=16 MiB: they use their own budget
    (queued.max.unauthenticated.request.bytes) and are closed at sasl.server.authentication.timeout.ms.
    Failed on main: they filled the shared pool, and an authenticated producer waited seconds for memory."""
    broker, ports, _ = _secured(hostile_broker, tmp_path, queued_max_request_bytes=16 * MB,
                                sasl_server_authentication_timeout_ms=3000)
    pid = broker.process.pid
    probe = _probe(broker)
    rss_before = rss_bytes(pid)
    since = time.monotonic()
    socks = unauthenticated_frames(ports["SASL_PLAINTEXT"], 100)
    try:
        time.sleep(2.0)
        _assert_during(probe, since)
        grown = rss_bytes(pid) - rss_before
        assert grown < 30 * MB, f"100 unauthenticated frames grew RSS by {grown / MB:.0f} MB (bound 30 MB)"

        def all_closed() -> bool:
            return all(_closed_by_peer(sock) for sock in socks)
        wait_until(all_closed, timeout_s=max(0.0, 4.5 - (time.monotonic() - since)),
                   what="every unauthenticated connection closed by sasl.server.authentication.timeout.ms=3000",
                   interval_s=0.2)
    finally:
        close_all(socks)
        probe.stop()
    assert_serving(broker)
    assert_serving(hostile_broker.restart(broker))


def _closed_by_peer(sock) -> bool:
    sock.settimeout(0.001)
    try:
        while True:
            if not sock.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except OSError:  # timed out: open
        return False


def _scrape(port: int) -> str:
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()


def test_metrics_scrapers_neither_amplify_nor_stall_the_broker(hostile_broker, tmp_path):
    """400 groups committing 50 partitions each (20,000 lag series on main), then 20 scrapers that pipeline
    GET /metrics and never read: the per-group series are capped (metrics.consumergroup.max.series), the
    exposition is built off the event loop once for concurrent scrapers and written as it is read.  Failed
    on main: each scrape was built on the loop (Kafka clients waited seconds) and buffered whole per scraper."""
    port, metrics_port = free_port(), free_port()
    broker = hostile_broker(config={"metrics.port": metrics_port, "offsets.topic.num.partitions": 1}, port=port)
    many_groups(port, 400, "amplified", 50)
    pid = broker.process.pid
    probe = _probe(broker)
    rss_before = rss_bytes(pid)
    since = time.monotonic()
    socks = stalled_scrapers(metrics_port, 20)
    try:
        time.sleep(3.0)
        _assert_during(probe, since)
        grown = rss_bytes(pid) - rss_before
        assert grown < 60 * MB, f"20 stalled scrapers grew RSS by {grown / MB:.0f} MB (bound 60 MB)"
    finally:
        close_all(socks)
        probe.stop()
    text = _scrape(metrics_port)
    lag_series = len(re.findall(r"^kafka_consumergroup_lag\{", text, re.M))
    assert 0 < lag_series <= 2000, lag_series
    dropped = float(re.search(r"^pylog_consumergroup_series_dropped (\S+)$", text, re.M).group(1))
    assert lag_series + dropped >= 20_000, (lag_series, dropped)
    assert_serving(broker)
    assert_serving(hostile_broker.restart(broker))


def test_metrics_bind_to_loopback_unless_an_address_is_given(tmp_path):
    """/metrics has no login and names every topic and group: it binds metrics.host (127.0.0.1 unless set),
    not the Kafka listener's address.  Failed on main: it bound the first listener's host (here every
    interface)."""
    listeners = {"listeners": "PLAINTEXT://0.0.0.0:0", "advertised.listeners": "PLAINTEXT://127.0.0.1:0"}
    with Broker(tmp_path / "data", config=dict(listeners, **{"metrics.port": 0})) as broker:
        bound = _listening_addresses(os.getpid())
        assert ("127.0.0.1", broker.metrics_port) in bound and ("0.0.0.0", broker.metrics_port) not in bound
        assert ("0.0.0.0", broker.port) in bound, bound
        assert "kafka_server_replicamanager_partitioncount" in _scrape(broker.metrics_port)
    with Broker(tmp_path / "data", config=dict(listeners, **{"metrics.port": 0, "metrics.host": "0.0.0.0"})) as broker:
        assert ("0.0.0.0", broker.metrics_port) in _listening_addresses(os.getpid())


def _listening_addresses(pid: int) -> set[tuple[str, int]]:
    """(address, port) of the IPv4 sockets process ``pid`` listens on (/proc/<pid>/net/tcp and its fds)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    bound = set()
    with open(f"/proc/{pid}/net/tcp") as table:
        for line in table.readlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # LISTEN
                address, port = fields[1].split(":")
                ip = ".".join(str(int(address[i:i + 2], 16)) for i in (6, 4, 2, 0))
                bound.add((ip, int(port, 16)))
    return bound


class _LimitedBroker(BrokerProcess):
    """A broker process started under RLIMIT_NOFILE=``open_files`` (soft and hard)."""

    open_files = 512

    def start(self, timeout: float = 20) -> "_LimitedBroker":
        args = [sys.executable, "-m", "broker_sim", "--data-dir", str(self.data_dir), "--port", str(self.port),
                "--host", "127.0.0.1"]
        for key, value in self.config.items():
            args += ["--config", f"{key}={value}"]
        limit = self.open_files

        def limit_descriptors():
            resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log, preexec_fn=limit_descriptors)
        wait_until(lambda: self._ready(), timeout_s=timeout, what=f"broker on port {self.port} listening")
        return self


def test_a_connection_flood_meets_max_connections_before_storage_runs_out_of_descriptors(hostile_broker, tmp_path):
    """Under RLIMIT_NOFILE=512, 600 idle connections: max.connections (derived: 512/2 - 64 = 192) refuses the
    flood, and a topic of 8 partitions is created and written meanwhile.  Failed on main: max.connections was
    unbounded, the flood took every descriptor and the topic creation failed with a storage error."""
    broker = _LimitedBroker(tmp_path / "data", free_port(), {"offsets.topic.num.partitions": 1}).start()
    try:
        probe = _probe(broker)
        with WireClient(broker.bootstrap_servers) as client:
            since = time.monotonic()
            socks = silent_connections(broker.port, 600)
            try:
                time.sleep(1.0)
                assert _fds(broker.process.pid) < 400, "the flood took most of the open-file limit"
                assert create_topics(client, {"after-flood": 8}) == {"after-flood": (0, None)}
                for partition in range(8):
                    error, _ = produce_result(client.call(produce_request("after-flood", partition,
                                                                          record_batch([b"kept"]))))
                    assert error == 0, f"produce to partition {partition}: error {error}"
                _assert_during(probe, since)
            finally:
                close_all(socks)
                probe.stop()
        assert "max.connections=192 reached" in broker.log_path.read_text()
        assert_serving(broker)
        assert_serving(hostile_broker.restart(broker))
    finally:
        broker.kill()
