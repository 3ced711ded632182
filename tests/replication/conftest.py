"""Fixtures for replication tests: the kit's manual clock and real partitions in tmp_path."""
from __future__ import annotations

import pytest

from broker_sim.replication.partition import Partition
from broker_sim.storage.log import LogConfig
from broker_sim.testing.clock import ManualClock


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def open_partition(tmp_path, clock):
    """open_partition(broker_id, **log_config): a real Partition in tmp_path/<broker id>/t-0."""
    opened = []

    def open_(broker_id: int = 0, isr_writer=None, **config) -> Partition:
        partition = Partition("t", 0, tmp_path / str(broker_id) / "t-0", LogConfig(**config), broker_id=broker_id,
                              now_ms=clock, isr_writer=isr_writer)
        opened.append(partition)
        return partition

    yield open_
    for partition in opened:
        if not partition.log.closed:
            partition.close()
