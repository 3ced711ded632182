"""A hostile-client soak: normal traffic against one broker process while random hostile clients attack it.

Example (what ``ci/stress_hostile.sh`` and ``tests/hostile/test_soak.py`` do)::

    report = run_soak(SoakOptions(minutes=5, seed=1))
    print(json.dumps(report, indent=2))      # report["valid"] is the verdict

Theory of operation
-------------------
One broker runs as its own process (``python -m broker_sim``) so the soak can
see it die, measure its memory (``VmHWM``, the kernel's peak RSS) and restart
it on the same data directory.

* *normal traffic*: a confluent-kafka (librdkafka) producer, ``acks=all``, sends
  one numbered record every ``normal_interval_s`` to a normal topic and records
  each delivery's latency and acknowledged offset.  Latencies are kept per
  phase: ``before`` (no attacks yet) and ``during`` (attacks running); records
  in flight across a planned restart are not counted in either.
* *hostile clients*: one at a time, back to back, an attack picked at random
  (every attack is used once before any repeats) opens its own connection and
  sends raw frames built with kafka-python's protocol classes: garbage, frames
  declaring 100 MB and never sending them, half-sent frames, Fetch naming one
  partition thousands of times, Fetches never read, compression bombs
  (zstd/gzip/lz4) to a normal and a compacted topic, batches with a valid CRC
  but lying counts or an unknown codec, garbage zstd, records planted in
  ``__consumer_offsets``, WriteTxnMarkers and follower Fetches from a client,
  CreateTopics with 10,000 partitions or illegal names, idle connection floods;
  and against the network surfaces (the broker also has SSL, SASL_PLAINTEXT
  and SASL_SSL listeners and /metrics, ``surface_configs``): TLS connects that
  never send a ClientHello, failed SCRAM logins over both SASL listeners,
  frames held before authenticating, 20 /metrics scrapers that never read
  (after 10,000 group offsets were committed), connection floods of 400;
  and (hardening round 2, records and admin) tiny batches the broker must re-encode, produces under
  thousands of rotating client ids with a ``<default>`` quota, a timestamp of
  2^63-1, CreatePartitions of the internal topics, hostile config and quota
  values, floods of new consumer groups;
  and (hardening round 3, one module each) records that readers outside Kafka's definition shift
  (``hostile_records``), requests naming 50,000-1,000,000 partitions, fetch sessions of unknown partitions and
  pipelined commits (``hostile_requests``), costly and wiping registry calls (``hostile_registry``, the broker
  serves a registry) and a replica moved back and forth between the broker's two log dirs (``hostile_misc``).
  Nothing about their answers is asserted here (the hostile tests do that);
  what counts is what they do to the broker and to the normal traffic, and
  how long they blocked its event loop (the broker logs every stall over
  100 ms, ``server/loop_monitor.py``; the report counts those lines).
* *restarts*: every ``restart_every_s`` the broker is stopped with SIGTERM (it
  must exit 0) and started again on its data directory (it must listen
  within ``start_timeout_s``); an exit nobody asked for is a *crash* (counted,
  its log tail kept, the broker started again).
* *end*: every acknowledged normal record must be read back at its
  acknowledged offset (``lost`` otherwise).

The run is *valid* when crashes, failed restarts and lost records are all 0.
"""
from __future__ import annotations

import argparse
import json
import random
import re
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from broker_sim.testing import hostile_misc, hostile_records, hostile_registry, hostile_requests
from broker_sim.testing.hostile_wire import (  # noqa: F401 - also this module's names for its importers
    _encode, _connect, _send_and_drain, _varint, _batch, _record, _bomb, _produce, _fetch, _create_topics, _ensure_topic)

NORMAL_TOPIC = "soak-normal"
COMPACTED_TOPIC = "soak-compacted"


@dataclass
class SoakOptions:
    minutes: float = 5.0
    baseline_s: float = 20.0
    restart_every_s: float = 60.0
    normal_interval_s: float = 0.02
    seed: int = 1
    start_timeout_s: float = 30.0
    work_dir: str | None = None
    broker_configs: dict = field(default_factory=dict)
    passes: int = 0   # > 0: the attack phase also ends after this many full passes through ATTACKS


