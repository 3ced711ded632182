"""Kafka error codes as the connector's raw clients get them back: which to retry, and how to name them.

Theory of operation: ``connector.wire``'s requests return error codes as
values and leave retrying to the caller. Every caller, the source's executors
and the sink alike, asks one rule whether a code is worth retrying
(``retriable``): kafka-python's ``retriable`` flag on the code's error class,
which marks leadership and coordinator moves, timeouts, transient storage
errors, a topic not yet known (a new topic's metadata) and
CONCURRENT_TRANSACTIONS (a previous EndTxn still writing its markers). A
caller that must treat a retriable code otherwise says so where it does, with
the reason (the source reads UNKNOWN_TOPIC_OR_PARTITION in a Fetch as data
loss, ``connector.source.partition_reader``).
"""
from __future__ import annotations

import kafka.errors


def retriable(code: int) -> bool:
    """True when a retry (on fresh metadata, a new connection or coordinator) can clear Kafka error ``code``."""
    return kafka.errors.for_code(code).retriable


def error_name(code: int) -> str:
    """``NotLeaderForPartitionError (error code 6)``: kafka-python's name of ``code``, and the code."""
    return f"{kafka.errors.for_code(code).__name__} (error code {code})"
