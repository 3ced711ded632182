"""Produce.

A transactional producer's batches are accepted only for partitions it added
to its Ongoing transaction (AddPartitionsToTxn), as Kafka 3.6+ verifies
(``transaction.partition.verification.enable``): otherwise INVALID_TXN_STATE,
or INVALID_PRODUCER_EPOCH for an epoch the coordinator has fenced.

Replication: only the partition's leader appends (NOT_LEADER_OR_FOLLOWER
otherwise).  acks=-1 is refused before the append with NOT_ENOUGH_REPLICAS
when the ISR is smaller than the topic's min.insync.replicas; after the
append the request waits (Kafka's delayed produce) until the high watermark
covers the appended records, for every partition of the request at once, at
most the request's timeout_ms: REQUEST_TIMED_OUT past it,
NOT_LEADER_OR_FOLLOWER when leadership moved meanwhile,
NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below the minimum.  On a
single node the high watermark is already there and nothing waits.  acks=1
answers after the local append.

Records: every partition's records pass Kafka's LogValidator rules
(``storage/validator.py``) before anything else touches them; an input that
would take more than ~0.5 ms to check (over 256 KB, or decompressing past
that) is checked on a small thread pool so the event loop keeps serving
other connections, and the append itself then happens back on the loop, in
request order.  Per-record
failures (a keyless record on a compacted topic) answer INVALID_RECORD with
KIP-467 ``record_errors`` (index in its batch + message) and ``error_message``,
so a client fails only those records.
"""
from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor

import kafka.errors as Errors
from kafka.protocol.producer import ProduceResponse

from broker_sim.security.quotas import PRODUCE as PRODUCER_BYTE_RATE
from broker_sim.server.handlers import access
from broker_sim.server.handlers.errors import error_of
from broker_sim.server.network import CloseConnection
from broker_sim.storage.batch import decode_header, parse_batches
from broker_sim.storage.recompress import needs_recompression, recompress, target_codec
from broker_sim.storage.validator import (
    MoveToThread, RecordRules, RecordValidationError, costs_a_thread, validate_records)

log = logging.getLogger(__name__)
TopicResponse = ProduceResponse.TopicProduceResponse
PartitionResponse = TopicResponse.PartitionProduceResponse
RecordError = PartitionResponse.BatchIndexAndErrorMessage
# Two threads: decompression (zlib, zstd, lz4, snappy) releases the GIL, so two bombs at once
# still leave the loop a core; each holds at most message.max.decompressed.bytes.
_VALIDATION_THREADS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="record-validation")


def _partition_error(index: int, code: int, message: str | None, record_errors=()) -> PartitionResponse:
    return PartitionResponse(index=index, error_code=code, base_offset=-1, log_append_time_ms=-1,
                             log_start_offset=-1, error_message=message,
                             record_errors=[RecordError(batch_index=i, batch_index_error_message=m)
                                            for i, m in record_errors])


async def produce(broker, ctx, request):
    acks = request.acks
    responses = []
    failed = None
    waits = []  # (partition responses list, position, partition, offset to reach, min ISR) for acks=-1
    # Kafka's checks: WRITE on the transactional id (and with an authorizer, transactional batches need one:
    # without it a client allowed only WRITE on a topic could open transactions that hold back the LSO),
    # then WRITE on each topic
    txn_denied = request.transactional_id is not None and not access.allowed(
        broker, ctx, access.WRITE, access.TXN, request.transactional_id)
    if (request.transactional_id is None and broker.authorizer is not None and not ctx.connection.inter_broker
            and _has_transactional_batches(request)):
        txn_denied = True
    for topic in request.topic_data:
        partitions = []
        denied = None
        if txn_denied:
            denied = (Errors.TransactionalIdAuthorizationFailedError.errno,
                      f"WRITE on transactional id {request.transactional_id!r} is not allowed")
        elif not access.allowed(broker, ctx, access.WRITE, access.TOPIC, topic.name):
            denied = (Errors.TopicAuthorizationFailedError.errno, f"WRITE on topic {topic.name!r} is not allowed")
        for data in topic.partition_data:
            if denied is not None:
                failed = failed or f"{topic.name}-{data.index}: {denied[1]}"
                partitions.append(_partition_error(data.index, *denied))
                continue
            batches, (code, message, record_errors) = await _validate(broker, topic.name, data, acks)
            if not code:
                code, message = _append(broker, topic.name, data, batches, acks, request.transactional_id)
            if code:
                failed = failed or f"{topic.name}-{data.index}: {message}"
                partitions.append(_partition_error(data.index, code, message, record_errors))
            else:
                result, partition, min_isr = message
                partitions.append(PartitionResponse(
                    index=data.index, error_code=0, base_offset=result.base_offset,
                    log_append_time_ms=result.log_append_time, log_start_offset=result.log_start_offset,
                    record_errors=[], error_message=None))
                if acks == -1:
                    waits.append((partitions, len(partitions) - 1, partition, result.last_offset + 1, min_isr))
        responses.append(TopicResponse(name=topic.name, partition_responses=partitions))
    if waits:
        await _await_replication(waits, request.timeout_ms)
    throttle = _throttle(broker, ctx, request)
    if acks == 0:
        if failed:
            # acks=0 has no response to carry the error; Kafka closes the connection so the client notices
            raise CloseConnection(f"acks=0 produce failed: {failed}")
        return None
    return ProduceResponse(responses=responses, throttle_time_ms=throttle)


