"""Source options: strings in, one typed and frozen ``SourceOptions`` out.

Theory of operation: Spark hands a Python data source its options as a
case-insensitive map of strings. ``parse_source_options`` reads that map once,
on the driver, and either returns a ``SourceOptions`` (a frozen, picklable
dataclass the readers and every ``InputPartition`` carry) or raises
``PylogOptionError`` naming the option and the values it accepts. Names,
defaults and messages follow Spark's built-in Kafka source
(``KafkaSourceProvider``), so switching ``format("kafka")`` to
``format("pylog")`` is one word.

Parsing does not know yet whether the query is a stream or a batch
(``DataSource.__init__`` runs at ``load()``); ``SourceOptions.for_stream()``
and ``for_batch()`` apply the mode's defaults and rules (``endingOffsets``
only in batch, ``startingOffsets=latest`` only in streams) when a reader is
built, without parsing the strings again.
"""
from __future__ import annotations

import difflib
import hashlib
import json
import logging
import re
from dataclasses import dataclass, replace
from typing import Mapping

from connector.errors import PylogOptionError
from connector.typed.spec import TYPED_SINK_OPTION_NAMES, TYPED_SOURCE_OPTION_NAMES

log = logging.getLogger(__name__)

EARLIEST = -2  # in offset JSON, as in Spark: -2 earliest, -1 latest
LATEST = -1

# What a start or end position is made of (``OffsetBound.kind``).
BOUND_EARLIEST = "earliest"
BOUND_LATEST = "latest"
BOUND_GROUP = "group"            # the consumer group's committed offsets (pylog only)
BOUND_OFFSETS = "offsets"        # per-partition offsets, -2/-1 allowed
BOUND_TIMESTAMPS = "timestamps"  # per-partition timestamps
BOUND_TIMESTAMP = "timestamp"    # one timestamp for every partition


@dataclass(frozen=True)
class OffsetBound:
    """Where a query starts or a batch read ends, before it is resolved against the brokers.

    ``per_partition`` holds ((topic, partition), value) pairs for ``offsets``
    (offsets, -2 earliest, -1 latest) and ``timestamps`` (milliseconds).
    """

    kind: str
    per_partition: tuple[tuple[tuple[str, int], int], ...] = ()
    timestamp: int | None = None

    def as_dict(self) -> dict[tuple[str, int], int]:
        return dict(self.per_partition)


@dataclass(frozen=True)
class SourceOptions:
    """Every source option, typed. Frozen and picklable: it travels to executors inside each InputPartition."""

    bootstrap_servers: str
    strategy: str                                  # "subscribe" | "subscribePattern" | "assign"
    topics: tuple[str, ...] = ()                   # subscribe
    pattern: str | None = None                     # subscribePattern
    assigned: tuple[tuple[str, int], ...] = ()     # assign
    starting: OffsetBound | None = None            # None: the mode's default (latest / earliest)
    ending: OffsetBound | None = None              # None: latest (batch only)
    timestamp_strategy: str = "error"              # startingOffsetsByTimestampStrategy
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000
    max_trigger_delay_set: bool = False
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    isolation_level: str = "read_committed"
    group_id: str = ""                             # groupId / kafka.group.id, else the subscription's hash
    group_id_set: bool = False                     # False: each query gets its own group (connector.source.readers)
    commit_offsets_to_group: bool = True
    group_fallback: str = "earliest"
    poll_timeout_ms: int = 120_000
    fetch_offset_num_retries: int = 3
    fetch_offset_retry_interval_ms: int = 1000
    bootstrap_timeout_ms: int = 10_000
    client_config: tuple[tuple[str, object], ...] = ()  # kafka-python keyword arguments, sorted
    # typed columns (connector.typed): valueFormat / keyFormat, the registry, mode; resolved on the driver
    value_spec: object = None                      # connector.typed.spec.ColumnSpec
    key_spec: object = None
    registry: object = None                        # connector.typed.registry_client.RegistryConfig or None
    permissive: bool = False                       # mode=PERMISSIVE
    value_typed: object = None                     # connector.typed.spec.ResolvedColumn, after resolve_typed()
    key_typed: object = None

    def resolve_typed(self) -> "SourceOptions":
        """Driver side, when the query is built: fetch the reader schemas of typed sides from the registry."""
        from connector.typed.spec import resolve
        topics = self.topics if self.strategy == "subscribe" else tuple(dict.fromkeys(t for t, _ in self.assigned))
        return replace(self, value_typed=resolve(self.value_spec, self.registry, topics, sink=False),
                       key_typed=resolve(self.key_spec, self.registry, topics, sink=False))

    def for_stream(self) -> "SourceOptions":
        """These options for a streaming read: startingOffsets defaults to latest; ending options are refused."""
        if self.ending is not None:
            if self.ending.kind in (BOUND_TIMESTAMP, BOUND_TIMESTAMPS):
                raise PylogOptionError("ending timestamp not valid in streaming queries")
            raise PylogOptionError("ending offset not valid in streaming queries")
        if self.starting is not None and self.starting.kind == BOUND_GROUP and not self.group_id_set:
            raise PylogOptionError("startingOffsets=group needs the option 'groupId' (the consumer group to start "
                                   "from): by default every query commits to a consumer group of its own")
        return replace(self, starting=self.starting or OffsetBound(BOUND_LATEST))

    def for_batch(self) -> "SourceOptions":
        """These options for a batch read: earliest to latest by default; latest starts are refused."""
        chosen = replace(self, starting=self.starting or OffsetBound(BOUND_EARLIEST),
                         ending=self.ending or OffsetBound(BOUND_LATEST))
        _check_batch_bounds(chosen.starting, chosen.ending)
        for name, present in (("maxOffsetsPerTrigger", self.max_offsets_per_trigger is not None),
                              ("minOffsetsPerTrigger", self.min_offsets_per_trigger is not None),
                              ("maxTriggerDelay", self.max_trigger_delay_set)):
            if present:
                log.warning("%s option ignored in batch queries", name)
        return chosen

    @property
    def client_kwargs(self) -> dict[str, object]:
        return dict(self.client_config)

    def subscription(self) -> str:
        """A short human description of what the query reads, e.g. ``subscribe=[events]``."""
        if self.strategy == "subscribe":
            return f"subscribe={list(self.topics)}"
        if self.strategy == "subscribePattern":
            return f"subscribePattern={self.pattern}"
        return f"assign={[f'{t}-{p}' for t, p in self.assigned]}"

    def matches(self, topic: str) -> bool:
        """True when ``topic`` belongs to the subscription (subscribe / subscribePattern)."""
        if self.strategy == "subscribe":
            return topic in self.topics
        if self.strategy == "subscribePattern":
            return re.fullmatch(self.pattern, topic) is not None
        return any(t == topic for t, _ in self.assigned)


