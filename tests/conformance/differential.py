"""The differential runner: one scenario, sent to Apache Kafka and to broker_sim by the same client, answers compared.

Theory of operation
-------------------
A *scenario* is data: a name and a function ``run(peer) -> answer`` that drives one broker through a ``Peer``
(raw framed requests over ``broker_sim.protocol.client.WireConnection``, or any client given
``peer.bootstrap_servers``) and returns what it saw as plain values. ``Pair.compare(scenario)`` runs it on both
brokers and fails with a field-by-field diff when the answers differ, Kafka's answer shown as the expected one
(Kafka is the oracle: where they differ, broker_sim is wrong unless the docs list the difference).

What may differ is removed before comparing, never compared loosely: ``normalize`` turns a kafka-python response
into dicts and lists and replaces the fields named in ``ignore`` (dotted paths, ``*`` for any key or index, e.g.
``"topics.*.topic_id"``) by ``"<ignored>"``; ``VOLATILE`` lists what is always per-broker (node ids, ports,
cluster ids, throttle times, timestamps). Timing differs too: Kafka answers COORDINATOR_NOT_AVAILABLE,
NOT_LEADER_OR_FOLLOWER or CONCURRENT_TRANSACTIONS for a moment where broker_sim answers at once, so
``Peer.settled`` retries a request while its answer carries a code from ``SETTLING`` (as Kafka's clients do),
bounded by a deadline; a scenario that is about those codes calls ``Peer.call`` instead.

Topic, group and transactional-id names are per scenario and per peer (``peer.name("t")``): Kafka is one node
for the whole session, so names must never collide.
"""
from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from broker_sim.protocol.client import ConnectionClosed, WireConnection

# error codes that mean "not yet", which a client retries: leader/coordinator moves, loading, concurrent txns
SETTLING = frozenset({5, 6, 7, 14, 15, 16, 51})
VOLATILE = ("throttle_time_ms", "cluster_id", "controller_id", "node_id", "leader_id", "brokers", "topic_id",
            "host", "port", "coordinator_key_node_id")
IGNORED = "<ignored>"


@dataclass
class Peer:
    """One broker of the pair: ``kind`` ("pylog" or "kafka"), its address and a connection on demand."""
    kind: str
    bootstrap_servers: str
    server: Any = None
    _connection: WireConnection | None = field(default=None, repr=False)
    _tag: str = field(default_factory=lambda: uuid.uuid4().hex[:8])

    @property
    def host(self) -> str:
        return self.bootstrap_servers.split(",")[0].rsplit(":", 1)[0]

    @property
    def port(self) -> int:
        return int(self.bootstrap_servers.split(",")[0].rsplit(":", 1)[1])

    def name(self, prefix: str) -> str:
        """A topic/group/transactional id no other scenario on this broker uses."""
        return f"{prefix}-{self._tag}-{uuid.uuid4().hex[:6]}"

    def connect(self, timeout_s: float = 10.0) -> WireConnection:
        """A new connection of the caller's own (close it); ``call`` keeps one shared connection instead."""
        return WireConnection.connect(self.host, self.port, timeout_s=timeout_s, client_id="pylog-conformance")

    def call(self, request, timeout_s: float = 15.0):
        """Send ``request`` on the peer's shared connection and return the decoded response; a connection the
        broker closed is opened again next time (and ``ConnectionClosed`` raised now)."""
        if self._connection is None:
            self._connection = self.connect()
        try:
            return self._connection.call(request, timeout_s=timeout_s)
        except (ConnectionClosed, OSError):
            self.close()
            raise

    def settled(self, make_request: Callable[[], Any], *, timeout_s: float = 30.0,
                codes: Iterable[int] = SETTLING):
        """The first answer to ``make_request()`` without a settling error code anywhere in it (or the last
        one at the deadline): what a Kafka client sees once it has retried."""
        codes = frozenset(codes)
        deadline = time.monotonic() + timeout_s
        while True:
            response = self.call(make_request())
            if not (error_codes(response) & codes) or time.monotonic() > deadline:
                return response
            time.sleep(0.1)

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None


def error_codes(response) -> set[int]:
    """Every ``error_code`` anywhere in a response (or its ``to_dict()``)."""
    found: set[int] = set()

    def walk(value):
        if isinstance(value, dict):
            for key, item in value.items():
                if key == "error_code" and isinstance(item, int):
                    found.add(item)
                else:
                    walk(item)
        elif isinstance(value, (list, tuple)):
            for item in value:
                walk(item)

    walk(response.to_dict() if hasattr(response, "to_dict") else response)
    return found


