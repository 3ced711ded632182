"""``pylog groups``: list, describe, reset offsets of and delete consumer groups.

Examples::

    $ pylog groups list
    GROUP    STATE   PROTOCOL-TYPE
    workers  Stable  consumer
    $ pylog groups describe workers
    Consumer group 'workers': state Stable, protocol consumer/range, 2 members

    GROUP    TOPIC  PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG  CONSUMER-ID      HOST        CLIENT-ID
    workers  jobs   0          40              42              2    kafka-python-1…  /127.0.0.1  worker-a
    ...
    GROUP    CONSUMER-ID      HOST        CLIENT-ID  #PARTITIONS  ASSIGNMENT
    workers  kafka-python-1…  /127.0.0.1  worker-a   2            jobs:0,1
    $ pylog groups describe workers reporting --format json    # one JSON document
    $ pylog groups reset-offsets workers --topic jobs --to-earliest             # dry run: the plan
    $ pylog groups reset-offsets workers --topic jobs:0,2 --shift-by -10 --execute
    $ pylog groups reset-offsets workers --all-topics --to-datetime 2026-01-31T12:00:00Z --execute
    $ pylog groups delete workers reporting

Describe is ``kafka-consumer-groups.sh --describe``: DescribeGroups for the
state, the members and their assignments (decoded from the ``consumer``
protocol's assignment bytes), OffsetFetch for the committed offsets and
ListOffsets (latest) for the log end offsets; lag is log end minus committed.
A partition appears if the group has an offset committed for it or a member
owns it; what is unknown (no commit, deleted topic, no owner) is ``-`` in text
and ``null`` in JSON.

A group that a pylog Spark query commits to (as a non-member, so it is
Empty while the query runs) is recognisable by its commits' metadata, JSON
that ``connector.source.offsets.group_metadata`` writes: list shows a
COMMITTED-BY column for it and describe a "Committed by" line (``committed_by``
in JSON): the run's token, driver host and pid, batches planned, how long ago
it last committed, the Spark query id after ``connector.stop_query``, and a
batch planned from the committed offsets but not confirmed complete. Only
displayed here: broker_sim does not import the connector.

Reset-offsets computes one new offset per partition, clamped to
``[earliest, latest]`` of that partition, and prints the plan. Only with
``--execute`` is it committed (OffsetCommit with generation -1 and an empty
member id, which a coordinator accepts only for a group without members). As
with Kafka's tool the group must be inactive (Empty, or Dead: no such group
yet) even for a dry run; otherwise the command fails naming the group and its
state. ``--to-datetime`` takes ISO 8601 (a time without a zone is local time)
and picks the first offset whose timestamp is at or after it, or the log end
if there is none. ``--shift-by`` needs a committed offset to shift from.

Every function takes a :class:`~broker_sim.tools.clients.Connection` and writes
its output to *out*; failures raise :class:`ToolError` naming the group or topic.
"""

import json
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import TextIO

from kafka import OffsetAndMetadata, TopicPartition
from kafka.admin import OffsetSpec
from kafka.errors import (
    GroupIdNotFoundError, IncompatibleBrokerVersion, KafkaError, NoError, NonEmptyGroupError,
)
from kafka.protocol.consumer import OffsetTimestamp

from broker_sim.tools.clients import Connection
from broker_sim.tools.errors import ToolError, describe_error_code

NO_ERROR = 0
CONSUMER_PROTOCOL = "consumer"
# States in which a group has no members, so offsets may be committed for it
# from outside (Kafka's ConsumerGroupCommand allows the same two).
INACTIVE_STATES = ("Empty", "Dead")
UNKNOWN_STATES = ("", "Unknown")
NONE_TEXT = "-"
PYLOG_SOURCE_TAG = "pylog-source"   # the "pylog" field of a pylog Spark source's commit metadata


@dataclass(frozen=True)
class ResetSpec:
    """How ``reset-offsets`` picks the new offset; exactly one field is set."""

    to_earliest: bool = False
    to_latest: bool = False
    to_datetime: datetime | None = None
    to_offset: int | None = None
    shift_by: int | None = None


