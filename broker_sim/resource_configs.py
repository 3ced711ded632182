"""The configs of the two config resources that are neither a topic nor a broker: groups (KIP-848) and client-metrics
subscriptions (KIP-714), as Kafka 4.1 defines, validates and describes them.

Theory of operation: each resource type is a table of ``ResourceConfigDef`` rows copied from Kafka (``GroupConfig``
and ``ClientMetricsConfigs``): name, type, default, a parse (Java ``ConfigDef`` rules and messages) and the order
Kafka's DescribeConfigs lists them in (its ``HashMap`` order).  ``validate_group_configs`` and
``validate_client_metrics`` take the resource's configs *after* an alteration (stored overrides merged with the
change, as Kafka's controller validates them) and raise ``ResourceConfigError`` with Kafka's error code and
message.  The overrides live in the entity configs (``security/entity_configs.py``) under entity types ``groups``
and ``client-metrics``; ``group_config`` is the accessor the group coordinator reads a group's effective session
timeout and heartbeat interval from.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Mapping

import kafka.errors as Errors

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
# DescribeConfigs config types (Kafka's ConfigEntry.ConfigType) of these resources
STRING, INT, LIST = 2, 3, 7
GROUPS, CLIENT_METRICS = "groups", "client-metrics"  # their entity types


class ResourceConfigError(Exception):
    """A config Kafka refuses: ``error`` is the kafka-python error class (INVALID_CONFIG or INVALID_REQUEST)."""

    def __init__(self, error, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.errno = error.errno


def _invalid(name: str, value: str, why: str) -> ResourceConfigError:
    return ResourceConfigError(Errors.InvalidConfigurationError,
                               f"Invalid value {value} for configuration {name}: {why}")


def _java_int(name: str, value: str, at_least: int | None = None) -> int:
    """Java ConfigDef's INT: a trimmed decimal within int32, then the ``atLeast`` validator."""
    text = value.strip()
    # more than 10 significant digits is no int32: never int() them (Python refuses over 4300 digits)
    if not re.fullmatch(r"[+-]?[0-9]+", text) or len(text.lstrip("+-").lstrip("0")) > 10 \
            or not INT_MIN <= int(text) <= INT_MAX:
        raise _invalid(name, value, "Not a number of type INT")
    number = int(text)
    if at_least is not None and number < at_least:
        raise _invalid(name, str(number), f"Value must be at least {at_least}")
    return number


def java_list(value: str) -> list[str]:
    """Java ConfigDef's LIST: comma-separated, each item trimmed; an empty value is the empty list."""
    text = value.strip()
    return [] if not text else [item.strip() for item in text.split(",")]


_ISO_DURATION = re.compile(r"[-+]?P(?:([-+]?[0-9]+)D)?(?:T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?"
                           r"(?:([-+]?[0-9]+)(?:[.,][0-9]{0,9})?S)?)?", re.I)


def _share_auto_offset_reset(name: str, value: str) -> str:
    """ShareGroupAutoOffsetResetStrategy.Validator: earliest, latest or by_duration:<ISO-8601, not negative>."""
    lowered = value.lower()
    if lowered in ("earliest", "latest"):
        return value
    if lowered.startswith("by_duration:"):
        duration = value[len("by_duration:"):]
        found = _ISO_DURATION.fullmatch(duration)
        if found and duration.upper() not in ("P", "PT") and not duration.startswith("-") and \
                not any(part and part.startswith("-") for part in found.groups()):
            return value
    raise _invalid(name, value, f"Invalid value `{value}` for configuration {name}. The value must be either "
                                f"'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.")


def _one_of(*choices: str) -> Callable[[str, str], str]:
    def parse(name: str, value: str) -> str:
        if value not in choices:
            raise _invalid(name, value, f"String must be one of: {', '.join(choices)}")
        return value
    return parse


@dataclass(frozen=True)
class ResourceConfigDef:
    name: str
    type: int
    default: str
    parse: Callable[[str, str], object]
    # the broker config whose value is the default (Kafka's GroupConfigManager takes it from the coordinator's)
    broker_default: str | None = None


def _int_at_least(low: int) -> Callable[[str, str], int]:
    return lambda name, value: _java_int(name, value, low)