# --- wire helpers: broker_sim.testing.hostile_wire ---

# --- the attacks: (port, rng, cache) -> hostile requests sent ---------------------------------

def garbage_frame(port, rng, cache):
    size = rng.randint(1, 4096)
    return _send_and_drain(port, [struct.pack(">i", size) + rng.randbytes(size)], read_s=1)


def unknown_api(port, rng, cache):
    client = b"hostile"
    header = struct.pack(">hhih", rng.choice([99, 999, 32767]), rng.randint(0, 20), 1, len(client)) + client
    return _send_and_drain(port, [struct.pack(">i", len(header)) + header], read_s=1)


def _hold_connections(port: int, count: int, hold_s: float, first_bytes: bytes = b"") -> int:
    """Open ``count`` connections, send ``first_bytes`` on each, hold them ``hold_s``, close; connections made."""
    socks = []
    try:
        for _ in range(count):
            sock = _connect(port)
            socks.append(sock)
            if first_bytes:
                sock.sendall(first_bytes)
        time.sleep(hold_s)
    except OSError:  # refused or reset: the broker's limits at work
        pass
    finally:
        for sock in socks:
            sock.close()
    return len(socks)


def declared_but_never_sent(port, rng, cache):
    """Frame headers declaring 100 MB on 20 connections, held open for a while, bodies never sent."""
    return _hold_connections(port, 20, 1.0, struct.pack(">i", 100 * 1024 * 1024) + b"\x00\x00\x00\x00")


def half_sent_frame(port, rng, cache):
    try:
        with _connect(port) as sock:
            sock.sendall(struct.pack(">i", 8 * 1024 * 1024) + bytes(1024 * 1024))
            time.sleep(0.5)
    except OSError:
        pass
    return 1


def fetch_one_partition_many_times(port, rng, cache):
    return _send_and_drain(port, [_encode(_fetch(NORMAL_TOPIC, 5000))], read_s=3)


def fetches_never_read(port, rng, cache):
    frames = [_encode(_fetch(NORMAL_TOPIC, 1), correlation_id=i) for i in range(1, 201)]
    try:
        with _connect(port) as sock:
            for data in frames:
                sock.sendall(data)
            time.sleep(1.0)
    except OSError:
        pass
    return len(frames)


def _bomb_attack(codec: int, size: int, topic: str):
    def attack(port, rng, cache):
        key = ("bomb", codec, size)
        if key not in cache:
            cache[key] = _bomb(codec, size)
        return _send_and_drain(port, [_encode(_produce(topic, 0, cache[key]))], read_s=5)
    codec_name = {1: "gzip", 3: "lz4", 4: "zstd"}[codec]
    attack.__name__ = f"bomb_{codec_name}_{size >> 20}mb_{topic.split('-')[1]}"
    return attack


def lying_record_count(port, rng, cache):
    head, body_len = _record(b"k", 5)
    records = head + b"hello" + b"\x00"
    return _send_and_drain(port, [_encode(_produce(NORMAL_TOPIC, 0, _batch(records, count=rng.choice([2, 5, 1000]))))])


def lying_record_length(port, rng, cache):
    head, _ = _record(b"k", 5000)  # says 5000 value bytes, carries 5
    return _send_and_drain(port, [_encode(_produce(NORMAL_TOPIC, 0, _batch(head + b"hello\x00", count=1)))])


def unknown_codec(port, rng, cache):
    head, _ = _record(b"k", 5)
    return _send_and_drain(port, [_encode(_produce(NORMAL_TOPIC, 0, _batch(head + b"hello\x00", count=1, codec=7)))])


def garbage_zstd(port, rng, cache):
    return _send_and_drain(port, [_encode(_produce(COMPACTED_TOPIC, 0, _batch(rng.randbytes(300), count=3, codec=4)))])


def plant_in_consumer_offsets(port, rng, cache):
    """A well-formed offset-commit key with a truncated value, produced into __consumer_offsets."""
    group, topic = b"victim", b"t"
    key = struct.pack(">hh", 1, len(group)) + group + struct.pack(">h", len(topic)) + topic + struct.pack(">i", 0)
    value = struct.pack(">h", 3) + b"\x00\x00"
    head, _ = _record(key, len(value))
    return _send_and_drain(port, [_encode(_produce("__consumer_offsets", rng.randrange(50), _batch(
        head + value + b"\x00", count=1)))])


