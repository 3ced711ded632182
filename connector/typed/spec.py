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
    """Fetch or register the schema of one typed side (None when the side is binary or string).

    A sink side is checked here, on the driver, before any task: a DataFrame type the format cannot encode
    (or the schema cannot take) raises ``PylogOptionError`` naming the column, its Spark type and the format;
    registry errors name the option to change (``_registry_error``)."""
    if not spec.typed:
        return None
    from connector.typed import format_module
    from connector.typed.registry_client import RegistryClient, RegistryError
    module = format_module(spec.format)
    if registry is None and spec.inline_schema is None:
        raise _error(f"{spec.side}Format={spec.format} needs the option 'schema.registry.url' or an inline "
                     f"'{spec.side}Schema'")
    client = RegistryClient.shared(registry) if registry is not None else None
    schema_id, references, text, subject = None, (), spec.inline_schema, None
    try:
        if not sink:
            if text is None:
                subject = _subject(spec, topics)
                found = client.version(subject, spec.version or "latest")
                if found.schema_type != spec.schema_type:
                    raise _error(f"Option '{spec.side}Format' is {spec.format} but subject '{found.subject}' "
                                 f"version {found.version} is a {found.schema_type} schema")
                schema_id, references, text = found.schema_id, found.references, found.text
        elif client is not None:
            if use_latest:
                subject = _subject(spec, topics, sink=True)
                found = client.version(subject, spec.version or "latest")
                schema_id, references, text = found.schema_id, found.references, found.text
            else:
                if text is None:
                    text, spec = _derived(spec, module, derived_type)
                subject = _subject(spec, topics, _record_name(spec, text) if spec.strategy != "TopicNameStrategy"
                                   else None, sink=True)
                if spec.inline_schema is None and spec.format == "avro":
                    text = _evolvable_avro(spec, derived_type, client, subject)
                schema_id = (client.register(subject, spec.schema_type, text, normalize) if auto_register
                             else client.lookup(subject, spec.schema_type, text, normalize))
        elif text is None:
            text, spec = _derived(spec, module, derived_type)
    except RegistryError as exc:
        raise _registry_error(exc, spec, registry, subject, topics, sink=sink, derived=sink and not use_latest
                              and spec.inline_schema is None, text=text, derived_type=derived_type) from None
    resolved = ResolvedColumn(spec, framed=registry is not None, schema_type=spec.schema_type, schema_text=text,
                              references=references, schema_id=schema_id, registry=registry)
    try:
        parsed = resolved.parsed()
    except RegistryError as exc:   # a reference the registry does not answer
        raise _error(f"{spec.side}Format={spec.format}: {exc}") from None
    try:
        data_type = module.spark_type(parsed, spec.message_name, **({"field_metadata": True}
                                                                    if spec.format == "avro" else {}))
    except ValueError as exc:
        raise _error(f"{spec.side}Format={spec.format}: the schema cannot be a Spark column: {exc}") from None
    if sink and derived_type is not None:
        _check_encodable(spec, module, parsed, derived_type, resolved.framed)
        data_type = derived_type   # the sink encodes the DataFrame's column, matched to the schema by name
    return ResolvedColumn(spec, resolved.framed, resolved.schema_type, text, references, schema_id,
                          data_type.json(), registry)


def _derived(spec: ColumnSpec, module, derived_type) -> tuple[str, ColumnSpec]:
    """The schema ``auto.register.schemas`` derives from the DataFrame's column (spark-avro's ``to_avro``,
    spark-protobuf's, a draft-07 JSON Schema), and ``spec`` with the derived Protobuf message's name."""
    _refuse_unencodable(spec, module, derived_type)
    text, derived_name = module.schema_for(derived_type, name=spec.record_name, namespace=spec.record_namespace)
    if derived_name and not spec.message_name:
        spec = _with_message(spec, derived_name)
    return text, spec


def _evolvable_avro(spec: ColumnSpec, derived_type, client, subject: str) -> str:
    """The derived Avro schema with defaults, docs and aliases carried from the column's metadata (a pylog Avro
    source's reader schema) and from ``subject``'s latest version (``avro_format.schema_for(evolvable=True)``),
    so restarting a pass-through query after its upstream added a field with a default registers a
    compatible version."""
    from connector.typed import avro_format
    from connector.typed.registry_client import RegistryError
    key = (client.config, subject, derived_type.json(), spec.record_name, spec.record_namespace)
    found = _EVOLVED.get(key)
    if found is not None:   # a streaming sink resolves its schema for every micro-batch
        return found
    try:
        latest = client.version(subject, "latest")
        known = client.parsed(latest) if latest.schema_type == "AVRO" else None
    except RegistryError as exc:
        if exc.status not in (401, 403, 404):
            raise
        # 404: a new subject; 401/403: a sink granted only WRITE on the subject (the README's registry rights) may
        # not read it. Either way nothing to carry but the column's own metadata.
        known = None
    text, _ = avro_format.schema_for(derived_type, name=spec.record_name, namespace=spec.record_namespace,
                                     evolvable=True, known=known)
    _EVOLVED[key] = text
    return text


