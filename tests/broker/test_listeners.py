"""Listeners: several sockets per broker, each answering clients with the addresses of its own listener.

What a broker in a container needs (the host reaches it at 127.0.0.1:<mapped port>, its peers at
pylog-1:9093), and what Kafka's ``listeners`` / ``advertised.listeners`` /
``listener.security.protocol.map`` / ``inter.broker.listener.name`` do.
"""
from __future__ import annotations

import json
import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient as ConfluentAdmin
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic

from broker_sim.config import BrokerConfig, ConfigError
from broker_sim.controller.cluster_state import BrokerEndpoint
from broker_sim.controller.zk_layout import decode_broker, encode_broker
from broker_sim.server.broker import Broker
from broker_sim.server.cli import main as broker_main
from broker_sim.server.listeners import configure
from broker_sim.testing.requirements import require_zookeeper

TWO = {"listeners": "PLAINTEXT://127.0.0.1:0,BROKER://127.0.0.1:0",
       "advertised.listeners": "PLAINTEXT://127.0.0.1:0,BROKER://localhost:0",
       "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,BROKER:PLAINTEXT"}


def _listeners(**configs):
    return configure(BrokerConfig(configs), host="127.0.0.1", port=9092, advertised_host=None)


@pytest.mark.parametrize("configs, names", [
    ({"listeners": "PLAINTEXT://127.0.0.1"}, ["listeners", "PLAINTEXT://127.0.0.1", "NAME://host:port"]),
    ({"listeners": "PLAINTEXT://127.0.0.1:70000"}, ["listeners", "70000"]),
    ({"listeners": "A://127.0.0.1:1,A://127.0.0.1:2",
      "listener.security.protocol.map": "A:PLAINTEXT"}, ["listeners", "A", "more than once"]),
    ({"listeners": "A://127.0.0.1:0"}, ["listener.security.protocol.map", "A"]),
    ({"listener.security.protocol.map": "PLAINTEXT:TLS"}, ["listener.security.protocol.map", "PLAINTEXT:TLS"]),
    ({"advertised.listeners": "OTHER://h:1"}, ["advertised.listeners", "OTHER"]),
    ({"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"}, ["advertised.listeners", "0.0.0.0"]),
    ({"listeners": "A://127.0.0.1:9000,B://127.0.0.1:9000",
      "listener.security.protocol.map": "A:PLAINTEXT,B:PLAINTEXT"}, ["listeners", "one port"]),
    ({"listeners": "A://127.0.0.1:0,B://127.0.0.1:0",
      "listener.security.protocol.map": "A:PLAINTEXT,B:PLAINTEXT"}, ["inter.broker.listener.name", "PLAINTEXT"]),
    ({"inter.broker.listener.name": "NOPE"}, ["inter.broker.listener.name", "NOPE"]),
    ({"listeners": "PLAINTEXT://127.0.0.1:0,B://127.0.0.1:0", "advertised.listeners": "PLAINTEXT://h:1",
      "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,B:PLAINTEXT", "inter.broker.listener.name": "B",
      "zookeeper.connect": "127.0.0.1:2181"}, ["inter.broker.listener.name", "B", "advertised"]),
])
def test_a_bad_listener_config_is_refused_naming_the_config_and_value(configs, names):
    with pytest.raises(ConfigError) as raised:
        _listeners(**configs)
    for name in names:
        assert name in str(raised.value)


def test_a_sasl_ssl_listener_without_a_keystore_is_refused_at_start_not_silently_plaintext(tmp_path):
    from broker_sim.server.broker import Broker
    with pytest.raises(ConfigError, match="ssl.keystore.location"):
        Broker(tmp_path, config={"listeners": "SASL_SSL://127.0.0.1:0"})


def test_without_listeners_host_port_and_advertised_host_make_one_plaintext_listener():
    [listener] = configure(BrokerConfig({}), host="0.0.0.0", port=9092, advertised_host="pylog-0")
    assert (listener.name, listener.protocol, listener.host, listener.port) == ("PLAINTEXT", "PLAINTEXT",
                                                                                 "0.0.0.0", 9092)
    assert listener.advertised == ("pylog-0", 9092)


def test_a_listener_left_out_of_advertised_listeners_is_bound_but_not_published():
    listeners = _listeners(**{"listeners": "PLAINTEXT://127.0.0.1:0,REPL://[::1]:0",
                              "advertised.listeners": "PLAINTEXT://example:9092",
                              "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,REPL:PLAINTEXT"})
    assert [(l.name, l.host, l.advertised) for l in listeners] == [("PLAINTEXT", "127.0.0.1", ("example", 9092)),
                                                                    ("REPL", "::1", None)]


