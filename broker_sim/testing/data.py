"""Topics and data for pipeline tests: create topics, seed rows (bytes, JSON, Avro, Protobuf, JSON Schema through a
Schema Registry), read a topic back decoded, as a read_committed consumer sees it.

Everything here speaks the Kafka protocol through kafka-python (and confluent-kafka's Schema Registry
serializers for the typed formats), so it works against any bootstrap: ``pylog_broker``, a container, Apache
Kafka. A ``broker`` argument is a bootstrap string (``"host:port,..."``) or an object with
``bootstrap_servers`` (``Broker``, ``SecuredBroker``...) or ``get_bootstrap_server()`` (containers); the
registry URL defaults to the object's ``schema_registry_url``. ``client_kwargs`` are kafka-python settings
(security) added to every client this module builds.

::

    create_topics(pylog_broker, {"in": 3, "out": 1})
    seed(pylog_broker, "in", [{"id": i, "name": f"n{i}"} for i in range(1000)],
         format="avro", schema=EVENT_AVRO, key="id")
    rows = read(pylog_broker, "out", format="avro")     # [{"key", "value", "partition", "offset", ...}]

Typed formats write what confluent-kafka's serializers write (they are used): the schema is registered under
``<topic>-value`` (TopicNameStrategy) and each value framed as magic byte 0, the 4-byte schema id (and, for
Protobuf, the message-index list), then the encoding. Reading decodes with the writer's schema fetched by id.

The ``pylog_topics`` fixture creates the topics its test's ``pylog_topics`` markers name on ``pylog_broker``::

    @pytest.mark.pylog_topics("events", out=3, config={"cleanup.policy": "compact"})
    def test_pipeline(pylog_broker, pylog_topics):
        assert dict(pylog_topics) == {"events": 1, "out": 3}

Imports of kafka-python, confluent-kafka and pyspark happen inside the functions: the pytest plugin imports
this module in every test run.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, NamedTuple

import pytest

FORMATS = ("bytes", "json", "avro", "protobuf", "json-schema")
ISOLATIONS = ("read_committed", "read_uncommitted")
READ_AS = ("dicts", "records", "dataframe")
SEED_MAX_DATAFRAME_ROWS = 1_000_000  # a DataFrame is collected to the driver: seeding is for test data

__all__ = ["FORMATS", "Record", "Seeded", "Topics", "bootstrap_of", "create_topics", "end_offsets", "protobuf_class",
           "protobuf_dict", "pylog_topics", "read", "registry_url_of", "seed"]


# --- where to connect ---------------------------------------------------------------------------------------

def bootstrap_of(broker) -> str:
    """The bootstrap string of ``broker`` (a string, or an object with ``bootstrap_servers`` /
    ``get_bootstrap_server()``)."""
    if isinstance(broker, str):
        if not broker:
            raise ValueError("broker: an empty bootstrap string; give 'host:port' or a broker object")
        return broker
    value = getattr(broker, "bootstrap_servers", None)
    if value is None and callable(getattr(broker, "get_bootstrap_server", None)):
        value = broker.get_bootstrap_server()
    if callable(value):
        value = value()
    if not isinstance(value, str) or not value:
        raise TypeError(f"broker: {broker!r} is neither a bootstrap string nor an object with "
                        f"bootstrap_servers / get_bootstrap_server()")
    return value


def registry_url_of(broker, registry_url: str | None = None, *, needed_for: str = "") -> str:
    """``registry_url`` if given, else the broker object's Schema Registry URL; an error naming what needs it."""
    url = registry_url or getattr(broker, "schema_registry_url", None)
    if callable(url):
        url = url()
    if callable(getattr(broker, "get_schema_registry_url", None)) and not url:
        url = broker.get_schema_registry_url()
    if not url:
        raise ValueError(f"registry_url: {needed_for or 'this format'} needs a Schema Registry; pass "
                         f"registry_url= or a broker object serving one (broker {broker!r} has none)")
    return url


def _client_kwargs(client_kwargs: Mapping | None) -> dict:
    return dict(client_kwargs or {})


