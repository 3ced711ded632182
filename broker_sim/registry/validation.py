"""Broker-side schema validation: Confluent Server's ``confluent.{key,value}.schema.validation`` (sans-IO).

Theory of operation.  A topic with ``confluent.value.schema.validation=true`` (or the key's) accepts a
produced record only when its value (key) is in Confluent's wire format -- magic byte 0, then a 4-byte
big-endian schema id -- and that id is registered under the subject that
``confluent.value.subject.name.strategy`` (the key's) names:

===========================  ==============================================================
TopicNameStrategy (default)  ``<topic>-value`` / ``<topic>-key``
RecordNameStrategy           the schema's record name (``ParsedSchema.name``: the Avro full
                             name, the Protobuf message's full name, the JSON Schema title)
TopicRecordNameStrategy      ``<topic>-<record name>``
===========================  ==============================================================

As Confluent Server, the check looks at the id only, never at the payload ("does not perform data
introspection"), and a null value (a tombstone) or a null key passes: compacted topics must stay deletable.
A soft-deleted version still counts (Confluent: after a soft delete "the schema ID would still be
available for any lookup", and records already serialized with it keep flowing; Redpanda checks with
``include_deleted`` too); a permanently deleted one does not.  For Protobuf under the record-name strategies
the message indexes after the id (Confluent's serializer writes them) pick the message whose full name is
the record name.

A produce's records for one partition are refused whole when any record fails: INVALID_RECORD, with one
KIP-467 record error per failing record (its index among the partition's records, which is its batch
index for the single batch clients send) naming the side, the problem, the schema id and the subject, and
Kafka's summary as the error message (``RecordValidationError.of``).  Nothing of the partition's records is
appended.  At most ``MAX_RECORD_ERRORS`` records are named (the first ones; the message counts them all):
a produce of tens of thousands of failing records would otherwise build, on the event loop, an answer
larger than the produce.

Two steps, so the costly one runs wherever ``storage.validator`` runs (a thread for big or compressed
inputs) and costs no second decompression nor walk: ``RecordScan.__call__`` is given the values (keys)
the validator's walk read with aiokafka's compiled reader, and collects their distinct 5-byte heads at C
speed (pure: no registry, any thread; well under 100 ns a record); then
``RecordScan.verdict`` (on the event loop) looks each distinct id up in the broker's ``RegistryState``, and
walks the records one by one only when one fails, to name each failing record.
The answers are cached per (topic, side, strategy, id) until the state applies another record, so a produce
of records of one schema costs one dict hit per id after the first.  An id that fails is looked up again
after the registry catches up with ``_schemas`` (a schema registered through another broker a moment ago).

Retriable answers (``REGISTRY_NOT_READY``: COORDINATOR_LOAD_IN_PROGRESS, which Kafka's, librdkafka's and
kafka-python's producers retry), never records accepted unchecked:

- the registry cannot answer yet (the broker's registry is not started, or its ``_schemas`` replica is not
  open yet);
- on a broker that is not the writer (its replica follows the writer's), an id above every id its replay
  has seen: ids are given in order, so that schema was registered after the replica's high watermark and
  arrives with the next fetch.  An unknown id below that mark was never registered, or permanently deleted:
  INVALID_RECORD.

``broker_validation(registry)`` is the one piece that knows the broker: it reads the state of the broker's
``server/schema_registry.SchemaRegistry`` and catches it up (``registry/wiring.catch_up``).
"""
from __future__ import annotations

import operator
import struct
from typing import Callable, Mapping, NamedTuple

import kafka.errors as Errors

from broker_sim.config import SUBJECT_NAME_STRATEGIES, parse_topic_config
from broker_sim.registry.schema_log import SCHEMAS_TOPIC
from broker_sim.registry.wiring import catch_up
from broker_sim.storage.batch import BatchHeader
from broker_sim.storage.validator import RecordValidationError

