"""Internal topics are made by their coordinator and cannot be deleted by clients."""
import pytest
from kafka import KafkaAdminClient
from kafka.errors import InvalidRequestError
from kafka_wire import WireClient, metadata


def _auto_create(bootstrap: str, topic: str):
    with WireClient(bootstrap) as client:
        (result,) = metadata(client, [topic], auto_create=True).topics
    return result


@pytest.mark.parametrize("topic, partitions_config", [
    ("__consumer_offsets", "offsets.topic.num.partitions"),
    ("__transaction_state", "transaction.state.log.num.partitions"),
])
def test_metadata_auto_creation_of_an_internal_topic_makes_it_through_its_coordinator(
        pylog_broker_factory, topic, partitions_config):
    broker = pylog_broker_factory(config={partitions_config: 3, "num.partitions": 1})
    result = _auto_create(broker.bootstrap_servers, topic)
    assert result.error_code == 0 and result.is_internal
    assert sorted(p.partition_index for p in result.partitions) == [0, 1, 2]
    info = broker.metadata.get(topic)
    assert info.internal and info.configs["cleanup.policy"] == "compact"


def test_internal_topic_cannot_be_deleted(pylog_broker_factory):
    broker = pylog_broker_factory(config={"offsets.topic.num.partitions": 2})
    _auto_create(broker.bootstrap_servers, "__consumer_offsets")
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    with pytest.raises(InvalidRequestError):
        admin.delete_topics(["__consumer_offsets"])
    admin.close()
    assert "__consumer_offsets" in broker.metadata.topics
