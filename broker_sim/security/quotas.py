"""Client quotas: Kafka's ClientQuotaManager — byte rates and request time per user / client id.

Quota types (Kafka's names): ``producer_byte_rate`` (Produce request bytes per second),
``consumer_byte_rate`` (Fetch response bytes per second, consumers only: followers are not throttled) and
``request_percentage`` (time spent handling the entity's requests, as a percentage of one thread over the
quota window).

Entities, as Kafka keeps them in ``/config/users`` and ``/config/clients`` (``EntityConfigs``; names are
sanitized as Kafka's Sanitizer does): a user, a client id, or a (user, client id) pair, each possibly
``<default>``.  A request's quota is the first entity that sets the quota type, in Kafka's order::

    users/<user>/clients/<client>, users/<user>/clients/<default>, users/<user>,
    users/<default>/clients/<client>, users/<default>/clients/<default>, users/<default>,
    clients/<client>, clients/<default>

and the connections of one user / client id share one rate.  As Kafka's DefaultQuotaCallback tags its
quota metrics, a ``<default>`` in the matched entity stands for each user or client id on its own: with
``clients/<default>`` = 1 MB/s every client id gets 1 MB/s, not all of them together.  Rates of entities
idle for a whole quota window are dropped once there are many (client ids are the client's choice): the rates
are kept in order of last use, so a new entity drops idle ones from the front, each once, and every request
costs O(1) however many client ids came before it.

Rates are Kafka's sampled ``Rate``: ``quota.window.num`` samples of ``quota.window.size.seconds`` each;
the rate is the total over the samples divided by their span, at least ``(num - 1) * size``.  A request that
takes the rate over the quota gets ``throttle_time_ms = (rate - quota) / quota * window`` (at most the whole
window), in its response where the response has the field, and its connection is muted that long after the
response is sent (KIP-219: the broker answers at once, then reads nothing more until the time has passed).
"""
from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from urllib.parse import quote

from broker_sim.security.entity_configs import EntityConfigs

PRODUCE, FETCH, REQUEST = "producer_byte_rate", "consumer_byte_rate", "request_percentage"
QUOTA_TYPES = (PRODUCE, FETCH, REQUEST)
CONNECTION_RATE = "connection_creation_rate"  # of ips/<ip> or ips/<default> only (KIP-612)
DEFAULT = "<default>"
MAX_RATES = 10_000  # entity rates kept before idle ones are dropped


def sanitize(name: str) -> str:
    """Kafka's Sanitizer: URL-encoding (``*`` as %2A, space as %20, ``~`` kept) of an entity name in a path."""
    return quote(name, safe="~")


def quota_user(principal: str) -> str:
    """The user of a principal, as quotas name it (``User:alice`` -> ``alice``)."""
    return principal.split(":", 1)[1] if ":" in principal else principal


def entity_path(user: str | None, client: str | None) -> tuple[str, str]:
    """(entity type, name) of a quota entity; None for a component means its ``<default>``,
    "" means the component is absent."""
    def part(value):
        return DEFAULT if value is None else sanitize(value)
    if user != "" and client != "":
        return "users", f"{part(user)}/clients/{part(client)}"
    if user != "":
        return "users", part(user)
    return "clients", part(client)


class Rate:
    """Kafka's SampledStat Rate: ``samples`` windows of ``window_s`` seconds."""

    def __init__(self, samples: int, window_s: float) -> None:
        self.samples, self.window_s = samples, window_s
        self._windows: deque = deque()  # [start, total]

    def record(self, value: float, now: float) -> None:
        if not self._windows or now - self._windows[-1][0] >= self.window_s:
            self._windows.append([now, 0.0])
            while len(self._windows) > self.samples:
                self._windows.popleft()
        self._windows[-1][1] += value

    def _purge(self, now: float) -> None:
        while self._windows and now - self._windows[0][0] >= self.samples * self.window_s:
            self._windows.popleft()

    def window(self, now: float) -> float:
        """The span the rate is measured over, seconds (at least ``(samples - 1) * window_s``)."""
        self._purge(now)
        elapsed = now - self._windows[0][0] if self._windows else 0.0
        return max(elapsed, (self.samples - 1) * self.window_s)

    def idle_since(self, now: float, span: float) -> bool:
        """True when nothing was recorded in the last ``span`` seconds."""
        return not self._windows or now - self._windows[-1][0] >= span

    def measure(self, now: float) -> float:
        self._purge(now)
        return sum(total for _, total in self._windows) / self.window(now)


