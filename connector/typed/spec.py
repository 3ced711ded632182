"""The typed-column options (``valueFormat``, ``valueSubject``, ``schema.registry.url``, ...), parsed and resolved.

Theory of operation: ``parse_column_options`` reads one side (value or key) of
Spark's option map into a frozen ``ColumnSpec`` and raises ``PylogOptionError``
naming the option when it is bad. On the driver, when a query is built,
``resolve_source`` / ``resolve_sink`` ask the registry once for the reader
(source) or writer (sink) schema — ``latest`` is fixed at query start — and
return a ``ResolvedColumn``: the schema's text and registry coordinates, its
Spark type and whether records carry Confluent's framing. That is what
executors receive; they parse it again (cached per process) and fetch only
writer schemas by id.

Where the schema comes from:
* ``schema.registry.url`` alone: the subject's version (``valueSchemaVersion``,
  default latest) is the reader schema; records are framed (magic 0, id).
* an inline ``valueSchema`` alone: data without a registry — bare encodings,
  as Spark's ``from_avro(col, jsonFormatSchema)`` reads them.
* both: the inline schema is the reader schema of framed records whose writer
  schemas come from the registry by id.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from connector.errors import PylogOptionError
from connector.typed import FORMATS, SCHEMA_TYPES

MODES = ("FAILFAST", "PERMISSIVE")
REGISTRY_PREFIX = "schema.registry."
_REGISTRY_OPTIONS = ("url", "basic.auth.user.info", "basic.auth.credentials.source", "ssl.ca.location",
                     "ssl.certificate.location", "ssl.key.location", "ssl.key.password", "timeout.ms")
REGISTRY_OPTION_NAMES = tuple(REGISTRY_PREFIX + name for name in _REGISTRY_OPTIONS)
_SIDE_OPTIONS = ("Format", "Subject", "SchemaVersion", "Schema", "MessageName", "RecordName", "RecordNamespace",
                 "SubjectNameStrategy")
# Confluent's subject name strategies (the serializers' subject.name.strategy), by their class names
STRATEGIES = ("TopicNameStrategy", "RecordNameStrategy", "TopicRecordNameStrategy")
TYPED_SOURCE_OPTION_NAMES = tuple(f"{side}{name}" for side in ("value", "key") for name in _SIDE_OPTIONS
                                  if name not in ("RecordName", "RecordNamespace")) + ("mode", *REGISTRY_OPTION_NAMES)
TYPED_SINK_OPTION_NAMES = tuple(f"{side}{name}" for side in ("value", "key") for name in _SIDE_OPTIONS) + (
    "auto.register.schemas", "use.latest.version", "normalize.schemas", *REGISTRY_OPTION_NAMES)


def _error(message: str) -> PylogOptionError:
    return PylogOptionError(message)


@dataclass(frozen=True)
class ColumnSpec:
    """One side's options: ``side`` is "value" or "key"."""

    side: str
    format: str = "binary"
    subject: str | None = None
    version: int | None = None             # None: latest
    inline_schema: str | None = None
    message_name: str | None = None
    record_name: str = "topLevelRecord"    # sink, auto.register.schemas: the derived schema's name (as to_avro)
    record_namespace: str = ""
    strategy: str = "TopicNameStrategy"     # <side>SubjectNameStrategy, when <side>Subject is not given

    @property
    def typed(self) -> bool:
        return self.format in SCHEMA_TYPES

    @property
    def schema_type(self) -> str:
        return SCHEMA_TYPES[self.format]


@dataclass(frozen=True)
class ResolvedColumn:
    """A ``ColumnSpec`` with its schema fetched: what executors decode (source) or encode (sink) with."""

    spec: ColumnSpec
    framed: bool                            # records carry magic byte 0 and a schema id
    schema_type: str = ""
    schema_text: str = ""
    references: tuple = ()                  # (name, subject, version) of the schema's references
    schema_id: int | None = None            # registry id (sink: written into every record)
    spark_type_json: str = ""               # the column's Spark type, as DataType.json() (sink: the DataFrame's)
    registry: object | None = None          # RegistryConfig, or None
    extra: dict = field(default_factory=dict, compare=False)

    def spark_type(self):
        from pyspark.sql.types import _parse_datatype_json_string
        return _parse_datatype_json_string(self.spark_type_json)

    def parsed(self):
        """The schema, parsed (references fetched from the registry); cached per process."""
        return _parsed(self)


_PARSED: dict = {}


def _parsed(resolved: ResolvedColumn):
    key = (resolved.schema_type, resolved.schema_text, resolved.references, resolved.registry)
    found = _PARSED.get(key)
    if found is None:
        if resolved.references:
            from connector.typed.registry_client import RegisteredSchema, RegistryClient
            found = RegistryClient.shared(resolved.registry).parsed(
                RegisteredSchema(resolved.schema_id or -1, resolved.schema_type, resolved.schema_text,
                                 resolved.references))
        else:
            from broker_sim.registry.types import SchemaError, parse
            try:
                found = parse(resolved.schema_type, resolved.schema_text)
            except SchemaError as exc:
                raise _error(f"Option '{resolved.spec.side}Schema' is not a valid {resolved.schema_type} schema: "
                             f"{exc}") from None
        _PARSED[key] = found
    return found


