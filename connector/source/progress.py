"""``connector.progress(query)``: how far a query's pylog sources are behind, as Spark's Kafka source reports it.

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
"""
from __future__ import annotations

import json

from connector.source.offsets import GROUP_KEY, from_json_dict, offsets_behind


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
            "consumerGroup": end.get(GROUP_KEY),
            "endOffset": end,
            "latestOffset": latest,
            "metrics": offsets_behind(end_offsets, latest_offsets),
        })
    return found


def _offset(value) -> dict | None:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value if isinstance(value, dict) else None


def _is_kafka_offset(offset: dict) -> bool:
    return all(key == GROUP_KEY or (isinstance(parts, dict) and all(isinstance(v, int) for v in parts.values()))
               for key, parts in offset.items())
