"""The controller against a real ZooKeeper: election, fencing, leader election on broker death and rejoin,
preferred-leader election, controlled shutdown, topic deletion.  "Brokers" are ZkMetadataStore instances
(registered endpoints) each with a Controller; killing a broker = closing its ZooKeeper session."""
from __future__ import annotations

import kafka.errors as Errors
import pytest

from broker_sim.controller import zk_layout as L
from broker_sim.controller.cluster_state import NO_LEADER, PartitionState
from broker_sim.testing.waiting import wait_until


def kill(broker):
    store, controller = broker
    store.close()
    controller.close()


def active(brokers):
    return [c for _, c in brokers if c.is_active]


def settle(store, leader: int):
    """Wait until the controller has handled every event queued so far.  It handles events in order, in
    batches; a marker topic's state may be written mid-batch, so a second marker created after the first
    one's state appeared proves the whole earlier batch is done."""
    import uuid
    for _ in range(2):
        name = f"marker-{uuid.uuid4().hex[:8]}"
        store.create_topic(name, 1, assignment=[[leader]])
        wait_until(lambda: state(store, name, 0) is not None, timeout_s=20, what="controller caught up",
                   interval_s=0.02)


def state(store, topic, index):
    return store.partition_states.get((topic, index))


def zk_state(store, topic, index):
    data, stat = store.zk.get(L.partition_state_path(topic, index))
    return L.decode_partition_state(data, stat.version)


def test_exactly_one_controller_and_failover_when_its_session_ends(make_broker):
    brokers = [make_broker(i) for i in (1, 2, 3)]
    wait_until(lambda: len(active(brokers)) == 1, timeout_s=20, what="len(active(brokers)) == 1", interval_s=0.02)
    first = active(brokers)[0]
    store = brokers[0][0]
    wait_until(lambda: store.controller_id == first.broker_id, timeout_s=20,
               what="store.controller_id == first.broker_id", interval_s=0.02)
    epoch = first.epoch
    assert L.decode_controller_epoch(store.zk.get(L.CONTROLLER_EPOCH)[0]) == epoch
    victim = next(b for b in brokers if b[1] is first)
    kill(victim)
    rest = [b for b in brokers if b is not victim]
    wait_until(lambda: len(active(rest)) == 1, timeout_s=20, what="a new controller", interval_s=0.02)
    second = active(rest)[0]
    assert second.epoch == epoch + 1
    wait_until(lambda: rest[0][0].controller_id == second.broker_id, timeout_s=20,
               what="rest[0][0].controller_id == second.broker_id", interval_s=0.02)


def test_new_topic_gets_leaders_and_isr_from_its_assignment(make_broker):
    brokers = [make_broker(i) for i in (1, 2, 3)]
    store = brokers[0][0]
    wait_until(lambda: len(store.brokers) == 3 and len(active(brokers)) == 1, timeout_s=20,
               what="len(store.brokers) == 3 and len(active(brokers)) == 1", interval_s=0.02)
    info = store.create_topic("t", 6, replication_factor=3)
    wait_until(lambda: all(state(store, "t", p) for p in range(6)), timeout_s=20,
               what='all(state(store, "t", p) for p in range(6))', interval_s=0.02)
    controller = active(brokers)[0]
    for p in range(6):
        s = state(store, "t", p)
        assert s.leader == info.replicas[p][0] and s.isr == tuple(info.replicas[p])
        assert s.leader_epoch == 0 and s.controller_epoch == controller.epoch
    other = brokers[2][0]
    wait_until(lambda: all(state(other, "t", p) for p in range(6)), timeout_s=20, what="every store sees the states",
               interval_s=0.02)
    store.set_partition_count("t", 8)
    wait_until(lambda: state(store, "t", 7) is not None, timeout_s=20, what='state(store, "t", 7) is not None',
               interval_s=0.02)
    assert state(store, "t", 7).leader == store.topics["t"].replicas[7][0]


