"""A small blocking Kafka-protocol client for executors: Metadata, ListOffsets, raw Fetch, and the producer APIs.

Theory of operation: kafka-python's generated classes encode requests and
decode responses; ``BrokerConnection`` sends them through
``broker_sim.protocol.client.WireConnection`` (the one framed-request client:
one blocking socket, TLS when ``security.protocol`` is SSL), logs in with SASL
when configured and negotiates versions once with ApiVersions. Fetch responses keep their ``records`` field as bytes, which the
caller hands straight to aiokafka's compiled record-batch reader: no
consumer, no per-record Python objects in between, no background threads.

The sink's tasks and driver use the same connection for Produce (record
batches built elsewhere, sent as bytes), InitProducerId, FindCoordinator and the
transaction APIs AddPartitionsToTxn and EndTxn; the request helpers return
error codes as values and leave retrying to the caller.

``BrokerConnection.call`` returns the decoded response or raises
``BrokerUnavailable`` naming the broker's address (connect/IO failure, closed
connection, an answer out of order).

``check_bootstrap`` is the first-connection budget the driver spends before a
query or a batch job starts: Kafka clients retry a refused address for
minutes, which turns a typo in ``kafka.bootstrap.servers`` into a three-minute
hang with a vague error; a plain TCP connect names the address and the
operating system's reason at once.
"""
from __future__ import annotations

import socket
import ssl
import time

from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.metadata import ApiVersionsRequest, FindCoordinatorRequest, MetadataRequest
from kafka.protocol.producer import AddPartitionsToTxnRequest, EndTxnRequest, InitProducerIdRequest, ProduceRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from broker_sim.protocol.client import WireConnection, split_address

# Fetch responses go straight into Arrow: a bigger kernel buffer keeps the broker streaming while Python decodes.
_RECEIVE_BUFFER = 4 << 20
# The highest versions this client builds. Fetch and Produce stop at 12 / 9: v13+ names topics by id.
# AddPartitionsToTxn v4+ is the brokers' batched verification form; EndTxn v5 is KIP-890's epoch-bumping one.
_HIGHEST = {FetchRequest.API_KEY: 12, ListOffsetsRequest.API_KEY: 7, MetadataRequest.API_KEY: 12,
            ProduceRequest.API_KEY: 9, InitProducerIdRequest.API_KEY: 4, FindCoordinatorRequest.API_KEY: 4,
            AddPartitionsToTxnRequest.API_KEY: 3, EndTxnRequest.API_KEY: 4}
_LOWEST = {FetchRequest.API_KEY: 4, ListOffsetsRequest.API_KEY: 1, MetadataRequest.API_KEY: 1,
           ProduceRequest.API_KEY: 3, InitProducerIdRequest.API_KEY: 0, FindCoordinatorRequest.API_KEY: 1,
           AddPartitionsToTxnRequest.API_KEY: 0, EndTxnRequest.API_KEY: 0}
COORDINATOR_GROUP, COORDINATOR_TRANSACTION = 0, 1


class BrokerUnavailable(ConnectionError):
    """The broker could not be reached or closed the connection mid-request."""


