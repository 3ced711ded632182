"""Broker and topic configuration, under Kafka's own names.

Theory of operation: every setting the broker understands is one row of
``BROKER_CONFIGS`` (broker-wide, ``server.properties`` names) or
``TOPIC_CONFIGS`` (per-topic overrides, as CreateTopics, DescribeConfigs and
IncrementalAlterConfigs name them).  A topic config whose value is not set on
the topic falls back to its broker-wide counterpart, exactly as Kafka resolves
``retention.ms`` from ``log.retention.ms``; that counterpart's row is generated
from the topic config's row, so both levels share one parser and one default,
and storage's ``LogConfig`` takes its fields and defaults from the same rows.  Values travel as strings (that is
what the protocol carries) and are parsed once, here; a bad key or value raises
``ConfigError`` naming both.
"""
from __future__ import annotations

import logging
import re
import unicodedata
from dataclasses import dataclass
from typing import Callable, Mapping

LONG_MAX = 2**63 - 1
LONG_MIN = -2**63
INT_MAX = 2**31 - 1
# The longest config value a client may set (CreateTopics, AlterConfigs, IncrementalAlterConfigs, dynamic broker
# configs).  Kafka has no explicit bound (only the request size); a value is kept in the topic's metadata (a
# ZooKeeper znode holds ~1 MB) and described to every client that asks, so pylog bounds each one.  128 KiB holds
# the longest real value, a throttled-replicas list of thousands of partitions.
CONFIG_VALUE_MAX_CHARS = 128 * 1024
# Java's Long.parseLong / Integer.parseInt on the trimmed value, as Kafka's ConfigDef parses LONG and INT: an
# optional sign, then ASCII digits (Python's int() would also take '1_048_576', full-width digits and inner spaces,
# and store them verbatim for other tools to choke on); a double as Double.parseDouble's decimal form.
_INTEGER = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
# KIP-1030 (Kafka 4.0): segment.bytes / log.segment.bytes of at least 1 MiB; tiny segments cost a file
# descriptor and an index per few records.  Tests that need small segments set internal.segment.bytes.
SEGMENT_BYTES_MIN = 1024 * 1024


class ConfigError(ValueError):
    """An unknown config name or a value that does not parse or is out of range."""


# Java's String.trim(), which Kafka's ConfigDef.parseType applies to every value: every character up to U+0020
# (NUL and the other controls too) at either end; unlike Python's str.strip(), not NBSP or the other Unicode spaces
_JAVA_TRIMMED = "".join(map(chr, range(0x21)))


def java_trim(value: str) -> str:
    return value.strip(_JAVA_TRIMMED)


def _parse_bool(value: str) -> bool:
    lowered = java_trim(value).lower()
    if lowered not in ("true", "false"):
        raise ValueError("expected true or false")
    return lowered == "true"


def parse_java_integer(value: str, high: int = LONG_MAX) -> int:
    """The integer Java's Long.parseLong (``high`` LONG_MAX) or Integer.parseInt (INT_MAX) reads from ``value``
    trimmed as Java trims (``java_trim``); ValueError naming what is wrong otherwise."""
    text = java_trim(value)
    if not _INTEGER.fullmatch(text):
        raise ValueError("expected an integer: an optional sign and the digits 0-9 only")
    number = int(text)
    low = LONG_MIN if high == LONG_MAX else -high - 1
    if not low <= number <= high:
        raise ValueError(f"out of the range of a Java {'long' if high == LONG_MAX else 'int'} ({low}..{high})")
    return number


def parse_throttled_replicas(value: str) -> frozenset[tuple[int, int]] | str:
    """A ``*.replication.throttled.replicas`` value: "*" (every replica), or (partition, broker) pairs from
    "partition:broker,..." (empty: none).  Raises ValueError naming the bad entry, as Kafka's validator."""
    text = value.strip()
    if text == "*":
        return "*"
    pairs = set()
    for entry in filter(None, (e.strip() for e in text.split(","))):
        partition, sep, broker = entry.partition(":")
        if not sep or not partition.strip().isdigit() or not broker.strip().isdigit():
            raise ValueError(f"{entry!r} is not partition:broker (a list of them, or *)")
        pairs.add((int(partition), int(broker)))
    return frozenset(pairs) if pairs else frozenset()


def _throttled_replicas_text(value: str) -> str:
    parse_throttled_replicas(value)
    return value


def _parse_int(low: int | None = None, high: int = LONG_MAX) -> Callable[[str], int]:
    """An integer in Java's long range (``high`` INT_MAX: a Kafka INT config), at least ``low`` when given."""
    def parse(value: str) -> int:
        number = parse_java_integer(value, high)
        if low is not None and number < low:
            raise ValueError(f"must be >= {low}")
        return number
    return parse


def _parse_principal(value: str) -> str:
    """A Kafka principal, ``<type>:<name>`` (``User:alice``), both parts non-empty."""
    kind, sep, name = value.strip().partition(":")
    if not sep or not kind or not name:
        raise ValueError("expected a principal <type>:<name>, e.g. User:prometheus")
    return f"{kind}:{name}"


def _parse_optional_int(low: int, high: int = LONG_MAX) -> Callable[[str], int | None]:
    """An integer >= ``low``, or None for an empty value (the setting is unset)."""
    parse_int = _parse_int(low, high)

    def parse(value: str) -> int | None:
        return parse_int(value) if java_trim(value) else None
    return parse


def _parse_double(value: str) -> float:
    """Java's Double.parseDouble, decimal forms only (no NaN, Infinity or hex)."""
    text = java_trim(value)
    if not _DECIMAL.fullmatch(text):
        raise ValueError("expected a decimal number: digits 0-9, an optional '.' and exponent")
    return float(text)


def _parse_ratio(value: str) -> float:
    number = _parse_double(value)
    if not 0.0 <= number <= 1.0:
        raise ValueError("must be between 0 and 1")
    return number


RACK_AWARE_REPLICA_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
BROKER_RACK_MAX_CHARS = 255


def _parse_rack(value: str) -> str:
    """A broker.rack: printable, at most BROKER_RACK_MAX_CHARS characters (it is sent in every Metadata answer)."""
    if len(value) > BROKER_RACK_MAX_CHARS:
        raise ValueError(f"a rack is at most {BROKER_RACK_MAX_CHARS} characters, got {len(value)}")
    if not value.isprintable():
        raise ValueError("a rack has printable characters only")
    return value


def _parse_choice(*choices: str) -> Callable[[str], str]:
    def parse(value: str) -> str:
        if value not in choices:
            raise ValueError("accepted values: " + ", ".join(choices))
        return value
    return parse


# Kafka's built-in server-side assignors: their names and class names
CONSUMER_GROUP_ASSIGNORS = {"uniform": "org.apache.kafka.coordinator.group.assignor.UniformAssignor",
                            "range": "org.apache.kafka.coordinator.group.assignor.RangeAssignor"}


def _parse_assignors(value: str) -> str:
    """group.consumer.assignors: names or class names of the built-in assignors, as their names, in order."""
    by_class = {cls: name for name, cls in CONSUMER_GROUP_ASSIGNORS.items()}
    names = []
    for part in (p.strip() for p in value.split(",")):
        name = part if part in CONSUMER_GROUP_ASSIGNORS else by_class.get(part)
        if name is None:
            raise ValueError(f"{part!r} is not an assignor pylog has; accepted: "
                             + ", ".join([*CONSUMER_GROUP_ASSIGNORS, *by_class]))
        if name not in names:
            names.append(name)
    return ",".join(names)


def _parse_policy(value: str) -> str:
    parts = sorted(p.strip() for p in value.split(",") if p.strip())
    if not parts or any(p not in ("delete", "compact") for p in parts):
        raise ValueError("accepted values: delete, compact, or compact,delete")
    return ",".join(parts)


@dataclass(frozen=True)
class ConfigDef:
    name: str
    default: str
    parse: Callable[[str], object]
    doc: str
    sensitive: bool = False


def _defs(*rows: ConfigDef) -> dict[str, ConfigDef]:
    return {row.name: row for row in rows}


