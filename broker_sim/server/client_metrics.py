"""Client telemetry (KIP-714) as a Kafka 4.1 broker without a metrics reporter plugin answers it.

Theory of operation (Kafka's ``ClientMetricsManager`` and ``ClientMetricsInstance``, I/O-free, clock injected):

1. A client asks GetTelemetrySubscriptions with a zero id and is given a random client instance id; every request
   finds (or creates) its ``Instance`` in an LRU cache of at most ``CACHE_MAX_SIZE``.  An instance is forgotten
   ``max(60 s, 3 x its push interval)`` after its last request, or when the connection that created it closed
   (Kafka's disconnect listener; checked here when the instance is next looked up).
2. An instance's subscription is computed once, from the client-metrics resources whose ``match`` patterns all
   full-match the client's attributes (id, client id, software name and version from ApiVersions, address, port):
   the union of their metric prefixes (``*`` alone when one asks for all), the lowest interval (5 minutes without
   any), and a subscription id, the CRC32C of the metric set's Java ``toString`` and the interval, XOR the id's
   Java ``hashCode`` (so the id equals Kafka's for the same inputs).  A change to any subscription makes every
   instance recompute at its next request.
3. A GetTelemetrySubscriptions sooner than the push interval after the instance's last request is
   THROTTLING_QUOTA_EXCEEDED, unless the last push failed UNKNOWN_SUBSCRIPTION_ID or UNSUPPORTED_COMPRESSION_TYPE.
4. A PushTelemetry is checked in Kafka's order: a zero or reserved id INVALID_REQUEST; after a terminating push
   INVALID_REQUEST; sooner than the interval after the last push (and not the first push after a
   GetTelemetrySubscriptions, not terminating) THROTTLING_QUOTA_EXCEEDED; another subscription id
   UNKNOWN_SUBSCRIPTION_ID; a compression id Kafka does not know UNSUPPORTED_COMPRESSION_TYPE; more than
   ``telemetry.max.bytes`` TELEMETRY_TOO_LARGE.
5. An accepted compressed payload is decompressed, as Kafka 4.1's receiver plugin does before handing it to
   (no) receivers: a stream that is not valid for its codec is INVALID_RECORD.  The output is dropped as it comes,
   and more than ``max_decompressed`` bytes of it (pylog's bound, ``message.max.decompressed.bytes``; Kafka 4.1
   has none) is TELEMETRY_TOO_LARGE, as later Kafka answers a payload too large once decompressed.  Nothing
   is kept or decoded further (no OpenTelemetry parsing: there is no reporter).
"""
from __future__ import annotations

import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable, Mapping

import kafka.errors as Errors

from broker_sim.resource_configs import ALL_METRICS, CLIENT_METRICS, CLIENT_METRICS_INTERVAL_DEFAULT, \
    Subscription, subscription_or_none

CACHE_MAX_SIZE = 16384  # Kafka: 16k active client instances per broker
CACHE_EXPIRY_MS = 60_000
ACCEPTED_COMPRESSION_TYPES = (4, 3, 1, 2)  # zstd, lz4, gzip, snappy: Kafka's preference order
KNOWN_COMPRESSION_TYPES = frozenset(range(5))  # CompressionType.forId: none, gzip, snappy, lz4, zstd
ZERO_UUID = uuid.UUID(int=0)
RESERVED_UUIDS = frozenset({ZERO_UUID, uuid.UUID(int=1)})  # Uuid.RESERVED: zero and the metadata topic's id


class TelemetryError(Exception):
    def __init__(self, error, message: str) -> None:
        super().__init__(message)
        self.error = error


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def java_string_hash(text: str) -> int:
    h = 0
    for unit in text.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    return _int32(h)


def java_hash_set_order(items) -> list[str]:
    """``items`` (distinct, in insertion order) in a ``java.util.HashSet``'s iteration order: by bucket of the
    spread ``String.hashCode`` in a table sized for the count (16, doubled while more than 3/4 full), insertion
    order within a bucket."""
    ordered = list(dict.fromkeys(items))
    capacity = 16
    while len(ordered) > capacity * 3 // 4:
        capacity *= 2

    def bucket(text: str) -> int:
        h = java_string_hash(text) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)
    return sorted(ordered, key=bucket)


