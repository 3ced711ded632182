"""Cluster behaviour under single faults, on one 3-broker cluster (real ZooKeeper, broker processes):
bootstrap from any broker, controller failover, restart and catch-up into the ISR, and
NOT_ENOUGH_REPLICAS when two of three replicas are down."""
from __future__ import annotations

import pytest
from cluster_helpers import NOT_ENOUGH_REPLICAS, create_topic, error_code, produce, raw_produce, read_partition

from broker_sim.local.cluster import HOST, fetch_metadata
from broker_sim.testing.jepsen_checker import batch_digests, replica_difference

pytestmark = pytest.mark.cluster

NOT_LEADER_OR_FOLLOWER = 6
UNKNOWN_TOPIC_OR_PARTITION = 3


def test_every_broker_serves_metadata_and_clients_bootstrap_from_any(healthy_cluster, topic_name):
    cluster = healthy_cluster
    create_topic(cluster.bootstrap_servers, topic_name, partitions=3, replication_factor=3,
                 configs={"min.insync.replicas": 2})
    states = cluster.wait_for_full_isr(topic_name, 3, timeout_s=30)
    ids = set(cluster.broker_ids)
    for broker_id in cluster.broker_ids:
        answer = fetch_metadata(HOST, cluster.port(broker_id), [topic_name], broker_id=broker_id)
        assert set(answer.brokers) == ids, f"broker {broker_id} lists {sorted(answer.brokers)}"
        assert {b: port for b, (_, port) in answer.brokers.items()} == {b: cluster.port(b) for b in ids}
        assert answer.controller_id in ids
        for partition, state in states.items():
            seen = answer.partitions[(topic_name, partition)]
            assert (seen.leader, set(seen.replicas)) == (state.leader, ids), (broker_id, seen)

    written: dict[int, list[bytes]] = {p: [] for p in states}
    for broker_id in cluster.broker_ids:
        # a partition this broker does not lead: the client must find the leader from metadata alone
        partition = next(p for p, s in states.items() if s.leader != broker_id)
        values = [f"via-{broker_id}-{i}".encode() for i in range(20)]
        results = produce(cluster.address(broker_id), topic_name, values, partition=partition, acks="all")
        assert [error_code(err) for err, _ in results] == [None] * 20
        written[partition] += values
    for partition, state in states.items():
        reader = next(b for b in cluster.broker_ids if b != state.leader)
        records = read_partition(cluster.address(reader), topic_name, partition, len(written[partition]))
        assert records == list(enumerate(written[partition]))


def test_a_broker_that_is_not_the_leader_refuses_produce(healthy_cluster, topic_name):
    cluster = healthy_cluster
    create_topic(cluster.bootstrap_servers, topic_name, partitions=1, replication_factor=3)
    leader = cluster.wait_for_full_isr(topic_name, 1, timeout_s=30)[0].leader
    follower = next(b for b in cluster.broker_ids if b != leader)
    assert raw_produce(cluster.address(follower), topic_name, 0, b"misrouted") == NOT_LEADER_OR_FOLLOWER
    assert raw_produce(cluster.address(leader), topic_name, 0, b"routed") == 0


def _describe_producers(address: str, topic: str, *indexes: int) -> list:
    """(error code, [(epoch, last sequence, coordinator epoch, open transaction's start)]) of each partition, as
    the broker at ``address`` answers DescribeProducers."""
    from kafka.protocol.admin import DescribeProducersRequest

    from broker_sim.protocol.client import WireConnection

    with WireConnection.to(address, timeout_s=10, client_id="pylog-cluster-tests") as connection:
        response = connection.call(DescribeProducersRequest[0](topics=[DescribeProducersRequest.TopicRequest(
            name=topic, partition_indexes=list(indexes))]))
    return [(p.error_code, [(s.producer_epoch, s.last_sequence, s.coordinator_epoch, s.current_txn_start_offset)
                            for s in p.active_producers]) for p in response.topics[0].partitions]