class BootstrapUnreachable(BrokerUnavailable):
    """No address of ``kafka.bootstrap.servers`` accepted a TCP connection within ``bootstrapTimeoutMs``."""


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
        from broker_sim.security.sasl import AuthenticationFailed

        handshake = self.call(SaslHandshakeRequest[1](mechanism=login.mechanism))
        if handshake.error_code:
            raise SaslAuthenticationFailed(f"{self.address} does not offer SASL mechanism {login.mechanism} "
                                           f"(kafka.sasl.mechanism); it offers {', '.join(handshake.mechanisms)}")
        version = min(self._versions.get(SaslAuthenticateRequest.API_KEY, (0, 1))[1], 1)
        steps = login.exchange()
        token = next(steps)
        while True:
            answer = self.call(SaslAuthenticateRequest[version](auth_bytes=token))
            if answer.error_code:
                raise SaslAuthenticationFailed(f"{self.address} refused the SASL {login.mechanism} login of "
                                               f"{login.username!r}: {answer.error_message}")
            try:
                token = steps.send(bytes(answer.auth_bytes))
            except StopIteration:
                return
            except AuthenticationFailed as exc:
                raise SaslAuthenticationFailed(f"{self.address}: {exc}") from None

    def close(self) -> None:
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

    def fetch(self, topic: str, partition: int, offset: int, *, isolation_level: int, max_wait_ms: int,
              max_bytes: int, partition_max_bytes: int):
        """The single partition entry of a Fetch response (records as bytes)."""
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
        version = self.version(ProduceRequest)
        by_topic: dict[str, list] = {}
        for (topic, partition), data in records.items():
            by_topic.setdefault(topic, []).append(
                ProduceRequest.TopicProduceData.PartitionProduceData(index=partition, records=data))
        response = self.call(ProduceRequest[version](
            transactional_id=transactional_id, acks=acks, timeout_ms=timeout_ms,
            topic_data=[ProduceRequest.TopicProduceData(name=t, partition_data=p) for t, p in by_topic.items()]))
        answers = {}
        for topic in response.responses:
            for answer in topic.partition_responses:
                answers[(topic.name, answer.index)] = (answer.error_code, answer.base_offset,
                                                       getattr(answer, "error_message", None))
        for key in records:
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
        version = self.version(InitProducerIdRequest)
        fields = dict(transactional_id=transactional_id, transaction_timeout_ms=transaction_timeout_ms)
        if version >= 3:
            fields.update(producer_id=-1, producer_epoch=-1)
        response = self.call(InitProducerIdRequest[version](**fields))
        return response.error_code, response.producer_id, response.producer_epoch

    def add_partitions_to_txn(self, transactional_id: str, producer_id: int, epoch: int,
                              partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """``{(topic, partition): error code}`` of adding ``partitions`` to the open transaction."""
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
        version = self.version(EndTxnRequest)
        response = self.call(EndTxnRequest[version](transactional_id=transactional_id, producer_id=producer_id,
                                                    producer_epoch=epoch, committed=committed))
        return response.error_code


class _TopLevelError:
    """Stands in for a partition entry when the whole Fetch failed."""

    def __init__(self, error_code: int) -> None:
        self.error_code = error_code
        self.records = None
        self.aborted_transactions = None
        self.high_watermark = self.last_stable_offset = self.log_start_offset = -1


def check_login(address: str, config: dict, timeout_s: float = 30.0) -> None:
    """With a SASL security protocol, log in to ``address`` once and hang up: wrong credentials then fail the
    query at once with the broker's message (kafka-python's clients would only say "Unable to bootstrap"
    after their timeouts).  Raises SaslAuthenticationFailed; does nothing for PLAINTEXT and SSL."""
    login = sasl_login_for(config)
    if login is None:
        return
    host, port = split_address(address)
    try:
        BrokerConnection(host, port, timeout_s=timeout_s,
                         client_id="pylog-login-check", ssl_context=ssl_context_for(config), sasl=login).close()
    except BrokerUnavailable:
        pass  # not reachable now: the clients' own retries and errors take over


class SaslAuthenticationFailed(Exception):
    """The broker refused the configured SASL credentials (not retried: the options must change)."""


def sasl_login_for(config: dict):
    """A ``SaslLogin`` from kafka-python's sasl_* settings when security_protocol is SASL_*, else None."""
    protocol = str(config.get("security_protocol", "PLAINTEXT")).upper()
    if not protocol.startswith("SASL_"):
        return None
    from broker_sim.security.sasl import SaslLogin

    return SaslLogin(str(config.get("sasl_mechanism", "PLAIN")).upper(), str(config.get("sasl_plain_username")),
                     str(config.get("sasl_plain_password")))


def ssl_context_for(config: dict) -> ssl.SSLContext | None:
    """A TLS context from kafka-python's ssl_* settings when security_protocol is SSL, else None."""
    protocol = str(config.get("security_protocol", "PLAINTEXT")).upper()
    if protocol not in ("SSL", "SASL_SSL"):
        return None
    # the chain is always verified (the truststore, else the system's CAs), as Kafka's clients and kafka-python
    # do; ssl.endpoint.identification.algorithm="" only stops the host name check
    context = ssl.create_default_context(cafile=config.get("ssl_cafile"))
    context.check_hostname = bool(config.get("ssl_check_hostname", True))
    if config.get("ssl_certfile"):
        context.load_cert_chain(config["ssl_certfile"], config.get("ssl_keyfile"), config.get("ssl_password"))
    if config.get("ssl_crlfile"):
        context.load_verify_locations(config["ssl_crlfile"])
        context.verify_flags |= ssl.VERIFY_CRL_CHECK_LEAF
    return context