_EVOLVED: dict[tuple, str] = {}   # the evolvable schema derived per (registry, subject, column type) in this process
_CHECKED: set[tuple] = set()   # (format, schema text, Spark type json, message) whose encoder built in this process


def _check_encodable(spec: ColumnSpec, module, parsed, data_type, framed: bool) -> None:
    """Refuse, before any task runs, a DataFrame column the sink's encoder cannot write with ``parsed``: a Spark
    type the format has no encoding for, or (Protobuf, JSON Schema) one the schema's field cannot take."""
    key = (spec.format, parsed.canonical if hasattr(parsed, "canonical") else id(parsed), data_type.json(),
           spec.message_name)
    if key in _CHECKED:
        return
    _refuse_unencodable(spec, module, data_type)
    from connector.typed import RowMismatch
    try:
        module.encoder(parsed, data_type, framed=framed, message_name=spec.message_name)
    except RowMismatch as exc:
        where = f"{spec.side}.{exc.path}" if exc.path else spec.side
        raise _error(f"Column '{where}' cannot be written with {spec.side}Format={spec.format}: {exc.reason}. "
                     f"{_FORMAT_NAMES[spec.format]} encodes {_ENCODES[spec.format]} (README: Type mapping); cast the "
                     f"column or change the schema") from None
    except ValueError as exc:
        raise _error(f"Column '{spec.side}' cannot be written with {spec.side}Format={spec.format}: {exc}") from None
    _CHECKED.add(key)


_FORMAT_NAMES = {"avro": "Avro", "protobuf": "Protobuf", "json": "JSON Schema"}
# What each format's sink writes, per Spark type (the README's "Type mapping" has the full table).
_ENCODES = {
    "avro": "boolean, tinyint/smallint/int, bigint, float, double, string, binary, decimal (fixed, logical "
            "decimal), date (int date), timestamp (long timestamp-micros), timestamp_ntz (local-timestamp-"
            "micros), year-month and day-time intervals, void, arrays, maps with string keys and structs",
    "protobuf": "boolean, tinyint/smallint/int (int32), bigint (int64), float, double, string, binary (bytes), "
                "date (int32 days since 1970-01-01), timestamp (google.protobuf.Timestamp), day-time intervals "
                "(google.protobuf.Duration), structs (messages), arrays of those (repeated) and maps with "
                "string, integer or boolean keys",
    "json": "boolean, tinyint/smallint/int/bigint (integer), float, double, decimal (number), string, binary "
            "(base64 string), date (string, format date), timestamp and timestamp_ntz (string, format "
            "date-time), arrays, maps with string or integer keys and structs (objects)",
}


def _refuse_unencodable(spec: ColumnSpec, module, data_type) -> None:
    """The first field of ``data_type`` (depth first) whose Spark type the format's derivation refuses, named
    with its path: ``schema_for`` of a one-field struct is the format's own rule, asked field by field."""
    from pyspark.sql.types import ArrayType, MapType, StructField, StructType

    def refused(dt) -> bool:
        try:
            module.schema_for(StructType([StructField("x", dt)]), name="x", namespace="")
        except ValueError:
            return True
        return False

    def walk(dt, path: str) -> tuple[str, object] | None:
        if not refused(dt):
            return None
        inner = []
        if isinstance(dt, StructType):
            inner = [(f.dataType, f"{path}.{f.name}") for f in dt.fields]
        elif isinstance(dt, ArrayType):
            inner = [(dt.elementType, f"{path}.element")]
        elif isinstance(dt, MapType):
            inner = [(dt.keyType, f"{path}.key"), (dt.valueType, f"{path}.value")]
        for sub, sub_path in inner:
            found = walk(sub, sub_path)
            if found is not None:
                return found
        return path, dt

    if not isinstance(data_type, StructType):
        return   # the format's schema_for / encoder names what a non-struct column lacks
    found = walk(data_type, spec.side)
    if found is not None:
        path, dt = found
        raise _error(f"Column '{path}' is {dt.simpleString()}, which {spec.side}Format={spec.format} cannot "
                     f"encode. {_FORMAT_NAMES[spec.format]} encodes {_ENCODES[spec.format]} (README: Type "
                     f"mapping); cast the column (e.g. CAST(... AS STRING)) or write it with another format")


