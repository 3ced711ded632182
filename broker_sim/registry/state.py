"""``RegistryState``: what the ``_schemas`` log says, replayed record by record, and the reads over it.

Theory of operation.  The log is the registry; this is its in-memory image, the equivalent of Confluent's
``KafkaStoreMessageHandler`` applying records to its ``InMemoryCache``.  ``apply(offset, key, value)`` takes
one record in log order and never raises: a record ``records.decode`` cannot read is logged and skipped, and
a record that contradicts its key (a SCHEMA value naming another subject or version) likewise.  A state built
by applying the same records answers the same; the writer applies its own records only after the log has
them (``service.RegistryService``), so a restart's replay rebuilds exactly what was answered.

What a record does:

- SCHEMA value: (re)places one (subject, version); ``deleted`` marks it soft-deleted.  The id -> schema map
  keeps the text of the first record seen for an id (every version sharing an id has the same schema).
  SCHEMA tombstone (a permanent delete): drops that version; an id no version holds any longer is gone.
- DELETE_SUBJECT {version}: soft-deletes every version of the subject up to ``version``.
- CLEAR_SUBJECT: drops the soft-deleted versions of the subject (of every subject without one); Confluent
  writes it when a subject or the registry enters IMPORT mode.
- CONFIG / MODE value: the subject's (or, without subject, the global) config or mode; a tombstone removes it.
- NOOP: nothing.  ID_HIGH_WATER (pylog's NOOP-keyed record): raises the id high-water mark.

Ids are never reused.  ``next_id`` is one past the highest id this state ever saw: in any SCHEMA record
(deleted or not, even if later tombstoned) and in the ID_HIGH_WATER record.  A permanent delete removes
SCHEMA records, and compaction may then drop the record of the highest id, so the writer appends an
ID_HIGH_WATER record with every permanent delete (``records`` says why Confluent's reader tolerates it): the
last one survives compaction and keeps the mark.  (Confluent's own ``IncrementalIdGenerator`` takes the
highest id still in the store, and would reuse ids after such a compaction.)  A log that lost records
outright (emptied, truncated) cannot keep the mark: the service raises ``id_high_water`` to its
``IdCheckpoint`` after each replay.

Each stored schema is parsed once, when its first record is applied (or taken from ``prepare``: the service
parses new schemas off the event loop before it applies their records, ``unparsed`` says which), with its references resolved to the
(subject, version) they name; a schema the parsers refuse (written by another registry, say) is kept with
``parsed = None``, still served as text, and never equal to a new registration.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from broker_sim.registry import records
from broker_sim.registry.records import Key, Reference, SchemaValue

log = logging.getLogger(__name__)

DEFAULT_COMPATIBILITY = "BACKWARD"
DEFAULT_MODE = "READWRITE"

Identity = tuple  # (schema_type, canonical form, references): what makes two registrations "the same schema"
UNPARSABLE = object()  # ``prepare``'s answer for a schema the parsers refused
MAX_PREPARED = 64  # parses prepared and not applied yet (a rebuilt state, a record compacted away) are dropped


@dataclass(frozen=True)
class StoredSchema:
    id: int
    schema_type: str
    text: str
    references: tuple[Reference, ...]
    parsed: object | None  # types.ParsedSchema; None when the parsers refuse the stored text


def identity(schema_type: str, canonical: str, references: tuple[Reference, ...]) -> Identity:
    return schema_type, canonical, tuple((r.name, r.subject, r.version) for r in references)


class RegistryState:
    def __init__(self) -> None:
        self._versions: dict[str, dict[int, SchemaValue]] = {}
        self._schemas: dict[int, StoredSchema] = {}
        self._holders: dict[int, set[tuple[str, int]]] = {}  # id -> the (subject, version)s that hold it
        self._identities: dict[Identity, int] = {}
        self._identity_of: dict[int, Identity] = {}
        self._referrers: dict[tuple[str, int], set[tuple[str, int]]] = {}  # referenced -> referencing
        self._configs: dict[str | None, records.ConfigValue] = {}
        self._modes: dict[str | None, str] = {}
        self.id_high_water = 0
        self._prepared: dict[tuple, object] = {}  # (type, text, references) -> parsed, from ``prepare``
        self.applied = 0  # records applied (skipped ones included), for the logs and the tests

    # ---- replay ----

    def apply(self, offset: int, key: bytes | None, value: bytes | None) -> None:
        """Apply one ``_schemas`` record (in log order); never raises."""
        self.applied += 1
        decoded = records.decode(key, value, offset)
        if decoded is None:
            return
        k, v = decoded
        try:
            self._apply(k, v)
        except Exception:  # a record this state cannot take must not stop the replay
            log.exception("_schemas offset %d: record %r not applied", offset, k)

    def _apply(self, key: Key, value) -> None:
        kind = key.keytype
        if kind == records.SCHEMA:
            if value is None:
                self._drop_version(key.subject, key.version)
            elif value.subject != key.subject or value.version != key.version:
                log.warning("_schemas: SCHEMA value for %s/%s under key %s/%s skipped", value.subject,
                            value.version, key.subject, key.version)
            else:
                self._put_version(value)
        elif kind == records.CONFIG:
            if value is None:
                self._configs.pop(key.subject, None)
            else:
                self._configs[key.subject] = value
        elif kind == records.MODE:
            if value is None:
                self._modes.pop(key.subject, None)
            else:
                self._modes[key.subject] = value.mode
        elif kind == records.DELETE_SUBJECT:
            if value is not None:
                versions = self._versions.get(key.subject, {})
                for version, held in list(versions.items()):
                    if version <= value.version and not held.deleted:
                        versions[version] = replace(held, deleted=True)
        elif kind == records.CLEAR_SUBJECT:
            if value is not None:
                subjects = [key.subject] if key.subject is not None else list(self._versions)
                for subject in subjects:
                    for version, held in list(self._versions.get(subject, {}).items()):
                        if held.deleted:
                            self._drop_version(subject, version)
        elif kind == records.ID_HIGH_WATER:
            if value is not None:
                self.id_high_water = max(self.id_high_water, value.id_high_water)

    def _put_version(self, value: SchemaValue) -> None:
        where = (value.subject, value.version)
        previous = self._versions.get(value.subject, {}).get(value.version)
        if previous is not None and previous.id != value.id:
            self._drop_version(value.subject, value.version)
        self._versions.setdefault(value.subject, {})[value.version] = value
        self.id_high_water = max(self.id_high_water, value.id)
        self._holders.setdefault(value.id, set()).add(where)
        for ref in value.references:
            self._referrers.setdefault((ref.subject, ref.version), set()).add(where)
        if value.id not in self._schemas:
            parsed = self._parse_stored(value)
            self._schemas[value.id] = StoredSchema(value.id, value.schema_type, value.schema, value.references,
                                                   parsed)
            if parsed is not None:
                ident = identity(value.schema_type, parsed.canonical, value.references)
                self._identities.setdefault(ident, value.id)
                self._identity_of[value.id] = ident

    def _drop_version(self, subject: str, version: int) -> None:
        versions = self._versions.get(subject)
        held = versions.pop(version, None) if versions else None
        if held is None:
            return
        if not versions:
            del self._versions[subject]
        where = (subject, version)
        for ref in held.references:
            referrers = self._referrers.get((ref.subject, ref.version))
            if referrers is not None:
                referrers.discard(where)
                if not referrers:
                    del self._referrers[(ref.subject, ref.version)]
        holders = self._holders.get(held.id)
        if holders is not None:
            holders.discard(where)
            if not holders:
                del self._holders[held.id]
                self._schemas.pop(held.id, None)
                ident = self._identity_of.pop(held.id, None)
                if ident is not None and self._identities.get(ident) == held.id:
                    del self._identities[ident]

    def prepare(self, schema_type: str, text: str, references: tuple[Reference, ...], parsed) -> None:
        """The parse of a schema whose record is about to be applied, made off the event loop by the service
        (``UNPARSABLE``: the parsers refused it): its ``apply`` takes it instead of parsing the text."""
        if len(self._prepared) >= MAX_PREPARED:
            self._prepared.clear()
        self._prepared[(schema_type, text, references)] = parsed

    def unparsed(self, offset: int, key: bytes | None, value: bytes | None) -> SchemaValue | None:
        """The SCHEMA value of this record when applying it would parse its schema on the spot: its id is new
        here and no parse of it was prepared; else None."""
        if value is None or key is None or b'"SCHEMA"' not in key:
            return None
        decoded = records.decode(key, value, offset)
        if decoded is None or decoded[0].keytype != records.SCHEMA or decoded[1] is None:
            return None
        held = decoded[1]
        if held.id in self._schemas or (held.schema_type, held.schema, held.references) in self._prepared:
            return None
        return held

    def _parse_stored(self, value: SchemaValue):
        from broker_sim.registry import types
        prepared = self._prepared.pop((value.schema_type, value.schema, value.references), None)
        if prepared is UNPARSABLE:
            log.warning("_schemas: schema %d (%s/%s) does not parse", value.id, value.subject, value.version)
            return None
        if prepared is not None:
            return prepared
        try:
            resolved = self.resolve_references(value.references)
            if resolved is None:
                log.warning("_schemas: %s/%s references a version that is not there", value.subject,
                            value.version)
                return None
            return types.parse(value.schema_type, value.schema, resolved)
        except Exception as e:  # SchemaError, or anything a parser raises on text pylog did not write
            log.warning("_schemas: schema %d (%s/%s) does not parse: %s", value.id, value.subject, value.version, e)
            return None

    # ---- reads ----

    @property
    def next_id(self) -> int:
        return self.id_high_water + 1

    def resolve_references(self, references: tuple[Reference, ...]) -> dict | None:
        """Reference name -> the parsed schema it names; None when one is missing or unparsable."""
        resolved = {}
        for ref in references:
            held = self._versions.get(ref.subject, {}).get(ref.version)
            stored = self._schemas.get(held.id) if held is not None else None
            if stored is None or stored.parsed is None:
                return None
            resolved[ref.name] = stored.parsed
        return resolved

    def schema_by_id(self, schema_id: int) -> StoredSchema | None:
        return self._schemas.get(schema_id)

    def subject_versions_of_id(self, schema_id: int, include_deleted: bool = False) -> list[tuple[str, int]]:
        holders = self._holders.get(schema_id, ())
        return sorted(w for w in holders if include_deleted or not self._versions[w[0]][w[1]].deleted)

    def id_of(self, ident: Identity) -> int | None:
        return self._identities.get(ident)

    def identity_of_id(self, schema_id: int) -> Identity | None:
        return self._identity_of.get(schema_id)

    def subjects(self, include_deleted: bool = False, deleted_only: bool = False) -> list[str]:
        out = []
        for subject, versions in self._versions.items():
            live = any(not v.deleted for v in versions.values())
            if deleted_only:
                if any(v.deleted for v in versions.values()):
                    out.append(subject)
            elif live or include_deleted:
                out.append(subject)
        return sorted(out)

    def has_subject(self, subject: str, include_deleted: bool = False) -> bool:
        versions = self._versions.get(subject)
        return bool(versions) and (include_deleted or any(not v.deleted for v in versions.values()))

    def versions(self, subject: str, include_deleted: bool = False, deleted_only: bool = False) -> list[int]:
        versions = self._versions.get(subject, {})
        if deleted_only:
            return sorted(n for n, v in versions.items() if v.deleted)
        return sorted(n for n, v in versions.items() if include_deleted or not v.deleted)

    def version(self, subject: str, version: int) -> SchemaValue | None:
        """The (subject, version) record, soft-deleted or not."""
        return self._versions.get(subject, {}).get(version)

    def latest(self, subject: str, include_deleted: bool = False) -> SchemaValue | None:
        numbers = self.versions(subject, include_deleted)
        return self._versions[subject][numbers[-1]] if numbers else None

    def all_versions(self, subject: str) -> list[SchemaValue]:
        versions = self._versions.get(subject, {})
        return [versions[n] for n in sorted(versions)]

    def referrers(self, subject: str, version: int) -> list[tuple[str, int]]:
        return sorted(self._referrers.get((subject, version), ()))

    def referenced_by_ids(self, subject: str, version: int) -> list[int]:
        return sorted({self._versions[s][v].id for s, v in self.referrers(subject, version)})

    def config(self, subject: str | None) -> records.ConfigValue | None:
        """The config set for ``subject`` (None: the global one) itself, or None."""
        return self._configs.get(subject)

    def compatibility_level(self, subject: str | None) -> str:
        """The level in force for ``subject``: its own, else the global one, else BACKWARD."""
        for scope in ((subject, None) if subject is not None else (None,)):
            config = self._configs.get(scope)
            if config is not None and config.compatibility_level:
                return config.compatibility_level
        return DEFAULT_COMPATIBILITY

    def normalize(self, subject: str | None) -> bool:
        for scope in ((subject, None) if subject is not None else (None,)):
            config = self._configs.get(scope)
            if config is not None and config.normalize is not None:
                return config.normalize
        return False

    def mode(self, subject: str | None) -> str | None:
        """The mode set for ``subject`` (None: the global one) itself, or None."""
        return self._modes.get(subject)

    def mode_in_scope(self, subject: str | None) -> str:
        """The mode in force for ``subject``: its own, else the global one, else READWRITE; a global
        READONLY_OVERRIDE overrides every subject's own (Confluent's ``getModeInScope``)."""
        global_mode = self._modes.get(None, DEFAULT_MODE)
        if subject is not None and subject in self._modes and global_mode != "READONLY_OVERRIDE":
            return self._modes[subject]
        return global_mode

    def snapshot(self) -> dict:
        """Everything a read can observe, as plain values (replay-equivalence tests compare these)."""
        return {
            "versions": {s: {n: v for n, v in vs.items()} for s, vs in self._versions.items()},
            "schemas": {i: (s.schema_type, s.text, s.references) for i, s in self._schemas.items()},
            "configs": dict(self._configs),
            "modes": dict(self._modes),
            "next_id": self.next_id,
        }
