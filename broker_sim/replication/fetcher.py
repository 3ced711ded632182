"""ReplicaFetcherManager: followers copying their leaders' logs over the Kafka protocol.

Theory of operation (Kafka's ``ReplicaFetcherManager`` / ``ReplicaFetcherThread``):
one asyncio task per source (leader) broker fetches every partition this
broker follows from that leader in one ``FetchRequest`` v12 with
``replica_id`` = our broker id, ``fetch_offset`` = our log end offset,
``current_leader_epoch`` = the epoch we follow, ``last_fetched_epoch`` = the
latest epoch in our log, ``max_wait_ms`` = replica.fetch.wait.max.ms and
``min_bytes`` = replica.fetch.min.bytes.  The leader treats the fetch offset as
our log end offset (that moves its high watermark and ISR), so fetching *is*
acknowledging.

A partition added after a leader change first *truncates* (KIP-101/279):
``OffsetForLeaderEpoch`` (replica_id set) for our latest epoch; the leader
answers where that epoch ends in its log; we truncate to the smaller of that
and our own end of the epoch, and ask again when the leader's answer is for an
older epoch than ours (we had an epoch it never saw).  A fetch answer with a
``diverging_epoch`` truncates the same way.  An OFFSET_OUT_OF_RANGE answer
below the leader's log start restarts our log there.

Errors -- connection refused or broken, NOT_LEADER_OR_FOLLOWER,
FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION -- back
the partition (or, for the connection, the whole source) off for
replica.fetch.backoff.ms and retry; the controller's next decision arrives as
``add_partition`` (new leader or epoch) or ``remove_partitions`` (we lead it
now, or no longer host it).  Each answer is applied only if the partition is
still followed at the same leader epoch (state may change while a fetch is in
flight).  Everything runs on the broker's event loop.

Fetch sessions (KIP-227, Kafka's ``FetchSessionHandler``): each source keeps a ``FollowerSession``.  Its
first fetch is full (every partition, epoch 0: the leader creates a session and answers its id); the next ones
are incremental: only the partitions whose fetch parameters (fetch offset, epochs, log start, max bytes)
changed since the last request, the ones no longer fetched in ``forgotten_topics_data``, and the leader
answers only the partitions with news.  A session error (FETCH_SESSION_ID_NOT_FOUND,
INVALID_FETCH_SESSION_EPOCH, the leader restarted or evicted it), a lost connection or an answer without a
session id starts over with a full fetch, which closes the old session on the leader.  The leader's side is
``server/fetch_sessions.py`` (``max.incremental.fetch.session.cache.slots=0`` there: every fetch is full).
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, Callable, Protocol

import kafka.errors as Errors

from broker_sim.controller.cluster_state import BrokerEndpoint
from broker_sim.replication.client import BrokerClient
from broker_sim.storage.batch import LOG_OVERHEAD, decode_header

log = logging.getLogger(__name__)
MAX_TRUNCATION_ROUNDS = 16
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1
_RETRIABLE = (Errors.NotLeaderForPartitionError.errno, Errors.FencedLeaderEpochError.errno,
              Errors.UnknownLeaderEpochError.errno, Errors.UnknownTopicOrPartitionError.errno,
              Errors.KafkaStorageError.errno, Errors.ReplicaNotAvailableError.errno,
              Errors.NotEnoughReplicasError.errno)
Key = tuple[str, int]


class HostedReplicas(Protocol):
    """What the fetchers need of their owner (the ``ReplicaManager``): the hosted replicas and how to log in."""

    partitions: dict[Key, Any]  # (topic, index) -> Partition
    inter_broker_ssl: Any  # SSLContext or None
    inter_broker_sasl: Any  # SaslLogin or None

    def inter_broker_client_id(self, role: str) -> str: ...


INITIAL_EPOCH = 0
_SESSION_ERRORS = (Errors.FetchSessionIdNotFoundError.errno, Errors.InvalidFetchSessionEpochError.errno)


class FollowerSession:
    """The follower's side of one fetch session with a leader (Kafka's ``FetchSessionHandler``)."""

    def __init__(self) -> None:
        self.id = 0  # 0: none yet (the next fetch is full and asks for one)
        self.epoch = INITIAL_EPOCH
        self.full = True
        self.sent: dict[Key, tuple] = {}  # what the leader's session holds: key -> fetch parameters
        self._pending: dict[Key, tuple] = {}
        self.incremental_fetches = 0

    @staticmethod
    def _params(entry) -> tuple:
        return (entry.fetch_offset, entry.current_leader_epoch, entry.last_fetched_epoch, entry.log_start_offset,
                entry.partition_max_bytes)

    def build(self, entries: dict[Key, Any]) -> tuple[int, int, dict[Key, Any], list[Key]]:
        """(session id, epoch, the entries to send, the keys to forget) for the next fetch of ``entries``."""
        self._pending = {key: self._params(entry) for key, entry in entries.items()}
        if self.full:
            return self.id, INITIAL_EPOCH, entries, []
        to_send = {key: entry for key, entry in entries.items() if self.sent.get(key) != self._pending[key]}
        return self.id, self.epoch, to_send, [key for key in self.sent if key not in entries]

    def handle(self, response) -> bool:
        """Advance on the leader's answer; False when it refused the session (the next fetch is full)."""
        if response.error_code in _SESSION_ERRORS:
            self.reset()
            return False
        if response.session_id == 0:  # none made (no slot), or the leader closed ours
            self.id, self.full, self.sent = 0, True, {}
            return True
        if not self.full:
            self.incremental_fetches += 1
        self.epoch = 1 if self.full or self.epoch >= 2**31 - 1 else self.epoch + 1
        self.id, self.full, self.sent = response.session_id, False, self._pending
        return True

    def reset(self) -> None:
        """Start over with a full fetch; it names the old id, so the leader closes that session."""
        self.full, self.sent = True, {}


