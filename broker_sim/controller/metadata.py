"""Single-node metadata store: the topics this broker hosts, persisted in its data dir.

Theory of operation: the broker's view of the cluster when it runs alone (no
ZooKeeper).  Two files in the data directory hold it:

* ``meta.properties`` — Kafka's own file (``version``, ``broker.id``,
  ``cluster.id``); a data dir written by one broker id refuses to start as
  another, as Kafka does.
* ``pylog-topics.json`` — names, topic ids, partition counts and per-topic
  config overrides; its format is ``schemas/topic-metadata.json``.  Written
  atomically (temp file, fsync, rename) on every change, so a SIGKILL leaves
  either the old or the new version.

The store only records decisions; creating partition directories is the log
manager's job.  Every mutator validates first and raises ``MetadataError``
carrying the Kafka error class the handler turns into an error code.

Persist before publishing: a mutator writes the whole new file first and
changes the in-memory topics only once that write (and its fsync) succeeded,
so a full or failing disk (ENOSPC, EFBIG, EIO) answers KAFKA_STORAGE_ERROR and
leaves no ghost: what clients see is always what the next start will load.
A topic being created in several steps (its partition directories first) is
``reserve``d meanwhile: its name and partitions count as taken.

A topics file that cannot be read at start is moved aside
(``pylog-topics.json.corrupt``) and the topics are rebuilt from the partition
directories (``<topic>-<n>``; configs and topic ids are lost, internal topics
get back ``cleanup.policy=compact``), so the broker serves the data it has.
"""
from __future__ import annotations

import base64
import json
import logging
import os
import re
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path

import kafka.errors as Errors

from broker_sim.config import ConfigError, validate_topic_configs

log = logging.getLogger(__name__)
TOPICS_FILE = "pylog-topics.json"
_PARTITION_DIR = re.compile(r"(.+)-(0|[1-9][0-9]{0,8})")
_INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")


def is_internal_topic(name: str) -> bool:
    """Kafka's ``Topic.isInternal``: by name, whether the topic exists or not (Kafka 4 counts share groups' state
    topic too, which broker_sim never creates)."""
    return name in _INTERNAL_TOPICS or name == "__share_group_state"
FORMAT_VERSION = 1
MAX_TOPIC_NAME = 249
MAX_PARTITIONS = 10000
_LEGAL_NAME = re.compile(r"[a-zA-Z0-9._-]+")


class MetadataError(Exception):
    def __init__(self, error: type[Errors.KafkaError], message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


@dataclass
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)
    internal: bool = False
    # replica assignment: broker ids per partition, preferred leader first; empty on a single node
    # (every partition lives on this broker alone).  In a cluster it comes from /brokers/topics/<t>.
    replicas: list[list[int]] = field(default_factory=list)

    def replicas_of(self, index: int, local_broker: int) -> list[int]:
        return list(self.replicas[index]) if index < len(self.replicas) else [local_broker]

    def to_json(self) -> dict:
        return {"name": self.name, "topic_id": str(self.topic_id), "partitions": self.partitions,
                "configs": self.configs, "internal": self.internal}

    @classmethod
    def from_json(cls, obj: dict) -> "TopicInfo":
        return cls(obj["name"], uuid.UUID(obj["topic_id"]), int(obj["partitions"]),
                   dict(obj.get("configs", {})), bool(obj.get("internal", False)))


def validate_topic_name(name: str | None) -> None:
    """Kafka's ``Topic.validate``: legal characters only (a full match), at most 249 of them, not "." or "..".

    Raises MetadataError(INVALID_TOPIC_EXCEPTION) with Kafka's message.  The whole
    name must match: a pattern anchored with ``$`` would let "abc\\n" through.
    """
    if not name:
        raise MetadataError(Errors.InvalidTopicError, "Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise MetadataError(Errors.InvalidTopicError, 'Topic name cannot be "." or ".."')
    if len(name) > MAX_TOPIC_NAME:
        raise MetadataError(Errors.InvalidTopicError,
                            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME} characters, "
                            f"topic name: {name}")
    if not _LEGAL_NAME.fullmatch(name):
        raise MetadataError(Errors.InvalidTopicError,
                            f"Topic name {name!r} is illegal, it contains a character other than "
                            "ASCII alphanumerics, '.', '_' and '-'")


