"""ListOffsets, OffsetForLeaderEpoch and DeleteRecords: answered by the partition's leader only.

A follower replica answers NOT_LEADER_OR_FOLLOWER (clients refresh metadata
and ask the leader).  OffsetForLeaderEpoch serves consumers and followers
(``replica_id`` >= 0, truncating after a leader change) alike: the end of
the requested epoch in the leader's log, the log end offset for its latest.
"""
from __future__ import annotations

import asyncio
from typing import Callable

import kafka.errors as Errors

from broker_sim.protocol.apis import messages
from broker_sim.server.handlers.access import DELETE, DESCRIBE, Access
from broker_sim.errors import error_of
from broker_sim.server.request_slicing import Slices

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5
# the first ListOffsets version that knows each negative timestamp (a query, not a time): KIP-734's max
# timestamp (v7), KIP-1005's earliest local (v8) and latest tiered (v9) offsets (tiered storage; v10 adds a
# timeout for the remote reads, which a broker without tiered storage never makes)
QUERY_SINCE = {LATEST: 0, EARLIEST: 0, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9}
READ_COMMITTED = 1


def _lookup(partition, timestamp: int, version: int, read_committed: bool) -> tuple[int, int]:
    """(timestamp, offset) answering a ListOffsets query, (-1, -1) when no record qualifies.  A negative
    timestamp this version does not know is UNSUPPORTED_VERSION, as Kafka answers it."""
    if timestamp < 0 and QUERY_SINCE.get(timestamp, version + 1) > version:
        raise Errors.UnsupportedVersionError(f"timestamp {timestamp} is not a query ListOffsets v{version} knows")
    if timestamp in (EARLIEST, EARLIEST_LOCAL):   # without tiered storage every record is local
        return -1, partition.log_start_offset
    if timestamp == LATEST_TIERED:   # Kafka's answer without remote storage: no tiered offset
        return -1, -1
    if timestamp == LATEST:
        return -1, partition.last_stable_offset if read_committed else partition.high_watermark
    if timestamp == MAX_TIMESTAMP:
        found = partition.log.max_timestamp_and_offset()
        return found if found is not None else (-1, -1)
    found = partition.log.offset_for_timestamp(timestamp)
    if found is None or found[0] >= (partition.last_stable_offset if read_committed else partition.high_watermark):
        return -1, -1
    return found[1], found[0]


async def _each_partition(name: str, partitions, permitted: bool, answer: Callable, failed: Callable,
                          slices: Slices) -> list:
    """``answer(name, data)`` for each requested partition of topic ``name``, or ``failed(data, error code)``
    when the topic is not ``permitted`` (TOPIC_AUTHORIZATION_FAILED, decided once for the topic) or answering
    raised; the loop gives the event loop a turn at each of the request's ``slices``."""
    if not permitted:
        refused = Errors.TopicAuthorizationFailedError.errno
        answers = []
        for data in partitions:
            answers.append(failed(data, refused))
            if slices.due():
                await asyncio.sleep(0)
        return answers
    answers = []
    for data in partitions:
        try:
            answers.append(answer(name, data))
        except Exception as exc:
            code, _ = error_of(exc)
            answers.append(failed(data, code))
        if slices.due():
            await asyncio.sleep(0)
    return answers


class OffsetApis:
    def __init__(self, access: Access, replicas) -> None:
        self._access = access
        self._replicas = replicas

    async def list_offsets(self, ctx, request):
        ListOffsetsResponse = messages.ListOffsetsResponse
        ListTopic = ListOffsetsResponse.ListOffsetsTopicResponse
        ListPartition = ListTopic.ListOffsetsPartitionResponse
        read_committed = ctx.version >= 2 and request.isolation_level == READ_COMMITTED

        def answer(name, data):
            partition = self._replicas.get_leader(name, data.partition_index)
            partition.check_leader_epoch(data.current_leader_epoch)
            timestamp, offset = _lookup(partition, data.timestamp, ctx.version, read_committed)
            return ListPartition(partition_index=data.partition_index, error_code=0, timestamp=timestamp,
                                 offset=offset, leader_epoch=partition.leader_epoch if offset >= 0 else -1)

        def failed(data, code):
            return ListPartition(partition_index=data.partition_index, error_code=code, timestamp=-1, offset=-1,
                                 leader_epoch=-1)

        allowed, slices = self._access.topic_check(ctx, DESCRIBE), Slices()
        return ListOffsetsResponse(throttle_time_ms=0, topics=[
            ListTopic(name=topic.name, partitions=await _each_partition(
                topic.name, topic.partitions, allowed(topic.name), answer, failed, slices))
            for topic in request.topics])

    async def offset_for_leader_epoch(self, ctx, request):
        OffsetForLeaderEpochResponse = messages.OffsetForLeaderEpochResponse
        EpochTopic = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
        EpochEnd = EpochTopic.EpochEndOffset
        # with an authorizer a follower's (replica_id >= 0, v3+) needs CLUSTER_ACTION, a client's DESCRIBE on each
        # topic; without one Kafka allows both
        follower = (self._access.enabled and ctx.version >= 3 and request.replica_id is not None
                    and request.replica_id >= 0)

        def answer(name, data):
            partition = self._replicas.get_leader(name, data.partition)
            partition.check_leader_epoch(data.current_leader_epoch)
            epoch, end = partition.end_offset_for_epoch(data.leader_epoch)
            return EpochEnd(error_code=0, partition=data.partition, leader_epoch=epoch, end_offset=end)

        def failed(data, code):
            return EpochEnd(error_code=code, partition=data.partition, leader_epoch=-1, end_offset=-1)

        if follower:
            cluster_action = self._access.cluster_action(ctx)
            permitted = lambda name: cluster_action  # noqa: E731 - one decision for the whole request
        else:
            permitted = self._access.topic_check(ctx, DESCRIBE)
        slices = Slices()
        return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=[
            EpochTopic(topic=topic.topic, partitions=await _each_partition(
                topic.topic, topic.partitions, permitted(topic.topic), answer, failed, slices))
            for topic in request.topics])

    async def delete_records(self, ctx, request):
        DeleteRecordsResponse = messages.DeleteRecordsResponse
        DeleteTopic = DeleteRecordsResponse.DeleteRecordsTopicResult
        DeletePartition = DeleteTopic.DeleteRecordsPartitionResult

        def answer(name, data):
            low = self._replicas.get_leader(name, data.partition_index).delete_records_before(data.offset)
            return DeletePartition(partition_index=data.partition_index, low_watermark=low, error_code=0)

        def failed(data, code):
            return DeletePartition(partition_index=data.partition_index, low_watermark=-1, error_code=code)

        allowed, slices = self._access.topic_check(ctx, DELETE), Slices()
        return DeleteRecordsResponse(throttle_time_ms=0, topics=[
            DeleteTopic(name=topic.name, partitions=await _each_partition(
                topic.name, topic.partitions, allowed(topic.name), answer, failed, slices))
            for topic in request.topics])
