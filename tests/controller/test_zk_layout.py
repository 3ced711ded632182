"""zk_layout: every payload round-trips and matches schemas/zookeeper-layout.json (Kafka's own JSON)."""
from __future__ import annotations

import json
import uuid
from pathlib import Path

import jsonschema
import pytest

from broker_sim.controller import zk_layout as L
from broker_sim.controller.cluster_state import NO_LEADER, BrokerEndpoint, PartitionState

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "broker_sim" / "schemas" / "zookeeper-layout.json"


@pytest.fixture(scope="module")
def znodes():
    doc = json.loads(SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(doc)
    return {z["name"]: z for z in doc["znodes"]}


def check(znodes, name, payload: bytes):
    schema = znodes[name]["payload"]
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(json.loads(payload), schema)


def test_every_znode_documents_path_ephemeral_and_writer(znodes):
    for z in znodes.values():
        assert z["path"].startswith("/") and isinstance(z["ephemeral"], bool) and z["writer"]
    assert znodes["broker"]["ephemeral"] and znodes["controller"]["ephemeral"]
    assert not znodes["partition_state"]["ephemeral"]
    assert "ControlledShutdown RPC" in znodes["controlled_shutdown"]["writer"]


def test_paths_are_kafkas():
    assert L.broker_path(3) == "/brokers/ids/3"
    assert L.partition_state_path("t", 2) == "/brokers/topics/t/partitions/2/state"
    assert L.topic_config_path("t") == "/config/topics/t"
    assert L.delete_topic_path("t") == "/admin/delete_topics/t"
    assert L.isr_change_prefix_path() == "/isr_change_notification/isr_change_"
    assert (L.CONTROLLER, L.CONTROLLER_EPOCH, L.PRODUCER_ID_BLOCK, L.CLUSTER_ID) == \
        ("/controller", "/controller_epoch", "/latest_producer_id_block", "/cluster/id")


def test_cluster_id(znodes):
    data = L.encode_cluster_id("abcDEF_12-x")
    check(znodes, "cluster_id", data)
    assert json.loads(data) == {"version": "1", "id": "abcDEF_12-x"}
    assert L.decode_cluster_id(data) == "abcDEF_12-x"


def test_broker_registration(znodes):
    endpoint = BrokerEndpoint(2, "127.0.0.1", 19092, rack=None)
    data = L.encode_broker(endpoint, timestamp_ms=1700000000000)
    check(znodes, "broker", data)
    obj = json.loads(data)
    assert obj["endpoints"] == ["PLAINTEXT://127.0.0.1:19092"] and obj["timestamp"] == "1700000000000"
    assert obj["version"] == 5 and obj["jmx_port"] == -1
    # an endpoint without a listener list is registered as one PLAINTEXT listener at host:port
    assert L.decode_broker(2, data) == BrokerEndpoint(2, "127.0.0.1", 19092, None,
                                                      (("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 19092),))
    racked = BrokerEndpoint(4, "h", 1, rack="r1", listeners=(("PLAINTEXT", "PLAINTEXT", "h", 1),))
    assert L.decode_broker(4, L.encode_broker(racked)) == racked


def test_broker_registration_written_by_kafka_with_named_listeners():
    kafka = json.dumps({"version": 5, "host": None, "port": -1, "jmx_port": 9999, "timestamp": "1",
                        "endpoints": ["CLIENT://h1:9092", "REPLICATION://h1:9093"],
                        "listener_security_protocol_map": {"CLIENT": "PLAINTEXT", "REPLICATION": "SSL"},
                        "rack": "dc1", "features": {}}).encode()
    decoded = L.decode_broker(7, kafka)
    assert decoded == BrokerEndpoint(7, "h1", 9092, "dc1", (("CLIENT", "PLAINTEXT", "h1", 9092),
                                                            ("REPLICATION", "SSL", "h1", 9093)))
    assert decoded.on("REPLICATION").port == 9093 and decoded.on("OTHER") is None


def test_controller_and_epoch(znodes):
    data = L.encode_controller(5, timestamp_ms=12)
    check(znodes, "controller", data)
    assert json.loads(data) == {"version": 2, "brokerid": 5, "timestamp": "12", "kraftControllerEpoch": -1}
    assert L.decode_controller(data) == 5
    epoch = L.encode_controller_epoch(17)
    assert epoch == b"17"
    check(znodes, "controller_epoch", epoch)
    assert L.decode_controller_epoch(epoch) == 17
    with pytest.raises(L.LayoutError, match="controller_epoch"):
        L.decode_controller_epoch(b"x")


def test_topic_assignment(znodes):
    topic_id = uuid.uuid4()
    data = L.encode_topic_assignment(topic_id, [[1, 2, 3], [2, 3, 1]])
    check(znodes, "topic_assignment", data)
    obj = json.loads(data)
    assert obj["partitions"] == {"0": [1, 2, 3], "1": [2, 3, 1]} and obj["version"] == 3
    assert "=" not in obj["topic_id"] and len(obj["topic_id"]) == 22
    decoded = L.decode_topic_assignment("t", data)
    assert decoded == L.TopicAssignment(topic_id, ((1, 2, 3), (2, 3, 1)))


def test_topic_id_is_kafkas_uuid_string():
    # Kafka's Uuid.toString of the UUID with all bits zero but the last byte 1
    assert L.encode_topic_id(uuid.UUID(int=1)) == "AAAAAAAAAAAAAAAAAAAAAQ"
    assert L.decode_topic_id("AAAAAAAAAAAAAAAAAAAAAQ") == uuid.UUID(int=1)


def test_topic_assignment_with_a_gap_is_refused():
    data = json.dumps({"version": 3, "partitions": {"0": [1], "2": [1]}}).encode()
    with pytest.raises(L.LayoutError, match="/brokers/topics/t"):
        L.decode_topic_assignment("t", data)


def test_partition_state(znodes):
    state = PartitionState(leader=2, leader_epoch=4, isr=(2, 1), controller_epoch=3, zk_version=9)
    data = L.encode_partition_state(state)
    check(znodes, "partition_state", data)
    assert json.loads(data) == {"controller_epoch": 3, "leader": 2, "version": 1, "leader_epoch": 4, "isr": [2, 1]}
    assert L.decode_partition_state(data, 9) == state
    offline = PartitionState(NO_LEADER, 5, (1,), 3)
    check(znodes, "partition_state", L.encode_partition_state(offline))
    assert L.decode_partition_state(L.encode_partition_state(offline), -1) == offline


def test_topic_config(znodes):
    data = L.encode_topic_config({"retention.ms": "100", "cleanup.policy": "compact"})
    check(znodes, "topic_config", data)
    assert L.decode_topic_config(data) == {"retention.ms": "100", "cleanup.policy": "compact"}
    assert L.decode_topic_config(b"") == {}


def test_isr_change(znodes):
    data = L.encode_isr_change([("a", 1), ("b", 0), ("a", 1)])
    check(znodes, "isr_change", data)
    assert json.loads(data) == {"version": 1, "partitions": [{"topic": "a", "partition": 1},
                                                             {"topic": "b", "partition": 0}]}
    assert L.decode_isr_change(data) == {("a", 1), ("b", 0)}


def test_producer_id_block(znodes):
    block = L.ProducerIdBlock(broker=3, block_start=1000, block_end=1999)
    data = L.encode_producer_id_block(block)
    check(znodes, "producer_id_block", data)
    assert json.loads(data) == {"version": 1, "broker": 3, "block_start": "1000", "block_end": "1999"}
    assert L.decode_producer_id_block(data) == block


def test_controlled_shutdown(znodes):
    data = L.encode_controlled_shutdown(6)
    check(znodes, "controlled_shutdown", data)
    assert L.decode_controlled_shutdown(data) == 6


def test_bad_payload_names_the_znode():
    with pytest.raises(L.LayoutError, match="/cluster/id"):
        L.decode_cluster_id(b"{not json")
    with pytest.raises(L.LayoutError, match="lacks 'leader'"):
        L.decode_partition_state(b'{"isr": []}', 0, "/brokers/topics/t/partitions/0/state")


def test_inter_broker_secret(znodes):
    data = L.encode_inter_broker_secret("ab12")
    check(znodes, "inter_broker_secret", data)
    assert L.decode_inter_broker_secret(data) == "ab12"
    with pytest.raises(L.LayoutError, match="inter_broker_secret"):
        L.decode_inter_broker_secret(L._dump({"version": 1, "secret": ""}))
