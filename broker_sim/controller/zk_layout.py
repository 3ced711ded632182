"""The ZooKeeper layout of a pylog cluster: every znode path and payload codec.

Theory of operation: a pylog cluster keeps its shared state in ZooKeeper
exactly where a ZooKeeper-era Kafka cluster keeps it, in Kafka's own JSON
(field names checked against Kafka's ``core/.../kafka/zk/ZkData.scala``), so
the tree reads like a Kafka cluster's to anyone who knows one.  This module is
the only place that spells a path or encodes/decodes a payload; the store, the
controller and the producer-id manager call it.  ``schemas/zookeeper-layout.json``
documents each znode (path, ephemeral or not, writer, JSON schema).

Decoders take bytes (and the znode version where the decoded form carries it)
and return the shared immutable types of ``cluster_state``; a payload that does
not parse raises ``LayoutError`` naming the znode.

pylog's additions live under ``/pylog``: ``/pylog/controlled_shutdown/<id>``
(Kafka's brokers ask the controller for a controlled shutdown with the
ControlledShutdown RPC; pylog's brokers create this znode and wait for the
controller to delete it) and ``/pylog/inter_broker_secret`` (what brokers prove
to each other that they are brokers, see ``server/inter_broker.py``; Kafka uses
the authenticated inter-broker principal).
"""
from __future__ import annotations

import base64
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Iterable

from broker_sim.controller.cluster_state import BrokerEndpoint, PartitionState

# --- paths (Kafka's ZkData names in comments) ---
CLUSTER_ID = "/cluster/id"                              # ClusterIdZNode
BROKER_IDS = "/brokers/ids"                             # BrokerIdsZNode
TOPICS = "/brokers/topics"                              # TopicsZNode
CONTROLLER = "/controller"                              # ControllerZNode
CONTROLLER_EPOCH = "/controller_epoch"                  # ControllerEpochZNode
CONFIG_TOPICS = "/config/topics"                        # ConfigEntityTypeZNode("topics")
DELETE_TOPICS = "/admin/delete_topics"                  # DeleteTopicsZNode
REASSIGN_PARTITIONS = "/admin/reassign_partitions"      # ReassignPartitionsZNode
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"    # IsrChangeNotificationZNode
ISR_CHANGE_PREFIX = "isr_change_"                       # IsrChangeNotificationSequenceZNode
PRODUCER_ID_BLOCK = "/latest_producer_id_block"         # ProducerIdBlockZNode
CONTROLLED_SHUTDOWN = "/pylog/controlled_shutdown"      # pylog addition (Kafka: ControlledShutdown RPC)
INTER_BROKER_SECRET = "/pylog/inter_broker_secret"      # pylog addition (Kafka: the inter-broker principal)

# persistent parents every participant may assume (Kafka's KafkaZkClient.createTopLevelPaths)
PERSISTENT_PATHS = (BROKER_IDS, TOPICS, CONFIG_TOPICS, DELETE_TOPICS,
                    ISR_CHANGE_NOTIFICATION, CONTROLLED_SHUTDOWN)

BROKER_REGISTRATION_VERSION = 5
CONTROLLER_VERSION = 2
TOPIC_ASSIGNMENT_VERSION = 3
PARTITION_STATE_VERSION = 1
TOPIC_CONFIG_VERSION = 1
ISR_CHANGE_VERSION = 1
PRODUCER_ID_BLOCK_VERSION = 1
CONTROLLED_SHUTDOWN_VERSION = 1
INTER_BROKER_SECRET_VERSION = 1
REASSIGN_PARTITIONS_VERSION = 1


class LayoutError(ValueError):
    """A znode payload that does not decode."""


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{TOPICS}/{topic}/partitions"


