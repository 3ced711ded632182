"""Coordinator fixtures: the fake clock, ``__consumer_offsets`` in tmp_path, and coordinators over it."""
from __future__ import annotations

import pytest

from broker_sim.coordinator.group.coordinator import GroupCoordinator
from broker_sim.coordinator.group.metadata import GroupConfig

from group_helpers import DirOffsetsTopic, FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def offsets_topic(tmp_path, clock) -> DirOffsetsTopic:
    topic = DirOffsetsTopic(tmp_path / "data", 3, clock)
    yield topic
    if topic.partitions:
        for partition in topic.partitions.values():
            partition.close()


@pytest.fixture
def make_coordinator(offsets_topic, clock):
    """Build a coordinator over ``offsets_topic``; topics ``events`` and ``other`` (4 partitions each) exist."""

    def make(**config) -> GroupCoordinator:
        coordinator = GroupCoordinator(GroupConfig(offsets_partitions=3, **config), offsets_topic, clock=clock,
                                       partition_exists=lambda t, p: t in ("events", "other") and 0 <= p < 4)
        coordinator.startup()
        return coordinator

    return make
