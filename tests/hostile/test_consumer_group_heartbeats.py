"""Hostile KIP-848 heartbeats (ConsumerGroupHeartbeat, raw over the wire): what a client controls is bounded and
the broker stays responsive. A regex whose RE2 program would take seconds to match every topic is refused at
once; a subscription too large to store is refused and leaves no member behind; owned partitions of topics that
do not exist change nothing; a group of ``group.consumer.max.size`` members takes no more, and a coordinator of
``group.max.groups`` groups creates no more."""
from __future__ import annotations

import time
import uuid

from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.metadata import FindCoordinatorRequest

from broker_sim.protocol.client import WireConnection
from broker_sim.protocol.messages import ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest

Heartbeat = ConsumerGroupHeartbeatRequest


def _connect(broker) -> WireConnection:
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    return WireConnection.connect(host, int(port), timeout_s=10, client_id="hostile-848")


def _join(connection, group: str, member: str, **fields):
    request = dict(group_id=group, member_id=member, member_epoch=0, instance_id=None, rack_id=None,
                   rebalance_timeout_ms=30_000, subscribed_topic_names=["events"], subscribed_topic_regex=None,
                   server_assignor=None, topic_partitions=[])
    request.update(fields)
    return connection.call(Heartbeat[1](**request), timeout_s=30)


def _setup(broker) -> WireConnection:
    connection = _connect(broker)
    created = connection.call(CreateTopicsRequest[4](topics=[CreateTopicsRequest.CreatableTopic(
        name="events", num_partitions=4, replication_factor=1, assignments=[], configs=[])], timeout_ms=10_000,
        validate_only=False))
    assert created.topics[0].error_code in (0, 36)
    connection.call(FindCoordinatorRequest[4](key_type=0, coordinator_keys=["g"]))
    return connection


def test_a_regex_too_costly_to_match_is_refused_at_once_and_the_broker_goes_on(pylog_broker):
    connection = _setup(pylog_broker)
    started = time.monotonic()
    answer = _join(connection, "g-regex", "m1", subscribed_topic_names=None, subscribed_topic_regex="(a|b)*" * 5000)
    assert time.monotonic() - started < 2.0
    assert answer.error_code == 128 and "RE2 instructions" in answer.error_message   # INVALID_REGULAR_EXPRESSION
    fine = _join(connection, "g-regex", "m2", subscribed_topic_names=None, subscribed_topic_regex="ev.*")
    assert fine.error_code == 0 and fine.member_epoch >= 1


def test_a_subscription_too_large_to_store_is_refused_and_leaves_no_member(pylog_broker):
    connection = _setup(pylog_broker)
    names = [f"no-such-topic-{i:06d}-" + "x" * 200 for i in range(20_000)]   # ~4.5 MB of names
    answer = _join(connection, "g-big", "m1", subscribed_topic_names=names)
    assert answer.error_code != 0 and answer.member_epoch == 0
    described = connection.call(ConsumerGroupDescribeRequest[1](group_ids=["g-big"], include_authorized_operations=False))
    assert described.groups[0].error_code == 69   # GROUP_ID_NOT_FOUND: nothing was kept
    assert _join(connection, "g-big", "m1").error_code == 0


def test_owned_partitions_of_unknown_topics_change_nothing(pylog_broker):
    connection = _setup(pylog_broker)
    joined = _join(connection, "g-owned", "m1")
    assert joined.error_code == 0
    bogus = [Heartbeat.TopicPartitions(topic_id=uuid.uuid4(), partitions=list(range(1000))) for _ in range(100)]
    answer = connection.call(Heartbeat[1](group_id="g-owned", member_id="m1", member_epoch=joined.member_epoch,
                                          instance_id=None, rack_id=None, rebalance_timeout_ms=-1,
                                          subscribed_topic_names=None, subscribed_topic_regex=None,
                                          server_assignor=None, topic_partitions=bogus))
    assert answer.error_code == 0 and answer.member_epoch == joined.member_epoch


def test_group_sizes_and_counts_are_bounded_by_kafkas_configs(pylog_broker_factory):
    broker = pylog_broker_factory(config={"group.consumer.max.size": "2", "group.max.groups": "3"})
    connection = _setup(broker)
    assert [_join(connection, "g-size", m).error_code for m in ("m1", "m2", "m3")] == [0, 0, 81]   # GROUP_MAX_SIZE_REACHED
    codes = [_join(connection, f"g-count-{i}", "m1").error_code for i in range(3)]
    assert codes[:2] == [0, 0] and codes[2] == 81   # GROUP_MAX_SIZE_REACHED: the coordinator's third group