# kafka.* options whose Java name differs from kafka-python's keyword argument.
_JAVA_TO_PYTHON = {
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.kerberos.service.name": "sasl_kerberos_service_name",
    "sasl.kerberos.domain.name": "sasl_kerberos_domain_name",
    "ssl.truststore.location": "ssl_cafile",
    "ssl.ca.location": "ssl_cafile",
    "ssl.keystore.location": "ssl_certfile",
    "ssl.keystore.key.location": "ssl_keyfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
    "ssl.keystore.password": "ssl_password",
    "ssl.crl.location": "ssl_crlfile",
    "fetch.max.bytes": "fetch_max_bytes",
    "max.partition.fetch.bytes": "max_partition_fetch_bytes",
    "fetch.min.bytes": "fetch_min_bytes",
    "fetch.max.wait.ms": "fetch_max_wait_ms",
    "request.timeout.ms": "request_timeout_ms",
    "client.id": "client_id",
    "receive.buffer.bytes": "receive_buffer_bytes",
    "send.buffer.bytes": "send_buffer_bytes",
    "metadata.max.age.ms": "metadata_max_age_ms",
    "retry.backoff.ms": "retry_backoff_ms",
    "reconnect.backoff.ms": "reconnect_backoff_ms",
    "reconnect.backoff.max.ms": "reconnect_backoff_max_ms",
    "connections.max.idle.ms": "connections_max_idle_ms",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "ssl.truststore.type": "ssl_truststore_type",          # pylog's own: PEM, JKS or PKCS12 (connector.wire)
    "ssl.truststore.password": "ssl_truststore_password",
}
_INT_CLIENT_KWARGS = {
    "fetch_max_bytes", "max_partition_fetch_bytes", "fetch_min_bytes", "fetch_max_wait_ms",
    "request_timeout_ms", "receive_buffer_bytes", "send_buffer_bytes", "metadata_max_age_ms",
    "retry_backoff_ms", "reconnect_backoff_ms", "reconnect_backoff_max_ms", "connections_max_idle_ms",
}
# Java settings with no kafka-python counterpart that are safe to ignore (logged, not rejected).
_IGNORED_JAVA = {"key.deserializer.encoding"}
_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_ISOLATION_LEVELS = ("read_committed", "read_uncommitted")
_STRATEGIES = ("assign", "subscribe", "subscribepattern")
_TIME_UNITS = {"us": 0.001, "ms": 1, "s": 1000, "sec": 1000, "m": 60_000, "min": 60_000,
               "h": 3_600_000, "d": 86_400_000}

_AUTO_OFFSET_RESET_MESSAGE = (
    "Kafka option 'auto.offset.reset' is not supported.\n"
    "Instead set the source option 'startingOffsets' to 'earliest' or 'latest'\n"
    "to specify where to start. Structured Streaming manages which offsets are consumed\n"
    "internally, rather than relying on the kafkaConsumer to do it. This will ensure that no\n"
    "data is missed when new topics/partitions are dynamically subscribed. Note that\n"
    "'startingOffsets' only applies when a new Streaming query is started, and\n"
    "that resuming will always pick up from where the query left off. See the docs for more\n"
    "details.")
CUSTOM_GROUP_ID_MESSAGE = (
    "Kafka option 'kafka.group.id' has been set on this query, it is not recommended to set this "
    "option. This option is unsafe to use since multiple concurrent queries or sources using the "
    "same group id will interfere with each other as they are part of the same consumer group. "
    "pylog commits the query's progress to this group instead of the default 'groupId'.")