def _has_transactional_batches(request) -> bool:
    """Kafka's ProduceRequest.hasTransactionalRecords: a partition whose first batch is transactional
    (a malformed one is left to the validator)."""
    for topic in request.topic_data:
        for data in topic.partition_data:
            records = data.records or b""
            try:
                if decode_header(records, 0, 0, len(records)).is_transactional:
                    return True
            except Errors.KafkaError:
                continue
    return False


def _throttle(broker, ctx, request) -> int:
    """producer_byte_rate: the request's record bytes against the client's quota; mutes the connection
    (KIP-219) and returns the throttle time for the response."""
    quotas = broker.quotas
    if quotas is None or ctx.connection.inter_broker:
        return 0
    size = sum(len(data.records or b"") for topic in request.topic_data for data in topic.partition_data)
    throttle = quotas.record(PRODUCER_BYTE_RATE, ctx.connection.principal, ctx.client_id, size)
    ctx.connection.throttle(throttle)
    return throttle


async def _await_replication(waits, timeout_ms: int) -> None:
    """acks=-1: wait for the high watermarks of all appended partitions at once; errors replace the answers."""
    timeout_s = max(timeout_ms, 0) / 1000.0
    pending = {}
    for partitions, position, partition, offset, min_isr in waits:
        if partition.high_watermark >= offset and partition.is_leader and len(partition.isr) >= min_isr:
            continue  # already committed (always so on a single node): no task, no wait
        task = asyncio.ensure_future(partition.wait_for_high_watermark(offset, timeout_s, min_isr=min_isr))
        pending[task] = (partitions, position, partition)
    if not pending:
        return
    await asyncio.wait(list(pending))
    for task, (partitions, position, partition) in pending.items():
        exc = task.exception()
        if exc is not None:
            code, message = error_of(exc)
            log.debug("acks=all produce to %s failed: %s", partition, message)
            partitions[position] = _partition_error(partitions[position].index, code, message)


async def _validate(broker, topic: str, data, acks: int):
    """(batch headers, (0, None, [])) for records that may be appended, else (None, (code, message, record errors))."""
    if acks not in (-1, 0, 1):
        return None, (Errors.InvalidRequiredAcksError.errno, f"acks={acks} is not one of -1, 0, 1", [])
    if topic in broker.internal_topics:  # only their coordinators append, not through Produce (as Kafka)
        return None, (Errors.InvalidTopicError.errno, f"Cannot append to internal topic {topic}", [])
    try:
        partition = broker.replicas.get_leader(topic, data.index)
        if data.records is None or not data.records:
            raise Errors.InvalidRecordError(f"produce to {topic}-{data.index} carries no records")
        config = partition.log.config
        rules = RecordRules(config.compact, config.max_message_bytes,
                            broker.config.get("message.max.decompressed.bytes"))
        batches = parse_batches(data.records)
        try:
            if costs_a_thread(data.records):
                raise MoveToThread
            validate_records(data.records, rules, batches, inline=True)
        except MoveToThread:
            await asyncio.get_running_loop().run_in_executor(
                _VALIDATION_THREADS, validate_records, data.records, rules, batches)
        codec = target_codec(broker.topic_config(topic, "compression.type"))
        if needs_recompression(batches, codec):  # the topic's compression.type, as Kafka's LogValidator
            if costs_a_thread(data.records):
                records = await asyncio.get_running_loop().run_in_executor(
                    _VALIDATION_THREADS, recompress, data.records, batches, codec)
            else:
                records = recompress(data.records, batches, codec)
            data.records = records
            batches = parse_batches(records)
    except RecordValidationError as exc:
        log.debug("produce to %s-%d refused: %s", topic, data.index, exc)
        return None, (exc.errno, str(exc), exc.record_errors)
    except Exception as exc:  # every failure becomes this partition's error code
        code, message = error_of(exc)
        log.debug("produce to %s-%d refused: %s", topic, data.index, message)
        return None, (code, message, [])
    return batches, (0, None, [])


def _append(broker, topic: str, data, batches, acks: int, transactional_id):
    """(0, (AppendResult, partition, min ISR)) or (error code, message) for one partition's validated records."""
    min_isr = 1
    try:
        partition = broker.replicas.get_leader(topic, data.index)
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
            if len(partition.isr) < min_isr:
                raise Errors.NotEnoughReplicasError(
                    f"{topic}-{data.index} has {len(partition.isr)} in-sync replica"
                    f"{'s' if len(partition.isr) != 1 else ''} {list(partition.isr)}, fewer than "
                    f"min.insync.replicas={min_isr}")
        result = partition.append_records(data.records, batches=batches)
    except Exception as exc:  # every failure becomes this partition's error code
        code, message = error_of(exc)
        log.debug("produce to %s-%d failed: %s", topic, data.index, message)
        return code, message
    return 0, (result, partition, min_isr)
