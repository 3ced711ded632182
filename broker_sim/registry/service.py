"""``RegistryService``: Confluent Schema Registry's operations over a ``SchemaLog``, as async methods.

Theory of operation.  The registry's truth is the ``_schemas`` log; ``RegistryState`` is this broker's replay
of it.  Every operation first catches up (``catch_up``: apply what the log serves past the last applied
offset; cheap when nothing is new), so a broker answers reads from its own replay: the writer from its log
end, a follower from its high watermark.

A write (register, delete, config, mode) runs under one ``asyncio.Lock``: catch up, decide from the state
(Confluent's rules, ``KafkaSchemaRegistry``), append the records, wait until the log says they are committed,
apply them by catching up (the same path a replay takes), answer.  Holding the lock across the append is what
makes ids unique and versions dense: no second decision is taken before the first one's records are in the
state.  While an append waits for its commit, reads (which catch up too) stop before it: the writer's log
serves its end, and nobody may learn an id that a leader change could still take back.

No schema is parsed, checked or printed on the event loop: the request's schema, every compatibility check
of a request (one job: a transitive check's versions together) and a formatted answer run on the
``ComputeLane`` (``compute``: bounded threads, a deadline per job, 50002 beyond it), and a catch-up stops
before a record whose schema is new, parses it there and applies it with that parse
(``catch_up_off_loop``; the writer's own registrations hand their parse to the state, ``prepare``).

Ids are never reused: besides the log's own mark (``state``), a broker's ``IdCheckpoint`` keeps the highest
id it ever applied, and a replay that ends below it (the log emptied or recreated) is raised to it.

Only the broker leading ``_schemas`` partition 0 appends (``SchemaLog.is_writer``); elsewhere the REST layer
forwards the request to it (``forward``), and ``NotWriterError`` from ``append`` (leadership moved during the
write) is answered the same way.  ``registered`` is Confluent's first step of a registration, taken on any
broker and in any mode: a schema the subject already holds is answered from the local state.

The methods answer what Confluent's REST resources answer (JSON-ready dicts and lists) and raise
``RegistryError`` with Confluent's status, code and message.  What is not kept: Confluent's schema metadata,
rule sets, contexts and tags (accepted in requests and ignored).
"""
from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable, Iterator, Protocol

from broker_sim.registry import errors, records, types
from broker_sim.registry.errors import NotWriterError, RegistryError
from broker_sim.registry.compute import ComputeLane, ComputeTimeout
from broker_sim.registry.id_checkpoint import IdCheckpoint
from broker_sim.registry.records import (
    ClearSubjectValue, ConfigValue, DeleteSubjectValue, IdHighWaterValue, ModeValue, Reference, SchemaValue,
)
from broker_sim.registry.state import UNPARSABLE, RegistryState, identity

log = logging.getLogger(__name__)

LATEST = -1
MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
MAX_SUBJECT_LENGTH = 4096
CONTEXT_WILDCARD = ":*:"
INT32_MAX = (1 << 31) - 1

__all__ = ["LATEST", "NotWriterError", "RegistryService", "SchemaLog"]


class SchemaLog(Protocol):
    """Where the registry's records live: the broker's ``_schemas`` partition 0, or a test's list."""

    def is_writer(self) -> bool: ...

    async def append(self, records: list[tuple[bytes, bytes | None]]) -> int: ...

    def read_committed(self, from_offset: int) -> Iterator[tuple[int, bytes, bytes | None]]: ...

    def start_offset(self) -> int: ...

    # optional: ``end_offset() -> int``, the end of what ``read_committed`` serves; a log that ends below
    # what was applied was truncated, and ``catch_up`` replays it from its start


def valid_subject(subject: str) -> bool:
    """Confluent's ``QualifiedSubject.isValidSubject`` (no ISO control characters, not a reserved name), and
    pylog's length bound."""
    return (0 < len(subject) <= MAX_SUBJECT_LENGTH and subject not in ("__GLOBAL", "__EMPTY")
            and not any(ord(c) < 0x20 or 0x7f <= ord(c) <= 0x9f for c in subject))


