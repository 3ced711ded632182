"""CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs and IncrementalAlterConfigs.

Kafka's rules kept here: topic names by ``Topic.validate`` (INVALID_TOPIC_EXCEPTION); partition
counts within the broker's ``max.broker.partitions`` (KIP-578; POLICY_VIOLATION naming the limit
and the numbers), checked by ``validate_only`` requests too; a topic whose directories or
metadata cannot be written answers KAFKA_STORAGE_ERROR and leaves nothing behind.  Big topics
are created in slices between which the event loop serves other requests.
"""
from __future__ import annotations

import asyncio
import logging

import kafka.errors as Errors
from kafka.protocol.admin import (
    AlterConfigsResponse, CreatePartitionsResponse, CreateTopicsResponse, DeleteTopicsResponse, DescribeConfigsResponse,
    IncrementalAlterConfigsResponse,
)

from broker_sim.config import (
    BROKER_CONFIGS, DYNAMIC_BROKER_CONFIGS, TOPIC_CONFIGS, ConfigError, validate_dynamic_broker_configs,
    validate_topic_configs,
)
from broker_sim.controller.metadata import MetadataError
from broker_sim.server.handlers import access
from broker_sim.errors import error_of


def _require(allowed: bool, error, message: str) -> None:
    if not allowed:
        raise MetadataError(error, message)


def _require_topic(broker, ctx, operation, name: str) -> None:
    _require(access.allowed(broker, ctx, operation, access.TOPIC, name), Errors.TopicAuthorizationFailedError,
             f"{operation.name} on topic {name!r} is not allowed for {ctx.connection.principal}")


def _require_cluster(broker, ctx, operation) -> None:
    _require(access.allowed_cluster(broker, ctx, operation), Errors.ClusterAuthorizationFailedError,
             f"{operation.name} on the cluster is not allowed for {ctx.connection.principal}")


log = logging.getLogger(__name__)
TOPIC, BROKER = 2, 4
# DescribeConfigs config sources
DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = \
    1, 2, 3, 4, 5
_SOURCES = {"dynamic": DYNAMIC_BROKER_CONFIG, "dynamic-default": DYNAMIC_DEFAULT_BROKER_CONFIG,
            "static": STATIC_BROKER_CONFIG, "default": DEFAULT_CONFIG}
# DescribeConfigs config types
BOOLEAN, STRING, LONG, DOUBLE, LIST = 1, 2, 5, 6, 7
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_LIST_CONFIGS = {"cleanup.policy", "log.cleanup.policy"}

CreatedTopic = CreateTopicsResponse.CreatableTopicResult


def _check_replication(broker, factor: int, assignments) -> None:
    """Replication factor and explicit assignments against the brokers there are (this one alone on a single node)."""
    live = sorted(broker.metadata.brokers) if broker.cluster is not None else [broker.broker_id]
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


async def create_topics(broker, ctx, request):
    results = []
    seen = {}
    for topic in request.topics:
        seen[topic.name] = seen.get(topic.name, 0) + 1
    create_any = access.allowed_cluster(broker, ctx, access.CREATE)  # Kafka: CREATE on the cluster or the topic
    for topic in request.topics:
        configs = {c.name: c.value for c in topic.configs}
        partitions = topic.num_partitions
        factor = topic.replication_factor
        try:
            if seen[topic.name] > 1:
                raise MetadataError(Errors.InvalidRequestError, f"topic {topic.name!r} appears more than once")
            if not create_any:
                _require_topic(broker, ctx, access.CREATE, topic.name)
            if topic.name in broker.internal_topics and topic.name not in broker.metadata.topics:
                # its coordinator creates it on first use with its own configs (an existing one: ALREADY_EXISTS)
                raise MetadataError(Errors.InvalidRequestError,
                                    f"Creation of internal topic {topic.name} is prohibited.")
            if topic.assignments:
                if partitions != -1 or factor != -1:
                    raise MetadataError(Errors.InvalidRequestError,
                                        "give either replica assignments or partitions and replication factor")
                partitions = len(topic.assignments)
                factor = len(topic.assignments[0].broker_ids)
                assignment = [list(a.broker_ids) for a in sorted(topic.assignments, key=lambda a: a.partition_index)]
                if [a.partition_index for a in sorted(topic.assignments, key=lambda a: a.partition_index)] \
                        != list(range(partitions)):
                    raise MetadataError(Errors.InvalidReplicationAssignmentError,
                                        "replica assignments must cover partitions 0..n-1 once each")
                _check_replication(broker, factor, assignment)
            else:
                assignment = None
            if partitions == -1:
                partitions = broker.config.get("num.partitions")
            if factor == -1:
                factor = broker.config.get("default.replication.factor")
            if factor < 1:
                raise MetadataError(Errors.InvalidReplicationFactorError, f"replication factor {factor} must be >= 1")
            _check_replication(broker, factor, [])
            if request.validate_only:
                broker.metadata.check_new_topic(topic.name, partitions, configs)
                broker.check_partition_budget(partitions * factor if broker.cluster is not None else partitions,
                                              f"topic {topic.name!r}")
                info = None
            else:
                info = await broker.create_topic_async(
                    topic.name, partitions, configs,
                    replication_factor=factor if broker.cluster is not None else None,
                    assignment=assignment if broker.cluster is not None else None)
        except Exception as exc:
            code, message = error_of(exc)
            results.append(CreatedTopic(name=topic.name, topic_id=None, error_code=code, error_message=message,
                                        num_partitions=-1, replication_factor=-1, configs=None))
            continue
        if not access.allowed(broker, ctx, access.DESCRIBE_CONFIGS, access.TOPIC, topic.name):
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
                     for e in _topic_entries(broker, configs, None, False, False)]))
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)