def parse_source_options(options: Mapping[str, str]) -> SourceOptions:
    """Parse Spark's option map (keys in any case) into ``SourceOptions``; raise ``PylogOptionError`` when invalid."""
    params = {str(k).lower(): str(v) for k, v in options.items()}

    strategy, topics, pattern, assigned = _strategy(params)
    client_config, kafka_group_id = _client_config(params)
    bootstrap = params.get("kafka.bootstrap.servers", "").strip()
    if not bootstrap:
        raise PylogOptionError(
            "Option 'kafka.bootstrap.servers' must be specified for configuring Kafka consumer "
            "(a comma-separated list of host:port)")

    timestamp_strategy = _choice(params, "startingoffsetsbytimestampstrategy", "startingOffsetsByTimestampStrategy",
                                 ("error", "latest"), "error")
    starting = _bound(params, "startingtimestamp", "startingoffsetsbytimestamp", "startingoffsets",
                      ("startingTimestamp", "startingOffsetsByTimestamp", "startingOffsets"), allow_group=True)
    ending = _bound(params, "endingtimestamp", "endingoffsetsbytimestamp", "endingoffsets",
                    ("endingTimestamp", "endingOffsetsByTimestamp", "endingOffsets"), allow_group=False)

    max_per_trigger = _positive_int(params, "maxoffsetspertrigger", "maxOffsetsPerTrigger")
    min_per_trigger = _positive_int(params, "minoffsetspertrigger", "minOffsetsPerTrigger")
    if max_per_trigger is not None and min_per_trigger is not None and min_per_trigger > max_per_trigger:
        raise PylogOptionError(f"The value of minOffsetPerTrigger({min_per_trigger}) is higher than the "
                               f"maxOffsetsPerTrigger({max_per_trigger}).")
    min_partitions = _positive_int(params, "minpartitions", "minPartitions", message="minPartitions must be positive")
    max_records = _positive_int(params, "maxrecordsperpartition", "maxRecordsPerPartition",
                                message="maxRecordsPerPartition must be positive")

    isolation = params.pop("kafka.isolation.level", "read_committed").strip().lower()
    if isolation not in _ISOLATION_LEVELS:
        raise PylogOptionError(f"Option 'kafka.isolation.level' must be one of {', '.join(_ISOLATION_LEVELS)}, "
                               f"got '{isolation}'")

    from connector.typed.spec import MODES, parse_column_options, parse_registry_options
    value_spec = parse_column_options(params, "value", sink=False)
    key_spec = parse_column_options(params, "key", sink=False)
    mode = params.get("mode", "FAILFAST").strip().upper()
    if mode not in MODES:
        raise PylogOptionError(f"Option 'mode' must be one of {', '.join(MODES)}, got '{params['mode']}'")

    explicit_group = params.get("groupid", "").strip() or kafka_group_id
    prefix = params.get("groupidprefix", "").strip() or "pylog"
    group_id = explicit_group or default_group_id(strategy, topics, pattern, assigned, prefix)

    return SourceOptions(
        bootstrap_servers=bootstrap,
        strategy=strategy,
        topics=topics,
        pattern=pattern,
        assigned=assigned,
        starting=starting,
        ending=ending,
        timestamp_strategy=timestamp_strategy,
        max_offsets_per_trigger=max_per_trigger,
        min_offsets_per_trigger=min_per_trigger,
        max_trigger_delay_ms=_duration_ms(params, "maxtriggerdelay", "maxTriggerDelay", "15m"),
        max_trigger_delay_set="maxtriggerdelay" in params,
        min_partitions=min_partitions,
        max_records_per_partition=max_records,
        fail_on_data_loss=_boolean(params, "failondataloss", "failOnDataLoss", True),
        include_headers=_boolean(params, "includeheaders", "includeHeaders", False),
        isolation_level=isolation,
        group_id=group_id,
        group_id_set=bool(explicit_group),
        commit_offsets_to_group=_boolean(params, "commitoffsetstogroup", "commitOffsetsToGroup", True),
        group_fallback=_choice(params, "groupfallback", "groupFallback", ("earliest", "latest", "error"), "earliest"),
        poll_timeout_ms=_positive_int(params, "kafkaconsumer.polltimeoutms", "kafkaConsumer.pollTimeoutMs") or 120_000,
        fetch_offset_num_retries=_positive_int(params, "fetchoffset.numretries", "fetchOffset.numRetries") or 3,
        fetch_offset_retry_interval_ms=_non_negative_int(params, "fetchoffset.retryintervalms",
                                                         "fetchOffset.retryIntervalMs", 1000),
        bootstrap_timeout_ms=_positive_int(params, "bootstraptimeoutms", "bootstrapTimeoutMs") or 10_000,
        client_config=tuple(sorted(client_config.items())),
        value_spec=value_spec,
        key_spec=key_spec,
        registry=parse_registry_options(params, client_config),
        permissive=mode == "PERMISSIVE",
    )


def default_group_id(strategy: str, topics, pattern, assigned, prefix: str = "pylog") -> str:
    """``<groupIdPrefix, default pylog>-<12 hex of the subscription>``: the stem of each query's default group.

    Python data sources are not told the query's checkpoint location, so a
    streaming query's default group is this stem plus a token drawn when the
    query starts, carried in its checkpointed offsets (``connector.source.readers``);
    checkpoints written before that use the stem alone.

    (Checked against pyspark 4.3: ``PythonScan.toMicroBatchStream`` drops the
    checkpoint location it receives, the streaming source runner gets only the
    ``readStream`` options, and the data source is built at ``load()``, before
    ``writeStream`` names a checkpoint; no conf carries the query's location.
    Sinks, unlike sources, do receive ``checkpointLocation`` and ``queryName``.)
    """
    if strategy == "subscribe":
        spec = "subscribe=" + ",".join(sorted(topics))
    elif strategy == "subscribePattern":
        spec = "subscribePattern=" + pattern
    else:
        spec = "assign=" + ",".join(f"{t}:{p}" for t, p in sorted(assigned))
    return f"{prefix}-" + hashlib.sha256(spec.encode()).hexdigest()[:12]