def parse_topic_partitions(text: str) -> tuple[str, list[int] | None]:
    """``TOPIC`` or ``TOPIC:P[,P...]`` (Kafka's ``--topic`` syntax) as (topic, partitions or None).

    Raises ValueError with a message for a malformed value.
    """
    topic, found, partitions = text.partition(":")
    if not topic:
        raise ValueError(f"expected TOPIC or TOPIC:PARTITION[,PARTITION...], got {text!r}")
    if not found:
        return topic, None
    try:
        numbers = [int(p) for p in partitions.split(",")]
    except ValueError:
        raise ValueError(f"partitions must be integers separated by commas, got {partitions!r}") from None
    if any(n < 0 for n in numbers):
        raise ValueError(f"partitions must be >= 0, got {partitions!r}")
    return topic, sorted(set(numbers))


def parse_datetime(text: str) -> datetime:
    """ISO 8601 date-time; without a zone it is local time. Raises ValueError."""
    value = datetime.fromisoformat(text)
    return value if value.tzinfo is not None else value.astimezone()


@contextmanager
def group_apis(conn: Connection) -> Iterator:
    """An admin client; a broker without the group APIs becomes one clear ToolError."""
    try:
        with closing(conn.admin()) as admin:
            yield admin
    except IncompatibleBrokerVersion as exc:
        raise ToolError(f"the broker at {conn.bootstrap_servers} does not support consumer groups "
                        f"({exc.args[0] if exc.args else exc})") from exc


def list_groups(conn: Connection, *, output_format: str, out: TextIO) -> None:
    """Print every group's id, state and protocol type, sorted by id; for the Empty groups a pylog Spark
    query commits to, who committed (``committed_by``).

    ListGroups before v4 carries no state; DescribeGroups then supplies it.
    """
    with group_apis(conn) as admin:
        groups = admin.list_groups()
        stateless = [g["group_id"] for g in groups if g.get("group_state", "") in UNKNOWN_STATES]
        described = admin.describe_groups(stateless) if stateless else {}
        rows = sorted(
            ({"group": g["group_id"],
              "state": described[g["group_id"]]["group_state"] if g["group_id"] in described else g["group_state"],
              "protocol_type": g["protocol_type"]}
             for g in groups),
            key=lambda row: row["group"])
        for row in rows:
            if row["state"] == "Empty":
                try:
                    committer = committed_by(admin.list_group_offsets(row["group"]).get(row["group"], {}))
                except KafkaError:   # e.g. no DESCRIBE on the group's topics: the row stays as ListGroups gave it
                    committer = None
                if committer is not None:
                    row["committed_by"] = committer
    if output_format == "json":
        print(json.dumps(rows, indent=2), file=out)
    else:
        now_ms = time.time() * 1000
        _print_table(["GROUP", "STATE", "PROTOCOL-TYPE", "COMMITTED-BY"],
                     [[r["group"], r["state"], r["protocol_type"] or NONE_TEXT,
                       committer_text(r["committed_by"], now_ms) if "committed_by" in r else None] for r in rows],
                     out)


def committed_by(committed: dict[TopicPartition, OffsetAndMetadata]) -> dict | None:
    """The pylog Spark query run that made these commits, from their metadata; None for other committers.

    The newest commit's fields (run, host, pid, started, batches, at; state, query, name and batchId after
    ``connector.stop_query``), and ``in_flight``: ``{"topic-partition": [committed, planned end]}`` for a
    batch planned from the committed offsets and not confirmed complete.
    """
    documents = {}
    for tp, meta in committed.items():
        document = _pylog_metadata(getattr(meta, "metadata", None))
        if document is not None:
            documents[tp] = document
    if not documents:
        return None
    newest = max(documents.values(), key=lambda d: d.get("at") if isinstance(d.get("at"), int) else 0)
    summary = {k: v for k, v in newest.items() if k not in ("pylog", "next")}
    summary["in_flight"] = {f"{tp.topic}-{tp.partition}": [committed[tp].offset, d["next"]]
                            for tp, d in sorted(documents.items()) if isinstance(d.get("next"), int)}
    return summary


