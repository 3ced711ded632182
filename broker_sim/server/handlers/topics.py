"""CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs, IncrementalAlterConfigs, AlterConfigs (topics,
brokers, the broker's loggers: ``server/logger_levels.py``, groups and client-metrics subscriptions:
``resource_configs.py``) and ListConfigResources.

Kafka's rules kept here: topic names by ``Topic.validate`` (INVALID_TOPIC_EXCEPTION); partition
counts within the broker's ``max.broker.partitions`` (KIP-578; POLICY_VIOLATION naming the limit
and the numbers), checked by ``validate_only`` requests too; a topic whose directories or
metadata cannot be written answers KAFKA_STORAGE_ERROR and leaves nothing behind.  Big topics
are created in slices between which the event loop serves other requests.  The partition counts of
the internal topics (``__consumer_offsets``, ``__transaction_state``, and the registry's ``_schemas``)
are never changed by clients: more partitions would re-home groups and transactional ids (their
partition is a hash modulo the count) and the registry reads ``_schemas``-0 only (INVALID_REQUEST,
as Kafka's TopicCommand refuses it).  On a broker serving the registry, ``_schemas`` keeps
cleanup.policy=compact: an alteration to anything else is POLICY_VIOLATION.

Groups (KIP-848) and client-metrics subscriptions (KIP-714) are entity configs (``groups``, ``client-metrics``),
as Kafka's controller keeps them: described with every config (its override, else the default), validated after
the alteration is applied to the stored overrides, never APPENDed to or SUBTRACTed from (Kafka's controller does
not know their types).  A client-metrics resource needs DESCRIBE_CONFIGS / ALTER_CONFIGS on the cluster, a group
on the group (CLUSTER_ / GROUP_AUTHORIZATION_FAILED), as Kafka's AuthHelper asks.  pylog bounds what a client may
store (Kafka does not): at most ``MAX_CONFIG_ENTITIES`` resources of each kind (POLICY_VIOLATION), values of at
most ``CONFIG_VALUE_MAX_CHARS`` as for topics (INVALID_CONFIG).
"""
from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable, Mapping

import kafka.errors as Errors

from broker_sim.config import (
    BROKER_CONFIGS, CONFIG_VALUE_MAX_CHARS, BrokerConfig, DYNAMIC_BROKER_CONFIGS, TOPIC_CONFIGS, ConfigError,
    NotDynamicError, dynamic_listener_config, sensitive_config, shown_configs, validate_dynamic_broker_configs,
)
from broker_sim.controller.metadata import MetadataError, TopicInfo
from broker_sim.protocol.apis import messages
from broker_sim.resource_configs import (
    CLIENT_METRICS_CONFIGS, GROUP_CONFIGS, ResourceConfigError, group_defaults, validate_client_metrics,
    validate_group_configs,
)
from broker_sim.security.entity_configs import EntityConfigs
from broker_sim.server import logger_levels
from broker_sim.server.handlers import access
from broker_sim.server.handlers.access import Access
from broker_sim.server.request_slicing import Slices
from broker_sim.errors import error_of


def _require(allowed: bool, error, message: str) -> None:
    if not allowed:
        raise MetadataError(error, message)


log = logging.getLogger(__name__)
TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
# ListConfigResources v1: the types it lists, in the order Kafka's KafkaApis lists them
LISTED_RESOURCE_TYPES = (GROUP, CLIENT_METRICS, BROKER_LOGGER, BROKER, TOPIC)
# DescribeConfigs config sources
DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG, \
    DYNAMIC_BROKER_LOGGER_CONFIG, DYNAMIC_CLIENT_METRICS_CONFIG, DYNAMIC_GROUP_CONFIG = 1, 2, 3, 4, 5, 6, 7, 8
# entity configs of groups and client-metrics resources (entity type, their config table, the dynamic source)
_ENTITY_RESOURCES = {GROUP: ("groups", GROUP_CONFIGS, DYNAMIC_GROUP_CONFIG),
                     CLIENT_METRICS: ("client-metrics", CLIENT_METRICS_CONFIGS, DYNAMIC_CLIENT_METRICS_CONFIG)}
MAX_CONFIG_ENTITIES = 10_000  # pylog's bound: groups (or subscriptions) with stored configs
_SOURCES = {"dynamic": DYNAMIC_BROKER_CONFIG, "dynamic-default": DYNAMIC_DEFAULT_BROKER_CONFIG,
            "static": STATIC_BROKER_CONFIG, "default": DEFAULT_CONFIG}
