"""Followers fetch through incremental fetch sessions (KIP-227), and recover when the leader forgets one."""
from __future__ import annotations

from test_replication_brokers import KEY, cluster, produce_error, produce_request, wire  # noqa: F401

from broker_sim.testing.waiting import wait_until


def source_session(c, follower: int, leader: int):
    broker = c.brokers[follower]
    return c.call(broker, lambda: broker.replicas.fetcher.sources[leader].session)


def leader_sessions(c, leader: int):
    broker = c.brokers[leader]
    return broker.dispatcher.handlers[1].__self__.sessions


def test_a_follower_fetches_incrementally_and_starts_over_when_its_session_is_gone(cluster):  # noqa: F811
    c = cluster(2)
    c.create_topic({"min.insync.replicas": "2"})
    c.elect(leader=0, epoch=1, isr=[0, 1])
    for i in range(5):
        (response,) = wire(c.bootstrap(0), produce_request([b"before-%d" % i], acks=-1))
        assert produce_error(response) == (0, i)
    session = source_session(c, 1, 0)
    wait_until(lambda: session.incremental_fetches >= 5, timeout_s=10, what="five incremental fetches",
               interval_s=0.02)  # idle ones too
    first_id = session.id
    assert first_id != 0 and leader_sessions(c, 0).created == 1

    sessions = leader_sessions(c, 0)
    c.call(c.brokers[0], sessions.sessions.clear)  # as a leader restart or an eviction would
    for i in range(5, 10):  # acks=all still completes: the follower's next fetch is full, then incremental
        (response,) = wire(c.bootstrap(0), produce_request([b"after-%d" % i], acks=-1))
        assert produce_error(response) == (0, i)
    wait_until(lambda: session.id not in (0, first_id) and not session.full, timeout_s=10, what="a new session",
               interval_s=0.02)
    before = session.incremental_fetches
    wait_until(lambda: session.incremental_fetches > before + 3, timeout_s=10,
               what="incremental fetches in the new session", interval_s=0.02)
    leader, follower = c.partition_info(0), c.partition_info(1)
    assert follower["bytes"] == leader["bytes"] and follower["hw"] == leader["hw"] == 10