def test_describe_producers_answers_from_every_replica_and_not_leader_elsewhere(healthy_cluster, topic_name):
    """DescribeProducers as Kafka's ReplicaManager.activeProducerState: the leader and the follower each answer
    from their own replica (the follower's state came with the replicated batches, as ``describe-producers
    --broker-id`` reads it), a broker with no replica of the partition NOT_LEADER_OR_FOLLOWER, and a partition
    the topic does not have UNKNOWN_TOPIC_OR_PARTITION on every broker."""
    cluster = healthy_cluster
    create_topic(cluster.bootstrap_servers, topic_name, partitions=1, replication_factor=2)
    state = cluster.wait_for_full_isr(topic_name, 1, timeout_s=30)[0]
    results = produce(cluster.bootstrap_servers, topic_name, [b"a", b"b", b"c"], acks="all", idempotent=True)
    assert [error_code(err) for err, _ in results] == [None] * 3
    outsider = next(b for b in cluster.broker_ids if b not in state.replicas)
    answers = {b: _describe_producers(cluster.address(b), topic_name, 0, 1) for b in cluster.broker_ids}
    for replica in state.replicas:
        assert answers[replica] == [(0, [(0, 2, -1, -1)]), (UNKNOWN_TOPIC_OR_PARTITION, [])], (replica, answers)
    assert answers[outsider] == [(NOT_LEADER_OR_FOLLOWER, []), (UNKNOWN_TOPIC_OR_PARTITION, [])], answers


def test_controller_failover(healthy_cluster, topic_name):
    """Kill the controller: another broker takes over, and a topic created afterwards gets leaders
    and takes writes."""
    cluster = healthy_cluster
    old = cluster.controller_id()
    assert old in cluster.broker_ids
    cluster.kill(old)
    new = cluster.wait_for(lambda md: md.controller_id if md.controller_id not in (-1, old) else None,
                           timeout_s=30, what=f"a controller other than the killed broker {old}")
    assert new in cluster.available_brokers()

    create_topic(cluster.bootstrap_servers, topic_name, partitions=4, replication_factor=2)
    states = cluster.wait_for_full_isr(topic_name, 4, timeout_s=30)
    assert all(s.leader in cluster.available_brokers() and old not in s.replicas for s in states.values())
    for partition in states:
        results = produce(cluster.bootstrap_servers, topic_name, [b"after-failover"] * 5, partition=partition)
        assert [error_code(err) for err, _ in results] == [None] * 5

    cluster.restart(old)
    assert cluster.controller_id() == new, "a restarted broker must not take the controller back"


def test_restarted_follower_catches_up_into_the_isr(healthy_cluster, topic_name):
    cluster = healthy_cluster
    create_topic(cluster.bootstrap_servers, topic_name, partitions=1, replication_factor=3,
                 configs={"min.insync.replicas": 2})
    leader = cluster.wait_for_full_isr(topic_name, 1, timeout_s=30)[0].leader
    follower = next(b for b in cluster.broker_ids if b != leader)
    assert [error_code(e) for e, _ in produce(cluster.bootstrap_servers, topic_name, [b"before"] * 100)] == [None] * 100

    cluster.kill(follower)
    cluster.wait_for(lambda md: follower not in md.partitions[(topic_name, 0)].isr, topics=[topic_name],
                     timeout_s=30, what=f"broker {follower} to leave the ISR")
    values = [f"while-down-{i}".encode() for i in range(2000)]
    results = produce(cluster.bootstrap_servers, topic_name, values, acks="all")
    assert [error_code(e) for e, _ in results] == [None] * 2000, "acks=all must work with 2 of 3 in the ISR"

    cluster.restart(follower)
    state = cluster.wait_for(
        lambda md: md.partitions[(topic_name, 0)] if follower in md.partitions[(topic_name, 0)].isr else None,
        topics=[topic_name], timeout_s=30, what=f"broker {follower} to rejoin the ISR")
    assert set(state.isr) == set(cluster.broker_ids)
    dirs = cluster.partition_dirs(topic_name, 0)
    assert set(dirs) == set(cluster.broker_ids)
    logs = {b: batch_digests(d) for b, d in dirs.items()}
    assert replica_difference(logs) is None, replica_difference(logs)
    assert logs[follower][-1][1] == 2099


