"""A small blocking Kafka-protocol client for executors: Metadata, ListOffsets, raw Fetch, and the producer APIs.

Theory of operation: kafka-python's generated classes encode requests and
decode responses; ``BrokerConnection`` sends them through
``broker_sim.protocol.client.WireConnection`` (the one framed-request client:
one blocking socket, TLS when ``security.protocol`` is SSL), logs in with SASL
when configured and negotiates versions once with ApiVersions. Fetch responses
keep their ``records`` field as bytes, which the caller hands straight to aiokafka's compiled record-batch reader: no
consumer, no per-record Python objects in between, no background threads.

The source's driver (``connector.source.offset_reader``) uses it for its
offset lookups and group commits: Metadata of several topics or all of them,
ListOffsets of many partitions, FindCoordinator, OffsetFetch and OffsetCommit
(as a client outside the group: generation -1, no member id).

The sink's tasks and driver use the same connection for Produce (record
batches built elsewhere, sent as bytes), InitProducerId, FindCoordinator and the
transaction APIs AddPartitionsToTxn and EndTxn; the request helpers return
error codes as values and leave retrying to the caller. ``send_produce`` /
``read_produce`` split a Produce into its send and its answer, so a task keeps
several requests in flight on one connection (answered in order).

``IDLE_CONNECTIONS`` (a ``ConnectionPool``) keeps connections whose requests
were all answered between the short Spark tasks of one reused Python worker:
the source's range readers and the sink's tasks and driver commits take one
there before they connect.

``BrokerConnection.call`` returns the decoded response or raises
``BrokerUnavailable`` naming the broker's address (connect/IO failure, closed
connection, an answer out of order).

``check_bootstrap`` is the first-connection budget the driver spends before a
query or a batch job starts: Kafka clients retry a refused address for
minutes, which turns a typo in ``kafka.bootstrap.servers`` into a three-minute
hang with a vague error; a plain TCP connect names the address and the
operating system's reason at once. ``check_login`` then spends one connection
on the security settings (``probe_security``): TLS on one side only, a
certificate the truststore does not vouch for, SASL on one side only, a
mechanism the broker does not enable or refused credentials fail the query
with the cause and the ``kafka.*`` option to change, where Kafka clients would
retry until their timeout and say only that no broker answered.

TLS settings (``ssl_context_for``) are the same on the driver (its admin
client gets the context, ``connector.admin``) and the executors; a JKS or
PKCS12 truststore (``kafka.ssl.truststore.type``) is read in memory
(``truststore_pem``).
"""
from __future__ import annotations

import os
import socket
import ssl
import time

from kafka.protocol.consumer import ListOffsetsRequest, OffsetCommitRequest, OffsetFetchRequest
from kafka.protocol.metadata import ApiVersionsRequest, FindCoordinatorRequest, MetadataRequest
from kafka.protocol.sasl import SaslAuthenticateRequest

from broker_sim.protocol.client import (
    SaslRefused, SecurityMismatch, WireConnection, client_ssl_context, probe_security, split_address,
)

# Fetch responses go straight into Arrow: a bigger kernel buffer keeps the broker streaming while Python decodes.
_RECEIVE_BUFFER = 4 << 20
# The highest versions this client builds. Fetch and Produce stop at 12 / 9: v13+ names topics by id.
# AddPartitionsToTxn v4+ is the brokers' batched verification form; EndTxn v5 is KIP-890's epoch-bumping one.
# The sink's messages (kafka.protocol.producer: Produce, InitProducerId, AddPartitionsToTxn, EndTxn) are imported by
# the methods that send them: a source driver's fresh Python process (one per streaming query) never builds them.
# Nor Fetch's, which only executors send (kafka-python builds its classes from JSON at import: ~18 ms; with
# connector.source's deferral of kafka.protocol.consumer the driver loads only ListOffsets' and the group's).
PRODUCE_KEY, INIT_PRODUCER_ID_KEY, ADD_PARTITIONS_TO_TXN_KEY, END_TXN_KEY, FETCH_KEY = 0, 22, 24, 26, 1
_HIGHEST = {FETCH_KEY: 12, ListOffsetsRequest.API_KEY: 7, MetadataRequest.API_KEY: 12,
            PRODUCE_KEY: 9, INIT_PRODUCER_ID_KEY: 4, FindCoordinatorRequest.API_KEY: 4,
            ADD_PARTITIONS_TO_TXN_KEY: 3, END_TXN_KEY: 4}