# --- topics -------------------------------------------------------------------------------------------------

def _topic_specs(topics) -> list[tuple[str, int, dict]]:
    """``{"name": partitions | (partitions, config)}`` or ``["name" | (name, partitions[, config])]``."""
    items = topics.items() if isinstance(topics, Mapping) else [
        (t, 1) if isinstance(t, str) else (t[0], tuple(t[1:]) if len(t) > 2 else (t[1] if len(t) > 1 else 1))
        for t in topics]
    specs = []
    for name, spec in items:
        partitions, config = (spec if isinstance(spec, tuple) else (spec, {}))
        if not isinstance(name, str) or not name:
            raise ValueError(f"create_topics: topic name {name!r} is not a non-empty string")
        if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
            raise ValueError(f"create_topics: topic {name!r}: partitions {partitions!r} is not a positive integer")
        if not isinstance(config, Mapping):
            raise ValueError(f"create_topics: topic {name!r}: config {config!r} is not a mapping of topic configs")
        specs.append((name, partitions, {str(k): str(v) for k, v in config.items()}))
    return specs


def create_topics(broker, topics, *, replication_factor: int = 1, timeout_s: float = 30,
                  client_kwargs: Mapping | None = None) -> dict[str, int]:
    """Create ``topics`` and return once every partition of each has a leader.

    ``topics``: ``{"in": 3, "out": 1}``, ``{"in": (3, {"cleanup.policy": "compact"})}``, or a list of names and
    ``(name, partitions[, config])`` tuples. Returns ``{name: partitions}``. An existing topic, an invalid name or
    config raises ``ValueError`` naming the topic and the broker's reason (nothing is retried).
    """
    from kafka import KafkaAdminClient

    specs = _topic_specs(topics)
    if not specs:
        return {}
    admin = KafkaAdminClient(bootstrap_servers=bootstrap_of(broker), **_client_kwargs(client_kwargs))
    try:
        result = admin.create_topics(
            {name: {"num_partitions": n, "replication_factor": replication_factor, "configs": config}
             for name, n, config in specs},
            timeout_ms=int(timeout_s * 1000), raise_errors=False)
        failed = [f"{t['name']!r}: {_error_name(t['error_code'])}"
                  + (f" ({t['error_message']})" if t.get("error_message") else "")
                  for t in result.get("topics", ()) if t.get("error_code")]
        if failed:
            raise ValueError(f"create_topics on {bootstrap_of(broker)}: " + "; ".join(failed))
        admin.wait_for_topics([name for name, _, _ in specs], timeout_ms=int(timeout_s * 1000))
    finally:
        admin.close()
    return {name: n for name, n, _ in specs}


def _error_name(code: int) -> str:
    from kafka import errors
    return errors.for_code(code).__name__


class Topics(dict):
    """``{name: partitions}`` of the topics a test's ``pylog_topics`` markers created; ``create`` adds more."""

    def __init__(self, broker, created: Mapping[str, int] = ()):
        super().__init__(created)
        self.broker = broker

    def create(self, *names: str, partitions: int = 1, config: Mapping | None = None,
               **named_partitions: int) -> dict[str, int]:
        """Create topics as the marker does; returns ``{name: partitions}`` of those created now."""
        made = create_topics(self.broker, _marker_specs(names, partitions, config, named_partitions))
        self.update(made)
        return made


def _marker_specs(names, partitions, config, named_partitions) -> dict:
    return {**{n: (partitions, dict(config or {})) for n in names},
            **{n: (p, dict(config or {})) for n, p in named_partitions.items()}}


MARKER = ("pylog_topics(*names, partitions=1, config=None, **name_partitions): topics the pylog_topics fixture "
          "creates on pylog_broker before the test (names with `partitions` each, name=N with N; `config` "
          "applies to the marker's topics)")