def test_broker_death_moves_leadership_to_live_isr_and_drops_it_from_isrs(make_broker):
    brokers = {i: make_broker(i) for i in (1, 2, 3)}
    store = brokers[1][0]
    wait_until(lambda: len(store.brokers) == 3, timeout_s=20, what="len(store.brokers) == 3", interval_s=0.02)
    store.create_topic("t", 3, assignment=[[2, 1, 3], [1, 2, 3], [3, 2, 1]])
    wait_until(lambda: all(state(store, "t", p) for p in range(3)), timeout_s=20,
               what='all(state(store, "t", p) for p in range(3))', interval_s=0.02)
    kill(brokers[2])
    wait_until(lambda: state(store, "t", 0).leader == 1, timeout_s=20, what="partition 0 led by 1", interval_s=0.02)
    wait_until(lambda: 2 not in state(store, "t", 1).isr and 2 not in state(store, "t", 2).isr, timeout_s=20,
               what='2 not in state(store, "t", 1).isr and 2 not in state(store, "t", 2).isr', interval_s=0.02)
    assert state(store, "t", 0) == PartitionState(1, 1, (1, 3), state(store, "t", 0).controller_epoch,
                                                  state(store, "t", 0).zk_version)
    # followers only: no epoch bump, leader kept
    assert state(store, "t", 1).leader == 1 and state(store, "t", 1).leader_epoch == 0
    assert state(store, "t", 1).isr == (1, 3)
    assert state(store, "t", 2).leader == 3 and state(store, "t", 2).leader_epoch == 0
    assert zk_state(store, "t", 0).leader == 1


def test_no_live_isr_member_leaves_the_partition_offline_until_it_rejoins(make_broker):
    brokers = {i: make_broker(i) for i in (1, 2, 3)}
    store = brokers[3][0]
    wait_until(lambda: len(store.brokers) == 3, timeout_s=20, what="len(store.brokers) == 3", interval_s=0.02)
    store.create_topic("t", 1, assignment=[[1, 2]])
    wait_until(lambda: state(store, "t", 0) is not None, timeout_s=20, what='state(store, "t", 0) is not None',
               interval_s=0.02)
    kill(brokers[2])
    wait_until(lambda: state(store, "t", 0).isr == (1,), timeout_s=20, what='state(store, "t", 0).isr == (1,)',
               interval_s=0.02)
    kill(brokers[1])
    wait_until(lambda: state(store, "t", 0).leader == NO_LEADER, timeout_s=20,
               what='state(store, "t", 0).leader == NO_LEADER', interval_s=0.02)
    s = state(store, "t", 0)
    assert s.isr == (1,) and s.leader_epoch == 1, "offline keeps the last ISR member, epoch + 1"
    # broker 2 comes back: it is not in the ISR, so a clean election leaves the partition offline
    make_broker(2)
    wait_until(lambda: len(store.brokers) == 2, timeout_s=20, what="len(store.brokers) == 2", interval_s=0.02)
    settle(store, leader=3)
    assert state(store, "t", 0).leader == NO_LEADER
    # broker 1 (the last ISR member) rejoins: it leads again
    make_broker(1)
    wait_until(lambda: state(store, "t", 0).leader == 1, timeout_s=20, what="rejoined ISR member leads",
               interval_s=0.02)
    assert state(store, "t", 0).leader_epoch == 2 and state(store, "t", 0).isr == (1,)


def test_unclean_election_elects_a_live_replica_outside_the_isr(make_broker):
    brokers = {i: make_broker(i) for i in (1, 2, 3)}
    store = brokers[3][0]
    wait_until(lambda: len(store.brokers) == 3, timeout_s=20, what="len(store.brokers) == 3", interval_s=0.02)
    store.create_topic("t", 1, {"unclean.leader.election.enable": "true"}, assignment=[[1, 2]])
    wait_until(lambda: state(store, "t", 0) is not None, timeout_s=20, what='state(store, "t", 0) is not None',
               interval_s=0.02)
    # broker 2 drops out of the ISR (as a lagging follower would), then the leader dies
    s = state(store, "t", 0)
    assert store.update_isr("t", 0, (1,), s.zk_version) is not None
    kill(brokers[1])
    wait_until(lambda: state(store, "t", 0).leader == 2, timeout_s=20, what="unclean leader 2", interval_s=0.02)
    assert state(store, "t", 0).isr == (2,) and state(store, "t", 0).leader_epoch == 1