# Kafka 4.1's GroupConfig, in the order its DescribeConfigs lists them
GROUP_CONFIGS: dict[str, ResourceConfigDef] = {d.name: d for d in (
    ResourceConfigDef("consumer.session.timeout.ms", INT, "45000", _int_at_least(1),
                      "group.consumer.session.timeout.ms"),
    ResourceConfigDef("streams.heartbeat.interval.ms", INT, "5000", _int_at_least(1)),
    ResourceConfigDef("share.auto.offset.reset", STRING, "latest", _share_auto_offset_reset),
    ResourceConfigDef("share.record.lock.duration.ms", INT, "30000", _int_at_least(1000)),
    ResourceConfigDef("consumer.heartbeat.interval.ms", INT, "5000", _int_at_least(1),
                      "group.consumer.heartbeat.interval.ms"),
    ResourceConfigDef("share.session.timeout.ms", INT, "45000", _int_at_least(1), "group.share.session.timeout.ms"),
    ResourceConfigDef("share.isolation.level", STRING, "read_uncommitted", _one_of("read_committed",
                                                                                   "read_uncommitted")),
    ResourceConfigDef("streams.session.timeout.ms", INT, "45000", _int_at_least(1)),
    ResourceConfigDef("share.heartbeat.interval.ms", INT, "5000", _int_at_least(1),
                      "group.share.heartbeat.interval.ms"),
    ResourceConfigDef("streams.num.standby.replicas", INT, "0", _int_at_least(0)),
)}

