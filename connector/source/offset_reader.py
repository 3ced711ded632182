"""The source driver's offset reader: partitions of the subscription, their offsets, and group offsets.

Theory of operation: ``OffsetReader`` plays the part of Spark's
``KafkaOffsetReaderAdmin`` with the connector's own framed client
(``connector.wire.BrokerConnection``): Metadata through a bootstrap server,
ListOffsets to each partition's leader, OffsetFetch and OffsetCommit to the
group's coordinator (FindCoordinator). Its connections are opened on first
use (readers are pickled, sockets are not) and it answers in plain values:
sorted ``(topic, partition)`` lists and ``{(topic, partition): offset}``
dicts. Every call is retried ``fetchOffset.numRetries`` times with fresh
connections, as Spark does.

The driver's Python worker thus loads only kafka-python's protocol messages
and error codes, never its admin client, consumer or network stack (~0.2 s
of every query's first offset lookup): ``connector.source`` defers kafka's
``__init__``, which imports them all.

Before its first connection, the reader spends at most ``bootstrapTimeoutMs``
on a plain TCP connect to ``kafka.bootstrap.servers``
(``connector.wire.check_bootstrap``): an address that refuses connections
fails the query at once with the address and the reason, instead of after
``fetchOffset.numRetries`` rounds of the clients' own minute-long patience.
Within an attempt, retriable failures (a broker gone, a leader or a
coordinator moving: NOT_LEADER_OR_FOLLOWER, NOT_COORDINATOR, ...) are
retried on fresh metadata and connections for the Java clients' patience,
default.api.timeout.ms (60 s); brokers that went away get that long to
accept connections again before each new connection, and then fail the
query with the same kind of message as a wrong bootstrap address.
"""
from __future__ import annotations

import logging
import time
from typing import Callable, Iterable, Mapping, TypeVar

from connector.error_codes import (
    AUTHORIZATION_FAILURES,
    GROUP_AUTHORIZATION_FAILED,
    error_name,
    refused,
    retriable,
)
from connector.errors import PylogAuthorizationError
from connector.options import (
    BOUND_EARLIEST,
    BOUND_GROUP,
    BOUND_LATEST,
    BOUND_OFFSETS,
    BOUND_TIMESTAMP,
    BOUND_TIMESTAMPS,
    OffsetBound,
    SourceOptions,
)
from connector.source.offsets import (
    PartitionOffsets,
    TopicPartition,
    describe,
    parse_group_metadata,
    unconfirmed_ranges,
)
from connector.wire import (
    COORDINATOR_GROUP,
    BootstrapUnreachable,
    BrokerConnection,
    BrokerUnavailable,
    SecurityMisconfigured,
    check_bootstrap,
    check_login,
    first_reachable,
    sasl_login_for,
    ssl_context_for,
)

log = logging.getLogger(__name__)
T = TypeVar("T")
DEFAULT_API_TIMEOUT_S = 60.0  # the Java clients' default.api.timeout.ms: how long retriable errors are retried
RETRIABLE_BACKOFF_S = 0.25
EARLIEST, LATEST = -2, -1     # ListOffsets timestamps
_UNKNOWN_TOPIC_OR_PARTITION = 3


class RetriableLookupError(Exception):
    """A Kafka error code a retry on fresh metadata or a fresh coordinator can clear (``error_codes.retriable``)."""


class UnknownTopicError(LookupError):
    """A topic ``subscribe`` names does not exist (retried as Spark retries its offsets lookups, then raised)."""


class NoMatchingOffsetError(ValueError):
    """A timestamp lookup found no record at or after the timestamp (startingOffsetsByTimestampStrategy=error)."""


UNKNOWN_MEMBER_ID = 25   # Kafka's error code: an OffsetCommit from outside a group that has members


