"""Replication throttles (KIP-73): a reassignment's or a log-dir move's copying must not starve clients.

Theory of operation (Kafka's ``ReplicationQuotaManager``): two replication quotas per broker, the dynamic
broker configs ``leader.replication.throttled.rate`` (bytes/s this broker, as leader, sends to followers) and
``follower.replication.throttled.rate`` (bytes/s this broker, as follower, fetches), each applying only to
the replicas its topic lists in ``leader.replication.throttled.replicas`` /
``follower.replication.throttled.replicas`` ("partition:broker,..." naming the broker that throttles, or
"*" for every replica).  As in Kafka, a replica in the ISR is never held back (its bytes still count):

* a follower leaves a throttled, out-of-sync partition out of its Fetch while its quota is exceeded
  (``replication/fetcher.py``), and counts the bytes it appends for throttled partitions;
* a leader answers a follower's fetch of a throttled partition, for a follower outside the ISR, with no
  records while its quota is exceeded (``server/handlers/fetch.py``), and counts what it sends.

A third quota, ``replica.alter.log.dirs.io.max.bytes.per.second`` (Kafka's ``ReplicaAlterLogDirsThread``
quota), bounds the bytes per second this broker copies moving replicas between its log dirs
(AlterReplicaLogDirs, ``storage/log_dirs.py``), every move counted, none exempt: ``pace_copy`` is what a copy
pass calls after each chunk, on its worker thread, and sleeps for what it answers.

The rate is enforced as a token bucket refilled at the configured rate, holding at most one
``replication.quota.window.size.seconds`` of credit, and allowed into debt by one answer: a throttled
copy then moves the configured bytes per second on average (measured by ``tests/cluster`` and
``bench``), with a burst of at most one window after an idle spell.  Rates are read at every use, so a
dynamic config change applies at once.  Event loop only, but for ``pace_copy``, which takes its own lock
(copy passes of several moves run on worker threads at once).
"""
from __future__ import annotations

import threading
import time
from typing import Callable, Mapping

from broker_sim.config import LONG_MAX, parse_throttled_replicas

LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"


class ByteRateQuota:
    """A byte rate read from a broker config (``rate_of()``), as a token bucket of one window of credit."""

    def __init__(self, rate_of: Callable[[], int], window_s_of: Callable[[], float],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._rate_of = rate_of
        self._window_s_of = window_s_of
        self._clock = clock
        self._tokens = 0.0
        self._last = clock()
        self.recorded_bytes = 0  # every byte counted, for /metrics and tests

    def _refill(self) -> float:
        """The rate now (LONG_MAX: unlimited), with the credit brought up to date."""
        rate = self._rate_of()
        now = self._clock()
        if rate >= LONG_MAX:
            self._tokens, self._last = 0.0, now
            return rate
        self._tokens = min(self._tokens + (now - self._last) * rate, rate * self._window_s_of())
        self._last = now
        return rate

    def exceeded(self) -> bool:
        return self._refill() < LONG_MAX and self._tokens <= 0

    def record(self, size: int) -> None:
        self.recorded_bytes += size
        if self._refill() < LONG_MAX:
            self._tokens -= size

    def wait_s(self) -> float:
        """Seconds until the quota has credit again (0 when it has)."""
        rate = self._refill()
        if rate >= LONG_MAX or self._tokens > 0:
            return 0.0
        return -self._tokens / rate if rate > 0 else self._window_s_of()


def _parsed(value: str) -> frozenset[tuple[int, int]] | str:
    try:
        return parse_throttled_replicas(value)
    except ValueError:  # validated when set; a bad stored value throttles nothing
        return frozenset()


class ReplicationThrottles:
    """This broker's leader and follower quotas and the throttled replicas of every topic it hosts."""

    def __init__(self, config, broker_id: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.broker_id = broker_id
        window = lambda: float(config.get("replication.quota.window.size.seconds"))  # noqa: E731
        self.leader = ByteRateQuota(lambda: config.get("leader.replication.throttled.rate"), window, clock)
        self.follower = ByteRateQuota(lambda: config.get("follower.replication.throttled.rate"), window, clock)
        self.alter_log_dirs = ByteRateQuota(lambda: config.get("replica.alter.log.dirs.io.max.bytes.per.second"),
                                            window, clock)
        self._copy_lock = threading.Lock()
        # topic -> (leader replicas, follower replicas): "*" or {(partition, broker)}; only topics that set one
        self._topics: dict[str, tuple] = {}

    def pace_copy(self, size: int) -> float:
        """Count ``size`` bytes a log-dir move copied; the seconds its copy should wait before the next chunk.
        Thread-safe."""
        with self._copy_lock:
            self.alter_log_dirs.record(size)
            return self.alter_log_dirs.wait_s()

    def set_topic(self, topic: str, configs: Mapping[str, str]) -> None:
        lists = (_parsed(configs.get(LEADER_REPLICAS, "")), _parsed(configs.get(FOLLOWER_REPLICAS, "")))
        if any(lists):
            self._topics[topic] = lists
        else:
            self._topics.pop(topic, None)

    def _throttled(self, topic: str, index: int, side: int) -> bool:
        lists = self._topics.get(topic)
        if lists is None:
            return False
        replicas = lists[side]
        return replicas == "*" or (index, self.broker_id) in replicas

    def leader_throttled(self, topic: str, index: int) -> bool:
        return self._throttled(topic, index, 0)

    def follower_throttled(self, topic: str, index: int) -> bool:
        return self._throttled(topic, index, 1)
