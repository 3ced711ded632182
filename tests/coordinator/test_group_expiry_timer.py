"""Group members expire at their session deadline, by a timer (Kafka's DelayedHeartbeat), not at the next tick
of a 100 ms poll: a DeleteGroups sent just after a static member's session timeout finds the group empty, where
a poll would still have the member (NON_EMPTY_GROUP), as librdkafka's integration suite saw."""
from __future__ import annotations

import sys
import time
from pathlib import Path

from kafka.protocol.admin import DeleteGroupsRequest
from kafka.protocol.consumer import HeartbeatRequest, JoinGroupRequest, SyncGroupRequest
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

from broker_sim.server.broker import Broker

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "integration"))
from kafka_wire import WireClient  # noqa: E402

SESSION_MS = 1000
SLACK_S = 0.03  # DeleteGroups this long after the deadline: inside a 100 ms poll's gap 70 % of the time
GROUPS = 5
SUBSCRIPTION = bytes(ConsumerProtocolSubscription(version=0, topics=["events"], user_data=None).encode())


def join_static_member(client: WireClient, group: str) -> float:
    """A static member joins and syncs ``group``; returns when the last answer arrived (time.monotonic()), which
    is after the broker set the member's session deadline."""
    joined = client.call(JoinGroupRequest[5](
        group_id=group, session_timeout_ms=SESSION_MS, rebalance_timeout_ms=SESSION_MS, member_id="",
        group_instance_id=f"{group}-instance", protocol_type="consumer",
        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=SUBSCRIPTION)]))
    assert joined.error_code == 0, joined
    who = dict(group_id=group, generation_id=joined.generation_id, member_id=joined.member_id,
               group_instance_id=f"{group}-instance")
    synced = client.call(SyncGroupRequest[3](**who, assignments=[
        SyncGroupRequest.SyncGroupRequestAssignment(member_id=joined.member_id, assignment=b"a")]))
    assert synced.error_code == 0, synced
    assert client.call(HeartbeatRequest[3](**who)).error_code == 0
    return time.monotonic()


def test_a_member_expires_at_its_session_deadline(tmp_path):
    config = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": str(SESSION_MS),
              "offsets.topic.num.partitions": "1"}
    with Broker(tmp_path, config=config) as broker, WireClient(broker.bootstrap_servers) as client:
        late = []
        for index in range(GROUPS):
            group = f"timer-{index}"
            last_answer = join_static_member(client, group)
            time.sleep(max(0.0, last_answer + SESSION_MS / 1000 + SLACK_S - time.monotonic()))
            sent = time.monotonic()
            deleted = client.call(DeleteGroupsRequest[2](groups_names=[group]))
            late.append(round((sent - last_answer) * 1000 - SESSION_MS))
            assert [(r.group_id, r.error_code) for r in deleted.results] == [(group, 0)], (
                f"DeleteGroups {late[-1]} ms after the session deadline found the member still there")
