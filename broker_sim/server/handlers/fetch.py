"""Fetch: long-poll reads served from segment files, zero copy where the connection allows.

Kafka's rules kept here: the response holds at most ``max_bytes`` overall
— never more than the broker's ``fetch.max.bytes``, whatever the client asks —
and ``partition_max_bytes`` per partition, except that the first partition
with data returns at least one whole batch so a consumer always progresses
(KIP-74); a partition named twice in one request is answered once, at its
first position with its last fetch parameters (Kafka collects the request
into a LinkedHashMap keyed by partition); the broker answers once
``min_bytes`` are available or ``max_wait_ms`` has passed, waiting on appends rather than polling; consumers
see only offsets below the high watermark; under read_committed only offsets
below the last stable offset, with the list of aborted transactions
(producer id, first offset) overlapping the returned range, which the client
uses to drop aborted records.  Every answer carries the real last stable offset.

Replication: only a partition's leader answers Fetch (NOT_LEADER_OR_FOLLOWER
otherwise).  A fetch with ``replica_id`` >= 0 comes from a follower.  With an
authorizer, one from a connection that is not another broker's
(``ctx.inter_broker``) and lacks ClusterAction is answered as Kafka does: every
partition TOPIC_AUTHORIZATION_FAILED, nothing read, no follower state touched.
Without an authorizer Kafka allows it, so it is a follower fetch, and a
``replica_id`` that is not a follower of the partition gets NOT_LEADER_OR_FOLLOWER.  A
follower's fetch reads up to the log end offset (not the high watermark), and its fetch offset is
the follower's log end offset, reported to the partition
(``update_follower_fetch``), which may move the high watermark and the ISR.
Long polls wake on appends and on high watermark moves, so a consumer waiting
at the high watermark answers as soon as followers commit new records; a
follower's long poll is answered as soon as the high watermark moved past the
one it was last sent, so followers know it promptly.

Follower fetching (KIP-392): a consumer's Fetch v11+ may be served by any
replica, a follower reading up to its own high watermark (older versions:
the leader only).  The leader may answer a consumer that names its rack
(``rack_id``) with ``preferred_read_replica`` and no records, at once
(``ReplicaManager.preferred_read_replica``, with ``replica.selector.class``).

Cost: the handler's per-partition loops (collecting the request, reading, answering) give the event loop a turn at
each of the request's ``Slices``, and an answer naming ``OFFLOAD_PARTITIONS`` or more is encoded on the codec
thread (``server/request_slicing.py``): a fetch naming 150,000 partitions does not hold other clients.

Fetch sessions (KIP-227, v7+): ``server/fetch_sessions.py`` decides what a request's session id and epoch
mean; an incremental fetch reads every partition of its session (the request names only what changed) and
its answer names only the partitions with something to say.  READ is checked before anything is kept, and a
new session is made after the read, only when every partition exists and may be read (see fetch_sessions.py).
A session error (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH) is the answer's top-level error code,
with no partitions.

A partition answered to a client with an error carries no offsets (high watermark, last stable offset and log
start offset -1), as Kafka's ``ReplicaManager`` reports a failed read.  Another broker's follower fetch keeps
them: a follower behind the log start offset restarts there from OFFSET_OUT_OF_RANGE's answer
(``replication/fetcher.py``), where Kafka's follower asks ListOffsets.  Aborted transactions are null, except for
the errors Kafka's ``KafkaApis`` decides before reading (UNKNOWN_TOPIC_OR_PARTITION, TOPIC_AUTHORIZATION_FAILED):
those partitions are built from the schema's defaults, an empty list.
"""
from __future__ import annotations

import asyncio
import os
import uuid
from functools import partial
from typing import Callable

import kafka.errors as Errors

from broker_sim.protocol.apis import messages
from broker_sim.protocol.splice import new_placeholder, splice
from broker_sim.security.quotas import FETCH as CONSUMER_BYTE_RATE
from broker_sim.security.quotas import QuotaManager
from broker_sim.server.fetch_sessions import FINAL_EPOCH, INITIAL_EPOCH, MAX_SESSION_PARTITIONS, FetchSessionCache
from broker_sim.server.fetch_sessions import next_epoch
from broker_sim.server.handlers.access import READ, Access
from broker_sim.errors import error_of
from broker_sim.server.network import SENDFILE_MIN_BYTES
from broker_sim.server.request_slicing import OFFLOAD_PARTITIONS, Slices, codec_thread

