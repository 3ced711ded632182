"""Connection counts per broker and per client IP (Kafka's ``ConnectionQuotas``), sans-IO.

Theory of operation: the listener asks ``admit(ip)`` for every accepted socket
and calls ``release(ip)`` exactly once for every admitted one when it closes, so
the counts stay exact under any churn.  A connection is refused when the
broker already holds ``max.connections`` or its IP already holds its limit:
``max.connections.per.ip`` or that IP's entry in
``max.connections.per.ip.overrides`` (hosts given by name are resolved once,
at start, as Kafka does).  The listener closes a refused socket at once.

Deviation from Kafka: at ``max.connections`` Kafka's acceptor stops accepting
and lets new connections wait in the TCP backlog; asyncio's server cannot
pause accepting, so here the extra connection is closed like a per-IP refusal
(clients reconnect with backoff either way).

``max.connections=-1`` (pylog's default; Kafka's is unbounded) derives the bound from the open-file limit
(``derived_max_connections``): half of ``RLIMIT_NOFILE`` is left to partitions (``max.broker.partitions``
derives from that half), and ``RESERVED_FDS`` more to segment rolls, topic creation, ZooKeeper, the HTTP
servers and the broker's own files — so a connection flood meets refused connections long before a storage
operation meets EMFILE.

An IP may also have a connection-creation quota (KIP-612: ``connection_creation_rate`` of entity ``ips/<ip>``,
else ``ips/<default>``, set by AlterClientQuotas; ``ip_rate`` looks it up): its new connections are counted in
a sampled rate (``security/quotas.py``'s ``Rate``, 1 s samples) and one that takes the rate over the quota is
refused, as Kafka's ConnectionQuotas closes a throttled IP's connection.

A flood of refused connections must not flood the log: ``refusal_to_log``
answers at most one message per IP per ``WARN_INTERVAL_S``, counting the
refusals it swallowed meanwhile.  Time is injected.
"""
from __future__ import annotations

import ipaddress
import resource
import socket
import time
from typing import Callable, Mapping

from broker_sim.security.quotas import Rate

WARN_INTERVAL_S = 5.0
RESERVED_FDS = 64  # descriptors kept beyond the partitions' half for storage and the broker's own use
DERIVED_MAX_CONNECTIONS = f"half of RLIMIT_NOFILE minus {RESERVED_FDS} reserved descriptors, at least 16"
RATE_SAMPLES = 11  # Kafka's quota.window.num default, of 1 s samples
MAX_IP_RATES = 4096  # rates kept for IPs with a quota; idle ones are dropped beyond this


def derived_max_connections(open_files: int | None = None) -> int:
    """``max.connections`` when set to -1: ``DERIVED_MAX_CONNECTIONS`` of the (soft) open-file limit."""
    if open_files is None:
        open_files = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if open_files == resource.RLIM_INFINITY or open_files >= 2**32:
        return 2**31 - 1
    return max(16, open_files // 2 - RESERVED_FDS)


def _normalise(host: str) -> str:
    """The IP a peer address would show for ``host`` (a literal stays itself; a name is resolved)."""
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        try:
            return socket.gethostbyname(host)
        except OSError:
            return host  # never matches a peer; harmless, as an unknown host in Kafka's overrides


class ConnectionQuotas:
    def __init__(self, max_connections: int, max_per_ip: int, overrides: Mapping[str, int] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.overrides = {_normalise(host): count for host, count in (overrides or {}).items()}
        self.total = 0
        self.per_ip: dict[str, int] = {}
        self._clock = clock
        self._warned: dict[str, tuple[float, int]] = {}  # ip -> (last warning, refusals not logged since)
        self.ip_rate: Callable[[str], float | None] = lambda ip: None  # the IP's connection_creation_rate quota
        self._rates: dict[str, Rate] = {}

    def limit_for(self, ip: str) -> int:
        return self.overrides.get(ip, self.max_per_ip)

    def _over_rate(self, ip: str) -> str | None:
        """Record a new connection of ``ip`` against its connection_creation_rate; why it is refused, if it is."""
        quota = self.ip_rate(ip)
        if quota is None:
            return None
        now = self._clock()
        rate = self._rates.get(ip)
        if rate is None:
            if len(self._rates) >= MAX_IP_RATES:
                self._rates = {k: r for k, r in self._rates.items() if not r.idle_since(now, RATE_SAMPLES)}
                while len(self._rates) >= MAX_IP_RATES:   # every one busy (many source addresses): oldest first
                    self._rates.pop(next(iter(self._rates)))
            rate = self._rates[ip] = Rate(RATE_SAMPLES, 1.0)
        rate.record(1.0, now)
        if rate.measure(now) > quota:
            return f"connection_creation_rate={quota:g} exceeded for {ip}"
        return None

    def admit(self, ip: str) -> str | None:
        """Count a new connection from ``ip``; or, if over a limit, count nothing and return why."""
        if 0 <= self.max_connections <= self.total:  # -1 (derived) counts as unbounded until Connections.start
            return f"max.connections={self.max_connections} reached"
        count = self.per_ip.get(ip, 0)
        limit = self.limit_for(ip)
        if count >= limit:
            name = "max.connections.per.ip.overrides" if ip in self.overrides else "max.connections.per.ip"
            return f"{name}={limit} reached for {ip}"
        over_rate = self._over_rate(ip)
        if over_rate is not None:
            return over_rate
        self.total += 1
        self.per_ip[ip] = count + 1
        return None

    def release(self, ip: str) -> None:
        """Uncount a connection ``admit`` counted."""
        self.total -= 1
        left = self.per_ip[ip] - 1
        if left:
            self.per_ip[ip] = left
        else:
            del self.per_ip[ip]

    def refusal_to_log(self, ip: str, reason: str) -> str | None:
        """The warning to log for this refusal, or None while ``ip`` was warned about recently."""
        now = self._clock()
        last, swallowed = self._warned.get(ip, (None, 0))
        if last is not None and now - last < WARN_INTERVAL_S:
            self._warned[ip] = (last, swallowed + 1)
            return None
        if len(self._warned) > 4096:  # forget quiet IPs so a scan of many addresses cannot grow this
            self._warned = {k: v for k, v in self._warned.items() if now - v[0] < WARN_INTERVAL_S}
        self._warned[ip] = (now, 0)
        more = f" ({swallowed} more refused since the last warning)" if swallowed else ""
        return f"refused connection from {ip}: {reason}{more}"
