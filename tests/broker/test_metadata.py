"""The single-node metadata store: topics survive restarts; bad names and counts are refused."""
import json
from pathlib import Path

import kafka.errors as Errors
import pytest

from broker_sim.controller.metadata import MetadataError, MetadataStore


def test_topics_and_cluster_id_survive_reopen(tmp_path):
    store = MetadataStore(tmp_path, broker_id=0)
    created = store.create_topic("orders", 3, {"retention.ms": "1000"})
    store.set_partition_count("orders", 5)
    reopened = MetadataStore(tmp_path, broker_id=0)
    topic = reopened.get("orders")
    assert (topic.topic_id, topic.partitions, topic.configs) == (created.topic_id, 5, {"retention.ms": "1000"})
    assert reopened.cluster_id == store.cluster_id
    assert reopened.topics_by_id[created.topic_id].name == "orders"


def test_file_matches_documented_format(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    MetadataStore(tmp_path, broker_id=0).create_topic("a.b", 2, {"retention.ms": "5"})
    doc = json.loads((tmp_path / "pylog-topics.json").read_text())
    schema = json.loads((Path(__file__).parents[2] / "broker_sim" / "schemas" / "topic-metadata.json").read_text())
    jsonschema.validate(doc, schema)
    doc["topics"][0]["partitions"] = 0
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, schema)


def test_data_dir_of_another_broker_id_is_refused(tmp_path):
    MetadataStore(tmp_path, broker_id=0)
    with pytest.raises(RuntimeError, match="belongs to broker.id 0"):
        MetadataStore(tmp_path, broker_id=1)


@pytest.mark.parametrize("name, error", [
    ("", Errors.InvalidTopicError), ("..", Errors.InvalidTopicError), ("a" * 250, Errors.InvalidTopicError),
    ("has space", Errors.InvalidTopicError), ("a_b", Errors.InvalidTopicError),  # collides with a.b
])
def test_bad_topic_names_are_refused(tmp_path, name, error):
    store = MetadataStore(tmp_path, broker_id=0)
    store.create_topic("a.b", 1)
    with pytest.raises(MetadataError) as info:
        store.create_topic(name, 1)
    assert info.value.error is error


def test_partition_count_must_grow_and_configs_must_parse(tmp_path):
    store = MetadataStore(tmp_path, broker_id=0)
    store.create_topic("t", 2)
    with pytest.raises(MetadataError, match="must be larger") as info:
        store.set_partition_count("t", 2)
    assert info.value.error is Errors.InvalidPartitionsError
    with pytest.raises(MetadataError, match="retention.ms") as info:
        store.set_configs("t", {"retention.ms": "soon"})
    assert info.value.error is Errors.InvalidConfigurationError
    with pytest.raises(MetadataError) as info:
        store.create_topic("t", 1)
    assert info.value.error is Errors.TopicAlreadyExistsError
