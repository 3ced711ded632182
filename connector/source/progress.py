"""``connector.progress(query)``: how far a query's pylog sources are behind, as Spark's Kafka source reports it;
``connector.stop_query(query, options)``: stop a query and hand its progress over to its consumer group exactly.

Spark's Kafka source puts ``avgOffsetsBehindLatest``, ``maxOffsetsBehindLatest``
and ``minOffsetsBehindLatest`` into each source's ``metrics`` in
``query.lastProgress``. Spark 4.3 gives Python streaming sources no
``metrics()`` hook (``PythonMicroBatchStream`` does not implement
``ReportsSourceMetrics``), so pylog's entries show ``metrics {}``. Their
``endOffset`` (where the last batch ended) and ``latestOffset`` (what the
brokers had when it was planned, from ``reportLatestOffset``) are there,
and this module computes the same figures from them, with no broker call.

Usage::

    import connector
    for source in connector.progress(query):
        print(source["subscription"], source["consumerGroup"], source["metrics"]["maxOffsetsBehindLatest"])

The handoff: a stream reader commits to its consumer group only what Spark
tells it is complete, i.e. when it plans the next batch
(``connector.source.readers``); after ``query.stop()`` the group can be one
batch behind the checkpoint. ``stop_query`` stops the query, then commits
the ``endOffset`` of its last progress — the end of the last batch Spark
completed — to each pylog source's group, so that a query started with
``startingOffsets=group`` neither re-reads nor skips a batch::

    options = {"kafka.bootstrap.servers": "broker:9092", "subscribe": "events", "groupId": "etl"}
    query = spark.readStream.format("pylog").options(**options).load().writeStream...start()
    ...
    connector.stop_query(query, options)
"""
from __future__ import annotations

import json
import logging
import time
from typing import Mapping

from connector.source.offsets import (
    from_json_dict,
    group_metadata,
    group_of,
    is_group_key,
    offsets_behind,
    parse_group_metadata,
    to_json_dict,
)

log = logging.getLogger(__name__)


def progress(query) -> list[dict]:
    """One dict per pylog source of ``query.lastProgress`` (an empty list before the first progress).

    Each has ``subscription`` (the topics read), ``consumerGroup`` (the default
    per-query group, or None when ``groupId``/``kafka.group.id`` names it),
    ``endOffset`` and ``latestOffset`` (Spark's offset JSON, parsed), and
    ``metrics``: Spark's Kafka source metric names with its value types (the
    average a float, max and min integers); empty when no batch has been planned.
    """
    return source_progress(query.lastProgress) if query.lastProgress else []


def source_progress(query_progress: dict) -> list[dict]:
    """``progress`` for one entry of ``query.recentProgress`` (or ``lastProgress``)."""
    found = []
    for source in query_progress.get("sources", ()):
        if "PythonMicroBatchStream" not in str(source.get("description", "")):
            continue
        end, latest = _offset(source.get("endOffset")), _offset(source.get("latestOffset"))
        if end is None or not _is_kafka_offset(end):
            continue
        end_offsets = from_json_dict(end)
        latest_offsets = from_json_dict(latest) if latest and _is_kafka_offset(latest) else {}
        found.append({
            "subscription": sorted({topic for topic, _ in end_offsets}),
            "consumerGroup": group_of(end),
            "endOffset": end,
            "latestOffset": latest,
            "metrics": offsets_behind(end_offsets, latest_offsets),
        })
    return found


def stop_query(query, *options: Mapping[str, str]) -> list[dict]:
    """Stop ``query``, then commit its pylog sources' last completed ``endOffset`` to their consumer groups.

    ``options``: the source options the query was built with (one mapping per pylog source; the connection
    and ``groupId`` settings are what is used). Returns one dict per group committed: ``consumerGroup``,
    ``offsets`` (Spark's offset JSON) and ``unconfirmed`` — the ranges of a batch the query was running when
    it stopped, which Spark did not complete but whose sink may have committed them before Spark's commit
    log (they stay in the group's metadata, and a query from the group names them in a WARNING).
    A source that ``options`` do not cover raises ``ValueError`` after the query stopped; with
    ``commitOffsetsToGroup=false`` nothing is committed.
    """
    from connector.options import parse_source_options
    parsed = [parse_source_options(o) for o in options]
    query.stop()
    last = query.lastProgress
    handed = []
    for source in source_progress(last) if last else []:
        end = from_json_dict(source["endOffset"])
        chosen = next((o for o in parsed if all(o.matches(t) for t, _ in end)), None)
        if chosen is None:
            raise ValueError(f"connector.stop_query: no options given for the pylog source reading "
                             f"{source['subscription']}; pass the options that query was built with")
        if not chosen.commit_offsets_to_group:
            continue
        group = source["consumerGroup"] or chosen.group_id
        handed.append(_hand_over(chosen, group, end, {
            "state": "stopped", "query": str(query.id), "name": (query.name or "")[:100] or None,
            "batchId": last.get("batchId")}))   # a name bounded: offset.metadata.max.bytes is 4096
    return handed


def _hand_over(options, group: str, end: dict, stopped: dict) -> dict:
    """Commit ``end`` to ``group``; a batch the reader planned from ``end`` (stopped during it) stays listed."""
    from connector.source.offset_reader import OffsetReader
    reader = OffsetReader(options)
    try:
        commits = reader.group_commits(sorted(end), group)
        metadata, unconfirmed = {}, {}
        for tp, offset in end.items():
            committed, text = commits.get(tp, (None, ""))
            previous = parse_group_metadata(text) or {}
            running = previous.get("next") if committed == offset else None
            if not (isinstance(running, int) and running > offset):
                running = None
            run = {k: v for k, v in previous.items() if k not in ("pylog", "next")}
            run.update(stopped, at=int(time.time() * 1000))
            metadata[tp] = group_metadata(run, running)
            if running is not None:
                unconfirmed.setdefault(tp[0], {})[str(tp[1])] = [offset, running]
        reader.commit_group_offsets(group, end, metadata)
    finally:
        reader.close()
    log.info("pylog: consumer group '%s' committed at the stopped query's last completed batch, %s",
             group, to_json_dict(end))
    return {"consumerGroup": group, "offsets": to_json_dict(end), "unconfirmed": unconfirmed}


def _offset(value) -> dict | None:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value if isinstance(value, dict) else None


def _is_kafka_offset(offset: dict) -> bool:
    return all(is_group_key(key) or (isinstance(parts, dict) and all(isinstance(v, int) for v in parts.values()))
               for key, parts in offset.items())