def _registry_error(exc, spec: ColumnSpec, registry, subject: str | None, topics, *, sink: bool, derived: bool,
                    text: str | None, derived_type) -> PylogOptionError:
    """A RegistryError while resolving ``spec`` as a PylogOptionError naming the option to change."""
    side = spec.side
    if exc.status == 0:
        return _error(f"Option 'schema.registry.url': the Schema Registry at {registry.describe()} cannot be "
                      f"reached ({exc}); {side}Format={spec.format} needs it before the query starts (check the "
                      f"URL and that the registry runs; each request waits schema.registry.timeout.ms="
                      f"{registry.timeout_ms})")
    if exc.code == 40401 and subject is not None:
        return _error(f"{side}Format={spec.format}: subject '{subject}' is not in the Schema Registry at "
                      f"{registry.describe()}{_subject_hint(spec, subject, topics, registry)}. Set the option "
                      f"'{side}Subject' to the subject to use (by default <topic>-{side}, or the record name "
                      f"with {side}SubjectNameStrategy; {exc})")
    if exc.code == 40402 and subject is not None:
        return _error(f"Option '{side}SchemaVersion': subject '{subject}' has no version {spec.version} "
                      f"{_versions_hint(subject, registry)}({exc})")
    if exc.status == 409 and sink:
        return _error(_incompatible(exc, spec, registry, subject, derived, text))
    return _error(f"{side}Format={spec.format}: {exc}")


def _subject_hint(spec: ColumnSpec, subject: str, topics, registry) -> str:
    """'; it has: ...' — the subjects of the query's topics and the names closest to ``subject``."""
    import difflib
    from connector.typed.registry_client import RegistryClient, RegistryError
    try:
        names = RegistryClient.shared(registry).subjects()
    except RegistryError:
        return ""
    if not names:
        return " (it has no subjects)"
    for_topics = [n for n in names if any(n.startswith(f"{t}-") for t in topics)]
    close = [n for n in difflib.get_close_matches(subject, names, n=5, cutoff=0.5) if n not in for_topics]
    listed = (for_topics + close)[:8]
    if not listed:
        return f" (none of its {len(names)} subjects is close: {', '.join(sorted(names)[:5])}" + \
            (", ..." if len(names) > 5 else "") + ")"
    return f" (subjects it has{' for ' + ', '.join(topics) if for_topics else ''}: {', '.join(listed)})"


def _versions_hint(subject: str, registry) -> str:
    from connector.typed.registry_client import RegistryClient, RegistryError
    try:
        versions = RegistryClient.shared(registry).versions(subject)
    except RegistryError:
        return ""
    return f"(it has {', '.join(map(str, versions[-10:]))}) " if versions else ""


def _incompatible(exc, spec: ColumnSpec, registry, subject: str | None, derived: bool, text: str | None) -> str:
    """The 409 message: what the registry refused, the fields added without a default, and the options that set
    the output schema instead."""
    side = spec.side
    added = _added_without_default(spec, registry, subject, text) if spec.format == "avro" else []
    why = (f": field{'s' if len(added) > 1 else ''} {', '.join(repr(f) for f in added)} "
           f"{'are' if len(added) > 1 else 'is'} added without a default, so the new schema cannot read the "
           f"subject's earlier records" if added else "")
    what = "the schema derived from the DataFrame's column" if derived else f"the schema of '{side}Schema'"
    return (f"{side}Format={spec.format}: the Schema Registry refused to register {what} under subject "
            f"'{subject}' as incompatible with its earlier versions{why} ({exc}). Set the output schema "
            f"explicitly: the option '{side}Schema' (a schema with defaults for the new fields), or register it "
            f"yourself and write with use.latest.version=true and auto.register.schemas=false (or name another "
            f"subject with '{side}Subject')")


def _added_without_default(spec: ColumnSpec, registry, subject: str | None, text: str | None) -> list[str]:
    """Dotted paths of record fields in ``text`` that the subject's latest version lacks and that have no
    default (Avro's READER_FIELD_MISSING_DEFAULT_VALUE)."""
    if subject is None or text is None:
        return []
    import json
    from connector.typed.registry_client import RegistryClient, RegistryError
    try:
        latest = json.loads(RegistryClient.shared(registry).version(subject, "latest").text)
        new = json.loads(text)
    except (RegistryError, ValueError):
        return []
    out: list[str] = []

    def record(s):
        if isinstance(s, list):
            records = [b for b in s if isinstance(b, dict) and b.get("type") == "record"]
            return records[0] if len(records) == 1 else None
        return s if isinstance(s, dict) and s.get("type") == "record" else None

    def walk(new_record, old_record, path):
        old_fields = {f["name"]: f for f in old_record.get("fields", [])}
        for alias_owner in old_record.get("fields", []):
            for alias in alias_owner.get("aliases", []) or []:
                old_fields.setdefault(alias, alias_owner)
        for f in new_record.get("fields", []):
            name = f"{path}.{f['name']}"
            old = old_fields.get(f["name"]) or next((old_fields[a] for a in f.get("aliases", []) or []
                                                     if a in old_fields), None)
            if old is None:
                if "default" not in f:
                    out.append(name)
                continue
            inner_new, inner_old = record(f["type"]), record(old["type"])
            if inner_new is not None and inner_old is not None:
                walk(inner_new, inner_old, name)

    new_record, old_record = record(new), record(latest)
    if new_record is not None and old_record is not None:
        walk(new_record, old_record, spec.side)
    return out


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
