"""The sink's view of the cluster: partition counts and leaders, connections by node, transaction coordinators.

Theory of operation: one ``SinkCluster`` per task (and one in the driver's
commit) owns blocking ``BrokerConnection``\\ s keyed by node id, opened on first
use. ``topic`` answers a topic's partition leaders from a Metadata request
(allowing auto-creation, as Kafka's producer does), cached until ``forget``
drops it after a retriable error. ``coordinator`` finds the transaction
coordinator of a transactional id with FindCoordinator (key type 1), and
remembers it until ``drop`` (a task asks it for InitProducerId and again for
AddPartitionsToTxn; ``learn_coordinator`` passes it on from the cluster of a
task's setup thread).
Errors come back as exceptions only for what no retry can fix; the retry
loops live with the callers, which know their deadlines.

``release`` (instead of ``close``) when every request was answered hands the
connections to ``connector.wire.IDLE_CONNECTIONS``: the next task in the same
Python worker, or the driver's next batch commit, starts without connecting.
"""
from __future__ import annotations

import logging
import time

from connector.error_codes import refused, retriable
from connector.options import SinkOptions
from connector.wire import (
    COORDINATOR_TRANSACTION, BrokerConnection, BrokerUnavailable, first_reachable, sasl_login_for, ssl_context_for,
)

log = logging.getLogger(__name__)

RETRY_BACKOFF_S = 0.1
# COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR: find the coordinator again
NOT_COORDINATOR = {14, 15, 16}


class SinkError(RuntimeError):
    """A write or commit failed in a way retrying cannot fix (the message names topic, partition and error)."""