READ_COMMITTED = 1
UNKNOWN_TOPIC_OR_PARTITION = Errors.UnknownTopicOrPartitionError.errno
UNKNOWN_TOPIC_ID = Errors.UnknownTopicIdError.errno
# KIP-951: the errors a v16+ answer tells the current leader with
LEADER_MOVED = frozenset({Errors.NotLeaderForPartitionError.errno, Errors.FencedLeaderEpochError.errno})
ZERO_UUID = uuid.UUID(int=0)
# errors KafkaApis answers before the read (FetchResponse.partitionResponse): aborted transactions [], not null
ANSWERED_BEFORE_READ = frozenset((Errors.UnknownTopicOrPartitionError.errno, Errors.TopicAuthorizationFailedError.errno,
                                  Errors.UnknownTopicIdError.errno))


class _Read:
    __slots__ = ("index", "error", "message", "partition", "regions", "size", "diverging", "aborted", "preferred")

    def __init__(self, index, error=0, message=None, partition=None, regions=(), size=0, diverging=None,
                 aborted=(), preferred=-1):
        self.index, self.error, self.message, self.partition = index, error, message, partition
        self.regions, self.size, self.diverging, self.aborted = regions, size, diverging, aborted
        self.preferred = preferred


async def fetch_data(request, slices: Slices, name_of: Callable[[object], str] | None = None
                     ) -> list[tuple[str, list]]:
    """The request's partitions as Kafka's ``FetchRequest.fetchData`` sees them: one entry per
    (topic, partition) at its first position with its last data, runs of one topic grouped.  From v13 topics
    come by id: ``name_of(topic id)`` is the topic's name, or an ``UnknownTopicId`` for an id no topic has."""
    entries: dict[tuple[str, int], object] = {}
    for topic in request.topics:
        name = topic.topic if name_of is None else name_of(topic.topic_id)
        for data in topic.partitions:
            entries[(name, data.partition)] = data  # dict keeps the first insertion's position
            if slices.due():
                await asyncio.sleep(0)
    return await _grouped(entries, slices)


class UnknownTopicId(str):
    """A v13+ fetch's topic id that names no topic: answered UNKNOWN_TOPIC_ID under that id, never read (the
    string is no legal topic name, so no partition is found by it)."""

    def __new__(cls, topic_id):
        made = super().__new__(cls, f"\0unknown topic id {topic_id}")
        made.topic_id = topic_id
        return made


async def _grouped(entries: dict, slices: Slices) -> list[tuple[str, list]]:
    """(topic, [partition data]) runs of ``entries`` ((topic, partition) -> data), in their order."""
    grouped: list[tuple[str, list]] = []
    for (name, _), data in entries.items():
        if grouped and grouped[-1][0] == name:
            grouped[-1][1].append(data)
        else:
            grouped.append((name, [data]))
        if slices.due():
            await asyncio.sleep(0)
    return grouped


def _not_kept(topics, denied) -> bool:
    """A session keeps only partitions that exist and the client may read: an answer naming an unknown
    partition (UNKNOWN_TOPIC_OR_PARTITION) or refused READ gets no session (see the module docstring)."""
    return bool(denied) or any(read.error in (UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID)
                               for _, reads in topics for read in reads)


async def _refused(partitions_by_topic, slices: Slices,
                   reason="a follower fetch (replica_id >= 0) needs ClusterAction: brokers only",
                   error: int = Errors.TopicAuthorizationFailedError.errno):
    refused = []
    for name, partitions in partitions_by_topic:
        reads = []
        for data in partitions:
            reads.append(_Read(data.partition, error, reason))
            if slices.due():
                await asyncio.sleep(0)
        refused.append((name, reads))
    return refused


def _has_error(topics) -> bool:
    """Answer now: an error, or a consumer sent to its preferred read replica."""
    return any(read.error or read.preferred >= 0 for _, reads in topics for read in reads)