@dataclass
class FetchState:
    """One followed partition: the leader epoch we follow it at, whether it must truncate first, backoff."""
    leader_epoch: int
    truncating: bool = True
    delayed_until: float = 0.0


def whole_batches(records) -> bytes:
    """The leading whole batches of a Fetch answer's records (a leader may cut the last one short)."""
    data = bytes(records or b"")
    position = 0
    while len(data) - position >= LOG_OVERHEAD:
        size = int.from_bytes(data[position + 8:position + 12], "big", signed=True) + LOG_OVERHEAD
        if size < LOG_OVERHEAD or position + size > len(data):
            break
        position += size
    return data[:position]


def truncate_for_epoch_end(partition, leader_epoch: int, leader_end: int) -> bool:
    """Truncate a follower for the leader's (epoch, end offset) answer; True when the logs now agree.

    Kafka's rules (``AbstractFetcherThread.getOffsetTruncationState``): no
    answer (end -1) -> truncate to our high watermark; the leader's epoch
    unknown to us -> keep what is below both ends; an epoch we never had (the
    leader answered for an older one) -> cut back to the end of our own older
    epoch and ask again (False); the same epoch -> the smaller end offset.
    """
    leo = partition.log_end_offset
    if leader_end == UNDEFINED_OFFSET:
        partition.truncate_to(min(partition.high_watermark, leo))
        return True
    if leader_epoch == UNDEFINED_EPOCH:
        partition.truncate_to(min(leader_end, leo))
        return True
    our_epoch, our_end = partition.end_offset_for_epoch(leader_epoch)
    if our_epoch == UNDEFINED_EPOCH:
        partition.truncate_to(min(leader_end, leo))
        return True
    if our_epoch != leader_epoch:
        partition.truncate_to(min(our_end, leo))
        return False
    partition.truncate_to(min(leader_end, our_end, leo))
    return True


