"""``pylog topics``: create, list, describe and delete topics.

Examples::

    $ pylog topics create events --partitions 3 --config cleanup.policy=compact
    Created topic 'events' (partitions: 3, replication factor: 1).
    $ pylog topics create events --if-not-exists        # no error if it exists
    $ pylog topics list                                 # --all adds __consumer_offsets etc.
    events
    $ pylog topics describe events
    Topic: events	TopicId: 5c0...	PartitionCount: 3	ReplicationFactor: 1	Configs: cleanup.policy=compact
    	Partition: 0	Leader: 1	Replicas: 1	Isr: 1	EarliestOffset: 0	LatestOffset: 42
    	...
    $ pylog topics describe events --format json        # one JSON document
    $ pylog topics delete events other --if-exists

Describe shows topic-level config overrides (DescribeConfigs, "modified"
filter); ``--all-configs`` shows every config the broker reports. Offsets come
from ListOffsets (earliest, latest) per partition.

Every function takes a :class:`~broker_sim.tools.clients.Connection` and writes
its human output to *out*; failures raise :class:`ToolError` with a message
naming the topic.
"""

import json
from contextlib import closing
from typing import TextIO

from kafka import TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, OffsetSpec
from kafka.errors import TopicAlreadyExistsError, UnknownTopicOrPartitionError

from broker_sim.tools.clients import Connection
from broker_sim.tools.errors import ToolError, describe_error_code

NO_ERROR = 0


def is_internal(topic: dict) -> bool:
    """Kafka flags internal topics in metadata; brokers that do not are caught by
    the reserved ``__`` prefix (``__consumer_offsets``, ``__transaction_state``)."""
    return bool(topic.get("is_internal")) or topic["name"].startswith("__")


def create_topic(
    conn: Connection,
    name: str,
    *,
    partitions: int | None,
    replication_factor: int | None,
    configs: dict[str, str],
    if_not_exists: bool,
    out: TextIO,
) -> None:
    """Create topic *name*; broker defaults apply to options left as None.

    Raises ToolError if the topic exists (unless *if_not_exists*) or the broker
    rejects the request (the broker's error is quoted).
    """
    spec = {
        "num_partitions": -1 if partitions is None else partitions,
        "replication_factor": -1 if replication_factor is None else replication_factor,
        "configs": configs,
    }
    with closing(conn.admin()) as admin:
        response = admin.create_topics({name: spec}, raise_errors=False)
    (result,) = response["topics"]
    code = result["error_code"]
    if code == TopicAlreadyExistsError.errno and if_not_exists:
        print(f"Topic '{name}' already exists.", file=out)
        return
    if code != NO_ERROR:
        raise ToolError(f"cannot create topic '{name}': "
                        f"{describe_error_code(code, result.get('error_message'))}")
    print(f"Created topic '{name}' (partitions: {result.get('num_partitions', '?')}, "
          f"replication factor: {result.get('replication_factor', '?')}).", file=out)


def list_topics(conn: Connection, *, include_internal: bool, out: TextIO) -> None:
    """Print topic names, sorted, one per line."""
    with closing(conn.admin()) as admin:
        topics = admin.describe_topics()
    for name in sorted(t["name"] for t in topics if include_internal or not is_internal(t)):
        print(name, file=out)


def delete_topics(conn: Connection, names: list[str], *, if_exists: bool, out: TextIO) -> None:
    """Delete *names*; with *if_exists*, unknown topics are not an error."""
    with closing(conn.admin()) as admin:
        response = admin.delete_topics(names, raise_errors=False)
    failures = []
    for result in response["topics"]:
        name, code = result["name"], result["error_code"]
        if code == NO_ERROR:
            print(f"Deleted topic '{name}'.", file=out)
        elif code == UnknownTopicOrPartitionError.errno and if_exists:
            print(f"Topic '{name}' does not exist.", file=out)
        elif code == UnknownTopicOrPartitionError.errno:
            failures.append(f"topic '{name}' does not exist")
        else:
            failures.append(f"cannot delete topic '{name}': "
                            f"{describe_error_code(code, result.get('error_message'))}")
    if failures:
        raise ToolError("; ".join(failures))


def describe_topics(
    conn: Connection,
    names: list[str],
    *,
    all_configs: bool,
    output_format: str,
    out: TextIO,
) -> None:
    """Describe *names* (all non-internal topics if empty) in text or json.

    Known topics are printed even if some names are unknown; the unknown ones
    are then reported in the ToolError.
    """
    with closing(conn.admin()) as admin:
        metadata = admin.describe_topics(names or None)
        if not names:
            metadata = [t for t in metadata if not is_internal(t)]
        unknown = [t["name"] for t in metadata if t["error_code"] == UnknownTopicOrPartitionError.errno]
        failed = [t for t in metadata if t["error_code"] not in (NO_ERROR, UnknownTopicOrPartitionError.errno)]
        found = sorted((t for t in metadata if t["error_code"] == NO_ERROR), key=lambda t: t["name"])
        descriptions = [_describe_one(admin, topic, all_configs) for topic in found]
    if output_format == "json":
        print(json.dumps(descriptions, indent=2), file=out)
    else:
        for description in descriptions:
            _print_text(description, out)
    problems = [f"topic '{name}' does not exist" for name in unknown]
    problems += [f"cannot describe topic '{t['name']}': {describe_error_code(t['error_code'])}"
                 for t in failed]
    if problems:
        raise ToolError("; ".join(problems))


def _describe_one(admin, topic: dict, all_configs: bool) -> dict:
    name = topic["name"]
    partitions = sorted(topic["partitions"], key=lambda p: p["partition_index"])
    tps = [TopicPartition(name, p["partition_index"]) for p in partitions]
    earliest = admin.list_partition_offsets({tp: OffsetSpec.EARLIEST for tp in tps}) if tps else {}
    latest = admin.list_partition_offsets({tp: OffsetSpec.LATEST for tp in tps}) if tps else {}
    configs = admin.describe_configs(
        [ConfigResource(ConfigResourceType.TOPIC, name)],
        config_filter="all" if all_configs else "modified",
    ).get("topic", {}).get(name, {})
    return {
        "topic": name,
        "topic_id": str(topic["topic_id"]) if topic.get("topic_id") else None,
        "internal": is_internal(topic),
        "replication_factor": max((len(p["replica_nodes"]) for p in partitions), default=0),
        "configs": {key: entry.get("value") for key, entry in sorted(configs.items())},
        "partitions": [
            {
                "partition": p["partition_index"],
                "leader": p["leader_id"],
                "replicas": p["replica_nodes"],
                "isr": p["isr_nodes"],
                "earliest_offset": earliest[tp].offset,
                "latest_offset": latest[tp].offset,
            }
            for p, tp in zip(partitions, tps)
        ],
    }


def _print_text(d: dict, out: TextIO) -> None:
    configs = ",".join(f"{k}={v}" for k, v in d["configs"].items())
    print(f"Topic: {d['topic']}\tTopicId: {d['topic_id']}\tPartitionCount: {len(d['partitions'])}"
          f"\tReplicationFactor: {d['replication_factor']}\tConfigs: {configs}", file=out)
    for p in d["partitions"]:
        print(f"\tPartition: {p['partition']}\tLeader: {p['leader']}"
              f"\tReplicas: {','.join(map(str, p['replicas']))}\tIsr: {','.join(map(str, p['isr']))}"
              f"\tEarliestOffset: {p['earliest_offset']}\tLatestOffset: {p['latest_offset']}", file=out)
