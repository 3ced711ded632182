"""Streaming offsets and offset ranges: pure functions, no I/O.

Theory of operation: the source's offset, as Spark stores it in the
checkpoint's ``offsets/`` log, is the JSON Spark's own Kafka source writes:
``{"topic": {"partition": next offset to read}}`` (connector/schemas/source-offsets.json).
Topics and partitions are always emitted in sorted order so that the same
positions serialise to the same JSON: Spark decides "no new data" by
comparing offsets' JSON text. A streaming query that uses the default
consumer group also carries the group's name, so the group survives restarts
with the checkpoint (``connector.source``): as one more "topic" whose name is
``GROUP_KEY_PREFIX`` + the group ("pylog:group=pylog-…", a colon is never in
a topic name) and whose partition map is empty. Spark's own connector reads
that JSON as a map of topic to partitions and finds no partition in it, so a
checkpoint written by ``format("pylog")`` resumes with ``format("kafka")``
(and back) at the same offsets. Checkpoints of earlier pylog versions carried
the group as a string under ``LEGACY_GROUP_KEY``; they are still read.

The consumer group's commits carry, per partition, an OffsetCommit metadata
string (``group_metadata``): JSON naming the pylog query run that committed
(run token, driver host and pid, start time, batches planned) and, while a
batch that starts at the committed offset is planned but not yet known to be
complete, that batch's end (``"next"``). ``unconfirmed_ranges`` turns the
commits a new query finds into the offset ranges a previous run may already
have processed.

A batch of work is a list of ``OffsetRange`` (topic, partition, from, until),
produced by ``plan_ranges`` (new/deleted partitions, data-loss checks) and
split by ``split_ranges`` (``minPartitions`` / ``maxRecordsPerPartition``,
Spark's ``KafkaOffsetRangeCalculator``). ``rate_limit`` is Spark's
``maxOffsetsPerTrigger`` arithmetic.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Callable, Mapping

TopicPartition = tuple[str, int]
PartitionOffsets = dict[TopicPartition, int]
GROUP_KEY_PREFIX = "pylog:group="   # {"pylog:group=<group>": {}}: a topic Spark's connector sees no partition of
LEGACY_GROUP_KEY = "pylog:group"     # {"pylog:group": "<group>"}: written before, read still
GROUP_METADATA_TAG = "pylog-source"   # the "pylog" field of the group commits' metadata JSON


@dataclass(frozen=True)
class OffsetRange:
    """Offsets [from_offset, until_offset) of one partition; compaction may leave fewer records than the size."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def size(self) -> int:
        return self.until_offset - self.from_offset


def to_json_dict(offsets: Mapping[TopicPartition, int]) -> dict:
    """``{(t, p): o}`` -> ``{"t": {"p": o}}`` with sorted topics and numerically sorted partitions."""
    result: dict[str, dict[str, int]] = {}
    for topic, partition in sorted(offsets):
        result.setdefault(topic, {})[str(partition)] = int(offsets[(topic, partition)])
    return result


def is_group_key(key: str) -> bool:
    """True for the key carrying the query's consumer group (not a topic)."""
    return key.startswith(LEGACY_GROUP_KEY)


def group_of(offset: Mapping | None) -> str | None:
    """The consumer group an offset carries (either form), or None."""
    for key, value in (offset or {}).items():
        if key.startswith(GROUP_KEY_PREFIX) and len(key) > len(GROUP_KEY_PREFIX):
            return key[len(GROUP_KEY_PREFIX):]
        if key == LEGACY_GROUP_KEY and isinstance(value, str) and value:
            return value
    return None


def with_group(offset: dict, group: str) -> dict:
    """``offset`` (from ``to_json_dict``) carrying ``group``, in the form Spark's connector reads too."""
    result = {key: value for key, value in offset.items() if not is_group_key(key)}
    result[GROUP_KEY_PREFIX + group] = {}
    return result


def without_group(offset: Mapping | None) -> dict:
    """``offset`` without the group it carries: the topics only, as Spark's connector would write them."""
    return {key: value for key, value in (offset or {}).items() if not is_group_key(key)}


def from_json_dict(offset: Mapping | None) -> PartitionOffsets:
    """The inverse of ``to_json_dict`` (the group key is not a topic and is left out)."""
    return {(topic, int(partition)): int(value)
            for topic, partitions in (offset or {}).items() if not is_group_key(topic)
            for partition, value in partitions.items()}


def offsets_behind(end: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int]) -> dict[str, float]:
    """Spark's Kafka source metrics: avg/max/min of latest minus end over the partitions of ``latest``."""
    behind = [max(0, latest[tp] - end.get(tp, 0)) for tp in latest]
    if not behind:
        return {}
    return {"avgOffsetsBehindLatest": sum(behind) / len(behind), "maxOffsetsBehindLatest": max(behind),
            "minOffsetsBehindLatest": min(behind)}


