"""ApiVersions, Metadata, DescribeTopicPartitions and DescribeCluster: what the metadata store and the local
replicas say; UpdateFeatures checks an update against the fixed feature levels (``protocol/features.py``).

``ClusterApis`` answers from the topics (``MetadataStore`` or, in a cluster, the ``ZkMetadataStore``'s
partition states and live brokers), the local replicas on a single node, and this broker's endpoint on
the client's listener; Metadata auto-creates topics through the broker's ``auto_create_topic``.

DescribeTopicPartitions (KIP-966, what Kafka 4's ``kafka-topics --describe`` asks) pages through topics as
Kafka's ``DescribeTopicPartitionsRequestHandler`` and ``KRaftMetadataCache.getTopicMetadataForDescribeTopic
Response`` do: topics in name order from the cursor's, at most ``min(max.request.partition.size.limit,
ResponsePartitionLimit)`` partitions (at least one), and a next cursor at the first partition left out. It never creates a
topic; a named topic the principal may not DESCRIBE comes last, TOPIC_AUTHORIZATION_FAILED with a zero id.
"""
from __future__ import annotations

import asyncio
import uuid
from typing import Callable

import kafka.errors as Errors

from broker_sim.controller.cluster_state import BrokerEndpoint
from broker_sim.controller.metadata import MetadataError, TopicInfo, is_internal_topic, validate_topic_name
from broker_sim.protocol.apis import api_versions_response, messages
from broker_sim.server.handlers.access import ALTER, CREATE, DESCRIBE, TOPIC, Access
from broker_sim.server.request_slicing import Slices