@pytest.fixture
def pylog_topics(request, pylog_broker) -> Topics:
    """The topics named by the test's ``@pytest.mark.pylog_topics(...)`` markers, created on ``pylog_broker``.

    ``@pytest.mark.pylog_topics("events", "audit", partitions=2, config={...}, out=3)``: ``events`` and
    ``audit`` with 2 partitions, ``out`` with 3, all with ``config``; several markers add up (one config each).
    Returns a ``Topics`` mapping ``{name: partitions}``; ``pylog_topics.create(...)`` takes the same
    arguments for topics made during the test.
    """
    topics = Topics(pylog_broker)
    for marker in reversed(list(request.node.iter_markers("pylog_topics"))):
        kwargs = dict(marker.kwargs)
        partitions, config = kwargs.pop("partitions", 1), kwargs.pop("config", None)
        topics.create(*marker.args, partitions=partitions, config=config, **kwargs)
    return topics


# --- seeding ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Seeded:
    """What ``seed`` wrote: ``count`` records, ``offsets[partition] = (first, last)`` offsets written there,
    the ``schema_id`` the typed formats registered (else None)."""

    topic: str
    count: int
    offsets: dict[int, tuple[int, int]] = field(default_factory=dict)
    schema_id: int | None = None

    @property
    def end_offsets(self) -> dict[tuple[str, int], int]:
        """``{(topic, partition): last + 1}``: where a consumer that read everything seeded is (at least)."""
        return {(self.topic, p): last + 1 for p, (_first, last) in self.offsets.items()}


def _is_dataframe(rows) -> bool:
    return hasattr(rows, "sparkSession") and hasattr(rows, "collect") and hasattr(rows, "schema")


def _rows_of(rows) -> list:
    if _is_dataframe(rows):
        collected = rows.limit(SEED_MAX_DATAFRAME_ROWS + 1).collect()
        if len(collected) > SEED_MAX_DATAFRAME_ROWS:
            raise ValueError(f"rows: the DataFrame has more than {SEED_MAX_DATAFRAME_ROWS} rows, collected to "
                             f"the driver to seed; seed test data, or write it with the pylog sink")
        return [r.asDict(recursive=True) for r in collected]
    if isinstance(rows, (bytes, str, Mapping)):
        raise TypeError(f"rows: expected an iterable of rows (or a DataFrame), got one {type(rows).__name__}; "
                        f"wrap it in a list")
    return list(rows)


def _as_bytes(value, what: str) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value).encode()
    raise TypeError(f"{what}: {value!r} is not bytes, str or a number")


def _chooser(option: str, spec, row_field: str | None = None):
    """A function of (row) for ``key``/``partition``/``headers``: None, a callable, a field name (key), or a
    constant (partition, headers)."""
    if callable(spec):
        return spec
    if spec is None:
        return (lambda row: row.get(row_field) if isinstance(row, Mapping) else None) if row_field else \
            (lambda row: None)
    if option == "key":
        if not isinstance(spec, str):
            raise ValueError(f"key: {spec!r}; give a field name, a callable(row) -> bytes|str, or None")
        name = spec

        def by_field(row):
            if not isinstance(row, Mapping) or name not in row:
                raise ValueError(f"key: field {name!r} is not in row {row!r}")
            return row[name]
        return by_field
    return lambda row: spec


def _value_serializer(fmt: str, topic: str, schema, registry_url, broker, message: str | None):
    """(serialize(row) -> bytes | None, the registry client to close or None) for ``fmt``."""
    if fmt == "bytes":
        return (lambda row: _as_bytes(row.get("value") if isinstance(row, Mapping) else row, "value")), None
    if fmt == "json":
        return (lambda row: None if row is None else json.dumps(row, separators=(",", ":"), default=str).encode()), \
            None
    if schema is None:
        raise ValueError(f"schema: format={fmt!r} needs schema= (the writer's schema to register as "
                         f"'{topic}-value')")
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.serialization import MessageField, SerializationContext
    client = SchemaRegistryClient({"url": registry_url_of(broker, registry_url, needed_for=f"format={fmt!r}")})
    context = SerializationContext(topic, MessageField.VALUE)
    if fmt == "avro":
        from confluent_kafka.schema_registry.avro import AvroSerializer
        serializer = AvroSerializer(client, schema if isinstance(schema, str) else json.dumps(schema))
        to_wire = serializer
    elif fmt == "json-schema":
        from confluent_kafka.schema_registry.json_schema import JSONSerializer
        serializer = JSONSerializer(schema if isinstance(schema, str) else json.dumps(schema), client)
        to_wire = serializer
    else:
        message_class = protobuf_class(schema, message) if isinstance(schema, str) else schema
        from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
        from google.protobuf import json_format
        serializer = ProtobufSerializer(message_class, client)

        def to_wire(row, ctx):
            if isinstance(row, Mapping):
                row = json_format.ParseDict(dict(row), message_class())
            return serializer(row, ctx)
    return (lambda row: None if row is None else to_wire(row, context)), client