def _pylog_metadata(text) -> dict | None:
    if not isinstance(text, str) or not text.startswith("{"):
        return None
    try:
        document = json.loads(text)
    except ValueError:
        return None
    return document if isinstance(document, dict) and document.get("pylog") == PYLOG_SOURCE_TAG else None


def committer_text(c: dict, now_ms: float) -> str:
    """One line: ``pylog query run 1a2b3c4d on host pid 42, 7 batches, last commit 3 s ago``."""
    text = f"pylog query run {c.get('run')} on {c.get('host')} pid {c.get('pid')}"
    if c.get("state") == "stopped":
        name = f" '{c['name']}'" if c.get("name") else ""
        text += f", stopped: Spark query {c.get('query')}{name} after batch {c.get('batchId')}"
    elif c.get("batches"):
        text += f", {c['batches']} batches"
    if isinstance(c.get("at"), (int, float)):
        text += f", last commit {max(0, round((now_ms - c['at']) / 1000))} s ago"
    if c.get("in_flight"):
        text += ", not confirmed: " + " ".join(f"{tp}:{a}..{b}" for tp, (a, b) in c["in_flight"].items())
    return text


def describe_groups(conn: Connection, group_ids: list[str], *, output_format: str, out: TextIO) -> None:
    """Describe *group_ids* in text or json (see the module docstring).

    Existing groups are printed even if some ids are unknown; the unknown ones
    are then reported in the ToolError.
    """
    with group_apis(conn) as admin:
        described = admin.describe_groups(group_ids)
        missing = [g for g in dict.fromkeys(group_ids) if described.get(g) is None or _is_missing(described[g])]
        modern = _consumer_protocol_groups(admin, missing)
        descriptions, problems = [], []
        for group_id in dict.fromkeys(group_ids):
            group = described.get(group_id)
            if group_id in modern:
                committed = admin.list_group_offsets(group_id)[group_id]
                descriptions.append(_describe_consumer_protocol(admin, group_id, modern[group_id], committed))
                continue
            if group is None or _is_missing(group):
                problems.append(f"consumer group '{group_id}' does not exist")
                continue
            if group.get("error"):
                problems.append(f"cannot describe consumer group '{group_id}': {group['error']}")
                continue
            committed = admin.list_group_offsets(group_id)[group_id]
            descriptions.append(_describe_one(admin, group, committed))
    if output_format == "json":
        print(json.dumps(descriptions, indent=2), file=out)
    else:
        for number, description in enumerate(descriptions):
            if number:
                print(file=out)
            _print_group_text(description, out)
    if problems:
        raise ToolError("; ".join(problems))


def _consumer_protocol_groups(admin, group_ids: list[str]) -> dict[str, dict]:
    """Of groups DescribeGroups does not know, those that are KIP-848 consumer groups (ConsumerGroupDescribe,
    when the broker has it: Kafka 4 answers a classic describe of one as GROUP_ID_NOT_FOUND)."""
    if not group_ids:
        return {}
    try:
        found = admin.describe_consumer_protocol_groups(group_ids)
    except (KafkaError, IncompatibleBrokerVersion):   # a broker without the API: no such groups there
        return {}
    return {group_id: group for group_id, group in found.items() if group["error_code"] == NO_ERROR}


def _describe_consumer_protocol(admin, group_id: str, group: dict,
                                committed: dict[TopicPartition, OffsetAndMetadata]) -> dict:
    """A KIP-848 group as ``_describe_one`` describes a classic one, with the group's and members' epochs."""
    owners = {TopicPartition(topic, p): m for m in group["members"]
              for topic, parts in m["assignment"].items() for p in parts}
    offsets = _offset_rows(admin, committed, owners)
    members = [{"member_id": m["member_id"], "group_instance_id": m["group_instance_id"],
                "client_id": m["client_id"], "host": m["client_host"], "member_epoch": m["member_epoch"],
                "assignment": {t: p for t, p in sorted(m["assignment"].items())},
                "target_assignment": {t: p for t, p in sorted(m["target_assignment"].items())}}
               for m in sorted(group["members"], key=lambda m: m["member_id"])]
    return {"group": group_id, "state": group["group_state"], "protocol_type": CONSUMER_PROTOCOL,
            "protocol": group["assignor_name"], "group_protocol": "consumer", "group_epoch": group["group_epoch"],
            "assignment_epoch": group["assignment_epoch"], "members": members, "offsets": offsets,
            "total_lag": sum(o["lag"] for o in offsets if o["lag"] is not None),
            "committed_by": committed_by(committed)}