_LOWEST = {FETCH_KEY: 4, ListOffsetsRequest.API_KEY: 1, MetadataRequest.API_KEY: 1,
           PRODUCE_KEY: 3, INIT_PRODUCER_ID_KEY: 0, FindCoordinatorRequest.API_KEY: 1,
           ADD_PARTITIONS_TO_TXN_KEY: 0, END_TXN_KEY: 0}
# The source driver's group requests (OffsetFetch v8+ batches groups, OffsetCommit v2 is the oldest Kafka 4 takes).
_HIGHEST.update({OffsetFetchRequest.API_KEY: 7, OffsetCommitRequest.API_KEY: 8})
_LOWEST.update({OffsetFetchRequest.API_KEY: 1, OffsetCommitRequest.API_KEY: 2})
COORDINATOR_GROUP, COORDINATOR_TRANSACTION = 0, 1


class BrokerUnavailable(ConnectionError):
    """The broker could not be reached or closed the connection mid-request."""


class BootstrapUnreachable(BrokerUnavailable):
    """No address of ``kafka.bootstrap.servers`` accepted a TCP connection within ``bootstrapTimeoutMs``."""


def first_reachable(servers: str, connect) -> "BrokerConnection":
    """``connect(host, port)`` to the first of the comma-separated ``servers`` that takes a connection, in order;
    the last refusal (BrokerUnavailable) when none does."""
    last_error = None
    for server in servers.split(","):
        if not server.strip():
            continue
        try:
            return connect(*split_address(server))
        except BrokerUnavailable as exc:
            last_error = exc
    raise last_error or BrokerUnavailable("no bootstrap server configured")


def check_bootstrap(servers: str, timeout_ms: int, budget: str = "bootstrapTimeoutMs") -> str:
    """The first ``host:port`` of ``servers`` that accepts a TCP connection, tried in turn for ``timeout_ms``.

    Raises ``BootstrapUnreachable`` naming the option, every address and the
    last error each gave (connection refused, unknown host, timed out), and
    ``budget``, the option ``timeout_ms`` came from.
    """
    deadline = time.monotonic() + timeout_ms / 1000
    errors: dict[str, str] = {}
    addresses = [s.strip() for s in servers.split(",") if s.strip()]
    while True:
        for address in addresses:
            host, _, port = address.rpartition(":")
            try:
                timeout = max(0.1, min(5.0, deadline - time.monotonic()))
                socket.create_connection((host or "localhost", int(port or 9092)), timeout=timeout).close()
                return address
            except (OSError, ValueError) as exc:
                errors[address] = str(exc) or type(exc).__name__
        if time.monotonic() >= deadline:
            reasons = "; ".join(f"{a}: {why}" for a, why in errors.items())
            raise BootstrapUnreachable(
                f"Cannot connect to kafka.bootstrap.servers={servers} within {budget}={timeout_ms}: "
                f"{reasons}")
        time.sleep(0.2)


