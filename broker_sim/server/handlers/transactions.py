"""Transaction APIs: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit,
WriteTxnMarkers, ListTransactions, DescribeTransactions and DescribeProducers.

Each ``TransactionApis`` handler reads its version's fields, calls the transaction coordinator
(``transactions``, a ``broker_sim.coordinator.txn.service.TxnService``), the producer id manager
(an idempotent InitProducerId), the group coordinator (TxnOffsetCommit) or the marker writer (WriteTxnMarkers),
and builds the response; the rules live in the coordinators.  The one rule
kept here is Kafka's per-version error mapping: PRODUCER_FENCED (KIP-588)
reaches clients only on the versions that know it, older ones get
INVALID_PRODUCER_EPOCH.  WriteTxnMarkers is a broker-to-broker API: with an authorizer, from a
client (``ctx.inter_broker`` false) without CLUSTER_ACTION every partition answers
CLUSTER_AUTHORIZATION_FAILED; without one, Kafka writes any client's markers.  ACL checks (``handlers/access.py``) are Kafka's:
WRITE on the transactional id for InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and
TxnOffsetCommit; WRITE on each topic added; READ on the group whose offsets join the transaction.

DescribeProducers (KIP-664, what ``kafka-transactions describe-producers``, ``find-hanging`` and
``abort --start-offset`` ask) lists a partition's producer state (``storage/producer_state.py``) as this
broker's replica holds it: Kafka answers from any replica, a follower's too (``--broker-id``), and
NOT_LEADER_OR_FOLLOWER only when the broker hosts no replica of an existing partition.  Kafka's
``handleDescribeProducersRequest`` decides per topic, in this order, for all the topic's partitions: an
illegal name INVALID_TOPIC_EXCEPTION, no READ on the topic TOPIC_AUTHORIZATION_FAILED, a topic the metadata
does not know UNKNOWN_TOPIC_OR_PARTITION (these three with a message); then per partition (without one): a
partition the topic does not have UNKNOWN_TOPIC_OR_PARTITION, an offline one KAFKA_STORAGE_ERROR.
"""
from __future__ import annotations

import asyncio
from functools import partial
from typing import Awaitable, Callable, Iterable

import kafka.errors as Errors

from broker_sim.controller.metadata import topic_name_problem
from broker_sim.coordinator.group.records import OFFSETS_TOPIC, CommittedOffset
from broker_sim.coordinator.txn.coordinator import TxnDescription
from broker_sim.coordinator.txn.records import TRANSACTION_STATE_TOPIC
from broker_sim.coordinator.txn.state import parse_state
from broker_sim.protocol.apis import messages
from broker_sim.server.handlers import access
from broker_sim.server.handlers.access import Access
from broker_sim.server.request_slicing import OFFLOAD_PARTITIONS, Slices, codec_thread

PRODUCER_FENCED = Errors.ProducerFencedError.errno
INVALID_PRODUCER_EPOCH = Errors.InvalidProducerEpochError.errno
CLUSTER_AUTHORIZATION_FAILED = Errors.ClusterAuthorizationFailedError.errno
TXN_AUTHORIZATION_FAILED = Errors.TransactionalIdAuthorizationFailedError.errno
TOPIC_AUTHORIZATION_FAILED = Errors.TopicAuthorizationFailedError.errno
GROUP_AUTHORIZATION_FAILED = Errors.GroupAuthorizationFailedError.errno
OPERATION_NOT_ATTEMPTED = Errors.OperationNotAttemptedError.errno
INVALID_TOPIC = Errors.InvalidTopicError.errno
UNKNOWN_TOPIC_OR_PARTITION = Errors.UnknownTopicOrPartitionError.errno
NOT_LEADER_OR_FOLLOWER = Errors.NotLeaderForPartitionError.errno
# the messages of Kafka's ApiError(error) for DescribeProducers' topic-level refusals (Errors.<name>.message())
TOPIC_AUTHORIZATION_FAILED_MESSAGE = "Topic authorization failed."
UNKNOWN_TOPIC_MESSAGE = "This server does not host this topic-partition."


def _fenced_as(error: int, version: int, first_version: int) -> int:
    """PRODUCER_FENCED on versions that have it (``first_version`` on), INVALID_PRODUCER_EPOCH before."""
    return INVALID_PRODUCER_EPOCH if error == PRODUCER_FENCED and version < first_version else error