def write_txn_markers(port, rng, cache):
    from kafka.protocol.producer import WriteTxnMarkersRequest
    marker = WriteTxnMarkersRequest.WritableTxnMarker
    request = WriteTxnMarkersRequest[1](markers=[marker(
        producer_id=rng.randrange(1000), producer_epoch=0, transaction_result=True, coordinator_epoch=0,
        topics=[marker.WritableTxnMarkerTopic(name=NORMAL_TOPIC, partition_indexes=[0])])])
    return _send_and_drain(port, [_encode(request)])


def follower_fetch(port, rng, cache):
    return _send_and_drain(port, [_encode(_fetch(NORMAL_TOPIC, 1, replica_id=rng.randint(0, 5)))])


def create_10000_partitions(port, rng, cache):
    return _send_and_drain(port, [_encode(_create_topics([(f"huge-{rng.randrange(10**9)}", 10_000)]))], read_s=10)


def illegal_topic_names(port, rng, cache):
    names = ["abc\n", ".", "..", "x" * 250, "a/b", "__consumer_offsets", ""]
    return _send_and_drain(port, [_encode(_create_topics([(name, 1)]), correlation_id=i)
                                  for i, name in enumerate(names, 1)])


def idle_connection_flood(port, rng, cache):
    return _hold_connections(port, 100, 0.5)


# --- attacks on the network surfaces (issue 23): TLS, SASL, /metrics, descriptors ----------------------
# Each helper opens what it names and returns the sockets (or a count); the tests in tests/hostile hold
# them while they measure, the soak's attacks below hold them a moment and close them.

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret";')


