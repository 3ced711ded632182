"""ListOffsets, OffsetForLeaderEpoch and DeleteRecords: answered by the partition's leader only.

A follower replica answers NOT_LEADER_OR_FOLLOWER (clients refresh metadata
and ask the leader).  OffsetForLeaderEpoch serves consumers and followers
(``replica_id`` >= 0, truncating after a leader change) alike: the end of
the requested epoch in the leader's log, the log end offset for its latest.
"""
from __future__ import annotations

import kafka.errors as Errors
from kafka.protocol.admin import DeleteRecordsResponse
from kafka.protocol.consumer import ListOffsetsResponse, OffsetForLeaderEpochResponse

from broker_sim.server.handlers import access
from broker_sim.errors import error_of

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL = -1, -2, -3, -4
READ_COMMITTED = 1
ListTopic = ListOffsetsResponse.ListOffsetsTopicResponse
ListPartition = ListTopic.ListOffsetsPartitionResponse


def _lookup(partition, timestamp: int, version: int, read_committed: bool) -> tuple[int, int]:
    """(timestamp, offset) answering a ListOffsets query, (-1, -1) when no record qualifies."""
    if timestamp == EARLIEST or timestamp == EARLIEST_LOCAL:
        return -1, partition.log_start_offset
    if timestamp == LATEST:
        return -1, partition.last_stable_offset if read_committed else partition.high_watermark
    if timestamp == MAX_TIMESTAMP and version >= 7:
        found = partition.log.max_timestamp_and_offset()
        return found if found is not None else (-1, -1)
    if timestamp < 0:
        raise Errors.InvalidRequestError(f"timestamp {timestamp} is not a ListOffsets query this version knows")
    found = partition.log.offset_for_timestamp(timestamp)
    if found is None or found[0] >= (partition.last_stable_offset if read_committed else partition.high_watermark):
        return -1, -1
    return found[1], found[0]


async def list_offsets(broker, ctx, request):
    read_committed = ctx.version >= 2 and request.isolation_level == READ_COMMITTED
    topics = []
    for topic in request.topics:
        partitions = []
        for data in topic.partitions:
            try:
                if not access.allowed(broker, ctx, access.DESCRIBE, access.TOPIC, topic.name):
                    raise Errors.TopicAuthorizationFailedError(f"DESCRIBE on topic {topic.name!r} is not allowed")
                partition = broker.replicas.get_leader(topic.name, data.partition_index)
                partition.check_leader_epoch(data.current_leader_epoch)
                timestamp, offset = _lookup(partition, data.timestamp, ctx.version, read_committed)
                partitions.append(ListPartition(partition_index=data.partition_index, error_code=0,
                                                timestamp=timestamp, offset=offset,
                                                leader_epoch=partition.leader_epoch if offset >= 0 else -1))
            except Exception as exc:
                code, _ = error_of(exc)
                partitions.append(ListPartition(partition_index=data.partition_index, error_code=code,
                                                timestamp=-1, offset=-1, leader_epoch=-1))
        topics.append(ListTopic(name=topic.name, partitions=partitions))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)


EpochTopic = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
EpochEnd = EpochTopic.EpochEndOffset


async def offset_for_leader_epoch(broker, ctx, request):
    topics = []
    # a follower's (replica_id >= 0, v3+) needs CLUSTER_ACTION; a client's DESCRIBE on each topic
    follower = ctx.version >= 3 and request.replica_id is not None and request.replica_id >= 0
    for topic in request.topics:
        partitions = []
        permitted = (access.cluster_action(broker, ctx) if follower
                     else access.allowed(broker, ctx, access.DESCRIBE, access.TOPIC, topic.topic))
        for data in topic.partitions:
            try:
                if not permitted:
                    raise Errors.TopicAuthorizationFailedError(f"not allowed on topic {topic.topic!r}")
                partition = broker.replicas.get_leader(topic.topic, data.partition)
                partition.check_leader_epoch(data.current_leader_epoch)
                epoch, end = partition.end_offset_for_epoch(data.leader_epoch)
                partitions.append(EpochEnd(error_code=0, partition=data.partition, leader_epoch=epoch, end_offset=end))
            except Exception as exc:
                code, _ = error_of(exc)
                partitions.append(EpochEnd(error_code=code, partition=data.partition, leader_epoch=-1, end_offset=-1))
        topics.append(EpochTopic(topic=topic.topic, partitions=partitions))
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)


DeleteTopic = DeleteRecordsResponse.DeleteRecordsTopicResult
DeletePartition = DeleteTopic.DeleteRecordsPartitionResult


async def delete_records(broker, ctx, request):
    topics = []
    for topic in request.topics:
        partitions = []
        for data in topic.partitions:
            try:
                if not access.allowed(broker, ctx, access.DELETE, access.TOPIC, topic.name):
                    raise Errors.TopicAuthorizationFailedError(f"DELETE on topic {topic.name!r} is not allowed")
                partition = broker.replicas.get_leader(topic.name, data.partition_index)
                low = partition.delete_records_before(data.offset)
                partitions.append(DeletePartition(partition_index=data.partition_index, low_watermark=low,
                                                  error_code=0))
            except Exception as exc:
                code, _ = error_of(exc)
                partitions.append(DeletePartition(partition_index=data.partition_index, low_watermark=-1,
                                                  error_code=code))
        topics.append(DeleteTopic(name=topic.name, partitions=partitions))
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)
