"""Coordinator fixtures: the fake clock, ``__consumer_offsets`` and ``__transaction_state`` in tmp_path, and
group coordinators over the first."""
from __future__ import annotations

import pytest

from broker_sim.coordinator.group.coordinator import GroupCoordinator
from broker_sim.coordinator.group.metadata import GroupConfig
from broker_sim.coordinator.group.records import OFFSETS_TOPIC
from broker_sim.coordinator.txn.records import TRANSACTION_STATE_TOPIC

from group_helpers import START_MS, DirInternalTopic

from broker_sim.testing.clock import ManualClock


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(start_ms=START_MS)


@pytest.fixture
def offsets_topic(tmp_path, clock) -> DirInternalTopic:
    topic = DirInternalTopic(OFFSETS_TOPIC, tmp_path / "data", 3, clock)
    yield topic
    topic.close()


@pytest.fixture
def state_topic(tmp_path, clock) -> DirInternalTopic:
    topic = DirInternalTopic(TRANSACTION_STATE_TOPIC, tmp_path / "data", 3, clock)
    yield topic
    topic.close()


@pytest.fixture
def make_coordinator(offsets_topic, clock):
    """Build a coordinator over ``offsets_topic``; topics ``events`` and ``other`` (4 partitions each) exist."""

    def make(**config) -> GroupCoordinator:
        coordinator = GroupCoordinator(GroupConfig(offsets_partitions=3, **config), offsets_topic, clock=clock,
                                       partition_exists=lambda t, p: t in ("events", "other") and 0 <= p < 4)
        coordinator.startup()
        return coordinator

    return make