def normalize(value, ignore: Iterable[str] = (), *, volatile: Iterable[str] = VOLATILE):
    """Plain data from a response (``to_dict()``), with the fields at the ``ignore`` paths and every field
    named in ``volatile`` (at any depth) replaced by ``IGNORED``."""
    data = value.to_dict() if hasattr(value, "to_dict") else value
    data = json.loads(json.dumps(data, default=_plain))
    volatile = frozenset(volatile)
    data = _drop_names(data, volatile)
    for path in ignore:
        data = _drop_path(data, path.split("."))
    return data


def _plain(value):
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if hasattr(value, "to_dict"):
        return value.to_dict()
    return repr(value)


def _drop_names(data, names):
    if isinstance(data, dict):
        return {k: (IGNORED if k in names else _drop_names(v, names)) for k, v in data.items()}
    if isinstance(data, list):
        return [_drop_names(v, names) for v in data]
    return data


def _drop_path(data, parts):
    if not parts:
        return IGNORED
    head, rest = parts[0], parts[1:]
    if isinstance(data, dict):
        keys = data.keys() if head == "*" else [head] if head in data else []
        return {k: (_drop_path(v, rest) if k in keys else v) for k, v in data.items()}
    if isinstance(data, list):
        if head == "*":
            return [_drop_path(v, rest) for v in data]
        if head.isdigit() and int(head) < len(data):
            return [_drop_path(v, rest) if i == int(head) else v for i, v in enumerate(data)]
    return data


def diff(expected, actual, path: str = "") -> list[str]:
    """Every place two plain values differ, as ``path: kafka=… pylog=…`` lines."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        lines = []
        for key in sorted(set(expected) | set(actual), key=str):
            where = f"{path}.{key}" if path else str(key)
            if key not in actual:
                lines.append(f"{where}: kafka={expected[key]!r} pylog=(missing)")
            elif key not in expected:
                lines.append(f"{where}: kafka=(missing) pylog={actual[key]!r}")
            else:
                lines += diff(expected[key], actual[key], where)
        return lines
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        lines = []
        for i, (e, a) in enumerate(zip(expected, actual)):
            lines += diff(e, a, f"{path}[{i}]")
        return lines
    return [] if expected == actual else [f"{path or '(answer)'}: kafka={expected!r} pylog={actual!r}"]


@dataclass(frozen=True)
class Scenario:
    """A named scenario: ``run(peer)`` returns the answer to compare (plain data or a response); ``ignore``
    lists dotted paths that may differ (see ``normalize``)."""
    name: str
    run: Callable[[Peer], Any]
    ignore: tuple[str, ...] = ()

    def __str__(self) -> str:
        return self.name


@dataclass
class Pair:
    """broker_sim and Apache Kafka, side by side."""
    pylog: Peer
    kafka: Peer

    @property
    def peers(self) -> tuple[Peer, Peer]:
        return self.kafka, self.pylog

    def answers(self, scenario: Scenario) -> dict[str, Any]:
        """{"kafka": answer, "pylog": answer}, each normalized."""
        return {peer.kind: normalize(scenario.run(peer), scenario.ignore) for peer in self.peers}

    def compare(self, scenario: Scenario) -> Any:
        """Run ``scenario`` on both; fail listing every difference (Kafka's answer is the expected one).
        Returns Kafka's (normalized) answer, so a test can also assert what it is."""
        got = self.answers(scenario)
        lines = diff(got["kafka"], got["pylog"])
        if lines:
            raise AssertionError(f"{scenario.name}: broker_sim differs from Apache Kafka in {len(lines)} place(s):\n"
                                 + "\n".join(lines[:60]))
        return got["kafka"]

    def close(self) -> None:
        for peer in self.peers:
            peer.close()


def create_topic(peer: Peer, prefix: str = "t", partitions: int = 1, configs: dict[str, str] | None = None) -> str:
    """A new topic of ``partitions`` partitions on ``peer`` (its unique name), once its metadata has leaders."""
    from kafka.protocol.admin import CreateTopicsRequest
    from kafka.protocol.metadata import MetadataRequest

    name = peer.name(prefix)
    topic = CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[],
        configs=[CreateTopicsRequest.CreatableTopic.CreatableTopicConfig(name=k, value=v)
                 for k, v in (configs or {}).items()])
    created = peer.call(CreateTopicsRequest[4](topics=[topic], timeout_ms=10_000, validate_only=False))
    if error_codes(created) - {0}:
        raise AssertionError(f"{peer.kind}: creating {name} failed: {created}")
    # a partition without a leader yet answers LEADER_NOT_AVAILABLE (5), a settling code
    peer.settled(lambda: MetadataRequest[8](topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                                            allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
                                            include_topic_authorized_operations=False))
    return name
