"""Produce.

A transactional producer's batches are accepted only for partitions it added
to its Ongoing transaction (AddPartitionsToTxn), as Kafka 3.6+ verifies
(``transaction.partition.verification.enable``): otherwise INVALID_TXN_STATE,
or INVALID_PRODUCER_EPOCH for an epoch the coordinator has fenced.
"""
from __future__ import annotations

import logging

import kafka.errors as Errors
from kafka.protocol.producer import ProduceResponse

from broker_sim.server.handlers.errors import error_of
from broker_sim.server.network import CloseConnection
from broker_sim.storage.batch import decode_header

log = logging.getLogger(__name__)
TopicResponse = ProduceResponse.TopicProduceResponse
PartitionResponse = TopicResponse.PartitionProduceResponse


def _partition_error(index: int, code: int, message: str | None) -> PartitionResponse:
    return PartitionResponse(index=index, error_code=code, base_offset=-1, log_append_time_ms=-1,
                             log_start_offset=-1, record_errors=[], error_message=message)


async def produce(broker, ctx, request):
    acks = request.acks
    responses = []
    failed = None
    for topic in request.topic_data:
        partitions = []
        for data in topic.partition_data:
            code, message = _append(broker, topic.name, data, acks, request.transactional_id)
            if code:
                failed = failed or f"{topic.name}-{data.index}: {message}"
                partitions.append(_partition_error(data.index, code, message))
            else:
                result = message
                partitions.append(PartitionResponse(
                    index=data.index, error_code=0, base_offset=result.base_offset,
                    log_append_time_ms=result.log_append_time, log_start_offset=result.log_start_offset,
                    record_errors=[], error_message=None))
        responses.append(TopicResponse(name=topic.name, partition_responses=partitions))
    if acks == 0:
        if failed:
            # acks=0 has no response to carry the error; Kafka closes the connection so the client notices
            raise CloseConnection(f"acks=0 produce failed: {failed}")
        return None
    return ProduceResponse(responses=responses, throttle_time_ms=0)


def _append(broker, topic: str, data, acks: int, transactional_id):
    """(0, AppendResult) or (error code, message) for one partition's records."""
    if acks not in (-1, 0, 1):
        return Errors.InvalidRequiredAcksError.errno, f"acks={acks} is not one of -1, 0, 1"
    try:
        partition = broker.replicas.get(topic, data.index)
        if data.records is None or not data.records:
            raise Errors.InvalidRecordError(f"produce to {topic}-{data.index} carries no records")
        if transactional_id is not None:
            first = decode_header(data.records, 0, 0, len(data.records))
            if first.is_transactional:
                error = broker.transactions.verify_partition(transactional_id, first.producer_id,
                                                             first.producer_epoch, topic, data.index)
                if error:
                    return error, (f"{topic}-{data.index} is not part of the ongoing transaction of "
                                   f"{transactional_id!r} (producer {first.producer_id} epoch {first.producer_epoch})")
        if acks == -1:
            min_isr = broker.topic_config(topic, "min.insync.replicas")
            if min_isr > 1:
                raise Errors.NotEnoughReplicasError(
                    f"{topic}-{data.index} has 1 in-sync replica, fewer than min.insync.replicas={min_isr}")
        result = partition.append_records(data.records)
    except Exception as exc:  # every failure becomes this partition's error code
        code, message = error_of(exc)
        log.debug("produce to %s-%d failed: %s", topic, data.index, message)
        return code, message
    return 0, result
