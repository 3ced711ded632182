"""Fixtures for storage tests: real RecordBatch v2 bytes built with kafka-python, and the kit's manual clock."""

from __future__ import annotations

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from broker_sim.storage.batch import parse_batches
from broker_sim.storage.log import LogConfig, PartitionLog
from broker_sim.testing.clock import ManualClock


class BatchFactory:
    """Builds v2 batches the way a client would (base offset 0, CRC set by the builder)."""

    def build(
        self,
        values,
        *,
        timestamp=1_000,
        timestamps=None,
        compression=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        transactional=False,
    ) -> bytes:
        builder = DefaultRecordBatchBuilder(
            magic=2,
            compression_type=compression,
            is_transactional=int(transactional),
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            batch_size=2**30,
        )
        for i, value in enumerate(values):
            ts = timestamps[i] if timestamps is not None else timestamp
            assert builder.append(i, timestamp=ts, key=None, value=value, headers=[]) is not None
        return bytes(builder.build())

    def values(self, count, size=100, prefix="v"):
        return [f"{prefix}{i}".encode().ljust(size, b".") for i in range(count)]


@pytest.fixture
def batches() -> BatchFactory:
    return BatchFactory()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def open_log(tmp_path, clock):
    """open_log(**config) -> PartitionLog in tmp_path/"topic-0" with the manual clock; closed after the test."""
    logs = []

    def opener(directory=None, **config) -> PartitionLog:
        log = PartitionLog(directory or tmp_path / "topic-0", LogConfig(**config), now_ms=clock)
        logs.append(log)
        return log

    yield opener
    for log in logs:
        log.close()


def append(log: PartitionLog, records: bytes, leader_epoch: int = 0):
    """parse + append, the way the broker's produce path does."""
    return log.append(records, parse_batches(records), leader_epoch=leader_epoch)


@pytest.fixture
def produce():
    return append