# DescribeConfigs config types
BOOLEAN, STRING, LONG, DOUBLE, LIST = 1, 2, 5, 6, 7
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_LIST_CONFIGS = {"cleanup.policy", "log.cleanup.policy"}
# broker configs Kafka defines without a default (a coarser one supplies it: log.retention.hours for
# log.retention.ms) or not at all: a topic config's synonyms never show their DEFAULT_CONFIG entry
_NO_KAFKA_DEFAULT = {"log.retention.ms", "log.roll.ms", "log.roll.jitter.ms", "log.flush.interval.ms",
                     "follower.replication.throttled.replicas", "leader.replication.throttled.replicas",
                     "remote.storage.enable"}


class _Entry:
    __slots__ = ("name", "value", "read_only", "config_source", "is_default", "synonyms", "doc", "type", "sensitive")

    def __init__(self, name, value, read_only, source, synonyms, doc, config_type):
        self.name, self.value, self.read_only, self.config_source = name, value, read_only, source
        self.is_default = source == DEFAULT_CONFIG
        self.synonyms, self.doc, self.type = synonyms, doc, config_type
        self.sensitive = False


def _config_type(name: str, default: str) -> int:
    if name in _LIST_CONFIGS:
        return LIST
    if default in ("true", "false"):
        return BOOLEAN
    for parse, config_type in ((int, LONG), (float, DOUBLE)):
        try:
            parse(default)
            return config_type
        except ValueError:
            pass
    return STRING


def _internal(name: str) -> bool:
    """Kafka's internal configs (``internal.*``, for tests) are accepted but never described."""
    return name.startswith("internal.")


def _entity_altered(current: dict[str, str], changes) -> dict[str, str]:
    """A group's or subscription's overrides after ``changes``: SET and DELETE; APPEND and SUBTRACT are refused as
    Kafka's controller refuses them (it knows no LIST type for these resources)."""
    for change in changes:
        if change.config_operation in (APPEND, SUBTRACT):
            operation = "APPEND" if change.config_operation == APPEND else "SUBTRACT"
            raise MetadataError(Errors.InvalidConfigurationError,
                                f"Can't {operation} to key {change.name} because its type is not LIST.")
    return _altered(current, changes, lambda name: "")


def _altered(current: dict[str, str], changes, value_in_effect: Callable[[str], str]) -> dict[str, str]:
    """The overrides after ``changes``.  APPEND and SUBTRACT start from the value in effect, as Kafka's
    ConfigurationControlManager does: APPEND ``compact`` to a topic without its own ``cleanup.policy`` gives
    ``delete,compact`` (the default and the item), and the result is stored as the override."""
    configs = dict(current)
    for change in changes:
        name, op, value = change.name, change.config_operation, change.value
        if op == SET:
            configs[name] = value
        elif op == DELETE:
            configs.pop(name, None)
        elif op in (APPEND, SUBTRACT):
            if name not in _LIST_CONFIGS:
                raise MetadataError(Errors.InvalidConfigurationError,
                                    f"APPEND/SUBTRACT need a list config; {name!r} is not one")
            items = [v for v in (configs[name] if name in configs else value_in_effect(name)).split(",") if v]
            for item in (value or "").split(","):
                if op == APPEND and item and item not in items:
                    items.append(item)
                elif op == SUBTRACT and item in items:
                    items.remove(item)
            configs[name] = ",".join(items)
        else:
            raise MetadataError(Errors.InvalidRequestError, f"unknown config operation {op} for {name!r}")
    return configs


