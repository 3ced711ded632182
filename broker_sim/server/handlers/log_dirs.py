"""DescribeLogDirs (API 35) and AlterReplicaLogDirs (API 34): this broker's log directories (JBOD, ``log.dirs``).

``LogDirApis`` answers from the ``ReplicaManager`` (which owns where each replica lives, ``storage/log_dirs.py``):
DescribeLogDirs lists every log dir with the size and offset lag of its partitions (those asked for, or all when
the topics are null) and, v4+, the volume's total and usable bytes; AlterReplicaLogDirs starts moving each
replica into the named dir and answers at once, as Kafka does (the move completes in the background; a
later DescribeLogDirs shows where the replica is).  ACLs as Kafka's KafkaApis: DescribeLogDirs needs DESCRIBE
on the cluster (refused: v3+ CLUSTER_AUTHORIZATION_FAILED with no results, as Kafka 3.x answers), AlterReplicaLogDirs
ALTER on the cluster (refused: every partition CLUSTER_AUTHORIZATION_FAILED).
"""
from __future__ import annotations

import os

import kafka.errors as Errors

from broker_sim.protocol.apis import messages
from broker_sim.server.handlers.access import ALTER, DESCRIBE, Access


def _volume(directory) -> tuple[int, int]:
    try:
        stat = os.statvfs(directory)
    except OSError:
        return -1, -1
    return stat.f_blocks * stat.f_frsize, stat.f_bavail * stat.f_frsize


class LogDirApis:
    def __init__(self, access: Access, replicas) -> None:
        self._access = access
        self._replicas = replicas

    async def describe_log_dirs(self, ctx, request):
        DescribeLogDirsResponse = messages.DescribeLogDirsResponse
        _Result = DescribeLogDirsResponse.DescribeLogDirsResult
        _Topic = _Result.DescribeLogDirsTopic
        _Partition = _Topic.DescribeLogDirsPartition
        if not self._access.allowed_cluster(ctx, DESCRIBE):
            return DescribeLogDirsResponse(throttle_time_ms=0, error_code=Errors.ClusterAuthorizationFailedError.errno,
                                           results=[])
        wanted = None
        if request.topics is not None:
            wanted = {(topic.topic, index) for topic in request.topics for index in topic.partitions}
        results = []
        for directory, partitions in self._replicas.describe_log_dirs(wanted).items():
            by_topic: dict[str, list] = {}
            for topic, index, size, lag in partitions:
                by_topic.setdefault(topic, []).append(_Partition(partition_index=index, partition_size=size,
                                                                 offset_lag=lag, is_future_key=False))
            total, usable = _volume(directory)
            results.append(_Result(error_code=0, log_dir=str(directory), total_bytes=total, usable_bytes=usable,
                                   is_cordoned=False,
                                   topics=[_Topic(name=name, partitions=parts) for name, parts in by_topic.items()]))
        return DescribeLogDirsResponse(throttle_time_ms=0, error_code=0, results=results)

    async def alter_replica_log_dirs(self, ctx, request):
        AlterReplicaLogDirsResponse = messages.AlterReplicaLogDirsResponse
        _AlterTopic = AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult
        _AlterPartition = _AlterTopic.AlterReplicaLogDirPartitionResult
        allowed = self._access.allowed_cluster(ctx, ALTER)
        answers: dict[str, list] = {}
        for wanted in request.dirs:
            target = self._replicas.log_dirs.resolve(wanted.path)
            for topic in wanted.topics:
                for index in topic.partitions:
                    if not allowed:
                        error = Errors.ClusterAuthorizationFailedError
                    elif target is None:
                        error = Errors.LogDirNotFoundError
                    else:
                        try:
                            self._replicas.alter_log_dir(topic.name, index, target)
                            error = Errors.NoError
                        except Errors.KafkaError as exc:
                            error = type(exc)
                    answers.setdefault(topic.name, []).append(_AlterPartition(partition_index=index,
                                                                              error_code=error.errno))
        return AlterReplicaLogDirsResponse(throttle_time_ms=0, results=[
            _AlterTopic(topic_name=name, partitions=parts) for name, parts in answers.items()])
