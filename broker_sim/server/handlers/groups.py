"""Consumer group APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
OffsetFetch, DescribeGroups, ListGroups, DeleteGroups and OffsetDelete, and KIP-848's ConsumerGroupHeartbeat and
ConsumerGroupDescribe.

Each ``GroupApis`` handler reads its version's fields, calls the group coordinator
(``groups``, a ``broker_sim.coordinator.group.service.GroupService``; FindCoordinator also
the transaction coordinator) and builds the response; the rules live in the coordinator.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Callable

import kafka.errors as Errors

from broker_sim.controller.cluster_state import BrokerEndpoint
from broker_sim.coordinator.group.consumer_group import CONSUMER_GROUP_TYPE, HeartbeatRequest, check_heartbeat
from broker_sim.coordinator.group.metadata import JoinRequest
from broker_sim.coordinator.group.records import CommittedOffset
from broker_sim.protocol.apis import messages
from broker_sim.server.handlers.access import DELETE, DESCRIBE, GROUP, READ, TOPIC, TXN, Access
from broker_sim.server.request_slicing import Slices

GROUP_AUTHORIZATION_FAILED = Errors.GroupAuthorizationFailedError.errno
TOPIC_AUTHORIZATION_FAILED = Errors.TopicAuthorizationFailedError.errno
UNKNOWN_TOPIC_OR_PARTITION = Errors.UnknownTopicOrPartitionError.errno
FETCH_CHUNK = 5_000  # partitions of an OffsetFetch asked of the coordinator at a time
TXN_AUTHORIZATION_FAILED = Errors.TransactionalIdAuthorizationFailedError.errno
UNSTABLE_OFFSET_COMMIT = Errors.UnstableOffsetCommitError.errno
GROUP_ID_NOT_FOUND = Errors.GroupIdNotFoundError.errno
ILLEGAL_GENERATION = Errors.IllegalGenerationError.errno

GROUP_KEY, TRANSACTION_KEY = 0, 1
NOT_ASKED_OPERATIONS = -2**31   # authorized_operations when not requested (Kafka's INT32_MIN)
CLASSIC_GROUP_TYPE = "classic"  # Kafka's Group.GroupType.CLASSIC, as ListGroups v5 names it

log = logging.getLogger(__name__)


def _client_host(ctx) -> str:
    """Kafka's clientHost: the peer address with a leading slash (Java's InetAddress.toString)."""
    peer = getattr(ctx.connection, "peer", "?")
    return "/" + peer.rsplit(":", 1)[0].strip("[]")


def _fetched(cls, partition: int, value: CommittedOffset | None, error: int):
    if value is None:
        return cls(partition_index=partition, committed_offset=-1, committed_leader_epoch=-1, metadata="",
                   error_code=error)
    return cls(partition_index=partition, committed_offset=value.offset, committed_leader_epoch=value.leader_epoch,
               metadata=value.metadata, error_code=error)


def _chunks(asked: list[tuple[str, list[int]]], size: int):
    """``asked`` ([(topic, [partition])]) in pieces naming at most ``size`` partitions each, in order; at least
    one piece (a topic named without partitions is kept, and answered)."""
    chunk, room, pieces = [], size, 0
    for name, indexes in asked:
        if not indexes:
            chunk.append((name, []))
            continue
        start = 0
        while start < len(indexes):
            piece = indexes[start:start + room]
            chunk.append((name, piece))
            start += len(piece)
            room -= len(piece)
            if not room:
                yield chunk
                chunk, room, pieces = [], size, pieces + 1
    if chunk or not pieces:
        yield chunk


async def _answers(topic_class, partition_class, topics, slices: Slices) -> list:
    """OffsetFetch's topics ([(name, [(partition, committed, error)])]) as response objects, sliced."""
    answers = []
    for name, parts in topics:
        partitions = []
        for p in parts:
            partitions.append(_fetched(partition_class, *p))
            if slices.due():
                await asyncio.sleep(0)
        answers.append(topic_class(name=name, partitions=partitions))
    return answers