def java_uuid_hash(value: uuid.UUID) -> int:
    """Kafka's ``Uuid.hashCode``: the two longs XORed, then the halves of that XORed."""
    h = (value.int >> 64) ^ (value.int & 0xFFFFFFFFFFFFFFFF)
    return _int32((h >> 32) ^ h)


def subscription_id(metrics: list[str], interval_ms: int, instance_id: uuid.UUID) -> int:
    from crc32c import crc32c

    text = "[" + ", ".join(metrics) + "]" + str(interval_ms)
    return _int32(_int32(crc32c(text.encode())) ^ java_uuid_hash(instance_id))


@dataclass
class Instance:
    instance_id: uuid.UUID
    attributes: Mapping[str, str]
    subscription_id: int
    version: int
    metrics: list[str]
    interval_ms: int
    connection: object = None
    last_get_ms: int = 0
    last_push_ms: int = 0
    terminating: bool = False
    last_error: int = 0
    expires_ms: int = field(default=0)


@dataclass(frozen=True)
class Subscribed:
    """A GetTelemetrySubscriptions answer's fields."""
    instance_id: uuid.UUID
    subscription_id: int
    interval_ms: int
    max_bytes: int
    metrics: list[str]


class ClientMetricsManager:
    """Subscriptions from the entity configs (``client-metrics``) and the client instances of this broker."""

    def __init__(self, entity_configs, max_bytes: int, now_ms: Callable[[], int],
                 new_id: Callable[[], uuid.UUID] = uuid.uuid4, max_decompressed: int = 32 << 20) -> None:
        self._entity_configs = entity_configs
        self._max_bytes = max_bytes
        self._max_decompressed = max_decompressed
        self._now_ms = now_ms
        self._new_id = new_id
        self._instances: OrderedDict[uuid.UUID, Instance] = OrderedDict()
        self._version = 0
        self._seen: dict = {}
        self._subscriptions: list[Subscription] = []
        self._stale = entity_configs is not None
        if entity_configs is not None:
            # on kazoo's thread in a cluster: only flag it, the next request re-reads on the event loop
            entity_configs.on_change(self._mark_stale)

    def _mark_stale(self) -> None:
        self._stale = True

    def _refresh(self) -> None:
        """Re-read the subscriptions if an entity changed since the last look (a new version if they differ)."""
        if not self._stale:
            return
        self._stale = False
        current = self._entity_configs.entities(CLIENT_METRICS)
        if current == self._seen:
            return
        self._seen = current
        parsed = (subscription_or_none(name, configs) for name, configs in current.items())
        self._subscriptions = [s for s in parsed if s is not None]
        self._version += 1

    def subscription_names(self) -> list[str]:
        """The client-metrics resources there are (ListConfigResources)."""
        self._refresh()
        return list(self._seen)

    # -- instances -----------------------------------------------------------------------------------------

    def _instance(self, instance_id: uuid.UUID, attributes: Mapping[str, str], connection, now: int) -> Instance:
        self._refresh()
        found = self._instances.get(instance_id)
        if found is not None and (found.expires_ms <= now or getattr(found.connection, "closed", False)):
            del self._instances[instance_id]
            found = None
        if found is None or found.version < self._version:
            found = self._create(instance_id, found.attributes if found is not None else attributes, connection)
            self._instances[instance_id] = found
            while len(self._instances) > CACHE_MAX_SIZE:
                self._instances.popitem(last=False)
        self._instances.move_to_end(instance_id)
        found.expires_ms = now + max(CACHE_EXPIRY_MS, found.interval_ms * 3)
        return found

    def _create(self, instance_id: uuid.UUID, attributes: Mapping[str, str], connection) -> Instance:
        interval, metrics, everything = CLIENT_METRICS_INTERVAL_DEFAULT, [], False
        for subscription in self._subscriptions:
            if _matches(subscription, attributes):
                everything = everything or ALL_METRICS in subscription.metrics
                metrics.extend(java_hash_set_order(subscription.metrics))
                interval = min(interval, subscription.interval_ms)
        ordered = [ALL_METRICS] if everything else java_hash_set_order(metrics)
        return Instance(instance_id, dict(attributes), subscription_id(ordered, interval, instance_id),
                        self._version, ordered, interval, connection)

    def _new_instance_id(self) -> uuid.UUID:
        found = self._new_id()
        while found in self._instances or found in RESERVED_UUIDS:
            found = self._new_id()
        return found

    # -- the two requests ----------------------------------------------------------------------------------

    def get_subscriptions(self, instance_id: uuid.UUID | None, attributes: Mapping[str, str],
                          connection=None) -> Subscribed:
        """The subscription of the client (a new instance id for a zero one); raises ``TelemetryError``
        THROTTLING_QUOTA_EXCEEDED for a request before the push interval passed."""
        now = self._now_ms()
        if instance_id is None or instance_id == ZERO_UUID:
            instance_id = self._new_instance_id()
        instance = self._instance(instance_id, {**attributes, "client_instance_id": str(instance_id)}, connection,
                                  now)
        if now - max(instance.last_get_ms, instance.last_push_ms) >= instance.interval_ms:
            instance.last_get_ms = now
        elif instance.last_error not in (Errors.UnknownSubscriptionIdError.errno,
                                         Errors.UnsupportedCompressionTypeError.errno):
            raise TelemetryError(Errors.ThrottlingQuotaExceededError,
                                 f"Request from the client [{instance_id}] arrived before the next push interval "
                                 f"time")
        instance.last_error = 0
        return Subscribed(instance_id, instance.subscription_id, instance.interval_ms, self._max_bytes,
                          list(instance.metrics))

    def push(self, instance_id: uuid.UUID | None, subscription: int, terminating: bool, compression_type: int,
             metrics: bytes | None, attributes: Mapping[str, str], connection=None) -> None:
        """Accept (and drop) one push, or raise ``TelemetryError`` with Kafka's error for it."""
        if instance_id is None or instance_id in RESERVED_UUIDS:
            raise TelemetryError(Errors.InvalidRequestError,
                                 f"Invalid request from the client [{instance_id}], invalid client instance id")
        now = self._now_ms()
        instance = self._instance(instance_id, {**attributes, "client_instance_id": str(instance_id)}, connection,
                                  now)
        try:
            self._check_push(instance, subscription, terminating, compression_type, len(metrics or b""), now)
        except TelemetryError as exc:
            instance.last_error = exc.error.errno
            raise
        finally:
            instance.terminating = terminating
        if metrics and compression_type:
            self._check_payload(instance, compression_type, metrics)
        instance.last_error = 0

    def _check_payload(self, instance: Instance, compression_type: int, metrics: bytes) -> None:
        from broker_sim.storage.validator import decompressed_size

        try:
            decompressed_size(compression_type, metrics, self._max_decompressed)
        except Errors.MessageSizeTooLargeError as exc:
            instance.last_error = Errors.TelemetryTooLargeError.errno
            raise TelemetryError(Errors.TelemetryTooLargeError, str(exc)) from None
        except Errors.CorruptRecordError as exc:
            instance.last_error = Errors.InvalidRecordError.errno
            raise TelemetryError(Errors.InvalidRecordError, str(exc)) from None

    def _check_push(self, instance: Instance, subscription: int, terminating: bool, compression_type: int,
                    size: int, now: int) -> None:
        client = instance.instance_id
        if instance.terminating:
            raise TelemetryError(Errors.InvalidRequestError,
                                 f"Client [{client}] sent the previous request with state terminating to TRUE, can "
                                 f"not acceptany requests after that")
        accepted = instance.last_get_ms > instance.last_push_ms or now - instance.last_push_ms >= instance.interval_ms
        if accepted:
            instance.last_push_ms = now
        elif not terminating:
            raise TelemetryError(Errors.ThrottlingQuotaExceededError,
                                 f"Request from the client [{client}] arrived before the next push interval time")
        if subscription != instance.subscription_id:
            raise TelemetryError(Errors.UnknownSubscriptionIdError,
                                 f"Unknown client subscription id for the client [{client}]")
        if compression_type not in KNOWN_COMPRESSION_TYPES:
            raise TelemetryError(Errors.UnsupportedCompressionTypeError,
                                 f"Unknown compression type [{compression_type}] is received in telemetry request "
                                 f"from [{client}]")
        if size > self._max_bytes:
            raise TelemetryError(Errors.TelemetryTooLargeError,
                                 f"Telemetry request from [{client}] is larger than the maximum allowed size "
                                 f"[{self._max_bytes}]")


def _matches(subscription: Subscription, attributes: Mapping[str, str]) -> bool:
    """ClientMetricsInstanceMetadata.isMatch: every pattern full-matches its attribute (a missing one never)."""
    for key, pattern in subscription.match.items():
        value = attributes.get(key)
        if value is None or pattern.fullmatch(value) is None:
            return False
    return True
