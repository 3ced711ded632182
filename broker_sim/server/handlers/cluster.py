"""ApiVersions, Metadata and DescribeCluster."""
from __future__ import annotations

import kafka.errors as Errors
from kafka.protocol.admin import DescribeClusterResponse
from kafka.protocol.metadata import MetadataResponse

from broker_sim.controller.metadata import MetadataError
from broker_sim.protocol.apis import api_versions_response
from broker_sim.server.handlers import access

NOT_REQUESTED = None  # authorized_operations when the client did not ask (INT32_MIN on the wire)

Topic = MetadataResponse.MetadataResponseTopic
PartitionMeta = Topic.MetadataResponsePartition


async def api_versions(broker, ctx, request):
    return api_versions_response(ctx.version)


def _topic_metadata(broker, info) -> Topic:
    if broker.cluster is not None:
        return _cluster_topic_metadata(broker, info)
    partitions = []
    for partition in broker.replicas.topic_partitions(info.name):
        partitions.append(PartitionMeta(
            error_code=0, partition_index=partition.index, leader_id=broker.broker_id,
            leader_epoch=partition.leader_epoch, replica_nodes=[broker.broker_id],
            isr_nodes=[broker.broker_id], offline_replicas=[]))
    return Topic(error_code=0, name=info.name, topic_id=info.topic_id, is_internal=info.internal,
                 partitions=partitions)


def _cluster_topic_metadata(broker, info) -> Topic:
    """A topic as the cluster state says: leader, epoch, ISR from ZooKeeper; LEADER_NOT_AVAILABLE while leaderless."""
    store = broker.metadata
    states, live = store.partition_states, store.brokers
    partitions = []
    for index in range(info.partitions):
        replicas = info.replicas_of(index, broker.broker_id)
        state = states.get((info.name, index))
        leader = state.leader if state is not None and state.leader in live else -1
        partitions.append(PartitionMeta(
            error_code=0 if leader >= 0 else Errors.LeaderNotAvailableError.errno, partition_index=index,
            leader_id=leader, leader_epoch=state.leader_epoch if state is not None else -1,
            replica_nodes=replicas, isr_nodes=list(state.isr) if state is not None else [],
            offline_replicas=[r for r in replicas if r not in live]))
    return Topic(error_code=0, name=info.name, topic_id=info.topic_id, is_internal=info.internal,
                 partitions=partitions)


def _brokers(broker, ctx) -> tuple[list[tuple[int, str, int, str | None]], int]:
    """(id, host, port, rack) of the live brokers on the listener the request came in on, and the controller's id.

    As Kafka's metadata cache answers per listener: a broker that does not
    advertise the client's listener is left out.
    """
    listener = getattr(ctx.connection, "listener", None)
    if broker.cluster is None:
        endpoint = broker.endpoint_on(listener)
        return [(broker.broker_id, endpoint.host, endpoint.port, None)], broker.broker_id
    store = broker.metadata
    found = [b.on(listener) if listener else b for b in sorted(store.brokers.values(), key=lambda b: b.broker_id)]
    return [(b.broker_id, b.host, b.port, b.rack) for b in found if b is not None], store.controller_id


def _error_topic(error, name=None, topic_id=None) -> Topic:
    return Topic(error_code=error.errno, name=name, topic_id=topic_id, is_internal=False, partitions=[])


def _describable(broker, ctx, name: str) -> bool:
    return access.allowed(broker, ctx, access.DESCRIBE, access.TOPIC, name)


async def metadata(broker, ctx, request):
    """Kafka's ACL rules: a request for all topics lists those the principal may DESCRIBE; a named topic it may
    not DESCRIBE is answered TOPIC_AUTHORIZATION_FAILED (whether it exists or not), and auto-creation needs
    CREATE on the cluster or the topic."""
    store = broker.metadata
    if request.topics is None or (ctx.version == 0 and not request.topics):
        topics = [_topic_metadata(broker, info) for info in list(store.topics.values())
                  if _describable(broker, ctx, info.name)]
    else:
        allow_create = request.allow_auto_topic_creation if ctx.version >= 4 else True
        topics = []
        for wanted in request.topics:
            name = wanted.name
            if name is None and ctx.version >= 10:
                info = store.topics_by_id.get(wanted.topic_id)
                if info is not None and not _describable(broker, ctx, info.name):
                    # Kafka: ids are not sensitive, names are: the id answered, the name withheld
                    topics.append(_error_topic(Errors.TopicAuthorizationFailedError, topic_id=wanted.topic_id))
                    continue
                topics.append(_topic_metadata(broker, info) if info is not None
                              else _error_topic(Errors.UnknownTopicIdError, topic_id=wanted.topic_id))
                continue
            if not _describable(broker, ctx, name):
                topics.append(_error_topic(Errors.TopicAuthorizationFailedError, name=name))
                continue
            info = store.topics.get(name)
            if info is None and allow_create and broker.config.get("auto.create.topics.enable") and not (
                    access.allowed_cluster(broker, ctx, access.CREATE)
                    or access.allowed(broker, ctx, access.CREATE, access.TOPIC, name)):
                topics.append(_error_topic(Errors.TopicAuthorizationFailedError, name=name))
                continue
            if info is None and allow_create and broker.config.get("auto.create.topics.enable"):
                try:
                    broker.auto_create_topic(name)
                except MetadataError as exc:
                    topics.append(_error_topic(exc.error, name=name))
                    continue
                info = store.topics.get(name)
                if info is None:  # created in ZooKeeper, not in this broker's view yet: clients retry
                    topics.append(_error_topic(Errors.LeaderNotAvailableError, name=name))
                    continue
            topics.append(_topic_metadata(broker, info) if info is not None
                          else _error_topic(Errors.UnknownTopicOrPartitionError, name=name))
    if ctx.version >= 8 and request.include_topic_authorized_operations:
        for topic in topics:
            if not topic.error_code and topic.name:
                topic.authorized_operations = access.authorized_operations(broker, ctx, access.TOPIC, topic.name)
    cluster_fields = {}  # kafka-python's name for cluster_authorized_operations (v8-10)
    if 8 <= ctx.version <= 10 and request.include_cluster_authorized_operations:
        cluster_fields["authorized_operations"] = access.cluster_operations(broker, ctx)
    brokers, controller_id = _brokers(broker, ctx)
    return MetadataResponse(throttle_time_ms=0, cluster_id=store.cluster_id, controller_id=controller_id,
                            **cluster_fields,
                            topics=topics, brokers=[MetadataResponse.MetadataResponseBroker(
                                node_id=node, host=host, port=port, rack=rack) for node, host, port, rack in brokers])


async def describe_cluster(broker, ctx, request):
    if ctx.version >= 1 and request.endpoint_type != 1:
        return DescribeClusterResponse(
            throttle_time_ms=0, error_code=Errors.UnsupportedEndpointTypeError.errno,
            error_message=f"endpoint type {request.endpoint_type} is not served by a broker",
            endpoint_type=request.endpoint_type, cluster_id=broker.metadata.cluster_id, brokers=[])
    brokers, controller_id = _brokers(broker, ctx)
    operations = access.cluster_operations(broker, ctx) if request.include_cluster_authorized_operations \
        else NOT_REQUESTED
    return DescribeClusterResponse(
        throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=1, cluster_id=broker.metadata.cluster_id,
        controller_id=controller_id, authorized_operations=operations,
        brokers=[DescribeClusterResponse.DescribeClusterBroker(broker_id=node, host=host, port=port, rack=rack)
                 for node, host, port, rack in brokers])
