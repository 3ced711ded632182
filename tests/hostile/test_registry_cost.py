"""Hostile registry clients that make the broker compute or buffer (issue 44, finding 4): transitive
compatibility checks of large versions, several clients checking at once, invalid schemas that are slow to
reject, and GET /schemas from clients that never read the answer.

Each test runs a ``Probe`` on other connections while it attacks: a Kafka ApiVersions request and a registry
GET /subjects, one after the other, each timed (the worst during the attack must stay under 0.5 s; the same
probe's worst before the attack is the control).  The broker must answer the attack itself within a bound,
keep its RSS bounded where the attack is about memory, still serve Kafka clients, and restart.
"""
from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request

from kafka.protocol.metadata import ApiVersionsRequest

from client_helpers import create_topic, free_port
from hostile import assert_serving, rss_bytes
from kafka_wire import WireClient, produce_request, record_batch
from broker_sim.testing.waiting import wait_until

LATENCY_BOUND_S = 0.5  # what an attack may add to the control's worst round trip, measured in the same test
MB = 1 << 20
OPERATION_TIMEOUT = 50002
INVALID_RECORD = 87


class Registry:
    def __init__(self, port: int) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"

    def call(self, method: str, path: str, body: dict | None = None, timeout: float = 120) -> tuple[int, object]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")


    def wait_ready(self, timeout: float = 20) -> None:
        """Until the registry answers (a broker's Kafka port can accept before its registry listens)."""
        def answers() -> bool:
            try:
                return self.call("GET", "/subjects")[0] == 200
            except OSError:
                return False
        wait_until(answers, timeout_s=timeout, what=f"the registry at {self.url}")


class Probe(threading.Thread):
    """ApiVersions on a Kafka connection and GET /subjects on the registry, in turn; ``worst()`` is the slowest
    answer since the last ``reset()``, counting one still unanswered for as long as it has waited."""

    def __init__(self, bootstrap: str, registry: Registry) -> None:
        super().__init__(daemon=True)
        self.client = WireClient(bootstrap, timeout=120)
        self.registry = registry
        self.samples: list[float] = []
        self.errors: list[str] = []
        self.waiting_since: float | None = None
        self._done = threading.Event()

    def _timed(self, call) -> None:
        self.waiting_since = start = time.monotonic()
        try:
            call()
        except Exception as exc:  # noqa: BLE001 - reported by the test
            self.errors.append(repr(exc))
        self.waiting_since = None
        self.samples.append(time.monotonic() - start)

    def run(self) -> None:
        while not self._done.is_set():
            self._timed(lambda: self.client.call(ApiVersionsRequest[0]()))
            self._timed(lambda: self.registry.call("GET", "/subjects", timeout=120))
            time.sleep(0.02)

    def reset(self) -> None:
        self.samples = []

    def worst(self) -> float:
        since = self.waiting_since
        return max(self.samples + [time.monotonic() - since if since is not None else 0.0])

    def stop(self) -> None:
        self._done.set()
        self.join(130)
        self.client.close()


def _registry_broker(hostile_broker, **config):
    port = free_port()
    broker = hostile_broker({"schema.registry.listeners": f"http://127.0.0.1:{port}",
                             **{k.replace("_", "."): v for k, v in config.items()}})
    registry = Registry(port)
    registry.wait_ready()
    return broker, registry


def _probe(broker, registry: Registry) -> tuple[Probe, float]:
    """A running probe and its control: the worst answer over a second before any attack."""
    probe = Probe(broker.bootstrap_servers, registry)
    probe.start()
    time.sleep(1.0)
    control = probe.worst()
    probe.reset()
    return probe, control


def _assert_quick(probe: Probe, control: float, what: str) -> None:
    worst = probe.worst()
    assert len(probe.samples) >= 4, f"the probe got {len(probe.samples)} answers during {what}"
    assert worst < LATENCY_BOUND_S + control, f"another client waited {worst:.2f} s during {what} (control {control:.3f} s)"
    assert not probe.errors, probe.errors[:3]


def big_avro(fields: int, default: str) -> str:
    """A record of many fields: the avro package's compatibility check is quadratic in them."""
    return json.dumps({"type": "record", "name": "Big", "fields": [
        {"name": f"f{i}_{'x' * 30}", "type": "string", "default": default} for i in range(fields)]})


def test_transitive_checks_of_large_versions_leave_the_loop_free_and_stop_at_their_deadline(hostile_broker):
    broker, registry = _registry_broker(hostile_broker, schema_registry_compute_timeout_ms="3000")
    assert registry.call("PUT", "/config/big", {"compatibility": "NONE"})[0] == 200
    for i in range(3):
        assert registry.call("POST", "/subjects/big/versions", {"schema": big_avro(6000, f"v{i}")})[0] == 200
    assert registry.call("PUT", "/config/big", {"compatibility": "FULL_TRANSITIVE"})[0] == 200
    probe, control = _probe(broker, registry)

    answers: list[tuple[int, object, float]] = []

    def attack(path: str, default: str) -> None:
        start = time.monotonic()
        status, body = registry.call("POST", path, {"schema": big_avro(6000, default)})
        answers.append((status, body, time.monotonic() - start))

    # one registration and three read-only tests at once: each would check three ~1 MB versions
    attackers = [threading.Thread(target=attack, args=("/subjects/big/versions", "new"))]
    attackers += [threading.Thread(target=attack, args=("/compatibility/subjects/big/versions", f"t{i}"))
                  for i in range(3)]
    for thread in attackers:
        thread.start()
    for thread in attackers:
        thread.join(120)
    _assert_quick(probe, control, "four transitive checks of 1 MB versions")
    probe.stop()
    assert len(answers) == 4
    for status, body, took in answers:
        assert (status, body["error_code"]) == (500, OPERATION_TIMEOUT), (status, body)
        assert took < 4 * 3 + 10, f"an attack was answered after {took:.1f} s (four 3 s deadlines in turn)"
    assert registry.call("GET", "/subjects/big/versions") == (200, [1, 2, 3])  # nothing was registered
    small = json.dumps({"type": "record", "name": "Small", "fields": []})
    assert registry.call("POST", "/subjects/small/versions", {"schema": small})[0] == 200  # the lane serves
    assert_serving(broker)
    hostile_broker.restart(broker)