class OffsetReader:
    """Metadata, ListOffsets, OffsetFetch and OffsetCommit for one source, through ``connector.wire``."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._cluster = None
        self._reached = False   # a bootstrap server accepted a connection (check_bootstrap passed)

    def close(self) -> None:
        if self._cluster is not None:
            try:
                self._cluster.close()
            finally:
                self._cluster = None

    # -- partitions ---------------------------------------------------------

    def partitions(self) -> list[TopicPartition]:
        """The partitions the subscription covers now (new topics of a pattern, new partitions included)."""
        options = self.options

        def lookup(cluster: "_Cluster"):
            named = list(options.topics) if options.strategy == "subscribe" else None
            _, described = cluster.metadata(named)
            found, missing = set(), []
            for topic in described:
                if named is not None and topic.error_code in AUTHORIZATION_FAILURES:
                    raise PylogAuthorizationError(f"Metadata for topic {topic.name} failed: "
                                                  f"{refused(topic.error_code, options, topic.name)}")
                if named is not None and topic.error_code == _UNKNOWN_TOPIC_OR_PARTITION:
                    missing.append(topic.name)
                if topic.error_code != 0 or getattr(topic, "is_internal", False):
                    continue
                if not options.matches(topic.name):
                    continue
                for partition in topic.partitions:
                    found.add((topic.name, int(partition.partition_index)))
            if missing:
                # Spark's connector fails too (its admin client's UnknownTopicOrPartitionException, after its
                # fetchOffset retries); a pattern or an assignment matching nothing reads nothing, as in Spark
                raise UnknownTopicError(
                    f"Topic {', '.join(sorted(missing))} named by subscribe={','.join(options.topics)} does not "
                    "exist (UNKNOWN_TOPIC_OR_PARTITION): create it first, or use subscribePattern to read topics "
                    "as they appear")
            if options.strategy == "assign":
                found &= set(options.assigned)
            return sorted(found)

        return self._with_retries(lookup)

    # -- offsets --------------------------------------------------------------

    def earliest(self, partitions: Iterable[TopicPartition]) -> PartitionOffsets:
        return self._list_offsets({tp: EARLIEST for tp in partitions})

    def latest(self, partitions: Iterable[TopicPartition]) -> PartitionOffsets:
        """Latest offsets; under read_committed the last stable offset, so open transactions are not read."""
        return self._list_offsets({tp: LATEST for tp in partitions})

    def by_timestamp(self, timestamps: dict[TopicPartition, int], *, starting: bool) -> PartitionOffsets:
        """First offset whose timestamp is >= the given one.

        No such record: for starting offsets ``startingOffsetsByTimestampStrategy``
        decides (error, or latest); for ending offsets it is latest, as in Spark.
        """
        found = self._list_offsets(dict(timestamps))
        missing = [tp for tp, offset in found.items() if offset < 0]
        if missing and starting and self.options.timestamp_strategy == "error":
            tp = sorted(missing)[0]
            raise NoMatchingOffsetError(
                f"No offset matched from request of topic-partition {describe(tp)} and timestamp {timestamps[tp]}. "
                "Set startingOffsetsByTimestampStrategy=latest to start such partitions at their latest offset.")
        if missing:
            found.update(self.latest(missing))
        return found

    def resolve_bound(self, bound: OffsetBound, partitions: list[TopicPartition], *, starting: bool,
                      option: str) -> PartitionOffsets:
        """Concrete offsets for ``bound`` (startingOffsets & co. when ``starting``, else endingOffsets & co.)."""
        if bound.kind == BOUND_EARLIEST:
            return self.earliest(partitions)
        if bound.kind == BOUND_LATEST:
            return self.latest(partitions)
        if bound.kind == BOUND_TIMESTAMP:
            return self.by_timestamp({tp: bound.timestamp for tp in partitions}, starting=starting)
        if bound.kind == BOUND_GROUP:
            return self._group_start(partitions)
        specified = bound.as_dict()
        if set(specified) != set(partitions):
            if bound.kind == BOUND_OFFSETS:
                raise ValueError(
                    f"If {option} contains specific offsets, you must specify all TopicPartitions.\n"
                    "Use -1 for latest, -2 for earliest, if you don't care.\n"
                    f"Specified: {sorted(map(describe, specified))} Assigned: {sorted(map(describe, partitions))}")
            raise ValueError(
                f"{option} contains timestamps for {sorted(map(describe, specified))} but the subscription "
                f"assigns {sorted(map(describe, partitions))}: specify every partition")
        if bound.kind == BOUND_TIMESTAMPS:
            return self.by_timestamp(specified, starting=starting)
        return self.resolve(specified)

    def _group_start(self, partitions: list[TopicPartition]) -> PartitionOffsets:
        """startingOffsets=group: the group's commits, and ``groupFallback`` for partitions without one.

        A previous pylog run whose last batch was planned but never confirmed complete left that batch's end
        in the commits' metadata (``connector.source.offsets.group_metadata``): its ranges are logged as a
        WARNING, since that run's sink may already hold them.
        """
        commits = self.group_commits(partitions)
        committed = {tp: offset for tp, (offset, _) in commits.items()}
        _report_unconfirmed(self.options.group_id, committed,
                            {tp: parse_group_metadata(text) for tp, (_, text) in commits.items()})
        missing = [tp for tp in partitions if tp not in committed]
        fallback = self.options.group_fallback
        if missing and fallback == "error":
            raise ValueError(
                f"startingOffsets=group: consumer group '{self.options.group_id}' has no committed offset for "
                f"{sorted(map(describe, missing))} and groupFallback=error (accepted: earliest, latest, error)")
        if missing:
            committed.update(self.earliest(missing) if fallback == "earliest" else self.latest(missing))
        return {tp: committed[tp] for tp in partitions}

    def resolve(self, offsets: dict[TopicPartition, int]) -> PartitionOffsets:
        """Replace -2 / -1 in ``offsets`` by the partitions' earliest / latest offsets."""
        result = dict(offsets)
        earliest = [tp for tp, o in offsets.items() if o == -2]
        latest = [tp for tp, o in offsets.items() if o == -1]
        if earliest:
            result.update(self.earliest(earliest))
        if latest:
            result.update(self.latest(latest))
        return result

    def _list_offsets(self, specs: dict) -> PartitionOffsets:
        """ListOffsets of ``{(topic, partition): timestamp}``, one request per leader."""
        if not specs:
            return {}
        isolation = 1 if self.options.isolation_level == "read_committed" else 0   # 1: the last stable offset

        def lookup(cluster: "_Cluster"):
            found = {}
            for connection, timestamps in cluster.by_leader(sorted(specs), specs).items():
                for tp, (code, offset) in connection.list_offsets(timestamps, isolation).items():
                    if code in AUTHORIZATION_FAILURES:
                        raise PylogAuthorizationError(f"ListOffsets of {tp[0]} failed: "
                                                      f"{refused(code, self.options, tp[0])}")
                    if code != 0:
                        raise _failed(code, f"ListOffsets of {describe(tp)}")
                    found[tp] = int(offset)
            return found

        return self._with_retries(lookup)

    # -- consumer group ---------------------------------------------------------

    def group_offsets(self, partitions: Iterable[TopicPartition]) -> PartitionOffsets:
        """The group's committed offsets for ``partitions``; partitions without a commit are left out."""
        return {tp: offset for tp, (offset, _) in self.group_commits(partitions).items()}

    def group_commits(self, partitions: Iterable[TopicPartition],
                      group_id: str | None = None) -> dict[TopicPartition, tuple[int, str]]:
        """(offset, metadata) the group (default: the options' group) committed for each of ``partitions``."""
        wanted = sorted(partitions)
        group = group_id or self.options.group_id

        def lookup(cluster: "_Cluster"):
            code, answers = cluster.coordinator(group).offset_fetch(group, wanted)
            codes = [code] + [answer[0] for answer in answers.values()]
            refusal = next((c for c in codes if c in AUTHORIZATION_FAILURES), None)
            if refusal is not None:
                topics = sorted({t for (t, _), answer in answers.items() if answer[0] == refusal})
                raise PylogAuthorizationError(
                    f"OffsetFetch failed: {refused(refusal, self.options, topics[0] if len(topics) == 1 else None)}")
            if code != 0:   # the group's coordinator moved, is loading, ...: find it again
                cluster.forget_coordinator(group)
                raise _failed(code, f"OffsetFetch of group '{group}'")
            for tp, (failure, _, _) in sorted(answers.items()):
                if failure not in (0, _UNKNOWN_TOPIC_OR_PARTITION) and retriable(failure):
                    raise _failed(failure, f"OffsetFetch of {describe(tp)} in group '{group}'")
            # any other error of a partition (its topic gone, ...): the group has no usable commit for it
            return {tp: (int(offset), metadata) for tp, (failure, offset, metadata) in answers.items()
                    if failure == 0 and offset >= 0}

        return self._with_retries(lookup)

    def commit_group_offsets(self, group_id: str, offsets: PartitionOffsets,
                             metadata: Mapping[TopicPartition, str] | None = None) -> None:
        """Commit ``offsets`` (with each partition's ``metadata`` string) to ``group_id`` as a non-member
        (generation -1, no member id); raises on failure."""
        metadata = metadata or {}
        payload = {tp: (offset, metadata.get(tp, "")) for tp, offset in offsets.items()}
        if not payload:
            return

        def commit(cluster: "_Cluster"):
            answers = cluster.coordinator(group_id).offset_commit(group_id, payload)
            codes = {code for code in answers.values() if code != 0}
            refusals = codes & set(AUTHORIZATION_FAILURES)
            if refusals:
                code = GROUP_AUTHORIZATION_FAILED if GROUP_AUTHORIZATION_FAILED in refusals else min(refusals)
                topics = sorted({t for t, _ in payload})
                raise PylogAuthorizationError(f"OffsetCommit to group {group_id} failed: "
                                              f"{refused(code, self.options, topics[0] if len(topics) == 1 else None)}")
            if any(retriable(code) for code in codes):
                cluster.forget_coordinator(group_id)
                raise _failed(min(c for c in codes if retriable(c)), f"OffsetCommit to group '{group_id}'")
            if codes == {UNKNOWN_MEMBER_ID}:
                # Kafka takes a non-member's commit only while the group has no members: a consumer group (either
                # protocol, group.protocol=classic or consumer) with members uses this group id now
                raise RuntimeError(
                    f"OffsetCommit to group '{group_id}' failed: UNKNOWN_MEMBER_ID: the group has active members "
                    "(consumers of their own use this group id), and Kafka refuses commits from outside a group "
                    "with members; give the query a group of its own (kafka.group.id or groupIdPrefix)")
            if codes:
                failed = {describe(tp): error_name(code) for tp, code in sorted(answers.items()) if code != 0}
                raise RuntimeError(f"OffsetCommit to group '{group_id}' failed: {failed}")

        # one attempt's patience, no fetchOffset retries: the stream reader logs a failed commit and goes on
        self._patiently(commit, f"an OffsetCommit to group '{group_id}'")

    # -- plumbing -----------------------------------------------------------------

    def _connected(self) -> "_Cluster":
        if self._cluster is None:
            if self._reached:
                # New connections after a failure: brokers that refuse them get the Java clients' patience.
                check_bootstrap(self.options.bootstrap_servers, int(DEFAULT_API_TIMEOUT_S * 1000),
                                "default.api.timeout.ms")
            else:
                reached = check_bootstrap(self.options.bootstrap_servers, self.options.bootstrap_timeout_ms)
                check_login(reached, self.options.client_kwargs,
                            int(self.options.client_kwargs.get("request_timeout_ms", 30_000)) / 1000)
                self._reached = True
            self._cluster = _Cluster(self.options)
        return self._cluster

    def _patiently(self, body: Callable[["_Cluster"], T], what: str) -> T:
        """``body(cluster)``, retried on retriable failures with fresh connections for default.api.timeout.ms."""
        deadline = time.monotonic() + DEFAULT_API_TIMEOUT_S
        while True:
            try:
                return body(self._connected())
            except (RetriableLookupError, BrokerUnavailable) as exc:
                if isinstance(exc, BootstrapUnreachable) or time.monotonic() >= deadline:
                    raise
                log.info("retrying %s after a retriable error: %r", what, exc)
                self.close()
                time.sleep(RETRIABLE_BACKOFF_S)

    def _with_retries(self, body: Callable[["_Cluster"], T]) -> T:
        """``body(cluster)`` with Spark's fetchOffset retries around the Java consumer's own patience.

        Spark's attempts each call a Java consumer that itself retries retriable
        errors (a leader moving, a broker down) for default.api.timeout.ms; so does
        each attempt here (``_patiently``), and a failed attempt is retried with
        fresh connections after fetchOffset.retryIntervalMs.
        """
        attempts = self.options.fetch_offset_num_retries
        for attempt in range(1, attempts + 1):
            try:
                return self._patiently(body, "a Kafka offsets lookup")
            except (NoMatchingOffsetError, BootstrapUnreachable, SecurityMisconfigured, PylogAuthorizationError):
                raise   # retrying cannot help: the settings or the ACLs must change
            except Exception as exc:  # any client failure: retry with fresh connections, as Spark does
                if attempt == attempts:
                    unreachable = self._unreachable(exc)
                    if unreachable is not None:
                        raise unreachable from exc
                    if isinstance(exc, BrokerUnavailable) and isinstance(exc.__cause__, TimeoutError):
                        raise TimeoutError(
                            f"Kafka offsets lookup failed after fetchOffset.numRetries={attempts} attempts: {exc} "
                            f"(each request waits kafka.request.timeout.ms="
                            f"{self.options.client_kwargs.get('request_timeout_ms', 30_000)}, each attempt "
                            f"retries for default.api.timeout.ms={int(DEFAULT_API_TIMEOUT_S * 1000)})") from exc
                    raise
                log.warning("Error in attempt %d getting Kafka offsets: %r", attempt, exc)
                self.close()
                time.sleep(self.options.fetch_offset_retry_interval_ms / 1000)
        raise AssertionError("unreachable")

    def _unreachable(self, exc: Exception) -> BootstrapUnreachable | None:
        """After the last attempt: when the brokers are gone, ask the operating system why (``check_bootstrap``,
        no waiting); None when a bootstrap server answers."""
        try:
            check_bootstrap(self.options.bootstrap_servers, 0)
        except BootstrapUnreachable as unreachable:
            return BootstrapUnreachable(f"Kafka offsets lookup failed after fetchOffset.numRetries="
                                        f"{self.options.fetch_offset_num_retries} attempts ({exc!r}). {unreachable}")
        return None


