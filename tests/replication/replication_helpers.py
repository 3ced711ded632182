"""Helpers shared by the replication tests (a uniquely named module: ``conftest`` names clash across test dirs)."""
from __future__ import annotations

from kafka.record.default_records import DefaultRecordBatchBuilder


def build_batch(values, *, timestamp=1_000, producer_id=-1, producer_epoch=-1, base_sequence=-1,
                transactional=False) -> bytes:
    """A batch as a client builds it (base offset 0, CRC set by kafka-python's builder)."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=int(transactional),
                                        producer_id=producer_id, producer_epoch=producer_epoch,
                                        base_sequence=base_sequence, batch_size=2**30)
    for i, value in enumerate(values):
        assert builder.append(i, timestamp=timestamp, key=b"k", value=value, headers=[]) is not None
    return bytes(builder.build())