def _follower_behind(topics, replica_id: int) -> bool:
    return any(read.partition is not None and read.partition.follower_needs_high_watermark(replica_id)
               for _, reads in topics for read in reads)


class FetchApis:
    def __init__(self, access: Access, replicas, config, *, now_ms: Callable[[], int], quotas: QuotaManager | None,
                 stop_future: Callable[[], asyncio.Future], metadata=None,
                 endpoint_on: Callable[[int, str | None], object] | None = None, broker_id: int = -1) -> None:
        self._access = access
        self._replicas = replicas
        self._config = config
        self._now_ms = now_ms
        self._quotas = quotas
        self._stop_future = stop_future  # done once the broker stops: a long poll ends then
        self.sessions = FetchSessionCache(config.get("max.incremental.fetch.session.cache.slots"), now_ms=now_ms)
        self._metadata = metadata   # topics by id (v13+, KIP-516) and partition leaders (v16+, KIP-951)
        self._endpoint_on = endpoint_on   # (broker id, listener) -> its address on that listener, or None
        self._broker_id = broker_id

    def _name_of(self, topic_id) -> str:
        info = self._metadata.topics_by_id.get(topic_id) if self._metadata is not None else None
        return info.name if info is not None else UnknownTopicId(topic_id)

    def _id_of(self, name: str):
        if isinstance(name, UnknownTopicId):
            return name.topic_id
        info = self._metadata.topics.get(name) if self._metadata is not None else None
        return info.topic_id if info is not None else ZERO_UUID

    async def fetch(self, ctx, request):
        access = self._access
        slices = Slices()
        if ctx.version >= 15:   # KIP-903: the replica id moved into ReplicaState
            request.replica_id = request.replica_state.replica_id if request.replica_state is not None else -1
        by_id = ctx.version >= 13   # KIP-516: topics by id, answered by id
        partitions_by_topic = await fetch_data(request, slices, self._name_of if by_id else None)
        from_follower = request.replica_id is not None and request.replica_id >= 0
        if from_follower and access.enabled and not access.cluster_action(ctx):
            return await _encode(ctx, request, await _refused(partitions_by_topic, slices), slices=slices)
        session, incremental, new_session = None, False, False
        if ctx.version >= 7:
            try:
                session, new_session, partitions_by_topic = await self._session_for(
                    ctx, request, partitions_by_topic, slices)
            except (Errors.FetchSessionIdNotFoundError, Errors.InvalidFetchSessionEpochError) as exc:
                return await _encode(ctx, request, [], error_code=exc.errno)
            incremental = session is not None
        denied = []
        unknown_ids = [entry for entry in partitions_by_topic if isinstance(entry[0], UnknownTopicId)]
        if unknown_ids:   # Kafka answers an id no topic has UNKNOWN_TOPIC_ID, whatever the principal may read
            partitions_by_topic = [entry for entry in partitions_by_topic if not isinstance(entry[0], UnknownTopicId)]
            denied = await _refused(unknown_ids, slices, "no topic has this id", Errors.UnknownTopicIdError.errno)
        if not from_follower and access.enabled:  # a consumer needs READ on each topic, decided once per name
            allowed = access.topic_check(ctx, READ)
            permitted = []
            for entry in partitions_by_topic:
                (permitted if allowed(entry[0]) else denied).append(entry)
            refused = [entry for entry in denied if not isinstance(entry[0], UnknownTopicId)]
            if refused:
                partitions_by_topic = permitted
                denied = [entry for entry in denied if isinstance(entry[0], UnknownTopicId)] + await _refused(
                    refused, slices, "READ on the topic is not allowed")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(request.max_wait_ms, 0) / 1000.0
        while True:
            topics, total = await self._read_all(request, ctx.version, partitions_by_topic, from_follower, slices)
            remaining = deadline - loop.time()
            if total >= request.min_bytes or remaining <= 0 or _has_error(topics) or denied:
                break
            if from_follower and _follower_behind(topics, request.replica_id):
                break
            stopped = self._stop_future()
            if stopped.done():
                break
            waiters = [read.partition.wait_for_append() for _, reads in topics for read in reads if read.partition]
            waiters.append(stopped)
            _, pending = await asyncio.wait(waiters, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            for future in pending:
                future.cancel()
        throttles = getattr(self._replicas, "throttles", None)
        if from_follower and throttles is not None:  # leader.replication.throttled.rate counts what it sends
            sent = sum(read.size for name, reads in topics for read in reads
                       if read.size and throttles.leader_throttled(name, read.index))
            if sent:
                throttles.leader.record(sent)
        throttle = 0
        if not from_follower and self._quotas is not None and not ctx.connection.inter_broker:
            # consumer_byte_rate: the bytes this response carries (followers are not throttled)
            throttle = self._quotas.record(CONSUMER_BYTE_RATE, ctx.connection.principal, ctx.client_id, total)
            ctx.connection.throttle(throttle)
        if from_follower:
            for _, reads in topics:
                for read in reads:
                    if read.partition is not None:
                        read.partition.high_watermark_sent(request.replica_id)
        if session is not None and _not_kept(topics, denied):  # closed: the client goes on with full fetches
            self.sessions.remove(session.id)
            session = None
        elif new_session and not _not_kept(topics, denied):
            session = self.sessions.create(_owner(ctx, request), privileged=from_follower)
            if session is not None:
                session.partitions = {(name, data.partition): data for name, partitions in partitions_by_topic
                                      for data in partitions}
        topics = topics + denied
        if session is not None:
            topics = await _session_answer(session, topics, incremental, slices)
        return await _encode(ctx, request, topics, throttle, session_id=session.id if session is not None else 0,
                             slices=slices, id_of=self._id_of if by_id else None,
                             leaders=self._leaders if ctx.version >= 16 else None)

    async def _session_for(self, ctx, request, partitions_by_topic, slices: Slices):
        """(the session an incremental request continues or None, whether a full request asks for a new
        session, the partitions to read) for a v7+ request (see fetch_sessions.py).  A new session is made
        after the read (``fetch``), holding only partitions that exist and the client may read."""
        session_id, epoch = request.session_id, request.session_epoch
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):  # a full fetch: closes the session it names
            if session_id:
                self.sessions.remove(session_id)
            count = sum(len(partitions) for _, partitions in partitions_by_topic)
            return None, epoch == INITIAL_EPOCH and count <= MAX_SESSION_PARTITIONS, partitions_by_topic
        session = self.sessions.get(session_id, epoch, _owner(ctx, request))
        for name, partitions in partitions_by_topic:
            for data in partitions:
                session.partitions[(name, data.partition)] = data
        for forgotten in request.forgotten_topics_data or ():
            name = forgotten.topic if ctx.version < 13 else self._name_of(forgotten.topic_id)
            for index in forgotten.partitions:
                session.partitions.pop((name, index), None)
                session.told.pop((name, index), None)
        if len(session.partitions) > MAX_SESSION_PARTITIONS:
            self.sessions.remove(session_id)
            raise Errors.FetchSessionIdNotFoundError(
                f"fetch session {session_id} closed: over {MAX_SESSION_PARTITIONS} partitions")
        session.epoch = next_epoch(session.epoch)
        return session, False, await _grouped(session.partitions, slices)

    async def _read_all(self, request, version, partitions_by_topic, from_follower, slices: Slices):
        budget = min(max(request.max_bytes, 0), self._config.get("fetch.max.bytes"))  # 0: the first batch only
        committed = request.isolation_level == READ_COMMITTED
        replica_id = request.replica_id
        now_ms = self._now_ms() if from_follower else 0
        throttles = getattr(self._replicas, "throttles", None) if from_follower else None
        held_back = throttles is not None and throttles.leader.exceeded()  # KIP-73, replication/throttle.py
        # Fetch v11+ carries the consumer's rack: it may read from a follower (KIP-392)
        any_replica = not from_follower and version >= 11
        client_rack = (request.rack_id or "") if any_replica else ""
        min_one = True
        topics, total = [], 0
        for name, partitions in partitions_by_topic:
            reads = []
            for data in partitions:
                try:
                    if any_replica:
                        partition = self._replicas.get(name, data.partition)
                    else:
                        partition = self._replicas.get_leader(name, data.partition)
                    partition.check_leader_epoch(data.current_leader_epoch)
                    preferred = self._replicas.preferred_read_replica(partition, client_rack, data.fetch_offset)
                    if preferred >= 0:
                        reads.append(_Read(data.partition, partition=partition, preferred=preferred))
                        continue
                    if version >= 12 and data.last_fetched_epoch >= 0:
                        epoch, end = partition.end_offset_for_epoch(data.last_fetched_epoch)
                        _check_epoch_end(partition, data, epoch, end)
                        if epoch < data.last_fetched_epoch or end < data.fetch_offset:
                            reads.append(_Read(data.partition, partition=partition, diverging=(epoch, end)))
                            continue
                    limit = min(data.partition_max_bytes, budget)
                    if from_follower:
                        if (held_back and replica_id not in partition.isr
                                and throttles.leader_throttled(name, data.partition)):
                            limit, regions = 0, []  # an out-of-sync throttled follower gets nothing this time
                        else:
                            regions = (partition.read_for_replica(data.fetch_offset, limit, min_one_batch=min_one)
                                       if limit > 0 or min_one else [])
                        partition.update_follower_fetch(replica_id, data.fetch_offset, now_ms)
                    else:
                        first_read = min_one
                        regions = (partition.read(data.fetch_offset, limit, min_one_batch=min_one,
                                                  read_committed=committed)
                                   if limit > 0 or min_one else [])
                except Exception as exc:  # per-partition error code
                    code, message = error_of(exc)
                    reads.append(_Read(data.partition, code, message,
                                       partition=self._replicas.partitions.get((name, data.partition))))
                    if slices.due():
                        await asyncio.sleep(0)
                    continue
                size = sum(r.size for r in regions)
                if size:
                    min_one = False
                budget -= size
                total += size
                aborted = (partition.aborted_transactions_of_read(data.fetch_offset, regions, limit,
                                                                  min_one_batch=first_read)
                           if committed and size else ())
                reads.append(_Read(data.partition, partition=partition, regions=regions, size=size, aborted=aborted))
                if slices.due():
                    await asyncio.sleep(0)
            topics.append((name, reads))
        return topics, total


    def _leaders(self, listener: str | None, topics) -> tuple[dict, list]:
        """KIP-951 (v16+): for each partition answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH, its current
        leader and epoch; and those leaders' addresses on the client's listener (``NodeEndpoints``)."""
        states = getattr(self._metadata, "partition_states", None)   # a cluster's; a single node leads everything
        current, nodes = {}, {}
        for name, reads in topics:
            for read in reads:
                if read.error not in LEADER_MOVED:
                    continue
                state = states.get((name, read.index)) if states else None
                if state is not None and state.has_leader:
                    current[(name, read.index)] = (state.leader, state.leader_epoch)
                    if state.leader not in nodes and state.leader != self._broker_id and self._endpoint_on:
                        nodes[state.leader] = self._endpoint_on(state.leader, listener)
                elif not states and read.partition is not None:
                    current[(name, read.index)] = (self._broker_id, read.partition.leader_epoch)
        return current, [node for node in nodes.values() if node is not None]