# Every option the source and the sink read (kafka.* aside), as users spell them; checked by warn_unknown_options.
SOURCE_OPTION_NAMES = (
    "assign", "subscribe", "subscribePattern", "startingOffsets", "startingOffsetsByTimestamp", "startingTimestamp",
    "startingOffsetsByTimestampStrategy", "endingOffsets", "endingOffsetsByTimestamp", "endingTimestamp",
    "maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay", "minPartitions", "maxRecordsPerPartition",
    "failOnDataLoss", "includeHeaders", "groupId", "commitOffsetsToGroup", "groupFallback",
    "kafkaConsumer.pollTimeoutMs", "fetchOffset.numRetries", "fetchOffset.retryIntervalMs", "bootstrapTimeoutMs",
    "groupIdPrefix", *TYPED_SOURCE_OPTION_NAMES,
)
SINK_OPTION_NAMES = (
    "topic", "deliveryGuarantee", "sinkId", "transactionTimeoutMs", "sinkLogTopic", "bootstrapTimeoutMs",
    *TYPED_SINK_OPTION_NAMES,
)
# connector.foreach_batch's internal options: the streaming query and batch a df.write belongs to.
QUERY_ID_OPTION = "pylog.queryId"
BATCH_ID_OPTION = "pylog.batchId"
# Options Spark itself puts into a data source's option map, and connector.foreach_batch's internal ones.
_SPARK_OPTION_NAMES = ("path", "paths", "checkpointLocation", "queryName", QUERY_ID_OPTION, BATCH_ID_OPTION)


def unknown_options(options: Mapping[str, str], known: tuple[str, ...]) -> list[tuple[str, str | None]]:
    """[(option as given, closest known name or None)] for every option of ``options`` that is not read.

    Spark ignores options a source does not know; so does pylog, but a
    misspelled one (``startingOffset``) silently changes what a query does, so
    the readers and writers warn once per query (``warn_unknown_options``).
    ``kafka.*`` options are checked where they are mapped (``_client_config``).
    """
    names = {name.lower(): name for name in (*known, *_SPARK_OPTION_NAMES)}
    found = []
    for key in options:
        lowered = str(key).lower()
        if lowered in names or lowered.startswith("kafka."):
            continue
        close = difflib.get_close_matches(lowered, list(names), n=1, cutoff=0.6)
        found.append((str(key), names[close[0]] if close else None))
    return sorted(found)


_WARNED: set[tuple] = set()


def warn_unknown_options(options: Mapping[str, str], known: tuple[str, ...], what: str) -> None:
    """Log one WARNING per unknown option, naming the closest known one; once per process for the same options.

    Spark builds a writer more than once per query in the same Python worker,
    hence the memory of what was already said.
    """
    for given, closest in unknown_options(options, known):
        said = (what, given, tuple(sorted((str(k).lower(), str(v)) for k, v in options.items())))
        if said in _WARNED:
            continue
        _WARNED.add(said)
        hint = f"; did you mean '{closest}'?" if closest else ""
        log.warning("pylog %s: unknown option '%s' is ignored%s", what, given, hint)


def _strategy(params):
    chosen = [k for k in _STRATEGIES if k in params]
    names = "assign, subscribe, subscribePattern"
    if not chosen:
        raise PylogOptionError(
            f"One of the following options must be specified for Kafka source: {names}. See the docs for more details.")
    if len(chosen) > 1:
        raise PylogOptionError(
            f"Only one of the following options can be specified for Kafka source: {names}. "
            "See the docs for more details.")
    key = chosen[0]
    value = params[key]
    if key == "assign":
        if not value.strip().startswith("{"):
            raise PylogOptionError(
                f"No topicpartitions to assign as specified value for option 'assign' is '{value}'")
        assigned = _partition_json(value, "assign")
        return "assign", (), None, tuple(sorted(assigned))
    if key == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise PylogOptionError(f"No topics to subscribe to as specified value for option 'subscribe' is '{value}'")
        return "subscribe", topics, None, ()
    pattern = value.strip()
    if not pattern:
        raise PylogOptionError(
            f"Pattern to subscribe is empty as specified value for option 'subscribePattern' is '{value}'")
    try:
        re.compile(pattern)
    except re.error as exc:
        raise PylogOptionError(f"Option 'subscribePattern' must be a regular expression, got '{value}': {exc}")
    return "subscribePattern", (), pattern, ()


def _partition_json(value: str, name: str) -> list[tuple[str, int]]:
    example = '{"topicA":[0,1],"topicB":[0,1]}'
    try:
        parsed = json.loads(value)
        if not isinstance(parsed, dict) or not all(isinstance(v, list) for v in parsed.values()):
            raise ValueError
        pairs = [(str(t), int(p)) for t, parts in parsed.items() for p in parts]
    except (ValueError, TypeError):
        raise PylogOptionError(f"Option '{name}': expected e.g. {example}, got {value}") from None
    if not pairs:
        raise PylogOptionError(f"No topicpartitions to assign as specified value for option '{name}' is '{value}'")
    return pairs