def kafka_listing_order(producer_ids: Iterable[int]) -> list[int]:
    """``producer_ids`` (in insertion order) in the order Kafka lists them: its ProducerStateManager keeps
    producers in a ``java.util.HashMap``, iterated by bucket of the spread ``Long.hashCode`` and, within a
    bucket, in insertion order.  The table is taken as sized for the current count (16, doubled while more
    than 3/4 full); Kafka's never shrinks, so after many producers expired its order can differ."""
    ids = list(producer_ids)
    capacity = 16
    while len(ids) > capacity * 3 // 4:
        capacity *= 2
    mask = capacity - 1

    def bucket(producer_id: int) -> int:
        h = (producer_id ^ (producer_id >> 32)) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & mask
    return sorted(ids, key=bucket)  # stable: insertion order within a bucket


def _topic_results(cls, results: dict[tuple[str, int], int], version: int) -> list:
    by_topic: dict[str, list] = {}
    for (topic, index), error in results.items():
        by_topic.setdefault(topic, []).append(
            cls.AddPartitionsToTxnPartitionResult(partition_index=index,
                                                  partition_error_code=_fenced_as(error, version, 2)))
    return [cls(name=topic, results_by_partition=partitions) for topic, partitions in by_topic.items()]


class TransactionApis:
    def __init__(self, access: Access, transactions, groups, producer_ids, *, replicas, metadata,
                 write_markers: Callable[..., dict[tuple[str, int], int]],
                 write_markers_replicated: Callable[..., Awaitable[dict[tuple[str, int], int]]] | None) -> None:
        self._access = access
        self._replicas = replicas  # DescribeProducers: the partitions hosted here and their producer state
        self._metadata = metadata  # DescribeProducers: which topics and partitions exist
        self._transactions = transactions
        self._groups = groups  # TxnOffsetCommit's offsets and AddOffsetsToTxn's partition are the group's
        self._producer_ids = producer_ids  # idempotent producers' ids
        # (producer id, epoch, coordinator epoch, commit, partitions) -> error code per partition; in a cluster the
        # replicated one answers once the ISR has the markers
        self._write_markers = write_markers
        self._write_markers_replicated = write_markers_replicated

    def _txn_allowed(self, ctx, transactional_id: str) -> bool:
        return self._access.allowed(ctx, access.WRITE, access.TXN, transactional_id)

    # --- InitProducerId ---------------------------------------------------------------------------

    async def init_producer_id(self, ctx, request):
        InitProducerIdResponse = messages.InitProducerIdResponse
        version = ctx.version
        expected_id = request.producer_id if version >= 3 else -1
        expected_epoch = request.producer_epoch if version >= 3 else -1
        if request.transactional_id is None:
            # KIP-679: an idempotent producer needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic
            if not (self._access.allowed_cluster(ctx, access.IDEMPOTENT_WRITE)
                    or self._access.allowed_any(ctx, access.WRITE, access.TOPIC)):
                return InitProducerIdResponse(throttle_time_ms=0, error_code=CLUSTER_AUTHORIZATION_FAILED,
                                              producer_id=-1, producer_epoch=-1)
            # always a new producer id, epoch 0, also for one naming its id and epoch (KIP-360): Kafka bumps
            # epochs for transactional ids only
            return InitProducerIdResponse(throttle_time_ms=0, error_code=0, producer_id=self._producer_ids.next_id(),
                                          producer_epoch=0)
        if not self._txn_allowed(ctx, request.transactional_id):
            return InitProducerIdResponse(throttle_time_ms=0, error_code=TXN_AUTHORIZATION_FAILED, producer_id=-1,
                                          producer_epoch=-1)
        result = await self._transactions.init_producer_id(
            request.transactional_id, request.transaction_timeout_ms, expected_id, expected_epoch)
        return InitProducerIdResponse(throttle_time_ms=0, error_code=_fenced_as(result.error, version, 4),
                                      producer_id=result.producer_id, producer_epoch=result.producer_epoch)

    # --- AddPartitionsToTxn / AddOffsetsToTxn -----------------------------------------------------

    def _add_partitions_denied(self, ctx, transactional_id: str, partitions) -> dict | None:
        """Kafka's checks: WRITE on the transactional id (every partition answers
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then WRITE on each topic (those TOPIC_AUTHORIZATION_FAILED, the
        others OPERATION_NOT_ATTEMPTED).  Internal topics are never a client's to write in a transaction:
        TOPIC_AUTHORIZATION_FAILED for anyone, as Kafka."""
        if not self._txn_allowed(ctx, transactional_id):
            return dict.fromkeys(partitions, TXN_AUTHORIZATION_FAILED)
        denied = {t for t, _ in partitions
                  if t in (OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC)
                  or not self._access.allowed(ctx, access.WRITE, access.TOPIC, t)}
        if denied:
            return {(t, p): TOPIC_AUTHORIZATION_FAILED if t in denied else OPERATION_NOT_ATTEMPTED
                    for t, p in partitions}
        return None

    async def add_partitions_to_txn(self, ctx, request):
        AddPartitionsToTxnResponse = messages.AddPartitionsToTxnResponse
        TopicResult = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
        TxnResult = AddPartitionsToTxnResponse.AddPartitionsToTxnResult
        version = ctx.version
        if version <= 3:
            partitions = [(t.name, p) for t in request.v3_and_below_topics for p in t.partitions]
            results = self._add_partitions_denied(ctx, request.v3_and_below_transactional_id, partitions)
            if results is None:
                results = await self._transactions.add_partitions(
                    request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
                    request.v3_and_below_producer_epoch, partitions)
            return AddPartitionsToTxnResponse(
                throttle_time_ms=0, results_by_topic_v3_and_below=_topic_results(TopicResult, results, version))
        answers = []
        # v4 is the broker-to-broker form: with an authorizer it needs CLUSTER_ACTION, as in Kafka
        if self._access.enabled and not self._access.cluster_action(ctx):
            return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=CLUSTER_AUTHORIZATION_FAILED,
                                              results_by_transaction=[])
        for txn in request.transactions:
            partitions = [(t.name, p) for t in txn.topics for p in t.partitions]
            results = await self._transactions.add_partitions(
                txn.transactional_id, txn.producer_id, txn.producer_epoch, partitions, verify_only=txn.verify_only)
            answers.append(TxnResult(transactional_id=txn.transactional_id,
                                     topic_results=_topic_results(TxnResult.AddPartitionsToTxnTopicResult, results,
                                                                  version)))
        return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=0, results_by_transaction=answers)

    async def add_offsets_to_txn(self, ctx, request):
        AddOffsetsToTxnResponse = messages.AddOffsetsToTxnResponse
        if not self._txn_allowed(ctx, request.transactional_id):
            return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=TXN_AUTHORIZATION_FAILED)
        if not self._access.allowed(ctx, access.READ, access.GROUP, request.group_id):
            return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=GROUP_AUTHORIZATION_FAILED)
        self._groups.ensure_topic()
        error = await self._transactions.add_offsets(
            request.transactional_id, request.producer_id, request.producer_epoch, request.group_id,
            self._groups.partition_of(request.group_id))
        return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=_fenced_as(error, ctx.version, 2))

    # --- EndTxn -----------------------------------------------------------------------------------

    async def end_txn(self, ctx, request):
        EndTxnResponse = messages.EndTxnResponse
        if not self._txn_allowed(ctx, request.transactional_id):
            return EndTxnResponse(throttle_time_ms=0, error_code=TXN_AUTHORIZATION_FAILED)
        error = await self._transactions.end_transaction(
            request.transactional_id, request.producer_id, request.producer_epoch, request.committed)
        return EndTxnResponse(throttle_time_ms=0, error_code=_fenced_as(error, ctx.version, 2))

    # --- TxnOffsetCommit --------------------------------------------------------------------------

    async def txn_offset_commit(self, ctx, request):
        TxnOffsetCommitResponse = messages.TxnOffsetCommitResponse
        CommitTopic = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
        CommitPartition = CommitTopic.TxnOffsetCommitResponsePartition
        version = ctx.version
        commits = [(topic.name, p.partition_index, CommittedOffset(
                       offset=p.committed_offset, leader_epoch=p.committed_leader_epoch if version >= 2 else -1,
                       metadata=p.committed_metadata or ""))
                   for topic in request.topics for p in topic.partitions]
        denied_error = None
        if not self._txn_allowed(ctx, request.transactional_id):
            denied_error = TXN_AUTHORIZATION_FAILED
        elif not self._access.allowed(ctx, access.READ, access.GROUP, request.group_id):
            denied_error = GROUP_AUTHORIZATION_FAILED
        denied_topics = {t.name for t in request.topics if not self._access.allowed(ctx, access.READ, access.TOPIC,
                                                                                    t.name)}
        error = 0
        if denied_error is None:
            self._groups.ensure_topic()
            error = self._transactions.verify_partition(request.transactional_id, request.producer_id,
                                                        request.producer_epoch, OFFSETS_TOPIC,
                                                        self._groups.partition_of(request.group_id))
        if denied_error is not None:
            results = {(t, p): denied_error for t, p, _ in commits}
        elif denied_topics:
            results = {(t, p): TOPIC_AUTHORIZATION_FAILED if t in denied_topics else OPERATION_NOT_ATTEMPTED
                       for t, p, _ in commits}
        elif error:
            results = {(t, p): error for t, p, _ in commits}
        else:
            results = await self._groups.commit_txn_offsets(
                request.group_id, request.producer_id, request.producer_epoch,
                request.member_id if version >= 3 else "", request.group_instance_id if version >= 3 else None,
                request.generation_id if version >= 3 else -1, commits)
        topics = [CommitTopic(name=topic.name, partitions=[
                      CommitPartition(partition_index=p.partition_index,
                                      # no TxnOffsetCommit version knows PRODUCER_FENCED
                                      error_code=_fenced_as(results[(topic.name, p.partition_index)], 0, 1))
                      for p in topic.partitions])
                  for topic in request.topics]
        return TxnOffsetCommitResponse(throttle_time_ms=0, topics=topics)

    # --- WriteTxnMarkers --------------------------------------------------------------------------

    async def write_txn_markers(self, ctx, request):
        WriteTxnMarkersResponse = messages.WriteTxnMarkersResponse
        MarkerResult = WriteTxnMarkersResponse.WritableTxnMarkerResult
        MarkerTopic = MarkerResult.WritableTxnMarkerTopicResult
        MarkerPartition = MarkerTopic.WritableTxnMarkerPartitionResult
        answers = []
        for marker in request.markers:
            partitions = [(t.name, p) for t in marker.topics for p in t.partition_indexes]
            if not self._access.allowed_cluster(ctx, access.CLUSTER_ACTION):
                # a broker-to-broker API: with an authorizer, only a principal allowed CLUSTER_ACTION (without one,
                # Kafka takes markers from any client, as kafka-transactions abort sends them)
                results = dict.fromkeys(partitions, CLUSTER_AUTHORIZATION_FAILED)
            elif self._write_markers_replicated is not None:  # a cluster: answered once the ISR has the markers
                results = await self._write_markers_replicated(
                    marker.producer_id, marker.producer_epoch, marker.coordinator_epoch, marker.transaction_result,
                    partitions)
            else:
                results = self._write_markers(marker.producer_id, marker.producer_epoch, marker.coordinator_epoch,
                                              marker.transaction_result, partitions)
            answers.append(MarkerResult(producer_id=marker.producer_id, topics=[
                MarkerTopic(name=t.name, partitions=[MarkerPartition(partition_index=p, error_code=results[(t.name, p)])
                                                     for p in t.partition_indexes])
                for t in marker.topics]))
        return WriteTxnMarkersResponse(markers=answers)

    # --- admin ------------------------------------------------------------------------------------

    async def list_transactions(self, ctx, request):
        ListTransactionsResponse = messages.ListTransactionsResponse
        version = ctx.version
        states = [parse_state(name) for name in request.state_filters or []]
        unknown = [name for name, state in zip(request.state_filters or [], states) if state is None]
        error, listed = self._transactions.list_transactions(
            [s for s in states if s is not None], request.producer_id_filters or [],
            request.duration_filter if version >= 1 else -1,
            request.transactional_id_pattern if version >= 2 else None)
        if states and all(state is None for state in states):
            listed = []  # only unknown states asked for: nothing matches
        listed = [entry for entry in listed if self._access.allowed(ctx, access.DESCRIBE, access.TXN, entry[0])]
        return ListTransactionsResponse(
            throttle_time_ms=0, error_code=error, unknown_state_filters=unknown,
            transaction_states=[ListTransactionsResponse.TransactionState(transactional_id=txn_id, producer_id=pid,
                                                                          transaction_state=state)
                                for txn_id, pid, state in listed])

    async def describe_transactions(self, ctx, request):
        DescribeTransactionsResponse = messages.DescribeTransactionsResponse
        Described = DescribeTransactionsResponse.TransactionState
        described = []
        for txn_id in request.transactional_ids:
            if self._access.allowed(ctx, access.DESCRIBE, access.TXN, txn_id):
                d = self._transactions.describe(txn_id)
            else:
                d = TxnDescription(txn_id, TXN_AUTHORIZATION_FAILED)
            topics: dict[str, list[int]] = {}
            for topic, index in d.partitions:  # topics the caller may not DESCRIBE are left out, as Kafka
                if self._access.allowed(ctx, access.DESCRIBE, access.TOPIC, topic):
                    topics.setdefault(topic, []).append(index)
            described.append(Described(
                error_code=d.error, transactional_id=txn_id, transaction_state=d.state,
                transaction_timeout_ms=d.timeout_ms, transaction_start_time_ms=d.start_ms, producer_id=d.producer_id,
                producer_epoch=d.producer_epoch,
                topics=[Described.TopicData(topic=t, partitions=ps) for t, ps in topics.items()]))
        return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=described)

    # --- DescribeProducers (KIP-664) --------------------------------------------------------------

    async def _producer_states(self, name: str, index: int, known: dict, slices: Slices) -> tuple[int, list]:
        """(error code, ProducerState list) of one partition of a topic that exists; ``known`` keeps each
        distinct partition's answer for the request (one naming a partition 100,000 times builds its list
        once), and building a long list gives the loop a turn at each of the request's ``slices``."""
        key = (name, index)
        found = known.get(key)
        if found is not None:
            return found
        info = self._metadata.topics.get(name)
        if info is None or not 0 <= index < info.partitions:
            found = (UNKNOWN_TOPIC_OR_PARTITION, [])  # Kafka's metadata cache has no such partition
        else:
            try:
                partition = self._replicas.get(name, index)
            except Errors.UnknownTopicOrPartitionError:
                found = (NOT_LEADER_OR_FOLLOWER, [])  # the partition exists, no replica of it is here
            except Errors.KafkaError as exc:  # offline (KAFKA_STORAGE_ERROR); in a cluster no replica here
                found = (exc.errno, [])
            else:
                found = (0, await _listed_producers(partition.producers.producers, slices))
        known[key] = found
        return found

    async def describe_producers(self, ctx, request):
        """Each requested partition's active producers: id, epoch, last sequence (-1 without batches), last
        timestamp, the coordinator epoch of its last marker (-1 before any) and the first offset of its open
        transaction (-1 when none is open), in Kafka's order; the refusals are in the module docstring.  Work
        is per named partition and per producer listed, given to the loop in slices; an answer of
        ``OFFLOAD_PARTITIONS`` or more entries is encoded beside the loop."""
        DescribeProducersResponse = messages.DescribeProducersResponse
        TopicResponse = DescribeProducersResponse.TopicResponse
        PartitionResponse = TopicResponse.PartitionResponse
        allowed, slices = self._access.topic_check(ctx, access.READ), Slices()
        known: dict = {}
        topics, entries = [], 0
        for topic in request.topics:
            name = topic.name
            message = topic_name_problem(name)
            if message is not None:
                refusal = (INVALID_TOPIC, message)
            elif not allowed(name):
                refusal = (TOPIC_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED_MESSAGE)
            elif name not in self._metadata.topics:
                refusal = (UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_MESSAGE)
            else:
                refusal = None
            partitions = []
            for index in topic.partition_indexes:
                if refusal is not None:
                    partitions.append(PartitionResponse(partition_index=index, error_code=refusal[0],
                                                        error_message=refusal[1], active_producers=[]))
                else:
                    error, states = await self._producer_states(name, index, known, slices)
                    partitions.append(PartitionResponse(partition_index=index, error_code=error,
                                                        error_message=None, active_producers=states))
                    entries += len(states)
                if slices.due():
                    await asyncio.sleep(0)
            entries += len(partitions) + 1
            topics.append(TopicResponse(name=name, partitions=partitions))
            if slices.due():
                await asyncio.sleep(0)
        response = DescribeProducersResponse(throttle_time_ms=0, topics=topics)
        if entries < OFFLOAD_PARTITIONS:
            return response
        # kafka-python's encoder, pure Python, beside the loop (as Fetch's large answers); a request naming one
        # partition many times costs an entry per producer each time, as in Kafka's answer
        response.API_VERSION = ctx.version
        response.with_header(correlation_id=ctx.correlation_id)
        return [bytes(await codec_thread.run(partial(response.encode, header=True, framed=True)))]


async def _listed_producers(producers, slices: Slices) -> list:
    """DescribeProducers' ProducerState of each of a partition's producers (``ProducerStateManager.producers``),
    in Kafka's order (``kafka_listing_order``): Kafka's ``UnifiedLog.activeProducers``."""
    ProducerState = messages.DescribeProducersResponse.TopicResponse.PartitionResponse.ProducerState
    listed = []
    for producer_id in kafka_listing_order(producers):
        entry = producers.get(producer_id)
        if entry is None:  # expired while the request gave the loop a turn
            continue
        txn_start = entry.current_txn_first_offset
        listed.append(ProducerState(
            producer_id=producer_id, producer_epoch=entry.epoch, last_sequence=entry.last_seq,
            last_timestamp=entry.last_timestamp, coordinator_epoch=entry.coordinator_epoch,
            current_txn_start_offset=-1 if txn_start is None else txn_start))
        if slices.due():
            await asyncio.sleep(0)
    return listed
