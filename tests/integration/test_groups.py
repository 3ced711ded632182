"""Consumer groups with real clients: partitions split, rebalances, dead members, assignors, committed offsets.

Every wait is a poll with a deadline; members heartbeat every 500 ms so a
rebalance takes about a second, and a SIGKILLed member is noticed after its
6 s session timeout.

The tests run on broker_sim and on Apache Kafka (``any_broker``), each with a
topic and groups of its own (the Kafka node is the session's); the one that
restarts its broker stays on broker_sim.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition

from client_helpers import Record, create_topic, produce_kafka_python
from group_members import KILLABLE_MEMBER, MEMBERS, ConfluentMember, KafkaPythonMember, split_evenly
from broker_sim.testing.waiting import wait_until

PARTITIONS = 6
REBALANCE_WAIT_S = 30


def produce_round_robin(bootstrap: str, topic: str, per_partition: int) -> None:
    records = [Record(f"k{i}".encode(), f"v{i}".encode(), partition=i % PARTITIONS)
               for i in range(per_partition * PARTITIONS)]
    produce_kafka_python(bootstrap, topic, records)


def admin_for(broker) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=10000)


def stable_description(broker, group: str, members: int) -> dict:
    """DescribeGroups once the group is Stable with ``members`` members (clients may rebalance twice)."""
    admin = admin_for(broker)
    try:
        def described():
            d = admin.describe_groups([group])[group]
            return d if d["group_state"] == "Stable" and len(d["members"]) == members else None
        return wait_until(described, timeout_s=REBALANCE_WAIT_S, what=f"group {group} Stable with {members} members")
    finally:
        admin.close()


@pytest.mark.parametrize("client", list(MEMBERS))
def test_three_members_own_every_partition_once_and_a_leaving_members_partitions_move(any_broker, unique, client):
    bootstrap, events, group = any_broker.bootstrap_servers, unique("events"), unique("split")
    create_topic(bootstrap, events, PARTITIONS)
    members = [MEMBERS[client](bootstrap, events, group).start() for _ in range(3)]
    try:
        owned = wait_until(lambda: split_evenly(members, PARTITIONS), timeout_s=REBALANCE_WAIT_S,
                           what="3 members split 6 partitions")
        assert sorted(len(parts) for parts in owned) == [2, 2, 2]
        described = stable_description(any_broker, group, 3)
        assigned = sorted(p for m in described["members"]
                          for a in m["member_assignment"]["assigned_partitions"] for p in a["partitions"])
        assert assigned == list(range(PARTITIONS))

        leaving = members.pop(1)
        leaving.stop()
        owned = wait_until(lambda: split_evenly(members, PARTITIONS), timeout_s=REBALANCE_WAIT_S,
                           what="2 members take over")
        assert sorted(len(parts) for parts in owned) == [3, 3]
    finally:
        for member in members:
            member.stop()


def test_a_sigkilled_members_partitions_move_after_its_session_timeout(any_broker, unique):
    bootstrap, events, group = any_broker.bootstrap_servers, unique("events"), unique("killed")
    create_topic(bootstrap, events, PARTITIONS)
    survivor = KafkaPythonMember(bootstrap, events, group).start()
    victim = subprocess.Popen([sys.executable, "-c", KILLABLE_MEMBER, bootstrap, events, group],
                              stdout=subprocess.PIPE, text=True)
    victim_owns: list[frozenset[int]] = [frozenset()]

    def follow_victim():  # the subprocess prints what it owns after every change
        for line in victim.stdout:
            victim_owns.append(frozenset(int(p) for p in line.split()[1:]))

    threading.Thread(target=follow_victim, daemon=True).start()
    try:
        wait_until(lambda: victim_owns[-1] and survivor.partitions()
                   and not victim_owns[-1] & survivor.partitions()
                   and victim_owns[-1] | survivor.partitions() == frozenset(range(PARTITIONS)),
                   timeout_s=REBALANCE_WAIT_S, what="the survivor and the subprocess share the partitions")
        killed_at = time.monotonic()
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(10)
        wait_until(lambda: survivor.partitions() == frozenset(range(PARTITIONS)), timeout_s=20,
                   what="the survivor owns every partition")
        # not before the 6 s session timeout (minus the survivor's last heartbeat interval)
        assert time.monotonic() - killed_at > 4
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.wait(10)
        survivor.stop()


@pytest.mark.parametrize("member,strategy", [
    (KafkaPythonMember, "range"),
    (KafkaPythonMember, "roundrobin"),
    (KafkaPythonMember, "cooperative-sticky"),
    (ConfluentMember, "range"),
    (ConfluentMember, "roundrobin"),
    (ConfluentMember, "cooperative-sticky"),
])
def test_client_side_assignors(any_broker, unique, member, strategy):
    bootstrap, events, group = any_broker.bootstrap_servers, unique("events"), unique(f"assign-{strategy}")
    create_topic(bootstrap, events, PARTITIONS)
    members = [member(bootstrap, events, group, strategy=strategy).start() for _ in range(2)]
    try:
        owned = wait_until(lambda: split_evenly(members, PARTITIONS), timeout_s=REBALANCE_WAIT_S,
                           what=f"{strategy} splits")
        assert sorted(len(parts) for parts in owned) == [3, 3]
        if strategy == "range":
            assert sorted(sorted(parts) for parts in owned) == [[0, 1, 2], [3, 4, 5]]
        if strategy == "roundrobin":
            assert sorted(sorted(parts) for parts in owned) == [[0, 2, 4], [1, 3, 5]]
        assert stable_description(any_broker, group, 2)["protocol_data"] == strategy
    finally:
        for m in members:
            m.stop()


def test_committed_offsets_match_the_admin_view_and_survive_a_broker_restart(pylog_broker_factory, tmp_path):
    # broker_sim only: it restarts its broker on the same data, which the session's Kafka node cannot do
    data_dir = tmp_path / "data"
    broker = pylog_broker_factory(data_dir=data_dir)
    create_topic(broker.bootstrap_servers, "events", PARTITIONS)
    produce_round_robin(broker.bootstrap_servers, "events", 5)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id="durable",
                             auto_offset_reset="earliest", enable_auto_commit=False, fetch_max_wait_ms=100)
    consumer.partitions_for_topic("events")  # see group_members.KafkaPythonMember: a kafka-python join race
    consumer.subscribe(["events"])
    seen = 0
    deadline = time.monotonic() + 20
    while seen < 18 and time.monotonic() < deadline:
        seen += sum(len(batch) for batch in consumer.poll(timeout_ms=100, max_records=18 - seen).values())
    consumer.commit()
    committed = {tp: consumer.committed(tp) for tp in consumer.assignment()}
    consumer.close()
    assert sum(offset or 0 for offset in committed.values()) == 18

    admin = admin_for(broker)
    listed = admin.list_group_offsets({"durable": None})["durable"]
    admin.close()
    assert {tp: meta.offset for tp, meta in listed.items()} == {
        tp: offset for tp, offset in committed.items() if offset is not None}

    broker.stop()
    restarted = pylog_broker_factory(data_dir=data_dir)
    admin = admin_for(restarted)
    relisted = admin.list_group_offsets({"durable": None})["durable"]
    described = admin.describe_groups(["durable"])["durable"]
    admin.close()
    assert relisted == listed
    assert described["group_state"] == "Empty" and described["protocol_type"] == "consumer"

    resumed = KafkaConsumer(bootstrap_servers=restarted.bootstrap_servers, group_id="durable",
                            auto_offset_reset="earliest", enable_auto_commit=False, fetch_max_wait_ms=100)
    resumed.partitions_for_topic("events")
    resumed.subscribe(["events"])
    rest = []
    deadline = time.monotonic() + 20
    while len(rest) < 12 and time.monotonic() < deadline:
        for batch in resumed.poll(timeout_ms=100).values():
            rest.extend(batch)
    resumed.close()
    assert len(rest) == 12
    assert all(m.offset >= committed.get(TopicPartition("events", m.partition), 0) for m in rest)


@pytest.mark.parametrize("reset", ["earliest", "latest"])
def test_a_new_group_starts_where_auto_offset_reset_says(any_broker, unique, reset):
    bootstrap, events = any_broker.bootstrap_servers, unique("events")
    create_topic(bootstrap, events, PARTITIONS)
    produce_round_robin(bootstrap, events, 1)  # offset 0 of every partition exists before the group
    member = KafkaPythonMember(bootstrap, events, unique(f"new-{reset}"), offset_reset=reset).start()
    try:
        wait_until(lambda: member.partitions() == frozenset(range(PARTITIONS)), timeout_s=REBALANCE_WAIT_S,
                   what="assigned")
        if reset == "earliest":
            wait_until(lambda: {(p, o) for p, o, _ in member.records} >= {(p, 0) for p in range(PARTITIONS)},
                       timeout_s=20, what="offset 0 of every partition consumed")
        else:
            # produce until the member sees new records: its position was looked up at some end offset >= 1
            deadline = time.monotonic() + 20
            while not member.records and time.monotonic() < deadline:
                produce_round_robin(bootstrap, events, 1)
                time.sleep(0.5)
            assert member.records and all(offset >= 1 for _, offset, _ in member.records)
    finally:
        member.stop()


def test_kcat_consumes_as_a_group_member(any_broker, unique):
    bootstrap, events, group = any_broker.bootstrap_servers, unique("events"), unique("kcat-group")
    create_topic(bootstrap, events, PARTITIONS)
    produce_round_robin(bootstrap, events, 2)
    done = subprocess.run(["kcat", "-b", bootstrap, "-G", group, "-X", "auto.offset.reset=earliest",
                           "-X", "enable.auto.commit=true", "-X", "auto.commit.interval.ms=100",
                           "-c", "12", "-f", "%p %o %s\n", events],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = [line.split() for line in done.stdout.splitlines()]
    assert sorted((int(p), int(o)) for p, o, _ in lines) == [(p, o) for p in range(PARTITIONS) for o in range(2)]
    admin = admin_for(any_broker)
    try:
        wait_until(lambda: group in {g["group_id"] for g in admin.list_groups()}, timeout_s=10,
                   what="kcat's group listed")
    finally:
        admin.close()


def test_a_restarted_static_member_gets_its_partitions_back_without_a_rebalance(any_broker, unique):
    from confluent_kafka import Consumer
    bootstrap, events, group = any_broker.bootstrap_servers, unique("events"), unique("static")
    create_topic(bootstrap, events, PARTITIONS)
    assigned = {"a": 0, "b": 0}  # assignments each instance was given (a rebalance gives "b" another one)

    def member(instance: str):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.instance.id": instance,
                             "session.timeout.ms": 10000, "heartbeat.interval.ms": 500})

        def on_assign(_consumer, _partitions):
            assigned[instance] += 1
        consumer.subscribe([events], on_assign=on_assign)
        return consumer

    def split(consumers):
        """Each consumer's partitions once both own three, else None."""
        for consumer in consumers:
            consumer.poll(0.1)
        owned = [sorted(tp.partition for tp in c.assignment()) for c in consumers]
        return owned if all(len(parts) == 3 for parts in owned) else None

    consumers = [member("a"), member("b")]
    try:
        before = wait_until(lambda: split(consumers), timeout_s=REBALANCE_WAIT_S,
                            what="two static members split the partitions")
        stable_description(any_broker, group, 2)
        assigned_to_b = assigned["b"]
        consumers[0].close()  # a static member leaves no LeaveGroup behind: the broker keeps its place
        consumers[0] = member("a")
        after = wait_until(lambda: split(consumers), timeout_s=REBALANCE_WAIT_S,
                           what="the restarted member owns its partitions again")
        assert after == before
        for _ in range(10):  # a rebalance, had there been one, would reach "b" within its heartbeats (500 ms)
            consumers[1].poll(0.1)
        assert assigned["b"] == assigned_to_b
    finally:
        for consumer in consumers:
            consumer.close()