def protobuf_class(proto_text: str, message: str | None = None):
    """A message class for ``message`` (a full name, or a name in the file's package; default: the file's first
    message) of a ``.proto`` text (imports of Google's well-known types allowed), with no protoc: parsed by
    the broker's registry code into a FileDescriptorProto, built with protobuf's message_factory."""
    from google.protobuf import descriptor_pool, message_factory

    from broker_sim.registry.types import parse
    from broker_sim.registry.types.protobuf import WELL_KNOWN_FILES, add_well_known
    parsed = parse("PROTOBUF", proto_text, {})
    file = type(parsed.model.file)()
    file.CopyFrom(parsed.model.file)
    if not file.name:
        file.name = "pylog_seed.proto"
    pool = descriptor_pool.DescriptorPool()
    add_well_known(pool, file.dependency, set(), set())
    missing = [d for d in file.dependency if d not in WELL_KNOWN_FILES]
    if missing:
        raise ValueError(f"schema: the .proto imports {missing}; only Google's well-known types can be imported "
                         f"here — pass a generated message class as schema= instead")
    pool.Add(file)
    names = [m.name for m in file.message_type]
    wanted = message or (names[0] if names else None)
    if wanted is None:
        raise ValueError("schema: the .proto text defines no message")
    full = wanted if "." in wanted or not file.package else f"{file.package}.{wanted}"
    try:
        descriptor = pool.FindMessageTypeByName(full)
    except KeyError:
        raise ValueError(f"message: {wanted!r} is not a message of the .proto (top-level: {names})") from None
    return message_factory.GetMessageClass(descriptor)