def _report_unconfirmed(group: str, committed: PartitionOffsets, metadata: dict) -> None:
    """startingOffsets=group: a WARNING naming the ranges a previous run planned and never confirmed.

    1. The group was handed over by ``connector.stop_query`` (``state: stopped`` in the metadata): it says
       which query it stopped after which batch, and that the batch it was running was cancelled.
    2. Otherwise the run stopped some other way (``query.stop()``, a failure, a dead driver), and it suggests
       ``stop_query``, the exact handoff.
    """
    ranges = unconfirmed_ranges(committed, metadata)
    if not ranges:
        return
    run = metadata[(ranges[0].topic, ranges[0].partition)]
    listed = ", ".join(f"{describe((r.topic, r.partition))} offsets [{r.from_offset}, {r.until_offset})"
                       for r in ranges)
    count = sum(r.size for r in ranges)
    if run.get("state") == "stopped":
        name = f" '{run['name']}'" if run.get("name") else ""
        log.warning(
            "startingOffsets=group: consumer group '%s' was handed over by connector.stop_query, which stopped "
            "Spark query %s%s (pylog run %s, driver %s, pid %s) after batch %s, during the next batch: %s (%d "
            "offsets) were planned and not confirmed complete (stop_query returned them as 'unconfirmed'): "
            "that query's sink holds them too if it committed the batch just before the stop. This query starts "
            "at the group's committed offsets and reads them again.",
            group, run.get("query"), name, run.get("run"), run.get("host"), run.get("pid"), run.get("batchId"),
            listed, count)
        return
    log.warning(
        "startingOffsets=group: consumer group '%s' was last committed by pylog run %s (driver %s, pid %s) while "
        "its next batch was planned but not known to be complete: the run stopped during or right after that "
        "batch, or its driver died. %s (%d offsets) may already have been processed by that run; this query "
        "starts at the group's committed offsets and reads them again. For an exact handoff stop queries with "
        "connector.stop_query(query, options).",
        group, run.get("run"), run.get("host"), run.get("pid"), listed, count)


