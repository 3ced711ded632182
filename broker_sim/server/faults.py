"""Faults on demand: chosen answers of the in-process broker get a Kafka error, a delay or a closed connection.

Theory of operation: every ``Broker`` has a ``FaultInjector`` (``broker.faults``), empty by default; the
dispatcher checks ``faults.rules`` (one falsy check) and, only while rules exist, hands the request to
``FaultInjector.apply`` instead of calling the handler itself.  Rules are added and removed from any thread
(copy-on-write under a lock: the loop thread reads a tuple); matching, counting and the log line happen on
the loop thread.  This is librdkafka's mock cluster (``rd_kafka_mock_push_request_errors``,
``rd_kafka_mock_broker_push_request_error_rtts``) at the dispatch edge: the broker's own handlers run, only
the chosen answers change.

A rule: ``api`` (name or ApiKey), ``error`` (a Kafka error name or code; None: no error), ``delay_ms``,
``disconnect``, ``count`` (how many matching requests; None: until removed), optional ``topic`` /
``partition`` / ``client_id`` filters.  One matching request spends one of the count, whatever the number of
its partitions the rule selects.  What an error means, per kind of API (as Kafka decides it):

1. Produce.  REQUEST_TIMED_OUT and NOT_ENOUGH_REPLICAS_AFTER_APPEND are answered after the append (Kafka's
   acks=all timeout: written, not confirmed -- what idempotent and transactional producers must survive by
   deduplication).  Every other error refuses the selected partitions before the handler runs (Kafka's
   leader check comes first): their records are not appended; the other partitions are served as usual.
   acks=0 has no answer to carry an error: the connection is closed instead, as Kafka does.
2. APIs that only read (``READ_ONLY``: Fetch, ListOffsets, Metadata, OffsetFetch, FindCoordinator, ...): the
   handler runs, then the selected parts of its answer carry the error.  A Fetch partition so answered
   carries no records and offsets -1.  Without a topic filter every topic/partition error code is set (the
   top-level one where the answer has none); a topic filter selects that topic's own code (Metadata) and its
   partitions, a partition filter that partition only.  The selection is made on the answer, so Metadata's
   partitions and a Fetch session's partitions (not named in an incremental request) can be chosen.
3. APIs that change state (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit,
   OffsetCommit, JoinGroup, SyncGroup, Heartbeat, LeaveGroup): the request is refused before the handler
   runs, so nothing changes (Kafka's coordinator errors -- NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
   CONCURRENT_TRANSACTIONS -- come first); every partition it names, or its top-level code, carries the
   error.  A topic/partition filter selects requests naming that partition.
4. Any other API: an error rule is refused when added (its answer has no error code the injector knows how
   to set); a delay or a disconnect works on every API.
``disconnect=True`` closes the connection instead of answering, before the handler runs.  A delay is
applied after the handler, before the answer is sent (``asyncio.sleep``: the loop keeps serving others).
Every injection logs one WARNING line (``fault injected: Produce v9 out-0 -> NOT_LEADER_OR_FOLLOWER (1 of
3)``) on this module's logger and is appended to ``FaultInjector.injected``.
"""
from __future__ import annotations

import asyncio
import logging
import os
import threading
from dataclasses import dataclass, field
from typing import Awaitable, Callable

import kafka.errors as Errors
from kafka.protocol.api_key import ApiKey

from broker_sim.protocol.apis import APIS
from broker_sim.protocol.produce_codec import PartitionAnswer, PartitionData, ProduceAnswer, ProduceRequest
from broker_sim.protocol.produce_codec import TopicAnswer, TopicData
from broker_sim.server.network import CloseConnection

log = logging.getLogger(__name__)