def surface_configs(work_dir: Path, ports: dict[str, int]) -> dict:
    """Broker configs adding SSL, SASL_PLAINTEXT and SASL_SSL listeners (a fresh CA under ``work_dir``) and
    /metrics on ``ports["METRICS"]``; ``ports`` maps PLAINTEXT/SSL/SASL_PLAINTEXT/SASL_SSL to ports."""
    from broker_sim.local.certificates import CertificateAuthority
    ca = CertificateAuthority(work_dir / "ca")
    listeners = ",".join(f"{name}://127.0.0.1:{ports[name]}" for name in
                         ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"))
    return {"listeners": listeners, "ssl.keystore.location": ca.issue("broker").keystore,
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
            "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
            "metrics.port": ports["METRICS"], "truststore": ca.truststore}


def client_ssl_context(truststore: str):
    import ssl
    return ssl.create_default_context(cafile=truststore)


def silent_connections(port: int, count: int, *, source: str = "127.0.0.2", first_bytes: bytes = b"",
                       receive_buffer: int | None = None) -> list[socket.socket]:
    """``count`` TCP connections from ``source`` (another loopback address: its own per-IP count) that send
    ``first_bytes`` (nothing: a TLS client that never sends its ClientHello) and then nothing; the ones the
    broker refused at once are left out."""
    socks = []
    for _ in range(count):
        sock = socket.socket()
        if receive_buffer:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        sock.settimeout(5)
        try:
            sock.bind((source, 0))
            sock.connect(("127.0.0.1", port))
            if first_bytes:
                sock.sendall(first_bytes)
            socks.append(sock)
        except OSError:
            sock.close()
    return socks


def close_all(socks: list[socket.socket]) -> None:
    for sock in socks:
        try:
            sock.close()
        except OSError:
            pass


def failed_scram_logins(port: int, count: int, ssl_context=None) -> int:
    """``count`` SCRAM-SHA-256 logins of an unknown user (the broker answers as for a wrong password), each on
    its own connection, closed by the client once it read the refusal; the refusals received."""
    from kafka.protocol.metadata import ApiVersionsRequest
    from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

    from broker_sim.protocol.client import WireConnection, WireError
    from broker_sim.security.sasl import SaslLogin
    refused = 0
    for i in range(count):
        try:
            connection = WireConnection.connect("127.0.0.1", port, timeout_s=10, ssl_context=ssl_context)
        except (OSError, WireError):
            continue
        try:
            connection.call(ApiVersionsRequest[3](client_software_name="hostile", client_software_version="1"))
            connection.call(SaslHandshakeRequest[1](mechanism="SCRAM-SHA-256"))
            exchange = SaslLogin("SCRAM-SHA-256", f"nobody-{i}", "wrong").exchange()
            token = next(exchange)
            for _ in range(2):
                answer = connection.call(SaslAuthenticateRequest[2](auth_bytes=token))
                if answer.error_code:
                    refused += 1
                    break
                token = exchange.send(bytes(answer.auth_bytes))
        except Exception:  # noqa: BLE001 - refused, closed or cut short: the login ends there
            pass
        finally:
            connection.sock.close()
    return refused


def unauthenticated_frames(port: int, count: int, *, declared: int = 500_000, sent: int = 400_000,
                           source: str = "127.0.0.2") -> list[socket.socket]:
    """``count`` connections to a SASL listener, each sending most of one frame (within
    sasl.server.max.receive.size) before authenticating, then nothing."""
    header = struct.pack(">i", declared) + struct.pack(">hhi", 17, 1, 1)  # a SaslHandshake that never ends
    return silent_connections(port, count, source=source, first_bytes=header + bytes(sent - 8))


def many_groups(port: int, groups: int, topic: str, partitions: int) -> None:
    """Commit an offset of every partition of ``topic`` (created here) for ``groups`` simple groups: what any
    client allowed to commit can do, and each commit a labelled lag series in /metrics."""
    from kafka.protocol.consumer import OffsetCommitRequest

    from broker_sim.protocol.client import WireConnection
    topic_class = OffsetCommitRequest.OffsetCommitRequestTopic
    with WireConnection.connect("127.0.0.1", port, timeout_s=30) as connection:
        connection.call(_create_topics([(topic, partitions)]))
        for g in range(groups):
            connection.call(OffsetCommitRequest[8](
                group_id=f"amplifier-{g:06d}", generation_id_or_member_epoch=-1, member_id="",
                group_instance_id=None, topics=[topic_class(name=topic, partitions=[
                    topic_class.OffsetCommitRequestPartition(partition_index=p, committed_offset=0,
                                                             committed_leader_epoch=-1, committed_metadata="")
                    for p in range(partitions)])]))


def stalled_scrapers(metrics_port: int, count: int) -> list[socket.socket]:
    """``count`` scrapers that send GET /metrics (pipelined several times) and never read the answers."""
    request = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" * 4
    return silent_connections(metrics_port, count, source="127.0.0.1", first_bytes=request, receive_buffer=4096)


def _surface(cache, name: str):
    return cache["surfaces"][name]


def tls_handshake_flood(port, rng, cache):
    """200 TCP connects to the SSL listener that never send a ClientHello, held 1 s."""
    socks = silent_connections(_surface(cache, "SSL"), 200)
    time.sleep(1.0)
    close_all(socks)
    return len(socks)


def failed_logins_sasl_ssl(port, rng, cache):
    return failed_scram_logins(_surface(cache, "SASL_SSL"), 10, client_ssl_context(_surface(cache, "truststore")))


def failed_logins_sasl_plaintext(port, rng, cache):
    return failed_scram_logins(_surface(cache, "SASL_PLAINTEXT"), 10)


def unauthenticated_memory(port, rng, cache):
    """100 connections each holding most of a 500 KB frame before authenticating, held 1 s."""
    socks = unauthenticated_frames(_surface(cache, "SASL_PLAINTEXT"), 100)
    time.sleep(1.0)
    close_all(socks)
    return len(socks)


def metrics_amplifier(port, rng, cache):
    """(Once) 500 groups x 20 partitions of commits, then 20 scrapers that never read, held 1 s."""
    if "groups" not in cache:
        many_groups(port, 500, "soak-amplifier", 20)
        cache["groups"] = True
    socks = stalled_scrapers(_surface(cache, "METRICS"), 20)
    time.sleep(1.0)
    close_all(socks)
    return len(socks)


def descriptor_flood(port, rng, cache):
    """400 idle connections to the PLAINTEXT listener (max.connections, derived from the open-file limit, refuses
    beyond it; the hostile test runs it under a 512-descriptor limit)."""
    socks = silent_connections(port, 400)
    time.sleep(0.5)
    close_all(socks)
    return len(socks)


ATTACKS = [
    garbage_frame, unknown_api, declared_but_never_sent, half_sent_frame, fetch_one_partition_many_times,
    fetches_never_read, _bomb_attack(4, 1 << 30, NORMAL_TOPIC), _bomb_attack(4, 1 << 30, COMPACTED_TOPIC),
    _bomb_attack(1, 256 << 20, COMPACTED_TOPIC), _bomb_attack(3, 256 << 20, NORMAL_TOPIC),
    lying_record_count, lying_record_length, unknown_codec, garbage_zstd, plant_in_consumer_offsets,
    write_txn_markers, follower_fetch, create_10000_partitions, illegal_topic_names, idle_connection_flood,
    tls_handshake_flood, failed_logins_sasl_ssl, failed_logins_sasl_plaintext, unauthenticated_memory,
    metrics_amplifier, descriptor_flood,
]


# --- issue 23 (hardening round 2): re-encoding, quotas, timestamps, config values, internal topics, groups ---

REENCODE_TOPIC = "soak-reencode"  # compression.type=gzip: every produced batch is re-encoded by the broker


def _alter_client_quota(value: float | None):
    """AlterClientQuotas of clients/<default> producer_byte_rate: set to ``value``, or removed for None."""
    from kafka.protocol.admin import AlterClientQuotasRequest
    entry = AlterClientQuotasRequest.EntryData
    return AlterClientQuotasRequest[1](entries=[entry(
        entity=[entry.EntityData(entity_type="client-id", entity_name=None)],
        ops=[entry.OpData(key="producer_byte_rate", value=0.0 if value is None else value, remove=value is None)])],
        validate_only=False)


def reencode_many_records(port, rng, cache):
    """3 x 18 KB of zstd holding 30,000 empty records each, to a topic that re-encodes them (gzip)."""
    if "many_records" not in cache:
        import zstandard
        records = b"".join(_record(None, 0, i)[0] + b"\x00" for i in range(30_000))
        cache["many_records"] = _batch(zstandard.ZstdCompressor().compress(records), count=30_000, codec=4) * 3
    _ensure_topic(port, REENCODE_TOPIC, {"compression.type": "gzip"})
    return _send_and_drain(port, [_encode(_produce(REENCODE_TOPIC, 0, cache["many_records"]))], read_s=3)


def rotating_client_ids(port, rng, cache):
    """2,000 produces, each under a new client id, with a clients/<default> quota (one rate per client id)."""
    _ensure_topic(port, REENCODE_TOPIC, {"compression.type": "gzip"})
    head, _ = _record(b"k", 1)
    records = _batch(head + b"v\x00", count=1)
    base = rng.randrange(10**9)
    frames = [_encode(_alter_client_quota(1e12))]
    frames += [_encode(_produce(REENCODE_TOPIC, 0, records, acks=0), i, f"rotating-{base + i}") for i in range(2000)]
    frames.append(_encode(_alter_client_quota(None), 2001))
    return _send_and_drain(port, frames, read_s=2)


def timestamp_long_max(port, rng, cache):
    """A record timestamped 2^63-1 (it would pin its segment): refused with INVALID_TIMESTAMP."""
    from crc32c import crc32c
    head, _ = _record(b"k", 1)
    now, forever = int(time.time() * 1000), 2**63 - 1
    body = struct.pack(">hiqqqhii", 0, 0, rng.choice([now, forever]), forever, -1, -1, -1, 1) + head + b"v\x00"
    batch = struct.pack(">qiibI", 0, len(body) + 9, 0, 2, crc32c(body)) + body
    return _send_and_drain(port, [_encode(_produce(NORMAL_TOPIC, 0, batch))], read_s=1)


def internal_topic_partitions(port, rng, cache):
    """CreatePartitions of __consumer_offsets and __transaction_state (would re-home groups and transactions)."""
    from kafka.protocol.admin import CreatePartitionsRequest
    request = CreatePartitionsRequest[3](timeout_ms=10000, validate_only=False, topics=[
        CreatePartitionsRequest.CreatePartitionsTopic(name=name, count=200, assignments=None)
        for name in ("__consumer_offsets", "__transaction_state", "_schemas")])
    return _send_and_drain(port, [_encode(request)], read_s=1)


def hostile_config_values(port, rng, cache):
    """Full-width digits, 1_048_576, a 4 MB value, and AlterClientQuotas with inf/NaN."""
    from kafka.protocol.admin import IncrementalAlterConfigsRequest
    resource = IncrementalAlterConfigsRequest.AlterConfigsResource
    values = [("retention.ms", "\uff11\uff12\uff13"), ("max.message.bytes", "1_048_576"),
              ("retention.ms", "9223372036854775808"), ("leader.replication.throttled.replicas", "0:1," * (1 << 20))]
    frames = [_encode(IncrementalAlterConfigsRequest[1](validate_only=False, resources=[resource(
        resource_type=2, resource_name=NORMAL_TOPIC, configs=[resource.AlterableConfig(
            name=name, config_operation=0, value=value)])]), i) for i, (name, value) in enumerate(values, 1)]
    frames += [_encode(_alter_client_quota(value), 10 + i) for i, value in enumerate((float("inf"), float("nan")))]
    return _send_and_drain(port, frames, read_s=2)


def group_flood(port, rng, cache):
    """300 new consumer groups from simple offset commits (bounded by group.max.groups)."""
    from kafka.protocol.consumer import OffsetCommitRequest
    topic = OffsetCommitRequest.OffsetCommitRequestTopic
    base = rng.randrange(10**9)
    frames = [_encode(OffsetCommitRequest[8](
        group_id=f"flood-{base + i}", generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        retention_time_ms=-1, topics=[topic(name=NORMAL_TOPIC, partitions=[topic.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=0, committed_leader_epoch=-1, commit_timestamp=-1,
            committed_metadata="")])]), i) for i in range(300)]
    return _send_and_drain(port, frames, read_s=2)