@dataclass(frozen=True)
class TopicConfigDef:
    """One topic config and the broker config that supplies its default, with one parser for both."""

    name: str  # the topic-level name (CreateTopics, DescribeConfigs, IncrementalAlterConfigs)
    default: str  # the broker config supplying the default (log.retention.ms for retention.ms)
    value: str  # that broker config's own default value
    parse: Callable[[str], object]  # the one parser and bounds, shared by both levels
    doc: str
    field: str | None = None  # the storage.log.LogConfig field it sets; None: not a per-log setting here
    broker_doc: str | None = None  # the broker config's doc where it says more than the topic's
    requires: str | None = None  # a broker config that must be set before this boolean may be true

    def broker_config(self) -> ConfigDef:
        return ConfigDef(self.default, self.value, self.parse, self.broker_doc or self.doc)


# confluent.{key,value}.subject.name.strategy: the Java class names Confluent Server accepts (the default first)
SUBJECT_NAME_STRATEGIES = tuple(f"io.confluent.kafka.serializers.subject.{name}" for name in (
    "TopicNameStrategy", "RecordNameStrategy", "TopicRecordNameStrategy"))


# Every topic config, in one table: its broker-level default config is generated from the same row
# (same parser, same bounds), and storage's LogConfig takes its fields from the rows that name one.
# retention.bytes keeps pylog's minimum of -1 at both levels (Kafka's is unbounded: any negative value
# means "no size limit"), as the broker has always refused values below -1.
TOPIC_CONFIGS: dict[str, TopicConfigDef] = {row.name: row for row in (
    TopicConfigDef("cleanup.policy", "log.cleanup.policy", "delete", _parse_policy, "delete, compact or both.",
                   "cleanup_policy"),
    TopicConfigDef("delete.retention.ms", "log.cleaner.delete.retention.ms", "86400000", _parse_int(0),
                   "How long tombstones survive after their first clean.", "delete_retention_ms"),
    TopicConfigDef("min.cleanable.dirty.ratio", "log.cleaner.min.cleanable.ratio", "0.5", _parse_ratio,
                   "Dirty share of the cleanable bytes above which the log is cleaned.", "min_cleanable_dirty_ratio",
                   "Dirty share of the cleanable bytes above which a log is cleaned."),
    TopicConfigDef("min.compaction.lag.ms", "log.cleaner.min.compaction.lag.ms", "0", _parse_int(0),
                   "Records younger than this are not compacted.", "min_compaction_lag_ms"),
    TopicConfigDef("max.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms", str(LONG_MAX), _parse_int(1),
                   "Records older than this are compacted whatever the dirty ratio.", "max_compaction_lag_ms"),
    TopicConfigDef("segment.bytes", "log.segment.bytes", "1073741824", _parse_int(SEGMENT_BYTES_MIN, INT_MAX),
                   "Segment size before a roll (at least 1 MiB).", "segment_bytes",
                   "Segment size before a roll (at least 1 MiB, as Kafka 4)."),
    TopicConfigDef("internal.segment.bytes", "internal.log.segment.bytes", "", _parse_optional_int(1, INT_MAX),
                   "Tests only (Kafka 4's internal config): segment size overriding segment.bytes, below its minimum.",
                   None, "Tests only: broker default of internal.segment.bytes (segment size below the 1 MiB minimum)."),
    TopicConfigDef("segment.ms", "log.roll.ms", "604800000", _parse_int(1), "Segment age before a roll.",
                   "segment_ms"),
    TopicConfigDef("retention.ms", "log.retention.ms", "604800000", _parse_int(-1),
                   "Age after which segments are deleted.", "retention_ms",
                   "Age after which segments are deleted (-1: never)."),
    TopicConfigDef("retention.bytes", "log.retention.bytes", "-1", _parse_int(-1),
                   "Size beyond which segments are deleted.", "retention_bytes",
                   "Partition size beyond which old segments are deleted."),
    TopicConfigDef("index.interval.bytes", "log.index.interval.bytes", "4096", _parse_int(0, INT_MAX),
                   "Bytes between index entries.", "index_interval_bytes", "Bytes between offset-index entries."),
    TopicConfigDef("flush.messages", "log.flush.interval.messages", str(LONG_MAX), _parse_int(1),
                   "fsync after this many messages.", "flush_interval_messages"),
    TopicConfigDef("flush.ms", "log.flush.interval.ms", str(LONG_MAX), _parse_int(0), "fsync after this long.",
                   "flush_interval_ms"),
    TopicConfigDef("message.timestamp.type", "log.message.timestamp.type", "CreateTime",
                   _parse_choice("CreateTime", "LogAppendTime"), "Timestamp kept in the log.",
                   "message_timestamp_type"),
    TopicConfigDef("max.message.bytes", "message.max.bytes", "1048588", _parse_int(0, INT_MAX),
                   "Largest record batch accepted.", "max_message_bytes"),
    TopicConfigDef("compression.type", "compression.type", "producer",
                   _parse_choice("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"),
                   "producer: keep each batch's codec; else re-encode data batches to this codec.",
                   "compression_type",
                   "Codec batches are stored in: producer (as sent) or a codec they are re-encoded to."),
    TopicConfigDef("min.insync.replicas", "min.insync.replicas", "1", _parse_int(1, INT_MAX),
                   "Replicas needed for acks=all.",
                   "min_insync_replicas", "Replicas that must acknowledge acks=all."),
    TopicConfigDef("unclean.leader.election.enable", "unclean.leader.election.enable", "false", _parse_bool,
                   "Elect a leader outside the ISR when no ISR member is alive.", None,
                   "Elect a leader outside the ISR when no ISR member is alive (may lose committed data)."),
    # Kafka's other topic configs: accepted and described, not enforced (each row's doc says why). Kafka 4 removed
    # message.format.version, message.downconversion.enable and message.timestamp.difference.max.ms: unknown here too
    TopicConfigDef("file.delete.delay.ms", "log.segment.delete.delay.ms", "60000", _parse_int(0),
                   "Accepted, not enforced: deleted segments go at once.", "file_delete_delay_ms",
                   "Accepted, not enforced: segments are deleted at once, not renamed .deleted first."),
    TopicConfigDef("preallocate", "log.preallocate", "false", _parse_bool, "Accepted, not enforced.", None,
                   "Accepted, not enforced: segments are not preallocated."),
    TopicConfigDef("segment.index.bytes", "log.index.size.max.bytes", "10485760", _parse_int(4, INT_MAX),
                   "Accepted, not enforced.", None, "Accepted, not enforced: offset indexes grow as needed."),
    TopicConfigDef("segment.jitter.ms", "log.roll.jitter.ms", "0", _parse_int(0), "Accepted, not enforced.", None,
                   "Accepted, not enforced: segments roll at segment.ms."),
    # KIP-937, with Kafka 4.0's defaults (KIP-1030: a record at most an hour ahead of the broker's clock)
    TopicConfigDef("message.timestamp.before.max.ms", "log.message.timestamp.before.max.ms", str(LONG_MAX),
                   _parse_int(0), "With CreateTime, a record timestamped more than this before the broker's clock "
                   "fails its batch with INVALID_TIMESTAMP.", "message_timestamp_before_max_ms"),
    TopicConfigDef("message.timestamp.after.max.ms", "log.message.timestamp.after.max.ms", "3600000",
                   _parse_int(0), "With CreateTime, a record timestamped more than this after the broker's clock "
                   "fails its batch with INVALID_TIMESTAMP (a timestamp of 2^63-1 would keep its segment from "
                   "rolling or expiring).", "message_timestamp_after_max_ms"),
    TopicConfigDef("follower.replication.throttled.replicas", "follower.replication.throttled.replicas", "",
                   _throttled_replicas_text,
                   "Replicas whose fetching from their leader counts against their broker's "
                   "follower.replication.throttled.rate (KIP-73): partition:broker,... or * (all).", None,
                   "Replicas (partition:broker,... or *) whose fetching from the leader counts against that broker's "
                   "follower.replication.throttled.rate (KIP-73)."),
    TopicConfigDef("leader.replication.throttled.replicas", "leader.replication.throttled.replicas", "",
                   _throttled_replicas_text,
                   "Replicas whose answers to followers' fetches count against their broker's "
                   "leader.replication.throttled.rate (KIP-73): partition:broker,... or * (all).", None,
                   "Replicas (partition:broker,... or *) whose answers to followers count against that broker's "
                   "leader.replication.throttled.rate (KIP-73)."),
    TopicConfigDef("local.retention.ms", "log.local.retention.ms", "-2", _parse_int(-2),
                   "Accepted: no tiered storage.", None, "Accepted: no tiered storage (local is everything)."),
    TopicConfigDef("local.retention.bytes", "log.local.retention.bytes", "-2", _parse_int(-2),
                   "Accepted: no tiered storage."),
    TopicConfigDef("remote.storage.enable", "remote.storage.enable", "false", _parse_choice("false"),
                   "Tiered storage is not available: only false is accepted."),
    TopicConfigDef("remote.log.copy.disable", "remote.log.copy.disable", "false", _parse_bool,
                   "Accepted: no tiered storage (KIP-950)."),
    TopicConfigDef("remote.log.delete.on.disable", "remote.log.delete.on.disable", "false", _parse_bool,
                   "Accepted: no tiered storage (KIP-950)."),
    TopicConfigDef("compression.gzip.level", "compression.gzip.level", "-1", _parse_int(-1, INT_MAX),
                   "Accepted (default level used).", None, "Accepted; re-encoding uses the codec's default level."),
    TopicConfigDef("compression.lz4.level", "compression.lz4.level", "9", _parse_int(1, INT_MAX),
                   "Accepted (default level used).", None, "Accepted; re-encoding uses the codec's default level."),
    TopicConfigDef("compression.zstd.level", "compression.zstd.level", "3", _parse_int(-131072, INT_MAX),
                   "Accepted (default level used).", None, "Accepted; re-encoding uses the codec's default."),
    # Confluent Server's broker-side schema validation (registry/validation.py), on the broker's own registry
    *(TopicConfigDef(
        f"confluent.{side}.schema.validation", f"confluent.{side}.schema.validation", "false", _parse_bool,
        f"Every produced record's {side} must carry (magic byte 0, 4-byte schema id) the id of a schema "
        f"registered under the subject confluent.{side}.subject.name.strategy names (a null {side} passes); "
        f"else its batch fails with INVALID_RECORD. Needs schema.registry.listeners.", None,
        f"Broker-wide default of the topic config confluent.{side}.schema.validation.",
        requires="schema.registry.listeners") for side in ("key", "value")),
    *(TopicConfigDef(
        f"confluent.{side}.subject.name.strategy", f"confluent.{side}.subject.name.strategy",
        SUBJECT_NAME_STRATEGIES[0], _parse_choice(*SUBJECT_NAME_STRATEGIES),
        f"Subject a record {side}'s schema id must be registered under: TopicNameStrategy <topic>-{side}, "
        f"RecordNameStrategy the schema's record name, TopicRecordNameStrategy <topic>-<record name>.")
      for side in ("key", "value")),
)}
# topic configs that make every produced record pass a check beyond Kafka's (ReplicaManager.record_check)
RECORD_CHECK_CONFIGS = ("confluent.key.schema.validation", "confluent.value.schema.validation")


