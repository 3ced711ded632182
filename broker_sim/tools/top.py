"""``pylog top``: live consumer-group lag and rates in the terminal.

Example::

    $ pylog top --interval 2
    pylog top — 127.0.0.1:9092 — 2026-11-23 23:40:02 (every 2.0 s)
    GROUP    TOPIC   PARTITION  COMMITTED  LOG-END  LAG  IN/S    COMMIT/S
    reports  events  0          41200      41800    600  1480.5  1310.0
    reports  events  1          40950      41790    840  1475.0  1302.5
    reports  (total)                                1440

    $ pylog top --iterations 3 --format json     # one JSON document per refresh, then exit

Theory of operation: every ``--interval`` seconds it asks the broker what
``pylog groups describe`` asks — ListGroups, OffsetFetch for each group's
committed offsets, ListOffsets (latest) for the log end offsets — and prints
one row per (group, topic, partition) with lag = log end − committed.  Rates
are differences between two refreshes divided by the time between them:
IN/S is how fast the log end grows (records produced), COMMIT/S how fast the
group's committed offset moves (records consumed and committed); both are
blank on the first refresh.  On a terminal the screen is redrawn in place;
otherwise refreshes follow each other.  Only the Kafka protocol is used, so it
works against any Kafka broker.
"""
from __future__ import annotations

import json
import time
from datetime import datetime
from typing import Callable, TextIO

from broker_sim.tools.clients import Connection
from broker_sim.tools.groups import group_apis, log_end_offsets

CLEAR_SCREEN = "\x1b[H\x1b[2J"


def snapshot(admin, group_filter: list[str]) -> dict[tuple[str, str, int], tuple[int | None, int | None]]:
    """(group, topic, partition) -> (committed offset or None, log end offset or None)."""
    group_ids = sorted(g["group_id"] for g in admin.list_groups())
    if group_filter:
        group_ids = [g for g in group_ids if g in group_filter]
    committed = {}
    for group_id in group_ids:
        for tp, offset in admin.list_group_offsets(group_id)[group_id].items():
            committed[(group_id, tp)] = offset.offset if offset.offset >= 0 else None
    ends = log_end_offsets(admin, sorted({tp for _, tp in committed}))
    return {(group_id, tp.topic, tp.partition): (offset, ends.get(tp))
            for (group_id, tp), offset in sorted(committed.items())}


def rows_of(current: dict, previous: dict | None, elapsed_s: float) -> list[dict]:
    rows = []
    for key, (committed, end) in current.items():
        before = previous.get(key) if previous else None
        rate = (lambda now, then: round((now - then) / elapsed_s, 1)
                if before is not None and now is not None and then is not None and elapsed_s > 0 else None)
        rows.append({"group": key[0], "topic": key[1], "partition": key[2], "committed": committed,
                     "log_end": end, "lag": end - committed if end is not None and committed is not None else None,
                     "in_per_s": rate(end, before[1] if before else None),
                     "commit_per_s": rate(committed, before[0] if before else None)})
    return rows


def _text(rows: list[dict], header: str) -> str:
    table = [["GROUP", "TOPIC", "PARTITION", "COMMITTED", "LOG-END", "LAG", "IN/S", "COMMIT/S"]]
    totals: dict[str, int] = {}
    for row in rows:
        table.append([row["group"], row["topic"], row["partition"], row["committed"], row["log_end"], row["lag"],
                      row["in_per_s"], row["commit_per_s"]])
        totals[row["group"]] = totals.get(row["group"], 0) + (row["lag"] or 0)
    for group, lag in totals.items():
        table.append([group, "(total)", "", "", "", lag, "", ""])
    cells = [["-" if value is None else str(value) for value in line] for line in table]
    widths = [max(len(line[i]) for line in cells) for i in range(len(cells[0]))]
    lines = [header] + ["  ".join(value.ljust(width) for value, width in zip(line, widths)).rstrip()
                        for line in cells]
    if len(rows) == 0:
        lines.append("(no consumer group has committed offsets)")
    return "\n".join(lines) + "\n"


def run(conn: Connection, *, interval_s: float, iterations: int | None, groups: list[str], output_format: str,
        out: TextIO, sleep: Callable[[float], None] = time.sleep) -> None:
    """Refresh every ``interval_s`` until ``iterations`` refreshes were shown (None: until interrupted)."""
    previous, previous_at = None, None
    shown = 0
    with group_apis(conn) as admin:
        while iterations is None or shown < iterations:
            if shown:
                sleep(interval_s)
            current, now = snapshot(admin, groups), time.monotonic()
            rows = rows_of(current, previous, now - previous_at if previous_at is not None else 0.0)
            if output_format == "json":
                print(json.dumps({"time": datetime.now().astimezone().isoformat(timespec="seconds"),
                                  "rows": rows}), file=out, flush=True)
            else:
                header = (f"pylog top — {conn.bootstrap_servers} — {datetime.now():%Y-%m-%d %H:%M:%S} "
                          f"(every {interval_s} s)")
                redraw = CLEAR_SCREEN if hasattr(out, "isatty") and out.isatty() else ("\n" if shown else "")
                out.write(redraw + _text(rows, header))
                out.flush()
            previous, previous_at = current, now
            shown += 1