ATTACKS += [reencode_many_records, rotating_client_ids, timestamp_long_max, internal_topic_partitions,
            hostile_config_values, group_flood]

# issue 44 (hardening round 3), one module per area: records one definition reads the same (hostile_records), requests
# whose cost grows with what they name and pipelines (hostile_requests), the registry's CPU and its wiping
# (hostile_registry), log-dir ping-pong (hostile_misc)
ATTACKS += [*hostile_records.ATTACKS, *hostile_requests.ATTACKS, *hostile_registry.ATTACKS, *hostile_misc.ATTACKS]


# --- the broker process ------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class SoakBroker:
    """``python -m broker_sim`` on 127.0.0.1 with its stderr in ``<work>/broker.log``."""

    def __init__(self, work_dir: Path, configs: dict, start_timeout_s: float) -> None:
        self.data_dir = work_dir / "data"
        self.log_path = work_dir / "broker.log"
        self.configs = configs
        self.start_timeout_s = start_timeout_s
        self.port = _free_port()
        # the network surfaces' listeners and /metrics (issue 23's attacks), at fixed ports across restarts
        self.surfaces: dict = {name: _free_port() for name in ("SSL", "SASL_PLAINTEXT", "SASL_SSL", "METRICS",
                                                               "SCHEMA_REGISTRY")}
        extra = surface_configs(work_dir, dict(self.surfaces, PLAINTEXT=self.port))
        self.surfaces["truststore"] = extra.pop("truststore")
        # round 3's attacks: the registry (hostile_registry) and two log dirs to move a replica between (hostile_misc)
        extra.update(hostile_registry.registry_configs(self.surfaces["SCHEMA_REGISTRY"]))
        extra["log.dirs"] = ",".join(str(self.data_dir / disk) for disk in ("disk-a", "disk-b"))
        self.configs = {**extra, **configs}
        self.process: subprocess.Popen | None = None
        self.peak_rss = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> bool:
        args = [sys.executable, "-m", "broker_sim", "--data-dir", str(self.data_dir), "--port", str(self.port),
                "--host", "127.0.0.1"]
        for key, value in self.configs.items():
            args += ["--config", f"{key}={value}"]
        with open(self.log_path, "ab") as log_file:
            self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log_file)
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return True
            except OSError:
                time.sleep(0.1)
        return False

    def sample_rss(self) -> None:
        try:
            with open(f"/proc/{self.process.pid}/status") as status:
                for line in status:
                    if line.startswith("VmHWM:"):
                        self.peak_rss = max(self.peak_rss, int(line.split()[1]) * 1024)
        except OSError:
            pass

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM and wait; the exit status, or None when it had to be SIGKILLed."""
        self.sample_rss()
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
            return None

    def kill(self) -> None:
        if self.alive():
            self.process.kill()
            self.process.wait(10)

    def log_tail(self, chars: int = 2000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]

    def loop_stalls(self) -> list[int]:
        """The stalls the broker's LoopMonitor logged (ms; the worst of each logged second)."""
        return [int(match) for match in re.findall(r"event loop blocked for (\d+) ms",
                                                   self.log_path.read_text(errors="replace"))]