PRODUCE = int(ApiKey.Produce)
FETCH = int(ApiKey.Fetch)
# Produce errors Kafka answers after the records were appended (the acks=all wait ran out)
AFTER_APPEND = frozenset((Errors.RequestTimedOutError.errno, Errors.NotEnoughReplicasAfterAppendError.errno))
READ_ONLY = frozenset(int(ApiKey[name]) for name in (
    "Fetch", "ListOffsets", "Metadata", "OffsetFetch", "FindCoordinator", "ApiVersions", "DescribeGroups",
    "ListGroups", "DescribeConfigs", "DescribeCluster", "DescribeAcls", "DescribeLogDirs", "DescribeProducers",
    "DescribeTransactions", "ListTransactions", "OffsetForLeaderEpoch") if name in ApiKey.__members__)
# state-changing APIs refused before the handler: the ones with a top-level error code ...
REFUSED_WHOLE = frozenset(int(ApiKey[name]) for name in (
    "InitProducerId", "AddOffsetsToTxn", "EndTxn", "JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup"))
# ... and the ones answering per partition (their answers are built from the request)
REFUSED_PER_PARTITION = frozenset(int(ApiKey[name]) for name in ("AddPartitionsToTxn", "TxnOffsetCommit",
                                                                  "OffsetCommit"))
ERROR_APIS = frozenset(k for k in (PRODUCE, *READ_ONLY, *REFUSED_WHOLE, *REFUSED_PER_PARTITION) if k in APIS)

_TOPIC_KEYS = ("name", "topic")
_PARTITION_KEYS = ("partition_index", "index", "partition")
_ERROR_KEYS = ("error_code", "partition_error_code")
_NO_OFFSETS = ("high_watermark", "last_stable_offset", "log_start_offset")


def _error_names() -> dict[str, int]:
    names = {}
    for cls in Errors.kafka_errors.values():
        if cls.errno:
            names[cls.message] = cls.errno
    # Kafka's current names where kafka-python keeps an older one
    names["NOT_LEADER_OR_FOLLOWER"] = Errors.NotLeaderForPartitionError.errno
    return names


ERROR_NAMES = _error_names()
_ERROR_BY_CODE = {}
for _name, _code in sorted(ERROR_NAMES.items()):
    _ERROR_BY_CODE.setdefault(_code, _name)
_ERROR_BY_CODE[Errors.NotLeaderForPartitionError.errno] = "NOT_LEADER_OR_FOLLOWER"


def error_code(error: str | int) -> int:
    """A Kafka error code from its name ("NOT_LEADER_OR_FOLLOWER") or its number; ValueError otherwise."""
    if isinstance(error, bool) or not isinstance(error, (str, int)):
        raise ValueError(f"error={error!r}: give a Kafka error name (e.g. NOT_LEADER_OR_FOLLOWER) or code")
    if isinstance(error, int):
        if error not in _ERROR_BY_CODE:
            raise ValueError(f"error={error}: not a Kafka error code (known codes: 1-{max(_ERROR_BY_CODE)}, -1)")
        return error
    code = ERROR_NAMES.get(error.strip().upper())
    if code is None:
        raise ValueError(f"error={error!r}: not a Kafka error name (choices: {', '.join(sorted(ERROR_NAMES))})")
    return code


def error_name(code: int) -> str:
    return _ERROR_BY_CODE.get(code, str(code))


def api_key(api: str | int) -> int:
    """The API key of a name ("Produce") or ApiKey served by this broker; ValueError naming the choices."""
    choices = sorted(spec.key.name for spec in APIS.values())
    if isinstance(api, str):
        key = ApiKey.__members__.get(api.strip())
        if key is None:
            key = next((k for k in ApiKey if k.name.lower() == api.strip().lower()), None)
    elif isinstance(api, int) and not isinstance(api, bool):
        key = api
    else:
        key = None
    if key is None or int(key) not in APIS:
        raise ValueError(f"api={api!r}: not an API this broker serves (choices: {', '.join(choices)})")
    return int(key)


@dataclass(frozen=True)
class Injection:
    """One injected fault: which rule, which request, what it did."""

    rule: "FaultRule"
    api: str
    version: int
    client_id: str | None
    parts: tuple[str, ...]  # "<topic>-<partition>" or "<topic>" selected; empty: the whole answer
    error: str | None
    delay_ms: int
    disconnect: bool