def _is_missing(group: dict) -> bool:
    """Kafka reports an unknown group as Dead without members (or, from
    DescribeGroups v6, with GROUP_ID_NOT_FOUND)."""
    if group.get("error") and GroupIdNotFoundError.__name__ in group["error"]:
        return True
    return group.get("group_state") == "Dead" and not group.get("members")


def _assignment(member: dict, protocol_type: str) -> list[TopicPartition] | None:
    """The member's partitions, or None if its assignment is not the consumer protocol's."""
    assignment = member.get("member_assignment")
    if not assignment:
        return []
    # kafka-python leaves the bytes as they are if they do not decode, else
    # gives {"assigned_partitions": [{"topic": ..., "partitions": [...]}], ...}.
    if protocol_type != CONSUMER_PROTOCOL or not isinstance(assignment, dict):
        return None
    return [TopicPartition(entry["topic"], partition)
            for entry in assignment["assigned_partitions"] for partition in entry["partitions"]]


def _describe_one(admin, group: dict, committed: dict[TopicPartition, OffsetAndMetadata]) -> dict:
    protocol_type = group.get("protocol_type") or ""
    members, owners = [], {}
    for member in sorted(group.get("members") or [], key=lambda m: m["member_id"]):
        partitions = _assignment(member, protocol_type)
        for tp in partitions or []:
            owners[tp] = member
        members.append({
            "member_id": member["member_id"],
            "group_instance_id": member.get("group_instance_id"),
            "client_id": member.get("client_id"),
            "host": member.get("client_host"),
            "assignment": None if partitions is None else _partitions_by_topic(partitions),
        })
    offsets = _offset_rows(admin, committed, owners)
    return {
        "group": group["group_id"],
        "state": group.get("group_state"),
        "protocol_type": protocol_type,
        "protocol": group.get("protocol_data") or None,
        "members": members,
        "offsets": offsets,
        "total_lag": sum(o["lag"] for o in offsets if o["lag"] is not None),
        "committed_by": committed_by(committed),
    }


def _offset_rows(admin, committed: dict[TopicPartition, OffsetAndMetadata], owners: dict[TopicPartition, dict]
                 ) -> list[dict]:
    """One row per partition the group committed for or a member owns: committed offset, log end, lag, owner."""
    tps = sorted(set(committed) | set(owners))
    log_end = log_end_offsets(admin, tps)
    rows = []
    for tp in tps:
        offset = committed[tp].offset if tp in committed and committed[tp].offset >= 0 else None
        end, owner = log_end.get(tp), owners.get(tp)
        rows.append({
            "topic": tp.topic,
            "partition": tp.partition,
            "committed_offset": offset,
            "log_end_offset": end,
            "lag": end - offset if offset is not None and end is not None else None,
            "member_id": owner["member_id"] if owner else None,
            "host": owner.get("client_host") if owner else None,
            "client_id": owner.get("client_id") if owner else None,
            "metadata": committed[tp].metadata if tp in committed else None,
        })
    return rows


def _partitions_by_topic(partitions: list[TopicPartition]) -> dict[str, list[int]]:
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return by_topic


def _existing_partitions(admin, topics: list[str]) -> dict[str, list[int]]:
    """Partition numbers of those *topics* that exist."""
    if not topics:
        return {}
    metadata = admin.describe_topics(sorted(set(topics)))
    return {t["name"]: sorted(p["partition_index"] for p in t["partitions"])
            for t in metadata if t["error_code"] == NO_ERROR}