TOPIC_NAME_STRATEGY, RECORD_NAME_STRATEGY, TOPIC_RECORD_NAME_STRATEGY = SUBJECT_NAME_STRATEGIES
MAGIC_BYTE = 0
_SCHEMA_ID = struct.Struct(">i")  # after the magic byte: the schema id, a big-endian int32
_HEAD = operator.itemgetter(slice(0, 5))  # a record side's magic byte and schema id (at C speed)
# The retriable answer while the registry cannot look ids up: producers retry it, as a coordinator's load.
REGISTRY_NOT_READY = Errors.CoordinatorLoadInProgressError
# Most Protobuf message indexes read after a schema id (a deeper nesting than this is refused as malformed),
# and the most bytes they take (a count and that many varints of at most 5 bytes)
MAX_MESSAGE_INDEXES = 16
MAX_INDEX_BYTES = 5 * (MAX_MESSAGE_INDEXES + 1)
# Cached answers per check before the cache starts over (hostile producers may send any number of ids).
CACHE_ENTRIES = 10_000
# Most failing records a refusal names (KIP-467 record errors); its message counts them all.
MAX_RECORD_ERRORS = 1000


class RegistryView(NamedTuple):
    """The registry as the check sees it: its state, and whether it may lag the writer's."""

    state: object  # RegistryState
    may_lag: bool  # not the writer: a follower's replay ends at its replica's high watermark


# (refresh) -> the broker's registry, caught up with _schemas first when ``refresh``; None while it cannot
# answer (not loaded yet)
StateSource = Callable[[bool], RegistryView | None]


class SideRule(NamedTuple):
    """One validated side of a topic's records."""

    side: str  # "key" or "value"
    strategy: str  # one of SUBJECT_NAME_STRATEGIES


def rules_of(configs: Mapping[str, str]) -> tuple[SideRule, ...]:
    """The validated sides of a topic with these (effective) configs, key first; () when neither is."""
    return tuple(SideRule(side, parse_topic_config(f"confluent.{side}.subject.name.strategy",
                                                   configs[f"confluent.{side}.subject.name.strategy"]))
                 for side in ("key", "value")
                 if parse_topic_config(f"confluent.{side}.schema.validation",
                                       configs.get(f"confluent.{side}.schema.validation", "false")))


def strategy_name(strategy: str) -> str:
    """TopicNameStrategy for io.confluent.kafka.serializers.subject.TopicNameStrategy."""
    return strategy.rpartition(".")[2]


def subject_of(topic: str, side: str, strategy: str, record_name: str | None) -> str | None:
    """The subject ``strategy`` names for a record's ``side``; None when it needs a record name and has none."""
    if strategy == TOPIC_NAME_STRATEGY:
        return f"{topic}-{side}"
    if record_name is None:
        return None
    return record_name if strategy == RECORD_NAME_STRATEGY else f"{topic}-{record_name}"


def message_indexes(data: bytes) -> tuple[int, ...] | None:
    """The Protobuf message indexes after a schema id (``data`` starts after the id): Confluent's serializer
    writes a zigzag varint count then that many zigzag varints, or a single 0 for the first message; None
    when they do not parse."""
    values = []
    position = 0
    while True:
        shift = result = 0
        while True:
            if position >= len(data) or shift > 28:
                return None
            byte = data[position]
            position += 1
            result |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        values.append((result >> 1) ^ -(result & 1))
        if len(values) == 1:
            count = values[0]
            if count == 0:
                return (0,)
            if not 0 < count <= MAX_MESSAGE_INDEXES:
                return None
        elif len(values) == values[0] + 1:
            return tuple(values[1:])