def topic_name_problem(name: str) -> str | None:
    """Kafka 4.1's ``Topic.validate`` message for an illegal topic name, None for a legal one (its length is
    Java's: UTF-16 code units), as DescribeProducers answers it; ``validate_topic_name`` keeps the wording
    CreateTopics answers."""
    if not name:
        return "Topic name is invalid: the empty string is not allowed"
    if name in (".", ".."):
        return f"Topic name is invalid: '{name}' is not allowed"
    if len(name.encode("utf-16-le")) // 2 > MAX_TOPIC_NAME:
        return f"Topic name is invalid: the length of '{name}' is longer than the max allowed length {MAX_TOPIC_NAME}"
    if not _LEGAL_NAME.fullmatch(name):
        return (f"Topic name is invalid: '{name}' contains one or more characters other than ASCII alphanumerics, "
                "'.', '_' and '-'")
    return None


def check_topic_configs(configs: dict[str, str]) -> None:
    """Topic config overrides, validated; a bad one is a MetadataError (INVALID_CONFIG) naming key and value."""
    try:
        validate_topic_configs(configs)
    except ConfigError as exc:
        raise MetadataError(Errors.InvalidConfigurationError, str(exc)) from None


def _read_properties(path: Path) -> dict[str, str]:
    props = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            props[key.strip()] = value.strip()
    return props


