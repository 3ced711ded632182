"""Kafka's rack-aware replica assignment (AdminUtils.assignReplicasToBrokersRackAware), pure and through the
ZooKeeper store's CreateTopics / CreatePartitions path."""
from __future__ import annotations

import random
from collections import Counter

import kafka.errors as Errors
import pytest

from broker_sim.controller.assignment import assign_added_partitions, assign_replicas, rack_alternated_brokers
from broker_sim.controller.cluster_state import BrokerEndpoint
from broker_sim.controller.metadata import MetadataError

# AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers
KAFKA_RACKS = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}


def test_rack_alternated_order_matches_kafka():
    assert rack_alternated_brokers(KAFKA_RACKS) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated_brokers({b: r for b, r in KAFKA_RACKS.items() if b != 5}) == [0, 3, 1, 4, 2]


def test_rack_aware_assignment_matches_kafkas_test_vector():
    expected = [[0, 3, 1], [3, 1, 5], [1, 5, 4], [5, 4, 2], [4, 2, 0], [2, 0, 3], [0, 4, 2]]
    assert assign_replicas(KAFKA_RACKS, 7, 3, start_index=0, start_partition=0) == expected


@pytest.mark.parametrize("seed", range(5))
def test_every_partition_spans_as_many_racks_as_it_can(seed):
    # AdminRackAwareTest.testAssignmentWithRackAware: 6 brokers in 3 racks, RF 3 -> one replica per rack, and
    # leaders and replicas evenly spread
    racks = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}
    result = assign_replicas(racks, 6, 3, rng=random.Random(seed))
    assert all(len({racks[b] for b in replicas}) == 3 for replicas in result), result
    assert Counter(r[0] for r in result) == {b: 1 for b in racks}
    assert Counter(b for r in result for b in r) == {b: 3 for b in racks}
    two = assign_replicas({1: "a", 2: "a", 3: "b", 4: "b"}, 8, 2, rng=random.Random(seed))
    assert all({"a", "b"} == {"a" if b < 3 else "b" for b in r} for r in two), two


def test_mixed_racks_are_refused_unless_rack_awareness_is_off():
    with pytest.raises(MetadataError) as exc:
        assign_replicas({1: "a", 2: None, 3: "b"}, 3, 2)
    assert exc.value.error is Errors.InvalidReplicationAssignmentError
    assert "brokers [2] have no broker.rack" in exc.value.message
    plain = assign_replicas({1: "a", 2: None, 3: "b"}, 3, 2, start_index=0, rack_aware=False)
    assert plain == assign_replicas([1, 2, 3], 3, 2, start_index=0)


def test_added_partitions_stay_rack_aware():
    racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    existing = assign_replicas(racks, 2, 2, start_index=0)
    added = assign_added_partitions(racks, existing, 6)
    assert len(added) == 4 and all(len({racks[b] for b in r}) == 2 for r in added), added


def test_the_store_places_new_topics_by_the_registered_racks(make_store):
    stores = {}
    for broker, rack in ((1, "a"), (2, "a"), (3, "b"), (4, "b")):
        stores[broker] = make_store(broker, register=False)
        stores[broker].register_broker(BrokerEndpoint(broker, "127.0.0.1", 19000 + broker, rack))
    info = stores[1].create_topic("spread", 8, replication_factor=2)
    rack_of = {1: "a", 2: "a", 3: "b", 4: "b"}
    assert all({rack_of[b] for b in r} == {"a", "b"} for r in info.replicas), info.replicas
    grown = stores[1].set_partition_count("spread", 12)
    assert all({rack_of[b] for b in r} == {"a", "b"} for r in grown.replicas), grown.replicas
    make_store(5)  # a broker without broker.rack joins
    with pytest.raises(MetadataError) as exc:
        stores[1].create_topic("mixed", 1, replication_factor=2)
    assert exc.value.error is Errors.InvalidReplicationAssignmentError
    assert "brokers [5] have no broker.rack" in exc.value.message


@pytest.mark.parametrize("configs, problem", [
    ({"broker.rack": "r" * 256}, "a rack is at most 255 characters, got 256"),
    ({"broker.rack": "a\nb"}, "a rack has printable characters only"),
    ({"replica.selector.class": "org.apache.kafka.common.replica.Other"}, "RackAwareReplicaSelector"),
])
def test_bad_rack_configs_are_refused_naming_the_config(configs, problem):
    from broker_sim.config import BrokerConfig, ConfigError

    with pytest.raises(ConfigError) as exc:
        BrokerConfig(configs)
    assert repr(next(iter(configs))) in str(exc.value) and problem in str(exc.value)


def test_local_cluster_racks_are_given_to_brokers_in_turn(tmp_path):
    from broker_sim.local.cluster import LocalCluster

    cluster = LocalCluster(tmp_path, 5, racks=["a", "b"], schema_registry=False)
    assert [cluster.rack_of(b) for b in cluster.broker_ids] == ["a", "b", "a", "b", "a"]
    with pytest.raises(ValueError, match="not both"):
        LocalCluster(tmp_path, 2, racks=["a"], configs={"broker.rack": "x"}, schema_registry=False)
