"""Reading a topic back for the sink tests: every record, as a read_committed (or read_uncommitted) consumer sees it."""
from __future__ import annotations

from broker_sim.testing.data import read


def read_topic(bootstrap: str, topic: str, *, isolation: str = "read_committed", timeout_s: float = 30,
               client_kwargs: dict | None = None):
    """[(partition, key, value, headers)] of every record up to the end (the LSO under read_committed), by
    partition and offset (``testing.data.read``); ``client_kwargs``: kafka-python security settings of a
    secured broker."""
    return [(r["partition"], r["key"], r["value"], r["headers"])
            for r in read(bootstrap, topic, isolation=isolation, timeout_s=timeout_s, client_kwargs=client_kwargs)]


def values_of(records) -> list:
    return sorted(r[2] for r in records)