def parse_ip_overrides(value: str) -> dict[str, int]:
    """Kafka's ``max.connections.per.ip.overrides``: 'host:count,host:count' (IPv6 hosts: the last ':' splits)."""
    overrides: dict[str, int] = {}
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        host = host.strip().strip("[]")
        if not sep or not host or not count.strip().isdigit():
            raise ValueError(f"{item!r} is not 'host:count' with a count >= 0")
        overrides[host] = int(count)
    return overrides


def parse_log_dirs(value: str) -> str:
    """``log.dirs``: comma-separated paths, none empty between commas, none twice (kept as the string)."""
    items = [item.strip() for item in value.split(",")] if value.strip() else []
    if any(not item for item in items):
        raise ValueError(f"{value!r} has an empty directory between commas")
    if len(set(items)) != len(items):
        raise ValueError(f"{value!r} lists a directory twice")
    return value


# Kafka 4's dynamic broker configs (DynamicBrokerConfig.AllDynamicConfigs) that pylog has no use for: rows so that
# AlterConfigs accepts them, stores them and DescribeConfigs shows them, as Kafka tooling expects.
_KAFKA_DYNAMIC_ONLY = (
    ("log.cleaner.threads", "1", _parse_int(0, INT_MAX), "LogCleaner; pylog cleans on one task"),
    ("log.cleaner.dedupe.buffer.size", "134217728", _parse_int(0), "LogCleaner"),
    ("log.cleaner.io.buffer.load.factor", "0.9", _parse_double, "LogCleaner"),
    ("log.cleaner.io.buffer.size", "524288", _parse_int(0, INT_MAX), "LogCleaner"),
    ("log.cleaner.io.max.bytes.per.second", "1.7976931348623157E308", _parse_double, "LogCleaner"),
    ("num.io.threads", "8", _parse_int(1, INT_MAX), "thread pools; pylog serves requests on one event loop"),
    ("num.replica.fetchers", "1", _parse_int(1, INT_MAX), "thread pools"),
    ("num.recovery.threads.per.data.dir", "2", _parse_int(1, INT_MAX), "thread pools"),
    ("background.threads", "10", _parse_int(1, INT_MAX), "thread pools"),
    ("num.network.threads", "3", _parse_int(1, INT_MAX), "listeners"),
    ("max.connection.creation.rate", str(INT_MAX), _parse_int(0, INT_MAX), "listeners"),
    ("metric.reporters", "", str, "metrics; pylog serves Prometheus at metrics.port"),
    ("config.providers", "", str, "config providers"),
    ("principal.builder.class", "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder", str,
     "listeners"),
    ("ssl.protocol", "TLSv1.3", str, "listeners"),
    ("ssl.provider", "", str, "listeners"),
    ("ssl.keystore.password", "", str, "listeners; pylog reads PEM keystores"),
    ("ssl.truststore.password", "", str, "listeners; pylog reads PEM truststores"),
    ("ssl.keymanager.algorithm", "SunX509", str, "listeners"),
    ("ssl.trustmanager.algorithm", "PKIX", str, "listeners"),
    ("ssl.secure.random.implementation", "", str, "listeners"),
    ("ssl.engine.factory.class", "", str, "listeners"),
    ("sasl.kerberos.service.name", "", str, "SASL; pylog has no GSSAPI"),
    ("sasl.kerberos.kinit.cmd", "/usr/bin/kinit", str, "SASL; pylog has no GSSAPI"),
    ("sasl.kerberos.ticket.renew.window.factor", "0.8", _parse_double, "SASL; pylog has no GSSAPI"),
    ("sasl.kerberos.ticket.renew.jitter", "0.05", _parse_double, "SASL; pylog has no GSSAPI"),
    ("sasl.kerberos.min.time.before.relogin", "60000", _parse_int(0), "SASL; pylog has no GSSAPI"),
    ("sasl.kerberos.principal.to.local.rules", "DEFAULT", str, "SASL; pylog has no GSSAPI"),
    ("sasl.login.refresh.window.factor", "0.8", _parse_double, "SASL; pylog has no OAUTHBEARER"),
    ("sasl.login.refresh.window.jitter", "0.05", _parse_double, "SASL; pylog has no OAUTHBEARER"),
    ("sasl.login.refresh.min.period.seconds", "60", _parse_int(0, INT_MAX), "SASL; pylog has no OAUTHBEARER"),
    ("sasl.login.refresh.buffer.seconds", "300", _parse_int(0, INT_MAX), "SASL; pylog has no OAUTHBEARER"),
    ("remote.log.index.file.cache.total.size.bytes", "1073741824", _parse_int(1), "tiered storage, which pylog lacks"),
    ("remote.fetch.max.wait.ms", "500", _parse_int(1, INT_MAX), "tiered storage, which pylog lacks"),
    ("remote.log.manager.copy.max.bytes.per.second", str(LONG_MAX), _parse_int(1), "tiered storage, which pylog lacks"),
    ("remote.log.manager.fetch.max.bytes.per.second", str(LONG_MAX), _parse_int(1),
     "tiered storage, which pylog lacks"),
    ("remote.list.offsets.request.timeout.ms", "30000", _parse_int(1), "tiered storage, which pylog lacks"),
    ("remote.log.manager.copier.thread.pool.size", "10", _parse_int(1, INT_MAX), "tiered storage, which pylog lacks"),
    ("remote.log.manager.expiration.thread.pool.size", "10", _parse_int(1, INT_MAX),
     "tiered storage, which pylog lacks"),
    ("remote.log.manager.follower.thread.pool.size", "2", _parse_int(1, INT_MAX), "tiered storage, which pylog lacks"),
    ("remote.log.reader.threads", "10", _parse_int(1, INT_MAX), "tiered storage, which pylog lacks"),
    ("follower.fetch.last.tiered.offset.enable", "false", _parse_bool, "tiered storage, which pylog lacks"),
    ("group.share.heartbeat.interval.ms", "5000", _parse_int(1, INT_MAX), "share groups, which pylog lacks"),
    ("group.share.session.timeout.ms", "45000", _parse_int(1, INT_MAX), "share groups, which pylog lacks"),
    ("share.coordinator.cached.buffer.max.bytes", "1048588", _parse_int(1, INT_MAX), "share groups, which pylog lacks"),
)

