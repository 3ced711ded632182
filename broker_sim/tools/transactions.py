"""``pylog transactions``: list and describe transactional producers' transactions.

Examples::

    $ pylog transactions list
    TRANSACTIONAL-ID  PRODUCER-ID  STATE           COORDINATOR
    sink-0            1000         Ongoing         0
    sink-1            1001         CompleteCommit  0
    $ pylog transactions list --state Ongoing --format json
    $ pylog transactions describe sink-0
    TRANSACTIONAL-ID  COORDINATOR  STATE    PRODUCER-ID  EPOCH  TIMEOUT-MS  START-TIME                DURATION-MS ...
    sink-0            0            Ongoing  1000         3      60000       2026-01-31T12:00:00.000Z  1520        ...
    (the last column, PARTITIONS, lists the transaction's partitions: out-0,out-1)

``list`` is ``kafka-transactions.sh list``: ListTransactions sent to every
broker (each coordinates a slice of ``__transaction_state``).  ``describe``
is ``kafka-transactions.sh describe``: DescribeTransactions at the id's
coordinator (FindCoordinator with key type 1); the partitions are those of
the open transaction, or, while it is committing or aborting, those still
waiting for a marker.  An unknown id is reported in the ToolError after the
known ones are printed.

Every function takes a :class:`~broker_sim.tools.clients.Connection` and writes
its output to *out*; failures raise :class:`ToolError`.
"""

import json
import time
from contextlib import closing
from datetime import datetime, timezone
from typing import TextIO

from kafka.errors import KafkaError, TransactionalIdNotFoundError

from broker_sim.tools.clients import Connection
from broker_sim.tools.errors import ToolError
from broker_sim.tools.groups import _print_table


def list_transactions(conn: Connection, *, states: list[str] | None = None, output_format: str, out: TextIO
                      ) -> list[dict]:
    """Print (and return) every transactional id's producer id and state, sorted by id."""
    with closing(conn.admin()) as admin:
        by_broker = admin.list_transactions(state_filters=states or None)
    rows = sorted(({"transactional_id": t.transactional_id, "producer_id": t.producer_id,
                    "state": _state_name(t.state), "coordinator": broker_id}
                   for broker_id, listings in by_broker.items() for t in listings),
                  key=lambda row: row["transactional_id"])
    if output_format == "json":
        print(json.dumps(rows, indent=2), file=out)
    else:
        _print_table(["TRANSACTIONAL-ID", "PRODUCER-ID", "STATE", "COORDINATOR"],
                     [[r["transactional_id"], r["producer_id"], r["state"], r["coordinator"]] for r in rows], out)
    return rows


def describe_transactions(conn: Connection, transactional_ids: list[str], *, output_format: str,
                          out: TextIO) -> list[dict]:
    """Print (and return) the state of each id; unknown ids raise ToolError after the others are printed."""
    rows, problems = [], []
    now_ms = int(time.time() * 1000)
    with closing(conn.admin()) as admin:
        for txn_id in dict.fromkeys(transactional_ids):
            try:
                described = admin.describe_transactions([txn_id])[txn_id]
            except TransactionalIdNotFoundError:
                problems.append(f"transactional id '{txn_id}' does not exist")
                continue
            except KafkaError as exc:
                problems.append(f"cannot describe transactional id '{txn_id}': {type(exc).__name__}")
                continue
            start = described.transaction_start_time_ms
            rows.append({
                "transactional_id": txn_id, "coordinator": described.coordinator_id,
                "state": _state_name(described.state), "producer_id": described.producer_id,
                "producer_epoch": described.producer_epoch,
                "transaction_timeout_ms": described.transaction_timeout_ms,
                "transaction_start_time_ms": start if start >= 0 else None,
                "duration_ms": now_ms - start if start >= 0 else None,
                "partitions": [{"topic": tp.topic, "partition": tp.partition}
                               for tp in sorted(described.topic_partitions)],
            })
    if output_format == "json":
        print(json.dumps(rows, indent=2), file=out)
    elif rows:
        _print_table(["TRANSACTIONAL-ID", "COORDINATOR", "STATE", "PRODUCER-ID", "EPOCH", "TIMEOUT-MS", "START-TIME",
                      "DURATION-MS", "PARTITIONS"],
                     [[r["transactional_id"], r["coordinator"], r["state"], r["producer_id"], r["producer_epoch"],
                       r["transaction_timeout_ms"], _iso(r["transaction_start_time_ms"]), r["duration_ms"],
                       ",".join(f"{p['topic']}-{p['partition']}" for p in r["partitions"]) or None]
                      for r in rows], out)
    if problems:
        raise ToolError("; ".join(problems))
    return rows


def _state_name(state) -> str:
    return getattr(state, "value", state)


def _iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
