"""Kafka 4.1's group-type listings against broker_sim and Apache Kafka (ListGroups v5, KIP-848's types filter):
``kafka-consumer-groups --list --type`` (every type, and filtered), ``kafka-share-groups --list`` and
``kafka-streams-groups --list``, the same exit status and the same lines for this test's group. A broker
without ListGroups v5 fails the type filter (UnsupportedVersionException) or prints the type as Unknown."""
from __future__ import annotations

import uuid

from test_tools_admin import pylog_node1  # noqa: F401 (a fixture)
from test_tools_groups_transactions import _mine, _same, both_topics  # noqa: F401 (a fixture)

SHARE_GROUPS = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"
STREAMS_GROUPS = "org.apache.kafka.tools.streams.StreamsGroupCommand"


def test_group_types_list_alike(kafka_broker, pylog_node1, both_topics):  # noqa: F811
    topic, group = both_topics, f"types-g-{uuid.uuid4().hex[:8]}"
    kafka, pylog = kafka_broker, pylog_node1

    def run(tool, *args, keep=lambda text: _mine(text, group)):
        return _same(kafka, pylog, tool, "--bootstrap-server", "{bs}", *args, keep=keep)

    status, output = run("kafka-consumer-groups", "--reset-offsets", "--group", group, "--topic", topic,
                         "--to-offset", "1", "--execute")
    assert status == 0 and group in output, output
    status, listed = run("kafka-consumer-groups", "--list", "--type")
    assert status == 0 and group in listed and "Classic" in listed, listed
    assert run("kafka-consumer-groups", "--list", "--type", "classic")[1] == listed
    status, consumer = run("kafka-consumer-groups", "--list", "--type", "consumer")
    assert status == 0 and group not in consumer, consumer
    run("kafka-consumer-groups", "--list", "--state", "Empty", "--type", "classic")
    assert run(SHARE_GROUPS, "--list")[0] == 0
    assert run(STREAMS_GROUPS, "--list")[0] == 0