def write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def new_cluster_id() -> str:
    """A Kafka-style cluster id: a random UUID in URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


class MetadataStore:
    """Topics of a single-node broker.  Called from the broker's event loop only."""

    def __init__(self, data_dir: str | os.PathLike, broker_id: int, cluster_id: str = "") -> None:
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.broker_id = broker_id
        self.cluster_id = self._load_meta_properties(cluster_id)
        self.topics: dict[str, TopicInfo] = {}
        self.pending: dict[str, int] = {}  # topics being created: name -> partitions
        path = self.data_dir / TOPICS_FILE
        if path.exists():
            try:
                doc = json.loads(path.read_text())
                if doc.get("version") != FORMAT_VERSION:
                    raise RuntimeError(f"{path}: unsupported format version {doc.get('version')!r}")
                for obj in doc["topics"]:
                    info = TopicInfo.from_json(obj)
                    self.topics[info.name] = info
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
                self.topics = self._rebuild_from_directories(path, exc)
        self.topics_by_id = {t.topic_id: t for t in self.topics.values()}

    def _rebuild_from_directories(self, path: Path, exc: Exception) -> dict[str, TopicInfo]:
        aside = path.with_name(path.name + ".corrupt")
        os.replace(path, aside)
        counts: dict[str, int] = {}
        for entry in self.data_dir.iterdir():
            match = _PARTITION_DIR.fullmatch(entry.name)
            if match and entry.is_dir():
                counts[match[1]] = max(counts.get(match[1], 0), int(match[2]) + 1)
        topics = {}
        for name, partitions in sorted(counts.items()):
            internal = name in _INTERNAL_TOPICS
            topics[name] = TopicInfo(name, uuid.uuid4(), partitions,
                                     {"cleanup.policy": "compact"} if internal else {}, internal)
        log.error("%s is unreadable (%s); moved to %s and rebuilt %d topics from the partition directories "
                  "(their config overrides are lost): %s", path, exc, aside.name, len(topics), ", ".join(topics))
        self._persist(topics)
        return topics

    def _load_meta_properties(self, cluster_id: str) -> str:
        path = self.data_dir / "meta.properties"
        if path.exists():
            props = _read_properties(path)
            stored = int(props.get("broker.id", props.get("node.id", "-1")))
            if stored != self.broker_id:
                raise RuntimeError(
                    f"{path} belongs to broker.id {stored}, not {self.broker_id}: "
                    "use that id or another --data-dir")
            if cluster_id and props.get("cluster.id") != cluster_id:
                raise RuntimeError(f"{path} is for cluster.id {props.get('cluster.id')}, not {cluster_id}")
            return props["cluster.id"]
        cluster_id = cluster_id or new_cluster_id()
        text = f"version=1\nbroker.id={self.broker_id}\ncluster.id={cluster_id}\n"
        write_atomically(path, text.encode())
        return cluster_id

    def _persist(self, topics: dict[str, TopicInfo]) -> None:
        """Write ``topics`` as the topics file; raises MetadataError(KAFKA_STORAGE_ERROR) when the disk fails."""
        doc = {"version": FORMAT_VERSION, "topics": [t.to_json() for t in topics.values()]}
        path = self.data_dir / TOPICS_FILE
        try:
            write_atomically(path, json.dumps(doc, indent=1, sort_keys=True).encode())
        except OSError as exc:
            path.with_name(path.name + ".tmp").unlink(missing_ok=True)
            raise MetadataError(Errors.KafkaStorageError, f"writing {path} failed: {exc}") from exc

    def _publish(self, topics: dict[str, TopicInfo]) -> None:
        self._persist(topics)
        self.topics = topics
        self.topics_by_id = {t.topic_id: t for t in topics.values()}

    @property
    def partition_count(self) -> int:
        """Partitions of every topic, those being created included."""
        return sum(t.partitions for t in self.topics.values()) + sum(self.pending.values())

    def reserve(self, name: str, partitions: int) -> None:
        """Count ``name`` as taken while its creation is under way (``release`` ends that)."""
        self.pending[name] = partitions

    def release(self, name: str) -> None:
        self.pending.pop(name, None)

    def check_new_topic(self, name: str, partitions: int, configs: dict[str, str]) -> None:
        validate_topic_name(name)
        if name in self.topics or name in self.pending:
            raise MetadataError(Errors.TopicAlreadyExistsError, f"topic {name!r} already exists")
        collides = [t for t in self.topics if t.replace(".", "_") == name.replace(".", "_")]
        if collides:
            raise MetadataError(Errors.InvalidTopicError,
                                f"Topic {name!r} collides with existing topic: {collides[0]}")
        if not 1 <= partitions <= MAX_PARTITIONS:
            raise MetadataError(Errors.InvalidPartitionsError,
                                f"number of partitions {partitions} outside [1, {MAX_PARTITIONS}]")
        check_topic_configs(configs)

    def create_topic(self, name: str, partitions: int, configs: dict[str, str] | None = None,
                     internal: bool = False) -> TopicInfo:
        configs = dict(configs or {})
        self.check_new_topic(name, partitions, configs)
        info = TopicInfo(name, uuid.uuid4(), partitions, configs, internal)
        self.add_topic(info)
        return info

    def add_topic(self, info: TopicInfo) -> None:
        """Persist, then publish, a topic checked by ``check_new_topic`` (and maybe ``reserve``d)."""
        if info.name in self.topics:
            raise MetadataError(Errors.TopicAlreadyExistsError, f"topic {info.name!r} already exists")
        self._publish({**self.topics, info.name: info})

    def get(self, name: str) -> TopicInfo:
        info = self.topics.get(name)
        if info is None:
            raise MetadataError(Errors.UnknownTopicOrPartitionError, f"topic {name!r} does not exist")
        return info

    def delete_topic(self, name: str) -> TopicInfo:
        info = self.get(name)
        self._publish({n: t for n, t in self.topics.items() if n != name})
        return info

    def check_partition_count(self, name: str, count: int) -> TopicInfo:
        info = self.get(name)
        if count <= info.partitions:
            raise MetadataError(Errors.InvalidPartitionsError,
                                f"topic {name!r} has {info.partitions} partitions; the new count {count} must be larger")
        if count > MAX_PARTITIONS:
            raise MetadataError(Errors.InvalidPartitionsError, f"{count} partitions is over the limit {MAX_PARTITIONS}")
        return info

    def set_partition_count(self, name: str, count: int) -> TopicInfo:
        info = self.check_partition_count(name, count)
        self._publish({**self.topics, name: replace(info, partitions=count)})
        return self.topics[name]

    def set_configs(self, name: str, configs: dict[str, str]) -> TopicInfo:
        info = self.get(name)
        check_topic_configs(configs)
        self._publish({**self.topics, name: replace(info, configs=dict(configs))})
        return self.topics[name]