# --- normal traffic ----------------------------------------------------------------------------

class NormalTraffic(threading.Thread):
    """One acks=all confluent-kafka producer; per-phase delivery latencies and acknowledged offsets."""

    def __init__(self, bootstrap: str, interval_s: float) -> None:
        super().__init__(name="soak-normal", daemon=True)
        self.bootstrap = bootstrap
        self.interval_s = interval_s
        self.phase = "before"
        self.latencies: dict[str, list[float]] = {"before": [], "during": []}
        self.acked: dict[int, bytes] = {}
        self.errors = 0
        self._halt = threading.Event()
        self._sent: dict[bytes, tuple[float, str]] = {}

    def _on_delivery(self, err, msg) -> None:
        started, phase = self._sent.pop(msg.value(), (None, None))
        if err is not None:
            self.errors += 1
            return
        self.acked[msg.offset()] = msg.value()
        if phase is not None and phase == self.phase and phase in self.latencies:
            self.latencies[phase].append((time.perf_counter() - started) * 1000)

    def run(self) -> None:
        from confluent_kafka import Producer
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "linger.ms": 0,
                             "enable.idempotence": True, "message.timeout.ms": 120000,
                             "reconnect.backoff.max.ms": 500})
        number = 0
        next_send = time.monotonic()
        while not self._halt.is_set():
            now = time.monotonic()
            if now < next_send:
                producer.poll(next_send - now)
                continue
            next_send = now + self.interval_s
            value = b"normal-%09d" % number
            number += 1
            self._sent[value] = (time.perf_counter(), self.phase)
            producer.produce(NORMAL_TOPIC, value=value, partition=0, on_delivery=self._on_delivery)
        producer.flush(120)

    def stop(self) -> None:
        self._halt.set()
        self.join(180)