def _owner(ctx, request) -> tuple:
    """Who may continue a session: the replica id and principal that made it (another's id is not found)."""
    return request.replica_id, str(getattr(ctx.connection, "principal", ""))


def _check_epoch_end(partition, data, epoch: int, end: int) -> None:
    """Kafka's Partition.readRecords before it compares epochs: OFFSET_OUT_OF_RANGE when the end of the
    last fetched epoch is unknown (an epoch above the leader's latest) or the fetch offset is below the log
    start offset, diverging or not."""
    if epoch < 0 or end < 0:
        raise Errors.OffsetOutOfRangeError(f"{partition}: could not determine the end offset of the last fetched "
                                           f"epoch {data.last_fetched_epoch}")
    if data.fetch_offset < partition.log_start_offset:
        raise Errors.OffsetOutOfRangeError(f"{partition}: fetch offset {data.fetch_offset} is below the log start "
                                           f"offset {partition.log_start_offset}")


def _offsets(partition) -> tuple[int, int, int]:
    """(high watermark, last stable offset, log start offset) as an answer reports them."""
    if partition is None:
        return -1, -1, -1
    return partition.high_watermark, partition.last_stable_offset, partition.log_start_offset


async def _session_answer(session, topics, incremental: bool, slices: Slices):
    """A session's answer: every partition of a full fetch, only those with news in an incremental one."""
    answered = []
    for name, reads in topics:
        kept = []
        for read in reads:
            if session.must_answer((name, read.index), read.error, read.size, read.diverging,
                                   *_offsets(read.partition)) or not incremental:
                kept.append(read)
            if slices.due():
                await asyncio.sleep(0)
        if kept:
            answered.append((name, kept))
    return answered