def _stalled_get(port: int, path: str) -> socket.socket:
    """A client that sends one GET and never reads the answer (a small receive buffer, so the kernel holds
    little of it)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    return sock


def test_get_schemas_to_clients_that_never_read_holds_a_slice_each_not_the_answer(hostile_broker):
    broker, registry = _registry_broker(hostile_broker)
    for i in range(40):  # a 10 MB answer: every schema's text
        schema = json.dumps({"type": "record", "name": f"S{i}", "doc": "d" * 250_000, "fields": []})
        assert registry.call("POST", f"/subjects/s{i}/versions", {"schema": schema})[0] == 200
    status, everything = registry.call("GET", "/schemas")
    assert status == 200 and len(everything) == 40
    assert [s["subject"] for s in everything] == sorted(f"s{i}" for i in range(40))
    probe, control = _probe(broker, registry)
    before = rss_bytes(broker.process.pid)

    stalled = [_stalled_get(registry.port, "/schemas") for _ in range(20)]
    time.sleep(3.0)  # every answer started; each client's share stopped at what it would not read
    grown = rss_bytes(broker.process.pid) - before
    _assert_quick(probe, control, "20 GET /schemas that are never read")
    assert grown < 60 * MB, f"RSS grew {grown / MB:.0f} MB for 20 unread 10 MB answers"
    status, again = registry.call("GET", "/schemas")  # a reading client meanwhile gets all of it
    assert status == 200 and again == everything
    probe.stop()
    for sock in stalled:
        sock.close()
    assert_serving(broker)
    hostile_broker.restart(broker)


def _any_of(branches: int, kind: str) -> str:
    """A JSON Schema whose compatibility check pairs every branch with every branch."""
    return json.dumps({"anyOf": [{"type": "object", "properties": {f"p{i}": {"type": kind}}, "required": [f"p{i}"]}
                                 for i in range(branches)]})


def _invalid_proto(i: int) -> str:
    """~16 KB of .proto that the parser reads to the end before refusing it."""
    return 'syntax = "proto3";\nmessage A%d {\n' % i + "".join(
        f"  int32 f{n} = {n + 1};\n" for n in range(800)) + "  int32 = ;\n}\n"


def test_small_schemas_that_are_slow_to_check_or_refuse_leave_the_loop_free(hostile_broker):
    broker, registry = _registry_broker(hostile_broker)
    assert registry.call("POST", "/subjects/json/versions",
                         {"schema": _any_of(150, "string"), "schemaType": "JSON"})[0] == 200
    probe, control = _probe(broker, registry)
    answers: list[tuple[int, object]] = []

    def any_of_client() -> None:
        for _ in range(3):
            answers.append(registry.call("POST", "/compatibility/subjects/json/versions/latest",
                                         {"schema": _any_of(150, "integer"), "schemaType": "JSON"}))

    def proto_client(k: int) -> None:
        for i in range(10):
            answers.append(registry.call("POST", f"/subjects/p{k}/versions",
                                         {"schema": _invalid_proto(i), "schemaType": "PROTOBUF"}))

    clients = [threading.Thread(target=any_of_client) for _ in range(4)]
    clients += [threading.Thread(target=proto_client, args=(k,)) for k in range(4)]
    for thread in clients:
        thread.start()
    for thread in clients:
        thread.join(120)
    _assert_quick(probe, control, "anyOf checks and invalid .proto files from 8 clients")
    probe.stop()
    assert len(answers) == 4 * 3 + 4 * 10
    assert sorted({(status, body.get("is_compatible", body.get("error_code"))) for status, body in answers}) == \
        [(200, False), (422, 42201)]
    assert_serving(broker)
    hostile_broker.restart(broker)


def test_a_produce_of_records_that_all_fail_validation_is_refused_without_holding_the_loop(hostile_broker):
    from kafka.protocol.producer import ProduceRequest

    broker, registry = _registry_broker(hostile_broker)
    create_topic(broker.bootstrap_servers, "validated", partitions=4,
                 configs={"confluent.value.schema.validation": "true"})
    unframed = record_batch([b"v%d" % i for i in range(60_000)], key=None)  # ~0.9 MB, every record fails
    assert 800_000 < len(unframed) < 1_000_000
    data = ProduceRequest.TopicProduceData
    request = ProduceRequest[9](transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[data(
        name="validated", partition_data=[data.PartitionProduceData(index=p, records=unframed) for p in range(4)])])
    probe, control = _probe(broker, registry)
    with WireClient(broker.bootstrap_servers, timeout=60) as client:
        for _ in range(3):
            for answer in client.call(request).responses[0].partition_responses:
                assert answer.error_code == INVALID_RECORD
                assert answer.error_message.startswith("One or more records have been rejected due to 60000 "
                                                       "record errors in total")
                assert len(answer.record_errors) == 1000  # the first ones named, not 60,000 messages
                assert answer.record_errors[0].batch_index == 0
    _assert_quick(probe, control, "produces of 4 x 60,000 records that fail schema validation")
    probe.stop()
    assert_serving(broker)
    hostile_broker.restart(broker)