class GroupApis:
    def __init__(self, access: Access, groups, transactions, metadata, broker_id: int, *, clustered: bool,
                 endpoint_on: Callable[[str | None], BrokerEndpoint]) -> None:
        self._access = access
        self._groups = groups
        self._transactions = transactions
        self._metadata = metadata  # in a cluster: where the internal partitions' leaders are
        self._broker_id = broker_id
        self._clustered = clustered
        self._endpoint_on = endpoint_on

    # --- FindCoordinator ----------------------------------------------------------------

    async def find_coordinator(self, ctx, request):
        FindCoordinatorResponse = messages.FindCoordinatorResponse
        key_type = request.key_type if ctx.version >= 1 else GROUP_KEY
        keys = request.coordinator_keys if ctx.version >= 4 else [request.key]
        listener = getattr(ctx.connection, "listener", None)
        found = []
        for key in keys:
            if key_type in (GROUP_KEY, TRANSACTION_KEY) and not self._access.allowed(
                    ctx, DESCRIBE, GROUP if key_type == GROUP_KEY else TXN, key):
                error = GROUP_AUTHORIZATION_FAILED if key_type == GROUP_KEY else TXN_AUTHORIZATION_FAILED
                found.append((key, error, f"DESCRIBE on {'group' if key_type == GROUP_KEY else 'transactional id'} "
                                          f"{key!r} is not allowed", -1, "", -1))
                continue
            if self._clustered and key_type in (GROUP_KEY, TRANSACTION_KEY):
                found.append((key,) + self._cluster_coordinator(
                    self._groups if key_type == GROUP_KEY else self._transactions, key, listener))
                continue
            if key_type == GROUP_KEY:
                error = self._groups.find_coordinator(key)
                message = None if not error else f"this broker does not coordinate group {key!r}"
            elif key_type == TRANSACTION_KEY:
                error = self._transactions.find_coordinator(key)
                message = None if not error else f"this broker does not coordinate transactional id {key!r}"
            else:
                error, message = Errors.InvalidRequestError.errno, f"unknown coordinator key type {key_type}"
            if error:
                found.append((key, error, message, -1, "", -1))
            else:
                me = self._endpoint_on(listener)
                found.append((key, 0, None, self._broker_id, me.host, me.port))
        if ctx.version >= 4:
            coordinators = [FindCoordinatorResponse.Coordinator(key=k, node_id=n, host=h, port=p, error_code=e,
                                                                error_message=m)
                            for k, e, m, n, h, p in found]
            return FindCoordinatorResponse(throttle_time_ms=0, coordinators=coordinators)
        _, error, message, node_id, host, port = found[0]
        return FindCoordinatorResponse(throttle_time_ms=0, error_code=error, error_message=message, node_id=node_id,
                                       host=host, port=port)

    def _cluster_coordinator(self, owner, key: str, listener: str | None) -> tuple[int, str | None, int, str, int]:
        """The leader of the key's internal partition, wherever it is (Kafka's answer in a cluster).

        The internal topic is created on first use; until it has a leader the
        answer is COORDINATOR_NOT_AVAILABLE, which clients retry.
        """
        topic = owner.topic
        if not topic.exists():
            try:
                owner.ensure_topic()
            except Exception as exc:  # e.g. no live broker yet; the client retries
                log.info("creating %s for %r failed: %s", topic.name, key, exc)
            return (Errors.CoordinatorNotAvailableError.errno, f"{topic.name} is being created", -1, "", -1)
        index = owner.partition_of(key)
        state = self._metadata.partition_states.get((topic.name, index))
        endpoint = self._metadata.brokers.get(state.leader) if state is not None and state.has_leader else None
        if endpoint is not None and listener:
            endpoint = endpoint.on(listener)  # the address on the client's listener, as Kafka answers
        if endpoint is None:
            return (Errors.CoordinatorNotAvailableError.errno, f"{topic.name}-{index} has no leader now", -1, "", -1)
        return 0, None, endpoint.broker_id, endpoint.host, endpoint.port

    # --- membership -------------------------------------------------------------------------

    async def join_group(self, ctx, request):
        JoinGroupResponse = messages.JoinGroupResponse
        version = ctx.version
        if not self._access.allowed(ctx, READ, GROUP, request.group_id):
            return JoinGroupResponse(throttle_time_ms=0, error_code=GROUP_AUTHORIZATION_FAILED, generation_id=-1,
                                     protocol_type=None, protocol_name=None if version >= 7 else "", leader="",
                                     skip_assignment=False, member_id=request.member_id or "", members=[])
        join = JoinRequest(
            member_id=request.member_id or "",
            group_instance_id=request.group_instance_id if version >= 5 else None,
            client_id=ctx.client_id or "",
            client_host=_client_host(ctx),
            session_timeout_ms=request.session_timeout_ms,
            # v0 has no rebalance timeout: Kafka uses the session timeout
            rebalance_timeout_ms=request.rebalance_timeout_ms if version >= 1 else request.session_timeout_ms,
            protocol_type=request.protocol_type,
            protocols=tuple((p.name, bytes(p.metadata)) for p in request.protocols),
            require_known_member_id=version >= 4,
            skip_assignment=version >= 9,   # KIP-814: a rejoining static leader is told to keep the assignment
        )
        result = await self._groups.join_group(request.group_id, join)
        members = [JoinGroupResponse.JoinGroupResponseMember(member_id=m.member_id,
                                                             group_instance_id=m.group_instance_id, metadata=m.metadata)
                   for m in result.members]
        protocol_name = result.protocol_name if version >= 7 else (result.protocol_name or "")
        return JoinGroupResponse(throttle_time_ms=0, error_code=result.error, generation_id=result.generation_id,
                                 protocol_type=result.protocol_type, protocol_name=protocol_name,
                                 leader=result.leader_id, skip_assignment=result.skip_assignment,
                                 member_id=result.member_id,
                                 members=members)

    async def sync_group(self, ctx, request):
        SyncGroupResponse = messages.SyncGroupResponse
        version = ctx.version
        if not self._access.allowed(ctx, READ, GROUP, request.group_id):
            return SyncGroupResponse(throttle_time_ms=0, error_code=GROUP_AUTHORIZATION_FAILED, protocol_type=None,
                                     protocol_name=None, assignment=b"")
        assignments = {a.member_id: bytes(a.assignment) for a in request.assignments}
        result = await self._groups.sync_group(
            request.group_id, request.member_id, request.group_instance_id if version >= 3 else None,
            request.generation_id, request.protocol_type if version >= 5 else None,
            request.protocol_name if version >= 5 else None, assignments)
        return SyncGroupResponse(throttle_time_ms=0, error_code=result.error, protocol_type=result.protocol_type,
                                 protocol_name=result.protocol_name, assignment=result.assignment)

    async def heartbeat(self, ctx, request):
        HeartbeatResponse = messages.HeartbeatResponse
        if not self._access.allowed(ctx, READ, GROUP, request.group_id):
            return HeartbeatResponse(throttle_time_ms=0, error_code=GROUP_AUTHORIZATION_FAILED)
        error = self._groups.heartbeat(request.group_id, request.member_id,
                                       request.group_instance_id if ctx.version >= 3 else None, request.generation_id)
        return HeartbeatResponse(throttle_time_ms=0, error_code=error)

    async def leave_group(self, ctx, request):
        LeaveGroupResponse = messages.LeaveGroupResponse
        if not self._access.allowed(ctx, READ, GROUP, request.group_id):
            return LeaveGroupResponse(throttle_time_ms=0, error_code=GROUP_AUTHORIZATION_FAILED, members=[])
        if ctx.version >= 3:
            leaving = [(m.member_id or "", m.group_instance_id) for m in request.members]
        else:
            leaving = [(request.member_id or "", None)]
        error, errors = await self._groups.leave_group(request.group_id, leaving)
        if ctx.version < 3:
            return LeaveGroupResponse(throttle_time_ms=0, error_code=error or errors[0])
        members = [LeaveGroupResponse.MemberResponse(member_id=member_id, group_instance_id=instance_id,
                                                     error_code=code)
                   for (member_id, instance_id), code in zip(leaving, errors)]
        return LeaveGroupResponse(throttle_time_ms=0, error_code=error, members=members)

    # --- offsets -----------------------------------------------------------------------------

    async def offset_commit(self, ctx, request):
        OffsetCommitResponse = messages.OffsetCommitResponse
        CommitTopic = OffsetCommitResponse.OffsetCommitResponseTopic
        CommitPartition = CommitTopic.OffsetCommitResponsePartition
        version = ctx.version
        slices = Slices()
        if not self._access.allowed(ctx, READ, GROUP, request.group_id):
            topics = []
            for t in request.topics:
                partitions = []
                for p in t.partitions:
                    partitions.append(CommitPartition(partition_index=p.partition_index,
                                                      error_code=GROUP_AUTHORIZATION_FAILED))
                    if slices.due():
                        await asyncio.sleep(0)
                topics.append(CommitTopic(name=t.name, partitions=partitions))
            return OffsetCommitResponse(throttle_time_ms=0, topics=topics)
        allowed = self._access.topic_check(ctx, READ)
        denied = {t.name for t in request.topics if not allowed(t.name)}
        commits = []
        unknown = {}  # as Kafka's handleOffsetCommitRequest: a partition not in the metadata never reaches the group
        known = self._metadata.topics
        for topic in request.topics:
            if topic.name in denied:
                continue
            info = known.get(topic.name)
            for p in topic.partitions:
                if info is None or not 0 <= p.partition_index < info.partitions:
                    unknown[(topic.name, p.partition_index)] = UNKNOWN_TOPIC_OR_PARTITION
                    continue
                commits.append((topic.name, p.partition_index, CommittedOffset(
                    offset=p.committed_offset,
                    leader_epoch=p.committed_leader_epoch if version >= 6 else -1,
                    metadata=p.committed_metadata or "",
                    commit_timestamp=p.commit_timestamp if version == 1 else -1)))
                if slices.due():
                    await asyncio.sleep(0)
        results = await self._groups.commit_offsets(
            request.group_id,
            request.member_id if version >= 1 else "",
            request.group_instance_id if version >= 7 else None,
            request.generation_id_or_member_epoch if version >= 1 else -1,
            commits, missing_group=GROUP_ID_NOT_FOUND if version >= 9 else ILLEGAL_GENERATION, version=version,
        ) if commits or not unknown else {}
        results.update(unknown)
        topics = []
        for topic in request.topics:
            partitions = []
            for p in topic.partitions:
                partitions.append(CommitPartition(partition_index=p.partition_index,
                                                  error_code=TOPIC_AUTHORIZATION_FAILED if topic.name in denied
                                                  else results[(topic.name, p.partition_index)]))
                if slices.due():
                    await asyncio.sleep(0)
            topics.append(CommitTopic(name=topic.name, partitions=partitions))
        return OffsetCommitResponse(throttle_time_ms=0, topics=topics)

    async def _fetch(self, ctx, group_id: str, topics, version: int, require_stable: bool, slices: Slices,
                     member: tuple[str | None, int] = (None, -1)):
        """(group error, [(topic, [(partition, committed or None, partition error)])]) for one group.

        Kafka's checks: DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED); topics named in the request
        without DESCRIBE answer TOPIC_AUTHORIZATION_FAILED, and a fetch of all topics leaves them out.  With
        ``require_stable`` (v7+) a partition whose offset a transaction has pending answers
        UNSTABLE_OFFSET_COMMIT and no offset (KIP-447: the consumer retries once the transaction ended)."""
        wanted = None if topics is None else [(t.name, list(t.partition_indexes)) for t in topics]
        if not self._access.allowed(ctx, DESCRIBE, GROUP, group_id):
            error = GROUP_AUTHORIZATION_FAILED
            if version < 2:
                return error, [(name, [(p, None, error) for p in indexes]) for name, indexes in wanted or []]
            return error, []
        denied = set()
        allowed = self._access.topic_check(ctx, DESCRIBE)
        if wanted is not None:
            denied = {name for name, _ in wanted if not allowed(name)}
            asked = [(name, indexes) for name, indexes in wanted if name not in denied]
        else:
            asked = None
        error, offsets = await self._fetch_offsets(group_id, asked, slices, member)
        if error and version < 2:
            # no top-level error code before v2: every partition carries it
            return error, [(name, [(p, None, error) for p in indexes]) for name, indexes in wanted or []]
        unstable = self._groups.unstable_partitions(group_id) if require_stable else frozenset()
        found = []
        for name, parts in offsets.items():
            if wanted is None and not allowed(name):
                continue
            answers = []
            for p, value in parts.items():
                answers.append((p, None, UNSTABLE_OFFSET_COMMIT) if (name, p) in unstable else (p, value, 0))
                if slices.due():
                    await asyncio.sleep(0)
            found.append((name, answers))
        found.extend((name, [(p, None, TOPIC_AUTHORIZATION_FAILED) for p in indexes])
                     for name, indexes in wanted or [] if name in denied)
        return error, found

    async def _fetch_offsets(self, group_id: str, asked, slices: Slices, member: tuple[str | None, int]):
        """The coordinator's ``fetch_offsets``, asked FETCH_CHUNK partitions at a time with the loop given a turn
        between (a request may name a million); a group error ends it."""
        if asked is None:
            return self._groups.fetch_offsets(group_id, None, member)
        offsets: dict[str, dict] = {}
        error = 0
        for chunk in _chunks(asked, FETCH_CHUNK):
            error, found = self._groups.fetch_offsets(group_id, chunk, member)
            if error:
                return error, {}
            for name, parts in found.items():
                offsets.setdefault(name, {}).update(parts)
            if slices.due():
                await asyncio.sleep(0)
        return error, offsets

    async def offset_fetch(self, ctx, request):
        OffsetFetchResponse = messages.OffsetFetchResponse
        FetchTopic = OffsetFetchResponse.OffsetFetchResponseTopic
        FetchPartition = FetchTopic.OffsetFetchResponsePartition
        FetchGroup = OffsetFetchResponse.OffsetFetchResponseGroup
        FetchGroupTopic = FetchGroup.OffsetFetchResponseTopics
        FetchGroupPartition = FetchGroupTopic.OffsetFetchResponsePartitions
        version = ctx.version
        slices = Slices()
        if version >= 8:
            groups = []
            for group in request.groups:
                # v9 (KIP-848): a consumer-protocol member names itself and its epoch, checked by its group
                member = (group.member_id, group.member_epoch) if version >= 9 else (None, -1)
                error, topics = await self._fetch(ctx, group.group_id, group.topics, version, request.require_stable,
                                                  slices, member)
                groups.append(FetchGroup(group_id=group.group_id, error_code=error, topics=await _answers(
                    FetchGroupTopic, FetchGroupPartition, topics, slices)))
            return OffsetFetchResponse(throttle_time_ms=0, groups=groups)
        error, topics = await self._fetch(ctx, request.group_id, request.topics, version,
                                          version >= 7 and request.require_stable, slices)
        return OffsetFetchResponse(throttle_time_ms=0, error_code=error,
                                   topics=await _answers(FetchTopic, FetchPartition, topics, slices))

    async def offset_delete(self, ctx, request):
        OffsetDeleteResponse = messages.OffsetDeleteResponse
        DeleteTopic = OffsetDeleteResponse.OffsetDeleteResponseTopic
        DeletePartition = DeleteTopic.OffsetDeleteResponsePartition
        if not self._access.allowed(ctx, DELETE, GROUP, request.group_id):
            return OffsetDeleteResponse(error_code=GROUP_AUTHORIZATION_FAILED, throttle_time_ms=0, topics=[])
        denied = {t.name for t in request.topics if not self._access.allowed(ctx, READ, TOPIC, t.name)}
        wanted = [(t.name, p.partition_index) for t in request.topics for p in t.partitions if t.name not in denied]
        error, results = await self._groups.delete_offsets(request.group_id, wanted)
        results.update({(t.name, p.partition_index): TOPIC_AUTHORIZATION_FAILED
                        for t in request.topics if t.name in denied for p in t.partitions})
        topics = [] if error else [
            DeleteTopic(name=t.name, partitions=[DeletePartition(partition_index=p.partition_index,
                                                                 error_code=results[(t.name, p.partition_index)])
                                                 for p in t.partitions])
            for t in request.topics]
        return OffsetDeleteResponse(error_code=error, throttle_time_ms=0, topics=topics)

    # --- admin -------------------------------------------------------------------------------

    async def describe_groups(self, ctx, request):
        DescribeGroupsResponse = messages.DescribeGroupsResponse
        Described = DescribeGroupsResponse.DescribedGroup
        DescribedMember = Described.DescribedGroupMember
        groups = []
        for group_id in request.groups:
            if not self._access.allowed(ctx, DESCRIBE, GROUP, group_id):
                groups.append(Described(error_code=GROUP_AUTHORIZATION_FAILED, error_message=None, group_id=group_id,
                                        group_state="", protocol_type="", protocol_data="", members=[],
                                        authorized_operations=None))
                continue
            d = self._groups.describe(group_id)
            members = [DescribedMember(member_id=m.member_id, group_instance_id=m.group_instance_id,
                                       client_id=m.client_id, client_host=m.client_host, member_metadata=m.metadata,
                                       member_assignment=m.assignment)
                       for m in d.members]
            error, message = d.error, None
            if ctx.version >= 6 and not error and d.not_found is not None:
                # KIP-1043: a group that does not exist (or is a consumer-protocol group) is GROUP_ID_NOT_FOUND,
                # no longer a silent Dead group
                error, message = GROUP_ID_NOT_FOUND, d.not_found
            groups.append(Described(error_code=error, error_message=message, group_id=group_id, group_state=d.state,
                                    protocol_type=d.protocol_type, protocol_data=d.protocol, members=members,
                                    authorized_operations=(self._access.authorized_operations(ctx, GROUP, group_id)
                                                           if ctx.version >= 3 and request.include_authorized_operations
                                                           else None)))  # None: not asked for (INT32_MIN)
        return DescribeGroupsResponse(throttle_time_ms=0, groups=groups)

    async def list_groups(self, ctx, request):
        """Kafka's GroupMetadataManager.listGroups: v4+ a states filter, v5+ a types filter (KIP-848), both
        case-insensitive; an unknown type (" classic" too: types are not trimmed) parses as Kafka's UNKNOWN,
        which no group has. Groups here are classic or consumer-protocol ones (no share or streams groups)."""
        ListGroupsResponse = messages.ListGroupsResponse
        names = request.states_filter if ctx.version >= 4 else []
        types = {name.lower() for name in (request.types_filter or [])} if ctx.version >= 5 else set()
        known = {CLASSIC_GROUP_TYPE, CONSUMER_GROUP_TYPE}
        if types and not types & known:
            listed = []  # only types no group here has
        else:
            listed = self._groups.list_groups(names or [], types & known)
        if not self._access.allowed_cluster(ctx, DESCRIBE):
            # Kafka: without DESCRIBE on the cluster, the groups it may DESCRIBE
            listed = [entry for entry in listed if self._access.allowed(ctx, DESCRIBE, GROUP, entry[0])]
        groups = [ListGroupsResponse.ListedGroup(group_id=group_id, protocol_type=protocol_type, group_state=state,
                                                 group_type=group_type)
                  for group_id, protocol_type, state, group_type in listed]
        return ListGroupsResponse(throttle_time_ms=0, error_code=0, groups=groups)

    async def delete_groups(self, ctx, request):
        DeleteGroupsResponse = messages.DeleteGroupsResponse
        permitted = [g for g in request.groups_names if self._access.allowed(ctx, DELETE, GROUP, g)]
        results = dict.fromkeys(request.groups_names, GROUP_AUTHORIZATION_FAILED)
        results.update(await self._groups.delete_groups(permitted))
        return DeleteGroupsResponse(throttle_time_ms=0, results=[
            DeleteGroupsResponse.DeletableGroupResult(group_id=group_id, error_code=results[group_id])
            for group_id in request.groups_names])

    # --- KIP-848 consumer groups ---------------------------------------------------------------

    async def consumer_group_heartbeat(self, ctx, request):
        """Kafka's KafkaApis.handleConsumerGroupHeartbeat: READ on the group, DESCRIBE on each subscribed topic
        named (TOPIC_AUTHORIZATION_FAILED naming them), the request's own checks, then the coordinator."""
        Response = messages.ConsumerGroupHeartbeatResponse

        def refused(code: int, message: str | None = None):
            return Response(throttle_time_ms=0, error_code=code, error_message=message, member_id=None,
                            member_epoch=0, heartbeat_interval_ms=0, assignment=None)

        if not self._access.allowed(ctx, READ, GROUP, request.group_id):
            return refused(GROUP_AUTHORIZATION_FAILED)
        allowed = self._access.topic_check(ctx, DESCRIBE)
        names = request.subscribed_topic_names
        if names is not None:
            denied = sorted({name for name in names if not allowed(name)})
            if denied:
                return refused(TOPIC_AUTHORIZATION_FAILED, "Unauthorized topics: " + ", ".join(denied))
        heartbeat = HeartbeatRequest(
            member_id=request.member_id or "", member_epoch=request.member_epoch, instance_id=request.instance_id,
            rack_id=request.rack_id, rebalance_timeout_ms=request.rebalance_timeout_ms,
            subscribed_topic_names=tuple(names) if names is not None else None,
            subscribed_topic_regex=request.subscribed_topic_regex if ctx.version >= 1 else None,
            server_assignor=request.server_assignor,
            owned=(tuple((t.topic_id, tuple(t.partitions or ())) for t in request.topic_partitions)
                   if request.topic_partitions is not None else None),
            client_id=ctx.client_id or "", client_host=_client_host(ctx), topic_allowed=allowed)
        if not request.group_id:
            return refused(Errors.InvalidRequestError.errno, "GroupId can't be empty.")
        invalid = check_heartbeat(heartbeat, ctx.version, self._groups.consumer_settings.assignors)
        if invalid is not None:
            return refused(invalid.code, invalid.message)
        answer = await self._groups.consumer_group_heartbeat(request.group_id, heartbeat)
        assignment = None
        if answer.assignment is not None:
            assignment = Response.Assignment(topic_partitions=[
                Response.Assignment.TopicPartitions(topic_id=topic, partitions=sorted(parts))
                for topic, parts in sorted(answer.assignment.items(), key=lambda item: str(item[0]))])
        return Response(throttle_time_ms=0, error_code=answer.error, error_message=answer.message,
                        member_id=answer.member_id, member_epoch=answer.member_epoch,
                        heartbeat_interval_ms=answer.heartbeat_interval_ms, assignment=assignment)

    async def consumer_group_describe(self, ctx, request):
        """Kafka's handleConsumerGroupDescribe: DESCRIBE on each group; a group whose members use a topic the
        client may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED as a whole."""
        Response = messages.ConsumerGroupDescribeResponse
        Described = Response.DescribedGroup
        Member = Described.Member
        by_id = self._metadata.topics_by_id
        allowed = self._access.topic_check(ctx, DESCRIBE)

        def assignment(parts):
            return Member.Assignment(topic_partitions=[
                Member.Assignment.TopicPartitions(topic_id=topic, topic_name=by_id[topic].name,
                                                  partitions=sorted(partitions))
                for topic, partitions in sorted(parts.items(), key=lambda item: str(item[0])) if topic in by_id])

        def failed(group_id: str, code: int, message: str | None = None):
            return Described(error_code=code, error_message=message, group_id=group_id, group_state="",
                             group_epoch=0, assignment_epoch=0, assignor_name="", members=[],
                             authorized_operations=NOT_ASKED_OPERATIONS)

        groups = []
        for group_id in request.group_ids:
            if not self._access.allowed(ctx, DESCRIBE, GROUP, group_id):
                groups.append(failed(group_id, GROUP_AUTHORIZATION_FAILED))
                continue
            error, message, group = self._groups.describe_consumer_group(group_id)
            if error:
                groups.append(failed(group_id, error, message))
                continue
            used = {by_id[t].name for m in group.members.values()
                    for parts in (m.assigned, group.target.get(m.member_id, {})) for t in parts if t in by_id}
            used |= {name for m in group.members.values() for name in m.subscribed_topic_names}
            if any(not allowed(name) for name in used):
                groups.append(failed(group_id, TOPIC_AUTHORIZATION_FAILED, "The described group uses topics that the "
                                     "client is not authorized to describe."))
                continue
            members = [Member(member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
                              member_epoch=m.member_epoch, client_id=m.client_id, client_host=m.client_host,
                              subscribed_topic_names=list(m.subscribed_topic_names),
                              subscribed_topic_regex=m.subscribed_topic_regex or "",   # Kafka: "" for none
                              assignment=assignment(m.assigned),
                              target_assignment=assignment(group.target.get(m.member_id, {})), member_type=1)
                       for m in group.members.values()]
            # Kafka 4.1's int32 bitfield (kafka-python's own messages take the set of operation codes)
            operations = (sum(1 << op for op in self._access.authorized_operations(ctx, GROUP, group_id))
                          if request.include_authorized_operations else NOT_ASKED_OPERATIONS)
            groups.append(Described(error_code=0, error_message=None, group_id=group_id, group_state=str(group.state),
                                    group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch,
                                    assignor_name=group.preferred_assignor(), members=members,
                                    authorized_operations=operations))
        return Response(throttle_time_ms=0, groups=groups)