def record_name_of(parsed, indexes: tuple[int, ...] | None) -> str | None:
    """The record name of a parsed schema: ``parsed.name``, except for a Protobuf message other than the
    first, whose full name its indexes give (in the FileDescriptorProto ``parsed.model.file``)."""
    if parsed is None:
        return None
    if parsed.schema_type != "PROTOBUF" or not indexes or indexes == (0,):
        return parsed.name
    model = parsed.model.file
    messages = getattr(model, "message_type", None)
    names = [model.package] if getattr(model, "package", "") else []
    for index in indexes:
        if messages is None or not 0 <= index < len(messages):
            return None
        names.append(messages[index].name)
        messages = messages[index].nested_type
    return ".".join(names)


class RecordScan:
    """One produce's check of one partition's records (``ReplicaManager.RecordScan``).

    The scan keeps, per batch and validated side, the side of every record and the distinct 5-byte heads
    (magic byte and id) among them; the verdict looks the distinct heads up, and only when one fails walks
    the records again to name each failing one.
    """

    def __init__(self, check: SchemaValidation, topic: str, rules: tuple[SideRule, ...]) -> None:
        self._check = check
        self.topic = topic
        self.rules = rules
        self.keys = any(rule.side == "key" for rule in rules)  # what storage.validator's walk keeps for us
        self.values = any(rule.side == "value" for rule in rules)
        # batch position -> (records in it, per rule: (the side of each record, their distinct heads))
        self._batches: dict[int, tuple[int, list[tuple[list, set]]]] = {}

    def __call__(self, batch: BatchHeader, keys: list | None, values: list | None) -> None:
        """Collect one batch's keys or values and their distinct heads (pure; any thread)."""
        sides = []
        for rule in self.rules:
            data = values if rule.side == "value" else keys
            sides.append((data, _heads(data)))
        self._batches[batch.position] = (batch.record_count, sides)

    def verdict(self) -> None:
        """Raise RecordValidationError naming every record whose schema id fails, or REGISTRY_NOT_READY."""
        if self._passes(self._check.answers(refresh=False)):
            return
        # a schema registered a moment ago through another broker: look once more, caught up
        answers = self._check.answers(refresh=True)
        if self._passes(answers):
            return
        errors, total = self._errors(answers)
        if answers.lagging:
            raise REGISTRY_NOT_READY(
                f"schema id {min(answers.lagging)} is above every id this broker's replica of _schemas holds "
                f"yet (it follows the registry's writer): retry")
        refusal = RecordValidationError.of(errors)
        if total > len(errors):  # Kafka's message counts every failing record, named or not
            refusal = RecordValidationError(refusal.args[0].replace(
                f"due to {len(errors)} record errors", f"due to {total} record errors", 1), errors)
        raise refusal

    def _passes(self, answers: _Answers) -> bool:
        """Every distinct head is framed and its id may be used (Protobuf under a record-name strategy: the
        records are looked at one by one, each may name another message)."""
        for _, sides in self._batches.values():
            for rule, (data, heads) in zip(self.rules, sides):
                for head in heads:
                    if len(head) < 5 or head[0] != MAGIC_BYTE:
                        return False
                    if rule.strategy != TOPIC_NAME_STRATEGY and answers.is_protobuf(head[1:]):
                        if any(self._problem(answers, rule, item) for item in data if item is not None
                               and item[:5] == head):
                            return False
                    elif answers.problem(self.topic, rule, head[1:], None) is not None:
                        return False
        return True

    def _errors(self, answers: _Answers) -> tuple[list[tuple[int, str]], int]:
        """(index among the partition's records, message) of the first MAX_RECORD_ERRORS failing records, in
        order, and how many records fail.  A side's problem depends on its head alone (but for Protobuf
        under a record-name strategy, whose message indexes follow): it is worded once per distinct head."""
        errors = []
        total = first = 0
        worded: dict[tuple, str | None] = {}
        for position in sorted(self._batches):
            count, sides = self._batches[position]
            for index in range(count):
                for number, (rule, (data, _)) in enumerate(zip(self.rules, sides)):
                    item = data[index]
                    if item is None:
                        continue
                    key = (number, item[:5] if len(item) >= 5 and item[0] == MAGIC_BYTE else
                           (len(item) if len(item) < 5 else -1, item[:1]))
                    try:
                        problem = worded[key]
                    except KeyError:
                        problem = self._problem(answers, rule, item)
                        if not (rule.strategy != TOPIC_NAME_STRATEGY and len(item) >= 5
                                and answers.is_protobuf(item[1:5])):
                            worded[key] = problem
                    if problem is not None:
                        total += 1
                        if len(errors) < MAX_RECORD_ERRORS:
                            errors.append((first + index, f"{rule.side} of record {first + index}: {problem}"))
            first += count
        return errors, total

    def _problem(self, answers: _Answers, rule: SideRule, item: bytes | None) -> str | None:
        if item is None:  # a tombstone, or a null key: passes, as Confluent Server
            return None
        if len(item) < 5 or item[0] != MAGIC_BYTE:
            subject = subject_of(self.topic, rule.side, rule.strategy, None)
            wanted = f"subject {subject!r}" if subject else f"its {strategy_name(rule.strategy)} subject"
            found = f"only {len(item)} bytes" if len(item) < 5 else f"magic byte {item[0]}"
            return (f"not in the schema registry's wire format (magic byte 0, then a 4-byte schema id): "
                    f"{found}; {rule.side} schema validation wants the id of a schema registered under {wanted}")
        message = None
        if rule.strategy != TOPIC_NAME_STRATEGY and answers.is_protobuf(item[1:5]):
            message = message_indexes(item[5:5 + 1 + MAX_INDEX_BYTES]) or ()
        return answers.problem(self.topic, rule, item[1:5], message)


