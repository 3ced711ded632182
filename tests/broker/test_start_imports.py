"""A plain broker starts without what only other setups need (issue 25: start to accepting under 0.3 s).

``python -X importtime -m broker_sim`` lists every module the process imports on stderr; the broker is stopped
once it accepts a TCP connection, so the list is what a start costs. Clients (kafka-python's and aiokafka's
admin client, consumer, producer, network), crc32c's ``__init__`` (it reads its version from the installed
metadata), Prometheus, ZooKeeper, the cluster member, the Schema Registry and TLS load only when asked for
(``broker_sim/lazy_packages.py``, ``server/metrics.py``, ``server/broker.py``), kafka-python's message
classes of an API when its first request arrives (``protocol/apis.py``), and the record libraries, the schema
codec under the coordinators' records, the decompressors, the log cleaner and the rack-aware selector at their
first use (``test_what_a_start_no_longer_imports_loads_at_its_first_use_and_works``).
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# module (or package prefix) -> why a plain single broker must not import it at start
NOT_AT_START = {
    "kafka.admin": "kafka-python's admin client (kafka/__init__ imports it)",
    "kafka.consumer": "kafka-python's consumer",
    "kafka.producer": "kafka-python's producer",
    "kafka.net": "kafka-python's network stack",
    "kafka.coordinator": "kafka-python's consumer-side group coordinator",
    "aiokafka.client": "aiokafka's client (aiokafka/__init__ imports it)",
    "aiokafka.consumer": "aiokafka's consumer",
    "aiokafka.producer": "aiokafka's producer",
    "prometheus_client": "only for metrics.port or the first scrape",
    "broker_sim.server.http": "the HTTP server of /metrics and the Schema Registry",
    "kazoo": "ZooKeeper: cluster mode only",
    "broker_sim.controller.zk_store": "cluster mode only",
    "broker_sim.controller.zk_controller": "cluster mode only",
    "broker_sim.server.cluster_member": "cluster mode only (a replica's leader/follower changes)",
    "broker_sim.server.schema_registry": "only with schema.registry.listeners",
    "broker_sim.registry": "the Schema Registry's modules",
    "broker_sim.security.tls": "only with SSL / SASL_SSL listeners",
    "broker_sim.local": "the local cluster launcher",
    "broker_sim.testing": "the test harness",
    "broker_sim.bench": "the benchmarks",
    "importlib.metadata": "crc32c's __init__ reads its __version__ from the installed metadata (lazy_packages.py)",
    "crc32c._cli": "crc32c's command line, imported by its __init__",
    # kafka-python message classes of APIs no request has asked for yet (protocol/apis.py loads them on first use)
    "kafka.protocol.admin": "the admin APIs' message classes (~25 ms of CPU to build from their JSON schemas)",
    "kafka.protocol.metadata": "Metadata, ApiVersions and FindCoordinator message classes",
    "kafka.protocol.sasl": "the SASL message classes",
    "kafka.protocol.producer": "Produce and transaction message classes (plain produce requests need none)",
    "kafka.protocol.consumer.group": "the group APIs' message classes (lazy_packages.py defers their package)",
    # record codecs and message schemas a plain broker uses only once records or requests ask for them
    "kafka.protocol.consumer.fetch": "Fetch's message classes: a follower's first fetch (lazy_packages.py leaves)",
    "kafka.protocol.consumer.offsets": "ListOffsets and OffsetForLeaderEpoch classes: a follower's truncation",
    "kafka.protocol.consumer.metadata": "the consumer protocol's subscription: the first consumer group read",
    "kafka.protocol.api_message": "kafka-python's schema codec: the first protocol message class (~10 ms with Fetch's)",
    "kafka.protocol.schemas": "kafka-python's schema codec, also under the coordinators' records (records.py)",
    "kafka.record": "kafka-python's record batches: the first control batch, coordinator record or time lookup",
    "aiokafka.record": "aiokafka's record batches (~17 ms): the first control marker read or cleaner pass",
    "typing_extensions": "imported by aiokafka.record",
    "cramjam": "the validator's snappy: the first compressed batch",
    "lz4": "the validator's lz4: the first compressed batch",
    "zstandard": "the validator's zstd: the first compressed batch",
    "broker_sim.storage.cleaner": "the log cleaner: its first pass (replication/partition.py Partition.clean)",
    "broker_sim.replication.replica_selector": "KIP-392 rack-aware reads: the first fetch with a client rack",
    "broker_sim.controller.election": "the election rules: the first ElectLeaders (or a cluster's controller)",
}


def _imported_by_a_start(data_dir: Path) -> set[str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    process = subprocess.Popen([sys.executable, "-X", "importtime", "-m", "broker_sim", "--data-dir", str(data_dir),
                                "--port", str(port), "--host", "127.0.0.1"], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, env=env, cwd=data_dir.parent)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, f"the broker exited with status {process.returncode}"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the broker did not accept connections within 60 s"
                time.sleep(0.02)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    return {line.rsplit("|", 1)[1].strip() for line in stderr.decode(errors="replace").splitlines()
            if line.startswith("import time:") and line.count("|") == 2}


def test_a_plain_broker_accepts_connections_without_loading_clients_metrics_zookeeper_registry_or_tls(tmp_path):
    modules = _imported_by_a_start(tmp_path / "data")
    assert {"broker_sim.server.broker", "broker_sim.server.dispatch", "kafka.errors"} <= modules  # the list is real
    loaded = {name: why for name, why in NOT_AT_START.items()
              if any(module == name or module.startswith(name + ".") for module in modules)}
    assert loaded == {}, f"imported by a plain broker's start: {loaded}"


DEFERRED_THEN_USED = """
import importlib.metadata, logging, sys
from broker_sim.lazy_packages import defer_client_packages
defer_client_packages()  # what the broker program does first
import kafka.errors
import aiokafka.record.default_records
assert "kafka.admin" not in sys.modules and "aiokafka.client" not in sys.modules, "an __init__ ran at import"
import kafka.protocol.consumer as consumer
assert "kafka.protocol.consumer.fetch" not in sys.modules, "a leaf was imported before its first lookup"
from kafka.protocol.consumer import FetchRequest, OffsetForLeaderEpochRequest
from kafka.protocol.consumer.fetch import FetchRequest as leaf
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription
assert FetchRequest is leaf and "kafka.protocol.consumer.group" not in sys.modules, "the group classes loaded"
from kafka.protocol.consumer import JoinGroupRequest  # not a leaf: the package's __init__ runs now
assert JoinGroupRequest.__module__ == "kafka.protocol.consumer.group" and consumer.FetchRequest is leaf
assert "JoinGroupRequest" in consumer.__all__ and "__getattr__" not in vars(consumer)
assert any(isinstance(h, logging.NullHandler) for h in logging.getLogger("kafka").handlers), "no NullHandler"
import kafka
assert kafka.__version__ == importlib.metadata.version("kafka-python"), kafka.__version__
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
assert "kafka.admin" in sys.modules and KafkaConsumer.__module__ == "kafka.consumer.group"
assert "__getattr__" not in vars(kafka), "the deferral hook outlived the real __init__"
try:
    kafka.no_such_name
