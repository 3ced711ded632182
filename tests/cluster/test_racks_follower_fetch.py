"""Racks and follower fetching (KIP-392) on a 3-broker cluster, broker i in rack RACK<i>, with
replica.selector.class=RackAwareReplicaSelector: racks in Metadata, DescribeCluster and DescribeConfigs, and a
consumer with client.rack served by the follower in its rack, as librdkafka's test 0101-fetch-from-follower
checks it (its statistics' rxbytes) and as the brokers' own per-replica bytes-out counters (/metrics) see it."""
from __future__ import annotations

import json
import time
import urllib.request

import pytest
from cluster_helpers import create_topic, produce, start_cluster
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

pytestmark = pytest.mark.cluster

RACKS = ["RACK0", "RACK1", "RACK2"]
MESSAGES, MESSAGE_SIZE = 1000, 100
FOLLOWER_WAIT_MS = 2900


@pytest.fixture(scope="module")
def rack_cluster(tmp_path_factory):
    running = start_cluster(tmp_path_factory.mktemp("racks"), racks=RACKS, metrics=True, configs={
        "replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector",
        # followers long-poll nearly replica.lag.time.max.ms (3 s): a follower that learned the leader's high
        # watermark only when its fetch times out would serve new records ~2.9 s late
        "replica.fetch.wait.max.ms": str(FOLLOWER_WAIT_MS)})
    try:
        yield running
    finally:
        running.stop_all()


def bytes_out(cluster, broker: int, topic: str, partition: int) -> float:
    """Bytes broker ``broker`` served consumers from its replica of topic-partition (its /metrics)."""
    text = urllib.request.urlopen(cluster.metrics_url(broker), timeout=10).read().decode()
    wanted = f'kafka_server_brokertopicmetrics_bytesout_total{{partition="{partition}",topic="{topic}"}}'
    for line in text.splitlines():
        if line.startswith(wanted):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def payloads() -> list[bytes]:
    # 0101's test_produce_msgs_easy_size: fixed-size values carrying "msg=<n>\n"
    return [f"testid=0101 partition=0 msg={n}\n".encode().ljust(MESSAGE_SIZE, b"x") for n in range(MESSAGES)]


def test_racks_are_registered_and_answered_everywhere(rack_cluster):
    from kafka import KafkaAdminClient

    cluster = rack_cluster
    confluent = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    described = confluent.describe_cluster().result(30)
    assert {node.id: node.rack for node in described.nodes} == {0: "RACK0", 1: "RACK1", 2: "RACK2"}
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=30000)
    try:
        admin.list_topics()  # a Metadata round trip fills the client's cluster view
        assert {b.node_id: b.rack for b in admin._client.cluster.brokers()} == {0: "RACK0", 1: "RACK1", 2: "RACK2"}
    finally:
        admin.close()


def leader_and_replicas(cluster, topic):
    metadata = AdminClient({"bootstrap.servers": cluster.bootstrap_servers}).list_topics(topic, timeout=30)
    partition = metadata.topics[topic].partitions[0]
    return partition.leader, list(partition.replicas)


