"""Storage reads stored records as Kafka does (issue 44, finding 1): a batch the log cleaner rebuilds keeps each
surviving record's key and value as every Kafka reader reads them, and a ListOffsets by timestamp names the
record's offset as Kafka reads it.

aiokafka's reader, which the cleaner used, takes a record's attributes byte for a varint: for the shifted record
(broker_sim.testing.hostile_records) it read offset 7, an empty key and a value framed with a schema id, and a
rebuild wrote that reading back, so after a clean every consumer read the framed value instead of b"EVIL".
"""
from __future__ import annotations

from test_storage_cleaner import COMPACT, keyed, stored_batches

from broker_sim.storage.cleaner import clean_log
from broker_sim.storage.validator import read_batch
from broker_sim.testing.hostile_records import SHIFTED_VALUE, kafka_key_of_shifted, shifted_record
from broker_sim.testing.hostile_wire import _batch, _varint


def _record(offset_delta: int, key: bytes, value: bytes) -> bytes:
    body = b"\x00\x00" + _varint(offset_delta) + _varint(len(key)) + key + _varint(len(value)) + value + b"\x00"
    return _varint(len(body)) + body


def rows(log) -> list[tuple]:
    data = log.read_bytes(log.log_start_offset, 1 << 30)
    return [(r.offset, r.key, r.value) for header in stored_batches(data)
            for r in read_batch(data[header.position:header.position + header.size])]


def test_a_rebuilt_batch_keeps_the_records_as_kafka_reads_them(open_log, produce, clock):
    log = open_log(**COMPACT)
    # offsets 0 (the shifted record) and 1 (k, superseded below): the clean rebuilds this batch
    produce(log, _batch(shifted_record(1) + _record(1, b"k", b"old"), count=2))
    for i in range(30):  # roll segments past the first one, superseding k
        produce(log, keyed([(b"k", b"new %d" % i), (b"other %d" % i, b"x")]))
    assert rows(log)[0] == (0, kafka_key_of_shifted(1), SHIFTED_VALUE)

    result = clean_log(log, clock.now_ms())

    assert result is not None and result.records_removed > 0
    assert rows(log)[0] == (0, kafka_key_of_shifted(1), SHIFTED_VALUE)
    assert (1, b"k", b"old") not in rows(log)


def test_a_timestamp_lookup_names_the_offset_kafka_reads(open_log, produce):
    """aiokafka's and kafka-python's reading of the shifted record puts it at offset 7, which the log does not
    hold; Kafka's at 0."""
    log = open_log(**COMPACT)
    data = _batch(shifted_record(1), count=1)
    produce(log, data)
    [header] = stored_batches(log.read_bytes(0, 1 << 20))
    assert log.active_segment.find_offset_by_timestamp(header.base_timestamp, 0) == (0, header.base_timestamp)
