"""DescribeTopicPartitions (API 75, KIP-966), compared with Apache Kafka: named topics in name order with the
missing ones' errors, paging by ResponsePartitionLimit and the cursor, a cursor outside the named topics, a zero
limit, and all topics from a cursor. Topic ids and leader ids are per broker (``VOLATILE``); the rest must match."""
from __future__ import annotations

import pytest
from kafka.protocol.admin import CreateTopicsRequest, DescribeTopicPartitionsRequest

from differential import Scenario


PYLOG_BROKER_ID = 1   # Kafka's node id: replica and ISR lists name the same broker (conftest.py)

Request = DescribeTopicPartitionsRequest[0]
Cursor = DescribeTopicPartitionsRequest.Cursor
Named = DescribeTopicPartitionsRequest.TopicRequest


def _topics(peer, **partitions) -> dict:
    """Create ``<base>-<suffix>`` topics with the given partition counts; {suffix: name}."""
    base = peer.name("dtp")
    names = {suffix: f"{base}-{suffix}" for suffix in partitions}
    created = peer.call(CreateTopicsRequest[5](timeout_ms=30000, validate_only=False, topics=[
        CreateTopicsRequest.CreatableTopic(name=names[s], num_partitions=n, replication_factor=1, assignments=[],
                                           configs=[]) for s, n in partitions.items()]))
    assert [t.error_code for t in created.topics] == [0] * len(partitions), created
    return names


def _describe(peer, names, limit=2000, cursor=None):
    return peer.settled(lambda: Request(topics=[Named(name=n) for n in names], response_partition_limit=limit,
                                        cursor=Cursor(topic_name=cursor[0], partition_index=cursor[1])
                                        if cursor else None))


def _with_names(answer, names: dict) -> dict:
    """The answer with the scenario's topic names as their suffixes (the bases differ per broker)."""
    back = {name: f"<{suffix}>" for suffix, name in names.items()}
    data = answer.to_dict()
    for topic in data["topics"]:
        topic["name"] = back.get(topic["name"], topic["name"])
    if data.get("next_cursor"):
        data["next_cursor"]["topic_name"] = back.get(data["next_cursor"]["topic_name"], "<other>")
    return data


def named_topics_in_name_order(peer):
    names = _topics(peer, b=3, a=1)
    missing, bad = names["a"] + "-missing", "bad name!"
    names.update(missing=missing, bad=bad)
    return _with_names(_describe(peer, [names["b"], missing, bad, names["a"]]), names)


def pages_by_the_partition_limit(peer):
    names = _topics(peer, a=3, b=2)
    pages, cursor = [], None
    for _ in range(4):
        answer = _describe(peer, [names["b"], names["a"]], limit=2, cursor=cursor)
        pages.append(_with_names(answer, names))
        if answer.next_cursor is None:
            break
        cursor = (answer.next_cursor.topic_name, answer.next_cursor.partition_index)
    return pages


def a_cursor_past_the_last_partition(peer):
    names = _topics(peer, a=2, b=1)
    return _with_names(_describe(peer, [names["a"], names["b"]], cursor=(names["a"], 5)), names)


def a_negative_cursor_index(peer):
    """A cursor index below 0: INVALID_REQUEST for every named topic; asking for all topics, an empty answer."""
    names = _topics(peer, a=3)
    return [_with_names(_describe(peer, topics, limit=limit, cursor=(names["a"], -2)), names)
            for topics, limit in (([names["a"]], 2), ([names["a"]], 4), ([], 2))]


def a_cursor_outside_the_named_topics(peer):
    names = _topics(peer, a=1)
    names["other"] = names["a"] + "-other"
    return _with_names(_describe(peer, [names["a"]], cursor=(names["other"], 0)), names)


def a_zero_limit_answers_one_partition(peer):
    names = _topics(peer, a=1, b=1)
    return _with_names(_describe(peer, [names["a"], names["b"]], limit=0), names)


def all_topics_from_a_cursor(peer):
    """Every topic from the cursor's on (``<base>-b`` is the next name after ``<base>-a``): a page of one."""
    names = _topics(peer, a=2, b=1)
    return _with_names(_describe(peer, [], limit=1, cursor=(names["a"], 1)), names)


SCENARIOS = [Scenario(f.__name__.replace("_", " "), f) for f in (
    named_topics_in_name_order, pages_by_the_partition_limit, a_cursor_past_the_last_partition,
    a_negative_cursor_index, a_cursor_outside_the_named_topics, a_zero_limit_answers_one_partition, all_topics_from_a_cursor)]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=str)
def test_describe_topic_partitions_matches_kafka(pair, scenario):
    pair.compare(scenario)