def _read_back(bootstrap: str, acked: dict[int, bytes], timeout_s: float = 60.0) -> int:
    """How many acknowledged records are not at their acknowledged offset in the log."""
    from confluent_kafka import Consumer, TopicPartition
    if not acked:
        return 0
    last = max(acked)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "soak-check", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    consumer.assign([TopicPartition(NORMAL_TOPIC, 0, 0)])
    found: dict[int, bytes] = {}
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline and (not found or max(found) < last):
            msg = consumer.poll(1.0)
            if msg is None or msg.error():
                continue
            found[msg.offset()] = msg.value()
    finally:
        consumer.close()
    return sum(1 for offset, value in acked.items() if found.get(offset) != value)


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)


# --- the run -----------------------------------------------------------------------------------

def run_soak(options: SoakOptions) -> dict:
    """Run the soak; a JSON-able report (``valid``: no crash, no failed restart, no lost record)."""
    work = Path(options.work_dir or tempfile.mkdtemp(prefix="pylog-hostile-soak-"))
    work.mkdir(parents=True, exist_ok=True)
    broker = SoakBroker(work, dict(options.broker_configs), options.start_timeout_s)
    rng = random.Random(options.seed)
    report = {"seed": options.seed, "minutes": options.minutes, "passes": options.passes,
              "hostile_requests_sent": 0, "attacks": {},
              "crashes": 0, "crash_logs": [], "restarts": 0, "failed_restarts": 0}
    if not broker.start():
        raise RuntimeError(f"broker did not start: {broker.log_tail()}")
    _setup_topics(broker.bootstrap)
    traffic = NormalTraffic(broker.bootstrap, options.normal_interval_s)
    traffic.start()
    try:
        time.sleep(options.baseline_s)
        traffic.phase = "during"
        cache: dict = {"surfaces": broker.surfaces}
        order: list = []
        passes = 0
        end = time.monotonic() + options.minutes * 60
        next_restart = time.monotonic() + options.restart_every_s
        while time.monotonic() < end:
            if not order:
                if options.passes and passes == options.passes:
                    break
                passes += 1
                order = rng.sample(ATTACKS, len(ATTACKS))
            attack = order.pop()
            try:
                sent = attack(broker.port, rng, cache)
            except OSError:  # refused/reset before anything was sent: the broker's answer to a flood
                sent = 0
            report["hostile_requests_sent"] += sent or 0   # round 3's attack modules return None
            report["attacks"][attack.__name__] = report["attacks"].get(attack.__name__, 0) + 1
            broker.sample_rss()
            if not broker.alive():
                report["crashes"] += 1
                report["crash_logs"].append({"after": attack.__name__, "log": broker.log_tail()})
                if not broker.start():
                    report["failed_restarts"] += 1
                    break
            if time.monotonic() >= next_restart:
                traffic.phase = "restart"
                report["restarts"] += 1
                status = broker.stop()
                if status != 0 or not broker.start():
                    report["failed_restarts"] += 1
                    report["crash_logs"].append({"after": "restart", "status": status, "log": broker.log_tail()})
                    if not broker.alive() and not broker.start():
                        break
                traffic.phase = "during"
                next_restart = time.monotonic() + options.restart_every_s
    except BaseException:
        broker.kill()  # the soak itself failed: its broker process must not outlive it
        raise
    finally:
        traffic.stop()
    broker.sample_rss()
    lost = _read_back(broker.bootstrap, traffic.acked) if broker.alive() else None  # None: cannot tell
    status = broker.stop() if broker.alive() else None
    report.update({
        "final_stop_status": status,
        "peak_rss_mb": round(broker.peak_rss / 2**20, 1),
        "loop_stalls_over_100ms_logged": len(broker.loop_stalls()),
        "worst_loop_stall_ms": max(broker.loop_stalls(), default=0),
        "normal_acknowledged": len(traffic.acked),
        "normal_delivery_errors": traffic.errors,
        "lost": lost,  # acknowledged normal records not at their offset at the end
        "latency_ms": {phase: {"count": len(values), "p50": _percentile(values, 0.50),
                               "p99": _percentile(values, 0.99),
                               "mean": round(statistics.fmean(values), 2) if values else None}
                       for phase, values in traffic.latencies.items()},
        "work_dir": str(work),
    })
    report["valid"] = (report["crashes"] == 0 and report["failed_restarts"] == 0 and lost == 0
                       and status == 0)
    return report