def test_stale_controller_is_fenced_and_resigns(make_broker):
    brokers = {i: make_broker(i) for i in (1, 2, 3)}
    store_of = {i: b[0] for i, b in brokers.items()}
    wait_until(lambda: len(store_of[1].brokers) == 3 and len(active(brokers.values())) == 1, timeout_s=20,
               what="len(store_of[1].brokers) == 3 and len(active(brokers.values())) == 1", interval_s=0.02)
    old = active(brokers.values())[0]
    old_epoch = old.epoch
    follower = next(i for i in brokers if i != old.broker_id)
    watcher = store_of[next(i for i in brokers if i not in (old.broker_id, follower))]
    watcher.create_topic("t", 1, assignment=[[old.broker_id, follower]])
    wait_until(lambda: state(watcher, "t", 0) is not None, timeout_s=20, what='state(watcher, "t", 0) is not None',
               interval_s=0.02)
    # another controller's election bumped the epoch behind this one's back
    data, stat = watcher.zk.get(L.CONTROLLER_EPOCH)
    watcher.zk.set(L.CONTROLLER_EPOCH, L.encode_controller_epoch(old_epoch + 1), version=stat.version)
    kill(brokers[follower])  # the old controller must shrink the ISR: its fenced write fails, it resigns
    wait_until(lambda: state(watcher, "t", 0).isr == (old.broker_id,), timeout_s=20,
               what="ISR shrink by a fresh controller", interval_s=0.02)
    s = zk_state(watcher, "t", 0)
    assert s.controller_epoch == old_epoch + 2, "written after re-election, never with the stale epoch"
    assert L.decode_controller_epoch(watcher.zk.get(L.CONTROLLER_EPOCH)[0]) == old_epoch + 2


def test_stale_controller_write_is_refused_by_zookeeper(make_broker):
    from broker_sim.controller.zk_controller import ControllerMovedError
    brokers = {i: make_broker(i) for i in (1, 2)}
    store = brokers[1][0]
    wait_until(lambda: len(active(brokers.values())) == 1, timeout_s=20, what="len(active(brokers.values())) == 1",
               interval_s=0.02)
    store.create_topic("t", 1, assignment=[[1, 2]])
    wait_until(lambda: state(store, "t", 0) is not None, timeout_s=20, what='state(store, "t", 0) is not None',
               interval_s=0.02)
    controller = active(brokers.values())[0]
    data, stat = store.zk.get(L.CONTROLLER_EPOCH)
    store.zk.set(L.CONTROLLER_EPOCH, L.encode_controller_epoch(controller.epoch + 5), version=stat.version)
    current = zk_state(store, "t", 0)
    with pytest.raises(ControllerMovedError):
        controller._write_states({("t", 0): PartitionState(2, 9, (2,), controller.epoch)}, {("t", 0): current})
    assert zk_state(store, "t", 0) == current


def test_preferred_leader_election_moves_leadership_back(make_broker):
    brokers = {i: make_broker(i) for i in (1, 2)}
    store = brokers[2][0]
    wait_until(lambda: len(store.brokers) == 2, timeout_s=20, what="len(store.brokers) == 2", interval_s=0.02)
    store.create_topic("t", 1, assignment=[[1, 2]])
    wait_until(lambda: state(store, "t", 0) is not None, timeout_s=20, what='state(store, "t", 0) is not None',
               interval_s=0.02)
    kill(brokers[1])
    wait_until(lambda: state(store, "t", 0).leader == 2, timeout_s=20, what='state(store, "t", 0).leader == 2',
               interval_s=0.02)
    one = make_broker(1)
    wait_until(lambda: len(store.brokers) == 2, timeout_s=20, what="len(store.brokers) == 2", interval_s=0.02)
    # back, but not in the ISR yet: no preferred election
    for _, c in (brokers[2], one):
        c.elect_preferred_leaders()
    settle(store, leader=2)
    assert state(store, "t", 0).leader == 2
    s = state(store, "t", 0)
    assert store.update_isr("t", 0, (2, 1), s.zk_version) is not None  # the leader re-admits 1
    for _, c in (brokers[2], one):
        c.elect_preferred_leaders()
    wait_until(lambda: state(store, "t", 0).leader == 1, timeout_s=20, what="preferred leader 1 back", interval_s=0.02)
    assert state(store, "t", 0).leader_epoch == 2 and set(state(store, "t", 0).isr) == {1, 2}