def log_end_offsets(admin, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
    """ListOffsets (latest) for the partitions of *tps* that still exist."""
    existing = _existing_partitions(admin, [tp.topic for tp in tps])
    live = [tp for tp in tps if tp.partition in existing.get(tp.topic, ())]
    if not live:
        return {}
    return {tp: o.offset for tp, o in admin.list_partition_offsets({tp: OffsetSpec.LATEST for tp in live}).items()}


def _print_group_text(d: dict, out: TextIO) -> None:
    protocol = "/".join(p for p in (d["protocol_type"], d["protocol"]) if p) or NONE_TEXT
    if d.get("group_protocol") == "consumer":   # KIP-848: the broker assigns; epochs instead of generations
        protocol += f" (group protocol consumer, group epoch {d['group_epoch']}, assignment epoch " \
                    f"{d['assignment_epoch']})"
    print(f"Consumer group '{d['group']}': state {d['state']}, protocol {protocol}, "
          f"{len(d['members'])} member{'' if len(d['members']) == 1 else 's'}", file=out)
    if d.get("committed_by"):
        print(f"Committed by {committer_text(d['committed_by'], time.time() * 1000)}", file=out)
    if d["offsets"]:
        print(file=out)
        _print_table(
            ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
             "CLIENT-ID"],
            [[d["group"], o["topic"], o["partition"], o["committed_offset"], o["log_end_offset"], o["lag"],
              o["member_id"], o["host"], o["client_id"]] for o in d["offsets"]], out)
    if d["members"] and d.get("group_protocol") == "consumer":
        print(file=out)
        _print_table(
            ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "EPOCH", "#PARTITIONS", "ASSIGNMENT", "TARGET-ASSIGNMENT"],
            [[d["group"], m["member_id"], m["host"], m["client_id"], m["member_epoch"],
              sum(len(p) for p in m["assignment"].values()), _assignment_text(m["assignment"]),
              _assignment_text(m["target_assignment"])] for m in d["members"]], out)
    elif d["members"]:
        print(file=out)
        _print_table(
            ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"],
            [[d["group"], m["member_id"], m["host"], m["client_id"],
              None if m["assignment"] is None else sum(len(p) for p in m["assignment"].values()),
              _assignment_text(m["assignment"])] for m in d["members"]], out)


def _assignment_text(assignment: dict[str, list[int]] | None) -> str:
    if assignment is None:
        return "(not the consumer protocol)"
    return " ".join(f"{topic}:{','.join(map(str, parts))}" for topic, parts in assignment.items()) or NONE_TEXT


