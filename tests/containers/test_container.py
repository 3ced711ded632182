"""PylogContainer as a user of testcontainers' KafkaContainer uses it: clients on the host through the
published port, other containers through the internal listener, each told the address it can reach."""
from __future__ import annotations

import shutil
import subprocess
import textwrap
import time

import pytest
from confluent_kafka import Consumer
from kafka import KafkaAdminClient, KafkaProducer
from kafka.errors import MessageSizeTooLargeError

from broker_sim.local.zookeeper import free_ports
from broker_sim.testing.containers import IMAGE, PylogContainer
from broker_sim.testing.requirements import missing

pytestmark = pytest.mark.containers


def test_host_clients_use_the_published_port_and_are_told_it(pylog_container, pylog_topic):
    """kafka-python produces, librdkafka consumes, kcat lists: all through 127.0.0.1:<published port>, which
    is also what Metadata advertises to them (not the container's own address)."""
    bootstrap = pylog_container.get_bootstrap_server()
    assert bootstrap.startswith("127.0.0.1:")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        [broker] = admin.describe_cluster()["brokers"]
        assert f"{broker['host']}:{broker['port']}" == bootstrap
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for i in range(20):
        producer.send(pylog_topic, f"m{i}".encode())
    producer.flush(30)
    producer.close()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": pylog_topic, "auto.offset.reset": "earliest"})
    consumer.subscribe([pylog_topic])
    got, deadline = [], time.monotonic() + 30
    while len(got) < 20 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got.append(message.value())
    consumer.close()
    assert got == [f"m{i}".encode() for i in range(20)]
    kcat = shutil.which("kcat")
    if kcat is None:   # ci/setup.sh installs it: a skip on a laptop without it, a failure under CI=true
        missing("kcat", "kcat is not installed (apt-get install kcat)")
    listed = subprocess.run([kcat, "-b", bootstrap, "-L", "-t", pylog_topic], capture_output=True, text=True,
                            timeout=60, check=True).stdout
    assert f"broker 0 at {bootstrap}" in listed


def test_the_container_factory_pins_the_host_ports_and_takes_broker_configs(pylog_container_factory):
    """pylog_container_factory(config=..., port=..., schema_registry_port=..., **configs): the broker is
    published on, and advertises, the port asked for, its Schema Registry answers on the other port asked for,
    and it runs with the configs given (auto-created topics get 3 partitions; a record over message.max.bytes
    is refused by the broker)."""
    import json
    import urllib.request

    port, registry_port = free_ports(2)
    container = pylog_container_factory(config={"num.partitions": 3}, port=port, message_max_bytes=2000,
                                        schema_registry_port=registry_port)
    bootstrap = container.get_bootstrap_server()
    assert bootstrap == f"127.0.0.1:{port}"
    assert container.get_schema_registry_url() == f"http://127.0.0.1:{registry_port}"
    with urllib.request.urlopen(f"http://127.0.0.1:{registry_port}/subjects", timeout=30) as answer:
        assert (answer.status, json.loads(answer.read())) == (200, [])
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=0)
    try:
        producer.send("factory-auto-created", b"x").get(timeout=30)
        with pytest.raises(MessageSizeTooLargeError):
            producer.send("factory-auto-created", b"y" * 5000).get(timeout=30)
    finally:
        producer.close()
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        [broker] = admin.describe_cluster()["brokers"]
        assert broker["port"] == port
        [topic] = admin.describe_topics(["factory-auto-created"])
        assert len(topic["partitions"]) == 3
    finally:
        admin.close()


def test_a_container_on_the_same_network_uses_the_internal_listener(tmp_path):
    """A client container on the broker's network bootstraps from get_internal_bootstrap_server() and is told
    <alias>:9093 — the host address would not work from inside the network."""
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.network import Network

    with Network() as network:
        with PylogContainer(group_initial_rebalance_delay_ms=0).with_network(network) as broker:
            script = textwrap.dedent(f"""
                from kafka import KafkaAdminClient, KafkaProducer
                admin = KafkaAdminClient(bootstrap_servers="{broker.get_internal_bootstrap_server()}")
                print("BROKERS", [(b["host"], b["port"]) for b in admin.describe_cluster()["brokers"]])
                producer = KafkaProducer(bootstrap_servers="{broker.get_internal_bootstrap_server()}", acks="all")
                producer.send("from-inside", b"hello from the network").get(timeout=30)
                producer.close()
                print("SENT")
            """)
            client = (DockerContainer(IMAGE).with_network(network)
                      .with_kwargs(entrypoint=["python3", "-c", script]))
            client.start()
            try:
                result = client.get_wrapped_container().wait(timeout=120)
                logs = client.get_wrapped_container().logs().decode(errors="replace")
            finally:
                client.stop()
            assert result["StatusCode"] == 0, logs
            assert f"BROKERS [('{broker.alias}', 9093)]" in logs and "SENT" in logs, logs
            consumer = Consumer({"bootstrap.servers": broker.get_bootstrap_server(), "group.id": "inside",
                                 "auto.offset.reset": "earliest"})
            consumer.subscribe(["from-inside"])
            deadline, value = time.monotonic() + 30, None
            while value is None and time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is not None and message.error() is None:
                    value = message.value()
            consumer.close()
            assert value == b"hello from the network"


def test_the_image_is_healthy_by_a_real_api_versions_request(pylog_container):
    container = pylog_container.get_wrapped_container()
    deadline = time.monotonic() + 60
    while True:
        container.reload()
        status = container.attrs["State"].get("Health", {}).get("Status")
        if status == "healthy":
            break
        assert status != "unhealthy", container.attrs["State"]["Health"]
        assert time.monotonic() < deadline, f"health {status} after 60 s"
        time.sleep(1)
    code, output = pylog_container.exec_root(["id", "-un"])
    assert pylog_container.get_wrapped_container().attrs["Config"]["User"] == "pylog"


def test_the_containers_schema_registry_serves_the_host_through_its_published_port(pylog_container, pylog_topic):
    """get_schema_registry_url() reaches the broker's registry in the container; AvroSerializer registers there
    and a record produced through the published Kafka port comes back deserialized with the registry's id."""
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    url = pylog_container.get_schema_registry_url()
    assert url.startswith("http://127.0.0.1:")
    registry = SchemaRegistryClient({"url": url})
    schema = ('{"type":"record","name":"Ping","namespace":"pylog.container",'
              '"fields":[{"name":"n","type":"long"}]}')
    context = SerializationContext(pylog_topic, MessageField.VALUE)
    value = AvroSerializer(registry, schema)({"n": 7}, context)
    registered = registry.get_latest_version(f"{pylog_topic}-value")
    assert value[:5] == b"\x00" + registered.schema_id.to_bytes(4, "big")
    bootstrap = pylog_container.get_bootstrap_server()
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(pylog_topic, value=value)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{pylog_topic}-sr",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([pylog_topic])
    message, deadline = None, time.monotonic() + 30
    while message is None and time.monotonic() < deadline:
        polled = consumer.poll(0.5)
        if polled is not None and polled.error() is None:
            message = polled
    consumer.close()
    assert message is not None, "the record did not come back"
    assert AvroDeserializer(SchemaRegistryClient({"url": url}))(message.value(), context) == {"n": 7}
