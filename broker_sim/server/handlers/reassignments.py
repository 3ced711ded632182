"""AlterPartitionReassignments (API 45) and ListPartitionReassignments (API 46), KIP-455.

``ReassignmentApis`` checks Kafka's ACLs (ALTER resp. DESCRIBE on the cluster: CLUSTER_AUTHORIZATION_FAILED
for the whole request) and hands the work to the owner of reassignments, the active controller
(``controller/reassignment.py``): on a broker whose controller is not active both answer NOT_CONTROLLER,
as Kafka's ZooKeeper-mode brokers do, and clients look for the controller again (Metadata's controller id).
The request's partitions are bounded by the topics that exist; a partition may appear once per request
(a duplicate answers INVALID_REQUEST, Kafka's "Duplicate partition").

On a single node (no controller) the only possible replica set is this broker: reassigning a partition
to ``[this broker]`` is accepted and already complete, any other set is INVALID_REPLICA_ASSIGNMENT, a
cancellation NO_REASSIGNMENT_IN_PROGRESS, and nothing is ever listed.
"""
from __future__ import annotations

import asyncio
import logging

import kafka.errors as Errors

from broker_sim.protocol.apis import messages
from broker_sim.server.handlers.access import ALTER, DESCRIBE, Access
from broker_sim.server.request_slicing import Slices

log = logging.getLogger(__name__)


class ReassignmentApis:
    def __init__(self, access: Access, metadata, broker_id: int, cluster) -> None:
        self._access = access
        self._metadata = metadata
        self._broker_id = broker_id
        self._cluster = cluster  # ClusterMember, None on a single node

    async def _alter_response(self, code: int, message: str | None, results: dict, slices: Slices):
        AlterPartitionReassignmentsResponse = messages.AlterPartitionReassignmentsResponse
        _AltTopic = AlterPartitionReassignmentsResponse.ReassignableTopicResponse
        _AltPartition = _AltTopic.ReassignablePartitionResponse
        by_topic: dict[str, list] = {}
        for (topic, index), (part_code, part_message) in results.items():
            by_topic.setdefault(topic, []).append(_AltPartition(partition_index=index, error_code=part_code,
                                                                error_message=part_message))
            if slices.due():
                await asyncio.sleep(0)
        return AlterPartitionReassignmentsResponse(
            throttle_time_ms=0, error_code=code, error_message=message, allow_replication_factor_change=True,
            responses=[_AltTopic(name=topic, partitions=parts) for topic, parts in by_topic.items()])

    async def alter_partition_reassignments(self, ctx, request):
        targets: dict[tuple[str, int], tuple[int, ...] | None] = {}
        results: dict[tuple[str, int], tuple[int, str | None]] = {}
        slices = Slices()
        for topic in request.topics:
            for partition in topic.partitions:
                if slices.due():
                    await asyncio.sleep(0)
                key = (topic.name, partition.partition_index)
                if key in targets or key in results:
                    results[key] = (Errors.InvalidRequestError.errno, f"Duplicate partition {key[0]}-{key[1]}")
                    targets.pop(key, None)
                    continue
                replicas = None if partition.replicas is None else tuple(partition.replicas)
                if key[0] not in self._metadata.topics:
                    results[key] = (Errors.UnknownTopicOrPartitionError.errno, f"topic {key[0]!r} does not exist")
                else:
                    targets[key] = replicas
        if not self._access.allowed_cluster(ctx, ALTER):
            code = Errors.ClusterAuthorizationFailedError.errno
            message = "AlterPartitionReassignments needs ALTER on the cluster"
            return await self._alter_response(code, message, dict.fromkeys([*results, *targets], (code, message)),
                                              slices)
        if targets:
            try:
                results.update(await self._alter(targets, request.timeout_ms, slices))
            except Errors.KafkaError as exc:
                return await self._alter_response(exc.errno, str(exc) or exc.description, {}, slices)
        return await self._alter_response(0, None, results, slices)

    async def _alter(self, targets: dict, timeout_ms: int, slices: Slices) -> dict:
        if self._cluster is None:
            decided = {}
            for key, target in targets.items():
                decided[key] = self._single_node(key, target)
                if slices.due():
                    await asyncio.sleep(0)
            return decided
        timeout_s = min(max(timeout_ms, 1000), 60000) / 1000.0
        outcome = await asyncio.get_running_loop().run_in_executor(
            None, self._cluster.controller.alter_reassignments, targets, timeout_s)
        return {key: (0, None) if error is None else (error.error.errno, error.message)
                for key, error in outcome.items()}

    def _single_node(self, key: tuple[str, int], target) -> tuple[int, str | None]:
        info = self._metadata.topics.get(key[0])
        if info is None or not 0 <= key[1] < info.partitions:
            return Errors.UnknownTopicOrPartitionError.errno, f"{key[0]}-{key[1]} does not exist"
        if target is None:
            return Errors.NoReassignmentInProgressError.errno, "No reassignment in progress for this partition"
        if list(target) != [self._broker_id]:
            return (Errors.InvalidReplicationAssignmentError.errno,
                    f"Replica assignment has brokers that are not alive. Replica list: {list(target)}, "
                    f"live broker list: [{self._broker_id}]")
        return 0, None

    async def list_partition_reassignments(self, ctx, request):
        ListPartitionReassignmentsResponse = messages.ListPartitionReassignmentsResponse
        _ListTopic = ListPartitionReassignmentsResponse.OngoingTopicReassignment
        _ListPartition = _ListTopic.OngoingPartitionReassignment
        if not self._access.allowed_cluster(ctx, DESCRIBE):
            return ListPartitionReassignmentsResponse(
                throttle_time_ms=0, error_code=Errors.ClusterAuthorizationFailedError.errno,
                error_message="ListPartitionReassignments needs DESCRIBE on the cluster", topics=[])
        if self._cluster is None:
            ongoing = {}
        elif not self._cluster.controller.is_active:
            return ListPartitionReassignmentsResponse(
                throttle_time_ms=0, error_code=Errors.NotControllerError.errno,
                error_message=f"broker {self._broker_id} is not the controller", topics=[])
        else:
            ongoing = self._cluster.store.reassignments()
        if request.topics is not None:
            wanted = {(t.name, p) for t in request.topics for p in t.partition_indexes}
            ongoing = {k: v for k, v in ongoing.items() if k in wanted}
        by_topic: dict[str, list] = {}
        for (topic, index), (replicas, adding, removing) in sorted(ongoing.items()):
            by_topic.setdefault(topic, []).append(_ListPartition(
                partition_index=index, replicas=replicas, adding_replicas=adding, removing_replicas=removing))
        return ListPartitionReassignmentsResponse(
            throttle_time_ms=0, error_code=0, error_message=None,
            topics=[_ListTopic(name=topic, partitions=parts) for topic, parts in by_topic.items()])
