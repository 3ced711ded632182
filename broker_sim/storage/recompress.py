"""A topic's ``compression.type``, with Kafka's semantics (LogValidator): ``producer`` keeps each batch as the
producer compressed it; ``uncompressed``, ``gzip``, ``snappy``, ``lz4`` or ``zstd`` re-encode every data batch
whose codec differs (control batches are never compressed).  The records — offset deltas, timestamps, keys,
values, headers — and the batch's producer id, epoch, base sequence and transactional flag are kept, so
idempotence and transactions see the same batch.  Runs after validation, on the validation thread pool when the
input is large (``storage/validator.costs_a_thread``).
"""
from __future__ import annotations

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from broker_sim.storage.batch import BatchHeader

CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
TOPIC_VALUES = ("producer", *CODECS)


def target_codec(compression_type: str) -> int | None:
    """The codec a topic's compression.type asks for; None for ``producer`` (keep)."""
    return CODECS.get(compression_type)


def needs_recompression(batches: list[BatchHeader], codec: int | None) -> bool:
    return codec is not None and any(not b.is_control and b.compression != codec for b in batches)


def recompress(records, batches: list[BatchHeader], codec: int) -> bytes:
    """``records`` with every data batch in ``codec``."""
    view = memoryview(records)
    out = bytearray()
    for header in batches:
        raw = view[header.position:header.position + header.size]
        if header.is_control or header.compression == codec:
            out += raw
            continue
        builder = DefaultRecordBatchBuilder(
            magic=2, compression_type=codec, is_transactional=header.is_transactional,
            producer_id=header.producer_id, producer_epoch=header.producer_epoch,
            base_sequence=header.base_sequence, batch_size=2**31 - 1)
        for record in DefaultRecordBatch(bytes(raw)):
            builder.append(record.offset - header.base_offset, timestamp=record.timestamp, key=record.key,
                           value=record.value, headers=record.headers)
        out += builder.build()
    return bytes(out)