BROKER_CONFIGS: dict[str, ConfigDef] = _defs(
    ConfigDef("broker.id", "0", _parse_int(0), "Id of this broker."),
    ConfigDef("num.partitions", "1", _parse_int(1), "Partitions of auto-created topics."),
    ConfigDef("default.replication.factor", "1", _parse_int(1), "Replication factor of auto-created topics."),
    ConfigDef("auto.create.topics.enable", "true", _parse_bool, "Create topics named by Metadata requests."),
    ConfigDef("max.request.partition.size.limit", "2000", _parse_int(1),
              "Most partitions a DescribeTopicPartitions answer holds, whatever its ResponsePartitionLimit."),
    ConfigDef("delete.topic.enable", "true", _parse_bool, "Allow DeleteTopics."),
    ConfigDef("log.retention.minutes", "", _parse_int(-1), "log.retention.ms in minutes (ms wins when both are set)."),
    ConfigDef("log.retention.hours", "168", _parse_int(-1), "log.retention.ms in hours (ms and minutes win)."),
    ConfigDef("log.roll.hours", "168", _parse_int(1), "log.roll.ms in hours (ms wins when both are set)."),
    ConfigDef("log.retention.check.interval.ms", "300000", _parse_int(1), "How often retention runs."),
    ConfigDef("log.initial.task.delay.ms", "30000", _parse_int(0),
              "When the first retention pass runs after start (Kafka's LogManager tasks' initial delay); "
              "later passes follow every log.retention.check.interval.ms."),
    ConfigDef("log.cleaner.enable", "true", _parse_bool, "Run the log cleaner (compaction)."),
    ConfigDef("log.cleaner.backoff.ms", "15000", _parse_int(0), "Pause between log cleaner passes."),
    *(row.broker_config() for row in TOPIC_CONFIGS.values()),  # the defaults of topic configs
    # --- storage limits (what topics and segments may cost in files) ---
    ConfigDef("max.broker.partitions", "-1", _parse_int(-1),
              "Most partitions this broker hosts (KIP-578); -1: derived from the open-file limit "
              "(half of RLIMIT_NOFILE at 1 descriptor per partition: their segments share an LRU of open files "
              "within that half, so an idle partition holds none). Beyond it CreateTopics, "
              "CreatePartitions and auto-creation answer POLICY_VIOLATION."),
    ConfigDef("message.max.decompressed.bytes", "33554432", _parse_int(0),
              "pylog addition (Kafka has no such bound): most bytes a compressed batch's records may "
              "decompress to; beyond, the produce fails with MESSAGE_TOO_LARGE, having decompressed at "
              "most this plus one 256 KB chunk. 32 MiB is 32x message.max.bytes, above what text "
              "compresses by in a full batch; raise it with message.max.bytes."),
    ConfigDef("socket.request.max.bytes", "104857600", _parse_int(1), "Largest request frame accepted."),
    # --- request memory and connections (what a client can make the broker hold) ---
    ConfigDef("queued.max.request.bytes", "209715200", _parse_int(-1),
              "Bytes of requests all connections together may hold in memory; a connection whose next "
              "frame does not fit stops being read until it does (Kafka's default -1 is unbounded)."),
    ConfigDef("connections.max.idle.ms", "600000", _parse_int(-1),
              "Close connections idle (no request, no response pending) this long; -1: never."),
    ConfigDef("max.connections", "-1", _parse_int(-1),
              "Most connections the broker accepts at once (TLS ones counted from accept, before the handshake); "
              "-1: derived from the open-file limit, half of RLIMIT_NOFILE minus 64 descriptors reserved for "
              "storage (Kafka's default is unbounded)."),
    ConfigDef("max.connections.per.ip", "2147483647", _parse_int(0),
              "Most connections from one IP address at once."),
    ConfigDef("max.connections.per.ip.overrides", "", parse_ip_overrides,
              "Per-IP exceptions to max.connections.per.ip: 'host:count,host:count'."),
    ConfigDef("fetch.max.bytes", "57671680", _parse_int(1024),
              "Most record bytes in one Fetch response, whatever the client asks for."),
    ConfigDef("log.dirs", "", parse_log_dirs,
              "Comma-separated log directories (JBOD) holding the partitions, each new one placed in the "
              "directory with the fewest partitions; unset: the data directory (--data-dir), which keeps the "
              "broker's own files either way."),
    ConfigDef("max.incremental.fetch.session.cache.slots", "1000", _parse_int(0),
              "Most incremental fetch sessions (KIP-227) the broker keeps at once; beyond, a new session takes "
              "the slot of one idle for 2 minutes (a follower's: of any consumer's), else none is made and the "
              "client goes on with full fetches."),

    ConfigDef("cluster.id", "", str, "Cluster id; generated and stored in meta.properties when empty."),
    ConfigDef("producer.id.expiration.ms", "86400000", _parse_int(1), "Idle time before producer state expires."),
    ConfigDef("group.min.session.timeout.ms", "6000", _parse_int(0), "Smallest session timeout a member may ask for."),
    ConfigDef("group.max.session.timeout.ms", "1800000", _parse_int(0), "Largest session timeout a member may ask for."),
    ConfigDef("group.initial.rebalance.delay.ms", "3000", _parse_int(0),
              "How long a new group waits for more members before its first rebalance (0: rebalance per joiner)."),
    ConfigDef("group.max.size", "2147483647", _parse_int(1), "Most members a group may have."),
    # KIP-848 consumer groups (group.protocol=consumer): Kafka 4.1's GroupCoordinatorConfig names and defaults
    ConfigDef("group.consumer.session.timeout.ms", "45000", _parse_int(1, INT_MAX),
              "A consumer-protocol member not heard from this long is removed (a group config may override it)."),
    ConfigDef("group.consumer.min.session.timeout.ms", "45000", _parse_int(1, INT_MAX),
              "Smallest consumer.session.timeout.ms a group config may set."),
    ConfigDef("group.consumer.max.session.timeout.ms", "60000", _parse_int(1, INT_MAX),
              "Largest consumer.session.timeout.ms a group config may set."),
    ConfigDef("group.consumer.heartbeat.interval.ms", "5000", _parse_int(1, INT_MAX),
              "How often consumer-protocol members heartbeat (told in every ConsumerGroupHeartbeat answer)."),
    ConfigDef("group.consumer.min.heartbeat.interval.ms", "5000", _parse_int(1, INT_MAX),
              "Smallest consumer.heartbeat.interval.ms a group config may set."),
    ConfigDef("group.consumer.max.heartbeat.interval.ms", "15000", _parse_int(1, INT_MAX),
              "Largest consumer.heartbeat.interval.ms a group config may set."),
    ConfigDef("group.consumer.max.size", "2147483647", _parse_int(1, INT_MAX),
              "Most members a consumer-protocol group may have."),
    ConfigDef("group.consumer.assignors", "uniform,range", _parse_assignors,
              "The server-side assignors a member may name (uniform, range, or Kafka's class names of them); "
              "the first is used when a member names none."),
    ConfigDef("group.max.groups", "10000", _parse_int(1, INT_MAX),
              "Most consumer groups one coordinator holds (pylog, after Kafka's group.share.max.groups); a request "
              "that would create one more gets GROUP_MAX_SIZE_REACHED. Each group is replayed at every start."),
    ConfigDef("telemetry.max.bytes", "1048576", _parse_int(1, INT_MAX),
              "Largest metrics payload a PushTelemetry may carry (KIP-714; beyond, TELEMETRY_TOO_LARGE), told to "
              "clients in GetTelemetrySubscriptions."),
    ConfigDef("offsets.topic.num.partitions", "50", _parse_int(1), "Partitions of __consumer_offsets when created."),
    ConfigDef("offsets.topic.segment.bytes", "104857600", _parse_int(SEGMENT_BYTES_MIN),
              "Segment size of __consumer_offsets (it becomes the topic's segment.bytes, so 1 MiB at least)."),
    ConfigDef("offset.metadata.max.bytes", "4096", _parse_int(0), "Largest metadata string of a committed offset."),
    ConfigDef("offsets.retention.minutes", "10080", _parse_int(1),
              "Committed offsets of a group that has been Empty this long expire."),
    ConfigDef("offsets.retention.check.interval.ms", "600000", _parse_int(1), "How often offsets expire."),
    ConfigDef("transaction.state.log.num.partitions", "50", _parse_int(1),
              "Partitions of __transaction_state when created."),
    ConfigDef("transaction.state.log.segment.bytes", "104857600", _parse_int(SEGMENT_BYTES_MIN),
              "Segment size of __transaction_state."),
    ConfigDef("transaction.max.timeout.ms", "900000", _parse_int(1),
              "Largest transaction.timeout.ms a producer may ask for (else INVALID_TRANSACTION_TIMEOUT)."),
    ConfigDef("transaction.abort.timed.out.transaction.cleanup.interval.ms", "10000", _parse_int(1),
              "How often transactions past their timeout are aborted (and unwritten markers retried)."),
    ConfigDef("transactional.id.expiration.ms", "604800000", _parse_int(1),
              "Idle time after which a transactional id without an open transaction is removed."),
    ConfigDef("transaction.remove.expired.transaction.cleanup.interval.ms", "3600000", _parse_int(1),
              "How often expired transactional ids are removed."),
    ConfigDef("transaction.partition.verification.enable", "true", _parse_bool,
              "Refuse transactional produce to partitions not added to the transaction (INVALID_TXN_STATE)."),
    # --- listeners (server/listeners.py; without them: one PLAINTEXT listener at --host/--port) ---
    ConfigDef("listeners", "", str, "Sockets to bind: NAME://host:port,... (port 0: any free port)."),
    ConfigDef("advertised.listeners", "", str,
              "Addresses published per listener (to clients on that listener and in ZooKeeper); default: listeners."),
    ConfigDef("listener.security.protocol.map",
              "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL", str,
              "Security protocol of each listener name (NAME:PROTOCOL,...)."),
    ConfigDef("inter.broker.listener.name", "", str,
              "Listener other brokers connect to; default: the only listener, else PLAINTEXT."),
    # --- TLS of SSL listeners (security/tls.py; each may be set per listener: listener.name.<l>.<config>) ---
    ConfigDef("ssl.keystore.type", "PEM", str, "Keystore format: PEM (KIP-651)."),
    ConfigDef("ssl.keystore.location", "", str, "PEM file with the certificate chain and private key."),
    ConfigDef("ssl.keystore.certificate.chain", "", str, "The certificate chain as PEM text.", sensitive=True),
    ConfigDef("ssl.keystore.key", "", str, "The private key as PEM text.", sensitive=True),
    ConfigDef("ssl.key.password", "", str, "Password of an encrypted private key.", sensitive=True),
    ConfigDef("ssl.truststore.type", "PEM", str, "Truststore format: PEM."),
    ConfigDef("ssl.truststore.location", "", str, "PEM file of the trusted CA certificates."),
    ConfigDef("ssl.truststore.certificates", "", str, "The trusted CA certificates as PEM text.",
              sensitive=True),  # Kafka's PASSWORD type, as the two above
    ConfigDef("ssl.client.auth", "none", _parse_choice("none", "requested", "required"),
              "Mutual TLS: ask for (requested) or insist on (required) a client certificate."),
    ConfigDef("ssl.enabled.protocols", "TLSv1.2,TLSv1.3", str, "TLS versions accepted."),
    ConfigDef("ssl.cipher.suites", "", str, "Cipher suites (OpenSSL names); empty: OpenSSL's defaults."),
    ConfigDef("ssl.principal.mapping.rules", "DEFAULT", str,
              "Client certificate subject -> principal name: RULE:pattern/replacement/[LU],...,DEFAULT."),
    ConfigDef("ssl.endpoint.identification.algorithm", "https", str,
              "A broker connecting to a peer's SSL listener checks its host name (https) or not (empty)."),
    # --- SASL of SASL_PLAINTEXT / SASL_SSL listeners (security/sasl.py; per listener: listener.name.<l>.<config>) ---
    ConfigDef("sasl.enabled.mechanisms", "", str,
              "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (comma-separated); empty: both SCRAM mechanisms, plus PLAIN "
              "where the listener has a PLAIN JAAS config."),
    ConfigDef("sasl.jaas.config", "", str,
              "JAAS login module config; per listener and mechanism as "
              "listener.name.<l>.<mechanism>.sasl.jaas.config (PLAIN users: user_<name>=\"<password>\"; "
              "username/password: the broker's own inter-broker login).", sensitive=True),
    ConfigDef("sasl.mechanism.inter.broker.protocol", "", str,
              "Mechanism brokers log in to each other with on a SASL inter-broker listener; "
              "empty: the listener's first enabled mechanism."),
    ConfigDef("connections.max.reauth.ms", "0", _parse_int(0),
              "SASL session lifetime (KIP-368): clients re-authenticate before it ends, else their connection "
              "closes; 0: sessions do not expire."),
    ConfigDef("connection.failed.authentication.delay.ms", "100", _parse_int(0),
              "Delay before answering a failed authentication (slows password guessing)."),
    ConfigDef("sasl.server.max.receive.size", "524288", _parse_int(1),
              "Largest frame a SASL listener reads before the client authenticated (a bigger one closes it)."),
    ConfigDef("sasl.server.authentication.timeout.ms", "10000", _parse_int(0),
              "pylog addition (Kafka bounds unauthenticated connections by connections.max.idle.ms only): a "
              "SASL connection not authenticated this long after it was accepted is closed; 0: no deadline."),
    ConfigDef("queued.max.unauthenticated.request.bytes", "8388608", _parse_int(-1),
              "pylog addition: request bytes all not-yet-authenticated SASL connections together may hold, "
              "apart from queued.max.request.bytes (which only authenticated clients use); -1: unbounded."),
    # --- ACLs (security/acl.py) ---
    ConfigDef("authorizer.class.name", "", str,
              "Enables ACL checks when set (Kafka's class names are accepted, e.g. "
              "kafka.security.authorizer.AclAuthorizer or org.apache.kafka.metadata.authorizer.StandardAuthorizer)."),
    ConfigDef("super.users", "", str, "Principals allowed everything, ';'-separated: User:admin;User:broker."),
    ConfigDef("allow.everyone.if.no.acl.found", "false", _parse_bool,
              "Allow an operation on a resource that has no ACL at all."),
    # --- client quotas (security/quotas.py; the quotas themselves: AlterClientQuotas) ---
    ConfigDef("quota.window.num", "11", _parse_int(1), "Samples a quota's rate is measured over."),
    ConfigDef("quota.window.size.seconds", "1", _parse_int(1), "Length of one quota sample."),
    # --- replication throttles (KIP-73; replication/throttle.py), dynamic ---
    ConfigDef("leader.replication.throttled.rate", str(LONG_MAX), _parse_int(0),
              "Bytes per second a leader sends to followers of its leader.replication.throttled.replicas."),
    ConfigDef("follower.replication.throttled.rate", str(LONG_MAX), _parse_int(0),
              "Bytes per second a follower fetches for its follower.replication.throttled.replicas."),
    ConfigDef("replication.quota.window.size.seconds", "1", _parse_int(1),
              "A replication throttle's burst: at most this many seconds of its rate after an idle spell."),
    ConfigDef("replica.alter.log.dirs.io.max.bytes.per.second", str(LONG_MAX), _parse_int(0),
              "Bytes per second this broker copies moving replicas between its log dirs (AlterReplicaLogDirs)."),
    # --- clusters (ZooKeeper mode; ignored by a single node) ---
    ConfigDef("zookeeper.connect", "", str, "ZooKeeper HOST:PORT[,HOST:PORT][/chroot]; empty: single node."),
    ConfigDef("zookeeper.session.timeout.ms", "18000", _parse_int(1),
              "ZooKeeper session timeout: how long a dead broker keeps its registration (and leaderships)."),
    ConfigDef("zookeeper.connection.timeout.ms", "18000", _parse_int(1),
              "How long a broker waits to connect to ZooKeeper at start."),
    ConfigDef("offsets.topic.replication.factor", "3", _parse_int(1),
              "Replication factor of __consumer_offsets (capped at the live brokers when it is created)."),
    ConfigDef("transaction.state.log.replication.factor", "3", _parse_int(1),
              "Replication factor of __transaction_state (capped at the live brokers when it is created)."),
    ConfigDef("transaction.state.log.min.isr", "2", _parse_int(1), "min.insync.replicas of __transaction_state."),
    ConfigDef("replica.lag.time.max.ms", "30000", _parse_int(1),
              "A follower that has not caught up for this long leaves the ISR."),
    ConfigDef("replica.fetch.wait.max.ms", "500", _parse_int(0), "Long-poll time of a follower's Fetch."),
    ConfigDef("replica.fetch.min.bytes", "1", _parse_int(1), "min_bytes of a follower's Fetch."),
    ConfigDef("replica.fetch.max.bytes", "1048576", _parse_int(0), "Per-partition max bytes of a follower's Fetch."),
    ConfigDef("replica.fetch.response.max.bytes", "10485760", _parse_int(0), "max_bytes of a follower's Fetch."),
    ConfigDef("replica.fetch.backoff.ms", "1000", _parse_int(0), "Pause after a follower's Fetch failed."),
    ConfigDef("replica.socket.timeout.ms", "30000", _parse_int(1), "Timeout of inter-broker requests."),
    ConfigDef("auto.leader.rebalance.enable", "true", _parse_bool,
              "Move leadership back to preferred replicas once they are in sync again."),
    ConfigDef("leader.imbalance.check.interval.seconds", "300", _parse_int(1),
              "How often the controller runs preferred-leader election."),
    ConfigDef("controlled.shutdown.enable", "true", _parse_bool,
              "On a clean stop, ask the controller to move this broker's leaderships away first."),
    ConfigDef("controlled.shutdown.timeout.ms", "30000", _parse_int(0),
              "How long a stopping broker waits for the controller to move its leaderships."),
    ConfigDef("broker.rack", "", _parse_rack,
              "Rack of this broker (registered in ZooKeeper, answered in Metadata and DescribeCluster): new "
              "topics get their replicas spread over racks; empty: none. All brokers have one, or none does."),
    ConfigDef("replica.selector.class", "", _parse_choice("", RACK_AWARE_REPLICA_SELECTOR),
              "org.apache.kafka.common.replica.RackAwareReplicaSelector: a leader sends a consumer whose Fetch "
              "names its rack (client.rack) to an in-sync replica in that rack (KIP-392); empty: the leader "
              "serves every consumer."),
    # --- the Schema Registry (server/schema_registry.py; pylog additions, Confluent's names where it has them) ---
    ConfigDef("schema.registry.listeners", "", str,
              "Serve a Confluent-compatible Schema Registry at these URLs: http://host:port or https://host:port, "
              "comma-separated (port 0: any free port); empty: off. https uses the broker's ssl.keystore.* "
              "(or listener.name.schema_registry.ssl.*)."),
    ConfigDef("schema.registry.max.request.bytes", "1048576", _parse_int(1),
              "Largest request body the registry reads (413 beyond)."),
    ConfigDef("schema.registry.max.connections", "1000", _parse_int(1),
              "Most registry HTTP connections at once (503 beyond)."),
    ConfigDef("schema.registry.authentication.method", "", _parse_choice("", "NONE", "BASIC"),
              "BASIC: HTTP Basic against the broker's SASL users (PLAIN JAAS users, SCRAM credentials); NONE: "
              "anonymous; empty: BASIC when the broker has a SASL listener, else NONE."),
    ConfigDef("schema.registry.forward.timeout.ms", "30000", _parse_int(1),
              "How long a broker waits for the writer (the leader of _schemas-0) to answer a forwarded request."),
    ConfigDef("schema.registry.compute.threads", "1", _parse_int(1),
              "Worker threads that parse schemas and check compatibility, off the event loop; more requests "
              "wait their turn."),
    ConfigDef("schema.registry.compute.timeout.ms", "10000", _parse_int(1),
              "Longest one request's parsing or compatibility checks may run (a transitive check's versions "
              "together); beyond, it answers 500 / 50002 (operation timeout)."),
    # --- observability (pylog additions) ---
    ConfigDef("metrics.port", "-1", _parse_int(-1),
              "Serve Prometheus metrics at http://<metrics.host>:<port>/metrics (-1: off, 0: any free port)."),
    ConfigDef("metrics.host", "127.0.0.1", str,
              "The address /metrics binds. It has no login, so it binds to loopback unless set (0.0.0.0: every "
              "interface; bind it where only the monitoring reaches)."),
    ConfigDef("metrics.principal", "User:ANONYMOUS", _parse_principal,
              "With an authorizer, /metrics names only the topics and groups this principal may DESCRIBE "
              "(ACLs with host *; a super user sees all). Without one it names every topic and group."),
    ConfigDef("metrics.consumergroup.max.series", "2000", _parse_int(0),
              "Most (group, topic, partition) series of kafka_consumergroup_lag and _current_offset per "
              "scrape, the groups in name order; the rest are counted in "
              "pylog_consumergroup_series_dropped. 0: no per-group series."),
    *(ConfigDef(name, default, parse, f"Kafka's dynamic broker config ({what}): accepted, stored and described; "
                f"pylog does not act on it.", sensitive=name.endswith(".password"))
      for name, default, parse, what in _KAFKA_DYNAMIC_ONLY),
)



