"""``pylog log-dirs describe``: every broker's log directories and the partitions in them (kafka-log-dirs.sh).

Example::

    $ pylog log-dirs describe --topic-list orders --broker-list 0
    Querying brokers for log directories information
    Received log directory information from brokers 0
    {"version": 1, "brokers": [{"broker": 0, "logDirs": [{"logDir": "/disk1/pylog", "error": null,
      "partitions": [{"partition": "orders-0", "size": 1024, "offsetLag": 0, "isFuture": false}]}]}]}

The two header lines and the one-line JSON are what ``kafka-log-dirs.sh --describe`` prints, so scripts that
parse its last line parse this one.  DescribeLogDirs (API 35) goes to each broker of ``--broker-list`` (default:
every broker of the cluster, from DescribeCluster); a broker that is not in the cluster fails the command
before anything is asked, with Kafka's message.  ``--topic-list`` filters the partitions shown (default: all).
"""
from __future__ import annotations

import json
from contextlib import closing
from typing import TextIO

import kafka.errors as Errors
from kafka.errors import KafkaError

from broker_sim.tools.clients import Connection
from broker_sim.tools.errors import ToolError


def parse_list(value: str, what: str, kind=str) -> list:
    """``a,b,c`` (empty items dropped, as Kafka's splitAtCommasAndFilterOutEmpty); ToolError naming ``what``."""
    items = [item.strip() for item in value.split(",") if item.strip()]
    try:
        return [kind(item) for item in items]
    except ValueError:
        raise ToolError(f"{what} must be a comma-separated list of broker ids, got {value!r}") from None


def describe(conn: Connection, *, topics: list[str], brokers: list[int], out: TextIO) -> dict:
    """Print (and return) kafka-log-dirs.sh's JSON for ``brokers`` (all when empty), filtered to ``topics``."""
    with closing(conn.admin()) as admin:
        cluster = sorted(broker["broker_id"] for broker in admin.describe_cluster()["brokers"])
        missing = sorted(set(brokers) - set(cluster))
        if missing:
            raise ToolError("ERROR: The given brokers do not exist from --broker-list: "
                            f"{','.join(map(str, missing))}. Current existent brokers: {','.join(map(str, cluster))}")
        queried = sorted(set(brokers)) or cluster
        print("Querying brokers for log directories information", file=out)
        try:
            answers = admin.describe_log_dirs(brokers=queried)
        except KafkaError as exc:
            raise ToolError(f"DescribeLogDirs failed: {exc}") from exc
    print(f"Received log directory information from brokers {','.join(map(str, queried))}", file=out)
    described = {"version": 1, "brokers": [_broker(answer, set(topics)) for answer in answers]}
    print(json.dumps(described, separators=(",", ":")), file=out)
    return described


def _broker(answer: dict, topics: set[str]) -> dict:
    log_dirs = []
    for result in answer["log_dirs"]:
        error = Errors.for_code(result["error_code"])
        log_dirs.append({
            "logDir": result["log_dir"],
            "error": None if error is Errors.NoError else error.__name__,
            "partitions": [{"partition": f"{topic['name']}-{partition['partition_index']}",
                            "size": partition["partition_size"], "offsetLag": partition["offset_lag"],
                            "isFuture": partition["is_future_key"]}
                           for topic in result["topics"] if not topics or topic["name"] in topics
                           for partition in topic["partitions"]],
        })
    return {"broker": answer["broker"], "logDirs": log_dirs}
