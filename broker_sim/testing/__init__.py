"""The test harness pylog ships: the pytest plugin and fixtures, the pipeline test kit, containers, the Jepsen
workload and checker, the hostile-client soak, missing-dependency skips.

The kit's functions are importable from here (``from broker_sim.testing import seed, assert_exactly_once``),
each from the module that owns it, imported on first use so that the plugin costs every pytest run nothing:

* ``data``: ``create_topics``, ``seed``, ``read``, ``end_offsets``
* ``queries``: ``run_until_consumed``, ``consumed_offsets``
* ``assertions``: ``assert_exactly_once``, ``assert_lag``, ``group_lag``
* ``faults``: ``inject``, ``delay``, ``disconnect``, ``down``, ``restart``, ``clear``
* ``timing``: ``BrokerClock``, ``FAST_TIMERS``
* ``waiting``: ``wait_until``
* ``spark``: ``spark_session``

May import any other part of ``broker_sim``; nothing outside ``testing`` (and the test suite) may import it.
"""
from __future__ import annotations

import importlib

_OWNERS = {
    "create_topics": "data", "seed": "data", "read": "data", "end_offsets": "data",
    "run_until_consumed": "queries", "consumed_offsets": "queries",
    "assert_exactly_once": "assertions", "assert_lag": "assertions", "group_lag": "assertions",
    "inject": "faults", "delay": "faults", "disconnect": "faults", "down": "faults", "restart": "faults",
    "clear": "faults",
    "BrokerClock": "timing", "FAST_TIMERS": "timing",
    "wait_until": "waiting",
    "spark_session": "spark",
}
__all__ = sorted(_OWNERS)


def __getattr__(name: str):
    owner = _OWNERS.get(name)
    if owner is None:
        raise AttributeError(f"module 'broker_sim.testing' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"broker_sim.testing.{owner}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_OWNERS))