# The coordinator's bounds of the group configs (GroupCoordinatorConfig, ShareGroupConfig): the broker config of
# each where pylog has it, else Kafka's default.  (group config, "min"/"max", broker config, Kafka's default)
_BOUNDS = (
    ("consumer.heartbeat.interval.ms", "min", "group.consumer.min.heartbeat.interval.ms", 5000),
    ("consumer.heartbeat.interval.ms", "max", "group.consumer.max.heartbeat.interval.ms", 15000),
    ("consumer.session.timeout.ms", "min", "group.consumer.min.session.timeout.ms", 45000),
    ("consumer.session.timeout.ms", "max", "group.consumer.max.session.timeout.ms", 60000),
    ("share.heartbeat.interval.ms", "min", "group.share.min.heartbeat.interval.ms", 5000),
    ("share.heartbeat.interval.ms", "max", "group.share.max.heartbeat.interval.ms", 15000),
    ("share.session.timeout.ms", "min", "group.share.min.session.timeout.ms", 45000),
    ("share.session.timeout.ms", "max", "group.share.max.session.timeout.ms", 60000),
    ("share.record.lock.duration.ms", "min", "group.share.min.record.lock.duration.ms", 15000),
    ("share.record.lock.duration.ms", "max", "group.share.max.record.lock.duration.ms", 60000),
    ("streams.heartbeat.interval.ms", "min", "group.streams.min.heartbeat.interval.ms", 5000),
    ("streams.heartbeat.interval.ms", "max", "group.streams.max.heartbeat.interval.ms", 15000),
    ("streams.session.timeout.ms", "min", "group.streams.min.session.timeout.ms", 45000),
    ("streams.session.timeout.ms", "max", "group.streams.max.session.timeout.ms", 60000),
    ("streams.num.standby.replicas", "max", "group.streams.max.standby.replicas", 2),
)
_MUST_EXCEED = (("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
                ("share.session.timeout.ms", "share.heartbeat.interval.ms"),
                ("streams.session.timeout.ms", "streams.heartbeat.interval.ms"))


def _broker_value(broker_config, name: str, fallback: str) -> str:
    """A broker config's value when pylog defines it, else Kafka's default."""
    from broker_sim.config import BROKER_CONFIGS

    if broker_config is not None and name in BROKER_CONFIGS:
        return broker_config.raw(name)
    return fallback


def group_defaults(broker_config) -> dict[str, str]:
    """Each group config's default: the broker's coordinator config where Kafka takes it from there."""
    return {d.name: _broker_value(broker_config, d.broker_default, d.default) if d.broker_default else d.default
            for d in GROUP_CONFIGS.values()}


def validate_group_configs(group_id: str, configs: Mapping[str, str], broker_config) -> dict[str, object]:
    """Kafka's ``GroupConfig.validate`` of a group's overrides after an alteration (names, then values, then the
    coordinator's bounds, then session > heartbeat), with its errors: INVALID_REQUEST for the empty (default) group,
    INVALID_CONFIG naming the config otherwise.  Returns every config's parsed effective value."""
    if not group_id:
        raise ResourceConfigError(Errors.InvalidRequestError, "Default group resources are not allowed.")
    for name in configs:
        if name not in GROUP_CONFIGS:
            raise ResourceConfigError(Errors.InvalidConfigurationError, f"Unknown group config name: {name}")
    values = {**group_defaults(broker_config), **configs}
    parsed = {name: definition.parse(name, values[name]) for name, definition in GROUP_CONFIGS.items()}
    for name, side, broker_name, default in _BOUNDS:
        bound = int(_broker_value(broker_config, broker_name, str(default)))
        if (side == "min" and parsed[name] < bound) or (side == "max" and parsed[name] > bound):
            relation = "greater than or equal to" if side == "min" else "less than or equal to"
            raise ResourceConfigError(Errors.InvalidConfigurationError, f"{name} must be {relation} {broker_name}")
    for session, heartbeat in _MUST_EXCEED:
        if parsed[session] <= parsed[heartbeat]:
            raise ResourceConfigError(Errors.InvalidConfigurationError, f"{session} must be greater than {heartbeat}")
    return parsed


@dataclass(frozen=True)
class GroupConfig:
    """A group's effective KIP-848 timing (its override, else the broker's ``group.consumer.*`` default)."""
    session_timeout_ms: int
    heartbeat_interval_ms: int


def group_config(entity_configs, group_id: str, broker_config) -> GroupConfig:
    """The effective ``consumer.session.timeout.ms`` and ``consumer.heartbeat.interval.ms`` of ``group_id``: what
    ``kafka-configs --entity-type groups`` stored, else the broker's defaults.  A stored value that no longer
    parses (the store was edited by hand) falls back to the default, as it could not have been accepted."""
    defaults = group_defaults(broker_config)
    stored = entity_configs.get(GROUPS, group_id) if entity_configs is not None and group_id else {}

    def value(name: str) -> int:
        try:
            return _java_int(name, stored.get(name, defaults[name]), 1)
        except ResourceConfigError:
            return int(defaults[name])
    return GroupConfig(value("consumer.session.timeout.ms"), value("consumer.heartbeat.interval.ms"))


# -- client-metrics subscriptions (KIP-714) ---------------------------------------------------------------------

CLIENT_METRICS_INTERVAL_DEFAULT = 300_000  # ClientMetricsConfigs.INTERVAL_MS_DEFAULT: 5 minutes
ALL_METRICS = "*"
MATCH_KEYS = frozenset({"client_instance_id", "client_id", "client_software_name", "client_software_version",
                        "client_source_address", "client_source_port"})

CLIENT_METRICS_CONFIGS: dict[str, ResourceConfigDef] = {d.name: d for d in (
    ResourceConfigDef("interval.ms", INT, str(CLIENT_METRICS_INTERVAL_DEFAULT), _int_at_least(INT_MIN)),
    ResourceConfigDef("match", LIST, "", lambda name, value: java_list(value)),
    ResourceConfigDef("metrics", LIST, "", lambda name, value: java_list(value)),
)}


def _java_split_equals(pattern: str) -> list[str]:
    """Java's ``String.split("=")``: trailing empty strings removed."""
    parts = pattern.split("=")
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def parse_match(patterns: list[str]) -> dict[str, re.Pattern]:
    """ClientMetricsConfigs.parseMatchingPatterns: ``<key>=<regex>`` per item, the key one of ``MATCH_KEYS``; a
    bad item is INVALID_CONFIG "Illegal client matching pattern"."""
    found = {}
    for pattern in patterns:
        parts = _java_split_equals(pattern)
        if len(parts) != 2 or parts[0].strip() not in MATCH_KEYS:
            raise ResourceConfigError(Errors.InvalidConfigurationError, f"Illegal client matching pattern: {pattern}")
        try:
            found[parts[0].strip()] = re.compile(parts[1].strip())
        except (re.error, RecursionError, OverflowError):
            raise ResourceConfigError(Errors.InvalidConfigurationError,
                                      f"Illegal client matching pattern: {pattern}") from None
    return found


@dataclass(frozen=True)
class Subscription:
    """One client-metrics resource, parsed: metric prefixes, push interval, match patterns (all must match)."""
    name: str
    metrics: tuple[str, ...]
    interval_ms: int
    match: Mapping[str, re.Pattern]


def validate_client_metrics(name: str, configs: Mapping[str, str]) -> Subscription:
    """Kafka's ``ClientMetricsConfigs.validate`` of a subscription's configs after an alteration, with its errors
    (INVALID_REQUEST for the empty name, an unknown config or an interval outside 100..3600000; INVALID_CONFIG for
    a value that does not parse and a bad match pattern)."""
    if not name:
        raise ResourceConfigError(Errors.InvalidRequestError, "Subscription name can't be empty")
    for key in configs:
        if key not in CLIENT_METRICS_CONFIGS:
            raise ResourceConfigError(Errors.InvalidRequestError, f"Unknown client metrics configuration: {key}")
    values = {d.name: configs.get(d.name, d.default) for d in CLIENT_METRICS_CONFIGS.values()}
    interval = _java_int("interval.ms", values["interval.ms"])
    if "interval.ms" in configs and not 100 <= interval <= 3_600_000:
        raise ResourceConfigError(Errors.InvalidRequestError, f"Invalid value {interval} for interval.ms, interval "
                                                              f"must be between 100 and 3600000 (1 hour)")
    match = parse_match(java_list(values["match"]))
    return Subscription(name, tuple(java_list(values["metrics"])), interval, match)


def subscription_or_none(name: str, configs: Mapping[str, str]) -> Subscription | None:
    """A stored subscription, parsed; None for one that no longer validates (hand-edited store)."""
    try:
        return validate_client_metrics(name, configs)
    except ResourceConfigError:
        return None
