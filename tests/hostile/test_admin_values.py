"""Admin requests a client may send on a broker without an authorizer: CreatePartitions on the internal
topics (it would re-home groups and transactional ids, whose partition is a hash modulo the count, and the
registry reads only ``_schemas``-0) and AlterClientQuotas with values no Java long or double quota holds
(+inf, -inf, NaN, 1e300). Each is INVALID_REQUEST naming the problem, never a traceback, and nothing changes."""
from __future__ import annotations

import uuid

from client_helpers import create_topic, produce_kafka_python
from confluent_kafka import Producer
from hostile import assert_serving
from kafka import KafkaConsumer, TopicPartition
from kafka.protocol.admin import AlterClientQuotasRequest, DescribeClientQuotasRequest
from kafka.structs import OffsetAndMetadata
from kafka_wire import WireClient, create_partitions, metadata
from test_records import GOOD

INVALID_REQUEST = 42
INTERNAL = ("__consumer_offsets", "__transaction_state", "_schemas")


def _partition_counts(bootstrap: str) -> dict[str, int]:
    with WireClient(bootstrap) as client:
        return {t.name: len(t.partitions) for t in metadata(client, list(INTERNAL), auto_create=False).topics
                if t.error_code == 0}


def test_clients_cannot_add_partitions_to_internal_topics(hostile_broker):
    broker = hostile_broker({"offsets.topic.num.partitions": "3", "transaction.state.log.num.partitions": "3"})
    bootstrap = broker.bootstrap_servers
    topic = f"plain-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic)
    create_topic(bootstrap, "_schemas")  # as a registry elsewhere would have it
    produce_kafka_python(bootstrap, topic, GOOD)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id="g", enable_auto_commit=False)
    consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(2, "", -1)})  # creates __consumer_offsets
    consumer.close()
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "t"})
    producer.init_transactions(30)  # creates __transaction_state
    assert _partition_counts(bootstrap) == {"__consumer_offsets": 3, "__transaction_state": 3, "_schemas": 1}

    with WireClient(bootstrap) as client:
        for name in INTERNAL:
            code, message = create_partitions(client, name, 10)
            assert code == INVALID_REQUEST, (name, code, message)
            assert name in message and "cannot be changed" in message, message
        assert create_partitions(client, topic, 2) == (0, None)  # other topics still grow
    assert _partition_counts(bootstrap) == {"__consumer_offsets": 3, "__transaction_state": 3, "_schemas": 1}
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id="g", enable_auto_commit=False)
    assert consumer.committed(TopicPartition(topic, 0)) == 2  # the group is still found where it was
    consumer.close()
    assert_serving(broker)
    hostile_broker.restart(broker)


def test_alter_client_quotas_refuses_values_no_quota_holds(hostile_broker):
    broker = hostile_broker()
    Entity = AlterClientQuotasRequest.EntryData.EntityData
    Op = AlterClientQuotasRequest.EntryData.OpData
    cases = [(key, value) for key in ("producer_byte_rate", "consumer_byte_rate", "request_percentage")
             for value in (float("inf"), float("-inf"), float("nan"))] + [("producer_byte_rate", 1e300)]
    with WireClient(broker.bootstrap_servers) as client:
        for key, value in cases:
            response = client.call(AlterClientQuotasRequest[1](entries=[AlterClientQuotasRequest.EntryData(
                entity=[Entity(entity_type="client-id", entity_name="app")],
                ops=[Op(key=key, value=value, remove=False)])], validate_only=False))
            entry = response.entries[0]
            assert entry.error_code == INVALID_REQUEST, (key, value, entry)
            assert key in entry.error_message and "finite positive" in entry.error_message, entry.error_message
        described = client.call(DescribeClientQuotasRequest[1](components=[], strict=False))
        assert described.error_code == 0 and described.entries == [], described
    log = broker.log_path.read_text(errors="replace")
    assert "Traceback" not in log, log[-3000:]
    assert_serving(broker)
    hostile_broker.restart(broker)