def schema_entity(value: SchemaValue, text: str | None = None) -> dict:
    """Confluent's ``Schema`` entity JSON: subject, version, id, schemaType (not for AVRO), references (when
    any), schema."""
    out: dict = {"subject": value.subject, "version": value.version, "id": value.id}
    if value.schema_type != "AVRO":
        out["schemaType"] = value.schema_type
    if value.references:
        out["references"] = [r.to_json() for r in value.references]
    out["schema"] = value.schema if text is None else text
    return out


def config_entity(config: ConfigValue | None, default_level: str = "BACKWARD") -> dict:
    out: dict = {}
    if config is not None and config.normalize is not None:
        out["normalize"] = config.normalize
    level = config.compatibility_level if config is not None else None
    out["compatibilityLevel"] = level or default_level
    return out


class RegistryService:
    def __init__(self, log: SchemaLog, clock: Callable[[], float],
                 forward: Callable[[object], Awaitable[object]] | None = None,
                 id_checkpoint: IdCheckpoint | None = None, compute: ComputeLane | None = None) -> None:
        self.log = log
        self.clock = clock
        self.forward = forward
        self.id_checkpoint = id_checkpoint  # the id high-water mark that outlives the log (``id_checkpoint``)
        self.compute = compute or ComputeLane()  # where parsing and compatibility checks run (``compute``)
        self.state = RegistryState()
        self._position = 0  # the next offset to apply
        self._hold: int | None = None  # while an append waits for its commit: apply nothing from here on
        self._deferred: SchemaValue | None = None  # the record ``catch_up(defer_parses=True)`` stopped before
        self._last_parse: tuple | None = None
        self._lock = asyncio.Lock()

    # ---- replay ----

    @property
    def position(self) -> int:
        """The offset of the next record to apply."""
        return self._position

    def catch_up(self, defer_parses: bool = False) -> int:
        """Apply every record the log serves past the last one applied; the number applied.

        The state is rebuilt from the log's start when the log no longer continues what was applied: its
        start moved past our position (segments deleted under us), or — for a log with ``end_offset()`` —
        it ends below our position (an old leader's uncommitted tail, truncated when it follows again).
        ``defer_parses``: stop before a record whose schema would be parsed on the spot (``catch_up_off_loop``
        parses it on the compute lane, then applies it; every read and write catches up so, and the record
        check's refresh stops there, answering a retriable error for an id it cannot see yet)."""
        self._deferred = None
        start = self.log.start_offset()
        end_offset = getattr(self.log, "end_offset", None)
        end = end_offset() if end_offset is not None else None
        if start > self._position or (end is not None and end < self._position):
            if self.state.applied:
                log.warning("_schemas spans [%d, %s), not continuing our position %d: replaying from its start",
                            start, end, self._position)
            self.state = RegistryState()
            self._position = start
        applied = 0
        for offset, key, value in self.log.read_committed(self._position):
            if offset < self._position:
                continue
            if self._hold is not None and offset >= self._hold:
                break
            if defer_parses:
                self._deferred = self.state.unparsed(offset, key, value)
                if self._deferred is not None:
                    break
            self.state.apply(offset, key, value)
            self._position = offset + 1
            applied += 1
        self._keep_id_high_water()
        return applied

    async def catch_up_off_loop(self) -> int:
        """``catch_up``, each new schema parsed on the compute lane before its record is applied (the tail of
        ``_schemas``, and the writer before it decides); the number applied."""
        applied = 0
        while True:
            applied += self.catch_up(defer_parses=True)
            value, state = self._deferred, self.state
            if value is None:
                return applied
            resolved = state.resolve_references(value.references)
            parsed = UNPARSABLE
            if resolved is not None:
                try:
                    parsed = await self.compute.run(types.parse, value.schema_type, value.schema, resolved)
                except Exception as e:  # noqa: BLE001 - a stored schema the parsers refuse is kept unparsed
                    log.warning("_schemas: schema %d (%s/%s) does not parse: %s", value.id, value.subject,
                                value.version, e)
            state.prepare(value.schema_type, value.schema, value.references, parsed)

    def _keep_id_high_water(self) -> None:
        """Ids stay above every id this broker ever applied, even when the log no longer holds them."""
        checkpoint = self.id_checkpoint
        if checkpoint is None:
            return
        if self.state.id_high_water > checkpoint.value:
            checkpoint.raise_to(self.state.id_high_water)
        elif self.state.id_high_water < checkpoint.value:
            self.state.id_high_water = checkpoint.value

    async def _write(self, decide: Callable[[RegistryState], tuple[list, object]]) -> object:
        async with self._lock:
            await self.catch_up_off_loop()
            self.catch_up()
            decided = decide(self.state)
            planned, answer = await decided if asyncio.iscoroutine(decided) else decided
            if planned:
                if not self.log.is_writer():
                    raise NotWriterError("not the writer of _schemas")
                # the writer's log serves its end: until the append is committed, reads must not see it
                self._hold = self._position
                try:
                    await self.log.append([records.encode(k, v) for k, v in planned])
                finally:
                    self._hold = None
                self.catch_up()
            return answer

    async def _read(self) -> RegistryState:
        await self.catch_up_off_loop()
        return self.state

    # ---- shared rules ----

    @staticmethod
    def _check_subject(subject: str) -> None:
        if not valid_subject(subject):
            raise errors.invalid_subject(subject)

    @staticmethod
    def _resolve_version(state: RegistryState, subject: str, version: int,
                         include_deleted: bool) -> SchemaValue:
        """Confluent's ``validateAndGetSchema``: the version, or 40401 / 40402."""
        if version == LATEST:
            held = state.latest(subject, include_deleted)
            if held is None:
                raise errors.subject_not_found(subject)
            return held
        held = state.version(subject, version)
        if held is None or (held.deleted and not include_deleted):
            if not state.has_subject(subject, include_deleted):
                raise errors.subject_not_found(subject)
            raise errors.version_not_found(version)
        return held

    @staticmethod
    def _references(raw: list[dict] | tuple) -> tuple[Reference, ...]:
        return tuple(r if isinstance(r, Reference) else Reference(r["name"], r["subject"], r["version"])
                     for r in raw)

    async def _parse(self, state: RegistryState, schema: str, schema_type: str, references: tuple[Reference, ...],
                     normalize: bool):
        """The request's schema parsed (and normalized when asked) on the compute lane, its references pinned
        to versions."""
        if schema_type not in types.SCHEMA_TYPES:
            raise errors.RegistryError(422, errors.INVALID_SCHEMA, f"Invalid schema type {schema_type}")
        pinned = tuple(self._pin(state, references))
        # the same request parsed again against the same state (a registration's local check, then its
        # decision) reuses the result
        memo_key = (self._position, state is self.state, schema_type, schema, pinned, normalize)
        if self._last_parse is not None and self._last_parse[0] == memo_key:
            return self._last_parse[1], pinned
        resolved = state.resolve_references(pinned)
        if resolved is None:
            raise errors.invalid_schema("a referenced schema could not be parsed")
        parsed = await self.compute.run(_parsed, schema_type, schema, resolved, normalize)
        self._last_parse = (memo_key, parsed)
        return parsed, pinned

    @staticmethod
    def _pin(state: RegistryState, references: tuple[Reference, ...]) -> Iterator[Reference]:
        """``references`` with "latest" replaced by the subject's latest version; each must exist."""
        for ref in references:
            if ref.version == LATEST:
                latest = state.latest(ref.subject)
                if latest is None:
                    raise errors.invalid_schema(f"Invalid reference {ref.to_json()}: subject "
                                                f"'{ref.subject}' not found")
                ref = Reference(ref.name, ref.subject, latest.version)
            if state.version(ref.subject, ref.version) is None:
                raise errors.invalid_schema(f"Invalid reference {ref.to_json()}: version not found")
            yield ref

    async def _incompatibilities(self, state: RegistryState, level: str, parsed,
                                 previous: list[SchemaValue]) -> list[str]:
        """Confluent's ``isCompatibleWithPrevious``: the checker's messages for the first incompatible previous
        version (newest first; only the latest unless transitive), then its version and the level.  Every
        check of one request runs as one job on the compute lane, so its deadline bounds them together."""
        if level == "NONE" or not previous:
            return []
        checked = [previous[-1]] if not level.endswith("_TRANSITIVE") else list(reversed(previous))
        olds = []
        for old in checked:
            stored = state.schema_by_id(old.id)
            if stored is not None and stored.parsed is not None:
                olds.append((old.version, stored.parsed))
        if not olds:
            return []
        return await self.compute.run(_first_incompatibility, level, parsed, olds)

    # ---- subjects and versions ----

    async def registered(self, subject: str, schema: str | None, schema_type: str = "AVRO",
                         references: list | tuple = (), version: int = 0, schema_id: int = -1,
                         normalize: bool = False) -> dict | None:
        """Confluent's ``registerOrForward`` first step, on any broker and in any mode: ``{"id": n}`` when
        ``subject`` already holds this schema live (at ``version``, with ``schema_id``, when given), else
        None (an invalid request included: the registration itself answers its error)."""
        if not schema or not valid_subject(subject):
            return None
        state = await self._read()
        try:
            parsed, pinned = await self._parse(state, schema, schema_type, self._references(references),
                                               normalize or state.normalize(subject))
        except RegistryError as e:
            if e.error_code == errors.OPERATION_TIMEOUT:
                raise
            return None
        state = await self._read()
        existing = state.id_of(identity(schema_type, parsed.canonical, pinned))
        if existing is None:
            return None
        for held in state.all_versions(subject):
            if held.deleted or held.id != existing:
                continue
            if version == 0 and schema_id in (-1, existing) or version == held.version and schema_id == existing:
                return {"id": existing}
        return None

    async def register(self, subject: str, schema: str | None, schema_type: str = "AVRO",
                       references: list | tuple = (), version: int = 0, schema_id: int = -1,
                       normalize: bool = False) -> dict:
        """POST /subjects/{subject}/versions: ``{"id": n}``."""
        self._check_subject(subject)
        refs = self._references(references)
        answer = await self.registered(subject, schema, schema_type, refs, version, schema_id, normalize)
        if answer is not None:
            return answer

        async def decide(state: RegistryState):
            mode = state.mode_in_scope(subject)
            if mode in ("READONLY", "READONLY_OVERRIDE"):
                raise errors.not_permitted(f"Subject {subject} is in read-only mode")
            if schema_id >= 0 and mode != "IMPORT":
                raise errors.not_permitted(f"Subject {subject} is not in import mode")
            if schema_id < 0 and mode != "READWRITE":
                raise errors.not_permitted(f"Subject {subject} is not in read-write mode")
            every = state.all_versions(subject)
            live = [v for v in every if not v.deleted]
            new_version = max([v.version + 1 for v in every], default=1)
            text, kind, pinned_in = schema, schema_type, refs
            if text is None or not text.strip():
                if not live:
                    raise errors.invalid_schema("Empty schema")
                text, kind, pinned_in = live[-1].schema, live[-1].schema_type, live[-1].references
            parsed, pinned = await self._parse(state, text, kind, pinned_in, normalize or state.normalize(subject))
            ident = identity(kind, parsed.canonical, pinned)
            new_id = schema_id
            existing = state.id_of(ident)
            if existing is not None and (schema_id < 0 or schema_id == existing):
                for held in live:  # already there (an import run again names its version too)
                    if held.id == existing and version in (0, held.version):
                        return [], {"id": existing}
                new_id = existing
            if mode != "IMPORT":
                messages = await self._incompatibilities(state, state.compatibility_level(subject), parsed, live)
                if messages:
                    raise errors.incompatible(subject, messages)
            number = version if version > 0 else new_version
            if version > 0 and version != new_version and mode != "IMPORT":
                raise errors.invalid_schema("Version is not one more than previous version")
            if new_id >= 0:
                held_ident = state.identity_of_id(new_id)
                if state.schema_by_id(new_id) is not None and held_ident != ident:
                    raise errors.not_permitted(f"Overwrite new schema with id {new_id} is not permitted.")
            else:
                new_id = state.next_id
                if new_id > INT32_MAX:
                    raise errors.RegistryError(500, errors.STORE_ERROR, "schema ids are exhausted")
            planned: list = [(records.schema_key(subject, old.version), None) for old in every
                             if old.deleted and old.id == new_id and old.version < number]
            planned.append((records.schema_key(subject, number),
                            SchemaValue(subject, number, new_id, parsed.stored_text, kind, pinned)))
            state.prepare(kind, parsed.stored_text, pinned, parsed)  # its replay needs no second parse
            return planned, {"id": new_id}

        return await self._write(decide)

    async def lookup(self, subject: str, schema: str, schema_type: str = "AVRO", references: list | tuple = (),
                     normalize: bool = False, include_deleted: bool = False) -> dict:
        """POST /subjects/{subject}: the version of ``subject`` holding this schema."""
        state = await self._read()
        parsed, pinned = await self._parse(state, schema, schema_type, self._references(references),
                                           normalize or state.normalize(subject))
        state = await self._read()
        schema_id = state.id_of(identity(schema_type, parsed.canonical, pinned))
        if schema_id is not None:
            for s, v in state.subject_versions_of_id(schema_id, include_deleted):
                if s == subject:
                    return schema_entity(state.version(s, v))
        if not state.has_subject(subject, include_deleted):
            raise errors.subject_not_found(subject)
        raise errors.schema_not_found()

    async def subjects(self, prefix: str = "", include_deleted: bool = False,
                       deleted_only: bool = False) -> list[str]:
        """GET /subjects (``prefix`` ":*:", Confluent's context wildcard, is every subject)."""
        prefix = "" if prefix == CONTEXT_WILDCARD else prefix
        state = await self._read()
        return [s for s in state.subjects(include_deleted, deleted_only) if s.startswith(prefix)]

    async def versions(self, subject: str, include_deleted: bool = False, deleted_only: bool = False) -> list[int]:
        state = await self._read()
        numbers = state.versions(subject, include_deleted, deleted_only)
        if not numbers and not state.has_subject(subject, include_deleted or deleted_only):
            raise errors.subject_not_found(subject)
        return numbers

    async def get_version(self, subject: str, version: int, include_deleted: bool = False,
                          fmt: str | None = None) -> dict:
        state = await self._read()
        held = self._resolve_version(state, subject, version, include_deleted)
        return schema_entity(held, await self._formatted(state, held.id, held.schema, fmt))

    async def referenced_by(self, subject: str, version: int) -> list[int]:
        state = await self._read()
        held = self._resolve_version(state, subject, version, True)
        return state.referenced_by_ids(subject, held.version)

    async def delete_version(self, subject: str, version: int, permanent: bool = False) -> int:
        """DELETE /subjects/{subject}/versions/{version}: the version deleted."""

        def decide(state: RegistryState):
            if version == LATEST:
                held = state.latest(subject) or (state.latest(subject, True) if permanent else None)
                if held is None:
                    raise errors.subject_not_found(subject)
            else:
                held = state.version(subject, version)
                if held is None:
                    if not state.has_subject(subject, True):
                        raise errors.subject_not_found(subject)
                    raise errors.version_not_found(version)
            if not permanent and held.deleted:
                raise errors.version_soft_deleted(subject, held.version)
            if state.mode_in_scope(subject) in ("READONLY", "READONLY_OVERRIDE"):
                raise errors.not_permitted(f"Subject {subject} is in read-only mode")
            if state.referrers(subject, held.version):
                raise errors.reference_exists(subject, held.version)
            if permanent and not held.deleted:
                raise errors.version_not_soft_deleted(subject, held.version)
            key = records.schema_key(subject, held.version)
            if permanent:
                return [(key, None), (records.ID_HIGH_WATER_KEY, IdHighWaterValue(state.id_high_water))], \
                    held.version
            planned: list = [(key, SchemaValue(held.subject, held.version, held.id, held.schema, held.schema_type,
                                               held.references, deleted=True))]
            if [v for v in state.versions(subject) if v != held.version] == []:
                planned += self._forget_subject_settings(state, subject)
            return planned, held.version

        return await self._write(decide)

    @staticmethod
    def _forget_subject_settings(state: RegistryState, subject: str) -> list:
        planned = []
        if state.mode(subject) is not None:
            planned.append((records.mode_key(subject), None))
        if state.config(subject) is not None:
            planned.append((records.config_key(subject), None))
        return planned

    async def delete_subject(self, subject: str, permanent: bool = False) -> list[int]:
        """DELETE /subjects/{subject}: the versions deleted."""

        def decide(state: RegistryState):
            if not state.has_subject(subject, True):
                raise errors.subject_not_found(subject)
            if not permanent and not state.has_subject(subject, False):
                raise errors.subject_soft_deleted(subject)
            if state.mode_in_scope(subject) in ("READONLY", "READONLY_OVERRIDE"):
                raise errors.not_permitted(f"Subject {subject} is in read-only mode")
            numbers = state.versions(subject, include_deleted=permanent)
            for number in numbers:
                if state.referrers(subject, number):
                    raise errors.reference_exists(subject, number)
                if permanent and not state.version(subject, number).deleted:
                    raise errors.subject_not_soft_deleted(subject)
            if permanent:
                planned = [(records.schema_key(subject, n), None) for n in numbers]
                planned.append((records.ID_HIGH_WATER_KEY, IdHighWaterValue(state.id_high_water)))
            else:
                planned = [(records.delete_subject_key(subject), DeleteSubjectValue(subject, numbers[-1]))]
                planned += self._forget_subject_settings(state, subject)
            return planned, numbers

        return await self._write(decide)

    # ---- schemas by id ----

    async def _formatted(self, state: RegistryState, schema_id: int, text: str, fmt: str | None) -> str:
        """The schema in the asked format (printed on the compute lane: a large schema costs a while)."""
        if not fmt or fmt.strip() == "" or fmt.lower() == "default":
            return text
        stored = state.schema_by_id(schema_id)
        if stored is None or stored.parsed is None:
            return text
        try:
            return await self.compute.run(stored.parsed.formatted, fmt)
        except RegistryError:
            raise
        except types.SchemaError as e:
            raise errors.invalid_schema(str(e)) from None
        except Exception:
            log.exception("schema registry: schema %d in format %r failed", schema_id, fmt)
            return text

    @staticmethod
    def _stored(state: RegistryState, schema_id: int, name_id: bool = True):
        stored = state.schema_by_id(schema_id)
        if stored is None:
            raise errors.schema_not_found(schema_id if name_id else None)
        return stored

    async def schema_by_id(self, schema_id: int, fmt: str | None = None, fetch_max_id: bool = False) -> dict:
        """GET /schemas/ids/{id}: Confluent's ``SchemaString``."""
        state = await self._read()
        stored = self._stored(state, schema_id)
        out: dict = {}
        if stored.schema_type != "AVRO":
            out["schemaType"] = stored.schema_type
        out["schema"] = await self._formatted(state, schema_id, stored.text, fmt)
        if stored.references:
            out["references"] = [r.to_json() for r in stored.references]
        if fetch_max_id:
            out["maxId"] = state.id_high_water
        return out

    async def subjects_of_id(self, schema_id: int, include_deleted: bool = False) -> list[str]:
        state = await self._read()
        self._stored(state, schema_id, name_id=False)
        return sorted({s for s, _ in state.subject_versions_of_id(schema_id, include_deleted)})

    async def versions_of_id(self, schema_id: int, include_deleted: bool = False) -> list[dict]:
        state = await self._read()
        self._stored(state, schema_id, name_id=False)
        return [{"subject": s, "version": v} for s, v in state.subject_versions_of_id(schema_id, include_deleted)]

    async def schemas(self, prefix: str = "", include_deleted: bool = False, latest_only: bool = False) -> list:
        """GET /schemas: every version of every subject under ``prefix``, as Schema entities."""
        prefix = "" if prefix == CONTEXT_WILDCARD else prefix
        state = await self._read()
        out = []
        for subject in state.subjects(include_deleted):
            if not subject.startswith(prefix):
                continue
            held = [v for v in state.all_versions(subject) if include_deleted or not v.deleted]
            out += [schema_entity(v) for v in (held[-1:] if latest_only else held)]
        return out

    @staticmethod
    def schema_types() -> list[str]:
        return list(types.SCHEMA_TYPES)

    # ---- config ----

    async def get_config(self, subject: str | None, default_to_global: bool = False) -> dict:
        state = await self._read()
        if subject is None:
            return config_entity(state.config(None))
        config = state.config(subject)
        if config is None or config.compatibility_level is None:
            if not default_to_global:
                raise errors.compatibility_not_configured(subject)
            return config_entity(state.config(None))
        return config_entity(config)

    async def set_config(self, subject: str | None, compatibility: str | None,
                         normalize: bool | None = None) -> dict:
        """PUT /config[/subject]: echoes the update (Confluent's ``ConfigUpdateRequest``)."""
        if compatibility is not None:
            compatibility = compatibility.upper()
            if compatibility not in types.COMPATIBILITY_LEVELS:
                raise errors.invalid_compatibility_level()
        if subject is not None:
            self._check_subject(subject)

        def decide(state: RegistryState):
            old = state.config(subject)
            merged = ConfigValue(subject,
                                 compatibility if compatibility is not None else (old and old.compatibility_level),
                                 normalize if normalize is not None else (old and old.normalize),
                                 old.extra if old is not None else {})
            answer: dict = {}
            if merged.compatibility_level is not None:
                answer["compatibility"] = merged.compatibility_level
            if merged.normalize is not None:
                answer["normalize"] = merged.normalize
            return [(records.config_key(subject), merged)], answer

        return await self._write(decide)

    async def delete_config(self, subject: str | None) -> dict:
        """DELETE /config[/subject]: the config that was in force there."""

        def decide(state: RegistryState):
            old = state.config(subject)
            if subject is not None and old is None:
                raise errors.subject_not_found(subject)
            planned = [(records.config_key(subject), None)] if old is not None else []
            return planned, config_entity(old)

        return await self._write(decide)

    # ---- mode ----

    async def get_mode(self, subject: str | None, default_to_global: bool = False) -> dict:
        state = await self._read()
        if subject is None:
            return {"mode": state.mode_in_scope(None)}
        mode = state.mode(subject)
        if mode is None:
            if not default_to_global:
                raise errors.mode_not_configured(subject)
            mode = state.mode_in_scope(None)
        return {"mode": mode}

    async def set_mode(self, subject: str | None, mode: object, force: bool = False) -> dict:
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise errors.invalid_mode()
        echo, mode = mode, mode.upper()
        if subject is not None:
            self._check_subject(subject)

        def decide(state: RegistryState):
            planned: list = []
            if mode == "IMPORT" and state.mode_in_scope(subject) != "IMPORT" and not force:
                occupied = state.has_subject(subject) if subject is not None else bool(state.subjects())
                if occupied:
                    raise errors.not_permitted("Cannot import since found existing subjects")
                # Confluent's: no live schema is left there; forget the soft-deleted ones too
                planned.append((records.clear_subject_key(subject), ClearSubjectValue(subject)))
            planned.append((records.mode_key(subject), ModeValue(subject, mode)))
            return planned, {"mode": echo}  # Confluent answers the request as it came

        return await self._write(decide)

    async def delete_mode(self, subject: str | None) -> dict:

        def decide(state: RegistryState):
            old = state.mode(subject)
            if old is None:
                if subject is not None:
                    raise errors.subject_not_found(subject)
                return [], {"mode": state.mode_in_scope(None)}
            return [(records.mode_key(subject), None)], {"mode": old}

        return await self._write(decide)

    # ---- compatibility ----

    async def test_compatibility(self, subject: str, version: int | None, schema: str, schema_type: str = "AVRO",
                                 references: list | tuple = (), normalize: bool = False,
                                 verbose: bool = False) -> dict:
        """POST /compatibility/subjects/{subject}/versions[/{version}] (``version`` None: every live version)."""
        state = await self._read()
        if version is None:
            previous = [v for v in state.all_versions(subject) if not v.deleted]
        elif version == LATEST:
            latest = state.latest(subject)
            previous = [latest] if latest is not None else []
        else:
            held = state.version(subject, version)
            if held is None or held.deleted:  # Confluent answers 40402 here, whether the subject exists or not
                raise errors.version_not_found(version)
            previous = [held]
        try:
            parsed, _ = await self._parse(state, schema, schema_type, self._references(references),
                                          normalize or state.normalize(subject))
        except RegistryError as e:
            if not verbose or e.error_code != errors.INVALID_SCHEMA:
                raise
            return {"is_compatible": False, "messages": [e.message]}  # Confluent's verbose answer
        messages = await self._incompatibilities(state, state.compatibility_level(subject), parsed, previous)
        answer: dict = {"is_compatible": not messages}
        if verbose:
            answer["messages"] = messages
        return answer