def _print_table(header: list[str], rows: list[list], out: TextIO) -> None:
    """Columns padded to their widest cell; None shows as ``-``."""
    cells = [header] + [[NONE_TEXT if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip(), file=out)


def reset_offsets(
    conn: Connection,
    group_id: str,
    *,
    topics: list[tuple[str, list[int] | None]],
    all_topics: bool,
    spec: ResetSpec,
    execute: bool,
    output_format: str,
    out: TextIO,
    err: TextIO,
) -> list[dict]:
    """Plan (and with *execute*, commit) new offsets for *group_id*; return the plan rows.

    *topics* are (topic, partitions or None for all); with *all_topics*, every
    partition the group has an offset for. Raises ToolError if the group has
    members, a topic or partition does not exist, ``--shift-by`` has no
    committed offset to start from, or the coordinator rejects the commit.
    """
    with group_apis(conn) as admin:
        group = admin.describe_groups([group_id]).get(group_id, {})
        state = group.get("group_state") or "Dead"
        if group.get("error") and GroupIdNotFoundError.__name__ not in group["error"]:
            raise ToolError(f"cannot describe consumer group '{group_id}': {group['error']}")
        if state not in INACTIVE_STATES or group.get("members"):
            members = len(group.get("members") or [])
            raise ToolError(f"assignments can only be reset if the group '{group_id}' is inactive, but the "
                            f"current state is {state} with {members} member{'' if members == 1 else 's'}")
        committed = admin.list_group_offsets(group_id)[group_id]
        tps = sorted(committed) if all_topics else _resolve_partitions(admin, topics)
        if not tps:
            raise ToolError(f"consumer group '{group_id}' has no committed offsets to reset (--all-topics)")
        plan = _plan(admin, group_id, tps, committed, spec)
        if execute:
            results = admin.alter_group_offsets(group_id, {
                TopicPartition(row["topic"], row["partition"]): OffsetAndMetadata(row["new_offset"], "", None)
                for row in plan})
            failures = [f"{tp.topic}:{tp.partition}: {describe_error_code(error.errno)}"
                        for tp, error in sorted(results.items()) if error is not NoError]
            if failures:
                raise ToolError(f"cannot commit offsets for consumer group '{group_id}': " + "; ".join(failures))
    if output_format == "json":
        print(json.dumps(plan, indent=2), file=out)
    else:
        _print_table(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"],
                     [[group_id, r["topic"], r["partition"], r["current_offset"], r["new_offset"]]
                      for r in plan], out)
    if execute:
        print(f"Committed new offsets for {len(plan)} partitions of consumer group '{group_id}'.", file=err)
    else:
        print("Dry run: nothing was committed; add --execute to commit these offsets.", file=err)
    return plan


def _resolve_partitions(admin, topics: list[tuple[str, list[int] | None]]) -> list[TopicPartition]:
    existing = _existing_partitions(admin, [topic for topic, _ in topics])
    tps = set()
    for topic, partitions in topics:
        if topic not in existing:
            raise ToolError(f"topic '{topic}' does not exist")
        missing = [p for p in partitions or () if p not in existing[topic]]
        if missing:
            raise ToolError(f"topic '{topic}' has no partition {', '.join(map(str, missing))} "
                            f"(partitions: {', '.join(map(str, existing[topic]))})")
        tps.update(TopicPartition(topic, p) for p in (partitions if partitions is not None else existing[topic]))
    return sorted(tps)


def _plan(admin, group_id: str, tps: list[TopicPartition], committed: dict, spec: ResetSpec) -> list[dict]:
    earliest = admin.list_partition_offsets({tp: OffsetSpec.EARLIEST for tp in tps})
    latest = admin.list_partition_offsets({tp: OffsetSpec.LATEST for tp in tps})
    current = {tp: committed[tp].offset for tp in tps if tp in committed and committed[tp].offset >= 0}
    if spec.to_datetime is not None:
        at = OffsetTimestamp(int(spec.to_datetime.timestamp() * 1000))
        # -1: no record at or after the time, so the log end (as Kafka's tool).
        found = admin.list_partition_offsets({tp: at for tp in tps})
        requested = {tp: found[tp].offset if found[tp].offset >= 0 else latest[tp].offset for tp in tps}
    elif spec.shift_by is not None:
        missing = [f"{tp.topic}:{tp.partition}" for tp in tps if tp not in current]
        if missing:
            raise ToolError(f"cannot shift offsets of consumer group '{group_id}': no committed offset for "
                            f"{', '.join(missing)} (--shift-by moves a committed offset)")
        requested = {tp: current[tp] + spec.shift_by for tp in tps}
    elif spec.to_offset is not None:
        requested = {tp: spec.to_offset for tp in tps}
    elif spec.to_earliest:
        requested = {tp: earliest[tp].offset for tp in tps}
    else:
        requested = {tp: latest[tp].offset for tp in tps}
    return [{
        "topic": tp.topic,
        "partition": tp.partition,
        "current_offset": current.get(tp),
        "new_offset": min(max(requested[tp], earliest[tp].offset), latest[tp].offset),
    } for tp in tps]


def delete_groups(conn: Connection, group_ids: list[str], *, out: TextIO) -> None:
    """DeleteGroups for *group_ids*; a group with members or unknown is an error naming it."""
    with group_apis(conn) as admin:
        results = admin.delete_groups(list(dict.fromkeys(group_ids)))
    failures = []
    for group_id, result in results.items():
        if result == "OK":
            print(f"Deleted consumer group '{group_id}'.", file=out)
        elif result == GroupIdNotFoundError.__name__:
            failures.append(f"consumer group '{group_id}' does not exist")
        elif result == NonEmptyGroupError.__name__:
            failures.append(f"consumer group '{group_id}' has active members and cannot be deleted")
        else:
            failures.append(f"cannot delete consumer group '{group_id}': {result}")
    if failures:
        raise ToolError("; ".join(failures))