def test_automatic_preferred_election_on_the_imbalance_check(make_broker):
    brokers = {i: make_broker(i, **{"auto.leader.rebalance.enable": True}) for i in (1, 2)}
    store = brokers[2][0]
    wait_until(lambda: len(store.brokers) == 2, timeout_s=20, what="len(store.brokers) == 2", interval_s=0.02)
    store.create_topic("t", 1, assignment=[[1, 2]])
    wait_until(lambda: state(store, "t", 0) is not None, timeout_s=20, what='state(store, "t", 0) is not None',
               interval_s=0.02)
    kill(brokers[1])
    wait_until(lambda: state(store, "t", 0).leader == 2, timeout_s=20, what='state(store, "t", 0).leader == 2',
               interval_s=0.02)
    make_broker(1, **{"auto.leader.rebalance.enable": True})
    s = state(store, "t", 0)
    wait_until(lambda: len(store.brokers) == 2, timeout_s=20, what="len(store.brokers) == 2", interval_s=0.02)
    assert store.update_isr("t", 0, (2, 1), s.zk_version) is not None
    wait_until(lambda: state(store, "t", 0).leader == 1, timeout_s=15, what="periodic preferred election",
               interval_s=0.02)


def test_controlled_shutdown_moves_leaderships_before_returning(make_broker):
    brokers = {i: make_broker(i) for i in (1, 2, 3)}
    store = brokers[1][0]
    wait_until(lambda: len(store.brokers) == 3, timeout_s=20, what="len(store.brokers) == 3", interval_s=0.02)
    store.create_topic("t", 3, assignment=[[2, 1, 3], [1, 2, 3], [2, 3, 1]])
    store.create_topic("solo", 1, assignment=[[2]])
    wait_until(lambda: all(state(store, "t", p) for p in range(3)) and state(store, "solo", 0), timeout_s=20,
               what='all(state(store, "t", p) for p in range(3)) and state(store, "solo", 0)', interval_s=0.02)
    leaving = brokers[2][0]
    assert leaving.controlled_shutdown(15) is True
    s0, s1, s2 = (zk_state(store, "t", p) for p in range(3))
    assert s0.leader == 1 and s0.leader_epoch == 1 and 2 not in s0.isr
    assert s2.leader == 3 and s2.leader_epoch == 1 and 2 not in s2.isr
    assert s1.leader == 1 and s1.leader_epoch == 0 and s1.isr == (1, 3)
    assert zk_state(store, "solo", 0).leader == 2, "no other replica: stays until the broker dies"
    assert store.zk.exists(L.controlled_shutdown_path(2)) is None
    # the leaving broker is never elected again while it lives, even back in the ISR and preferred
    s0 = zk_state(store, "t", 0)
    assert store.update_isr("t", 0, (1, 3, 2), s0.zk_version) is not None
    for _, c in brokers.values():
        c.elect_preferred_leaders()
    settle(store, leader=1)
    assert zk_state(store, "t", 0).leader == 1
    kill(brokers[2])
    wait_until(lambda: state(store, "solo", 0).leader == NO_LEADER, timeout_s=20,
               what='state(store, "solo", 0).leader == NO_LEADER', interval_s=0.02)
    assert zk_state(store, "t", 0).leader == 1