class SourceFetcher:
    """The fetch loop for every partition followed from one leader broker."""

    def __init__(self, manager: ReplicaFetcherManager, leader_id: int) -> None:
        self.manager = manager
        self.leader_id = leader_id
        self.partitions: dict[Key, FetchState] = {}
        self.client: BrokerClient | None = None
        self._endpoint: BrokerEndpoint | None = None
        self.task: asyncio.Task | None = None
        self._wakeup = asyncio.Event()
        self.fetches = 0
        self.closed = False
        self.session = FollowerSession()

    def __repr__(self) -> str:
        return f"SourceFetcher(broker {self.manager.broker_id} <- broker {self.leader_id})"

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self.run(), name=repr(self))

    def wake(self) -> None:
        self._wakeup.set()

    def close(self) -> None:
        self.closed = True  # the loop also checks it: a cancellation can be lost (Python 3.11's wait_for)
        self._wakeup.set()
        if self.task is not None and not self.task.done():
            self.task.cancel()
        if self.client is not None:
            self.client.close()
            self.client = None

    # -- the loop ----------------------------------------------------------------------

    async def run(self) -> None:
        backoff_s = self.manager.config.get("replica.fetch.backoff.ms") / 1000.0
        while self.partitions and not self.closed:
            try:
                client = self._client()
                if client is None:
                    await self._sleep(backoff_s)
                    continue
                for key, state in list(self.partitions.items()):
                    if state.truncating and self._ready(state):
                        await self._truncate(client, key, state)
                if not await self._fetch_once(client):
                    await self._sleep(self._next_ready_in(backoff_s))
            except asyncio.CancelledError:
                raise
            except (ConnectionError, OSError) as exc:
                log.info("%r: %s; retrying in %.0f ms", self, exc, backoff_s * 1000)
                self._drop_client()
                await self._sleep(backoff_s)
            except Exception:  # a bug must not kill replication for good; log it and retry after the backoff
                log.exception("%r: fetch round failed", self)
                await self._sleep(backoff_s)

    async def _sleep(self, seconds: float) -> None:
        if self.closed:
            return
        self._wakeup.clear()
        try:
            async with asyncio.timeout(max(seconds, 0.001)):
                await self._wakeup.wait()
        except TimeoutError:
            pass

    def _ready(self, state: FetchState) -> bool:
        return state.delayed_until <= asyncio.get_running_loop().time()

    def _next_ready_in(self, backoff_s: float) -> float:
        now = asyncio.get_running_loop().time()
        waits = [state.delayed_until - now for state in self.partitions.values()]
        return min([w for w in waits if w > 0] or [backoff_s])

    def _delay(self, state: FetchState) -> None:
        state.delayed_until = (asyncio.get_running_loop().time()
                               + self.manager.config.get("replica.fetch.backoff.ms") / 1000.0)

    def _client(self) -> BrokerClient | None:
        endpoint = self.manager.resolve_broker(self.leader_id) if self.manager.resolve_broker else None
        if endpoint is None:
            log.info("%r: no endpoint known for broker %d", self, self.leader_id)
            self._drop_client()
            return None
        if self.client is None or endpoint != self._endpoint:
            self._drop_client()
            self._endpoint = endpoint
            self.client = BrokerClient(endpoint.host, endpoint.port,
                                       client_id=self.manager.replicas.inter_broker_client_id(
                                           f"broker-{self.manager.broker_id}-fetcher-{self.leader_id}"),
                                       timeout_s=self.manager.config.get("replica.socket.timeout.ms") / 1000.0,
                                       ssl=self.manager.replicas.inter_broker_ssl,
                                       sasl=self.manager.replicas.inter_broker_sasl)
        return self.client

    def _drop_client(self) -> None:
        self.session.reset()
        if self.client is not None:
            self.client.close()
            self.client = None

    def _current(self, key: Key, epoch: int):
        """The partition if we still follow it at ``epoch`` from this leader, else None."""
        state = self.partitions.get(key)
        if state is None or state.leader_epoch != epoch:
            return None
        partition = self.manager.replicas.partitions.get(key)
        if partition is None or partition.is_leader or partition.leader_id != self.leader_id:
            return None
        return partition

    # -- truncation ----------------------------------------------------------------------

    async def _truncate(self, client: BrokerClient, key: Key, state: FetchState) -> None:
        """OffsetForLeaderEpoch rounds until our log is a prefix of the leader's (KIP-279)."""
        from kafka.protocol.consumer import OffsetForLeaderEpochRequest  # a follower's: loaded when first needed

        epoch = state.leader_epoch
        for _ in range(MAX_TRUNCATION_ROUNDS):
            partition = self._current(key, epoch)
            if partition is None:
                return
            our_epoch = partition.epochs.latest_epoch
            if our_epoch < 0:
                state.truncating = False
                return
            request = OffsetForLeaderEpochRequest[4](replica_id=self.manager.broker_id, topics=[
                OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic=key[0], partitions=[
                    OffsetForLeaderEpochRequest.OffsetForLeaderTopic.OffsetForLeaderPartition(
                        partition=key[1], current_leader_epoch=epoch, leader_epoch=our_epoch)])])
            response = await client.request(request)
            answer = response.topics[0].partitions[0]
            partition = self._current(key, epoch)
            if partition is None:
                return
            if answer.error_code:
                log.info("%r: OffsetForLeaderEpoch of %s-%d: %s; backing off", self, key[0], key[1],
                         Errors.for_code(answer.error_code).__name__)
                self._delay(state)
                return
            if truncate_for_epoch_end(partition, answer.leader_epoch, answer.end_offset):
                state.truncating = False
                return
        log.warning("%r: %s-%d still diverging after %d truncation rounds; retrying later", self, key[0], key[1],
                    MAX_TRUNCATION_ROUNDS)
        self._delay(state)

    # -- fetching ------------------------------------------------------------------------

    async def _fetch_once(self, client: BrokerClient) -> bool:
        """One Fetch for every ready partition; False when none was ready."""
        from kafka.protocol.consumer import FetchRequest  # a follower's: loaded when first needed

        config = self.manager.config
        wanted: dict[Key, tuple[int, int]] = {}  # key -> (leader epoch, fetch offset)
        entries: dict[Key, Any] = {}
        throttles = getattr(self.manager.replicas, "throttles", None)  # KIP-73 (replication/throttle.py)
        held_back = throttles is not None and throttles.follower.exceeded()
        held = False
        for key, state in self.partitions.items():
            if state.truncating or not self._ready(state):
                continue
            partition = self._current(key, state.leader_epoch)
            if partition is None:
                continue
            if throttles is not None and throttles.follower_throttled(*key):
                if held_back and self.manager.broker_id not in partition.isr:
                    held = True  # out of sync and over follower.replication.throttled.rate: not this round
                    continue
            wanted[key] = (state.leader_epoch, partition.log_end_offset)
            entries[key] = FetchRequest.FetchTopic.FetchPartition(
                partition=key[1], current_leader_epoch=state.leader_epoch,
                fetch_offset=partition.log_end_offset, last_fetched_epoch=partition.epochs.latest_epoch,
                log_start_offset=partition.log_start_offset,
                partition_max_bytes=config.get("replica.fetch.max.bytes"))
        if not wanted:
            if held:
                await self._sleep(throttles.follower.wait_s())
                return True
            return False
        session_id, session_epoch, to_send, forgotten = self.session.build(entries)
        by_topic: dict[str, list] = {}
        for key, entry in to_send.items():
            by_topic.setdefault(key[0], []).append(entry)
        forgotten_by_topic: dict[str, list[int]] = {}
        for topic, index in forgotten:
            forgotten_by_topic.setdefault(topic, []).append(index)
        request = FetchRequest[12](
            replica_id=self.manager.broker_id, max_wait_ms=config.get("replica.fetch.wait.max.ms"),
            min_bytes=config.get("replica.fetch.min.bytes"),
            max_bytes=config.get("replica.fetch.response.max.bytes"), isolation_level=0, session_id=session_id,
            session_epoch=session_epoch,
            topics=[FetchRequest.FetchTopic(topic=topic, partitions=parts) for topic, parts in by_topic.items()],
            forgotten_topics_data=[FetchRequest.ForgottenTopic(topic=topic, partitions=indexes)
                                   for topic, indexes in forgotten_by_topic.items()], rack_id="")
        try:
            response = await client.request(request)
        except BaseException:
            self.session.reset()  # the leader may have advanced the session: start over
            raise
        self.fetches += 1
        if not self.session.handle(response):
            log.info("%r: fetch session %d refused (%s); the next fetch is full", self, session_id,
                     Errors.for_code(response.error_code).__name__)
            return True
        if response.error_code:
            log.info("%r: Fetch failed: %s", self, Errors.for_code(response.error_code).__name__)
            for key in wanted:
                if key in self.partitions:
                    self._delay(self.partitions[key])
            return True
        for topic in response.responses:
            for answer in topic.partitions:
                key = (topic.topic, answer.partition_index)
                if key not in wanted:
                    continue
                epoch, fetch_offset = wanted[key]
                partition = self._current(key, epoch)
                if partition is None or partition.log_end_offset != fetch_offset:
                    continue  # followed anew or truncated while the fetch was in flight
                try:
                    self._apply(key, self.partitions[key], partition, answer)
                except Exception:  # e.g. a corrupt answer: back this partition off, keep the others going
                    log.exception("%r: applying the fetch answer for %s-%d failed", self, key[0], key[1])
                    self._delay(self.partitions[key])
        return True

    def _apply(self, key: Key, state: FetchState, partition, answer) -> None:
        error = answer.error_code
        if error == Errors.OffsetOutOfRangeError.errno:
            if answer.log_start_offset >= 0 and partition.log_end_offset < answer.log_start_offset:
                partition.truncate_fully_and_start_at(answer.log_start_offset)
            else:
                state.truncating = True  # above the leader's end: find where we diverged
            return
        if error:
            if error not in _RETRIABLE:
                log.warning("%r: fetch of %s-%d failed: %s", self, key[0], key[1], Errors.for_code(error).__name__)
            self._delay(state)
            return
        diverging = getattr(answer, "diverging_epoch", None)
        if diverging is not None and (diverging.epoch >= 0 or diverging.end_offset >= 0):
            log.info("%s: leader %d reports a diverging epoch %d ending at %d (our LEO %d)", partition,
                     self.leader_id, diverging.epoch, diverging.end_offset, partition.log_end_offset)
            # when this only cut back to an older epoch, the next fetch's last_fetched_epoch asks about that one
            truncate_for_epoch_end(partition, diverging.epoch, diverging.end_offset)
            return
        records = whole_batches(answer.records)
        if records:
            first = decode_header(records, 0, 0, len(records))
            if first.base_offset < partition.log_end_offset:
                # a batch straddling our log end (only after a truncation inside a batch): restart it whole
                partition.truncate_to(first.base_offset)
            partition.append_as_follower(records)
            throttles = getattr(self.manager.replicas, "throttles", None)
            if throttles is not None and throttles.follower_throttled(*key):
                throttles.follower.record(len(records))
        partition.set_follower_high_watermark(answer.high_watermark)
        if answer.log_start_offset >= 0:
            partition.follow_log_start_offset(answer.log_start_offset)