def _parsed(schema_type: str, schema: str, resolved, normalize: bool):
    """``types.parse`` (then ``normalized`` when asked), its failures as 42201 answers; pure, so it may run
    on a worker thread."""
    try:
        parsed = types.parse(schema_type, schema, resolved)
        return parsed.normalized() if normalize else parsed
    except types.SchemaError as e:
        raise errors.invalid_schema(str(e)) from None
    except Exception as e:  # a parser's own failure on hostile text is still the client's invalid schema
        log.exception("schema registry: the %s parser failed", schema_type)
        raise errors.invalid_schema(f"{type(e).__name__}: {e}") from None


def _first_incompatibility(level: str, parsed, olds: list[tuple[int, object]]) -> list[str]:
    """The checker's messages for the first of ``olds`` ((version, parsed), in order) that ``parsed`` is not
    compatible with, then that version and the level; [] when compatible with all.  Pure: runs on the compute
    lane."""
    for version, old in olds:
        try:
            messages = types.check_compatibility(level, parsed, [old])
        except ComputeTimeout:
            raise
        except Exception as e:  # a checker's failure refuses the schema rather than answering 500
            log.exception("schema registry: the %s compatibility check failed", parsed.schema_type)
            messages = [f"{{errorType:'CHECK_FAILED', description:'{type(e).__name__}: {e}'}}"]
        if messages:
            at = next((i for i, m in enumerate(messages) if m.startswith("{oldSchema: ")), len(messages))
            return (messages[:at] + [f"{{oldSchemaVersion: {version}}}"] + messages[at:]
                    + [f"{{compatibility: '{level}'}}"])
    return []