class SinkCluster:
    """Connections and metadata for one writer task or one driver commit; close() when done."""

    def __init__(self, options: SinkOptions, client_id: str) -> None:
        config = options.client_kwargs
        self.options = options
        self._timeout_s = options.request_timeout_ms / 1000
        self._client_id = str(config.get("client_id", client_id))
        self._ssl = ssl_context_for(config)
        self._sasl = sasl_login_for(config)
        self._connections: dict[int, BrokerConnection] = {}
        self._bootstrap: BrokerConnection | None = None
        self._brokers: dict[int, tuple[str, int]] = {}
        self._topics: dict[str, tuple[int, dict[int, int]]] = {}
        self._coordinators: dict[str, int] = {}   # transactional id -> coordinator node id, until a drop()

    def close(self) -> None:
        for connection in {id(c): c for c in [*self._connections.values(), self._bootstrap] if c}.values():
            connection.close()
        self._connections.clear()
        self._bootstrap = None
        self._coordinators.clear()

    def release(self) -> None:
        """Keep the connections (none may have a request in flight) for the next cluster of the same settings."""
        from connector.wire import IDLE_CONNECTIONS, ConnectionPool
        connections = {id(c): c for c in [*self._connections.values(), self._bootstrap] if c}.values()
        self._connections.clear()
        self._bootstrap = None
        self._coordinators.clear()
        for connection in connections:
            IDLE_CONNECTIONS.put(ConnectionPool.key(connection.address, self._client_id,
                                                    self.options.client_kwargs), connection)

    def any_connection(self) -> BrokerConnection:
        """A connection to some broker (the bootstrap one)."""
        if self._bootstrap is None:
            self._bootstrap = first_reachable(self.options.bootstrap_servers, self._connect)
        return self._bootstrap

    def node(self, node_id: int) -> BrokerConnection:
        connection = self._connections.get(node_id)
        if connection is None:
            host, port = self._brokers[node_id]
            bootstrap = self._bootstrap
            if bootstrap is not None and bootstrap.address == f"{host}:{port}":
                connection = bootstrap
            else:
                connection = self._connect(host, port)
            self._connections[node_id] = connection
        return connection

    def drop(self, node_id: int | None = None) -> None:
        """Close connections after an I/O failure (one node's, or all) so the next call reconnects."""
        if node_id is None:
            self.close()
            return
        connection = self._connections.pop(node_id, None)
        self._coordinators = {k: v for k, v in self._coordinators.items() if v != node_id}
        if connection is not None:
            if connection is self._bootstrap:
                self._bootstrap = None
            connection.close()

    def topic(self, topic: str, deadline: float) -> tuple[int, dict[int, int]]:
        """(partition count, {partition: leader node id}); waits for a new topic's leaders until ``deadline``."""
        cached = self._topics.get(topic)
        if cached is not None:
            return cached
        while True:
            why = None
            try:
                brokers, entry = self.any_connection().metadata(topic, allow_auto_topic_creation=True)
            except BrokerUnavailable as exc:
                self.drop()
                brokers, entry, why = {}, None, str(exc)
            if entry is not None and entry.error_code == 0 and entry.partitions:
                self._brokers.update(brokers)
                leaders = {p.partition_index: p.leader_id for p in entry.partitions}
                if all(leader in brokers for leader in leaders.values()):
                    self._topics[topic] = (len(leaders), leaders)
                    return self._topics[topic]
                why = f"topic {topic} has partitions without a leader"
            elif entry is not None and not retriable(entry.error_code):
                raise SinkError(f"Metadata for topic {topic} failed: {refused(entry.error_code, self.options, topic)}")
            why = why or f"Topic {topic} not present in metadata"
            if time.monotonic() > deadline:
                raise SinkError(f"{why} after {self.options.delivery_timeout_ms} ms (kafka.delivery.timeout.ms); "
                                "create the topic or enable auto.create.topics.enable on the brokers")
            time.sleep(RETRY_BACKOFF_S)

    def knows(self, topic: str) -> bool:
        """True when ``topic`` answers from the cache, without a Metadata request."""
        return topic in self._topics

    def forget(self, topic: str) -> None:
        self._topics.pop(topic, None)

    def coordinator(self, transactional_id: str, deadline: float) -> BrokerConnection:
        """The transaction coordinator of ``transactional_id`` (FindCoordinator key type 1), retried until
        ``deadline``; remembered until a ``drop`` (callers drop after NOT_COORDINATOR or an I/O failure)."""
        known = self._coordinators.get(transactional_id)
        if known is not None and known in self._brokers:
            return self.node(known)
        while True:
            try:
                code, node_id, host, port = self.any_connection().find_coordinator(
                    transactional_id, COORDINATOR_TRANSACTION)
            except BrokerUnavailable as exc:
                self.drop()
                code, why = -1, str(exc)
            else:
                why = (f"FindCoordinator for transactional id {transactional_id}: {refused(code, self.options)}"
                       if code else "")
            if code == 0:
                self._brokers[node_id] = (host, port)
                self._coordinators[transactional_id] = node_id
                return self.node(node_id)
            if code != -1 and not retriable(code):
                raise SinkError(why)
            if time.monotonic() > deadline:
                raise SinkError(f"{why}; gave up after {self.options.delivery_timeout_ms} ms")
            time.sleep(RETRY_BACKOFF_S)

    def find_coordinators(self, transactional_ids: list[str]) -> None:
        """Look up the coordinators of ``transactional_ids`` not known yet in one FindCoordinator request (v4+),
        remembering those answered; the rest are left to ``coordinator``'s retries."""
        unknown = [t for t in dict.fromkeys(transactional_ids)
                   if self._coordinators.get(t) not in self._brokers]
        if not unknown:
            return
        try:
            answers = self.any_connection().find_coordinators(unknown, COORDINATOR_TRANSACTION)
        except BrokerUnavailable:
            self.drop()
            return
        for transactional_id, (code, node_id, host, port) in answers.items():
            if code == 0:
                self._brokers[node_id] = (host, port)
                self._coordinators[transactional_id] = node_id

    def learn_coordinator(self, other: "SinkCluster", transactional_id: str) -> None:
        """Take ``other``'s answer to FindCoordinator for ``transactional_id``, if it has one (a task's setup thread
        found it), so the next ``coordinator`` call needs no request."""
        node_id = other._coordinators.get(transactional_id)
        if node_id is not None and node_id in other._brokers:
            self._brokers.setdefault(node_id, other._brokers[node_id])
            self._coordinators[transactional_id] = node_id

    def _connect(self, host: str, port: int) -> BrokerConnection:
        """An idle connection of an earlier cluster with the same settings (``release``), else a new one."""
        from connector.wire import IDLE_CONNECTIONS, ConnectionPool
        kept = IDLE_CONNECTIONS.take(ConnectionPool.key(f"{host}:{port}", self._client_id, self.options.client_kwargs))
        if kept is not None:
            return kept
        return BrokerConnection(host, port, timeout_s=self._timeout_s, client_id=self._client_id,
                                ssl_context=self._ssl, sasl=self._sasl)