def test_topic_deletion_removes_every_znode(make_broker):
    brokers = {i: make_broker(i) for i in (1, 2)}
    store = brokers[1][0]
    other = brokers[2][0]
    wait_until(lambda: len(store.brokers) == 2, timeout_s=20, what="len(store.brokers) == 2", interval_s=0.02)
    store.create_topic("doomed", 2, {"retention.ms": "5"}, replication_factor=2)
    wait_until(lambda: state(other, "doomed", 1) is not None, timeout_s=20,
               what='state(other, "doomed", 1) is not None', interval_s=0.02)
    store.delete_topic("doomed")
    wait_until(lambda: "doomed" not in other.topics and "doomed" not in store.topics, timeout_s=20,
               what='"doomed" not in other.topics and "doomed" not in store.topics', interval_s=0.02)
    wait_until(lambda: not store.zk.exists(L.delete_topic_path("doomed")), timeout_s=20,
               what='not store.zk.exists(L.delete_topic_path("doomed"))', interval_s=0.02)
    for path in (L.topic_path("doomed"), L.topic_config_path("doomed")):
        assert store.zk.exists(path) is None
    wait_until(lambda: not any(k[0] == "doomed" for k in other.partition_states), timeout_s=20,
               what='not any(k[0] == "doomed" for k in other.partition_states)', interval_s=0.02)
    # the name is free again
    store.create_topic("doomed", 1, replication_factor=1)
    wait_until(lambda: state(other, "doomed", 0) is not None, timeout_s=20,
               what='state(other, "doomed", 0) is not None', interval_s=0.02)
    assert state(other, "doomed", 0).leader_epoch == 0


def test_isr_change_notifications_are_consumed(make_broker):
    brokers = {i: make_broker(i) for i in (1, 2)}
    store = brokers[1][0]
    wait_until(lambda: len(store.brokers) == 2, timeout_s=20, what="len(store.brokers) == 2", interval_s=0.02)
    store.create_topic("t", 1, assignment=[[1, 2]])
    wait_until(lambda: state(store, "t", 0) is not None, timeout_s=20, what='state(store, "t", 0) is not None',
               interval_s=0.02)
    assert store.update_isr("t", 0, (1,), state(store, "t", 0).zk_version) is not None
    wait_until(lambda: store.zk.get_children(L.ISR_CHANGE_NOTIFICATION) == [], timeout_s=20,
               what="store.zk.get_children(L.ISR_CHANGE_NOTIFICATION) == []", interval_s=0.02)


def test_create_topic_errors_have_kafka_classes(make_broker):
    store, _ = make_broker(1)
    from broker_sim.controller.metadata import MetadataError
    with pytest.raises(MetadataError) as exc:
        store.create_topic("t", 1, replication_factor=2)
    assert exc.value.error is Errors.InvalidReplicationFactorError


def test_controller_session_expiry_hands_over_and_the_broker_comes_back(make_broker,
                                                                       expire_session, zk_connect):
    brokers = {i: make_broker(i) for i in (1, 2)}
    store = brokers[1][0]
    wait_until(lambda: len(store.brokers) == 2 and len(active(brokers.values())) == 1, timeout_s=20,
               what="len(store.brokers) == 2 and len(active(brokers.values())) == 1", interval_s=0.02)
    first = active(brokers.values())[0]
    epoch = first.epoch
    store.create_topic("t", 1, assignment=[[first.broker_id, 3 - first.broker_id]])
    wait_until(lambda: state(store, "t", 0) is not None, timeout_s=20, what='state(store, "t", 0) is not None',
               interval_s=0.02)
    expire_session(brokers[first.broker_id][0].zk, zk_connect)
    # the expired broker lost its leadership (epoch + 1) and its controllership; both come back clean
    wait_until(lambda: any(c.is_active and c.epoch > epoch for _, c in brokers.values()), timeout_s=20,
               what="new controller", interval_s=0.02)
    wait_until(lambda: len(active(brokers.values())) == 1, timeout_s=20, what="len(active(brokers.values())) == 1",
               interval_s=0.02)
    wait_until(lambda: set(store.brokers) == {1, 2}, timeout_s=20, what="re-registered", interval_s=0.02)
    other = 3 - first.broker_id
    wait_until(lambda: state(store, "t", 0).leader == other and state(store, "t", 0).leader_epoch == 1, timeout_s=20,
               what="leadership moved off the expired broker", interval_s=0.02)