class TopicApis:
    """Topic and config admin.  The topic changes themselves are the broker's (one path per kind, see
    ``server/broker.py``): ``create_topic_async``, ``delete_topic``, ``add_partitions``, ``set_topic_configs``,
    with ``check_partition_budget`` for ``validate_only`` requests; broker configs go to ``entity_configs``."""

    def __init__(self, access: Access, metadata, config: BrokerConfig, entity_configs: EntityConfigs,
                 broker_id: int, *, clustered: bool, internal_topics: Mapping[str, object],
                 create_topic_async: Callable[..., Awaitable[TopicInfo]],
                 delete_topic: Callable[[str], Awaitable[None]],
                 add_partitions: Callable[[str, int], Awaitable[None]],
                 set_topic_configs: Callable[[str, Mapping[str, str]], None],
                 check_partition_budget: Callable[[int, str], None]) -> None:
        self._access = access
        self._metadata = metadata
        self._config = config
        self._entity_configs = entity_configs
        self._broker_id = broker_id
        self._clustered = clustered
        self._internal_topics = internal_topics  # their coordinators create them, never CreateTopics
        self._create_topic_async = create_topic_async
        self._delete_topic = delete_topic
        self._add_partitions = add_partitions
        self._set_topic_configs = set_topic_configs
        self._check_partition_budget = check_partition_budget

    def _require_topic(self, ctx, operation, name: str) -> None:
        _require(self._access.allowed(ctx, operation, access.TOPIC, name), Errors.TopicAuthorizationFailedError,
                 f"{operation.name} on topic {name!r} is not allowed for {ctx.connection.principal}")

    def _require_cluster(self, ctx, operation) -> None:
        _require(self._access.allowed_cluster(ctx, operation), Errors.ClusterAuthorizationFailedError,
                 f"{operation.name} on the cluster is not allowed for {ctx.connection.principal}")

    def _check_replication(self, factor: int, assignments) -> None:
        """Replication factor and explicit assignments against the brokers there are (this one alone on a single
        node)."""
        live = sorted(self._metadata.brokers) if self._clustered else [self._broker_id]
        if factor > len(live):
            raise MetadataError(Errors.InvalidReplicationFactorError,
                                f"Replication factor: {factor} larger than available brokers: {len(live)}.")
        for assignment in assignments:
            replicas = list(assignment)
            unknown = [b for b in replicas if b not in live]
            if unknown or len(set(replicas)) != len(replicas) or not replicas:
                raise MetadataError(Errors.InvalidReplicationAssignmentError,
                                    f"replica assignment {replicas} must name distinct live brokers of {live}")
            if len(replicas) != factor:
                raise MetadataError(Errors.InvalidReplicationAssignmentError,
                                    f"replica assignment {replicas} has {len(replicas)} replicas, not {factor} "
                                    f"like the first partition's")

    async def create_topics(self, ctx, request):
        CreateTopicsResponse = messages.CreateTopicsResponse
        CreatedTopic = CreateTopicsResponse.CreatableTopicResult
        results = []
        seen = {}
        for topic in request.topics:
            seen[topic.name] = seen.get(topic.name, 0) + 1
        create_any = self._access.allowed_cluster(ctx, access.CREATE)  # Kafka: CREATE on the cluster or the topic
        for topic in request.topics:
            configs = {c.name: c.value for c in topic.configs}
            partitions = topic.num_partitions
            factor = topic.replication_factor
            try:
                if seen[topic.name] > 1:
                    raise MetadataError(Errors.InvalidRequestError, f"topic {topic.name!r} appears more than once")
                if not create_any:
                    self._require_topic(ctx, access.CREATE, topic.name)
                if topic.name in self._internal_topics and topic.name not in self._metadata.topics:
                    # its coordinator creates it on first use with its own configs (an existing one: ALREADY_EXISTS)
                    raise MetadataError(Errors.InvalidRequestError,
                                        f"Creation of internal topic {topic.name} is prohibited.")
                if topic.assignments:
                    if partitions != -1 or factor != -1:
                        raise MetadataError(Errors.InvalidRequestError,
                                            "give either replica assignments or partitions and replication factor")
                    partitions = len(topic.assignments)
                    factor = len(topic.assignments[0].broker_ids)
                    ordered = sorted(topic.assignments, key=lambda a: a.partition_index)
                    assignment = [list(a.broker_ids) for a in ordered]
                    if [a.partition_index for a in ordered] != list(range(partitions)):
                        raise MetadataError(Errors.InvalidReplicationAssignmentError,
                                            "replica assignments must cover partitions 0..n-1 once each")
                    self._check_replication(factor, assignment)
                else:
                    assignment = None
                if partitions == -1:
                    partitions = self._config.get("num.partitions")
                if factor == -1:
                    factor = self._config.get("default.replication.factor")
                if factor < 1:
                    raise MetadataError(Errors.InvalidReplicationFactorError,
                                        f"replication factor {factor} must be >= 1")
                self._check_replication(factor, [])
                self._check_topic_configs(configs)
                if request.validate_only:
                    self._metadata.check_new_topic(topic.name, partitions, configs)
                    self._check_partition_budget(partitions * factor if self._clustered else partitions,
                                                 f"topic {topic.name!r}")
                    info = None
                else:
                    info = await self._create_topic_async(
                        topic.name, partitions, configs,
                        replication_factor=factor if self._clustered else None,
                        assignment=assignment if self._clustered else None)
            except Exception as exc:
                code, message = error_of(exc)
                results.append(CreatedTopic(name=topic.name, topic_id=None, error_code=code, error_message=message,
                                            num_partitions=-1, replication_factor=-1, configs=None))
                continue
            if not self._access.allowed(ctx, access.DESCRIBE_CONFIGS, access.TOPIC, topic.name):
                # Kafka: the created topic's configs, partitions and factor only for DESCRIBE_CONFIGS on it
                results.append(CreatedTopic(
                    name=topic.name, topic_id=info.topic_id if info else None, error_code=0, error_message=None,
                    num_partitions=-1, replication_factor=-1, configs=[],
                    topic_config_error_code=Errors.TopicAuthorizationFailedError.errno))
                continue
            results.append(CreatedTopic(
                name=topic.name, topic_id=info.topic_id if info else None, error_code=0, error_message=None,
                num_partitions=partitions, replication_factor=factor,
                configs=[CreatedTopic.CreatableTopicConfigs(name=e.name, value=e.value, read_only=e.read_only,
                                                            config_source=e.config_source, is_sensitive=False)
                         for e in self._topic_entries(configs, None, False, False)]))
        return CreateTopicsResponse(throttle_time_ms=0, topics=results)

    async def delete_topics(self, ctx, request):
        DeleteTopicsResponse = messages.DeleteTopicsResponse
        DeletedTopic = DeleteTopicsResponse.DeletableTopicResult
        if ctx.version >= 6:
            wanted = [(t.name, t.topic_id) for t in request.topics]
        else:
            wanted = [(name, None) for name in request.topic_names]
        results = []
        for name, topic_id in wanted:
            try:
                if not self._config.get("delete.topic.enable"):
                    raise MetadataError(Errors.TopicDeletionDisabledError,
                                        "delete.topic.enable is false on this broker")
                if name is None:
                    info = self._metadata.topics_by_id.get(topic_id)
                    if info is None:
                        raise MetadataError(Errors.UnknownTopicIdError, f"no topic has id {topic_id}")
                    if not self._access.allowed(ctx, access.DESCRIBE, access.TOPIC, info.name):
                        # Kafka: by id, the name is told only to a principal that may DESCRIBE the topic
                        raise MetadataError(Errors.TopicAuthorizationFailedError,
                                            f"DESCRIBE on the topic with id {topic_id} is not allowed")
                    name = info.name
                self._require_topic(ctx, access.DELETE, name)
                await self._delete_topic(name)
                code, message = 0, None
            except Exception as exc:
                code, message = error_of(exc)
            results.append(DeletedTopic(name=name, topic_id=topic_id, error_code=code, error_message=message))
        return DeleteTopicsResponse(throttle_time_ms=0, responses=results)

    async def create_partitions(self, ctx, request):
        from broker_sim.registry.schema_log import SCHEMAS_TOPIC  # here: the registry's modules load only if used

        CreatePartitionsResponse = messages.CreatePartitionsResponse
        results = []
        for topic in request.topics:
            try:
                self._require_topic(ctx, access.ALTER, topic.name)
                _require(topic.name not in self._internal_topics and topic.name != SCHEMAS_TOPIC,
                         Errors.InvalidRequestError, f"The number of partitions of the internal topic "
                         f"{topic.name} cannot be changed.")
                info = self._metadata.check_partition_count(topic.name, topic.count)
                if topic.assignments is not None:
                    if len(topic.assignments) != topic.count - info.partitions:
                        raise MetadataError(Errors.InvalidReplicationAssignmentError,
                                            f"{len(topic.assignments)} assignments for "
                                            f"{topic.count - info.partitions} new partitions")
                    self._check_replication(len(info.replicas_of(0, self._broker_id)),
                                            [a.broker_ids for a in topic.assignments])
                if request.validate_only:
                    self._check_partition_budget(topic.count - info.partitions,
                                                 f"{topic.count - info.partitions} more partitions of {topic.name!r}")
                else:
                    await self._add_partitions(topic.name, topic.count)
                code, message = 0, None
            except Exception as exc:
                code, message = error_of(exc)
            results.append(CreatePartitionsResponse.CreatePartitionsTopicResult(
                name=topic.name, error_code=code, error_message=message))
        return CreatePartitionsResponse(throttle_time_ms=0, results=results)

    def _topic_entries(self, overrides, keys, synonyms, docs) -> list[_Entry]:
        entries = []
        for name, definition in TOPIC_CONFIGS.items():
            if (keys is not None and name not in keys) or _internal(name):
                continue
            broker_name = definition.default
            broker_source = _SOURCES[self._config.source(broker_name)]
            chain = [(broker_name, self._config.raw(broker_name), broker_source)]
            if name in overrides:
                chain.insert(0, (name, overrides[name], DYNAMIC_TOPIC_CONFIG))
            value, source = chain[0][1], chain[0][2]
            shown = [link for link in chain if link[2] != DEFAULT_CONFIG or link[0] not in _NO_KAFKA_DEFAULT]
            entries.append(_Entry(name, value, False, source, shown if synonyms else [],
                                  definition.doc if docs else None,
                                  _config_type(name, BROKER_CONFIGS[broker_name].default)))
        return entries

    def _broker_entries(self, keys, synonyms, docs) -> list[_Entry]:
        entries = []
        for name, definition in BROKER_CONFIGS.items():
            if (keys is not None and name not in keys) or _internal(name):
                continue
            value, source = self._config.described(name)
            source = _SOURCES[source]
            value = None if definition.sensitive else value  # Kafka: sensitive values are null
            chain = [(name, None if definition.sensitive else v, _SOURCES[s]) for v, s in self._config.layers(name)
                     if s != "default" or name not in _NO_KAFKA_DEFAULT]
            entry = _Entry(name, value, name not in DYNAMIC_BROKER_CONFIGS, source, chain if synonyms else [],
                           definition.doc if docs else None, _config_type(name, definition.default))
            entry.sensitive = definition.sensitive
            entries.append(entry)
        per_broker, default = self._config.dynamic  # listener.name.<l>.<config> values, as Kafka shows them
        for layer, source in ((default, DYNAMIC_DEFAULT_BROKER_CONFIG), (per_broker, DYNAMIC_BROKER_CONFIG)):
            for name, value in sorted(layer.items()):
                base = dynamic_listener_config(name)
                if base is None or (keys is not None and name not in keys) or (
                        layer is default and name in per_broker):
                    continue
                sensitive = sensitive_config(name)
                entry = _Entry(name, None if sensitive else value, False, source,
                               [(name, None if sensitive else value, source)] if synonyms else [],
                               f"{base} of one listener" if docs else None, STRING)
                entry.sensitive = sensitive
                entries.append(entry)
        return entries

    async def describe_configs(self, ctx, request):
        DescribeConfigsResponse = messages.DescribeConfigsResponse
        Described = DescribeConfigsResponse.DescribeConfigsResult
        DescribedConfig = Described.DescribeConfigsResourceResult
        results = []
        slices = Slices()
        for resource in request.resources:
            keys = set(resource.configuration_keys) if resource.configuration_keys is not None else None
            try:
                if resource.resource_type == TOPIC:
                    self._require_topic(ctx, access.DESCRIBE_CONFIGS, resource.resource_name)
                    info = self._metadata.get(resource.resource_name)
                    entries = self._topic_entries(info.configs, keys, request.include_synonyms,
                                                  request.include_documentation)
                elif resource.resource_type == BROKER:
                    self._require_cluster(ctx, access.DESCRIBE_CONFIGS)
                    if resource.resource_name not in ("", str(self._broker_id)):
                        raise MetadataError(Errors.InvalidRequestError,
                                            f"this is broker {self._broker_id}, not {resource.resource_name!r}")
                    entries = self._broker_entries(keys, request.include_synonyms, request.include_documentation)
                elif resource.resource_type == BROKER_LOGGER:
                    self._require_cluster(ctx, access.DESCRIBE_CONFIGS)
                    self._require_this_broker(resource.resource_name)
                    entries = [_Entry(name, level, False, DYNAMIC_BROKER_LOGGER_CONFIG, [], None, STRING)
                               for name, level in logger_levels.loggers() if keys is None or name in keys]
                elif resource.resource_type in _ENTITY_RESOURCES:
                    self._require_entity(ctx, access.DESCRIBE_CONFIGS, resource.resource_type, resource.resource_name)
                    entries = self._entity_entries(resource.resource_type, resource.resource_name, keys,
                                                   request.include_synonyms)
                else:
                    raise MetadataError(Errors.InvalidRequestError, f"resource type {resource.resource_type} is not "
                                                                    f"described here (2 topic, 4 broker)")
                code, message = 0, ""  # Kafka: the empty message of NONE
            except Exception as exc:
                code, message = error_of(exc)
                entries = []
            configs = [DescribedConfig(
                name=e.name, value=e.value, read_only=e.read_only, config_source=e.config_source,
                is_default=e.is_default, is_sensitive=e.sensitive,
                synonyms=[DescribedConfig.DescribeConfigsSynonym(name=n, value=v, source=s) for n, v, s in e.synonyms],
                config_type=e.type, documentation=e.doc) for e in entries]
            results.append(Described(error_code=code, error_message=message, resource_type=resource.resource_type,
                                     resource_name=resource.resource_name, configs=configs))
            if slices.due():  # a request naming thousands of resources lets other connections in meanwhile
                await asyncio.sleep(0)
        return DescribeConfigsResponse(throttle_time_ms=0, results=results)

    def _require_entity(self, ctx, operation, resource_type: int, name: str) -> None:
        """Kafka's AuthHelper: a group's configs need the operation on the group, a subscription's on the cluster."""
        if resource_type == GROUP:
            _require(self._access.allowed(ctx, operation, access.GROUP, name), Errors.GroupAuthorizationFailedError,
                     f"{operation.name} on group {name!r} is not allowed for {ctx.connection.principal}")
        else:
            self._require_cluster(ctx, operation)

    def _entity_entries(self, resource_type: int, name: str, keys, synonyms) -> list[_Entry]:
        """Every config of a group or subscription in Kafka's order: the override (a dynamic source), else the
        default (a group's shows itself as its synonym, a subscription's none, as Kafka answers)."""
        entity_type, table, dynamic = _ENTITY_RESOURCES[resource_type]
        overrides = self._entity_configs.get(entity_type, name) if name else {}
        defaults = group_defaults(self._config) if resource_type == GROUP else {
            d.name: d.default for d in table.values()}
        entries = []
        for config, definition in table.items():
            if keys is not None and config not in keys:
                continue
            if config in overrides:
                value, source, chain = overrides[config], dynamic, [(config, overrides[config], dynamic)]
            else:
                value, source = defaults[config], DEFAULT_CONFIG
                chain = [(config, value, DEFAULT_CONFIG)] if resource_type == GROUP else []
            entries.append(_Entry(config, value, False, source, chain if synonyms else [], None, definition.type))
        return entries

    async def _set_entity_configs(self, resource_type: int, name: str, configs: dict[str, str],
                                  validate_only: bool) -> None:
        """Validate a group's or subscription's configs after the alteration (Kafka's rules and errors), then
        store them (every broker of a cluster sees them: they are entity configs)."""
        entity_type = _ENTITY_RESOURCES[resource_type][0]
        for config, value in configs.items():
            if value is None:
                raise MetadataError(Errors.InvalidRequestError, f"Null value not supported for : {config}")
            if len(value) > CONFIG_VALUE_MAX_CHARS:
                raise MetadataError(Errors.InvalidConfigurationError,
                                    f"the value of config {config!r} is {len(value)} characters long; at most "
                                    f"{CONFIG_VALUE_MAX_CHARS} are accepted")
        try:
            if resource_type == GROUP:
                validate_group_configs(name, configs, self._config)
            else:
                validate_client_metrics(name, configs)
        except ResourceConfigError as exc:
            raise MetadataError(exc.error, str(exc)) from None
        stored = self._entity_configs.entities(entity_type)
        if name not in stored and configs and len(stored) >= MAX_CONFIG_ENTITIES:
            raise MetadataError(Errors.PolicyViolationError,
                                f"{len(stored)} {entity_type} have configs already: pylog keeps at most "
                                f"{MAX_CONFIG_ENTITIES}")
        if validate_only:
            return
        current = stored.get(name, {})
        await asyncio.get_running_loop().run_in_executor(
            None, self._entity_configs.alter, entity_type, name, configs, [k for k in current if k not in configs])
        log.info("configs of %s %r are now %s", entity_type, name, configs)

    async def list_config_resources(self, ctx, request):
        """ListConfigResources (74): v0 the client-metrics subscriptions (KIP-714); v1 the config resources of the
        types asked (all five when none), in Kafka's order: groups with configs, subscriptions, each broker's
        loggers, each broker, the topics.  DESCRIBE_CONFIGS on the cluster is needed (CLUSTER_AUTHORIZATION_FAILED),
        a type Kafka does not list is UNSUPPORTED_VERSION, as Kafka's KafkaApis answers."""
        Response = messages.ListConfigResourcesResponse
        Resource = Response.ConfigResource
        if not self._access.allowed_cluster(ctx, access.DESCRIBE_CONFIGS):
            return Response(throttle_time_ms=0, error_code=Errors.ClusterAuthorizationFailedError.errno,
                            config_resources=[])
        if ctx.version == 0:
            return Response(throttle_time_ms=0, error_code=0, config_resources=[
                Resource(resource_name=name) for name in self._entity_configs.entities("client-metrics")])
        asked = list(request.resource_types or ()) or list(LISTED_RESOURCE_TYPES)
        if any(t not in LISTED_RESOURCE_TYPES for t in asked):
            return Response(throttle_time_ms=0, error_code=Errors.UnsupportedVersionError.errno, config_resources=[])
        brokers = [str(b) for b in sorted(self._metadata.brokers)] if self._clustered else [str(self._broker_id)]
        listed = []
        for resource_type in LISTED_RESOURCE_TYPES:
            if resource_type not in asked:
                continue
            if resource_type in _ENTITY_RESOURCES:
                names = list(self._entity_configs.entities(_ENTITY_RESOURCES[resource_type][0]))
            elif resource_type in (BROKER_LOGGER, BROKER):
                names = brokers
            else:
                names = list(self._metadata.topics)
            listed += [Resource(resource_name=name, resource_type=resource_type) for name in names]
        return Response(throttle_time_ms=0, error_code=0, config_resources=listed)

    def _require_this_broker(self, name: str) -> None:
        """A BROKER_LOGGER resource names this broker's id (Kafka: never empty, never another broker's)."""
        if not name:
            raise MetadataError(Errors.InvalidRequestError, "Broker id must not be empty")
        if name != str(self._broker_id):
            raise MetadataError(Errors.InvalidRequestError,
                                f"Unexpected broker id, expected {self._broker_id}, but received {name}")

    def _broker_entity(self, name: str) -> str:
        """The /config/brokers entity of a BROKER resource name: <default> for "", else a broker id."""
        if name == "":
            return "<default>"
        if not name.isdigit():
            raise MetadataError(Errors.InvalidRequestError, f"broker resource name {name!r} is not a broker id")
        if not self._clustered and int(name) != self._broker_id:
            raise MetadataError(Errors.InvalidRequestError, f"this is broker {self._broker_id}, not {name}")
        return name

    async def _set_broker_configs(self, name: str, configs: dict[str, str], validate_only: bool) -> None:
        """Replace a broker's (or the default's) dynamic configs; they apply to every partition at once."""
        entity = self._broker_entity(name)
        try:
            validate_dynamic_broker_configs(configs, per_broker=entity != "<default>")
        except NotDynamicError as exc:  # Kafka: INVALID_REQUEST for a config that may not change here
            raise MetadataError(Errors.InvalidRequestError, str(exc)) from None
        except ConfigError as exc:  # Kafka: INVALID_REQUEST for a broker value that does not parse (topics: 40)
            raise MetadataError(Errors.InvalidRequestError, str(exc)) from None
        if validate_only:
            return
        current = self._entity_configs.get("brokers", entity)
        await asyncio.get_running_loop().run_in_executor(
            None, self._entity_configs.alter, "brokers", entity, configs, [k for k in current if k not in configs])
        log.info("dynamic configs of broker %s are now %s", entity, shown_configs(configs))

    async def _alter_each(self, ctx, request, broker_configs, topic_configs, response_class, *, loggers=False,
                          entity_configs=None):
        """The loop AlterConfigs and IncrementalAlterConfigs share: per resource, check ALTER_CONFIGS, compute the
        new configs (``broker_configs(entity, resource)`` / ``topic_configs(info, resource)`` /
        ``entity_configs(overrides, resource)`` for groups and subscriptions) and store them; an error answers that
        resource only.  ``loggers``: BROKER_LOGGER resources are altered too (only IncrementalAlterConfigs can, as
        on Kafka)."""
        entity_configs = entity_configs or topic_configs
        results = []
        for resource in request.resources:
            try:
                if resource.resource_type == BROKER:
                    self._require_cluster(ctx, access.ALTER_CONFIGS)
                    configs = broker_configs(self._broker_entity(resource.resource_name), resource)
                    await self._set_broker_configs(resource.resource_name, configs, request.validate_only)
                elif resource.resource_type == TOPIC:
                    self._require_topic(ctx, access.ALTER_CONFIGS, resource.resource_name)
                    info = self._metadata.get(resource.resource_name)
                    self._alter_topic_configs(info, topic_configs(info, resource), request.validate_only)
                elif resource.resource_type in _ENTITY_RESOURCES:
                    kind, name = resource.resource_type, resource.resource_name
                    self._require_entity(ctx, access.ALTER_CONFIGS, kind, name)
                    current = self._entity_configs.get(_ENTITY_RESOURCES[kind][0], name) if name else {}
                    await self._set_entity_configs(kind, name, entity_configs(current, resource),
                                                   request.validate_only)
                elif resource.resource_type == BROKER_LOGGER and loggers:
                    self._require_cluster(ctx, access.ALTER_CONFIGS)
                    self._require_this_broker(resource.resource_name)
                    logger_levels.check(resource.configs)
                    if not request.validate_only:
                        logger_levels.apply(resource.configs)
                        log.info("logger levels set: %s", [(c.name, c.value) for c in resource.configs])
                else:
                    raise MetadataError(Errors.InvalidRequestError,
                                        f"resource type {resource.resource_type} cannot be altered (2 topic, 4 broker)")
                code, message = 0, None
            except Exception as exc:
                code, message = error_of(exc)
            results.append(response_class.AlterConfigsResourceResponse(
                error_code=code, error_message=message, resource_type=resource.resource_type,
                resource_name=resource.resource_name))
        return response_class(throttle_time_ms=0, responses=results)

    async def incremental_alter_configs(self, ctx, request):
        """Each config SET, DELETE, APPENDed or SUBTRACTed on the resource's current overrides."""
        return await self._alter_each(
            ctx, request,
            lambda entity, resource: _altered(self._entity_configs.get("brokers", entity), resource.configs,
                                              self._broker_value),
            lambda info, resource: _altered(info.configs, resource.configs, self._config.topic_default),
            messages.IncrementalAlterConfigsResponse, loggers=True,
            entity_configs=lambda current, resource: _entity_altered(current, resource.configs))

    def _broker_value(self, name: str) -> str:
        """A broker config's value below the dynamic layer being altered: its static value or default."""
        return self._config.described(name)[0] if name in BROKER_CONFIGS else ""

    def _check_topic_configs(self, configs: dict[str, str]) -> None:
        """INVALID_CONFIG for a value that does not parse, or one this broker cannot honour (schema validation
        without schema.registry.listeners)."""
        try:
            self._config.check_topic_configs(configs)
        except ConfigError as exc:
            raise MetadataError(Errors.InvalidConfigurationError, str(exc)) from None

    def _alter_topic_configs(self, info, configs: dict[str, str], validate_only: bool) -> None:
        self._check_topic_configs(configs)
        self._check_schemas_policy(info.name, configs)
        if not validate_only:
            self._set_topic_configs(info.name, configs)

    def _check_schemas_policy(self, name: str, configs: dict[str, str]) -> None:
        """POLICY_VIOLATION for ``_schemas`` overrides whose cleanup.policy is not exactly ``compact``, on a
        broker serving the registry: its log must keep the last record of every key (Confluent's registry
        refuses to start on another policy, ``KafkaStore.verifySchemaTopic``).  Under ``compact`` alone,
        retention.ms and retention.bytes do not apply, so they may still be altered."""
        from broker_sim.registry.schema_log import SCHEMAS_TOPIC  # here: the registry's modules load only if used

        if name != SCHEMAS_TOPIC or SCHEMAS_TOPIC not in self._internal_topics:  # no registry here: a plain topic
            return
        policy = configs.get("cleanup.policy", self._config.topic_default("cleanup.policy"))
        if {p.strip() for p in policy.split(",")} != {"compact"}:
            raise MetadataError(Errors.PolicyViolationError,
                                f"Topic {SCHEMAS_TOPIC} must keep cleanup.policy=compact (it would be {policy!r}): "
                                f"it is the schema registry's log")

    async def alter_configs(self, ctx, request):
        """AlterConfigs (API 33), Kafka's legacy form: the given configs *replace* the resource's overrides."""
        def given(_, resource):
            return {c.name: c.value for c in resource.configs}
        return await self._alter_each(ctx, request, given, given, messages.AlterConfigsResponse)