def describe(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


def rate_limit(limit: int, start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
               earliest_of_new: Mapping[TopicPartition, int]) -> PartitionOffsets:
    """Spark's ``rateLimit``: share ``limit`` offsets among partitions in proportion to their backlog.

    Small partitions are not starved (a share below one rounds up to one);
    no partition moves past its latest offset.
    """
    sizes = {}
    for tp, end in latest.items():
        begin = start.get(tp, earliest_of_new.get(tp))
        if begin is not None and end - begin > 0:
            sizes[tp] = end - begin
    total = float(sum(sizes.values()))
    if total < 1:
        return dict(latest)
    result = {}
    for tp, end in latest.items():
        if tp not in sizes:
            result[tp] = end
            continue
        begin = start.get(tp, earliest_of_new.get(tp))
        share = limit * (sizes[tp] / total)
        share_long = math.ceil(share) if share < 1 else math.floor(share)
        result[tp] = min(end, begin + share_long)
    return result


def plan_ranges(start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int],
                earliest_of_new: Mapping[TopicPartition, int],
                report_data_loss: Callable[[str], None]) -> list[OffsetRange]:
    """Spark's ``getOffsetRangesFromResolvedOffsets``: one range per partition of ``end`` with data to read.

    Partitions in ``end`` but not in ``start`` are new and start at
    ``earliest_of_new``; a new partition missing from it was deleted again.
    ``report_data_loss`` raises or logs (``failOnDataLoss``).
    """
    new = set(end) - set(start)
    missing_new = new - set(earliest_of_new)
    if missing_new:
        report_data_loss(f"Cannot find earliest offsets of {sorted(map(describe, missing_new))}. "
                         "Some data may have been missed")
    for tp in sorted(new & set(earliest_of_new)):
        if earliest_of_new[tp] != 0:
            report_data_loss(f"Added partition {describe(tp)} starts from {earliest_of_new[tp]} instead of 0. "
                             "Some data may have been missed")
    gone = set(start) - set(end)
    if gone:
        report_data_loss(f"{sorted(map(describe, gone))} are gone. Some data may have been missed.")
    ranges = []
    for tp in sorted(end):
        if tp in start:
            begin = start[tp]
        elif tp in earliest_of_new:
            begin = earliest_of_new[tp]
        else:
            continue
        until = end[tp]
        if until < begin:
            report_data_loss(f"Partition {describe(tp)}'s offset was changed from {begin} to {until}, "
                             "some data may have been missed")
            continue
        if until > begin:
            ranges.append(OffsetRange(tp[0], tp[1], begin, until))
    return ranges


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None,
                 max_records_per_partition: int | None) -> list[OffsetRange]:
    """Spark's ``KafkaOffsetRangeCalculator.getRanges``: split big ranges into more Spark tasks.

    First every range is cut into pieces of at most ``max_records_per_partition``
    offsets; then, while there are fewer pieces than ``min_partitions``, big
    ranges are split in proportion to their share of the total.
    """
    ranges = [r for r in ranges if r.size > 0]
    if max_records_per_partition:
        ranges = [piece for r in ranges
                  for piece in _divide(r, math.ceil(r.size / max_records_per_partition))]
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    unsplit = [r for r in ranges if _part_count(r.size, total, min_partitions) == 1]
    split_total = total - sum(r.size for r in unsplit)
    split_min = max(min_partitions - len(unsplit), 1)
    unsplit_ids = {id(r) for r in unsplit}
    result = []
    for r in ranges:
        parts = 1 if id(r) in unsplit_ids else _part_count(r.size, split_total, split_min)
        result.extend(_divide(r, parts))
    return result


def _part_count(size: int, total: int, parts: int) -> int:
    # Scala's math.round rounds half up; Python's round() would round half to even.
    return max(int(math.floor(size / total * parts + 0.5)), 1)


def _divide(r: OffsetRange, parts: int) -> list[OffsetRange]:
    pieces, remaining, begin = [], r.size, r.from_offset
    for part in range(parts):
        this = remaining // (parts - part)
        remaining -= this
        until = min(begin + this, r.until_offset)
        if until > begin:
            pieces.append(OffsetRange(r.topic, r.partition, begin, until))
        begin = until
    return pieces


def group_metadata(run: Mapping, next_offset: int | None = None) -> str:
    """The OffsetCommit metadata of one partition: ``run`` (who commits) and the in-flight batch's end, if any.

    Kafka bounds the string by offset.metadata.max.bytes (4096 by default); this stays near 200 bytes.
    """
    document = {"pylog": GROUP_METADATA_TAG, **run}
    if next_offset is not None:
        document["next"] = int(next_offset)
    return json.dumps(document, separators=(",", ":"), sort_keys=True)


def parse_group_metadata(text: str | None) -> dict | None:
    """``group_metadata``'s document, or None for anything else (commits of other clients, old pylog)."""
    if not text or not text.startswith("{"):
        return None
    try:
        document = json.loads(text)
    except ValueError:
        return None
    return document if isinstance(document, dict) and document.get("pylog") == GROUP_METADATA_TAG else None


def unconfirmed_ranges(committed: Mapping[TopicPartition, int],
                       metadata: Mapping[TopicPartition, dict | None]) -> list[OffsetRange]:
    """The ranges [committed, next) of a batch a previous run planned from the committed offsets and never
    confirmed complete: it may or may not have reached that run's sink."""
    ranges = []
    for tp in sorted(committed):
        document = metadata.get(tp) or {}
        upto = document.get("next")
        if isinstance(upto, int) and upto > committed[tp]:
            ranges.append(OffsetRange(tp[0], tp[1], committed[tp], upto))
    return ranges