def _per_partition_json(value: str, name: str, example: str) -> tuple[tuple[tuple[str, int], int], ...]:
    try:
        parsed = json.loads(value)
        if not isinstance(parsed, dict) or not all(isinstance(v, dict) for v in parsed.values()):
            raise ValueError
        pairs = []
        for topic, parts in parsed.items():
            for partition, number in parts.items():
                if isinstance(number, bool) or not isinstance(number, int):
                    raise ValueError
                pairs.append(((str(topic), int(partition)), number))
    except (ValueError, TypeError):
        raise PylogOptionError(f"Option '{name}': expected e.g. {example}, got {value}") from None
    return tuple(sorted(pairs))


def _bound(params, ts_key, by_ts_key, offsets_key, names, *, allow_group) -> OffsetBound | None:
    """Spark's precedence: a global timestamp, then per-partition timestamps, then offsets."""
    ts_name, by_ts_name, offsets_name = names
    if ts_key in params:
        raw = params[ts_key].strip()
        try:
            return OffsetBound(BOUND_TIMESTAMP, timestamp=int(raw))
        except ValueError:
            raise PylogOptionError(f"Option '{ts_name}': expected a single long value "
                                   f"(milliseconds since the epoch), got {raw}") from None
    if by_ts_key in params:
        return OffsetBound(BOUND_TIMESTAMPS, _per_partition_json(
            params[by_ts_key], by_ts_name, '{"topicA":{"0":1000,"1":1000}}'))
    if offsets_key not in params:
        return None
    raw = params[offsets_key].strip()
    lowered = raw.lower()
    if lowered in (BOUND_EARLIEST, BOUND_LATEST):
        return OffsetBound(lowered)
    if lowered == BOUND_GROUP:
        if not allow_group:
            raise PylogOptionError(f"Option '{offsets_name}' accepts earliest, latest or a JSON of offsets, "
                                   f"not 'group'")
        return OffsetBound(BOUND_GROUP)
    accepted = "earliest, latest, group" if allow_group else "earliest, latest"
    if not raw.startswith("{"):
        raise PylogOptionError(f"Option '{offsets_name}' must be one of {accepted}, or a JSON like "
                               f'{{"topicA":{{"0":23,"1":-1}}}} (-2 earliest, -1 latest), got {raw}')
    pairs = _per_partition_json(raw, offsets_name, '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}')
    for (topic, partition), offset in pairs:
        if offset < EARLIEST:
            raise PylogOptionError(f"Option '{offsets_name}': offset {offset} of {topic}-{partition} is invalid; "
                                   "use an offset >= 0, -2 (earliest) or -1 (latest)")
    return OffsetBound(BOUND_OFFSETS, pairs)


def _check_batch_bounds(starting: OffsetBound, ending: OffsetBound) -> None:
    if starting.kind == BOUND_LATEST:
        raise PylogOptionError("starting offset can't be latest for batch queries on Kafka")
    if starting.kind == BOUND_GROUP:
        raise PylogOptionError("startingOffsets=group is only valid in streaming queries")
    for (topic, partition), offset in starting.per_partition if starting.kind == BOUND_OFFSETS else ():
        if offset == LATEST:
            raise PylogOptionError(
                f"startingOffsets for {topic}-{partition} can't be latest for batch queries on Kafka")
    if ending.kind == BOUND_EARLIEST:
        raise PylogOptionError("ending offset can't be earliest for batch queries on Kafka")
    for (topic, partition), offset in ending.per_partition if ending.kind == BOUND_OFFSETS else ():
        if offset == EARLIEST:
            raise PylogOptionError(
                f"ending offset for {topic}-{partition} can't be earliest for batch queries on Kafka")
    if starting.kind == ending.kind and starting.kind in (BOUND_OFFSETS, BOUND_TIMESTAMPS):
        start, end = starting.as_dict(), ending.as_dict()
        if set(start) != set(end):
            raise PylogOptionError(
                "Different topic partitions in starting offsets and ending offsets: "
                f"{sorted(f'{t}-{p}' for t, p in start)} vs {sorted(f'{t}-{p}' for t, p in end)}")
        for tp, first in start.items():
            if first >= 0 and end[tp] >= 0 and first > end[tp]:
                raise PylogOptionError(f"The start {starting.kind[:-1]} ({first}) for {tp[0]}-{tp[1]} is greater "
                                       f"than the end {ending.kind[:-1]} ({end[tp]})")