def parse_registry_options(params: dict, client_config: dict) -> object | None:
    """``schema.registry.*`` (keys lower-cased) -> ``RegistryConfig``, or None without ``schema.registry.url``;
    ``client_config`` is the Kafka client's (kafka-python names), for SASL_INHERIT."""
    url = params.get("schema.registry.url", "").strip()
    if not url:
        return None   # nothing of the HTTP client imported: a reader without a registry starts ~17 ms sooner
    from connector.typed.registry_client import RegistryConfig
    urls = tuple(u.strip() for u in url.split(",") if u.strip())
    for u in urls:
        if not (u.startswith("http://") or u.startswith("https://")):
            raise _error(f"Option 'schema.registry.url' must be http:// or https:// URLs, got '{u}'")
    source = params.get("schema.registry.basic.auth.credentials.source", "USER_INFO").strip().upper()
    if source not in ("USER_INFO", "URL", "SASL_INHERIT"):
        raise _error("Option 'schema.registry.basic.auth.credentials.source' must be one of USER_INFO, URL, "
                     f"SASL_INHERIT, got '{source}'")
    user_info = params.get("schema.registry.basic.auth.user.info") or None
    if source == "USER_INFO" and user_info is not None and ":" not in user_info:
        raise _error("Option 'schema.registry.basic.auth.user.info' must be <username>:<password>")
    if source == "URL":
        user_info = None
    if source == "SASL_INHERIT":
        user, password = client_config.get("sasl_plain_username"), client_config.get("sasl_plain_password")
        if not user:
            raise _error("Option 'schema.registry.basic.auth.credentials.source' is SASL_INHERIT but no SASL "
                         "username and password are set (kafka.sasl.jaas.config)")
        user_info = f"{user}:{password or ''}"
    timeout = params.get("schema.registry.timeout.ms", "30000").strip()
    if not timeout.isdigit() or int(timeout) <= 0:
        raise _error(f"Option 'schema.registry.timeout.ms' must be a positive number of milliseconds, got '{timeout}'")
    return RegistryConfig(urls, user_info, params.get("schema.registry.ssl.ca.location"),
                          params.get("schema.registry.ssl.certificate.location"),
                          params.get("schema.registry.ssl.key.location"),
                          params.get("schema.registry.ssl.key.password"), int(timeout))


def parse_column_options(params: dict, side: str, *, sink: bool) -> ColumnSpec:
    """One side's options from Spark's option map (keys lower-cased)."""
    fmt = params.get(f"{side}format", "binary").strip().lower()
    if fmt not in FORMATS:
        raise _error(f"Option '{side}Format' must be one of {', '.join(FORMATS)}, got '{params[f'{side}format']}'")
    version = None
    raw_version = params.get(f"{side}schemaversion", "latest").strip().lower()
    if raw_version != "latest":
        if not raw_version.isdigit() or int(raw_version) < 1:
            raise _error(f"Option '{side}SchemaVersion' must be 'latest' or a version number (1 or more), "
                         f"got '{params[f'{side}schemaversion']}'")
        version = int(raw_version)
    spec = ColumnSpec(side, fmt, params.get(f"{side}subject", "").strip() or None, version,
                      params.get(f"{side}schema") or None, params.get(f"{side}messagename", "").strip() or None,
                      params.get(f"{side}recordname", "").strip() or "topLevelRecord",
                      params.get(f"{side}recordnamespace", "").strip(), _strategy(params, side))
    if not spec.typed:
        for name in ("Subject", "SchemaVersion", "Schema", "MessageName"):
            if f"{side}{name.lower()}" in params:
                raise _error(f"Option '{side}{name}' needs '{side}Format' to be avro, protobuf or json (it is "
                             f"'{fmt}')")
    elif spec.message_name and fmt != "protobuf":
        raise _error(f"Option '{side}MessageName' applies to {side}Format=protobuf only (it is '{fmt}')")
    return spec


def _strategy(params: dict, side: str) -> str:
    given = params.get(f"{side}subjectnamestrategy", "TopicNameStrategy").strip()
    name = given.rsplit(".", 1)[-1]   # io.confluent.kafka.serializers.subject.RecordNameStrategy is accepted too
    if name not in STRATEGIES:
        raise _error(f"Option '{side}SubjectNameStrategy' must be one of {', '.join(STRATEGIES)}, got '{given}'")
    return name