def _failed(code: int, what: str) -> Exception:
    """The error for Kafka error ``code`` of a request: ``RetriableLookupError`` when a retry can clear it."""
    message = f"{what} failed: {error_name(code)}"
    return RetriableLookupError(message) if retriable(code) else RuntimeError(message)


class _Cluster:
    """The driver's connections: one to a bootstrap server (Metadata), one per leader and coordinator.

    Connections are made on first use and kept until ``close``; any failure makes the caller close them all
    (``OffsetReader._patiently``), so a retry starts from fresh metadata, as Kafka's clients do.
    """

    def __init__(self, options: SourceOptions) -> None:
        config = options.client_kwargs
        self._options = options
        self._timeout_s = int(config.get("request_timeout_ms", 30_000)) / 1000
        self._client_id = str(config.get("client_id", "pylog-source-driver"))
        self._ssl = ssl_context_for(config)
        self._sasl = sasl_login_for(config)
        self._bootstrap: BrokerConnection | None = None
        self._nodes: dict[tuple[str, int], BrokerConnection] = {}
        self._brokers: dict[int, tuple[str, int]] = {}
        self._leaders: dict[TopicPartition, int] = {}
        self._coordinators: dict[str, tuple[str, int]] = {}

    def close(self) -> None:
        connections = {id(c): c for c in [self._bootstrap, *self._nodes.values()] if c is not None}
        self._bootstrap, self._nodes = None, {}
        for connection in connections.values():
            connection.close()

    def _connect(self, host: str, port: int) -> BrokerConnection:
        return BrokerConnection(host, port, timeout_s=self._timeout_s, client_id=self._client_id,
                                ssl_context=self._ssl, sasl=self._sasl)

    def _any(self) -> BrokerConnection:
        """A connection to the first bootstrap server that takes one (in the order of kafka.bootstrap.servers)."""
        if self._bootstrap is None:
            self._bootstrap = first_reachable(self._options.bootstrap_servers, self._connect)
        return self._bootstrap

    def node(self, host: str, port: int) -> BrokerConnection:
        connection = self._nodes.get((host, port))
        if connection is None:
            bootstrap = self._bootstrap
            if bootstrap is not None and bootstrap.address == f"{host}:{port}":
                connection = bootstrap
            else:
                connection = self._connect(host, port)
            self._nodes[(host, port)] = connection
        return connection

    def metadata(self, topics: list[str] | None):
        """(brokers, topic entries) of a Metadata request; the partitions' leaders are kept for ``by_leader``."""
        brokers, described = self._any().cluster_metadata(topics)
        self._brokers = brokers
        self._leaders.update({(topic.name, p.partition_index): p.leader_id for topic in described
                              if topic.error_code == 0 for p in topic.partitions})
        return brokers, described

    def by_leader(self, partitions: list[TopicPartition], values: dict) -> dict[BrokerConnection, dict]:
        """``values`` split by the connection to each partition's leader.

        The leaders are those of this connection set's last Metadata (``partitions()`` just asked for them), or
        of a new Metadata when one is unknown; a leader that moved answers NOT_LEADER_OR_FOLLOWER, and the retry
        starts from fresh connections and metadata."""
        codes: dict[str, int] = {}
        if any(self._leaders.get(tp, -1) < 0 or self._leaders[tp] not in self._brokers for tp in partitions):
            _, described = self.metadata(sorted({t for t, _ in partitions}))
            codes = {topic.name: topic.error_code for topic in described}
        brokers, leaders = self._brokers, self._leaders
        grouped: dict[BrokerConnection, dict] = {}
        for tp in partitions:
            code = codes.get(tp[0], 0 if tp in leaders else _UNKNOWN_TOPIC_OR_PARTITION)
            if code in AUTHORIZATION_FAILURES:
                raise PylogAuthorizationError(f"Metadata for topic {tp[0]} failed: "
                                              f"{refused(code, self._options, tp[0])}")
            leader = leaders.get(tp, -1)
            if leader < 0 or leader not in brokers:   # unknown partition or no leader yet: wait, as Kafka does
                raise RetriableLookupError(f"{describe(tp)} has no leader ({error_name(code) if code else 'none'})")
            grouped.setdefault(self.node(*brokers[leader]), {})[tp] = values[tp]
        return grouped

    def coordinator(self, group: str) -> BrokerConnection:
        """The connection to ``group``'s coordinator (FindCoordinator through a bootstrap server)."""
        address = self._coordinators.get(group)
        if address is None:
            code, _, host, port = self._any().find_coordinator(group, COORDINATOR_GROUP)
            if code in AUTHORIZATION_FAILURES:
                raise PylogAuthorizationError(f"FindCoordinator of group {group} failed: "
                                              f"{refused(code, self._options)}")
            if code != 0:
                raise _failed(code, f"FindCoordinator of group '{group}'")
            address = self._coordinators[group] = (host, port)
        return self.node(*address)

    def forget_coordinator(self, group: str) -> None:
        self._coordinators.pop(group, None)