@dataclass(eq=False)
class FaultRule:
    """A rule of a ``FaultInjector`` (made by ``FaultInjector.add``; ``remaining`` None: until removed)."""

    api_key: int
    error: int | None = None
    delay_ms: int = 0
    disconnect: bool = False
    count: int | None = None
    topic: str | None = None
    partition: int | None = None
    client_id: str | None = None
    injected: int = 0
    remaining: int | None = field(default=None, repr=False)
    injector: "FaultInjector | None" = field(default=None, repr=False)

    @property
    def api(self) -> str:
        return APIS[self.api_key].key.name

    @property
    def filtered(self) -> bool:
        return self.topic is not None or self.partition is not None

    def selects(self, topic: str | None, partition: int | None) -> bool:
        return ((self.topic is None or topic == self.topic)
                and (self.partition is None or partition == self.partition))

    def describe(self) -> str:
        what = [f"error {error_name(self.error)}"] if self.error is not None else []
        if self.delay_ms:
            what.append(f"delay {self.delay_ms} ms")
        if self.disconnect:
            what.append("disconnect")
        where = "".join(f" {k}={v!r}" for k, v in (("topic", self.topic), ("partition", self.partition),
                                                    ("client_id", self.client_id)) if v is not None)
        return f"{self.api}{where}: {', '.join(what)} x {'unlimited' if self.count is None else self.count}"

    def remove(self) -> None:
        if self.injector is not None:
            self.injector.remove(self)

    def wait_injected(self, n: int | None = None, timeout_s: float = 10.0) -> int:
        """Block until this rule injected ``n`` faults (default: its count); returns how many it injected.

        TimeoutError names the rule and how many of ``n`` happened."""
        wanted = self.count if n is None else n
        if wanted is None:
            raise ValueError("wait_injected(n=None) needs a rule with a count")
        with self.injector._changed:
            if not self.injector._changed.wait_for(lambda: self.injected >= wanted, timeout_s):
                raise TimeoutError(f"fault rule {self.describe()}: {self.injected} of {wanted} injected "
                                   f"within {timeout_s:g} s")
            return self.injected