except AttributeError as exc:
    assert "no_such_name" in str(exc), exc
else:
    raise AssertionError("a missing name did not raise AttributeError")
from aiokafka import AIOKafkaProducer
assert AIOKafkaProducer.__module__ == "aiokafka.producer.producer"
print("ok")
"""


def _python(code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


def test_the_deferred_packages_are_whole_once_something_asks_for_what_their_init_defines():
    done = _python(DEFERRED_THEN_USED)
    assert (done.returncode, done.stdout.strip()) == (0, "ok"), done.stderr[-2000:]


DEFERRED_CRC32C = """
import sys
from broker_sim.lazy_packages import defer_client_packages
defer_client_packages()
import crc32c._crc32c as compiled
from crc32c import crc32c
assert crc32c is compiled.crc32c and crc32c(b"123456789") == 0xE3069283, crc32c
import kafka.record.util  # kafka-python's record CRC takes the compiled function too
assert kafka.record.util.crc32c_c is compiled.crc32c
assert "importlib.metadata" not in sys.modules and "crc32c._cli" not in sys.modules, "crc32c's __init__ ran"
import crc32c as package
import importlib.metadata
assert package.__version__ == importlib.metadata.version("crc32c"), package.__version__
assert package.crc32c is compiled.crc32c and "__getattr__" not in vars(package)
assert package.CRC32CHash(b"123456789").checksum == 0xE3069283
from broker_sim.lazy_packages import defer_package_init
assert "xml" not in sys.modules
# another version of a package (a leaf missing): not deferred at all
assert defer_package_init("xml", (("xml.dom.minidom", ("parseString",)), ("xml.no_such_leaf", ("x",)))) is False
assert not [m for m in sys.modules if m == "xml" or m.startswith("xml.")], "a refused deferral left modules"
import xml.dom.minidom
assert xml.dom.minidom.parseString("<a/>").documentElement.tagName == "a"
print("ok")
"""


def test_crc32c_serves_its_compiled_function_without_its_init_which_reads_the_installed_metadata():
    done = _python(DEFERRED_CRC32C)
    assert (done.returncode, done.stdout.strip()) == (0, "ok"), done.stderr[-2000:]


def test_a_process_that_embeds_the_broker_keeps_the_client_packages_as_they_are():
    """Only the broker program defers: a test, tool or connector importing the broker may import client modules
    directly (these two import names from their package's __init__, a circular import under deferral)."""
    done = _python("import broker_sim.cli, broker_sim.server.broker\n"
                   "from aiokafka.consumer import AIOKafkaConsumer\n"
                   "from kafka.cluster import ClusterMetadata\n"
                   "print('ok')")
    assert (done.returncode, done.stdout.strip()) == (0, "ok"), done.stderr[-2000:]


def test_the_scram_mock_secret_is_written_at_start_only_where_scram_logins_can_happen(tmp_path):
    """A fresh data dir's start fsyncs no mock secret unless a listener offers SCRAM (then at start, not at the
    first login); the secret is the same across restarts and for every reader."""
    from broker_sim.security.entity_configs import MOCK_SECRET_FILE, FileEntityConfigs
    from broker_sim.server.broker import Broker

    with Broker(tmp_path / "plain", port=0):
        pass
    assert not (tmp_path / "plain" / "security" / MOCK_SECRET_FILE).exists()
    scram = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "SCRAM-SHA-256"}
    with Broker(tmp_path / "scram", config=scram):
        written = (tmp_path / "scram" / "security" / MOCK_SECRET_FILE).read_bytes()
    with Broker(tmp_path / "scram", config=scram) as again:
        assert again.entity_configs.mock_secret == written == FileEntityConfigs(tmp_path / "scram").mock_secret
    assert len(written) == 32


