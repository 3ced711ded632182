"""The source driver's ListOffsets follows a leader that moved: NOT_LEADER_OR_FOLLOWER from the old leader is
retried on fresh metadata within the attempt (the Java consumer's patience), not spent as a fetchOffset retry.

A 2-broker cluster, a partition with replication factor 2: the reader learns the leader (``partitions()``),
the leader is stopped (controlled shutdown moves leadership) and started again as a follower, and the next
``latest()`` first asks the old leader, which answers NOT_LEADER_OR_FOLLOWER.
"""
from __future__ import annotations

import logging

import pytest

from connector.options import parse_source_options
from connector.source.offset_reader import OffsetReader

pytestmark = [pytest.mark.cluster]


@pytest.fixture
def two_brokers(tmp_path):
    from broker_sim.local.cluster import LocalCluster
    from broker_sim.testing.jepsen_workload import FAST_FAILOVER_CONFIGS
    from broker_sim.testing.requirements import require_zookeeper

    require_zookeeper()
    configs = {**FAST_FAILOVER_CONFIGS, "auto.leader.rebalance.enable": "false"}  # the moved leader stays moved
    cluster = LocalCluster(tmp_path / "cluster", brokers=2, configs=configs).start()
    try:
        yield cluster
    finally:
        cluster.stop_all()


def test_a_moved_leader_is_found_again_within_one_attempt(two_brokers, caplog):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster = two_brokers
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic("moving", num_partitions=1, replication_factor=2)])["moving"].result(30)
    cluster.wait_for_full_isr("moving", 1, timeout_s=60)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for value in (b"a", b"b", b"c"):
        producer.produce("moving", value, partition=0)
    assert producer.flush(30) == 0

    leader = cluster.leader_of("moving", 0)
    other = next(b for b in cluster.broker_ids if b != leader)
    # bootstrap through the broker that stays up; one attempt: an unretried NOT_LEADER would fail the lookup
    reader = OffsetReader(parse_source_options({"kafka.bootstrap.servers": cluster.address(other),
                                                "subscribe": "moving", "fetchOffset.numRetries": "1"}))
    try:
        assert reader.partitions() == [("moving", 0)]
        cluster.stop(leader)
        cluster.wait_for(lambda md: getattr(md.partitions.get(("moving", 0)), "leader", None) == other, timeout_s=60,
                         what=f"moving-0 led by broker {other}", topics=["moving"])
        cluster.restart(leader)
        cluster.wait_for_full_isr("moving", 1, timeout_s=60)
        assert cluster.leader_of("moving", 0) == other
        with caplog.at_level(logging.INFO, logger="connector.source.offset_reader"):
            assert reader.latest([("moving", 0)]) == {("moving", 0): 3}
    finally:
        reader.close()
    retried = [r.getMessage() for r in caplog.records if "retrying a Kafka offsets lookup" in r.getMessage()]
    assert retried and "NotLeader" in retried[0], retried