def _client_config(params) -> tuple[dict[str, object], str | None]:
    """kafka.* options -> kafka-python keyword arguments; reject what Spark's source rejects."""
    if "kafka.auto.offset.reset" in params:
        raise PylogOptionError(_AUTO_OFFSET_RESET_MESSAGE)
    if "kafka.key.deserializer" in params:
        raise PylogOptionError(
            "Kafka option 'key.deserializer' is not supported as keys are deserialized as byte arrays with "
            "ByteArrayDeserializer. Use DataFrame operations to explicitly deserialize the keys.")
    if "kafka.value.deserializer" in params:
        raise PylogOptionError(
            "Kafka option 'value.deserializer' is not supported as values are deserialized as byte arrays with "
            "ByteArrayDeserializer. Use DataFrame operations to explicitly deserialize the values.")
    for unsupported in ("enable.auto.commit", "interceptor.classes"):
        if f"kafka.{unsupported}" in params:
            raise PylogOptionError(f"Kafka option '{unsupported}' is not supported")
    kafka_group_id = None
    if "kafka.group.id" in params:
        log.warning(CUSTOM_GROUP_ID_MESSAGE)
        kafka_group_id = params["kafka.group.id"].strip() or None
    config: dict[str, object] = {}
    for key, value in params.items():
        if not key.startswith("kafka.") or key in ("kafka.bootstrap.servers", "kafka.group.id",
                                                  "kafka.isolation.level"):
            continue
        name = key[len("kafka."):]
        if name == "sasl.jaas.config":  # Kafka's JAAS string: PlainLoginModule or ScramLoginModule
            from broker_sim.config import ConfigError
            from broker_sim.security.sasl import jaas_credentials
            try:
                _, config["sasl_plain_username"], config["sasl_plain_password"] = jaas_credentials(
                    value, "Option 'kafka.sasl.jaas.config'")
            except ConfigError as exc:
                raise PylogOptionError(str(exc)) from None
            continue
        if name == "ssl.endpoint.identification.algorithm":
            config["ssl_check_hostname"] = value.strip().lower() == "https"
            continue
        if name in _IGNORED_JAVA:
            continue
        if name == "ssl.keystore.type":
            if value.strip().upper() != "PEM":
                raise PylogOptionError(_PEM_KEYSTORE_MESSAGE.format(value.strip()))
            continue
        python_name = _JAVA_TO_PYTHON.get(name)
        if python_name is None:
            log.warning("Kafka option 'kafka.%s' is not used by pylog and is ignored", name)
            continue
        if python_name in _INT_CLIENT_KWARGS:
            try:
                config[python_name] = int(value)
            except ValueError:
                raise PylogOptionError(f"Option 'kafka.{name}' must be an integer, got '{value}'") from None
        else:
            config[python_name] = value.strip()
    protocol = str(config.get("security_protocol", "PLAINTEXT")).upper()
    if protocol not in _SECURITY_PROTOCOLS:
        raise PylogOptionError(f"Option 'kafka.security.protocol' must be one of {', '.join(_SECURITY_PROTOCOLS)}, "
                               f"got '{config['security_protocol']}'")
    if "security_protocol" in config:
        config["security_protocol"] = protocol
    _check_truststore(config)
    if protocol.startswith("SASL_"):
        mechanism = str(config.get("sasl_mechanism", "GSSAPI")).upper()
        if mechanism not in _SASL_MECHANISMS:
            raise PylogOptionError(f"Option 'kafka.sasl.mechanism' must be one of {', '.join(_SASL_MECHANISMS)} "
                                   f"with kafka.security.protocol={protocol}, got '{mechanism}'")
        config["sasl_mechanism"] = mechanism
        if not config.get("sasl_plain_username") or "sasl_plain_password" not in config:
            raise PylogOptionError(f"kafka.security.protocol={protocol} needs credentials: set kafka.sasl.jaas.config "
                                   f"(e.g. org.apache.kafka.common.security.scram.ScramLoginModule required "
                                   f"username=\"alice\" password=\"...\";) or kafka.sasl.username and "
                                   f"kafka.sasl.password")
    return config, kafka_group_id


_PEM_KEYSTORE_MESSAGE = (
    "Option 'kafka.ssl.keystore.type'={} is not supported: pylog reads a client certificate and key as PEM "
    "(kafka.ssl.keystore.location, kafka.ssl.key.location). Convert a JKS or PKCS12 keystore with "
    "`keytool -importkeystore -srckeystore client.jks -destkeystore client.p12 -deststoretype PKCS12` and "
    "`openssl pkcs12 -in client.p12 -nodes -out client.pem`")


def _check_truststore(config: dict) -> None:
    """Read a JKS / PKCS12 truststore once here, on the driver, so a wrong type, password or file fails the
    query before it starts; a type not given is recognised from the file (Java's default is not PEM)."""
    from connector.wire import TRUSTSTORE_TYPES, truststore_pem, truststore_type
    given = str(config.get("ssl_truststore_type") or "").strip().upper()
    if given and given not in TRUSTSTORE_TYPES:
        raise PylogOptionError(f"Option 'kafka.ssl.truststore.type' must be one of {', '.join(TRUSTSTORE_TYPES)}, "
                               f"got '{config['ssl_truststore_type']}'")
    location = config.get("ssl_cafile")
    try:
        found = truststore_type(str(location)) if location else None
    except OSError:
        return  # not on this machine: the connection check names the file (connector.wire.check_login)
    if found is None:
        return
    if given and given != found and "PEM" in (given, found):
        raise PylogOptionError(f"Option 'kafka.ssl.truststore.type' is {given} but {location} is a {found} file")
    chosen = given or found
    if chosen != "PEM":
        config["ssl_truststore_type"] = chosen
        try:
            truststore_pem(str(location), chosen, config.get("ssl_truststore_password"))
        except ValueError as exc:
            raise PylogOptionError(f"Option 'kafka.ssl.truststore.location': {exc}") from None


def _boolean(params, key, name, default: bool) -> bool:
    if key not in params:
        return default
    value = params[key].strip().lower()
    if value not in ("true", "false"):
        raise PylogOptionError(f"Option '{name}' must be true or false, got '{params[key]}'")
    return value == "true"


def _choice(params, key, name, accepted, default):
    if key not in params:
        return default
    value = params[key].strip().lower()
    if value not in accepted:
        raise PylogOptionError(f"Option '{name}' must be one of {', '.join(accepted)}, got '{params[key]}'")
    return value


