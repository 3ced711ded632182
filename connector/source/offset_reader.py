"""The source driver's offset reader: partitions of the subscription, their offsets, and group offsets.

Theory of operation: ``OffsetReader`` plays the part of Spark's
``KafkaOffsetReaderAdmin``. It owns one kafka-python ``KafkaAdminClient``,
created on first use (readers are pickled, clients are not), and answers in
plain values: sorted ``(topic, partition)`` lists and ``{(topic, partition):
offset}`` dicts. Every call is retried ``fetchOffset.numRetries`` times with
a fresh client, as Spark does. It speaks only the Kafka protocol.

Before its first client, the reader spends at most ``bootstrapTimeoutMs``
on a plain TCP connect to ``kafka.bootstrap.servers``
(``connector.wire.check_bootstrap``): an address that refuses connections
fails the query at once with the address and the reason, instead of after
``fetchOffset.numRetries`` rounds of the clients' own minute-long patience.
Once a broker answered, brokers that go away get the Java clients' patience
(default.api.timeout.ms, 60 s, ``connector.admin``) to accept connections
again before each new client, and then fail the query with the same kind of
message.
"""
from __future__ import annotations

import logging
import time
from typing import Callable, Iterable, Mapping, TypeVar

import connector.admin as admin
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
from connector.errors import PylogAuthorizationError
from connector.wire import BootstrapUnreachable, SecurityMisconfigured, check_bootstrap, check_login

log = logging.getLogger(__name__)
T = TypeVar("T")


class NoMatchingOffsetError(ValueError):
    """A timestamp lookup found no record at or after the timestamp (startingOffsetsByTimestampStrategy=error)."""