def seed(broker, topic: str, rows, *, format: str = "bytes", schema=None, registry_url: str | None = None,
         key=None, partition=None, headers=None, message: str | None = None, transactional: bool = False,
         abort: bool = False, client_kwargs: Mapping | None = None, timeout_s: float = 60) -> Seeded:
    """Write ``rows`` to ``topic``, in order, acknowledged by all in-sync replicas, and return what was written.

    ``rows``: an iterable (or a Spark DataFrame, collected driver-side, as dicts). Per ``format``:
    ``"bytes"`` — each row bytes/str/None (the value) or a dict with ``value`` and optionally ``key``,
    ``partition``, ``headers``, ``timestamp`` (ms) — the pylog/Kafka sink's columns; ``"json"`` — any
    JSON value, written compact; ``"avro"`` / ``"json-schema"`` — dicts, with ``schema`` the Avro / JSON Schema
    (text or dict); ``"protobuf"`` — dicts in protobuf's JSON mapping (or message objects), with ``schema`` the
    ``.proto`` text (``message``: which message, default the first) or a generated message class. Typed
    formats register ``schema`` under ``<topic>-value`` at ``registry_url`` (default: the broker's registry).

    ``key``: a field name of dict rows, a ``callable(row)``, or None; str and numbers are UTF-8 encoded.
    ``partition``: None (Kafka's key-hash partitioner), an int, or ``callable(row)``. ``headers``: a list of
    ``(name, bytes)`` (or a ``callable(row)``) for every record. ``transactional``: all rows in one transaction,
    committed (aborted with ``abort=True``, which read_committed readers never see).
    """
    from kafka import KafkaProducer

    if format not in FORMATS:
        raise ValueError(f"format: {format!r} is not one of {', '.join(FORMATS)}")
    if abort and not transactional:
        raise ValueError("abort=True needs transactional=True (only a transaction can be aborted)")
    if message is not None and format != "protobuf":
        raise ValueError(f"message: {message!r} only applies to format='protobuf' (got format={format!r})")
    items = _rows_of(rows)
    raw = format == "bytes"
    key_of = _chooser("key", key, "key" if raw else None)
    partition_of = _chooser("partition", partition, "partition" if raw else None)
    headers_of = _chooser("headers", headers, "headers" if raw else None)
    serialize, client = _value_serializer(format, topic, schema, registry_url, broker, message)
    config = {"bootstrap_servers": bootstrap_of(broker), "acks": "all", "linger_ms": 5, **_client_kwargs(client_kwargs)}
    if transactional:
        config["transactional_id"] = f"pylog-seed-{topic}-{time.monotonic_ns()}"
    producer = KafkaProducer(**config)
    futures, schema_ids = [], set()
    try:
        if transactional:
            producer.init_transactions()
            producer.begin_transaction()
        for row in items:
            value = serialize(row)
            if format in ("avro", "json-schema", "protobuf") and value is not None:
                schema_ids.add(int.from_bytes(value[1:5], "big"))
            timestamp = row.get("timestamp") if raw and isinstance(row, Mapping) else None
            record_headers = headers_of(row)
            futures.append(producer.send(
                topic, value=value, key=_as_bytes(key_of(row), "key"), partition=partition_of(row),
                timestamp_ms=timestamp,
                headers=[(str(h), _as_bytes(v, "headers")) for h, v in
                         (record_headers.items() if isinstance(record_headers, Mapping) else record_headers or ())]))
        producer.flush(timeout=timeout_s)
        if transactional:
            (producer.abort_transaction if abort else producer.commit_transaction)()
        written: dict[int, tuple[int, int]] = {}
        for future in futures:
            meta = future.get(timeout=timeout_s)
            first, last = written.get(meta.partition, (meta.offset, meta.offset))
            written[meta.partition] = (min(first, meta.offset), max(last, meta.offset))
    finally:
        producer.close(timeout=5)
        if client is not None:
            client.close()
    return Seeded(topic, len(futures), dict(sorted(written.items())), min(schema_ids) if schema_ids else None)


# --- reading back -------------------------------------------------------------------------------------------

class Record(NamedTuple):
    """One record as ``read`` returns it (``as_="records"``); ``value`` decoded per the format."""

    key: bytes | None
    value: Any
    partition: int
    offset: int
    timestamp: int
    headers: list


def end_offsets(broker, topics: str | Iterable[str], *, isolation: str = "read_committed",
                client_kwargs: Mapping | None = None) -> dict[tuple[str, int], int]:
    """``{(topic, partition): end}`` of every partition: the last stable offset under read_committed, the high
    watermark under read_uncommitted."""
    from kafka import KafkaConsumer
    from kafka.structs import TopicPartition

    _check_isolation(isolation)
    names = [topics] if isinstance(topics, str) else list(topics)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap_of(broker), isolation_level=isolation,
                             enable_auto_commit=False, group_id=None, **_client_kwargs(client_kwargs))
    try:
        partitions = [TopicPartition(t, p) for t in names for p in sorted(_partitions(consumer, t))]
        return {(tp.topic, tp.partition): end for tp, end in consumer.end_offsets(partitions).items()}
    finally:
        consumer.close()


def _partitions(consumer, topic: str, timeout_s: float = 10) -> set[int]:
    deadline = time.monotonic() + timeout_s
    while True:
        found = consumer.partitions_for_topic(topic)
        if found:
            return found
        if time.monotonic() > deadline:
            raise ValueError(f"topic {topic!r} does not exist on {consumer.config['bootstrap_servers']}")
        time.sleep(0.1)


def _check_isolation(isolation: str) -> None:
    if isolation not in ISOLATIONS:
        raise ValueError(f"isolation: {isolation!r} is not one of {', '.join(ISOLATIONS)}")