class ReplicaFetcherManager:
    """Followed partitions grouped by leader, one ``SourceFetcher`` task per leader."""

    def __init__(self, replicas: HostedReplicas, *, broker_id: int, config,
                 resolve_broker: Callable[[int], BrokerEndpoint | None] | None) -> None:
        self.replicas = replicas
        self.broker_id = broker_id
        self.config = config
        self.resolve_broker = resolve_broker
        self.sources: dict[int, SourceFetcher] = {}

    def leader_of(self, key: Key) -> int | None:
        for leader_id, source in self.sources.items():
            if key in source.partitions:
                return leader_id
        return None

    @property
    def partitions(self) -> dict[Key, int]:
        """Followed partition -> the leader it is fetched from."""
        return {key: leader_id for leader_id, source in self.sources.items() for key in source.partitions}

    def add_partition(self, topic: str, index: int, leader_id: int, leader_epoch: int) -> None:
        """Fetch ``topic-index`` from ``leader_id`` at ``leader_epoch``, truncating first (needs the loop)."""
        key = (topic, index)
        self.remove_partitions([key])
        source = self.sources.get(leader_id)
        if source is None or source.task is None or source.task.done():
            source = SourceFetcher(self, leader_id)
            self.sources[leader_id] = source
            source.partitions[key] = FetchState(leader_epoch)
            source.start()
        else:
            source.partitions[key] = FetchState(leader_epoch)
            source.wake()

    def remove_partitions(self, keys) -> None:
        for key in keys:
            for leader_id, source in list(self.sources.items()):
                if source.partitions.pop(key, None) is not None and not source.partitions:
                    source.close()
                    del self.sources[leader_id]

    def shutdown(self) -> None:
        """Stop every fetch task (cancelled at their next await; they touch no partition after that)."""
        for source in self.sources.values():
            source.close()
        self.sources.clear()

    async def shutdown_and_wait(self, timeout_s: float = 10.0) -> None:
        """``shutdown``, then wait (at most ``timeout_s``) for the tasks to end."""
        tasks = [source.task for source in self.sources.values() if source.task is not None]
        self.shutdown()
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=timeout_s)
            if pending:
                log.warning("%d replica fetcher tasks did not stop within %.0f s", len(pending), timeout_s)
