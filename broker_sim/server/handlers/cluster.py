"""ApiVersions, Metadata and DescribeCluster: what the metadata store and the local replicas say.

``ClusterApis`` answers from the topics (``MetadataStore`` or, in a cluster, the ``ZkMetadataStore``'s
partition states and live brokers), the local replicas on a single node, and this broker's endpoint on
the client's listener; Metadata auto-creates topics through the broker's ``auto_create_topic``.
"""
from __future__ import annotations

import asyncio
from typing import Callable

import kafka.errors as Errors

from broker_sim.controller.cluster_state import BrokerEndpoint
from broker_sim.controller.metadata import MetadataError, TopicInfo, validate_topic_name
from broker_sim.protocol.apis import api_versions_response, messages
from broker_sim.server.handlers.access import CREATE, DESCRIBE, TOPIC, Access
from broker_sim.server.request_slicing import Slices

NOT_REQUESTED = None  # authorized_operations when the client did not ask (INT32_MIN on the wire)


class ClusterApis:
    def __init__(self, access: Access, metadata, replicas, config, broker_id: int, *, clustered: bool,
                 endpoint_on: Callable[[str | None], BrokerEndpoint],
                 auto_create_topic: Callable[[str], TopicInfo]) -> None:
        self._access = access
        self._metadata = metadata
        self._replicas = replicas
        self._config = config
        self._broker_id = broker_id
        self._clustered = clustered
        self._endpoint_on = endpoint_on
        self._auto_create_topic = auto_create_topic

    async def api_versions(self, ctx, request):
        return api_versions_response(ctx.version)

    def _topic_metadata(self, info):
        Topic = messages.MetadataResponse.MetadataResponseTopic
        PartitionMeta = Topic.MetadataResponsePartition
        if self._clustered:
            return self._cluster_topic_metadata(info)
        me = self._broker_id
        partitions = []
        for partition in self._replicas.topic_partitions(info.name):
            partitions.append(PartitionMeta(
                error_code=0, partition_index=partition.index, leader_id=me,
                leader_epoch=partition.leader_epoch, replica_nodes=[me], isr_nodes=[me], offline_replicas=[]))
        return Topic(error_code=0, name=info.name, topic_id=info.topic_id, is_internal=info.internal,
                     partitions=partitions)

    def _cluster_topic_metadata(self, info):
        """A topic as the cluster state says: leader, epoch, ISR from ZooKeeper; LEADER_NOT_AVAILABLE while
        leaderless."""
        Topic = messages.MetadataResponse.MetadataResponseTopic
        PartitionMeta = Topic.MetadataResponsePartition
        states, live = self._metadata.partition_states, self._metadata.brokers
        partitions = []
        for index in range(info.partitions):
            replicas = info.replicas_of(index, self._broker_id)
            state = states.get((info.name, index))
            leader = state.leader if state is not None and state.leader in live else -1
            partitions.append(PartitionMeta(
                error_code=0 if leader >= 0 else Errors.LeaderNotAvailableError.errno, partition_index=index,
                leader_id=leader, leader_epoch=state.leader_epoch if state is not None else -1,
                replica_nodes=replicas, isr_nodes=list(state.isr) if state is not None else [],
                offline_replicas=[r for r in replicas if r not in live]))
        return Topic(error_code=0, name=info.name, topic_id=info.topic_id, is_internal=info.internal,
                     partitions=partitions)

    def _brokers(self, ctx) -> tuple[list[tuple[int, str, int, str | None]], int]:
        """(id, host, port, rack) of the live brokers on the listener the request came in on, and the controller's
        id.

        As Kafka's metadata cache answers per listener: a broker that does not
        advertise the client's listener is left out.
        """
        listener = getattr(ctx.connection, "listener", None)
        if not self._clustered:
            endpoint = self._endpoint_on(listener)
            return [(self._broker_id, endpoint.host, endpoint.port, endpoint.rack)], self._broker_id
        store = self._metadata
        found = [b.on(listener) if listener else b for b in sorted(store.brokers.values(), key=lambda b: b.broker_id)]
        return [(b.broker_id, b.host, b.port, b.rack) for b in found if b is not None], store.controller_id

    async def metadata(self, ctx, request):
        """Kafka's ACL rules: a request for all topics lists those the principal may DESCRIBE; a named topic it may
        not DESCRIBE is answered TOPIC_AUTHORIZATION_FAILED (whether it exists or not), and auto-creation needs
        CREATE on the cluster or the topic."""
        MetadataResponse = messages.MetadataResponse
        access, store = self._access, self._metadata
        describable, slices = access.topic_check(ctx, DESCRIBE), Slices()
        if 10 <= ctx.version < 12 and any(t.name is None or t.topic_id is not None for t in request.topics or ()):
            # Kafka: topic ids are served from v12; before, a null name or a topic id is an InvalidRequestException,
            # every topic answered INVALID_REQUEST (MetadataRequest.getErrorResponse: a null name as "")
            return MetadataResponse(throttle_time_ms=0, cluster_id=None, controller_id=-1, brokers=[], topics=[
                _error_topic(Errors.InvalidRequestError, name=t.name or "", topic_id=t.topic_id)
                for t in request.topics])
        if request.topics is None or (ctx.version == 0 and not request.topics):
            topics = []
            for info in list(store.topics.values()):
                if describable(info.name):
                    topics.append(self._topic_metadata(info))
                if slices.due():
                    await asyncio.sleep(0)
        else:
            allow_create = request.allow_auto_topic_creation if ctx.version >= 4 else True
            topics = []
            for wanted in request.topics:
                if slices.due():
                    await asyncio.sleep(0)
                name = wanted.name
                if name is None and ctx.version >= 12:
                    info = store.topics_by_id.get(wanted.topic_id)
                    if info is not None and not describable(info.name):
                        # Kafka: ids are not sensitive, names are: the id answered, the name withheld
                        topics.append(_error_topic(Errors.TopicAuthorizationFailedError, topic_id=wanted.topic_id))
                        continue
                    topics.append(self._topic_metadata(info) if info is not None
                                  else _error_topic(Errors.UnknownTopicIdError, topic_id=wanted.topic_id))
                    continue
                if not describable(name):
                    topics.append(_error_topic(Errors.TopicAuthorizationFailedError, name=name))
                    continue
                info = store.topics.get(name)
                create = info is None and allow_create and self._config.get("auto.create.topics.enable")
                if create and not (access.allowed_cluster(ctx, CREATE) or access.allowed(ctx, CREATE, TOPIC, name)):
                    topics.append(_error_topic(Errors.TopicAuthorizationFailedError, name=name))
                    continue
                if create:
                    try:
                        self._auto_create_topic(name)
                    except MetadataError as exc:
                        topics.append(_error_topic(exc.error, name=name))
                        continue
                    info = store.topics.get(name)
                    if info is None:  # created in ZooKeeper, not in this broker's view yet: clients retry
                        topics.append(_error_topic(Errors.LeaderNotAvailableError, name=name))
                        continue
                topics.append(self._topic_metadata(info) if info is not None else _missing_topic(name))
        if ctx.version >= 8 and request.include_topic_authorized_operations:
            for topic in topics:
                if not topic.error_code and topic.name:
                    topic.authorized_operations = access.authorized_operations(ctx, TOPIC, topic.name)
                if slices.due():
                    await asyncio.sleep(0)
        cluster_fields = {}  # kafka-python's name for cluster_authorized_operations (v8-10)
        if 8 <= ctx.version <= 10 and request.include_cluster_authorized_operations:
            cluster_fields["authorized_operations"] = access.cluster_operations(ctx)
        brokers, controller_id = self._brokers(ctx)
        return MetadataResponse(throttle_time_ms=0, cluster_id=store.cluster_id, controller_id=controller_id,
                                **cluster_fields,
                                topics=topics, brokers=[MetadataResponse.MetadataResponseBroker(
                                    node_id=node, host=host, port=port, rack=rack)
                                    for node, host, port, rack in brokers])

    async def describe_cluster(self, ctx, request):
        DescribeClusterResponse = messages.DescribeClusterResponse
        cluster_id = self._metadata.cluster_id
        if ctx.version >= 1 and request.endpoint_type != 1:
            return DescribeClusterResponse(
                throttle_time_ms=0, error_code=Errors.UnsupportedEndpointTypeError.errno,
                error_message=f"endpoint type {request.endpoint_type} is not served by a broker",
                endpoint_type=request.endpoint_type, cluster_id=cluster_id, brokers=[])
        # v2's include_fenced_brokers lists no more here: a broker is in the store only while it is live
        # (no KRaft registrations), so every broker listed is unfenced
        brokers, controller_id = self._brokers(ctx)
        operations = self._access.cluster_operations(ctx) if request.include_cluster_authorized_operations \
            else NOT_REQUESTED
        return DescribeClusterResponse(
            throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=1, cluster_id=cluster_id,
            controller_id=controller_id, authorized_operations=operations,
            brokers=[DescribeClusterResponse.DescribeClusterBroker(broker_id=node, host=host, port=port, rack=rack)
                     for node, host, port, rack in brokers])


def _missing_topic(name: str):
    """A topic that does not exist (and was not created): INVALID_TOPIC_EXCEPTION when its name is not a legal
    one, else UNKNOWN_TOPIC_OR_PARTITION, as Kafka's handleTopicMetadataRequest validates the names it misses."""
    try:
        validate_topic_name(name)
    except MetadataError as exc:
        return _error_topic(exc.error, name=name)
    return _error_topic(Errors.UnknownTopicOrPartitionError, name=name)


def _error_topic(error, name=None, topic_id=None):
    Topic = messages.MetadataResponse.MetadataResponseTopic
    return Topic(error_code=error.errno, name=name, topic_id=topic_id, is_internal=False, partitions=[])