class FaultInjector:
    """The rules of one broker and what they injected (``injected``: a list of ``Injection``)."""

    def __init__(self) -> None:
        self.rules: tuple[FaultRule, ...] = ()  # read by the dispatcher on every request: falsy when empty
        self.injected: list[Injection] = []
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)

    def add(self, api: str | int, *, error: str | int | None = None, delay_ms: int = 0, disconnect: bool = False,
            count: int | None = None, topic: str | None = None, partition: int | None = None,
            client_id: str | None = None) -> FaultRule:
        """Add a rule (any thread); ValueError names a bad api, error, count, delay or filter."""
        key = api_key(api)
        code = None if error is None else error_code(error)
        name = APIS[key].key.name
        if code is not None and key not in ERROR_APIS:
            raise ValueError(f"api={name!r}: error injection is not supported for {name} (its answer has no error "
                             f"code the injector sets; use delay_ms or disconnect=True); errors work on: "
                             f"{', '.join(sorted(APIS[k].key.name for k in ERROR_APIS))}")
        if code is None and not delay_ms and not disconnect:
            raise ValueError(f"a {name} fault needs error=, delay_ms= or disconnect=True")
        if isinstance(delay_ms, bool) or not isinstance(delay_ms, int) or delay_ms < 0:
            raise ValueError(f"delay_ms={delay_ms!r}: must be a whole number of milliseconds >= 0")
        if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 1):
            raise ValueError(f"count={count!r}: must be a whole number >= 1, or None (until removed)")
        if partition is not None and (isinstance(partition, bool) or not isinstance(partition, int) or partition < 0):
            raise ValueError(f"partition={partition!r}: must be a partition index >= 0")
        if (topic is not None or partition is not None) and key in REFUSED_WHOLE:
            raise ValueError(f"api={name!r}: {name} names no topics, so topic/partition filters cannot select it")
        rule = FaultRule(key, code, delay_ms, bool(disconnect), count, topic, partition, client_id,
                         remaining=count, injector=self)
        with self._lock:
            self.rules = self.rules + (rule,)
        log.warning("fault rule added: %s", rule.describe())
        return rule

    def remove(self, rule: FaultRule) -> None:
        with self._lock:
            if rule in self.rules:
                self.rules = tuple(r for r in self.rules if r is not rule)
                log.warning("fault rule removed: %s (%d injected)", rule.describe(), rule.injected)

    def clear(self) -> None:
        """Remove every rule (what was injected stays in ``injected``)."""
        with self._lock:
            self.rules = ()

    def _spend(self, rule: FaultRule) -> bool:
        """Take one of the rule's count (loop thread); False when it is spent or removed meanwhile."""
        with self._lock:
            if rule not in self.rules:
                return False
            if rule.remaining is not None:
                rule.remaining -= 1
                if rule.remaining <= 0:
                    self.rules = tuple(r for r in self.rules if r is not rule)
            rule.injected += 1
            return True

    def _record(self, rule: FaultRule, ctx, parts, error: int | None) -> None:
        name = APIS[ctx.api_key].key.name
        shown = [p for p in parts if p]
        what = [error_name(error)] if error is not None else []
        if rule.delay_ms:
            what.append(f"+{rule.delay_ms} ms")
        if rule.disconnect:
            what.append("disconnect")
        total = "unlimited" if rule.count is None else rule.count
        log.warning("fault injected: %s v%d%s -> %s (%d of %s)", name, ctx.version,
                    (" " + ",".join(shown)) if shown else "", " ".join(what), rule.injected, total)
        with self._changed:
            self.injected.append(Injection(rule, name, ctx.version, ctx.client_id, tuple(shown),
                                           error_name(error) if error is not None else None, rule.delay_ms,
                                           rule.disconnect))
            self._changed.notify_all()

    # --- the dispatch edge (loop thread) -------------------------------------------------------------
    async def apply(self, ctx, request, call: Callable[[object, object], Awaitable[object]]):
        """Serve ``request`` through ``call(ctx, request)`` (the handler) with the matching rules applied."""
        rules = [r for r in self.rules if r.api_key == ctx.api_key
                 and (r.client_id is None or r.client_id == ctx.client_id)]
        if not rules:
            return await call(ctx, request)
        if ctx.api_key == PRODUCE:
            result = await self._produce(ctx, request, rules, call)
        elif ctx.api_key in READ_ONLY:
            result = await self._read_only(ctx, request, rules, call)
        else:
            result = await self._refused_first(ctx, request, rules, call)
        delay = result[1]
        if delay:
            await asyncio.sleep(delay / 1000.0)
        return result[0]

    def _disconnect(self, ctx, rules, request_parts) -> None:
        for rule in rules:
            if rule.disconnect and self._matches_request(rule, request_parts) and self._spend(rule):
                self._record(rule, ctx, _labels(_selected(rule, request_parts)), rule.error)
                raise CloseConnection(f"fault injected: {rule.describe()}")

    @staticmethod
    def _matches_request(rule: FaultRule, parts) -> bool:
        return not rule.filtered or any(rule.selects(t, p) for t, p in parts)

    async def _produce(self, ctx, request, rules, call):
        parts = [(t.name, d.index) for t in request.topic_data for d in t.partition_data]
        self._disconnect(ctx, rules, parts)
        refused: dict[tuple[str, int], int] = {}
        after: dict[tuple[str, int], int] = {}
        delay = 0
        for rule in rules:
            if rule.disconnect or not self._matches_request(rule, parts) or not self._spend(rule):
                continue
            chosen = _selected(rule, parts)
            if rule.error is not None:
                target = after if rule.error in AFTER_APPEND else refused
                for part in (chosen if rule.filtered else parts):
                    if part not in refused and part not in after:
                        target[part] = rule.error
            delay += rule.delay_ms
            self._record(rule, ctx, _labels(chosen if rule.filtered else parts), rule.error)
        served = request
        if refused:
            served = ProduceRequest(request.header, request.transactional_id, request.acks, request.timeout_ms,
                                    [TopicData(t.name, [PartitionData(d.index, d.records) for d in t.partition_data
                                                        if (t.name, d.index) not in refused])
                                     for t in request.topic_data])
        answer = await call(ctx, served)
        if (refused or after) and request.acks == 0:
            raise CloseConnection("fault injected on an acks=0 produce request: closing instead of answering")
        if not (refused or after) or answer is None:
            return answer, delay
        topics = []
        for topic, answered in zip(request.topic_data, answer.responses):
            given = iter(answered.partition_responses)
            partitions = []
            for data in topic.partition_data:
                key = (topic.name, data.index)
                if key in refused:
                    partitions.append(PartitionAnswer(data.index, refused[key], -1, -1, -1, "fault injected", []))
                    continue
                one = next(given)
                if key in after:
                    one = one._replace(error_code=after[key], base_offset=-1, error_message="fault injected")
                partitions.append(one)
            topics.append(TopicAnswer(topic.name, partitions))
        return ProduceAnswer(topics, answer.throttle_time_ms), delay

    async def _read_only(self, ctx, request, rules, call):
        self._disconnect(ctx, rules, _request_parts(request))
        answer = await call(ctx, request)
        rules = [r for r in rules if not r.disconnect]
        if not rules or answer is None:
            return answer, 0
        decoded = answer
        if isinstance(answer, (list, bytes, bytearray)):  # encoded already (Fetch: parts to sendfile)
            decoded = APIS[ctx.api_key].response.decode(_materialize(answer)[4:], version=ctx.version, header=True)
        delay = 0
        changed = False
        for rule in rules:
            targets = _targets(decoded, rule, ctx.version)
            if rule.filtered and not targets:
                continue
            if ctx.api_key == FETCH and rule.error is not None and not targets:
                continue  # an answer with no partitions: a Fetch's top-level code is the session's
            if not self._spend(rule):
                continue
            if rule.error is not None:
                for node, _ in targets or _top_level(decoded, ctx.version):
                    _set_error(node, rule.error)
                changed = True
            delay += rule.delay_ms
            self._record(rule, ctx, [label for _, label in targets] if rule.filtered else [], rule.error)
        return (decoded if changed else answer), delay

    async def _refused_first(self, ctx, request, rules, call):
        parts = _request_parts(request)
        self._disconnect(ctx, rules, parts)
        delay = 0
        error = None
        for rule in rules:
            if rule.disconnect or not self._matches_request(rule, parts) or not self._spend(rule):
                continue
            if error is None and rule.error is not None:
                error = rule.error
            delay += rule.delay_ms
            self._record(rule, ctx, _labels(_selected(rule, parts)), rule.error)
        if error is None:
            return await call(ctx, request), delay
        return _refusal(ctx.api_key, ctx.version, request, error), delay


