"""Hostile requests whose cost grows with what they name (issue 44, findings 2, 3 and 7): the soak's attacks
and the builders ``tests/hostile/test_request_cost.py`` sends.

Theory of operation: one request may name tens of thousands of partitions that do not exist (or that the client
may not touch) within ``socket.request.max.bytes``; ``wide_request(api, count)`` builds such a request for each
API whose work is per partition (or per named topic or resource), with kafka-python's request classes.  The
broker must answer each without holding its event loop (decode, per-partition work and encode are sliced, see
``server/request_slicing.py``) and must keep nothing per unknown partition (fetch sessions).
``send_pipelined(port, commit_frames(n))`` sends thousands of OffsetCommits on one connection without reading
the answers first (finding 7).

``ATTACKS`` (signature ``name(port, rng, cache) -> None``) is wired into ``hostile_soak.py`` by the lead.
"""
from __future__ import annotations

import threading

from kafka.protocol.admin import (AlterPartitionReassignmentsRequest, DeleteRecordsRequest, DescribeConfigsRequest,
                                  DescribeProducersRequest, ElectLeadersRequest)
from kafka.protocol.consumer import (FetchRequest, ListOffsetsRequest, OffsetCommitRequest, OffsetFetchRequest,
                                     OffsetForLeaderEpochRequest)
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer import ProduceRequest

from broker_sim.testing.hostile_wire import _connect, _encode, _read_answers, _send_and_drain

UNKNOWN_TOPIC = "hostile-no-such-topic"
TOPIC_RESOURCE = 2


def _fetch(count: int, topic: str, session_epoch: int):
    return FetchRequest[12](
        replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0,
        session_epoch=session_epoch, topics=[FetchRequest.FetchTopic(topic=topic, partitions=[
            FetchRequest.FetchTopic.FetchPartition(partition=i, fetch_offset=0, partition_max_bytes=1 << 20,
                                                   current_leader_epoch=-1, last_fetched_epoch=-1,
                                                   log_start_offset=-1) for i in range(count)])],
        forgotten_topics_data=[], rack_id="")


def session_fetch(count: int, topic: str = UNKNOWN_TOPIC):
    """A full Fetch (v12) asking for a new session (epoch 0) of ``count`` partitions of ``topic``."""
    return _fetch(count, topic, 0)


def wide_request(api: str, count: int, topic: str = UNKNOWN_TOPIC):
    """A request of ``api`` naming ``count`` partitions of ``topic`` (Metadata and DescribeConfigs: ``count``
    topic names; OffsetCommit and OffsetFetch: of group ``hostile-wide``)."""
    indexes = range(count)
    if api == "Fetch":
        return _fetch(count, topic, -1)
    if api == "ListOffsets":
        return ListOffsetsRequest[7](replica_id=-1, isolation_level=0, topics=[ListOffsetsRequest.ListOffsetsTopic(
            name=topic, partitions=[ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                partition_index=i, current_leader_epoch=-1, timestamp=-1) for i in indexes])])
    if api == "OffsetCommit":
        return OffsetCommitRequest[8](
            group_id="hostile-wide", generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
            topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=topic, partitions=[
                OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                    partition_index=i, committed_offset=1, committed_leader_epoch=-1, committed_metadata="")
                for i in indexes])])
    if api == "OffsetFetch":
        return OffsetFetchRequest[8](groups=[OffsetFetchRequest.OffsetFetchRequestGroup(
            group_id="hostile-wide", topics=[OffsetFetchRequest.OffsetFetchRequestGroup.OffsetFetchRequestTopics(
                name=topic, partition_indexes=list(indexes))])], require_stable=False)
    if api == "DeleteRecords":
        return DeleteRecordsRequest[2](timeout_ms=1000, topics=[DeleteRecordsRequest.DeleteRecordsTopic(
            name=topic, partitions=[DeleteRecordsRequest.DeleteRecordsTopic.DeleteRecordsPartition(
                partition_index=i, offset=0) for i in indexes])])
    if api == "OffsetForLeaderEpoch":
        return OffsetForLeaderEpochRequest[4](replica_id=-1, topics=[OffsetForLeaderEpochRequest.OffsetForLeaderTopic(
            topic=topic, partitions=[OffsetForLeaderEpochRequest.OffsetForLeaderTopic.OffsetForLeaderPartition(
                partition=i, current_leader_epoch=-1, leader_epoch=0) for i in indexes])])
    if api == "Produce":
        return ProduceRequest[9](transactional_id=None, acks=1, timeout_ms=1000, topic_data=[
            ProduceRequest.TopicProduceData(name=topic, partition_data=[
                ProduceRequest.TopicProduceData.PartitionProduceData(index=i, records=None) for i in indexes])])
    if api == "Metadata":
        return MetadataRequest[12](topics=[MetadataRequest.MetadataRequestTopic(topic_id=None, name=f"{topic}-{i}")
                                           for i in indexes], allow_auto_topic_creation=False,
                                   include_topic_authorized_operations=False)
    if api == "ElectLeaders":
        return ElectLeadersRequest[2](election_type=0, timeout_ms=1000, topic_partitions=[
            ElectLeadersRequest.TopicPartitions(topic=topic, partitions=list(indexes))])
    if api == "DescribeConfigs":
        return DescribeConfigsRequest[4](resources=[DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=TOPIC_RESOURCE, resource_name=f"{topic}-{i}", configuration_keys=None) for i in indexes],
            include_synonyms=False, include_documentation=False)
    if api == "DescribeProducers":
        return DescribeProducersRequest[0](topics=[DescribeProducersRequest.TopicRequest(
            name=topic, partition_indexes=list(indexes))])
    if api == "AlterPartitionReassignments":
        return AlterPartitionReassignmentsRequest[0](timeout_ms=1000, topics=[
            AlterPartitionReassignmentsRequest.ReassignableTopic(name=topic, partitions=[
                AlterPartitionReassignmentsRequest.ReassignableTopic.ReassignablePartition(
                    partition_index=i, replicas=[0]) for i in indexes])])
    raise ValueError(f"no wide request for {api}")


