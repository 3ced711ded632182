"""``pylog leader-election``: preferred or unclean leader elections (``kafka-leader-election.sh``).

Examples::

    $ pylog leader-election --election-type PREFERRED --all-topic-partitions
    Successfully completed leader election (PREFERRED) for partitions orders-0, orders-3
    Valid replica already elected for partitions orders-1, orders-2
    $ pylog leader-election --election-type UNCLEAN --topic orders --partition 4
    $ pylog leader-election --election-type PREFERRED --path-to-json-file partitions.json
      (Kafka's format: {"partitions": [{"topic": "orders", "partition": 1}, ...]})

The election is ElectLeaders (API 43) sent to the controller (kafka-python's
``elect_leaders``).  PREFERRED moves leadership back to each partition's
first assigned replica when it is live and in sync; UNCLEAN gives a
partition without a live leader the first live replica, even out of sync
(acknowledged records it lacks are lost).  Partitions that could not be
elected are printed with the broker's reason and the command exits 1, as
Kafka's does.  Needs ALTER on the cluster.
"""
from __future__ import annotations

import argparse
import json
from contextlib import closing
from pathlib import Path
from typing import TextIO

from kafka.errors import ElectionNotNeededError, KafkaError, for_code

from broker_sim.tools.clients import Connection
from broker_sim.tools.errors import ToolError

ELECTION_TYPES = {"PREFERRED": 0, "UNCLEAN": 1}
JSON_FILE_MAX_BYTES = 16 * 1024 * 1024


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--election-type", required=True, type=str.upper, choices=sorted(ELECTION_TYPES),
                        help="PREFERRED: the first assigned replica, when in sync; UNCLEAN: any live replica of a "
                             "partition without a live leader")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic", help="the topic of the partition to elect (with --partition)")
    which.add_argument("--all-topic-partitions", action="store_true", help="every partition of every topic")
    which.add_argument("--path-to-json-file", metavar="FILE",
                       help='partitions as {"partitions": [{"topic": "t", "partition": 0}, ...]}')
    parser.add_argument("--partition", type=int, metavar="P", help="the partition of --topic")
    parser.add_argument("--timeout-ms", type=int, default=60000, metavar="MS",
                        help="how long the controller may take (default: 60000)")


def partitions_from(args: argparse.Namespace) -> dict[str, list[int]] | None:
    """``{topic: [partitions]}`` named by the arguments; None: all (raises ToolError naming a bad argument)."""
    if args.all_topic_partitions:
        if args.partition is not None:
            raise ToolError("--partition goes with --topic, not --all-topic-partitions")
        return None
    if args.topic is not None:
        if args.partition is None:
            raise ToolError("--topic needs --partition (or use --all-topic-partitions)")
        if args.partition < 0:
            raise ToolError(f"--partition must be >= 0, got {args.partition}")
        return {args.topic: [args.partition]}
    if args.partition is not None:
        raise ToolError("--partition goes with --topic")
    path = Path(args.path_to_json_file)
    try:
        if path.stat().st_size > JSON_FILE_MAX_BYTES:
            raise ToolError(f"{path}: larger than {JSON_FILE_MAX_BYTES} bytes")
        document = json.loads(path.read_text())
    except OSError as exc:
        raise ToolError(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ToolError(f"{path} is not JSON: {exc}") from None
    entries = document.get("partitions") if isinstance(document, dict) else None
    if not isinstance(entries, list) or not entries:
        raise ToolError(f'{path}: expected {{"partitions": [{{"topic": "t", "partition": 0}}, ...]}}')
    wanted: dict[str, list[int]] = {}
    for entry in entries:
        topic = entry.get("topic") if isinstance(entry, dict) else None
        partition = entry.get("partition") if isinstance(entry, dict) else None
        if not isinstance(topic, str) or not topic or not isinstance(partition, int) or partition < 0:
            raise ToolError(f"{path}: each partition needs a topic name and a partition >= 0, got {entry!r}")
        if partition in wanted.setdefault(topic, []):
            raise ToolError(f"{path}: partition {topic}-{partition} is listed twice")
        wanted[topic].append(partition)
    return wanted


def elect_leaders(conn: Connection, args: argparse.Namespace, out: TextIO) -> dict[str, list[str]]:
    """Run the election and print Kafka's three lines; returns {"elected", "not_needed", "failed"}; raises
    ToolError (exit 1) when some partitions could not be elected."""
    wanted = partitions_from(args)
    kind = args.election_type
    with closing(conn.admin()) as admin:
        try:
            response = admin.elect_leaders(ELECTION_TYPES[kind], topic_partitions=wanted, timeout_ms=args.timeout_ms,
                                           raise_errors=False)
        except KafkaError as exc:
            raise ToolError(f"leader election failed: {type(exc).__name__}: {exc}") from None
    if getattr(response, "error_code", 0):
        error = for_code(response.error_code)
        raise ToolError(f"leader election refused: {error.__name__} (error code {response.error_code})")
    elected, not_needed, failed = [], [], []
    for result in response.replica_election_results:
        for partition in result.partition_result:
            name = f"{result.topic}-{partition.partition_id}"
            if partition.error_code == 0:
                elected.append(name)
            elif partition.error_code == ElectionNotNeededError.errno:
                not_needed.append(name)
            else:
                error = for_code(partition.error_code)
                failed.append(f"{name}: {error.__name__}: {partition.error_message or error.description}")
    if elected:
        print(f"Successfully completed leader election ({kind}) for partitions {', '.join(elected)}", file=out)
    if not_needed:
        print(f"Valid replica already elected for partitions {', '.join(not_needed)}", file=out)
    for line in failed:
        print(f"Error completing leader election ({kind}) for partition: {line}", file=out)
    if failed:
        raise ToolError(f"{len(failed)} replica(s) could not be elected")
    return {"elected": elected, "not_needed": not_needed, "failed": failed}