class BrokerConnection:
    """One TCP (or TLS) connection to one broker; requests are answered in order."""

    def __init__(self, host: str, port: int, *, timeout_s: float, client_id: str,
                 ssl_context: ssl.SSLContext | None = None, sasl=None) -> None:
        self.address = f"{host}:{port}"
        try:
            self._wire = WireConnection.connect(host, port, timeout_s=timeout_s, client_id=client_id,
                                                ssl_context=ssl_context, receive_buffer=_RECEIVE_BUFFER)
        except OSError as exc:  # WireError: "cannot connect to <address>: <reason>"
            raise BrokerUnavailable(str(exc)) from exc
        try:
            response = self.call(ApiVersionsRequest[0]())
            self._versions = {api.api_key: (api.min_version, api.max_version) for api in response.api_keys}
            if sasl is not None:
                self._authenticate(sasl)
        except BaseException:
            self._wire.close()
            raise

    def _authenticate(self, login) -> None:
        """SaslHandshake v1 + SaslAuthenticate (KIP-152) with a ``broker_sim.security.sasl.SaslLogin``."""
        version = min(self._versions.get(SaslAuthenticateRequest.API_KEY, (0, 1))[1], 1)
        try:
            self._wire.authenticate(login, version=version)
        except SaslRefused as exc:
            raise SaslAuthenticationFailed(f"{exc} (kafka.sasl.mechanism, kafka.sasl.jaas.config)") from None
        except OSError as exc:
            raise BrokerUnavailable(f"SASL login to {self.address} failed: {exc}") from exc

    def close(self) -> None:
        self._wire.close()

    def abort(self) -> None:
        """Close from another thread: a request blocked in this connection fails at once (shutdown wakes it)."""
        try:
            self._wire.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._wire.close()

    def version(self, request_class) -> int:
        """The highest version both sides speak of ``request_class`` (raises when there is none)."""
        key = request_class.API_KEY
        low, high = self._versions.get(key, (0, -1))
        chosen = min(high, _HIGHEST[key])
        if chosen < max(low, _LOWEST[key]):
            raise BrokerUnavailable(f"{self.address} does not support {request_class.__name__} "
                                    f"v{_LOWEST[key]}-{_HIGHEST[key]} (it offers v{low}-{high})")
        return chosen

    def call(self, request):
        """Send one versioned request and return its decoded response."""
        try:
            return self._wire.call(request)
        except OSError as exc:  # WireError (closed, too large, out of order), timeouts, resets
            raise BrokerUnavailable(f"request to {self.address} failed: {exc}") from exc

    # -- requests ------------------------------------------------------------

    def metadata(self, topic: str, *, allow_auto_topic_creation: bool = False):
        """(brokers {node id: (host, port)}, topic metadata or None when the broker does not know the topic)."""
        version = self.version(MetadataRequest)
        response = self.call(MetadataRequest[version](
            topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
            allow_auto_topic_creation=allow_auto_topic_creation,
            include_topic_authorized_operations=False))
        brokers = {b.node_id: (b.host, b.port) for b in response.brokers}
        for entry in response.topics:
            if entry.name == topic:
                return brokers, entry
        return brokers, None

    def list_offset(self, topic: str, partition: int, timestamp: int, isolation_level: int) -> tuple[int, int]:
        """(error code, offset) of one partition's ListOffsets for ``timestamp`` (-2 earliest, -1 latest)."""
        version = self.version(ListOffsetsRequest)
        response = self.call(ListOffsetsRequest[version](
            replica_id=-1, isolation_level=isolation_level, topics=[ListOffsetsRequest.ListOffsetsTopic(
                name=topic, partitions=[ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                    partition_index=partition, current_leader_epoch=-1, timestamp=timestamp)])]))
        answer = response.topics[0].partitions[0]
        return answer.error_code, answer.offset

    def cluster_metadata(self, topics: list[str] | None):
        """(brokers {node id: (host, port)}, the response's topic entries) for ``topics``, or every topic the
        broker lets the client describe when None; never creates a topic."""
        version = self.version(MetadataRequest)
        names = None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics]
        fields = dict(topics=names)
        if version >= 4:
            fields["allow_auto_topic_creation"] = False
        if version >= 8:
            fields["include_topic_authorized_operations"] = False
        response = self.call(MetadataRequest[version](**fields))
        return {b.node_id: (b.host, b.port) for b in response.brokers}, list(response.topics)

    def list_offsets(self, timestamps: dict[tuple[str, int], int],
                     isolation_level: int) -> dict[tuple[str, int], tuple[int, int]]:
        """``{(topic, partition): (error code, offset)}`` of one ListOffsets for ``{(topic, partition): timestamp}``
        (-2 earliest, -1 latest, else the first offset at or after the timestamp; -1 when there is none)."""
        version = self.version(ListOffsetsRequest)
        by_topic: dict[str, list] = {}
        for (topic, partition), timestamp in timestamps.items():
            by_topic.setdefault(topic, []).append(ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                partition_index=partition, current_leader_epoch=-1, timestamp=timestamp))
        response = self.call(ListOffsetsRequest[version](
            replica_id=-1, isolation_level=isolation_level,
            topics=[ListOffsetsRequest.ListOffsetsTopic(name=t, partitions=p) for t, p in by_topic.items()]))
        answers = {(topic.name, answer.partition_index): (answer.error_code, answer.offset)
                   for topic in response.topics for answer in topic.partitions}
        for key in timestamps:
            answers.setdefault(key, (3, -1))  # UNKNOWN_TOPIC_OR_PARTITION: the broker left the partition out
        return answers

    def offset_fetch(self, group_id: str, partitions: list[tuple[str, int]]):
        """(top-level error code, ``{(topic, partition): (error code, offset, metadata)}``) of the group's
        committed offsets (offset -1: none)."""
        version = self.version(OffsetFetchRequest)
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        fields = dict(group_id=group_id, topics=[OffsetFetchRequest.OffsetFetchRequestTopic(
            name=t, partition_indexes=p) for t, p in by_topic.items()])
        if version >= 7:
            fields["require_stable"] = False
        response = self.call(OffsetFetchRequest[version](**fields))
        answers = {(topic.name, answer.partition_index): (answer.error_code, answer.committed_offset,
                                                          answer.metadata or "")
                   for topic in response.topics for answer in topic.partitions}
        return (response.error_code if version >= 2 else 0), answers

    def offset_commit(self, group_id: str,
                      offsets: dict[tuple[str, int], tuple[int, str]]) -> dict[tuple[str, int], int]:
        """``{(topic, partition): error code}`` of committing ``{(topic, partition): (offset, metadata)}`` to
        ``group_id`` as a client outside the group (generation -1, no member id), as admin clients do."""
        version = self.version(OffsetCommitRequest)
        by_topic: dict[str, list] = {}
        for (topic, partition), (offset, metadata) in offsets.items():
            entry = OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition
            by_topic.setdefault(topic, []).append(entry(partition_index=partition, committed_offset=offset,
                                                        committed_leader_epoch=-1, committed_metadata=metadata))
        fields = dict(group_id=group_id, generation_id_or_member_epoch=-1, member_id="",
                      topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=p)
                              for t, p in by_topic.items()])
        if version <= 4:
            fields["retention_time_ms"] = -1
        if version >= 7:
            fields["group_instance_id"] = None
        response = self.call(OffsetCommitRequest[version](**fields))
        answers = {(topic.name, answer.partition_index): answer.error_code
                   for topic in response.topics for answer in topic.partitions}
        for key in offsets:
            answers.setdefault(key, 3)
        return answers

    def fetch(self, topic: str, partition: int, offset: int, *, isolation_level: int, max_wait_ms: int,
              max_bytes: int, partition_max_bytes: int):
        """The single partition entry of a Fetch response (records as bytes)."""
        from kafka.protocol.consumer import FetchRequest

        version = self.version(FetchRequest)
        response = self.call(FetchRequest[version](
            replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=max_bytes,
            isolation_level=isolation_level, session_id=0, session_epoch=-1,
            topics=[FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchTopic.FetchPartition(
                partition=partition, fetch_offset=offset, partition_max_bytes=partition_max_bytes,
                current_leader_epoch=-1, last_fetched_epoch=-1, log_start_offset=-1)])],
            forgotten_topics_data=[], rack_id=""))
        if response.error_code:
            return _TopLevelError(response.error_code)
        for entry in response.responses:
            for answer in entry.partitions:
                if answer.partition_index == partition:
                    return answer
        return _TopLevelError(3)  # UNKNOWN_TOPIC_OR_PARTITION: the broker left the partition out

    def produce(self, records: dict[tuple[str, int], bytes], *, acks: int, timeout_ms: int,
                transactional_id: str | None = None) -> dict[tuple[str, int], tuple[int, int, str | None]]:
        """Send record batches ``{(topic, partition): bytes}``; ``{(topic, partition): (error code, base offset,
        error message)}``."""
        return self.read_produce(self.send_produce(records, acks=acks, timeout_ms=timeout_ms,
                                                   transactional_id=transactional_id))

    def send_produce(self, records: dict[tuple[str, int], bytes], *, acks: int, timeout_ms: int,
                     transactional_id: str | None = None):
        """Send a Produce request of record batches ``{(topic, partition): bytes}`` without waiting for its answer
        (pipelining: the broker answers a connection's requests in the order they were sent); hand the returned
        handle to ``read_produce``, in the order the requests were sent. ``acks`` must not be 0."""
        from kafka.protocol.producer import ProduceRequest
        version = self.version(ProduceRequest)
        by_topic: dict[str, list] = {}
        for (topic, partition), data in records.items():
            by_topic.setdefault(topic, []).append(
                ProduceRequest.TopicProduceData.PartitionProduceData(index=partition, records=data))
        request = ProduceRequest[version](
            transactional_id=transactional_id, acks=acks, timeout_ms=timeout_ms,
            topic_data=[ProduceRequest.TopicProduceData(name=t, partition_data=p) for t, p in by_topic.items()])
        try:
            correlation_id, data = self._wire.encode(request)
            self._wire.send_bytes(data)
        except OSError as exc:
            raise BrokerUnavailable(f"request to {self.address} failed: {exc}") from exc
        return request, correlation_id, tuple(records)

    def read_produce(self, handle) -> dict[tuple[str, int], tuple[int, int, str | None]]:
        """The answer to a ``send_produce``: ``{(topic, partition): (error code, base offset, error message)}``."""
        request, correlation_id, keys = handle
        try:
            response = self._wire.read_response(request, correlation_id)
        except OSError as exc:  # WireError (closed, too large, out of order), timeouts, resets
            raise BrokerUnavailable(f"request to {self.address} failed: {exc}") from exc
        answers = {}
        for topic in response.responses:
            for answer in topic.partition_responses:
                answers[(topic.name, answer.index)] = (answer.error_code, answer.base_offset,
                                                       getattr(answer, "error_message", None))
        for key in keys:
            answers.setdefault(key, (3, -1, "the broker left the partition out of its Produce response"))
        return answers

    def find_coordinator(self, key: str, key_type: int) -> tuple[int, int, str, int]:
        """(error code, node id, host, port) of the coordinator of a group (0) or transactional id (1)."""
        version = self.version(FindCoordinatorRequest)
        if version >= 4:
            response = self.call(FindCoordinatorRequest[version](key_type=key_type, coordinator_keys=[key]))
            answer = response.coordinators[0]
            return answer.error_code, answer.node_id, answer.host, answer.port
        response = self.call(FindCoordinatorRequest[version](key=key, key_type=key_type))
        return response.error_code, response.node_id, response.host, response.port

    def init_producer_id(self, transactional_id: str | None, transaction_timeout_ms: int) -> tuple[int, int, int]:
        """(error code, producer id, epoch): an idempotent producer id (no transactional id), or the
        transactional id's producer id with a bumped epoch (which fences and aborts its previous owner)."""
        from kafka.protocol.producer import InitProducerIdRequest
        version = self.version(InitProducerIdRequest)
        fields = dict(transactional_id=transactional_id, transaction_timeout_ms=transaction_timeout_ms)
        if version >= 3:
            fields.update(producer_id=-1, producer_epoch=-1)
        response = self.call(InitProducerIdRequest[version](**fields))
        return response.error_code, response.producer_id, response.producer_epoch

    def add_partitions_to_txn(self, transactional_id: str, producer_id: int, epoch: int,
                              partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """``{(topic, partition): error code}`` of adding ``partitions`` to the open transaction."""
        from kafka.protocol.producer import AddPartitionsToTxnRequest
        version = self.version(AddPartitionsToTxnRequest)
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        topics = [AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=t, partitions=p) for t, p in by_topic.items()]
        response = self.call(AddPartitionsToTxnRequest[version](
            v3_and_below_transactional_id=transactional_id, v3_and_below_producer_id=producer_id,
            v3_and_below_producer_epoch=epoch, v3_and_below_topics=topics))
        return {(topic.name, answer.partition_index): answer.partition_error_code
                for topic in response.results_by_topic_v3_and_below for answer in topic.results_by_partition}

    def end_txn(self, transactional_id: str, producer_id: int, epoch: int, committed: bool) -> int:
        """Error code of committing (``committed``) or aborting the transactional id's open transaction."""
        from kafka.protocol.producer import EndTxnRequest
        version = self.version(EndTxnRequest)
        response = self.call(EndTxnRequest[version](transactional_id=transactional_id, producer_id=producer_id,
                                                    producer_epoch=epoch, committed=committed))
        return response.error_code

    def find_coordinators(self, keys: list[str], key_type: int) -> dict[str, tuple[int, int, str, int]]:
        """``{key: (error code, node id, host, port)}``: FindCoordinator for several keys in one request (v4+,
        KIP-699), one request per key from an older broker."""
        if self.version(FindCoordinatorRequest) < 4:
            return {key: self.find_coordinator(key, key_type) for key in keys}
        response = self.call(FindCoordinatorRequest[self.version(FindCoordinatorRequest)](
            key_type=key_type, coordinator_keys=list(keys)))
        answers = {a.key: (a.error_code, a.node_id, a.host, a.port) for a in response.coordinators}
        return {key: answers.get(key, (15, -1, "", -1)) for key in keys}   # left out: COORDINATOR_NOT_AVAILABLE

    def send_end_txn(self, transactional_id: str, producer_id: int, epoch: int, committed: bool):
        """``end_txn`` without waiting for its answer (pipelining, as ``send_produce``); hand the handle to
        ``read_end_txn`` in the order the requests were sent."""
        from kafka.protocol.producer import EndTxnRequest
        version = self.version(EndTxnRequest)
        request = EndTxnRequest[version](transactional_id=transactional_id, producer_id=producer_id,
                                         producer_epoch=epoch, committed=committed)
        try:
            correlation_id, data = self._wire.encode(request)
            self._wire.send_bytes(data)
        except OSError as exc:
            raise BrokerUnavailable(f"request to {self.address} failed: {exc}") from exc
        return request, correlation_id

    def read_end_txn(self, handle) -> int:
        """The error code answering a ``send_end_txn``."""
        request, correlation_id = handle
        try:
            return self._wire.read_response(request, correlation_id).error_code
        except OSError as exc:
            raise BrokerUnavailable(f"request to {self.address} failed: {exc}") from exc


