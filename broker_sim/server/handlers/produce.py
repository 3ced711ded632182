"""Produce: authorize, hand the partitions to ``ReplicaManager.append_records``, answer.

As Kafka's ``KafkaApis.handleProduceRequest``: WRITE on the transactional id
(and a transactional batch needs one, authorizer or not: Kafka answers a
request without one TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which also keeps a
client allowed only WRITE on a topic from opening transactions that hold back
the LSO),
then WRITE on each topic; a refused partition gets the refusal's error, the
others go to the replica manager, which owns every Kafka rule of the append
(acks, internal topics, transaction verification, min.insync.replicas,
validation, the acks=-1 wait) and answers each partition with a value.  The
request's record bytes count against the client's producer_byte_rate quota.
acks=0 has no response to carry an error: a failed partition closes the
connection instead, so the client notices (as Kafka).
The answer is a ``protocol.produce_codec.ProduceAnswer``, which the dispatcher encodes without kafka-python's
schema objects; the request is whatever the dispatcher decoded (``produce_codec.ProduceRequest`` for the plain
case, kafka-python's ProduceRequest otherwise): both have the attributes read here.
"""
from __future__ import annotations

import asyncio

import kafka.errors as Errors

from broker_sim.protocol.produce_codec import PartitionAnswer, ProduceAnswer, RecordErrorAnswer, TopicAnswer
from broker_sim.replication.replica_manager import ProduceResult
from broker_sim.security.quotas import PRODUCE as PRODUCER_BYTE_RATE
from broker_sim.server.handlers.access import TXN, WRITE, Access
from broker_sim.server.network import CloseConnection
from broker_sim.server.request_slicing import Slices
from broker_sim.storage.batch import ATTRIBUTES_OFFSET, TRANSACTIONAL_MASK

ATTRIBUTES_LOW = ATTRIBUTES_OFFSET + 1  # the attributes are a big-endian int16



class ProduceApi:
    """Produce, holding what it uses: the access check, the replica manager and the client quotas."""

    def __init__(self, access: Access, replicas, quotas) -> None:
        self._access = access
        self._replicas = replicas
        self._quotas = quotas

    async def produce(self, ctx, request):
        slices = Slices()
        if request.transactional_id is None:
            txn_denied = _has_transactional_batches(request)
        else:
            txn_denied = not self._access.allowed(ctx, WRITE, TXN, request.transactional_id)
        allowed = self._access.topic_check(ctx, WRITE)
        refusals = []  # per topic: the result of its refusal, or None
        wanted = []  # (topic, partition, records) of the allowed partitions, in request order
        for topic in request.topic_data:
            if txn_denied:
                denied = ProduceResult(Errors.TransactionalIdAuthorizationFailedError.errno,
                                       reason=f"WRITE on transactional id {request.transactional_id!r} is not allowed")
            elif not allowed(topic.name):
                denied = ProduceResult(Errors.TopicAuthorizationFailedError.errno,
                                       reason=f"WRITE on topic {topic.name!r} is not allowed")
            else:
                denied = None
                for data in topic.partition_data:
                    wanted.append((topic.name, data.index, data.records))
            refusals.append(denied)
        results = iter(await self._replicas.append_records(
            wanted, required_acks=request.acks, timeout_ms=request.timeout_ms,
            transactional_id=request.transactional_id, version=ctx.version, slices=slices))

        responses = []
        failed = None
        for topic, denied in zip(request.topic_data, refusals):
            partitions = []
            for data in topic.partition_data:
                result = denied or next(results)
                if result.error_code:
                    failed = failed or f"{topic.name}-{data.index}: {result.reason or result.error_message}"
                partitions.append(PartitionAnswer(
                    data.index, result.error_code, result.base_offset, result.log_append_time,
                    result.log_start_offset, result.error_message,
                    [RecordErrorAnswer(i, m) for i, m in result.record_errors] if result.record_errors else []))
                if slices.due():
                    await asyncio.sleep(0)
            responses.append(TopicAnswer(topic.name, partitions))
        throttle = _throttle(self._quotas, ctx, request)
        if request.acks == 0:
            if failed:
                raise CloseConnection(f"acks=0 produce failed: {failed}")
            return None
        return ProduceAnswer(responses, throttle)


def _has_transactional_batches(request) -> bool:
    """Kafka's ProduceRequest.hasTransactionalRecords: a partition whose first batch is transactional (its
    attributes' low byte read in place: a malformed batch is left to the validator)."""
    for topic in request.topic_data:
        for data in topic.partition_data:
            records = data.records
            if records is not None and len(records) > ATTRIBUTES_LOW and records[ATTRIBUTES_LOW] & TRANSACTIONAL_MASK:
                return True
    return False


def _throttle(quotas, ctx, request) -> int:
    """producer_byte_rate: the request's record bytes against the client's quota; mutes the connection
    (KIP-219) and returns the throttle time for the response."""
    if quotas is None or ctx.connection.inter_broker:
        return 0
    size = sum(len(data.records or b"") for topic in request.topic_data for data in topic.partition_data)
    throttle = quotas.record(PRODUCER_BYTE_RATE, ctx.connection.principal, ctx.client_id, size)
    ctx.connection.throttle(throttle)
    return throttle