DeletedTopic = DeleteTopicsResponse.DeletableTopicResult


async def delete_topics(broker, ctx, request):
    if ctx.version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, None) for name in request.topic_names]
    results = []
    for name, topic_id in wanted:
        try:
            if not broker.config.get("delete.topic.enable"):
                raise MetadataError(Errors.TopicDeletionDisabledError, "delete.topic.enable is false on this broker")
            if name is None:
                info = broker.metadata.topics_by_id.get(topic_id)
                if info is None:
                    raise MetadataError(Errors.UnknownTopicIdError, f"no topic has id {topic_id}")
                if not access.allowed(broker, ctx, access.DESCRIBE, access.TOPIC, info.name):
                    # Kafka: by id, the name is told only to a principal that may DESCRIBE the topic
                    raise MetadataError(Errors.TopicAuthorizationFailedError,
                                        f"DESCRIBE on the topic with id {topic_id} is not allowed")
                name = info.name
            _require_topic(broker, ctx, access.DELETE, name)
            await broker.delete_topic(name)
            code, message = 0, None
        except Exception as exc:
            code, message = error_of(exc)
        results.append(DeletedTopic(name=name, topic_id=topic_id, error_code=code, error_message=message))
    return DeleteTopicsResponse(throttle_time_ms=0, responses=results)


async def create_partitions(broker, ctx, request):
    results = []
    for topic in request.topics:
        try:
            _require_topic(broker, ctx, access.ALTER, topic.name)
            info = broker.metadata.check_partition_count(topic.name, topic.count)
            if topic.assignments is not None:
                if len(topic.assignments) != topic.count - info.partitions:
                    raise MetadataError(Errors.InvalidReplicationAssignmentError,
                                        f"{len(topic.assignments)} assignments for "
                                        f"{topic.count - info.partitions} new partitions")
                _check_replication(broker, len(info.replicas_of(0, broker.broker_id)),
                                   [a.broker_ids for a in topic.assignments])
            if request.validate_only:
                broker.check_partition_budget(topic.count - info.partitions,
                                              f"{topic.count - info.partitions} more partitions of {topic.name!r}")
            else:
                await broker.add_partitions(topic.name, topic.count)
            code, message = 0, None
        except Exception as exc:
            code, message = error_of(exc)
        results.append(CreatePartitionsResponse.CreatePartitionsTopicResult(
            name=topic.name, error_code=code, error_message=message))
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)


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


def _topic_entries(broker, overrides, keys, synonyms, docs) -> list[_Entry]:
    entries = []
    for name, definition in TOPIC_CONFIGS.items():
        if (keys is not None and name not in keys) or _internal(name):
            continue
        broker_name = definition.default
        broker_source = _SOURCES[broker.config.source(broker_name)]
        chain = []
        if name in overrides:
            chain.append((name, overrides[name], DYNAMIC_TOPIC_CONFIG))
        chain.append((broker_name, broker.config.raw(broker_name), broker_source))
        value, source = chain[0][1], chain[0][2]
        entries.append(_Entry(name, value, False, source, chain if synonyms else [],
                              definition.doc if docs else None,
                              _config_type(name, BROKER_CONFIGS[broker_name].default)))
    return entries


def _broker_entries(broker, keys, synonyms, docs) -> list[_Entry]:
    entries = []
    for name, definition in BROKER_CONFIGS.items():
        if (keys is not None and name not in keys) or _internal(name):
            continue
        source = _SOURCES[broker.config.source(name)]
        value = None if definition.sensitive else broker.config.raw(name)  # Kafka: sensitive values are null
        entry = _Entry(name, value, name not in DYNAMIC_BROKER_CONFIGS, source,
                       [(name, value, source)] if synonyms else [],
                       definition.doc if docs else None, _config_type(name, definition.default))
        entry.sensitive = definition.sensitive
        entries.append(entry)
    return entries


Described = DescribeConfigsResponse.DescribeConfigsResult
DescribedConfig = Described.DescribeConfigsResourceResult


