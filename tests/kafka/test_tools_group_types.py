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


def test_kafka_consumer_groups_describes_a_consumer_protocol_group_alike(kafka_broker, pylog_node1, both_topics,
                                                                         tmp_path):  # noqa: F811
    """One librdkafka member with ``group.protocol=consumer`` on each broker (same topic and group names):
    ``--list --type``, ``--describe --state`` and ``--describe --members [--verbose]`` print the same lines
    (member ids, which each client generates, masked)."""
    import re
    import subprocess
    import sys
    from pathlib import Path

    from broker_sim.testing.waiting import wait_until

    topic, group = both_topics, f"cp-g-{uuid.uuid4().hex[:8]}"
    consumer = Path(__file__).resolve().parent / "kip848_consumer.py"
    members = {}
    for kind, server in (("kafka", kafka_broker), ("pylog", pylog_node1)):
        events = tmp_path / f"{kind}.events"
        members[kind] = (subprocess.Popen([sys.executable, str(consumer), server.bootstrap_servers, group,
                                           str(events), topic], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                          stdin=subprocess.DEVNULL), events)
    try:
        for kind, (_, events) in members.items():
            wait_until(lambda: events.exists() and sum(line.startswith("R ") for line in events.read_text()
                                                       .splitlines()) >= 10, timeout_s=60,
                       what=f"the {kind} member read every record", interval_s=0.3)

        def masked(text: str) -> str:
            return re.sub(r"(?<![\w+/=-])[A-Za-z0-9+/_=-]{22}(?![\w+/=-])", "<member>", _mine(text, group))

        def run(*args):
            return _same(kafka_broker, pylog_node1, "kafka-consumer-groups", "--bootstrap-server", "{bs}", *args,
                         keep=masked)

        status, listed = run("--list", "--type")
        assert status == 0 and "Consumer" in listed, listed
        status, state = run("--describe", "--group", group, "--state")
        assert status == 0 and "uniform" in state and "Stable" in state, state
        status, described = run("--describe", "--group", group, "--members")
        assert status == 0 and "<member>" in described, described
        run("--describe", "--group", group, "--members", "--verbose")
    finally:
        for process, _ in members.values():
            process.terminate()
            process.wait(30)