_COARSER = {
    "log.retention.ms": (("log.retention.minutes", 60_000), ("log.retention.hours", 3_600_000)),
    "log.roll.ms": (("log.roll.hours", 3_600_000),),
}


_log = logging.getLogger(__name__)


def _check(defs: Mapping[str, ConfigDef], name: str, value: str) -> object:
    if name not in defs:
        raise ConfigError(f"unknown config {name!r}; known: {', '.join(sorted(defs))}")

    try:
        return defs[name].parse(value)
    except ValueError as exc:
        raise ConfigError(f"invalid value {value!r} for config {name!r}: {exc}") from None


def _check_from_client(defs: Mapping[str, ConfigDef], name: str, value: str | None) -> object:
    """``_check`` of a value a client sets: present and at most CONFIG_VALUE_MAX_CHARS long."""
    if value is None:
        raise ConfigError(f"config {name!r} has no value")
    if len(value) > CONFIG_VALUE_MAX_CHARS:
        raise ConfigError(f"the value of config {name!r} is {len(value)} characters long; at most "
                          f"{CONFIG_VALUE_MAX_CHARS} are accepted")
    return _check(defs, name, value)


def parse_topic_config(name: str, value: str) -> object:
    """The typed value of one topic config; ConfigError naming the key and value when it does not parse."""
    return _check(TOPIC_CONFIGS, name, value)