def _positive_int(params, key, name, message=None):
    if key not in params:
        return None
    try:
        value = int(params[key].strip())
    except ValueError:
        raise PylogOptionError(f"Option '{name}' must be a positive integer, got '{params[key]}'") from None
    if value <= 0:
        raise PylogOptionError(message or f"Option '{name}' must be a positive integer, got '{params[key]}'")
    return value


def _non_negative_int(params, key, name, default):
    if key not in params:
        return default
    try:
        value = int(params[key].strip())
    except ValueError:
        value = -1
    if value < 0:
        raise PylogOptionError(f"Option '{name}' must be a non-negative integer, got '{params[key]}'")
    return value


def _duration_ms(params, key, name, default: str) -> int:
    raw = params.get(key, default).strip().lower()
    match = re.fullmatch(r"(\d+)\s*([a-z]*)", raw)
    if not match or (match.group(2) and match.group(2) not in _TIME_UNITS):
        raise PylogOptionError(f"Option '{name}' must be a duration such as 500ms, 30s, 15m, 1h or 1d "
                               f"(units: {', '.join(_TIME_UNITS)}), got '{params.get(key)}'")
    return int(int(match.group(1)) * _TIME_UNITS[match.group(2) or "ms"])


# -- sink ---------------------------------------------------------------------------------------------------------

EXACTLY_ONCE = "exactly_once"
AT_LEAST_ONCE = "at_least_once"
SINK_LOG_TOPIC = "__pylog_sink_log"
_COMPRESSION = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
# Producer settings pylog decides itself: refusing them beats silently producing something else.
_SINK_REFUSED = {
    "key.serializer": "Kafka option 'key.serializer' is not supported as keys are serialized with "
                      "ByteArraySerializer. Use DataFrame operations to explicitly serialize the keys into either "
                      "strings or byte arrays.",
    "value.serializer": "Kafka option 'value.serializer' is not supported as values are serialized with "
                        "ByteArraySerializer. Use DataFrame operations to explicitly serialize the values into "
                        "either strings or byte arrays.",
    "transactional.id": "Kafka option 'transactional.id' is not supported: pylog gives every task its own "
                        "transactional id derived from the option 'sinkId'.",
    "enable.idempotence": "Kafka option 'enable.idempotence' is not supported: pylog's producers are always "
                          "idempotent (deliveryGuarantee=at_least_once) or transactional (exactly_once).",
    "interceptor.classes": "Kafka option 'interceptor.classes' is not supported",
}