class OffsetReader:
    """Metadata, ListOffsets, OffsetFetch and OffsetCommit for one source, through KafkaAdminClient."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._admin = None
        self._reached = False   # a bootstrap server accepted a connection (check_bootstrap passed)

    def close(self) -> None:
        if self._admin is not None:
            try:
                self._admin.close()
            finally:
                self._admin = None

    # -- partitions ---------------------------------------------------------

    def partitions(self) -> list[TopicPartition]:
        """The partitions the subscription covers now (new topics of a pattern, new partitions included)."""
        options = self.options

        def lookup(admin):
            if options.strategy == "subscribe":
                described = admin.describe_topics(list(options.topics))
            else:
                described = admin.describe_topics(None)
            found = set()
            for topic in described:
                if topic.get("error_code", 0) != 0 or topic.get("is_internal"):
                    continue
                name = topic["name"]
                if not options.matches(name):
                    continue
                for partition in topic.get("partitions", ()):
                    found.add((name, int(partition["partition_index"])))
            if options.strategy == "assign":
                found &= set(options.assigned)
            return sorted(found)

        return self._with_retries(lookup)

    # -- offsets --------------------------------------------------------------

    def earliest(self, partitions: Iterable[TopicPartition]) -> PartitionOffsets:
        from kafka.protocol.consumer.offsets import OffsetSpec
        return self._list_offsets({tp: OffsetSpec.EARLIEST for tp in partitions})

    def latest(self, partitions: Iterable[TopicPartition]) -> PartitionOffsets:
        """Latest offsets; under read_committed the last stable offset, so open transactions are not read."""
        from kafka.protocol.consumer.offsets import OffsetSpec
        return self._list_offsets({tp: OffsetSpec.LATEST for tp in partitions})

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
        if not specs:
            return {}
        from kafka.structs import TopicPartition as KafkaTopicPartition
        isolation = self.options.isolation_level.upper()

        def lookup(admin):
            answer = admin.list_partition_offsets(
                {KafkaTopicPartition(t, p): spec for (t, p), spec in specs.items()}, isolation_level=isolation)
            return {(tp.topic, tp.partition): int(result.offset) for tp, result in answer.items()}

        return self._with_retries(lookup)

    # -- consumer group ---------------------------------------------------------

    def group_offsets(self, partitions: Iterable[TopicPartition]) -> PartitionOffsets:
        """The group's committed offsets for ``partitions``; partitions without a commit are left out."""
        return {tp: offset for tp, (offset, _) in self.group_commits(partitions).items()}

    def group_commits(self, partitions: Iterable[TopicPartition],
                      group_id: str | None = None) -> dict[TopicPartition, tuple[int, str]]:
        """(offset, metadata) the group (default: the options' group) committed for each of ``partitions``."""
        from kafka.structs import TopicPartition as KafkaTopicPartition
        wanted = [KafkaTopicPartition(t, p) for t, p in partitions]
        group = group_id or self.options.group_id

        def lookup(admin):
            answer = admin.list_group_offsets({group: wanted}).get(group, {})
            return {(tp.topic, tp.partition): (int(meta.offset), meta.metadata or "") for tp, meta in answer.items()
                    if meta is not None and meta.offset is not None and meta.offset >= 0}

        return self._with_retries(lookup)

    def commit_group_offsets(self, group_id: str, offsets: PartitionOffsets,
                             metadata: Mapping[TopicPartition, str] | None = None) -> None:
        """Commit ``offsets`` (with each partition's ``metadata`` string) to ``group_id`` as a non-member
        (generation -1, no member id); raises on failure."""
        from kafka.structs import OffsetAndMetadata
        from kafka.structs import TopicPartition as KafkaTopicPartition
        metadata = metadata or {}
        payload = {KafkaTopicPartition(t, p): OffsetAndMetadata(o, metadata.get((t, p), ""), None)
                   for (t, p), o in offsets.items()}
        if not payload:
            return
        answer = self._admin_client().alter_group_offsets(group_id, payload)
        failed = {f"{tp.topic}-{tp.partition}": error.__name__ for tp, error in answer.items()
                  if getattr(error, "errno", 0) != 0}
        if failed:
            raise RuntimeError(f"OffsetCommit to group '{group_id}' failed: {failed}")

    # -- plumbing -----------------------------------------------------------------

    def _admin_client(self):
        if self._admin is None:
            if self._reached:
                # A new client after a failure: kafka-python would hang ~30 s per attempt on brokers that refuse
                # connections and then say only "Unable to bootstrap"; give them the Java clients' patience.
                check_bootstrap(self.options.bootstrap_servers, int(admin.DEFAULT_API_TIMEOUT_S * 1000),
                                "default.api.timeout.ms")
            else:
                reached = check_bootstrap(self.options.bootstrap_servers, self.options.bootstrap_timeout_ms)
                check_login(reached, self.options.client_kwargs)
                self._reached = True
            self._admin = admin.client(self.options, "pylog-source-driver")
        return self._admin

    def _with_retries(self, body: Callable[[object], T]) -> T:
        """``body(admin)`` with Spark's fetchOffset retries around the Java consumer's own patience.

        Spark's attempts each call a Java consumer that itself retries retriable
        errors (a leader moving, a broker down) for default.api.timeout.ms; the
        kafka-python admin client fails at once, so each attempt here retries
        those errors with a fresh client (fresh metadata) for that long.
        """
        attempts = self.options.fetch_offset_num_retries
        for attempt in range(1, attempts + 1):
            try:
                return admin.with_patience(lambda: body(self._admin_client()), "a Kafka offsets lookup",
                                           on_retry=self.close)
            except (NoMatchingOffsetError, BootstrapUnreachable, SecurityMisconfigured, PylogAuthorizationError):
                raise   # retrying cannot help: the settings or the ACLs must change
            except Exception as exc:  # any client failure: retry with a fresh client, as Spark does
                if attempt == attempts:
                    unreachable = self._unreachable(exc)
                    if unreachable is None:
                        raise
                    raise unreachable from exc
                log.warning("Error in attempt %d getting Kafka offsets: %r", attempt, exc)
                self.close()
                time.sleep(self.options.fetch_offset_retry_interval_ms / 1000)
        raise AssertionError("unreachable")

    def _unreachable(self, exc: Exception) -> BootstrapUnreachable | None:
        """After the last attempt: kafka-python says only "Unable to bootstrap" when the brokers are gone, so ask
        the operating system why (``check_bootstrap``, no waiting); None when a bootstrap server answers."""
        try:
            check_bootstrap(self.options.bootstrap_servers, 0)
        except BootstrapUnreachable as unreachable:
            return BootstrapUnreachable(f"Kafka offsets lookup failed after fetchOffset.numRetries="
                                        f"{self.options.fetch_offset_num_retries} attempts ({exc!r}). {unreachable}")
        return None


def _report_unconfirmed(group: str, committed: PartitionOffsets, metadata: dict) -> None:
    """startingOffsets=group: a WARNING naming the ranges a previous run planned and never confirmed."""
    ranges = unconfirmed_ranges(committed, metadata)
    if not ranges:
        return
    run = metadata[(ranges[0].topic, ranges[0].partition)]
    listed = ", ".join(f"{describe((r.topic, r.partition))} offsets [{r.from_offset}, {r.until_offset})"
                       for r in ranges)
    log.warning(
        "startingOffsets=group: consumer group '%s' was last committed by pylog run %s (driver %s, pid %s) while "
        "its next batch was planned but not known to be complete: the run stopped during or right after that "
        "batch, or its driver died. %s (%d offsets) may already have been processed by that run; this query "
        "starts at the group's committed offsets and reads them again. For an exact handoff stop queries with "
        "connector.stop_query(query, options).",
        group, run.get("run"), run.get("host"), run.get("pid"), listed, sum(r.size for r in ranges))