def readable_stored_topic_configs(configs: Mapping[str, str]) -> dict[str, str]:
    """Stored topic configs (a topic's config file or znode, the broker's dynamic defaults), made readable: they
    must never stop the broker from opening a topic.  A value earlier pylog versions accepted through Python's
    int() (``1_000``, full-width digits) comes back as they read it, with a WARNING; one that still does not parse
    is left out (the default applies), with an ERROR naming it.  Values clients set are checked strictly
    (``validate_topic_configs``), so only an upgrade meets this."""
    readable = {}
    for name, value in configs.items():
        if name not in TOPIC_CONFIGS:
            readable[name] = value
            continue
        try:
            parse_topic_config(name, value)
            readable[name] = value
            continue
        except ConfigError as strict:
            problem = strict
        legacy = "".join(str(unicodedata.digit(c)) if c.isdigit() and not c.isascii() else c
                         for c in str(value).strip()).replace("_", "")
        try:
            parse_topic_config(name, legacy)
        except ConfigError:
            _log.error("stored topic config %s=%r does not parse (%s); the default %r applies until it is set "
                       "again", name, value, problem, TOPIC_CONFIGS[name].value)
            continue
        _log.warning("stored topic config %s=%r is read as %r, as pylog read it when it was stored; set it again "
                     "in Java's number syntax (pylog topics alter, kafka-configs.sh)", name, value, legacy)
        readable[name] = legacy
    return readable