def _labels(parts) -> list[str]:
    return [topic if partition is None else f"{topic}-{partition}" for topic, partition in parts]


def _selected(rule: FaultRule, parts) -> list:
    return [(t, p) for t, p in parts if rule.selects(t, p)] if rule.filtered else []


def _fields(node) -> dict:
    return type(node)._struct.fields if getattr(type(node), "_struct", None) is not None else {}


def _topic_of(node, fields) -> str | None:
    return next((getattr(node, k) for k in _TOPIC_KEYS if k in fields and isinstance(getattr(node, k), str)), None)


def _request_parts(request) -> list[tuple[str, int | None]]:
    """(topic, partition) pairs a kafka-python request names (partition None: a topic named alone)."""
    found: list = []

    def walk(node):
        fields = _fields(node)
        name = _topic_of(node, fields)
        if name is None:
            for key, spec in fields.items():
                if spec.is_struct_array():
                    for child in getattr(node, key, None) or ():
                        walk(child)
            return
        named = False
        for key, spec in fields.items():
            values = getattr(node, key, None)
            if not isinstance(values, list):
                continue
            if spec.is_struct_array():
                for child in values:
                    child_fields = _fields(child)
                    index = next((getattr(child, k) for k in _PARTITION_KEYS if k in child_fields), None)
                    if index is not None:
                        found.append((name, index))
                        named = True
            elif values and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
                found.extend((name, v) for v in values)
                named = True
        if not named:
            found.append((name, None))

    walk(request)
    return list(dict.fromkeys(found))