async def describe_configs(broker, ctx, request):
    results = []
    for resource in request.resources:
        keys = set(resource.configuration_keys) if resource.configuration_keys is not None else None
        try:
            if resource.resource_type == TOPIC:
                _require_topic(broker, ctx, access.DESCRIBE_CONFIGS, resource.resource_name)
                info = broker.metadata.get(resource.resource_name)
                entries = _topic_entries(broker, info.configs, keys, request.include_synonyms,
                                         request.include_documentation)
            elif resource.resource_type == BROKER:
                _require_cluster(broker, ctx, access.DESCRIBE_CONFIGS)
                if resource.resource_name not in ("", str(broker.broker_id)):
                    raise MetadataError(Errors.InvalidRequestError,
                                        f"this is broker {broker.broker_id}, not {resource.resource_name!r}")
                entries = _broker_entries(broker, keys, request.include_synonyms, request.include_documentation)
            else:
                raise MetadataError(Errors.InvalidRequestError,
                                    f"resource type {resource.resource_type} is not described here (2 topic, 4 broker)")
            code, message = 0, None
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
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)


def _altered(current: dict[str, str], changes) -> dict[str, str]:
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
            items = [v for v in configs.get(name, "").split(",") if v]
            for item in (value or "").split(","):
                if op == APPEND and item and item not in items:
                    items.append(item)
                elif op == SUBTRACT and item in items:
                    items.remove(item)
            configs[name] = ",".join(items)
        else:
            raise MetadataError(Errors.InvalidRequestError, f"unknown config operation {op} for {name!r}")
    return configs


def _broker_entity(broker, name: str) -> str:
    """The /config/brokers entity of a BROKER resource name: <default> for "", else a broker id."""
    if name == "":
        return "<default>"
    if not name.isdigit():
        raise MetadataError(Errors.InvalidRequestError, f"broker resource name {name!r} is not a broker id")
    if broker.cluster is None and int(name) != broker.broker_id:
        raise MetadataError(Errors.InvalidRequestError, f"this is broker {broker.broker_id}, not {name}")
    return name


async def _set_broker_configs(broker, name: str, configs: dict[str, str], validate_only: bool) -> None:
    """Replace a broker's (or the default's) dynamic configs; they apply to every partition at once."""
    entity = _broker_entity(broker, name)
    try:
        validate_dynamic_broker_configs(configs)
    except ConfigError as exc:
        error = Errors.InvalidRequestError if "dynamically" in str(exc) else Errors.InvalidConfigurationError
        raise MetadataError(error, str(exc)) from None
    if validate_only:
        return
    current = broker.entity_configs.get("brokers", entity)
    await asyncio.get_running_loop().run_in_executor(
        None, broker.entity_configs.alter, "brokers", entity, configs, [k for k in current if k not in configs])
    log.info("dynamic configs of broker %s are now %s", entity, configs)


async def _alter_each(broker, ctx, request, broker_configs, topic_configs, response_class):
    """The loop AlterConfigs and IncrementalAlterConfigs share: per resource, check ALTER_CONFIGS, compute the
    new configs (``broker_configs(entity, resource)`` / ``topic_configs(info, resource)``) and store them;
    an error answers that resource only."""
    results = []
    for resource in request.resources:
        try:
            if resource.resource_type == BROKER:
                _require_cluster(broker, ctx, access.ALTER_CONFIGS)
                configs = broker_configs(_broker_entity(broker, resource.resource_name), resource)
                await _set_broker_configs(broker, resource.resource_name, configs, request.validate_only)
            elif resource.resource_type == TOPIC:
                _require_topic(broker, ctx, access.ALTER_CONFIGS, resource.resource_name)
                info = broker.metadata.get(resource.resource_name)
                _set_topic_configs(broker, info, topic_configs(info, resource), request.validate_only)
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


async def incremental_alter_configs(broker, ctx, request):
    """Each config SET, DELETE, APPENDed or SUBTRACTed on the resource's current overrides."""
    return await _alter_each(
        broker, ctx, request,
        lambda entity, resource: _altered(broker.entity_configs.get("brokers", entity), resource.configs),
        lambda info, resource: _altered(info.configs, resource.configs), IncrementalAlterConfigsResponse)


def _set_topic_configs(broker, info, configs: dict[str, str], validate_only: bool) -> None:
    try:
        validate_topic_configs(configs)
    except ConfigError as exc:
        raise MetadataError(Errors.InvalidConfigurationError, str(exc)) from None
    if not validate_only:
        broker.set_topic_configs(info.name, configs)


async def alter_configs(broker, ctx, request):
    """AlterConfigs (API 33), Kafka's legacy form: the given configs *replace* the resource's overrides."""
    def given(_, resource):
        return {c.name: c.value for c in resource.configs}
    return await _alter_each(broker, ctx, request, given, given, AlterConfigsResponse)