def topic_config_default(name: str) -> object:
    """A topic config's typed value when neither the topic nor the broker sets it."""
    row = TOPIC_CONFIGS[name]
    return row.parse(row.value)


def checks_records(configs: Mapping[str, str]) -> bool:
    """True when a topic with these (effective) configs has its produced records checked (RECORD_CHECK_CONFIGS)."""
    return any(parse_topic_config(name, configs[name]) for name in RECORD_CHECK_CONFIGS if name in configs)


def validate_topic_configs(configs: Mapping[str, str]) -> dict[str, str]:
    """Return ``configs`` unchanged after parsing each value; raise ConfigError naming the bad one."""
    for name, value in configs.items():
        _check_from_client(TOPIC_CONFIGS, name, value)
    return dict(configs)


_PER_LISTENER = ("ssl.", "sasl.")
# Kafka's per-mechanism JAAS config of a listener: listener.name.<l>.scram-sha-256.sasl.jaas.config
_MECHANISM_JAAS = re.compile(r"^(?i:plain|scram-sha-256|scram-sha-512)\.sasl\.jaas\.config$")


def _listener_setting(name: str) -> tuple[str | None, str]:
    """('BROKER', 'ssl.keystore.location') for 'listener.name.broker.ssl.keystore.location', else (None, name)."""
    if not name.startswith("listener.name."):
        return None, name
    listener, _, setting = name[len("listener.name."):].partition(".")
    if not listener or not (setting.startswith(_PER_LISTENER) or _MECHANISM_JAAS.match(setting)):
        raise ConfigError(f"{name!r}: per-listener configs are listener.name.<listener>.ssl.*, sasl.* or "
                          f"<mechanism>.sasl.jaas.config")
    return listener.upper(), setting.lower() if _MECHANISM_JAAS.match(setting) else setting


# Dynamic broker configs (AlterConfigs / IncrementalAlterConfigs on a BROKER resource), Kafka 4's
# DynamicBrokerConfig.AllDynamicConfigs.  pylog acts at run time on APPLIED_DYNAMIC_CONFIGS only: the defaults of
# topic configs, applied to every partition at once, and the replication throttle rates (KIP-73, and the
# log-dir moves' replica.alter.log.dirs.io.max.bytes.per.second).  The others
# are accepted, stored (ZooKeeper or the data dir) and described, and pylog does not act on them:
# BrokerConfig.raw keeps answering their static value.
APPLIED_DYNAMIC_CONFIGS = frozenset(d.default for d in TOPIC_CONFIGS.values() if not d.name.startswith("internal.")) | \
    frozenset(("leader.replication.throttled.rate", "follower.replication.throttled.rate",  # replication throttles
               "replica.alter.log.dirs.io.max.bytes.per.second"))
# SslConfigs.RECONFIGURABLE_CONFIGS: only per listener (listener.name.<l>.<config>), as Kafka
DYNAMIC_SECURITY_CONFIGS = frozenset((
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password", "ssl.truststore.type",
    "ssl.truststore.location", "ssl.truststore.password", "ssl.keystore.certificate.chain", "ssl.keystore.key",
    "ssl.truststore.certificates"))
# DynamicListenerConfig.ReconfigurableConfigs
DYNAMIC_LISTENER_CONFIGS = frozenset((
    "listeners", "listener.security.protocol.map", "principal.builder.class", "ssl.protocol", "ssl.provider",
    "ssl.cipher.suites", "ssl.enabled.protocols", "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm",
    "ssl.endpoint.identification.algorithm", "ssl.secure.random.implementation", "ssl.client.auth",
    "ssl.engine.factory.class", "sasl.mechanism.inter.broker.protocol", "sasl.jaas.config", "sasl.enabled.mechanisms",
    "sasl.kerberos.service.name", "sasl.kerberos.kinit.cmd", "sasl.kerberos.ticket.renew.window.factor",
    "sasl.kerberos.ticket.renew.jitter", "sasl.kerberos.min.time.before.relogin",
    "sasl.kerberos.principal.to.local.rules", "sasl.login.refresh.window.factor", "sasl.login.refresh.window.jitter",
    "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.buffer.seconds", "max.connections",
    "max.connection.creation.rate", "num.network.threads")) | DYNAMIC_SECURITY_CONFIGS
# configs that may only be set for one broker, not at the cluster-default level (Kafka's PerBrokerConfigs)
PER_BROKER_CONFIGS = DYNAMIC_LISTENER_CONFIGS - {"max.connections", "max.connection.creation.rate",
                                                 "num.network.threads"}
DYNAMIC_BROKER_CONFIGS = APPLIED_DYNAMIC_CONFIGS | DYNAMIC_LISTENER_CONFIGS | frozenset(
    name for name, *_ in _KAFKA_DYNAMIC_ONLY) | frozenset((
        "log.cleaner.backoff.ms", "message.max.bytes",  # LogCleaner
        "max.connections.per.ip", "max.connections.per.ip.overrides",  # SocketServer
        "producer.id.expiration.ms", "transaction.partition.verification.enable"))  # producer state
# a listener's own value of a dynamic config: listener.name.<l>.<config>, or .<mechanism>.<config> for these
_LISTENER_MECHANISM_CONFIGS = ("sasl.jaas.config", "sasl.login.callback.handler.class", "sasl.login.class",
                               "sasl.server.callback.handler.class", "connections.max.reauth.ms")
_DYNAMIC_LISTENER_NAME = re.compile(r"^listener\.name\.[^.]+\.(?:(?i:plain|scram-sha-256|scram-sha-512|gssapi|"
                                    r"oauthbearer)\.)?(?P<config>.+)$")


class NotDynamicError(ConfigError):
    """A config that cannot change at run time, or not at this level (Kafka answers INVALID_REQUEST)."""


def dynamic_listener_config(name: str) -> str | None:
    """The config a ``listener.name.<l>.[<mechanism>.]<config>`` dynamic name sets, None for another name."""
    match = _DYNAMIC_LISTENER_NAME.match(name)
    if match is None:
        return None
    config = match["config"]
    allowed = config in DYNAMIC_LISTENER_CONFIGS or config in _LISTENER_MECHANISM_CONFIGS
    return config if allowed and config not in ("listeners", "listener.security.protocol.map") else None


