"""Fixtures for replication tests: client-built RecordBatch v2 bytes, a settable clock, partitions in tmp_path."""
from __future__ import annotations

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from broker_sim.replication.partition import Partition
from broker_sim.storage.log import LogConfig


def build_batch(values, *, timestamp=1_000, producer_id=-1, producer_epoch=-1, base_sequence=-1,
                transactional=False) -> bytes:
    """A batch as a client builds it (base offset 0, CRC set by kafka-python's builder)."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=int(transactional),
                                        producer_id=producer_id, producer_epoch=producer_epoch,
                                        base_sequence=base_sequence, batch_size=2**30)
    for i, value in enumerate(values):
        assert builder.append(i, timestamp=timestamp, key=b"k", value=value, headers=[]) is not None
    return bytes(builder.build())


class Clock:
    def __init__(self, now=1_000_000):
        self.now = now

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


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