@dataclass(frozen=True)
class SinkOptions:
    """Every sink option, typed. Frozen and picklable: the writer carries it to every task.

    ``sink_id`` prefixes the transactional ids of exactly-once tasks and keys the sink's
    records in the sink log (``connector.sink.sink_log``); see ``default_sink_id``.
    """

    bootstrap_servers: str
    topic: str | None = None                        # the 'topic' option; wins over a topic column
    delivery_guarantee: str = EXACTLY_ONCE
    sink_id: str = ""
    transaction_timeout_ms: int = 900_000
    sink_log_topic: str = SINK_LOG_TOPIC
    compression: int = 0                            # record batch codec id (kafka.compression.type)
    batch_bytes: int = 1_000_000                    # kafka.batch.size: largest record batch built
    request_bytes: int = 4 << 20                    # kafka.max.request.size: largest Produce request sent
    request_timeout_ms: int = 30_000                # kafka.request.timeout.ms
    delivery_timeout_ms: int = 120_000              # kafka.delivery.timeout.ms: how long a write retries
    bootstrap_timeout_ms: int = 10_000              # bootstrapTimeoutMs: first connection, before any write
    client_config: tuple[tuple[str, object], ...] = ()  # kafka-python style keyword arguments, sorted
    # typed columns (connector.typed): valueFormat / keyFormat and their schemas, resolved on the driver
    value_spec: object = None                       # connector.typed.spec.ColumnSpec
    key_spec: object = None
    registry: object = None                         # connector.typed.registry_client.RegistryConfig or None
    auto_register: bool = True                      # auto.register.schemas
    use_latest: bool = False                        # use.latest.version
    normalize: bool = False                         # normalize.schemas
    value_typed: object = None                      # connector.typed.spec.ResolvedColumn, after resolve_typed()
    key_typed: object = None

    def resolve_typed(self, schema) -> "SinkOptions":
        """Driver side, before a job or micro-batch: register (or look up) the writer schema of each typed side
        of the DataFrame ``schema``; its id goes into every record the tasks write."""
        from connector.typed.spec import resolve
        fields = {f.name.lower(): f for f in schema.fields}
        topics = (self.topic,) if self.topic else ()
        resolved = {}
        for side, spec in (("value", self.value_spec), ("key", self.key_spec)):
            if spec is None or not spec.typed or side not in fields:
                continue
            resolved[side] = resolve(spec, self.registry, topics, sink=True, derived_type=fields[side].dataType,
                                     auto_register=self.auto_register, use_latest=self.use_latest,
                                     normalize=self.normalize)
        return replace(self, value_typed=resolved.get("value"), key_typed=resolved.get("key"))

    @property
    def exactly_once(self) -> bool:
        return self.delivery_guarantee == EXACTLY_ONCE

    @property
    def client_kwargs(self) -> dict[str, object]:
        return dict(self.client_config)


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Parse Spark's option map (keys in any case) into ``SinkOptions``; raise ``PylogOptionError`` when invalid."""
    params = {str(k).lower(): str(v) for k, v in options.items()}
    bootstrap = params.get("kafka.bootstrap.servers", "").strip()
    if not bootstrap:
        raise PylogOptionError(
            "Option 'kafka.bootstrap.servers' must be specified for configuring Kafka producer "
            "(a comma-separated list of host:port)")
    for name, message in _SINK_REFUSED.items():
        if f"kafka.{name}" in params:
            raise PylogOptionError(message)
    acks = params.pop("kafka.acks", "all").strip().lower()
    if acks not in ("all", "-1"):
        raise PylogOptionError(f"Option 'kafka.acks' must be all (-1): pylog's producers are idempotent or "
                               f"transactional, which Kafka allows only with acks=all; got '{acks}'")
    compression = params.pop("kafka.compression.type", "none").strip().lower()
    if compression not in _COMPRESSION:
        raise PylogOptionError(f"Option 'kafka.compression.type' must be one of {', '.join(_COMPRESSION)}, "
                               f"got '{compression}'")
    sizes = {}
    for key, name, default in (("kafka.batch.size", "kafka.batch.size", 1_000_000),
                               ("kafka.max.request.size", "kafka.max.request.size", 4 << 20),
                               ("kafka.delivery.timeout.ms", "kafka.delivery.timeout.ms", 120_000)):
        sizes[key] = _positive_int(params, key, name) or default
        params.pop(key, None)
    for ignored in ("kafka.linger.ms", "kafka.buffer.memory", "kafka.max.in.flight.requests.per.connection",
                    "kafka.retries", "kafka.key.serializer.encoding"):
        if params.pop(ignored, None) is not None:
            log.warning("Kafka option '%s' has no effect on the pylog sink and is ignored", ignored)

    topic = params.get("topic", "").strip() or None
    sink_id = params.get("sinkid", "").strip()
    if "sinkid" in params and not re.fullmatch(r"[A-Za-z0-9._-]{1,100}", sink_id):
        raise PylogOptionError(f"Option 'sinkId' must be 1-100 characters of letters, digits, '.', '_' and '-', "
                               f"got '{params['sinkid']}'")
    log_topic = params.get("sinklogtopic", SINK_LOG_TOPIC).strip()
    if not re.fullmatch(r"[A-Za-z0-9._-]{1,249}", log_topic):
        raise PylogOptionError(f"Option 'sinkLogTopic' must be a valid topic name, got '{params.get('sinklogtopic')}'")
    # The sink shares the source's kafka.* mapping (TLS, client id, timeouts) but none of its consumer rules.
    client_params = {k: v for k, v in params.items() if k.startswith("kafka.")
                     and k not in ("kafka.group.id", "kafka.isolation.level")}
    client_config, _ = _client_config(client_params)
    request_timeout = int(client_config.get("request_timeout_ms", 30_000))
    from connector.typed.spec import parse_column_options, parse_registry_options
    auto_register = _boolean(params, "auto.register.schemas", "auto.register.schemas", True)
    use_latest = _boolean(params, "use.latest.version", "use.latest.version", False)
    if auto_register and use_latest and "auto.register.schemas" in params:
        raise PylogOptionError("Options 'auto.register.schemas' and 'use.latest.version' cannot both be true "
                               "(as in Confluent's serializers): set auto.register.schemas=false to write with the "
                               "subject's latest version")
    return SinkOptions(
        bootstrap_servers=bootstrap,
        topic=topic,
        delivery_guarantee=_choice(params, "deliveryguarantee", "deliveryGuarantee", (EXACTLY_ONCE, AT_LEAST_ONCE),
                                   EXACTLY_ONCE),
        sink_id=sink_id or default_sink_id(topic),
        transaction_timeout_ms=_positive_int(params, "transactiontimeoutms", "transactionTimeoutMs") or 900_000,
        sink_log_topic=log_topic,
        compression=_COMPRESSION[compression],
        batch_bytes=sizes["kafka.batch.size"],
        request_bytes=max(sizes["kafka.max.request.size"], sizes["kafka.batch.size"] + 1024),
        request_timeout_ms=request_timeout,
        delivery_timeout_ms=sizes["kafka.delivery.timeout.ms"],
        bootstrap_timeout_ms=_positive_int(params, "bootstraptimeoutms", "bootstrapTimeoutMs") or 10_000,
        client_config=tuple(sorted(client_config.items())),
        value_spec=parse_column_options(params, "value", sink=True),
        key_spec=parse_column_options(params, "key", sink=True),
        registry=parse_registry_options(params, client_config),
        auto_register=auto_register and not use_latest,
        use_latest=use_latest,
        normalize=_boolean(params, "normalize.schemas", "normalize.schemas", False),
    )


def default_sink_id(topic: str | None) -> str:
    """``pylog-sink-<12 hex>``: stable for one target (the topic option, or "the topic column").

    Stable across restarts, so a restarted query finds its batches in the sink
    log. Sink log entries are also keyed by Spark's streaming query id (kept in
    the checkpoint), so a new checkpoint never mistakes its batch 0 for an old
    query's.
    """
    spec = f"topic={topic}" if topic else "topic-column"
    return "pylog-sink-" + hashlib.sha256(spec.encode()).hexdigest()[:12]