def sensitive_config(name: str) -> bool:
    """Kafka's PASSWORD type: a broker config (or a ``listener.name.<l>.`` one) whose value is never shown."""
    base = dynamic_listener_config(name) or name
    return base in BROKER_CONFIGS and BROKER_CONFIGS[base].sensitive or base.endswith((".password", "jaas.config"))


def shown_configs(configs: Mapping[str, str]) -> dict[str, str]:
    """``configs`` fit for a log line: sensitive values replaced by ``[hidden]``."""
    return {name: "[hidden]" if sensitive_config(name) else value for name, value in configs.items()}


def validate_dynamic_broker_configs(configs: Mapping[str, str], *, per_broker: bool = True) -> None:
    """Kafka's DynamicBrokerConfig.validateConfigs: NotDynamicError naming the configs that cannot change at run
    time (or, ``per_broker`` False, not for every broker at once); ConfigError naming a value that does not
    parse.  A name Kafka does not define is a custom config (a plugin's) and may be set, as on Kafka."""
    listener_configs = {name: dynamic_listener_config(name) for name in configs}
    static = sorted(name for name in configs
                    if name in BROKER_CONFIGS and name not in DYNAMIC_BROKER_CONFIGS and not listener_configs[name])
    if static:
        raise NotDynamicError(f"Cannot update these configs dynamically: {static} (Kafka's dynamic broker configs "
                              f"only, e.g. log.retention.ms, message.max.bytes, min.insync.replicas)")
    unprefixed = sorted(name for name in configs if name in DYNAMIC_SECURITY_CONFIGS)
    if unprefixed:
        raise NotDynamicError(f"These security configs can be dynamically updated only per-listener using the "
                              f"listener prefix: {unprefixed}")
    if not per_broker:
        only_one = sorted(name for name in configs if name in PER_BROKER_CONFIGS or (
            listener_configs[name] and listener_configs[name] not in ("max.connections",
                                                                      "max.connection.creation.rate")))
        if only_one:
            raise NotDynamicError(f"Cannot update these configs at default cluster level, broker id must be "
                                  f"specified: {only_one}")
    for name, value in configs.items():
        base = listener_configs[name] or name
        defs = BROKER_CONFIGS if base in BROKER_CONFIGS else {base: ConfigDef(base, "", str, "a listener's class")}
        _check_from_client(defs, base, value)


class BrokerConfig:
    """Broker-wide settings (strings as given, parsed on access).

    Dynamic configs (``set_dynamic``: this broker's, then the cluster-wide default, as Kafka's
    ``/config/brokers/<id>`` and ``/config/brokers/<default>``) win over ``server.properties`` values.
    """

    def __init__(self, overrides: Mapping[str, object] | None = None) -> None:
        self._values: dict[str, str] = {}
        self._dynamic: dict[str, str] = {}
        self._dynamic_default: dict[str, str] = {}
        self._listener_overrides: dict[tuple[str, str], str] = {}
        for name, value in (overrides or {}).items():
            text = str(value).lower() if isinstance(value, bool) else str(value)
            listener, setting = _listener_setting(name)
            if listener is not None:  # listener.name.<listener>.<config>, as Kafka's per-listener overrides
                try:
                    _check(BROKER_CONFIGS, "sasl.jaas.config" if _MECHANISM_JAAS.match(setting) else setting, text)
                except ConfigError as exc:
                    raise ConfigError(f"{name}: {exc}") from None
                self._listener_overrides[(listener, setting)] = text
                continue
            _check(BROKER_CONFIGS, name, text)
            self._values[name] = text
        for row in TOPIC_CONFIGS.values():  # a broker-wide default may not turn on what this broker lacks
            if row.requires and row.default in self._values:
                self._check_requirement(row, row.default, self._values[row.default])

    def _check_requirement(self, row: TopicConfigDef, name: str, value: str) -> None:
        if row.parse(value) and not self._values.get(row.requires):
            raise ConfigError(f"{name}={value} needs {row.requires}, which is not set on this broker")

    def check_topic_configs(self, configs: Mapping[str, str]) -> dict[str, str]:
        """``validate_topic_configs``, and a config that needs a broker setting (TopicConfigDef.requires, such as
        confluent.value.schema.validation and schema.registry.listeners) is refused while that is unset."""
        checked = validate_topic_configs(configs)
        for name, value in checked.items():
            if TOPIC_CONFIGS[name].requires:
                self._check_requirement(TOPIC_CONFIGS[name], name, value)
        return checked

    def listener_override(self, listener: str, name: str) -> str | None:
        """``listener.name.<listener>.<name>`` when set (listener names are case-insensitive)."""
        return self._listener_overrides.get((listener.upper(), name))

    def raw(self, name: str) -> str:
        """The value in effect: a dynamic one only for APPLIED_DYNAMIC_CONFIGS (pylog does not act on the others)."""
        if name in APPLIED_DYNAMIC_CONFIGS:
            if name in self._dynamic:
                return self._dynamic[name]
            if name in self._dynamic_default:
                return self._dynamic_default[name]
        return self._values.get(name, BROKER_CONFIGS[name].default)

    def described(self, name: str) -> tuple[str, str]:
        """(value, source) as DescribeConfigs shows them: a stored dynamic value, whether pylog acts on it or not."""
        for layer, source in ((self._dynamic, "dynamic"), (self._dynamic_default, "dynamic-default")):
            if name in layer:
                return layer[name], source
        return self._values.get(name, BROKER_CONFIGS[name].default), "static" if name in self._values else "default"

    def layers(self, name: str) -> list[tuple[str, str]]:
        """Every (value, source) ``name`` has, the one in effect first, as Kafka lists a config's synonyms:
        this broker's dynamic value, the dynamic default, the static value, the default."""
        found = [(layer[name], source) for layer, source in ((self._dynamic, "dynamic"),
                                                             (self._dynamic_default, "dynamic-default"),
                                                             (self._values, "static")) if name in layer]
        return found + [(BROKER_CONFIGS[name].default, "default")]

    def set_dynamic(self, per_broker: Mapping[str, str], default: Mapping[str, str]) -> list[str]:
        """Replace the dynamic layers; entries that are not dynamic or do not parse are left out (returned)."""
        layers, dropped = [], []
        for given, is_broker in ((per_broker, True), (default, False)):
            kept = {}
            for name, value in given.items():
                try:
                    validate_dynamic_broker_configs({name: value}, per_broker=is_broker)
                except ConfigError as exc:
                    dropped.append(str(exc))
                    continue
                kept[name] = str(value)
            layers.append(kept)
        self._dynamic, self._dynamic_default = layers
        return dropped

    @property
    def dynamic(self) -> tuple[dict[str, str], dict[str, str]]:
        return dict(self._dynamic), dict(self._dynamic_default)

    def source(self, name: str) -> str:
        """Where the value DescribeConfigs shows comes from: dynamic (this broker), dynamic-default, static or
        default."""
        return self.described(name)[1]

    def get(self, name: str):
        return BROKER_CONFIGS[name].parse(self.raw(name))

    def is_set(self, name: str) -> bool:
        return name in self._values or (name in APPLIED_DYNAMIC_CONFIGS and (
            name in self._dynamic or name in self._dynamic_default))

    def topic_default(self, topic_config: str) -> str:
        """The value a topic gets for ``topic_config`` when it sets none itself."""
        broker_name = TOPIC_CONFIGS[topic_config].default
        if not self.is_set(broker_name):
            # Kafka's coarser spellings, used only when the *.ms name is not set
            for coarse, factor in _COARSER.get(broker_name, ()):
                if self.is_set(coarse):
                    value = int(self.raw(coarse))
                    return str(value * factor if value >= 0 else -1)
        return self.raw(broker_name)

    def effective_topic_configs(self, overrides: Mapping[str, str]) -> dict[str, str]:
        return {name: overrides.get(name, self.topic_default(name)) for name in TOPIC_CONFIGS}