def _heads(data: list) -> set[bytes]:
    """The distinct first 5 bytes (magic byte and schema id) of the non-null items of ``data``.

    Nearly always they all share one: then the lowest and the highest item (two passes of C comparisons,
    cheaper than slicing every item) share it too, and every item between them must start with it."""
    present = data
    try:
        low, high = min(data), max(data)
    except TypeError:  # null values (tombstones) or keys: they pass
        present = [item for item in data if item is not None]
        if not present:
            return set()
        low, high = min(present), max(present)
    if len(low) >= 5 and low[:5] == high[:5]:
        return {low[:5]}
    return set(map(_HEAD, present))


class SchemaValidation:
    """The broker's record check (``ReplicaManager.record_check``) over its registry's state.

    ``state_of(refresh)`` gives the ``RegistryState`` (caught up with ``_schemas`` first when ``refresh``),
    or None while the registry cannot answer.  Answers are cached until the state applies another record.
    """

    def __init__(self, state_of: StateSource) -> None:
        self._state_of = state_of  # may raise a KafkaError: the produce fails with it
        self._rules: dict[str, tuple[Mapping[str, str], tuple[SideRule, ...]]] = {}  # topic -> (configs, rules)
        self._answers: _Answers | None = None

    def __call__(self, topic: str, configs: Mapping[str, str]) -> RecordScan:
        known = self._rules.get(topic)
        if known is None or known[0] is not configs:
            known = self._rules[topic] = (configs, rules_of(configs))
        return RecordScan(self, topic, known[1])

    def answers(self, refresh: bool) -> _Answers:
        """The answers over the current state; raises REGISTRY_NOT_READY while there is none."""
        view = self._state_of(refresh)
        if view is None:
            raise REGISTRY_NOT_READY("the schema registry of this broker is still loading _schemas: records of "
                                     "topics with schema validation cannot be checked yet; retry")
        answers = self._answers
        if answers is None or not answers.current(view):
            answers = self._answers = _Answers(view)
        return answers