def _has_error_field(node, version: int) -> bool:
    fields = _fields(node)
    return any(k in fields and fields[k].for_version_q(version) for k in _ERROR_KEYS)


def _targets(answer, rule: FaultRule, version: int) -> list:
    """The (node, label) parts of an answer a rule selects: partitions (and topics) carrying error codes."""
    partitions: list = []
    topics: list = []

    def walk(node, topic):
        fields = _fields(node)
        name = _topic_of(node, fields)
        index = next((getattr(node, k) for k in _PARTITION_KEYS if k in fields), None) if topic else None
        if index is not None and _has_error_field(node, version):
            if rule.selects(topic, index):
                partitions.append((node, f"{topic}-{index}"))
        elif name is not None and _has_error_field(node, version) and rule.partition is None:
            if rule.selects(name, None):
                topics.append((node, name))
        for key, spec in fields.items():
            if spec.is_struct_array():
                for child in getattr(node, key) or ():
                    walk(child, name or topic)

    walk(answer, None)
    return topics + partitions


def _top_level(node, version: int) -> list:
    """Where an answer without topics keeps its error code: the top level, else the first level that has one
    (FindCoordinator v4's coordinators, OffsetFetch v8's groups)."""
    if _has_error_field(node, version):
        return [(node, "")]
    found = []
    for key, spec in _fields(node).items():
        if spec.is_struct_array():
            for child in getattr(node, key, None) or ():
                found.extend(_top_level(child, version))
    return found


def _set_error(node, code: int) -> None:
    fields = _fields(node)
    for key in _ERROR_KEYS:
        if key in fields:
            setattr(node, key, code)
    if "records" in fields:  # a Fetch partition answered with an error: no records, no offsets
        node.records = None
        for key in _NO_OFFSETS:
            if key in fields:
                setattr(node, key, -1)


def _materialize(parts) -> bytes:
    if isinstance(parts, (bytes, bytearray)):
        return bytes(parts)
    out = bytearray()
    for part in parts:
        if isinstance(part, (bytes, bytearray, memoryview)):
            out += part
        else:  # a FileRegion (segment file, position, size)
            out += os.pread(part.file.fileno(), part.size, part.position)
    return bytes(out)


def _refusal(key: int, version: int, request, code: int):
    """The answer of a state-changing request refused before its handler ran: every part carries ``code``."""
    response = APIS[key].response
    if key in REFUSED_WHOLE:
        return response(error_code=code)
    if key == int(ApiKey.AddPartitionsToTxn):
        if version >= 4:
            return response(error_code=code, results_by_transaction=[])
        topic_class = response.AddPartitionsToTxnTopicResult
        partition_class = topic_class.AddPartitionsToTxnPartitionResult
        return response(results_by_topic_v3_and_below=[
            topic_class(name=t.name, results_by_partition=[
                partition_class(partition_index=p, partition_error_code=code) for p in t.partitions])
            for t in request.v3_and_below_topics])
    topic_class = getattr(response, f"{APIS[key].key.name}ResponseTopic")
    partition_class = getattr(topic_class, f"{APIS[key].key.name}ResponsePartition")
    return response(topics=[topic_class(name=t.name, partitions=[
        partition_class(partition_index=p.partition_index, error_code=code) for p in t.partitions])
        for t in request.topics])
