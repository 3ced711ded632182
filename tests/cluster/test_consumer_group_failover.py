"""A KIP-848 consumer group across a coordinator failover: three brokers with a real ZooKeeper, two librdkafka
members (group.protocol=consumer) reading a replicated topic, and the broker that coordinates their group
SIGKILLed mid-stream. The new coordinator (the new leader of the group's ``__consumer_offsets`` partition) replays
the group's records: the members go on at their epochs (the group epoch does not start again), every record is
read, and none twice (nothing was killed but the broker: the members commit in their revocation callbacks)."""
from __future__ import annotations

import sys
import uuid
from collections import Counter
from pathlib import Path

from cluster_helpers import create_topic, start_cluster

from broker_sim.testing.waiting import wait_until

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "kafka"))

from test_consumer_protocol import GROUP_CONFIG, Member  # noqa: E402

RECORDS = 12_000
PARTITIONS = 4


def _describe(bootstrap: str, group: str):
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_consumer_groups([group], request_timeout=10)[group].result(15)


def test_the_group_survives_its_coordinator_killed_and_resumes_at_its_epochs(tmp_path):
    from confluent_kafka import Producer

    cluster = start_cluster(tmp_path / "cluster", configs=GROUP_CONFIG)
    members = []
    try:
        bootstrap = cluster.bootstrap_servers
        topic, group = f"kip848f-{uuid.uuid4().hex[:6]}", f"gf-{uuid.uuid4().hex[:6]}"
        create_topic(bootstrap, topic, partitions=PARTITIONS, replication_factor=3)
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20})
        for i in range(RECORDS):
            producer.produce(topic, value=str(i).encode(), partition=i % PARTITIONS)
            if i % 2000 == 0:
                producer.poll(0)
        assert producer.flush(60) == 0

        class View:   # what Member needs of a broker
            bootstrap_servers = bootstrap

        members = [Member(View, group, tmp_path, f"f{i}", topic) for i in range(2)]
        wait_until(lambda: all(len(m.assignment()) == 2 for m in members), timeout_s=60,
                   what="two members with two partitions each")
        before = _describe(bootstrap, group)
        coordinator = before.coordinator.id
        wait_until(lambda: len({r for m in members for r in m.records()}) >= RECORDS // 4, timeout_s=60,
                   what="a quarter read")
        assignments_before = [len([line for line in m.lines() if line.startswith("A ")]) for m in members]
        cluster.kill(coordinator)
        wait_until(lambda: len({r for m in members for r in m.records()}) >= RECORDS, timeout_s=120,
                   what="every record read after the coordinator was killed", interval_s=0.5)
        after = wait_until(lambda: (lambda d: d if d.coordinator.id != coordinator else None)(
            _describe(bootstrap, group)), timeout_s=30, what="the group described by its new coordinator")
        assert len(after.members) == 2 and {m.member_id for m in after.members} == {m.member_id for m in before.members}
        # resumed, not rebuilt: a group started again would have fenced the members (UNKNOWN_MEMBER_ID) and they
        # would have rejoined with a revocation and an assignment each
        moved = [[line for line in m.lines() if line.startswith("A ")][n:] for m, n in zip(members, assignments_before)]
        assert moved == [[], []], f"the members' assignments moved across the failover: {moved}"
        for member in members:
            member.stop()
    finally:
        for member in members:
            if member.process.poll() is None:
                member.kill()
        cluster.stop_all()
    consumed = Counter(r for m in members for r in m.records())
    assert len(consumed) == RECORDS
    assert not [r for r, n in consumed.items() if n > 1], "a record read twice without a member killed"