FIRST_USE = """
import socket, struct, sys, tempfile
from broker_sim.lazy_packages import defer_client_packages
defer_client_packages()  # what the broker program does first
from broker_sim.protocol.apis import APIS, messages
from broker_sim.server.broker import Broker

def loaded():
    return {m for m in ("kafka.protocol.admin", "kafka.protocol.metadata", "kafka.protocol.sasl",
                        "kafka.protocol.producer", "kafka.protocol.consumer.group") if m in sys.modules}

def resolved():
    return sorted(vars(messages)), sorted(k for k, spec in APIS.items() if {"request", "response"} & set(vars(spec)))

def call(sock, api_key, version, correlation_id, body=b"", flexible=False):
    # a request header v1 (v2 when flexible: an empty tag buffer) with a null client id, written by hand so that
    # this process's client side loads no kafka-python message class itself
    header = struct.pack(">hhih", api_key, version, correlation_id, -1) + (b"\\x00" if flexible else b"")
    frame = header + body
    sock.sendall(struct.pack(">i", len(frame)) + frame)
    size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
    answer = sock.recv(size, socket.MSG_WAITALL)
    assert struct.unpack(">i", answer[:4])[0] == correlation_id and len(answer) == size, answer
    return answer

def text(value):
    return struct.pack(">h", len(value)) + value

with Broker(tempfile.mkdtemp(), port=0, config={"group.initial.rebalance.delay.ms": "0"}) as broker:
    assert loaded() == set() and resolved() == ([], []), ("at start", loaded(), resolved())
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        call(sock, 18, 0, 1)  # ApiVersions v0
        assert loaded() == {"kafka.protocol.metadata"}, ("after ApiVersions", loaded())
        assert resolved() == (["ApiVersionsResponse"], [18]), resolved()
        cached = APIS[18].request
        call(sock, 18, 0, 2)
        assert APIS[18].request is cached and vars(APIS[18])["request"] is cached  # kept: an attribute now
        call(sock, 60, 0, 3, b"\\x00\\x00", flexible=True)  # DescribeCluster v0: no authorized operations
        assert "kafka.protocol.admin" in loaded(), ("after DescribeCluster", loaded())
        assert "DescribeClusterResponse" in vars(messages), resolved()
        assert "kafka.protocol.consumer.group" not in loaded()
        # JoinGroup v0: group, session timeout, no member id, protocol type, one protocol with empty metadata
        join = text(b"g") + struct.pack(">i", 10000) + text(b"") + text(b"consumer") + struct.pack(">i", 1)
        answer = call(sock, 11, 0, 4, join + text(b"range") + struct.pack(">i", 0))
        assert struct.unpack(">h", answer[4:6])[0] == 0, answer  # joined: the group APIs' classes serve it
        assert "kafka.protocol.consumer.group" in loaded(), ("after JoinGroup", loaded())
print("ok")
"""


def test_a_started_broker_loads_an_apis_message_classes_only_when_its_first_request_arrives():
    """Nothing resolved while the broker has answered nothing; ApiVersions loads kafka.protocol.metadata (and
    resolves its row once: the next request reads the kept class); an admin API loads kafka.protocol.admin; a
    group API, in a process that deferred kafka.protocol.consumer as the broker program does, its classes."""
    done = _python(FIRST_USE)
    assert (done.returncode, done.stdout.strip()) == (0, "ok"), done.stderr[-3000:]