def test_registration_carries_every_listener_and_decodes_back():
    endpoint = BrokerEndpoint(3, "pylog-3", 9093, "r1", (("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 32768),
                                                         ("BROKER", "PLAINTEXT", "pylog-3", 9093)))
    payload = json.loads(encode_broker(endpoint, timestamp_ms=1))
    assert payload["endpoints"] == ["PLAINTEXT://127.0.0.1:32768", "BROKER://pylog-3:9093"]
    assert payload["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT", "BROKER": "PLAINTEXT"}
    assert (payload["host"], payload["port"]) == ("pylog-3", 9093)
    decoded = decode_broker(3, encode_broker(endpoint))
    assert decoded == endpoint
    assert decoded.on("PLAINTEXT").port == 32768 and decoded.on("BROKER").host == "pylog-3"
    assert decoded.on("SSL") is None


def test_each_client_is_answered_with_the_addresses_of_the_listener_it_came_in_on():
    """The second listener advertises 'localhost': a client bootstrapped there must be told 'localhost'
    (Metadata, DescribeCluster, FindCoordinator), one on the first listener '127.0.0.1'.

    Mutation: answering every listener with the first listener's address -> the BROKER admin saw 127.0.0.1.
    """
    topic = f"listeners-{uuid.uuid4().hex[:8]}"
    with Broker(config=dict(TWO, **{"group.initial.rebalance.delay.ms": "0"})) as broker:
        plain, internal = broker.listeners
        assert plain.port != internal.port and internal.advertised == ("localhost", internal.port)
        for listener, host in (("PLAINTEXT", "127.0.0.1"), ("BROKER", "localhost")):
            bootstrap = broker.bootstrap_servers_for(listener)
            admin = KafkaAdminClient(bootstrap_servers=bootstrap)
            try:
                [described] = admin.describe_cluster()["brokers"]
                assert (described["host"], described["port"]) == (host, int(bootstrap.rsplit(":", 1)[1]))
                group = f"g-{listener}"
                producer = KafkaProducer(bootstrap_servers=bootstrap)
                producer.send(topic, f"via {listener}".encode()).get(timeout=30)
                producer.close()
                consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                         auto_offset_reset="earliest", consumer_timeout_ms=10000)
                values = [m.value for m in consumer]
                consumer.commit()
                consumer.close()
                assert f"via {listener}".encode() in values
                # FindCoordinator, through librdkafka
                rdkafka = ConfluentAdmin({"bootstrap.servers": bootstrap})
                described = rdkafka.describe_consumer_groups([group])
                coordinator = described[group].result(timeout=30).coordinator
                assert (coordinator.host, coordinator.port) == (host, int(bootstrap.rsplit(":", 1)[1]))
            finally:
                admin.close()
        # the connections were accepted on the listener each client used
        assert {c.listener for c in broker.connections} <= {"PLAINTEXT", "BROKER"}


def test_the_cli_refuses_a_bad_listener_before_listening(tmp_path, capsys):
    code = broker_main(["--data-dir", str(tmp_path), "--config", "listeners=PLAINTEXT://127.0.0.1"])
    assert code == 2
    assert "listeners" in capsys.readouterr().err


def test_a_cluster_replicates_over_the_inter_broker_listener_and_publishes_each_listener(tmp_path):
    """Two brokers on a real ZooKeeper, each with a client listener and an inter-broker one.

    Followers must connect to the leader's BROKER listener (registered in ZooKeeper), clients on either
    listener are told that listener's addresses of *both* brokers.
    Mutation: followers resolving the leader's PLAINTEXT endpoint -> no inter-broker connection on BROKER.
    """
    from broker_sim.local.zookeeper import ZooKeeperServer
    require_zookeeper()
    fast = {"zookeeper.session.timeout.ms": "3000", "replica.fetch.wait.max.ms": "200",
            "offsets.topic.num.partitions": "1", "transaction.state.log.num.partitions": "1",
            "controlled.shutdown.timeout.ms": "5000", "inter.broker.listener.name": "BROKER"}
    with ZooKeeperServer(tmp_path / "zk", tick_ms=500).start(timeout=60) as zk:
        brokers = []
        try:
            for broker_id in (1, 2):
                brokers.append(Broker(tmp_path / f"b{broker_id}", broker_id=broker_id,
                                      config=dict(TWO, **fast, **{"zookeeper.connect": zk.connect_string})).start())
            deadline = time.monotonic() + 30
            while any(len(b.metadata.brokers) < 2 for b in brokers):
                assert time.monotonic() < deadline, "the brokers did not see each other"
                time.sleep(0.05)
            registered = brokers[0].metadata.brokers[2]
            assert registered.on("BROKER").host == "localhost"
            assert (registered.host, registered.port) == ("localhost", brokers[1].listeners[1].port)
            admin = KafkaAdminClient(bootstrap_servers=brokers[0].bootstrap_servers_for("BROKER"))
            try:
                assert sorted((b["host"], b["port"]) for b in admin.describe_cluster()["brokers"]) == \
                    sorted(("localhost", b.listeners[1].port) for b in brokers)
                admin.create_topics([NewTopic("replicated", 1, 2)])
            finally:
                admin.close()
            admin = KafkaAdminClient(bootstrap_servers=brokers[1].bootstrap_servers)
            try:
                assert sorted((b["host"], b["port"]) for b in admin.describe_cluster()["brokers"]) == \
                    sorted(("127.0.0.1", b.listeners[0].port) for b in brokers)
            finally:
                admin.close()
            producer = KafkaProducer(bootstrap_servers=brokers[0].bootstrap_servers, acks="all")
            for i in range(20):
                producer.send("replicated", str(i).encode())
            producer.flush(timeout=60)
            producer.close()
            consumer = KafkaConsumer("replicated", bootstrap_servers=brokers[1].bootstrap_servers,
                                     auto_offset_reset="earliest", consumer_timeout_ms=10000)
            assert [m.value for m in consumer][:20] == [str(i).encode() for i in range(20)]
            consumer.close()
            inter = [(b.broker_id, c.listener) for b in brokers for c in b.connections if c.inter_broker]
            assert inter and all(listener == "BROKER" for _, listener in inter), inter
        finally:
            for broker in reversed(brokers):
                broker.stop()
