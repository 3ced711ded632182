"""Inter-broker identity: only a client id carrying this cluster's proof marks a connection as a broker's."""
from __future__ import annotations

import asyncio

from kafka.protocol.metadata import ApiVersionsRequest

from broker_sim.config import BrokerConfig
from broker_sim.server.dispatch import Dispatcher
from broker_sim.server.handlers import build_handlers
from broker_sim.server.inter_broker import InterBrokerIdentity


class _Connection:
    """The attributes the dispatcher reads of a KafkaConnection (on a listener without SASL)."""

    def __init__(self, listener: str = "PLAINTEXT") -> None:
        self.listener = listener
        self.inter_broker = False
        self.authenticator = None
        self.peer = "127.0.0.1:1"


class _Broker:
    """Enough of a Broker for build_handlers (handlers size their caches from the config at construction);
    ApiVersions touches none of the rest."""

    config = BrokerConfig({})

    def __getattr__(self, name):
        return None


def _api_versions(client_id: str) -> bytes:
    request = ApiVersionsRequest[3](client_software_name="t", client_software_version="1")
    request.with_header(correlation_id=1, client_id=client_id)
    return bytes(request.encode(header=True))


def _handle(dispatcher: Dispatcher, connection: _Connection, client_id: str) -> None:
    asyncio.run(dispatcher.handle(connection, _api_versions(client_id)))


def test_proof_is_recognised_and_a_wrong_or_missing_one_is_not():
    identity = InterBrokerIdentity("secret-a")
    assert identity.proves(identity.client_id("broker-1-fetcher-0"))
    assert not identity.proves("broker-1-fetcher-0")
    assert not identity.proves(None)
    assert not identity.proves(InterBrokerIdentity("secret-b").client_id("broker-1-fetcher-0"))
    assert not identity.proves(identity.client_id("x")[:-1])


def test_dispatcher_marks_only_connections_that_present_the_proof():
    identity = InterBrokerIdentity("secret-a")
    dispatcher = Dispatcher(build_handlers(_Broker()), identity)
    client, impostor, broker = _Connection(), _Connection(), _Connection()
    _handle(dispatcher, client, "kafka-python-producer-1")
    _handle(dispatcher, impostor, InterBrokerIdentity("guessed").client_id("broker-9-fetcher-1"))
    _handle(dispatcher, broker, identity.client_id("broker-1-fetcher-0"))
    assert (client.inter_broker, impostor.inter_broker, broker.inter_broker) == (False, False, True)
    _handle(dispatcher, broker, "anything later")  # the connection stays a broker's
    assert broker.inter_broker


def test_a_single_node_has_no_inter_broker_connections():
    dispatcher = Dispatcher(build_handlers(_Broker()))
    connection = _Connection()
    _handle(dispatcher, connection, InterBrokerIdentity("secret-a").client_id("broker-1-fetcher-0"))
    assert not connection.inter_broker


def test_the_proof_counts_only_on_the_inter_broker_listener():
    """A client on another listener (say the SASL_SSL one clients use) that learnt the proof — it travels in
    the clear on a PLAINTEXT inter-broker listener — does not become a broker there.
    Mutation: the listener check removed -> the client's connection is marked inter-broker."""
    identity = InterBrokerIdentity("secret-a")
    dispatcher = Dispatcher(build_handlers(_Broker()), identity, inter_broker_listener="INTERNAL")
    client, broker = _Connection("EXTERNAL"), _Connection("INTERNAL")
    _handle(dispatcher, client, identity.client_id("broker-1-fetcher-0"))
    _handle(dispatcher, broker, identity.client_id("broker-1-fetcher-0"))
    assert (client.inter_broker, broker.inter_broker) == (False, True)