LAZY_FIRST_USE = """
import struct, sys, threading, time
from broker_sim.lazy_packages import defer_client_packages
defer_client_packages()  # what the broker program does first
import broker_sim.server.broker  # all a start imports
LAZY = ("kafka.protocol.api_message", "kafka.record", "aiokafka.record", "broker_sim.storage.cleaner",
        "kafka.protocol.consumer.fetch", "kafka.protocol.consumer.metadata", "kafka.protocol.consumer.offsets")
assert not [m for m in LAZY if m in sys.modules], [m for m in LAZY if m in sys.modules]

# the coordinators' message classes: built at the first record, one class per name for every reader
from broker_sim.coordinator.group import records as group_records
from broker_sim.coordinator.txn import records as txn_records
from broker_sim.coordinator.txn.state import TxnState
key = group_records.OffsetKey("g", "t", 3)
assert group_records.decode_key(group_records.encode_key(key)) == key
assert "kafka.protocol.schemas" in sys.modules and "kafka.protocol.consumer.fetch" not in sys.modules
from broker_sim.coordinator.group.records import GroupMetadataValue, MemberMetadataRecord
assert GroupMetadataValue is group_records.MESSAGES.GroupMetadataValue
assert MemberMetadataRecord is GroupMetadataValue.MemberMetadata
try:
    group_records.NoSuchMessage
except AttributeError as exc:
    assert "broker_sim.coordinator.group.records" in str(exc) and "NoSuchMessage" in str(exc), exc
else:
    raise AssertionError("an unknown name was answered")
txn = txn_records.StoredTxn(7, 1, 60000, TxnState.ONGOING, frozenset({("t", 0)}), 5, 4)
assert txn_records.decode_value(txn_records.encode_value(txn)) == txn
assert txn_records.decode_key(txn_records.encode_key("tx")) == "tx"

# threads asking together get one build
from broker_sim.coordinator.records import LazyMessages
calls, seen = [], []
def define():
    calls.append(1)
    time.sleep(0.05)
    return {"A": type("A", (), {}), "B": type("B", (), {})}
lazy = LazyMessages(("A", "B"), define)
threads = [threading.Thread(target=lambda: seen.append(lazy.A)) for _ in range(8)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
assert len(calls) == 1 and len({id(cls) for cls in seen}) == 1 and lazy.B.__name__ == "B", (calls, seen)

# control batches: kafka-python's builder and reader, aiokafka's reader for a marker
from broker_sim.storage.txn_index import COMMIT, build_control_batch, control_type
marker = build_control_batch(5, 0, 3, True, 1000)
assert control_type(marker) == COMMIT and "kafka.record" in sys.modules
from broker_sim.replication.partition import _control_marker
assert "aiokafka.record" not in sys.modules
assert _control_marker(marker) == (COMMIT, 3) and "aiokafka.record" in sys.modules

# a compressed batch: the validator binds its decompressors at the first one; a corrupt stream is refused
import kafka.errors as Errors
from broker_sim.storage import validator
from broker_sim.storage.batch import ATTRIBUTES_OFFSET, CRC_OFFSET, HEADER_SIZE
from kafka.record.default_records import DefaultRecordBatchBuilder
from crc32c import crc32c
assert not hasattr(validator, "zstandard")
builder = DefaultRecordBatchBuilder(magic=2, compression_type=4, is_transactional=False, producer_id=-1,
                                    producer_epoch=-1, base_sequence=-1, batch_size=2**20)
for offset in range(20):
    builder.append(offset, timestamp=1000, key=None, value=b"v" * 100, headers=[])
batch = bytes(builder.build())
rules = validator.RecordRules(False, 2**20, 2**24)
assert len(validator.validate_records(batch, rules).records) == len(batch)
corrupt = bytearray(batch)
corrupt[HEADER_SIZE + 4:HEADER_SIZE + 12] = bytes(8)
struct.pack_into(">I", corrupt, CRC_OFFSET, crc32c(bytes(corrupt[ATTRIBUTES_OFFSET:])))
try:
    validator.validate_records(bytes(corrupt), rules)
except Errors.UnknownError as exc:   # Kafka fails a stream it cannot decompress: UNKNOWN_SERVER_ERROR, not retriable
    assert "zstd data is corrupt" in str(exc), exc
else:
    raise AssertionError("a corrupt zstd stream was accepted")
print("ok")
"""


def test_what_a_start_no_longer_imports_loads_at_its_first_use_and_works():
    """In a process deferring as the broker program does: the coordinators' message classes (built once, even
    for threads asking together), kafka-python's and aiokafka's record batches, the validator's decompressors
    load at their first use and do their job (a corrupt zstd stream is still refused as corrupt)."""
    done = _python(LAZY_FIRST_USE)
    assert (done.returncode, done.stdout.strip()) == (0, "ok"), done.stderr[-3000:]