class ConnectionPool:
    """Idle ``BrokerConnection``s kept between the Spark tasks of one Python worker, by address and settings.

    Spark reuses a Python worker for the tasks that follow (``spark.python.worker.reuse``, on by default), and
    a micro-batch's tasks are short: a fresh connection per task (TCP, ApiVersions, a SASL login) was a large
    part of a small batch's time, where Spark's connector keeps its consumers and producers cached per
    executor. Rules:

    1. ``put`` takes only a connection with no request in flight (the caller's promise); ``take`` hands out
       each connection once.
    2. A connection idle longer than ``idle_s`` is closed at the next ``take`` or ``put``, and at most
       ``max_idle`` are kept (the oldest is closed first): a worker between queries holds few sockets.
    3. ``take`` closes and skips a connection the broker has written to or closed meanwhile (its socket is
       readable while idle), so a restarted broker costs a new connection, not a failed request.
    4. The key is the address, the client id and every client setting (security included): a connection is
       only reused by a client that would have opened the same one.
    """

    def __init__(self, *, max_idle: int = 8, idle_s: float = 60.0, clock=time.monotonic) -> None:
        import threading
        self._idle: dict[tuple, list[tuple[float, "BrokerConnection"]]] = {}
        self._lock = threading.Lock()
        self._max_idle, self._idle_s, self._clock = max_idle, idle_s, clock

    @staticmethod
    def key(address: str, client_id: str, config: dict) -> tuple:
        return address, client_id, repr(sorted((str(k), repr(v)) for k, v in config.items()))

    def take(self, key: tuple) -> "BrokerConnection | None":
        """An idle connection for ``key``, or None."""
        with self._lock:
            stale = self._expire()
            entries = self._idle.get(key) or []
            found = None
            while entries and found is None:
                _, connection = entries.pop()
                if _quiet(connection):
                    found = connection
                else:
                    stale.append(connection)
            if not entries:
                self._idle.pop(key, None)
        for connection in stale:
            connection.close()
        return found

    def put(self, key: tuple, connection: "BrokerConnection") -> None:
        """Keep ``connection`` (no request in flight) for the next ``take`` of ``key``."""
        with self._lock:
            stale = self._expire()
            self._idle.setdefault(key, []).append((self._clock(), connection))
            while sum(len(v) for v in self._idle.values()) > self._max_idle:
                oldest = min(self._idle, key=lambda k: self._idle[k][0][0])
                stale.append(self._idle[oldest].pop(0)[1])
                if not self._idle[oldest]:
                    del self._idle[oldest]
        for connection in stale:
            connection.close()

    def close_all(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, {}
        for entries in idle.values():
            for _, connection in entries:
                connection.close()

    def __contains__(self, connection) -> bool:
        with self._lock:
            return any(c is connection for entries in self._idle.values() for _, c in entries)

    def __len__(self) -> int:
        with self._lock:
            return sum(len(v) for v in self._idle.values())

    def _expire(self) -> list:
        """Under the lock: remove and return the connections idle longer than ``idle_s``."""
        cutoff, stale = self._clock() - self._idle_s, []
        for key in list(self._idle):
            kept = [(at, c) for at, c in self._idle[key] if at >= cutoff]
            stale += [c for at, c in self._idle[key] if at < cutoff]
            if kept:
                self._idle[key] = kept
            else:
                del self._idle[key]
        return stale


def _quiet(connection: "BrokerConnection") -> bool:
    """True when an idle connection's socket has nothing to read (no close, no stray bytes)."""
    import select
    try:
        readable, _, _ = select.select([connection._wire.sock], [], [], 0)
    except (OSError, ValueError):
        return False
    return not readable


# The executors' and the sink driver's idle connections (``ConnectionPool``): one per Python process.
IDLE_CONNECTIONS = ConnectionPool()


class _TopLevelError:
    """Stands in for a partition entry when the whole Fetch failed."""

    def __init__(self, error_code: int) -> None:
        self.error_code = error_code
        self.records = None
        self.aborted_transactions = None
        self.high_watermark = self.last_stable_offset = self.log_start_offset = -1


# The connector's names of the settings a security mistake is fixed with (``probe_security``'s ``names``).
SETTING_NAMES = {
    "protocol": "kafka.security.protocol",
    "truststore": "kafka.ssl.truststore.location (or kafka.ssl.ca.location)",
    "hostname": "kafka.ssl.endpoint.identification.algorithm= (empty)",
    "keystore": "kafka.ssl.keystore.location",
    "mechanism": "kafka.sasl.mechanism",
    "credentials": "kafka.sasl.jaas.config (or kafka.sasl.username and kafka.sasl.password)",
}


def check_login(address: str, config: dict, timeout_s: float = 30.0) -> None:
    """Connect to ``address`` once with the options' security settings, as the query's clients will (TLS
    handshake, SASL login, or a request a SASL listener refuses), and hang up.

    A mistake then fails the query at once with its cause and the option to change (a certificate the
    truststore does not vouch for, TLS on one side only, SASL on one side only, a mechanism the broker does
    not enable, refused credentials: ``broker_sim.protocol.client.probe_security``); kafka-python's clients
    would only say "Unable to bootstrap" after minutes of retries.  Raises ``SaslAuthenticationFailed`` for a
    refused SASL login or mechanism, ``SecurityMisconfigured`` for the rest; returns when the broker is not
    reachable (the clients' own retries and errors take over).
    """
    protocol = str(config.get("security_protocol", "PLAINTEXT")).upper()
    ssl_files = protocol in ("SSL", "SASL_SSL")
    for key, option in (("ssl_cafile", "kafka.ssl.truststore.location"),
                        ("ssl_certfile", "kafka.ssl.keystore.location"),
                        ("ssl_keyfile", "kafka.ssl.key.location"), ("ssl_crlfile", "kafka.ssl.crl.location")):
        if ssl_files and config.get(key) and not os.path.isfile(str(config[key])):
            raise SecurityMisconfigured(f"Option '{option}': {config[key]} is not a file on the driver")
    try:
        context = ssl_context_for(config)
    except (OSError, ValueError) as exc:  # a file missing or unreadable, a key that does not fit
        raise SecurityMisconfigured(f"the TLS settings cannot be used: {exc} (kafka.ssl.truststore.location, "
                                    f"kafka.ssl.keystore.location, kafka.ssl.key.location, "
                                    f"kafka.ssl.key.password)") from None
    try:
        probe_security(address, protocol=protocol, ssl_context=context, login=sasl_login_for(config),
                       timeout_s=timeout_s, names=SETTING_NAMES)
    except SecurityMismatch as exc:
        if exc.kind.startswith("sasl-"):
            raise SaslAuthenticationFailed(str(exc)) from None
        raise SecurityMisconfigured(str(exc)) from None
    except OSError:
        pass  # not reachable now: the clients' own retries and errors take over


class SecurityMisconfigured(Exception):
    """The security options do not fit the broker's listener (not retried: the options must change)."""


class SaslAuthenticationFailed(SecurityMisconfigured):
    """The broker refused the configured SASL credentials or mechanism."""


def sasl_login_for(config: dict):
    """A ``SaslLogin`` from kafka-python's sasl_* settings when security_protocol is SASL_*, else None."""
    protocol = str(config.get("security_protocol", "PLAINTEXT")).upper()
    if not protocol.startswith("SASL_"):
        return None
    from broker_sim.security.sasl import SaslLogin

    return SaslLogin(str(config.get("sasl_mechanism", "PLAIN")).upper(), str(config.get("sasl_plain_username")),
                     str(config.get("sasl_plain_password")))


def ssl_context_for(config: dict) -> ssl.SSLContext | None:
    """A TLS context from kafka-python's ssl_* settings when security_protocol is SSL, else None.

    The truststore (``ssl_cafile``) is PEM, or JKS / PKCS12 when ``ssl_truststore_type`` says so
    (``truststore_pem``: its trusted certificates, read in memory with ``ssl_truststore_password``).
    """
    protocol = str(config.get("security_protocol", "PLAINTEXT")).upper()
    if protocol not in ("SSL", "SASL_SSL"):
        return None
    cafile = config.get("ssl_cafile")
    store_type = str(config.get("ssl_truststore_type") or "PEM").upper()
    cadata = None
    if cafile and store_type != "PEM":
        cafile, cadata = None, truststore_pem(cafile, store_type, config.get("ssl_truststore_password"))
    return client_ssl_context(cafile=cafile, cadata=cadata, check_hostname=bool(config.get("ssl_check_hostname", True)),
                              certfile=config.get("ssl_certfile"), keyfile=config.get("ssl_keyfile"),
                              password=config.get("ssl_password"), crlfile=config.get("ssl_crlfile"))


TRUSTSTORE_TYPES = ("PEM", "JKS", "PKCS12")


def truststore_type(location: str) -> str:
    """PEM, JKS or PKCS12, from a truststore file's first bytes (JKS's magic 0xFEEDFEED, PKCS12's DER
    SEQUENCE); raises OSError when it cannot be read."""
    with open(location, "rb") as store:
        head = store.read(64)
    if head[:4] == b"\xfe\xed\xfe\xed":
        return "JKS"
    if head[:1] == b"\x30" and b"-----BEGIN" not in head:
        return "PKCS12"
    return "PEM"


def truststore_pem(location: str, store_type: str, password: str | None) -> str:
    """The trusted certificates of a JKS (pyjks) or PKCS12 (cryptography) truststore, as PEM text for
    ``ssl``; nothing is written to disk.  Raises ValueError naming the file and the problem (a wrong
    password, no certificates, not that type)."""
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding

    with open(location, "rb") as store:
        data = store.read()
    if store_type == "JKS":
        try:
            import jks
        except ImportError:
            raise ValueError("reading a JKS truststore needs pyjks: pip install 'pylog[spark]'") from None
        try:
            entries = jks.KeyStore.loads(data, password).certs.values()
        except jks.util.KeystoreSignatureException:
            raise ValueError(f"{location}: the JKS truststore's integrity check failed: wrong "
                             f"kafka.ssl.truststore.password") from None
        except jks.util.BadKeystoreFormatException as exc:
            raise ValueError(f"{location} is not a JKS truststore ({exc})") from None
        certificates = [x509.load_der_x509_certificate(entry.cert) for entry in entries]
    else:
        from cryptography.hazmat.primitives.serialization import pkcs12
        try:
            loaded = pkcs12.load_pkcs12(data, password.encode() if password else None)
        except ValueError:
            raise ValueError(f"{location}: cannot read it as a PKCS12 truststore: wrong "
                             f"kafka.ssl.truststore.password, or not PKCS12") from None
        certificates = [c.certificate for c in ([loaded.cert] if loaded.cert else []) + loaded.additional_certs]
    if not certificates:
        raise ValueError(f"{location}: the {store_type} truststore holds no trusted certificate")
    return "".join(c.public_bytes(Encoding.PEM).decode() for c in certificates)