def read(broker, topic: str, *, format: str = "bytes", registry_url: str | None = None,
         isolation: str = "read_committed", as_: str = "dicts", spark=None, timeout_s: float = 30,
         client_kwargs: Mapping | None = None):
    """Every record of ``topic`` from the beginning up to its end offsets when called (the LSO under
    ``read_committed``: aborted and open transactions are not returned), ordered by partition and offset.

    Each record has ``key`` (bytes), ``value`` (decoded per ``format``: bytes, JSON, or a typed format decoded
    with its writer's schema from the registry — Avro records and JSON as dicts, Protobuf as protobuf's JSON
    mapping with the .proto field names), ``partition``, ``offset``, ``timestamp`` (ms) and ``headers``
    (``[(name, bytes)]``). ``as_``: ``"dicts"``, ``"records"`` (``Record`` tuples) or ``"dataframe"``
    (``spark`` required; values become structs). Raises ``TimeoutError`` naming the partitions short of their
    end after ``timeout_s``.
    """
    from kafka import KafkaConsumer
    from kafka.structs import TopicPartition

    if format not in FORMATS:
        raise ValueError(f"format: {format!r} is not one of {', '.join(FORMATS)}")
    _check_isolation(isolation)
    if as_ not in READ_AS:
        raise ValueError(f"as_: {as_!r} is not one of {', '.join(READ_AS)}")
    if as_ == "dataframe" and spark is None:
        raise ValueError("as_='dataframe' needs spark= (a SparkSession)")
    decode, close = _value_decoder(format, topic, registry_url, broker)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap_of(broker), isolation_level=isolation,
                             enable_auto_commit=False, group_id=None, fetch_max_wait_ms=100,
                             **_client_kwargs(client_kwargs))
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(_partitions(consumer, topic))]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        ends = consumer.end_offsets(partitions)
        raw = []
        deadline = time.monotonic() + timeout_s
        while any(consumer.position(tp) < ends[tp] for tp in partitions):
            if time.monotonic() > deadline:
                short = {f"{tp.topic}-{tp.partition}": f"at {consumer.position(tp)} of {ends[tp]}"
                         for tp in partitions if consumer.position(tp) < ends[tp]}
                raise TimeoutError(f"read {topic!r}: did not reach the end offsets in {timeout_s}s: {short}")
            for batch in consumer.poll(timeout_ms=200).values():
                raw.extend(r for r in batch if r.offset < ends[TopicPartition(r.topic, r.partition)])
    finally:
        consumer.close()
    try:
        records = [Record(r.key, decode(r.value), r.partition, r.offset, r.timestamp, list(r.headers))
                   for r in sorted(raw, key=lambda r: (r.partition, r.offset))]
    finally:
        close()
    if as_ == "records":
        return records
    dicts = [r._asdict() for r in records]
    return dicts if as_ == "dicts" else _dataframe(spark, dicts)


def _dataframe(spark, dicts: list[dict]):
    from pyspark.sql import Row

    def row(value):
        if isinstance(value, Mapping):
            return Row(**{k: row(v) for k, v in value.items()})
        if isinstance(value, list):
            return [row(v) for v in value]
        return value
    if not dicts:
        raise ValueError("as_='dataframe': the topic has no records to infer a schema from; use as_='dicts'")
    return spark.createDataFrame([row(d) for d in dicts])


def _value_decoder(fmt: str, topic: str, registry_url, broker):
    """(decode(bytes | None) -> value, close())."""
    if fmt == "bytes":
        return (lambda b: b), (lambda: None)
    if fmt == "json":
        return (lambda b: None if b is None else json.loads(b)), (lambda: None)
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.serialization import MessageField, SerializationContext
    client = SchemaRegistryClient({"url": registry_url_of(broker, registry_url, needed_for=f"format={fmt!r}")})
    context = SerializationContext(topic, MessageField.VALUE)
    if fmt == "avro":
        from confluent_kafka.schema_registry.avro import AvroDeserializer
        deserializer = AvroDeserializer(client)
        decode = lambda b: deserializer(b, context)  # noqa: E731
    elif fmt == "json-schema":
        from confluent_kafka.schema_registry.json_schema import JSONDeserializer
        deserializer = JSONDeserializer(None, schema_registry_client=client)
        decode = lambda b: deserializer(b, context)  # noqa: E731
    else:
        decode = _ProtobufReader(client, topic)
    return (lambda b: None if b is None else decode(b)), client.close