WIDE_APIS = ("Fetch", "ListOffsets", "OffsetCommit", "OffsetFetch", "DeleteRecords", "OffsetForLeaderEpoch",
             "Produce", "Metadata", "ElectLeaders", "DescribeConfigs", "AlterPartitionReassignments",
             "DescribeProducers")


def commit_frames(count: int, *, group: str = "hostile-pipelined", topic: str = "hostile-pipelined") -> list[bytes]:
    """``count`` framed OffsetCommits (v8, partition 0 of ``topic``, offsets 0, 1, ...) of ``group``, from outside the
    group (generation -1), correlation ids 1, 2, ..."""
    return [_encode(OffsetCommitRequest[8](
        group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=topic, partitions=[
            OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                partition_index=0, committed_offset=i, committed_leader_epoch=-1, committed_metadata="")])]),
        correlation_id=i + 1) for i in range(count)]


def send_pipelined(port: int, frames: list[bytes], *, read_s: float = 60.0) -> int:
    """Send every frame on one new connection without waiting for answers, then read until each is answered (or
    ``read_s`` passes, or the broker closes); returns how many answers came back."""
    with _connect(port, timeout=read_s) as sock:
        sock.sendall(b"".join(frames))
        return _read_answers(sock, len(frames), read_s)


# --- soak attacks -----------------------------------------------------------------------------------------------

def _wide(api: str, count: int):
    def attack(port, rng, cache):
        _send_and_drain(port, [_encode(wide_request(api, count))], read_s=30.0)
    attack.__name__ = f"wide_{api.lower()}"
    return attack


def million_partition_elect_leaders(port, rng, cache):
    _send_and_drain(port, [_encode(wide_request("ElectLeaders", 1_000_000))], read_s=60.0)


def unknown_partition_sessions(port, rng, cache):
    """Twenty full fetches each asking for a session of 50,000 partitions that do not exist."""
    _send_and_drain(port, [_encode(session_fetch(50_000), correlation_id=i + 1) for i in range(20)], read_s=60.0)


def pipelined_offset_commits(port, rng, cache):
    """Four connections, each with 3,000 OffsetCommits pipelined."""
    frames = commit_frames(3_000)
    senders = [threading.Thread(target=send_pipelined, args=(port, frames)) for _ in range(4)]
    for sender in senders:
        sender.start()
    for sender in senders:
        sender.join()


ATTACKS = [_wide(api, 50_000) for api in WIDE_APIS] + [million_partition_elect_leaders, unknown_partition_sessions,
                                                        pipelined_offset_commits]
