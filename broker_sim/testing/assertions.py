"""Assertions on what a pipeline wrote: exactly-once output compared by key, and a consumer group's lag.

``assert_exactly_once(expected, "out", bootstrap=broker, key="id")`` reads ``out`` read_committed
(``broker_sim.testing.data.read``) and compares it with ``expected`` key by key; a failure names the keys lost,
duplicated (with their counts), unexpected, and those whose value differs — the first ``show`` of each and the
totals::

    AssertionError: topic 'out': 3 of 1000 keys lost (k17, k512, k900), 2 duplicated (k3 x2, k8 x3),
    0 unexpected, 0 with other values (1001 records read)

Keys are compared as text where they are UTF-8 (``b"k1"`` and ``"k1"`` match) and numbers by their text
(``17`` matches ``b"17"``), so expected keys can be written either way.

``assert_lag(broker, "etl")`` fails naming each partition whose committed offset is more than ``max_lag``
behind the end (the LSO), and the partitions with no commit at all.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Iterable, Mapping

from broker_sim.testing.data import _is_dataframe, bootstrap_of, end_offsets, read

__all__ = ["assert_exactly_once", "assert_lag", "group_lag"]

_MISSING = object()


def _norm_key(key) -> Any:
    if isinstance(key, (bytes, bytearray, memoryview)):
        try:
            return bytes(key).decode()
        except UnicodeDecodeError:
            return bytes(key)
    if isinstance(key, (int, float)) and not isinstance(key, bool):
        return str(key)
    return key


def _expected_pairs(expected, key) -> list[tuple[Any, Any]]:
    """(key, value) of each expected row: ``(key, value)`` pairs as given; dict rows (or DataFrame rows) keyed
    by ``key`` (a field name or callable), the value the whole dict (or its ``value`` field when it has only
    ``key``/``value``... fields of a raw record)."""
    rows = [r.asDict(recursive=True) for r in expected.collect()] if _is_dataframe(expected) else list(expected)
    pairs = []
    for row in rows:
        if isinstance(row, tuple) and len(row) == 2:
            pairs.append(row)
        elif isinstance(row, Mapping):
            if callable(key):
                pairs.append((key(row), row))
            elif key is None or key == "key":
                if "key" not in row:
                    raise ValueError(f"expected: row {row!r} has no 'key'; pass key= (a field name or callable)")
                pairs.append((row["key"], row["value"] if set(row) <= _RAW_FIELDS and "value" in row else row))
            else:
                if key not in row:
                    raise ValueError(f"key: field {key!r} is not in expected row {row!r}")
                pairs.append((row[key], row))
        else:
            raise TypeError(f"expected: {row!r} is neither a (key, value) pair nor a dict row")
    return pairs


_RAW_FIELDS = {"key", "value", "partition", "offset", "timestamp", "headers", "topic"}


def _actual_pairs(records: list[dict], key, keyed_by_value: bool) -> list[tuple[Any, Any]]:
    if callable(key):
        return [(key(r["value"]), r["value"]) for r in records]
    if keyed_by_value:
        return [((r["value"] or {}).get(key, _MISSING) if isinstance(r["value"], Mapping) else _MISSING, r["value"])
                for r in records]
    return [(r["key"], r["value"]) for r in records]


def _first(items: Iterable, show: int) -> str:
    items = list(items)
    text = ", ".join(str(i) for i in items[:show])
    return text + (", ..." if len(items) > show else "")


def assert_exactly_once(expected, topic: str, *, bootstrap, key="key", format: str = "bytes",
                        registry_url: str | None = None, compare_values: bool = True, show: int = 10,
                        timeout_s: float = 30, client_kwargs: Mapping | None = None) -> list[dict]:
    """Assert that ``topic``, read read_committed, holds each expected key exactly once (with its value).

    ``expected``: ``(key, value)`` pairs, dicts, or a DataFrame (its rows as dicts). ``key``: ``"key"`` (the
    record key; expected dicts give theirs in a ``key`` field) or a field name of the decoded value (the
    pipeline keeps the key in the value), or a ``callable(value)``. Values are compared unless
    ``compare_values=False`` (for raw formats, bytes and str compare as text). ``bootstrap``: a bootstrap
    string or broker object; ``format``/``registry_url`` as in ``data.read``. Returns the records read.
    Raises ``AssertionError`` naming lost, duplicated (with counts), unexpected and differing keys: the first
    ``show`` of each and the totals.
    """
    records = read(bootstrap, topic, format=format, registry_url=registry_url, isolation="read_committed",
                   timeout_s=timeout_s, client_kwargs=client_kwargs)
    keyed_by_value = isinstance(key, str) and key != "key"
    want = {}
    for k, v in _expected_pairs(expected, key):
        want.setdefault(_norm_key(k), v)
    got = _actual_pairs(records, key, keyed_by_value)
    counts = Counter(_norm_key(k) for k, _ in got)
    values = {}
    for k, v in got:
        values.setdefault(_norm_key(k), v)
    lost = [k for k in want if k not in counts]
    duplicated = [(k, n) for k, n in counts.items() if n > 1 and k in want]
    unexpected = [k for k in counts if k not in want]
    differing = [k for k in want if k in values and compare_values and _norm_value(values[k]) != _norm_value(want[k])]
    if lost or duplicated or unexpected or differing:
        parts = [f"{len(lost)} of {len(want)} keys lost" + (f" ({_first(_show(lost), show)})" if lost else ""),
                 f"{len(duplicated)} duplicated"
                 + (f" ({_first((f'{_show_one(k)} x{n}' for k, n in duplicated), show)})" if duplicated else ""),
                 f"{len(unexpected)} unexpected"
                 + (f" ({_first((f'{_show_one(k)} x{counts[k]}' for k in unexpected), show)})" if unexpected else ""),
                 f"{len(differing)} with other values"
                 + (f" ({_first((f'{_show_one(k)}: {values[k]!r} != expected {want[k]!r}' for k in differing), show)})"
                    if differing else "")]
        raise AssertionError(f"topic {topic!r}: " + ", ".join(parts) + f" ({len(records)} records read)")
    return records


def _show_one(key) -> str:
    return "<no key field>" if key is _MISSING else str(key)


def _show(keys) -> list[str]:
    return [_show_one(k) for k in keys]


def _norm_value(value):
    if isinstance(value, (bytes, bytearray, memoryview)):
        try:
            return bytes(value).decode()
        except UnicodeDecodeError:
            return bytes(value)
    return value


def group_lag(bootstrap, group: str, *, topics: Iterable[str] | None = None,
              client_kwargs: Mapping | None = None) -> dict[tuple[str, int], int | None]:
    """``{(topic, partition): lag}`` of ``group``: end offset (LSO) minus committed offset, None where the group
    has no commit. ``topics``: the topics to cover (default: those the group has commits for)."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap_of(bootstrap), **dict(client_kwargs or {}))
    try:
        committed = {(tp.topic, tp.partition): meta.offset
                     for tp, meta in admin.list_group_offsets({group: None}).get(group, {}).items()
                     if meta is not None and meta.offset >= 0}
    finally:
        admin.close()
    names = sorted(set(topics) if topics is not None else {t for t, _ in committed})
    ends = end_offsets(bootstrap, names, client_kwargs=client_kwargs) if names else {}
    return {tp: (end - committed[tp] if tp in committed else None) for tp, end in sorted(ends.items())}


def assert_lag(bootstrap, group: str, *, topics: Iterable[str] | None = None, max_lag: int = 0,
               client_kwargs: Mapping | None = None) -> dict[tuple[str, int], int | None]:
    """Assert ``group`` is at most ``max_lag`` records behind the end (LSO) of every partition of ``topics``
    (default: the partitions it has commits for); returns the lags. The error names each partition over the
    bound with its lag, and the partitions with no commit."""
    if topics is not None and isinstance(topics, str):
        topics = [topics]
    lags = group_lag(bootstrap, group, topics=topics, client_kwargs=client_kwargs)
    if not lags:
        raise AssertionError(f"group {group!r}: no committed offsets" + (f" on {sorted(topics)}" if topics else ""))
    over = [f"{t}-{p} lag {lag}" for (t, p), lag in lags.items() if lag is not None and lag > max_lag]
    none = [f"{t}-{p}" for (t, p), lag in lags.items() if lag is None]
    if over or none:
        raise AssertionError(f"group {group!r}: {len(over)} of {len(lags)} partitions more than {max_lag} behind"
                             + (f" ({', '.join(over)})" if over else "")
                             + (f"; no commit on {', '.join(none)}" if none else ""))
    return lags

