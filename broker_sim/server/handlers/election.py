"""ElectLeaders (API 43): preferred and unclean leader elections an administrator asks for.

Kafka's ``KafkaApis.handleElectLeaders``: ALTER on the cluster is required
(else CLUSTER_AUTHORIZATION_FAILED for every named partition and at the top);
the active controller decides (``Controller.elect_leaders``, rules in
``controller/election.py``), another broker answers NOT_CONTROLLER per
partition, and a decision not made within the request's ``timeout_ms`` is
REQUEST_TIMED_OUT (the controller still makes it).  Asked for all partitions (``topic_partitions`` null), the
answer leaves out those that needed no election.  A single node leads every
partition it has, so each needs no election.
"""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Callable

import kafka.errors as Errors

from broker_sim.controller.cluster_state import PartitionState
from broker_sim.errors import error_of
from broker_sim.protocol.apis import messages
from broker_sim.server.handlers.access import ALTER, Access
from broker_sim.server.request_slicing import Slices

if TYPE_CHECKING:
    from broker_sim.controller.election import ElectionType, Outcome


class ElectionApis:
    def __init__(self, access: Access, metadata, broker_id: int, *, controller: Callable[[], object | None]) -> None:
        self._access = access
        self._metadata = metadata
        self._broker_id = broker_id
        self._controller = controller  # the broker's Controller in a cluster, None on a single node

    async def elect_leaders(self, ctx, request):
        from broker_sim.controller.election import ElectionType  # the election rules: at the first ElectLeaders

        kind = ElectionType(request.election_type) if ctx.version >= 1 else ElectionType.PREFERRED
        slices = Slices()
        wanted = None
        if request.topic_partitions is not None:  # in request order, each partition once
            wanted = {}
            for entry in request.topic_partitions:
                for p in entry.partitions:
                    wanted[(entry.topic, p)] = None
                    if slices.due():
                        await asyncio.sleep(0)
        if not self._access.allowed_cluster(ctx, ALTER):
            refused = (Errors.ClusterAuthorizationFailedError, "ALTER on the cluster is required")
            return await _response(ctx, dict.fromkeys(wanted or (), refused),
                                   Errors.ClusterAuthorizationFailedError.errno, slices)
        controller = self._controller()
        if controller is None:
            outcomes = await self._single_node(kind, wanted, slices)
        else:
            # not cancelled at the timeout: the controller still elects, as Kafka's does
            waiting = asyncio.wrap_future(controller.elect_leaders(kind, wanted))
            done, _ = await asyncio.wait({waiting}, timeout=max(request.timeout_ms, 0) / 1000)
            try:
                if not done:
                    waiting.add_done_callback(lambda f: f.cancelled() or f.exception())
                    raise asyncio.TimeoutError
                outcomes = waiting.result()
            except Errors.NotControllerError as exc:
                outcomes = {key: (Errors.NotControllerError, str(exc)) for key in wanted or ()}
            except asyncio.TimeoutError:
                late = (Errors.RequestTimedOutError, f"the election did not finish within {request.timeout_ms} ms")
                outcomes = {key: late for key in wanted or ()}
            except Exception as exc:  # ZooKeeper unavailable...: every named partition carries the error
                code, message = error_of(exc)
                outcomes = {key: (Errors.for_code(code), message) for key in wanted or ()}
        if wanted is None:
            outcomes = {key: o for key, o in outcomes.items() if o[0] is not Errors.ElectionNotNeededError}
        return await _response(ctx, outcomes, 0, slices)

    async def _single_node(self, kind: ElectionType, wanted, slices: Slices) -> dict[tuple[str, int], Outcome]:
        """This broker leads every partition it has: one decision for a partition that exists, one for one that
        does not (the same for each), answered per named partition."""
        from broker_sim.controller.election import decide_election

        topics = self._metadata.topics
        keys = wanted if wanted is not None else [(t, p) for t, info in topics.items() for p in range(info.partitions)]
        me = self._broker_id
        led = PartitionState(me, 0, (me,), 0)
        existing = decide_election(kind, led, [me], {me}, {me}, 0)[1]
        missing = decide_election(kind, led, [], {me}, {me}, 0)[1]
        outcomes = {}
        for topic, index in keys:
            info = topics.get(topic)
            outcomes[(topic, index)] = existing if info is not None and 0 <= index < info.partitions else missing
            if slices.due():
                await asyncio.sleep(0)
        return outcomes


async def _response(ctx, outcomes: dict[tuple[str, int], Outcome], error_code: int, slices: Slices):
    """The answer, a topic's partitions in the order they were named (Kafka's answer is a map: no order)."""
    ElectLeadersResponse = messages.ElectLeadersResponse
    Result = ElectLeadersResponse.ReplicaElectionResult
    PartitionResult = Result.PartitionResult
    by_topic: dict[str, list] = {}
    for (topic, index), (error, message) in outcomes.items():
        by_topic.setdefault(topic, []).append(PartitionResult(
            partition_id=index, error_code=error.errno if error is not None else 0, error_message=message))
        if slices.due():
            await asyncio.sleep(0)
    return ElectLeadersResponse(
        version=ctx.version, throttle_time_ms=0, error_code=error_code,
        replica_election_results=[Result(topic=topic, partition_result=results) for topic, results in by_topic.items()])