class _ProtobufReader:
    """Decodes Confluent-framed Protobuf (magic 0, schema id, zig-zag varint message indexes, payload) with the
    writer's schema fetched by id, into a dict by ``.proto`` field name (see ``protobuf_dict``)."""

    def __init__(self, client, topic: str):
        self.client, self.topic, self.classes = client, topic, {}

    def __call__(self, payload: bytes) -> dict:
        if len(payload) < 6 or payload[0] != 0:
            raise ValueError(f"topic {self.topic!r}: a record is not Confluent-framed Protobuf "
                             f"(starts {payload[:6]!r})")
        schema_id = int.from_bytes(payload[1:5], "big")
        count, at = _zigzag(payload, 5)
        indexes = []
        for _ in range(count):
            index, at = _zigzag(payload, at)
            indexes.append(index)
        message_class = self._class(schema_id, tuple(indexes or [0]))
        message = message_class()
        message.ParseFromString(payload[at:])
        return protobuf_dict(message)

    def _class(self, schema_id: int, indexes: tuple):
        if (schema_id, indexes) not in self.classes:
            from google.protobuf import descriptor_pool, message_factory

            from broker_sim.registry.types import parse
            from broker_sim.registry.types.protobuf import add_well_known
            schema = self.client.get_schema(schema_id)
            if schema.references:
                raise ValueError(f"schema id {schema_id}: Protobuf schemas with references are not decoded here")
            file = type((parsed := parse("PROTOBUF", schema.schema_str, {})).model.file)()
            file.CopyFrom(parsed.model.file)
            file.name = file.name or f"pylog_schema_{schema_id}.proto"
            pool = descriptor_pool.DescriptorPool()
            add_well_known(pool, file.dependency, set(), set())
            pool.Add(file)
            descriptor = pool.FindFileByName(file.name).message_types_by_name[file.message_type[indexes[0]].name]
            for index in indexes[1:]:
                descriptor = descriptor.nested_types[index]
            self.classes[schema_id, indexes] = message_factory.GetMessageClass(descriptor)
        return self.classes[schema_id, indexes]


def protobuf_dict(message) -> dict:
    """``message`` as a dict of every field by ``.proto`` name: scalars as Python values (proto3 implicit-presence
    fields with their default, fields with presence None when absent), enums by name, repeated fields as lists,
    maps as dicts, nested messages as dicts, Timestamp as an aware UTC datetime, Duration as a timedelta."""
    out = {}
    for fd in message.DESCRIPTOR.fields:
        value = getattr(message, fd.name)
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            value_field = fd.message_type.fields_by_name["value"]
            out[fd.name] = {k: _protobuf_value(value_field, v) for k, v in value.items()}
        elif fd.is_repeated:
            out[fd.name] = [_protobuf_value(fd, v) for v in value]
        elif fd.has_presence and not message.HasField(fd.name):
            out[fd.name] = None
        else:
            out[fd.name] = _protobuf_value(fd, value)
    return out


def _protobuf_value(fd, value):
    import datetime as dt
    if fd.message_type is not None:
        name = fd.message_type.full_name
        if name == "google.protobuf.Timestamp":
            return value.ToDatetime(tzinfo=dt.timezone.utc)
        if name == "google.protobuf.Duration":
            return value.ToTimedelta()
        return protobuf_dict(value)
    if fd.enum_type is not None:
        known = fd.enum_type.values_by_number.get(value)
        return known.name if known is not None else value
    return value


def _zigzag(data: bytes, at: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        byte = data[at]
        at += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), at