def _setup_topics(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(NORMAL_TOPIC, 1, 1),
                                   NewTopic(COMPACTED_TOPIC, 1, 1, config={"cleanup.policy": "compact"})])
    for future in futures.values():
        future.result(30)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m broker_sim.testing.hostile_soak",
                                     description="Hostile-client soak of one broker process (JSON report on stdout).")
    parser.add_argument("--minutes", type=float, default=5.0, help="attack phase length (default 5)")
    parser.add_argument("--baseline-s", type=float, default=20.0, help="normal traffic alone first (default 20)")
    parser.add_argument("--restart-every-s", type=float, default=60.0, help="SIGTERM + restart period (default 60)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--passes", type=int, default=0,
                        help="also end the attack phase after N full passes through the catalogue (default: none)")
    parser.add_argument("--work-dir", help="data dir and broker log (default: a new temp dir, kept)")
    parser.add_argument("--config", action="append", default=[], metavar="KEY=VALUE", help="broker config")
    args = parser.parse_args(argv)
    configs = dict(item.split("=", 1) for item in args.config)
    report = run_soak(SoakOptions(minutes=args.minutes, baseline_s=args.baseline_s,
                                  restart_every_s=args.restart_every_s, seed=args.seed, work_dir=args.work_dir,
                                  broker_configs=configs, passes=args.passes))
    print(json.dumps(report, indent=2))
    return 0 if report["valid"] else 1


if __name__ == "__main__":
    sys.exit(main())
