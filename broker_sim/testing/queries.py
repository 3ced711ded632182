"""Running a streaming query over pylog sources until it has consumed what was seeded, then stopping it exactly.

``run_until_consumed(query, options=source_options)`` waits until the ``endOffset`` in the query's progress (the
end of the last batch Spark completed, its sink included) reaches, on every partition, the end offsets the
source topics had when it was called (or the ``offsets`` given, e.g. ``seed(...).end_offsets``), then stops the
query with ``connector.stop_query`` (which commits that progress to the source's consumer group) and returns
the last progress::

    options = {"kafka.bootstrap.servers": broker.bootstrap_servers, "subscribe": "in", "startingOffsets": "earliest"}
    query = spark.readStream.format("pylog").options(**options).load().writeStream...start()
    run_until_consumed(query, options=options)

A query that dies raises at once with its exception; a query still short after ``timeout_s`` raises
``TimeoutError`` naming each partition behind, by how many, and the query's status. An ``availableNow``
query is awaited to its end and then checked the same way. No broker call is made while waiting: progress is
what the query reports.
"""
from __future__ import annotations

import json
import time
from typing import Iterable, Mapping

__all__ = ["consumed_offsets", "run_until_consumed"]


def _option_list(options) -> list[Mapping[str, str]]:
    if options is None:
        return []
    return [options] if isinstance(options, Mapping) else list(options)


def consumed_offsets(query) -> dict[tuple[str, int], int]:
    """``{(topic, partition): offset}`` the query's pylog sources have completed, from its recent progress
    (the latest ``endOffset`` each partition appears in)."""
    from connector.source.offsets import from_json_dict
    from connector.source.progress import source_progress

    reached: dict[tuple[str, int], int] = {}
    for entry in list(query.recentProgress or ()):
        entry = entry if isinstance(entry, Mapping) else json.loads(entry.json)
        for source in source_progress(entry):
            reached.update(from_json_dict(source["endOffset"]))
    return reached


def _targets(offsets, bootstrap, topics, options, isolation) -> dict[tuple[str, int], int]:
    from broker_sim.testing.data import Seeded, end_offsets

    if offsets is not None:
        pieces = [offsets] if isinstance(offsets, (Seeded, Mapping)) else list(offsets)
        target: dict[tuple[str, int], int] = {}
        for piece in pieces:
            for tp, end in (piece.end_offsets if isinstance(piece, Seeded) else piece).items():
                target[tp] = max(end, target.get(tp, 0))
        return target
    chosen = _option_list(options)
    if topics is None:
        topics = sorted({t.strip() for o in chosen for t in str(o.get("subscribe", "")).split(",") if t.strip()})
    elif isinstance(topics, str):
        topics = [topics]
    bootstrap = bootstrap or next((o.get("kafka.bootstrap.servers") for o in chosen
                                   if o.get("kafka.bootstrap.servers")), None)
    if not topics or not bootstrap:
        raise ValueError("run_until_consumed: give offsets= (e.g. seed(...).end_offsets), or topics= and "
                         "bootstrap=, or options= with 'subscribe' and 'kafka.bootstrap.servers' "
                         "(subscribePattern/assign sources need topics=)")
    return end_offsets(bootstrap, topics, isolation=isolation)


def _short(target, reached) -> dict[tuple[str, int], tuple[int, int]]:
    return {tp: (reached.get(tp, 0), end) for tp, end in sorted(target.items()) if reached.get(tp, 0) < end}


def _describe_short(short) -> str:
    return ", ".join(f"{t}-{p} at {at} of {end} ({end - at} short)" for (t, p), (at, end) in short.items())


def run_until_consumed(query, *, options: Mapping[str, str] | Iterable[Mapping[str, str]] | None = None,
                       offsets=None, topics: str | Iterable[str] | None = None, bootstrap=None,
                       isolation: str = "read_committed", stop: bool = True, timeout_s: float = 60,
                       poll_s: float = 0.1) -> dict | None:
    """Wait until ``query`` (a started StreamingQuery reading ``format("pylog")``) has completed batches up to
    the target offsets on every partition, stop it, and return its last progress (a dict).

    Targets: ``offsets`` (``{(topic, partition): end}``, a ``Seeded``, or a list of them), else the end offsets
    (LSO under ``isolation="read_committed"``) of ``topics`` on ``bootstrap`` (a string or broker object), both
    taken from ``options`` (the source options: ``subscribe``, ``kafka.bootstrap.servers``) when not given.
    ``stop``: stop through ``connector.stop_query(query, *options)`` — committing the query's progress to its
    consumer group — or ``query.stop()`` without options; ``stop=False`` leaves it running. Raises the query's
    exception (as ``RuntimeError`` from it) as soon as it dies, and ``TimeoutError`` after ``timeout_s`` naming
    each partition short of its target, by how many, with the query's status.
    """
    target = _targets(offsets, bootstrap, topics, options, isolation)
    deadline = time.monotonic() + timeout_s
    while True:
        error = query.exception()
        if error is not None:
            raise RuntimeError(f"run_until_consumed: query {query.name or query.id} failed: {error}") from error
        reached = consumed_offsets(query)
        short = _short(target, reached)
        if not short:
            break
        if not query.isActive:
            raise AssertionError(f"run_until_consumed: query {query.name or query.id} ended short of its target: "
                                 f"{_describe_short(short)}")
        if time.monotonic() > deadline:
            status = query.status
            if stop:
                query.stop()
            raise TimeoutError(f"run_until_consumed: after {timeout_s}s query {query.name or query.id} is short on "
                               f"{len(short)} of {len(target)} partitions: {_describe_short(short)}; "
                               f"status {status.get('message')!r}"
                               + ("" if status.get("isDataAvailable") is None
                                  else f", data available {status['isDataAvailable']}"))
        try:
            query.awaitTermination(poll_s)
        except Exception:  # noqa: BLE001 - the query died: query.exception() names why, on the next turn
            pass
    if stop:
        if options is not None:
            import connector
            connector.stop_query(query, *_option_list(options))
        else:
            query.stop()
    return query.lastProgress
