"""ZkMetadataStore against a real ZooKeeper: registration, topics, caches, listener, ISR writes, session loss."""
from __future__ import annotations

import json
import threading

import kafka.errors as Errors
import pytest

from broker_sim.controller import zk_layout as L
from broker_sim.controller.cluster_state import BrokerEndpoint, PartitionState
from broker_sim.controller.metadata import MetadataError
from broker_sim.testing.waiting import wait_until


def write_state(store, topic, index, state):
    path = L.partition_state_path(topic, index)
    store.zk.ensure_path(L.partition_path(topic, index))
    if store.zk.exists(path):
        store.zk.set(path, L.encode_partition_state(state))
    else:
        store.zk.create(path, L.encode_partition_state(state))


def test_brokers_register_and_vanish_with_their_session(make_store):
    a = make_store(1)
    b = make_store(2)
    wait_until(lambda: set(a.brokers) == {1, 2}, timeout_s=20, what="set(a.brokers) == {1, 2}", interval_s=0.02)
    assert a.brokers[2].on("PLAINTEXT") == BrokerEndpoint(2, "127.0.0.1", 19002, None,
                                                          (("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 19002),))
    before = a.brokers
    b.close()
    wait_until(lambda: set(a.brokers) == {1}, timeout_s=20, what="set(a.brokers) == {1}", interval_s=0.02)
    assert set(before) == {1, 2}, "the old dict must not be mutated in place"


def test_cluster_id_is_shared_and_written_to_meta_properties(make_store, tmp_path):
    a = make_store(1)
    b = make_store(2)
    assert a.cluster_id and a.cluster_id == b.cluster_id
    assert L.decode_cluster_id(a.zk.get(L.CLUSTER_ID)[0]) == a.cluster_id
    props = (a.data_dir / "meta.properties").read_text()
    assert f"cluster.id={a.cluster_id}" in props and "broker.id=1" in props


def test_data_dir_of_another_cluster_is_refused(zookeeper, tmp_path):
    from broker_sim.controller.zk_store import ZkMetadataStore
    data_dir = tmp_path / "d"
    data_dir.mkdir()
    (data_dir / "meta.properties").write_text("version=1\nbroker.id=1\ncluster.id=other\n")
    store = ZkMetadataStore(f"{zookeeper.connect_string}/refuse", 1, data_dir,
                            session_timeout_ms=4000, connection_timeout_ms=10000, cluster_id="mine")
    try:
        with pytest.raises(RuntimeError, match="cluster.id other, not mine"):
            store.start()
    finally:
        store.close()


def test_duplicate_broker_id_is_refused(make_store):
    make_store(1)
    other = make_store(1, register=False)
    with pytest.raises(RuntimeError, match="already registered"):
        other.register_broker(BrokerEndpoint(1, "127.0.0.1", 1))


def test_create_topic_writes_kafka_layout_and_every_store_sees_it(make_store):
    a = make_store(1)
    b = make_store(2)
    c = make_store(3)
    wait_until(lambda: len(a.brokers) == 3, timeout_s=20, what="len(a.brokers) == 3", interval_s=0.02)
    seen = []
    b.listener = lambda: seen.append(b.topics)
    info = a.create_topic("orders", 6, {"retention.ms": "1000"}, replication_factor=2)
    assert info.partitions == 6 and all(len(r) == 2 and len(set(r)) == 2 for r in info.replicas)
    assert {r[0] for r in info.replicas} == {1, 2, 3}
    doc = json.loads(a.zk.get(L.topic_path("orders"))[0])
    assert doc["partitions"]["0"] == info.replicas[0] and doc["version"] == 3
    assert L.decode_topic_config(a.zk.get(L.topic_config_path("orders"))[0]) == {"retention.ms": "1000"}
    wait_until(lambda: "orders" in b.topics and "orders" in c.topics, timeout_s=20,
               what='"orders" in b.topics and "orders" in c.topics', interval_s=0.02)
    remote = b.get("orders")
    assert remote.topic_id == info.topic_id and remote.replicas == info.replicas
    assert remote.configs == {"retention.ms": "1000"}
    assert b.topics_by_id[info.topic_id] is remote
    wait_until(lambda: any("orders" in topics for topics in seen), timeout_s=20, what="listener saw the topic",
               interval_s=0.02)
    with pytest.raises(MetadataError) as exc:
        b.create_topic("orders", 1)
    assert exc.value.error is Errors.TopicAlreadyExistsError


def test_a_created_topic_stays_in_its_stores_topics_until_the_watch_delivers_it(make_store):
    """Read-your-writes: a watch event rebuilding ``topics`` before the new assignment znode's watch fired (its
    config's, another topic's) used to drop the topic, so a CreatePartitions right after failed UNKNOWN_TOPIC."""
    a = make_store(1)
    with a._lock:   # the watch callbacks wait: the assignment watch cannot deliver the topic meanwhile
        info = a.create_topic("fresh", 2)
        assert "fresh" not in a._assignments
        a._rebuild_topics()   # what any other watch event does
        assert a.get("fresh") is info and a.topics_by_id[info.topic_id] is info
    wait_until(lambda: "fresh" in a._assignments, timeout_s=20, what='"fresh" in a._assignments', interval_s=0.02)
    assert a.get("fresh").replicas == info.replicas and not a._created
    assert a.set_partition_count("fresh", 3).partitions == 3


def test_replication_factor_above_live_brokers(make_store):
    a = make_store(1)
    make_store(2)
    with pytest.raises(MetadataError) as exc:
        a.create_topic("t", 1, replication_factor=3)
    assert exc.value.error is Errors.InvalidReplicationFactorError
    assert exc.value.message == "Replication factor: 3 larger than available brokers: 2."


def test_explicit_assignment_and_validation(make_store):
    a = make_store(1)
    make_store(2)
    info = a.create_topic("t", 2, assignment=[[2, 1], [1, 2]])
    assert info.replicas == [[2, 1], [1, 2]]
    with pytest.raises(MetadataError, match="unavailable brokers"):
        a.create_topic("u", 1, assignment=[[7]])
    for name in ("bad name!", "abc\n", ".", "a" * 250):  # the single node's rule (validate_topic_name)
        with pytest.raises(MetadataError) as exc:
            a.create_topic(name, 1)
        assert exc.value.error is Errors.InvalidTopicError
    assert not a.zk.exists("/brokers/topics/abc\n")


def test_partition_count_and_configs_propagate(make_store):
    a = make_store(1)
    b = make_store(2)
    wait_until(lambda: len(a.brokers) == 2, timeout_s=20, what="len(a.brokers) == 2", interval_s=0.02)
    a.create_topic("t", 2, replication_factor=2)
    wait_until(lambda: "t" in b.topics, timeout_s=20, what='"t" in b.topics', interval_s=0.02)
    grown = a.set_partition_count("t", 4)
    assert grown.partitions == 4 and len(grown.replicas) == 4
    wait_until(lambda: b.topics["t"].partitions == 4, timeout_s=20, what='b.topics["t"].partitions == 4',
               interval_s=0.02)
    assert b.topics["t"].replicas == grown.replicas
    with pytest.raises(MetadataError) as exc:
        b.set_partition_count("t", 3)
    assert exc.value.error is Errors.InvalidPartitionsError
    a.set_configs("t", {"cleanup.policy": "compact"})
    wait_until(lambda: b.topics["t"].configs == {"cleanup.policy": "compact"}, timeout_s=20,
               what='b.topics["t"].configs == {"cleanup.policy": "compact"}', interval_s=0.02)
    with pytest.raises(MetadataError) as exc:
        a.set_configs("t", {"retention.ms": "soon"})
    assert exc.value.error is Errors.InvalidConfigurationError


def test_delete_topic_only_marks_the_request(make_store):
    a = make_store(1)
    a.create_topic("t", 1)
    a.delete_topic("t")
    assert a.zk.exists(L.delete_topic_path("t"))
    wait_until(lambda: a.topics_being_deleted == {"t"}, timeout_s=20, what='a.topics_being_deleted == {"t"}',
               interval_s=0.02)
    with pytest.raises(MetadataError) as exc:
        a.delete_topic("nope")
    assert exc.value.error is Errors.UnknownTopicOrPartitionError


def test_partition_states_and_controller_are_cached(make_store):
    a = make_store(1)
    a.create_topic("t", 2, assignment=[[1], [1]])
    write_state(a, "t", 1, PartitionState(1, 3, (1,), 7))
    wait_until(lambda: ("t", 1) in a.partition_states, timeout_s=20, what='("t", 1) in a.partition_states',
               interval_s=0.02)
    assert a.partition_states[("t", 1)] == PartitionState(1, 3, (1,), 7, 0)
    assert ("t", 0) not in a.partition_states
    a.zk.create(L.CONTROLLER, L.encode_controller(1), ephemeral=True)
    wait_until(lambda: a.controller_id == 1, timeout_s=20, what="a.controller_id == 1", interval_s=0.02)
    a.zk.delete(L.CONTROLLER)
    wait_until(lambda: a.controller_id == -1, timeout_s=20, what="a.controller_id == -1", interval_s=0.02)


def test_update_isr_is_conditional_and_notifies(make_store):
    a = make_store(1)
    make_store(2)
    a.create_topic("t", 1, assignment=[[1, 2]])
    write_state(a, "t", 0, PartitionState(1, 5, (1, 2), 3))
    wait_until(lambda: ("t", 0) in a.partition_states, timeout_s=20, what='("t", 0) in a.partition_states',
               interval_s=0.02)
    state = a.update_isr("t", 0, (1,), zk_version=0)
    assert state == PartitionState(1, 5, (1,), 3, 1)
    assert a.partition_states[("t", 0)] == state
    notes = a.zk.get_children(L.ISR_CHANGE_NOTIFICATION)
    assert len(notes) == 1 and notes[0].startswith("isr_change_")
    assert L.decode_isr_change(a.zk.get(L.isr_change_path(notes[0]))[0]) == {("t", 0)}
    assert a.update_isr("t", 0, (1, 2), zk_version=0) is None, "stale zk_version must be refused"
    assert L.decode_partition_state(*a.zk.get(L.partition_state_path("t", 0))[:1], 1).isr == (1,)
    assert a.update_isr("t", 9, (1,), zk_version=0) is None


def test_session_expiry_reregisters_and_watches_survive(make_store, expire_session, zk_connect):
    a = make_store(1)
    b = make_store(2)
    wait_until(lambda: set(b.brokers) == {1, 2}, timeout_s=20, what="set(b.brokers) == {1, 2}", interval_s=0.02)
    a.create_topic("before", 1)
    wait_until(lambda: "before" in a.topics, timeout_s=20, what='"before" in a.topics', interval_s=0.02)
    expire_session(a.zk, zk_connect)
    # the registration is back under the new session
    wait_until(lambda: a.zk.exists(L.broker_path(1)) is not None
               and a.zk.exists(L.broker_path(1)).ephemeralOwner == a.zk.client_id[0],
               timeout_s=20,
               what="broker 1's registration owned by a's new session",
               interval_s=0.02)
    wait_until(lambda: set(b.brokers) == {1, 2} and set(a.brokers) == {1, 2}, timeout_s=20,
               what="set(b.brokers) == {1, 2} and set(a.brokers) == {1, 2}", interval_s=0.02)
    # watches of the expired session were re-armed: a's cache follows changes made after the expiry
    b.create_topic("after", 1)
    wait_until(lambda: "after" in a.topics, timeout_s=20, what='"after" in a.topics', interval_s=0.02)
    b.set_configs("before", {"retention.ms": "5"})
    wait_until(lambda: a.topics["before"].configs == {"retention.ms": "5"}, timeout_s=20,
               what='a.topics["before"].configs == {"retention.ms": "5"}', interval_s=0.02)
    b.close()
    wait_until(lambda: set(a.brokers) == {1}, timeout_s=20, what="set(a.brokers) == {1}", interval_s=0.02)


def test_controlled_shutdown_waits_for_the_request_to_be_deleted(make_store):
    a = make_store(1)
    path = L.controlled_shutdown_path(1)
    threading.Timer(0.3, lambda: wait_until(lambda: a.zk.exists(path), timeout_s=20, what="a.zk.exists(path)",
                                            interval_s=0.02) and a.zk.delete(path)).start()
    assert a.controlled_shutdown(10) is True
    assert a.controlled_shutdown(0.3) is False, "nobody answers: times out and withdraws the request"
    assert a.zk.exists(path) is None