class QuotaManager:
    """Quotas of one broker (see the module docstring).  ``record`` returns the throttle time in ms."""

    def __init__(self, configs: EntityConfigs, samples: int = 11, window_s: float = 1.0,
                 clock=time.monotonic) -> None:
        self.configs = configs
        self.samples, self.window_s, self.clock = samples, window_s, clock
        # (quota type, user, client id) -> rate, least recently used first; event loop only
        self._rates: OrderedDict[tuple, Rate] = OrderedDict()
        self._resolved: dict[tuple[str, str, str], tuple[str, str, float] | None] = {}
        self._lock = threading.Lock()
        self.any_request_quota = False
        self.throttled = {t: 0 for t in QUOTA_TYPES}  # responses throttled, per quota type (metrics)
        configs.on_change(self._changed)
        self._changed()

    @classmethod
    def from_config(cls, config, configs: EntityConfigs) -> "QuotaManager":
        return cls(configs, config.get("quota.window.num"), float(config.get("quota.window.size.seconds")))

    def _changed(self) -> None:
        with self._lock:
            self._resolved = {}
            self.any_request_quota = any(REQUEST in c for kind in ("users", "clients")
                                         for c in self.configs.entities(kind).values())

    def connection_rate(self, ip: str) -> float | None:
        """The connection_creation_rate quota of ``ip``: its own, else the default IP's, else None."""
        for name in (ip, DEFAULT):
            value = self.configs.get("ips", name).get(CONNECTION_RATE)
            if value is not None:
                try:
                    return float(value)
                except ValueError:
                    continue
        return None

    def _quota(self, kind: str, user: str, client: str) -> tuple[str, str, float] | None:
        key = (kind, user, client)
        found = self._resolved.get(key, False)
        if found is not False:
            return found
        u, c = sanitize(user), sanitize(client)
        order = (("users", f"{u}/clients/{c}"), ("users", f"{u}/clients/{DEFAULT}"), ("users", u),
                 ("users", f"{DEFAULT}/clients/{c}"), ("users", f"{DEFAULT}/clients/{DEFAULT}"),
                 ("users", DEFAULT), ("clients", c), ("clients", DEFAULT))
        found = None
        for entity_type, name in order:
            value = self.configs.get(entity_type, name).get(kind)
            if value is not None:
                try:
                    found = (entity_type, name, float(value))
                except ValueError:
                    continue
                break
        with self._lock:
            if len(self._resolved) > 100_000:  # client ids are client-chosen: bound the cache
                self._resolved.clear()
            self._resolved[key] = found
        return found

    def record(self, kind: str, principal: str, client_id: str | None, value: float) -> int:
        """Record ``value`` (bytes, or ms of handler time for request_percentage) against the entity's rate;
        the throttle time in ms (0 within the quota, or without one)."""
        quota = self._quota(kind, quota_user(principal), client_id or "")
        if quota is None:
            return 0
        entity_type, name, bound = quota
        user, client = sanitize(quota_user(principal)), sanitize(client_id or "")
        # the rate's entity: the matched one, with each <default> standing for this user or client id
        if entity_type == "users":
            matched_user, _, matched_client = name.partition("/clients/")
            key = (kind, user if matched_user == DEFAULT else matched_user,
                   None if not matched_client else client if matched_client == DEFAULT else matched_client)
        else:
            key = (kind, None, client if name == DEFAULT else name)
        if kind == REQUEST:
            bound = bound / 100.0 * 1000.0  # percent of one thread -> ms of handler time per second
        if bound <= 0:
            return int(self.samples * self.window_s * 1000)
        now = self.clock()
        rate = self._rates.get(key)
        if rate is None:
            if len(self._rates) >= MAX_RATES:
                self._drop_idle(now)
            rate = self._rates[key] = Rate(self.samples, self.window_s)
        else:
            self._rates.move_to_end(key)
        rate.record(value, now)
        observed = rate.measure(now)
        if observed <= bound:
            return 0
        self.throttled[kind] += 1
        throttle = (observed - bound) / bound * rate.window(now) * 1000.0
        return int(min(throttle, self.samples * self.window_s * 1000.0))

    def _drop_idle(self, now: float) -> None:
        """Forget the rates that measured nothing for a whole quota window (they would measure 0), from the
        least recently used on, stopping at the first one still in use: each rate is dropped once, so this is
        O(1) per request however many client ids there were (a scan of them all stalled the loop for seconds
        when 10,000 were in use and each request named a new one)."""
        span = self.samples * self.window_s
        rates = self._rates
        while rates:
            key, oldest = next(iter(rates.items()))
            if not oldest.idle_since(now, span):
                return
            del rates[key]