async def _encode(ctx, request, topics, throttle_ms: int = 0, *, error_code: int = 0, session_id: int = 0,
                  slices: Slices | None = None, id_of: Callable[[str], object] | None = None, leaders=None) -> list:
    FetchResponse = messages.FetchResponse
    TopicResponse = FetchResponse.FetchableTopicResponse
    PartitionData = TopicResponse.PartitionData
    committed = request.isolation_level == READ_COMMITTED
    offsets_on_error = ctx.inter_broker  # see the module docstring: only our own followers read them
    zero_copy = ctx.connection.sendfile_ok
    spliced = []
    responses = []
    count = 0
    current, nodes = leaders(getattr(ctx.connection, "listener", None), topics) if leaders is not None else ({}, [])
    for name, reads in topics:
        partitions = []
        for read in reads:
            partition = read.partition if not read.error or offsets_on_error else None
            records = b""
            if read.size >= SENDFILE_MIN_BYTES and zero_copy:
                records = new_placeholder()
                spliced.append((records, read.regions, read.size))
            elif read.size:
                records = b"".join(_pread(region) for region in read.regions)
            hw = partition.high_watermark if partition is not None else -1
            aborted = None
            if read.error in ANSWERED_BEFORE_READ:
                aborted = []
            elif committed and not read.error:
                aborted = [PartitionData.AbortedTransaction(producer_id=pid, first_offset=first)
                           for pid, first in read.aborted]
            fields = dict(
                partition_index=read.index, error_code=read.error, high_watermark=hw,
                last_stable_offset=partition.last_stable_offset if partition is not None else -1,
                log_start_offset=partition.log_start_offset if partition else -1,
                aborted_transactions=aborted, preferred_read_replica=read.preferred, records=records)
            if read.diverging is not None:
                fields["diverging_epoch"] = PartitionData.EpochEndOffset(epoch=read.diverging[0],
                                                                         end_offset=read.diverging[1])
            if (name, read.index) in current:
                leader_id, leader_epoch = current[(name, read.index)]
                fields["current_leader"] = PartitionData.LeaderIdAndEpoch(leader_id=leader_id,
                                                                          leader_epoch=leader_epoch)
            partitions.append(PartitionData(**fields))
            count += 1
            if slices is not None and slices.due():
                await asyncio.sleep(0)
        if id_of is None:
            responses.append(TopicResponse(topic=name, partitions=partitions))
        else:
            responses.append(TopicResponse(topic_id=id_of(name), partitions=partitions))
    extra = {}
    if nodes:
        extra["node_endpoints"] = [FetchResponse.NodeEndpoint(node_id=n.broker_id, host=n.host, port=n.port, rack=n.rack)
                                   for n in nodes]
    response = FetchResponse(version=ctx.version, throttle_time_ms=throttle_ms, error_code=error_code,
                             session_id=session_id, responses=responses, **extra)
    response.with_header(correlation_id=ctx.correlation_id)
    if count >= OFFLOAD_PARTITIONS:  # kafka-python's encoder, pure Python: beside the loop
        encoded = await codec_thread.run(partial(response.encode, header=True, framed=True))
    else:
        encoded = response.encode(header=True, framed=True)
    if not spliced:
        return [bytes(encoded)]
    return splice(encoded, spliced, flexible=FetchResponse.flexible_version_q(ctx.version))


def _pread(region) -> bytes:
    return os.pread(region.file.fileno(), region.size, region.position)