def broker_racks(cluster, replicas) -> set[str]:
    """0101's get_broker_rack_count: broker.rack as DescribeConfigs on each BROKER resource answers it."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    racks = set()
    for broker in replicas:
        resource = ConfigResource(ResourceType.BROKER, str(broker))
        entries = admin.describe_configs([resource])[resource].result(30)
        racks.add(entries["broker.rack"].value)
    return racks


def test_librdkafka_0101_fetch_from_follower(rack_cluster, topic_name):
    cluster = rack_cluster
    create_topic(cluster.bootstrap_servers, topic_name, partitions=1, replication_factor=3)
    cluster.wait_for_full_isr(topic_name, 1, timeout_s=30)
    results = produce(cluster.bootstrap_servers, topic_name, payloads(), acks="all")
    assert all(err is None for err, _ in results)
    leader, replicas = leader_and_replicas(cluster, topic_name)
    assert len(replicas) == 3
    assert broker_racks(cluster, replicas) == set(RACKS)
    client_rack_id = next(r for r in replicas if r != leader)
    before = {b: bytes_out(cluster, b, topic_name, 0) for b in replicas}
    stats: list[dict] = []
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": topic_name,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "statistics.interval.ms": 1000, "stats_cb": lambda text: stats.append(json.loads(text)),
                         "client.rack": f"RACK{client_rack_id}"})
    consumed = []
    try:
        consumer.subscribe([topic_name])
        deadline = time.monotonic() + 60
        while len(consumed) < MESSAGES and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None:
                continue
            assert message.error() is None, message.error()
            assert len(message.value()) == MESSAGE_SIZE
            consumed.append(int(message.value().split(b"msg=")[1].split(b"\n")[0]))
        assert consumed == list(range(MESSAGES)), "messages missing or consumed out of order"
        stats.clear()
        while not stats and time.monotonic() < deadline:
            consumer.poll(0.5)
        assert stats, "no statistics event within the deadline"
    finally:
        consumer.close()
    rxbytes = {int(name.rsplit("/", 1)[1]): b["rxbytes"] for name, b in stats[-1]["brokers"].items()
               if "/" in name and name.rsplit("/", 1)[1].isdigit()}
    assert all(rxbytes.get(r, 0) < rxbytes[client_rack_id] for r in replicas if r != client_rack_id), rxbytes
    assert rxbytes[client_rack_id] > MESSAGES * MESSAGE_SIZE, rxbytes
    # the brokers' side: only the follower in the consumer's rack served it records
    served = {b: bytes_out(cluster, b, topic_name, 0) - before[b] for b in replicas}
    assert served[client_rack_id] >= MESSAGES * MESSAGE_SIZE, served
    assert all(served[b] == 0 for b in replicas if b != client_rack_id), served


def test_kafka_python_client_rack_reads_from_its_rack_and_sees_new_records(rack_cluster, topic_name):
    """kafka-python's client_rack: the follower in its rack serves it, including records produced while it
    long-polls there, promptly: the leader answers a follower's fetch as soon as the high watermark moved past
    the one it last sent it, so the follower's high watermark follows the leader's."""
    from kafka import KafkaConsumer, TopicPartition

    cluster = rack_cluster
    create_topic(cluster.bootstrap_servers, topic_name, partitions=1, replication_factor=3)
    cluster.wait_for_full_isr(topic_name, 1, timeout_s=30)
    first = [f"first-{n}".encode() for n in range(200)]
    assert all(err is None for err, _ in produce(cluster.bootstrap_servers, topic_name, first, acks="all"))
    leader, replicas = leader_and_replicas(cluster, topic_name)
    rack_follower = next(r for r in replicas if r != leader)
    before = {b: bytes_out(cluster, b, topic_name, 0) for b in replicas}
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, client_rack=f"RACK{rack_follower}",
                             enable_auto_commit=False, auto_offset_reset="earliest", fetch_max_wait_ms=200,
                             request_timeout_ms=30000)
    values = []
    try:
        consumer.assign([TopicPartition(topic_name, 0)])
        deadline = time.monotonic() + 60
        while len(values) < len(first) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                values += [r.value for r in records]
        latencies = []
        for n in range(5):  # one record at a time: how soon after its acks=all the rack's follower serves it
            record = f"second-{n}".encode()
            assert produce(cluster.bootstrap_servers, topic_name, [record], acks="all")[0][0] is None
            acked = time.monotonic()
            while record not in values and time.monotonic() < deadline:
                for records in consumer.poll(timeout_ms=100).values():
                    values += [r.value for r in records]
            latencies.append(time.monotonic() - acked)
    finally:
        consumer.close()
    second = [f"second-{n}".encode() for n in range(5)]
    assert values == first + second
    assert sorted(latencies)[2] < FOLLOWER_WAIT_MS / 2000, f"follower served new records after {latencies} s"
    served = {b: bytes_out(cluster, b, topic_name, 0) - before[b] for b in replicas}
    assert served[rack_follower] > 0 and all(served[b] == 0 for b in replicas if b != rack_follower), served