class _Answers:
    """Why a schema id may not be used, per (topic, rule, id, message indexes), over one state of the
    registry: valid while the state applies no other record (``RegistryState.applied`` counts them)."""

    def __init__(self, view: RegistryView) -> None:
        self._view = view
        self._state = view.state
        self._applied = view.state.applied
        self._problems: dict[tuple, str | None] = {}
        self.lagging: set[int] = set()  # unknown ids that may be registered after what this replica holds

    def current(self, view: RegistryView) -> bool:
        return (view == self._view and view.state.applied == self._applied and not self.lagging
                and len(self._problems) < CACHE_ENTRIES)

    def is_protobuf(self, id_bytes: bytes) -> bool:
        stored = self._state.schema_by_id(_SCHEMA_ID.unpack(id_bytes)[0])
        return stored is not None and stored.schema_type == "PROTOBUF"

    def problem(self, topic: str, rule: SideRule, id_bytes: bytes, message: tuple[int, ...] | None) -> str | None:
        key = (topic, rule, id_bytes, message)
        try:
            return self._problems[key]
        except KeyError:
            schema_id = _SCHEMA_ID.unpack(id_bytes)[0]
            answer = self._problems[key] = _problem(self._state, topic, rule, schema_id, message)
            if self._view.may_lag and schema_id >= self._state.next_id:
                self.lagging.add(schema_id)
            return answer


def _problem(state, topic: str, rule: SideRule, schema_id: int, message: tuple[int, ...] | None) -> str | None:
    """Why ``schema_id`` may not be used on ``rule``'s side of ``topic``, None when it may; ``message``: the
    Protobuf message indexes after the id (record-name strategies; () when they did not parse)."""
    strategy = strategy_name(rule.strategy)
    stored = state.schema_by_id(schema_id)
    if stored is None:
        subject = subject_of(topic, rule.side, rule.strategy, None)
        wanted = f"subject {subject!r}" if subject else strategy
        return f"schema id {schema_id} is not registered ({rule.side} schema validation wants one under {wanted})"
    if message == ():
        return (f"schema id {schema_id} is a Protobuf schema, but no message indexes follow the id "
                f"({strategy} needs them to name the message)")
    subject = subject_of(topic, rule.side, rule.strategy, record_name_of(stored.parsed, message))
    if subject is None:
        return (f"schema id {schema_id} ({stored.schema_type}) has no record name, which {strategy} needs "
                f"to name the subject")
    holders = state.subject_versions_of_id(schema_id, include_deleted=True)
    if any(held == subject for held, _ in holders):
        return None
    elsewhere = ", ".join(f"{held!r} version {version}" for held, version in holders[:3])
    return (f"schema id {schema_id} is not registered under subject {subject!r} ({strategy})"
            + (f"; it is registered under {elsewhere}" if elsewhere else "; it is permanently deleted"))


def broker_validation(registry) -> SchemaValidation:
    """The record check over a broker's registry (``server/schema_registry.SchemaRegistry``: ``service`` and
    ``log`` once started).  In a cluster, a broker without a replica of an existing ``_schemas`` (more than
    three brokers) has no replay to check ids against: its produces to validated topics fail with
    INVALID_RECORD saying so, rather than wait for a replica that will not come."""
    def state_of(refresh: bool) -> RegistryView | None:
        service, schema_log = registry.service, registry.log
        if service is None:
            return None
        if not schema_log.has_replica():
            broker = registry.broker
            info = broker.metadata.topics.get(SCHEMAS_TOPIC)
            if info is None:
                return RegistryView(service.state, False)  # no _schemas yet: no schema is registered
            if broker.broker_id not in info.replicas_of(0, broker.broker_id):
                raise Errors.InvalidRecordError(
                    f"broker {broker.broker_id} holds no replica of {SCHEMAS_TOPIC}, so it cannot check schema "
                    f"ids: produce to partitions led by brokers {info.replicas_of(0, broker.broker_id)}")
            return None  # assigned here, not open yet
        if refresh:
            catch_up(service, schema_log)
        return RegistryView(service.state, not schema_log.is_writer())
    return SchemaValidation(state_of)