def _subject(spec: ColumnSpec, topics: tuple[str, ...], record: str | None = None, *, sink: bool = False) -> str:
    """The subject of ``spec``: ``<side>Subject``, else by the name strategy (``record``: the schema's full
    name, which the sink knows; a source must name the subject for the record strategies)."""
    if spec.subject:
        return spec.subject
    if spec.strategy != "TopicNameStrategy":
        if record is None:
            raise _error(f"Option '{spec.side}Subject' is required with {spec.side}SubjectNameStrategy="
                         f"{spec.strategy}: the reader schema's subject is the record's name")
        if spec.strategy == "RecordNameStrategy":
            return record
        if len(topics) != 1:
            raise _error(f"Option '{spec.side}Subject' is required: TopicRecordNameStrategy needs the 'topic' option")
        return f"{topics[0]}-{record}"
    if len(topics) != 1:
        where = (f"{list(topics)}" if topics else
                 "a topic column (set the 'topic' option, or name the subject)" if sink else "a pattern")
        raise _error(f"Option '{spec.side}Subject' is required: {spec.side}Format={spec.format} uses the registry "
                     f"and the default subject (<topic>-{spec.side}) needs exactly one topic, not {where}")
    return f"{topics[0]}-{spec.side}"


def resolve(spec: ColumnSpec, registry, topics: tuple[str, ...], *, sink: bool,
            derived_type=None, auto_register: bool = True, use_latest: bool = False,
            normalize: bool = False) -> ResolvedColumn | None:
    """Fetch or register the schema of one typed side (None when the side is binary or string)."""
    if not spec.typed:
        return None
    from connector.typed import format_module
    from connector.typed.registry_client import RegistryClient, RegistryError
    module = format_module(spec.format)
    if registry is None and spec.inline_schema is None:
        raise _error(f"{spec.side}Format={spec.format} needs the option 'schema.registry.url' or an inline "
                     f"'{spec.side}Schema'")
    client = RegistryClient.shared(registry) if registry is not None else None
    schema_id, references, text = None, (), spec.inline_schema
    try:
        if not sink:
            if text is None:
                found = client.version(_subject(spec, topics), spec.version or "latest")
                if found.schema_type != spec.schema_type:
                    raise _error(f"Option '{spec.side}Format' is {spec.format} but subject '{found.subject}' "
                                 f"version {found.version} is a {found.schema_type} schema")
                schema_id, references, text = found.schema_id, found.references, found.text
        elif client is not None:
            if use_latest:
                found = client.version(_subject(spec, topics, sink=True), spec.version or "latest")
                schema_id, references, text = found.schema_id, found.references, found.text
            else:
                if text is None:
                    text, derived_name = module.schema_for(derived_type, name=spec.record_name,
                                                           namespace=spec.record_namespace)
                    if derived_name and not spec.message_name:
                        spec = _with_message(spec, derived_name)
                subject = _subject(spec, topics, _record_name(spec, text) if spec.strategy != "TopicNameStrategy"
                                   else None, sink=True)
                schema_id = (client.register(subject, spec.schema_type, text, normalize) if auto_register
                             else client.lookup(subject, spec.schema_type, text, normalize))
        elif text is None:
            text, derived_name = module.schema_for(derived_type, name=spec.record_name,
                                                   namespace=spec.record_namespace)
            if derived_name and not spec.message_name:
                spec = _with_message(spec, derived_name)
    except RegistryError as exc:
        raise _error(f"{spec.side}Format={spec.format}: {exc}") from None
    resolved = ResolvedColumn(spec, framed=registry is not None, schema_type=spec.schema_type, schema_text=text,
                              references=references, schema_id=schema_id, registry=registry)
    try:
        parsed = resolved.parsed()
    except RegistryError as exc:   # a reference the registry does not answer
        raise _error(f"{spec.side}Format={spec.format}: {exc}") from None
    try:
        data_type = module.spark_type(parsed, spec.message_name)
    except ValueError as exc:
        raise _error(f"{spec.side}Format={spec.format}: the schema cannot be a Spark column: {exc}") from None
    if sink and derived_type is not None:
        data_type = derived_type   # the sink encodes the DataFrame's column, matched to the schema by name
    return ResolvedColumn(spec, resolved.framed, resolved.schema_type, text, references, schema_id,
                          data_type.json(), registry)


def _record_name(spec: ColumnSpec, text: str) -> str:
    """The full name of the record a schema text describes (RecordNameStrategy's subject)."""
    from broker_sim.registry.types import SchemaError, parse
    try:
        name = parse(spec.schema_type, text).name
    except SchemaError as exc:
        raise _error(f"Option '{spec.side}Schema' is not a valid {spec.schema_type} schema: {exc}") from None
    if spec.message_name and spec.format == "protobuf":
        return spec.message_name
    if not name:
        raise _error(f"{spec.side}SubjectNameStrategy={spec.strategy} needs a named schema (a record, a message, "
                     "or a JSON Schema with a title)")
    return name


def _with_message(spec: ColumnSpec, name: str) -> ColumnSpec:
    from dataclasses import replace
    return replace(spec, message_name=name)