def test_not_enough_replicas_when_two_of_three_are_down(healthy_cluster, topic_name):
    cluster = healthy_cluster
    create_topic(cluster.bootstrap_servers, topic_name, partitions=1, replication_factor=3,
                 configs={"min.insync.replicas": 2})
    leader = cluster.wait_for_full_isr(topic_name, 1, timeout_s=30)[0].leader
    followers = [b for b in cluster.broker_ids if b != leader]
    for follower in followers:
        cluster.kill(follower)
    cluster.wait_for(lambda md: md.partitions[(topic_name, 0)].isr == (leader,), topics=[topic_name],
                     timeout_s=30, what=f"the ISR to shrink to the leader {leader}")
    assert cluster.leader_of(topic_name, 0) == leader

    results = produce(cluster.address(leader), topic_name, [b"needs-two"], acks="all", retries=0, timeout_s=10)
    assert error_code(results[0][0]) == NOT_ENOUGH_REPLICAS, results
    assert raw_produce(cluster.address(leader), topic_name, 0, b"needs-two-raw", acks=-1) == NOT_ENOUGH_REPLICAS

    results = produce(cluster.address(leader), topic_name, [b"one-is-enough"], acks="1", retries=0, timeout_s=10)
    assert error_code(results[0][0]) is None
    # the refused acks=all writes were never appended; the acks=1 one is committed (the ISR is the leader)
    assert read_partition(cluster.address(leader), topic_name, 0, 1, timeout_s=10) == [(0, b"one-is-enough")]


def test_a_leader_killed_before_its_first_append_rejoins_as_follower(healthy_cluster, topic_name):
    """A broker that became leader (its epoch cache got an entry at its log end) and died before
    appending anything must, once restarted as a follower, drop that entry and rejoin the ISR
    (Kafka's UnifiedLog.truncateTo truncates the epoch cache even when the log needs no truncation);
    otherwise it keeps announcing the dead epoch and the leader keeps answering diverging_epoch."""
    cluster = healthy_cluster
    create_topic(cluster.bootstrap_servers, topic_name, partitions=1, replication_factor=3,
                 configs={"min.insync.replicas": 2})
    preferred = cluster.wait_for_full_isr(topic_name, 1, timeout_s=30)[0].replicas[0]

    def state():
        return cluster.partition(topic_name, 0)

    def in_sync_leader_is(broker_id: int):
        return lambda md: (md.partitions[(topic_name, 0)].leader == broker_id
                           and set(md.partitions[(topic_name, 0)].isr) == set(cluster.broker_ids))

    assert [error_code(e) for e, _ in produce(cluster.bootstrap_servers, topic_name, [b"epoch-0"] * 50)] == [None] * 50
    cluster.kill(preferred)                                # leadership moves away (epoch 1)
    cluster.wait_for(lambda md: md.partitions[(topic_name, 0)].leader not in (-1, preferred), topics=[topic_name],
                     timeout_s=30, what="a new leader")
    assert [error_code(e) for e, _ in produce(cluster.bootstrap_servers, topic_name, [b"epoch-1"] * 50)] == [None] * 50
    cluster.restart(preferred)
    # the preferred-leader election (leader.imbalance.check.interval.seconds=5) gives it back to `preferred`
    cluster.wait_for(in_sync_leader_is(preferred), topics=[topic_name], timeout_s=60,
                     what=f"broker {preferred} to lead again after catching up")
    epoch_led = state().leader_epoch
    cluster.kill(preferred)                                # nothing was appended at that epoch
    cluster.wait_for(lambda md: md.partitions[(topic_name, 0)].leader not in (-1, preferred), topics=[topic_name],
                     timeout_s=30, what="a new leader")
    assert [error_code(e) for e, _ in produce(cluster.bootstrap_servers, topic_name, [b"later"] * 50)] == [None] * 50

    cluster.restart(preferred)
    cluster.wait_for(lambda md: preferred in md.partitions[(topic_name, 0)].isr, topics=[topic_name], timeout_s=30,
                     what=f"broker {preferred} (leader at epoch {epoch_led} without appending) to rejoin the ISR; "
                          f"see {cluster.log_path(preferred)} for 'diverging epoch'")
    logs = {b: batch_digests(d) for b, d in cluster.partition_dirs(topic_name, 0).items()}
    assert replica_difference(logs) is None, replica_difference(logs)