def partition_path(topic: str, index: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{index}"


def partition_state_path(topic: str, index: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{index}/state"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{topic}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


def isr_change_prefix_path() -> str:
    """Path to hand to a sequential create of an ISR change notification."""
    return f"{ISR_CHANGE_NOTIFICATION}/{ISR_CHANGE_PREFIX}"


def isr_change_path(child: str) -> str:
    return f"{ISR_CHANGE_NOTIFICATION}/{child}"


def controlled_shutdown_path(broker_id: int) -> str:
    return f"{CONTROLLED_SHUTDOWN}/{broker_id}"


def _now_ms() -> int:
    return int(time.time() * 1000)


def _dump(obj: dict) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _load(data: bytes | None, what: str) -> dict:
    try:
        obj = json.loads(data or b"")
    except ValueError as exc:
        raise LayoutError(f"{what}: payload is not JSON ({exc}): {data[:200]!r}") from None
    if not isinstance(obj, dict):
        raise LayoutError(f"{what}: payload is not a JSON object: {data[:200]!r}")
    return obj


def _field(obj: dict, key: str, what: str):
    try:
        return obj[key]
    except KeyError:
        raise LayoutError(f"{what}: payload lacks {key!r}: {obj}") from None


# --- /cluster/id ---

def encode_cluster_id(cluster_id: str) -> bytes:
    return _dump({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    return str(_field(_load(data, CLUSTER_ID), "id", CLUSTER_ID))


# --- /brokers/ids/<id> ---

def encode_broker(endpoint: BrokerEndpoint, timestamp_ms: int | None = None) -> bytes:
    """Kafka's registration (version 4): every advertised listener in ``endpoints`` with its protocol in
    ``listener_security_protocol_map``; host/port name the endpoint other brokers use.  pylog adds
    ``pylog_schema_registry_url`` when the broker serves a Schema Registry (Kafka ignores unknown fields)."""
    listeners = endpoint.listeners or (("PLAINTEXT", "PLAINTEXT", endpoint.host, endpoint.port),)
    registry = {"pylog_schema_registry_url": endpoint.schema_registry_url} if endpoint.schema_registry_url else {}
    return _dump({
        "version": BROKER_REGISTRATION_VERSION,
        "host": endpoint.host,
        "port": endpoint.port,
        "endpoints": [f"{name}://{_address(host, port)}" for name, _, host, port in listeners],
        "listener_security_protocol_map": {name: protocol for name, protocol, _, _ in listeners},
        "jmx_port": -1,
        "timestamp": str(_now_ms() if timestamp_ms is None else timestamp_ms),
        "rack": endpoint.rack,
        "features": {},
        **registry,
    })


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def decode_broker(broker_id: int, data: bytes) -> BrokerEndpoint:
    """A registration: every endpoint as a listener; host/port from the payload, else the first PLAINTEXT one."""
    what = broker_path(broker_id)
    obj = _load(data, what)
    protocols = obj.get("listener_security_protocol_map") or {"PLAINTEXT": "PLAINTEXT"}
    listeners = []
    for listener in obj.get("endpoints") or ():
        name, sep, address = str(listener).partition("://")
        host, colon, port = address.rpartition(":")
        if sep and colon and port.isdigit():
            listeners.append((name, str(protocols.get(name, name)), host.strip("[]"), int(port)))
    host, port = obj.get("host"), obj.get("port")
    if not isinstance(host, str) or not host or not isinstance(port, int) or port < 0:
        plain = [entry for entry in listeners if entry[1] == "PLAINTEXT"] or listeners
        if not plain:
            raise LayoutError(f"{what}: no host/port and no endpoint")
        host, port = plain[0][2], plain[0][3]
    registry = obj.get("pylog_schema_registry_url")
    return BrokerEndpoint(broker_id, host, port, obj.get("rack"), tuple(listeners),
                          registry if isinstance(registry, str) and registry else None)


# --- /controller and /controller_epoch ---

def encode_controller(broker_id: int, timestamp_ms: int | None = None) -> bytes:
    return _dump({"version": CONTROLLER_VERSION, "brokerid": broker_id,
                  "timestamp": str(_now_ms() if timestamp_ms is None else timestamp_ms),
                  "kraftControllerEpoch": -1})


def decode_controller(data: bytes) -> int:
    return int(_field(_load(data, CONTROLLER), "brokerid", CONTROLLER))


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes) -> int:
    try:
        return int(data.decode())
    except (ValueError, AttributeError):
        raise LayoutError(f"{CONTROLLER_EPOCH}: payload is not an integer: {data!r}") from None


# --- /brokers/topics/<t> ---

def encode_topic_id(topic_id: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()


def decode_topic_id(text: str) -> uuid.UUID:
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise LayoutError(f"topic id {text!r} is not 16 bytes of base64")
    return uuid.UUID(bytes=raw)


@dataclass(frozen=True)
class TopicAssignment:
    """Decoded ``/brokers/topics/<t>``: topic id and replicas per partition (preferred leader first).

    During a reassignment (KIP-455) a partition's ``replicas`` is the full set RS = origin + target, and
    ``adding`` / ``removing`` hold its AR = RS - origin and RR = RS - target (partitions not being
    reassigned are absent from both)."""
    topic_id: uuid.UUID | None
    replicas: tuple[tuple[int, ...], ...]
    adding: dict[int, tuple[int, ...]] = field(default_factory=dict)
    removing: dict[int, tuple[int, ...]] = field(default_factory=dict)


def encode_topic_assignment(topic_id: uuid.UUID, replicas: Iterable[Iterable[int]],
                            adding: dict[int, Iterable[int]] | None = None,
                            removing: dict[int, Iterable[int]] | None = None) -> bytes:
    return _dump({
        "version": TOPIC_ASSIGNMENT_VERSION,
        "topic_id": encode_topic_id(topic_id),
        "partitions": {str(i): list(r) for i, r in enumerate(replicas)},
        "adding_replicas": {str(i): list(r) for i, r in sorted((adding or {}).items()) if r},
        "removing_replicas": {str(i): list(r) for i, r in sorted((removing or {}).items()) if r},
    })


def _replica_map(obj: dict, key: str, what: str, count: int) -> dict[int, tuple[int, ...]]:
    raw = obj.get(key) or {}
    if not isinstance(raw, dict):
        raise LayoutError(f"{what}: {key} is not an object: {raw!r}")
    found = {}
    for index, brokers in raw.items():
        if not str(index).isdigit() or int(index) >= count or not isinstance(brokers, list):
            raise LayoutError(f"{what}: {key} entry {index!r}: {brokers!r} is not a partition's broker list")
        if brokers:
            found[int(index)] = tuple(int(b) for b in brokers)
    return found


def decode_topic_assignment(topic: str, data: bytes) -> TopicAssignment:
    what = topic_path(topic)
    obj = _load(data, what)
    partitions = _field(obj, "partitions", what)
    indexes = sorted(int(p) for p in partitions)
    if indexes != list(range(len(indexes))):
        raise LayoutError(f"{what}: partitions {indexes} are not 0..{len(indexes) - 1}")
    topic_id = decode_topic_id(obj["topic_id"]) if obj.get("topic_id") else None
    return TopicAssignment(topic_id, tuple(tuple(int(b) for b in partitions[str(i)]) for i in indexes),
                           _replica_map(obj, "adding_replicas", what, len(indexes)),
                           _replica_map(obj, "removing_replicas", what, len(indexes)))


# --- /brokers/topics/<t>/partitions/<p>/state ---

def encode_partition_state(state: PartitionState) -> bytes:
    return _dump({"controller_epoch": state.controller_epoch, "leader": state.leader,
                  "version": PARTITION_STATE_VERSION, "leader_epoch": state.leader_epoch,
                  "isr": list(state.isr)})


def decode_partition_state(data: bytes, zk_version: int, what: str = "partition state") -> PartitionState:
    obj = _load(data, what)
    return PartitionState(int(_field(obj, "leader", what)), int(_field(obj, "leader_epoch", what)),
                          tuple(int(b) for b in _field(obj, "isr", what)),
                          int(_field(obj, "controller_epoch", what)), zk_version)


# --- /config/topics/<t> (Kafka's /config/changes notifications are not written: brokers watch these) ---

def encode_topic_config(configs: dict[str, str]) -> bytes:
    return _dump({"version": TOPIC_CONFIG_VERSION, "config": dict(configs)})


def decode_topic_config(data: bytes | None) -> dict[str, str]:
    if not data:
        return {}
    config = _load(data, CONFIG_TOPICS).get("config") or {}
    return {str(k): str(v) for k, v in config.items()}


# --- /isr_change_notification/isr_change_<seq> ---

def encode_isr_change(partitions: Iterable[tuple[str, int]]) -> bytes:
    return _dump({"version": ISR_CHANGE_VERSION,
                  "partitions": [{"topic": t, "partition": p} for t, p in sorted(set(partitions))]})


def decode_isr_change(data: bytes) -> set[tuple[str, int]]:
    obj = _load(data, ISR_CHANGE_NOTIFICATION)
    return {(str(p["topic"]), int(p["partition"])) for p in _field(obj, "partitions", ISR_CHANGE_NOTIFICATION)}


# --- /latest_producer_id_block ---

@dataclass(frozen=True)
class ProducerIdBlock:
    broker: int
    block_start: int
    block_end: int  # inclusive, as Kafka's lastProducerId


def encode_producer_id_block(block: ProducerIdBlock) -> bytes:
    return _dump({"version": PRODUCER_ID_BLOCK_VERSION, "broker": block.broker,
                  "block_start": str(block.block_start), "block_end": str(block.block_end)})


def decode_producer_id_block(data: bytes) -> ProducerIdBlock:
    obj = _load(data, PRODUCER_ID_BLOCK)
    return ProducerIdBlock(int(_field(obj, "broker", PRODUCER_ID_BLOCK)),
                           int(_field(obj, "block_start", PRODUCER_ID_BLOCK)),
                           int(_field(obj, "block_end", PRODUCER_ID_BLOCK)))


# --- /pylog/controlled_shutdown/<id> ---

def encode_controlled_shutdown(broker_id: int, timestamp_ms: int | None = None) -> bytes:
    return _dump({"version": CONTROLLED_SHUTDOWN_VERSION, "broker": broker_id,
                  "timestamp": str(_now_ms() if timestamp_ms is None else timestamp_ms)})


def decode_controlled_shutdown(data: bytes) -> int:
    return int(_field(_load(data, CONTROLLED_SHUTDOWN), "broker", CONTROLLED_SHUTDOWN))


# --- /pylog/inter_broker_secret ---

def encode_inter_broker_secret(secret: str) -> bytes:
    return _dump({"version": INTER_BROKER_SECRET_VERSION, "secret": secret})


def decode_inter_broker_secret(data: bytes) -> str:
    secret = _field(_load(data, INTER_BROKER_SECRET), "secret", INTER_BROKER_SECRET)
    if not isinstance(secret, str) or not secret:
        raise LayoutError(f"{INTER_BROKER_SECRET}: secret must be a non-empty string")
    return secret


# --- /admin/reassign_partitions (the pre-KIP-455 way to ask for a reassignment; the controller removes each
# partition from it once its reassignment completed, and the znode once it is empty) ---

def encode_reassign_partitions(targets: dict[tuple[str, int], Iterable[int]]) -> bytes:
    return _dump({"version": REASSIGN_PARTITIONS_VERSION,
                  "partitions": [{"topic": t, "partition": p, "replicas": list(r)}
                                 for (t, p), r in sorted(targets.items())]})


def decode_reassign_partitions(data: bytes) -> dict[tuple[str, int], tuple[int, ...]]:
    obj = _load(data, REASSIGN_PARTITIONS)
    entries = _field(obj, "partitions", REASSIGN_PARTITIONS)
    if not isinstance(entries, list):
        raise LayoutError(f"{REASSIGN_PARTITIONS}: partitions is not a list")
    targets = {}
    for entry in entries:
        try:
            targets[(str(entry["topic"]), int(entry["partition"]))] = tuple(int(b) for b in entry["replicas"])
        except (KeyError, TypeError, ValueError):
            raise LayoutError(f"{REASSIGN_PARTITIONS}: entry {entry!r} lacks topic, partition or replicas") from None
    return targets