NOT_REQUESTED = None  # authorized_operations when the client did not ask (INT32_MIN on the wire)
ZERO_UUID = uuid.UUID(int=0)  # Kafka's Uuid.ZERO_UUID: the id of a topic not described


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
        if ctx.version >= 3:  # Kafka's ClientInformation of the connection (client-metrics ``match`` reads it)
            try:
                ctx.connection.client_software = (request.client_software_name or "unknown",
                                                  request.client_software_version or "unknown")
            except AttributeError:  # a test's stand-in connection
                pass
        return api_versions_response(ctx.version)

    async def update_features(self, ctx, request):
        """UpdateFeatures (57): ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED); every update checked first and
        the first bad one fails them all, with Kafka's message (``features.update_error``).  v0-1 answer each
        feature's result on success; nothing changes (the levels are fixed)."""
        from broker_sim.protocol import features

        Response = messages.UpdateFeaturesResponse
        if not self._access.allowed_cluster(ctx, ALTER):
            code = Errors.ClusterAuthorizationFailedError.errno
            return Response(throttle_time_ms=0, error_code=code, error_message=None, results=[])
        for update in request.feature_updates:
            why = features.update_error(update.feature, update.max_version_level, self._broker_id)
            if why is not None:
                return Response(throttle_time_ms=0, error_code=Errors.InvalidUpdateVersionError.errno,
                                error_message=f"The update failed for all features since the following feature "
                                              f"had an error: {why}", results=[])
        done = [] if ctx.version >= 2 else [Response.UpdatableFeatureResult(
            feature=u.feature, error_code=0, error_message="NONE") for u in request.feature_updates]
        return Response(throttle_time_ms=0, error_code=0, error_message=None, results=done)

    def _topic_metadata(self, info):
        Topic = messages.MetadataResponse.MetadataResponseTopic
        PartitionMeta = Topic.MetadataResponsePartition
        if self._clustered:
            rows = self._cluster_partition_rows(info, range(info.partitions))
        else:
            me = self._broker_id
            rows = ((partition.index, me, partition.leader_epoch, [me], [me], [])
                    for partition in self._replicas.topic_partitions(info.name))
        partitions = [PartitionMeta(
            error_code=0 if leader >= 0 else Errors.LeaderNotAvailableError.errno, partition_index=index,
            leader_id=leader, leader_epoch=epoch, replica_nodes=replicas, isr_nodes=isr, offline_replicas=offline)
            for index, leader, epoch, replicas, isr, offline in rows]
        return Topic(error_code=0, name=info.name, topic_id=info.topic_id, is_internal=info.internal,
                     partitions=partitions)

    def _cluster_partition_rows(self, info, indexes):
        """(index, leader, leader epoch, replicas, ISR, offline replicas) of ``indexes`` as the cluster state says:
        leader, epoch, ISR from ZooKeeper; leader -1 while leaderless."""
        states, live = self._metadata.partition_states, self._metadata.brokers
        for index in indexes:
            replicas = info.replicas_of(index, self._broker_id)
            state = states.get((info.name, index))
            leader = state.leader if state is not None and state.leader in live else -1
            yield (index, leader, state.leader_epoch if state is not None else -1, replicas,
                   list(state.isr) if state is not None else [], [r for r in replicas if r not in live])

    def _partition_rows(self, info, indexes):
        """``_cluster_partition_rows`` for this broker's mode (a single node leads every partition it hosts)."""
        if self._clustered:
            yield from self._cluster_partition_rows(info, indexes)
            return
        me = self._broker_id
        for index in indexes:
            try:
                epoch = self._replicas.get(info.name, index).leader_epoch
            except Errors.KafkaError:   # deleted while the request was answered
                continue
            yield index, me, epoch, [me], [me], []

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
            return MetadataResponse(throttle_time_ms=0, error_code=0, cluster_id=None, controller_id=-1, brokers=[],
                                    topics=[
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
        # v13's top-level error code (KIP-1102: REBOOTSTRAP_REQUIRED) is 0: a broker always knows its cluster
        return MetadataResponse(throttle_time_ms=0, error_code=0, cluster_id=store.cluster_id,
                                controller_id=controller_id,
                                **cluster_fields,
                                topics=topics, brokers=[MetadataResponse.MetadataResponseBroker(
                                    node_id=node, host=host, port=port, rack=rack)
                                    for node, host, port, rack in brokers])

    async def describe_topic_partitions(self, ctx, request):
        """See the module docstring: Kafka's paging, authorization and errors."""
        Response = messages.DescribeTopicPartitionsResponse
        Topic = Response.DescribeTopicPartitionsResponseTopic
        access, store, slices = self._access, self._metadata, Slices()
        cursor = request.cursor
        cursor_name = cursor.topic_name if cursor is not None else ""
        fetch_all = not request.topics
        if fetch_all:
            names = {name for name in list(store.topics) if name >= cursor_name}
        else:
            names = {t.name for t in request.topics if t.name is not None and t.name >= cursor_name}
        if cursor is not None and (cursor.partition_index < 0 or not fetch_all and cursor_name not in names):
            # Kafka's InvalidRequestException (a negative cursor index, or a cursor topic not named), answered by
            # getErrorResponse: every requested topic INVALID_REQUEST
            return Response(throttle_time_ms=0, next_cursor=None, topics=[
                Topic(error_code=Errors.InvalidRequestError.errno, name=t.name, topic_id=ZERO_UUID,
                      is_internal=False, partitions=[]) for t in request.topics])
        describable = access.topic_check(ctx, DESCRIBE)
        authorized, refused = [], []
        for name in sorted(names):
            (authorized if describable(name) else refused).append(name)
            if slices.due():
                await asyncio.sleep(0)
        # Kafka: at least one partition, however small a limit the request asks for
        remaining = max(min(self._config.get("max.request.partition.size.limit"), request.response_partition_limit), 1)
        topics, next_cursor = [], None
        for name in authorized:
            if slices.due():
                await asyncio.sleep(0)
            if remaining <= 0:   # the next page begins with this topic (whether it exists or not)
                next_cursor = Response.Cursor(topic_name=name, partition_index=0)
                break
            info = store.topics.get(name)
            if info is None:
                if not fetch_all:
                    topics.append(Topic(error_code=_missing_topic(name).error_code, name=name, topic_id=ZERO_UUID,
                                        is_internal=is_internal_topic(name), partitions=[]))
                continue
            start = cursor.partition_index if cursor is not None and name == cursor_name else 0
            stop = min(info.partitions, start + remaining)
            partitions = [Topic.DescribeTopicPartitionsResponsePartition(
                error_code=0, partition_index=index, leader_id=leader, leader_epoch=epoch, replica_nodes=replicas,
                isr_nodes=isr, eligible_leader_replicas=[], last_known_elr=[], offline_replicas=offline)
                for index, leader, epoch, replicas, isr, offline in self._partition_rows(info, range(start, stop))]
            topics.append(Topic(error_code=0, name=name, topic_id=info.topic_id, is_internal=info.internal,
                                partitions=partitions))
            if stop < info.partitions:
                next_cursor = Response.Cursor(topic_name=name, partition_index=stop)
                break
            remaining -= len(partitions)
        for topic in topics:
            # an int32 bitfield here (Metadata's kafka-python field takes the set of codes)
            topic.topic_authorized_operations = sum(1 << code for code in
                                                    access.authorized_operations(ctx, TOPIC, topic.name))
        topics.extend(Topic(error_code=Errors.TopicAuthorizationFailedError.errno, name=name, topic_id=ZERO_UUID,
                            is_internal=False, partitions=[]) for name in refused if not fetch_all)
        return Response(throttle_time_ms=0, topics=topics, next_cursor=next_cursor)

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
