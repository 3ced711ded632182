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
    ("abc\n", Errors.InvalidTopicError), (".", Errors.InvalidTopicError), ("\n", Errors.InvalidTopicError),
    ("ok\nok", Errors.InvalidTopicError), ("ü", Errors.InvalidTopicError),
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


def test_topic_name_rule_is_a_full_match_with_kafkas_messages():
    from broker_sim.controller.metadata import validate_topic_name

    validate_topic_name("a" * 249)
    validate_topic_name("A-z_0.9")
    for name, message in [("abc\n", "contains a character other than ASCII alphanumerics, '.', '_' and '-'"),
                          ("..", 'Topic name cannot be "." or ".."'),
                          ("a" * 250, "can't be longer than 249 characters"),
                          ("", "can't be empty")]:
        with pytest.raises(MetadataError, match=message):
            validate_topic_name(name)


def test_a_reserved_name_counts_as_taken_until_released(tmp_path):
    store = MetadataStore(tmp_path, broker_id=0)
    store.create_topic("t", 2)
    store.reserve("big", 100)
    assert store.partition_count == 102
    with pytest.raises(MetadataError) as info:
        store.check_new_topic("big", 1, {})
    assert info.value.error is Errors.TopicAlreadyExistsError
    store.release("big")
    assert store.partition_count == 2
    store.check_new_topic("big", 1, {})


def test_an_unreadable_topics_file_is_moved_aside_and_rebuilt_from_directories(tmp_path):
    store = MetadataStore(tmp_path, broker_id=0)
    store.create_topic("orders", 3, {"retention.ms": "1000"})
    for index in range(3):
        (tmp_path / f"orders-{index}").mkdir()
    (tmp_path / "__consumer_offsets-0").mkdir()
    (tmp_path / "not a partition").mkdir()
    (tmp_path / "orders-1.abc-delete").mkdir()
    (tmp_path / "pylog-topics.json").write_text('{"version": 1, "topics": [{"na')
    reopened = MetadataStore(tmp_path, broker_id=0)
    assert sorted(reopened.topics) == ["__consumer_offsets", "orders"]
    assert reopened.get("orders").partitions == 3
    assert reopened.get("__consumer_offsets").configs == {"cleanup.policy": "compact"}
    assert (tmp_path / "pylog-topics.json.corrupt").read_text() == '{"version": 1, "topics": [{"na'
    assert MetadataStore(tmp_path, broker_id=0).get("orders").partitions == 3  # the rebuilt file was written
