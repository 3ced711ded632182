"""Kafka's rack-unaware replica assignment (AdminUtils.assignReplicasToBrokers)."""
from __future__ import annotations

import random
from collections import Counter

import kafka.errors as Errors
import pytest

from broker_sim.controller.assignment import assign_added_partitions, assign_replicas, validate_assignment
from broker_sim.controller.metadata import MetadataError


def test_matches_kafkas_admin_utils_test_with_a_fixed_start():
    # AdminUtilsTest.testReplicaAssignment: 5 brokers, 10 partitions, rf 3, start index 0
    expected = [[0, 1, 2], [1, 2, 3], [2, 3, 4], [3, 4, 0], [4, 0, 1],
                [0, 2, 3], [1, 3, 4], [2, 4, 0], [3, 0, 1], [4, 1, 2]]
    assert assign_replicas([4, 2, 0, 1, 3], 10, 3, start_index=0) == expected


def test_leaders_and_replicas_are_spread_evenly_and_distinct():
    result = assign_replicas([1, 2, 3], 6, 3, rng=random.Random(7))
    assert all(len(set(r)) == 3 for r in result)
    assert Counter(r[0] for r in result) == {1: 2, 2: 2, 3: 2}
    assert Counter(b for r in result for b in r) == {1: 6, 2: 6, 3: 6}


def test_random_start_varies_with_the_rng():
    starts = {assign_replicas([1, 2, 3], 1, 1, rng=random.Random(seed))[0][0] for seed in range(30)}
    assert starts == {1, 2, 3}


def test_replication_factor_above_live_brokers_is_kafkas_error():
    with pytest.raises(MetadataError) as info:
        assign_replicas([1, 2], 3, 3)
    assert info.value.error is Errors.InvalidReplicationFactorError
    assert info.value.message == "Replication factor: 3 larger than available brokers: 2."
    with pytest.raises(MetadataError, match="Number of partitions must be larger than 0"):
        assign_replicas([1], 0, 1)
    with pytest.raises(MetadataError, match="Replication factor must be larger than 0"):
        assign_replicas([1], 1, 0)


def test_added_partitions_continue_the_layout():
    existing = assign_replicas([0, 1, 2, 3, 4], 5, 3, start_index=0)
    added = assign_added_partitions([0, 1, 2, 3, 4], existing, 10)
    assert existing + added == assign_replicas([0, 1, 2, 3, 4], 10, 3, start_index=0)
    with pytest.raises(MetadataError):
        assign_added_partitions([0, 1], [[0, 1]], 1)


def test_validate_explicit_assignment():
    validate_assignment([[1, 2], [2, 1]], 2, [1, 2])
    with pytest.raises(MetadataError, match="duplicate"):
        validate_assignment([[1, 1]], 1, [1, 2])
    with pytest.raises(MetadataError, match=r"unavailable brokers \[9\]"):
        validate_assignment([[1, 9]], 1, [1, 2])
    with pytest.raises(MetadataError, match="same, non-zero"):
        validate_assignment([[1, 2], [1]], 2, [1, 2])
    with pytest.raises(MetadataError, match="has 1 partitions, not 2"):
        validate_assignment([[1]], 2, [1])
