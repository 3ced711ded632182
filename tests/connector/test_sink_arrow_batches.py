"""The sink's compiled record-batch encoder (connector/sink/_arrow_batches.c) writes, from the Arrow buffers,
the very bytes aiokafka's builder writes one record at a time: same batches, boundaries, sequences, CRCs."""
from __future__ import annotations

import random
import time
import types

import pyarrow as pa
import pytest

from connector.options import parse_sink_options
from connector.sink import producer as producer_module
from connector.sink.producer import TaskProducer

pytestmark = pytest.mark.skipif(producer_module._arrow_batches is None,
                                reason="the _arrow_batches extension is not built (python3 setup.py build_ext "
                                       "--inplace)")


def _batches():
    keys = [None if i % 7 == 0 else f"key-{i}" for i in range(600)]
    values = [None if i % 11 == 0 else (b"" if i % 13 == 0 else b"v" * (i % 300)) for i in range(600)]
    values[5] = b"x" * 5_000  # bigger than a whole batch: a batch of its own
    whole = pa.RecordBatch.from_arrays([pa.array(keys, pa.string()), pa.array(values, pa.binary())],
                                       names=["key", "value"])
    no_key = pa.RecordBatch.from_arrays([pa.array([b"a", None, b"c"] * 50, pa.binary())], names=["value"])
    string_values = pa.RecordBatch.from_arrays([pa.array([f"s{i}" for i in range(100)], pa.string())],
                                               names=["value"])
    return [whole.slice(3, 500), whole.slice(0, 90), no_key, string_values]  # slices: non-zero array offsets


def _ready(broker, batch, compiled: bool, monkeypatch, transactional: bool, batch_size: int = 2000,
           compression: str = "none"):
    options = parse_sink_options({"kafka.bootstrap.servers": broker.bootstrap_servers, "topic": "encoded",
                                  "kafka.batch.size": str(batch_size), "kafka.compression.type": compression})
    if not compiled:
        monkeypatch.setattr(producer_module, "_arrow_batches", None)
    # the same write time and the same sticky partition for null keys in both runs
    monkeypatch.setattr(producer_module, "time", types.SimpleNamespace(time=lambda: 1_700_000_000.123,
                                                                       monotonic=time.monotonic, sleep=time.sleep))
    producer = TaskProducer(options, "txn-id" if transactional else None)
    producer._partitioner._rng = random.Random(7)
    producer.producer_id, producer.epoch = 4242, 3
    producer._sequences[("encoded", 1)] = 0x7FFFFFFF - 5  # the sequence wraps inside the rows
    try:
        assert producer.write(batch, "encoded") == batch.num_rows
        for tp in list(producer._builders):
            producer._close_builder(tp)
        by_partition = {}
        for tp, data in producer._ready:  # the order across partitions is not the same, and need not be
            by_partition.setdefault(tp, []).append(data)
        return by_partition, dict(producer._sequences), dict(producer.counts)
    finally:
        monkeypatch.undo()
        producer.close()


def test_the_compiled_encoder_writes_aiokafkas_bytes(pylog_broker, monkeypatch):
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=pylog_broker.bootstrap_servers)
    admin.create_topics([NewTopic("encoded", 3, 1)])
    admin.close()
    for transactional in (False, True):
        for batch in _batches():
            compiled = _ready(pylog_broker, batch, True, monkeypatch, transactional)
            reference = _ready(pylog_broker, batch, False, monkeypatch, transactional)
            assert compiled == reference
            assert max(map(len, compiled[0].values())) > 3 or batch.num_rows < 200  # several batches: boundaries
    # 100-byte values without a key take 109 bytes a record: a 10th record would end a batch exactly at 61 + 1090
    same = pa.RecordBatch.from_arrays([pa.array([b"v" * 100] * 95, pa.binary())], names=["value"])
    compiled = _ready(pylog_broker, same, True, monkeypatch, False, batch_size=61 + 10 * 109)
    assert compiled == _ready(pylog_broker, same, False, monkeypatch, False, batch_size=61 + 10 * 109)
    assert {len(b) for batches in compiled[0].values() for b in batches} == {61 + 9 * 109, 61 + 5 * 109}


@pytest.mark.parametrize("compression", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_are_aiokafkas_bytes_and_read_back(pylog_broker, monkeypatch, compression):
    """With kafka.compression.type the compiled encoder's batches are byte for byte the per-record path's
    (aiokafka's builder, then the same compression of the whole records section; boundaries by uncompressed
    size, a one-record batch compressed too), each batch names the codec, and a consumer reads every record
    back, decompressing with its own codecs."""
    from kafka import KafkaAdminClient, KafkaConsumer
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=pylog_broker.bootstrap_servers)
    admin.create_topics([NewTopic("encoded", 3, 1)])
    admin.close()
    for batch in _batches():
        compiled = _ready(pylog_broker, batch, True, monkeypatch, False, compression=compression)
        assert compiled == _ready(pylog_broker, batch, False, monkeypatch, False, compression=compression)
    codecs = {data[22] & 7 for batches in compiled[0].values() for data in batches}
    assert codecs == {parse_sink_options({"kafka.bootstrap.servers": "x:1", "topic": "t",
                                          "kafka.compression.type": compression}).compression}

    whole = _batches()[0]
    options = parse_sink_options({"kafka.bootstrap.servers": pylog_broker.bootstrap_servers, "topic": "encoded",
                                  "kafka.compression.type": compression, "deliveryGuarantee": "at_least_once"})
    producer = TaskProducer(options)
    try:
        assert producer.write(whole, "encoded") == whole.num_rows
        producer.flush()
    finally:
        producer.close()
    expected = [(k.encode() if k is not None else None, v)
                for k, v in zip(whole.column(0).to_pylist(), whole.column(1).to_pylist())]
    consumer = KafkaConsumer("encoded", bootstrap_servers=pylog_broker.bootstrap_servers,
                             auto_offset_reset="earliest", consumer_timeout_ms=10_000)
    got = []
    try:
        for record in consumer:
            got.append((record.key, record.value))
            if len(got) == len(expected):
                break
    finally:
        consumer.close()
    assert sorted(got, key=repr) == sorted(expected, key=repr)


@pytest.mark.parametrize("offset, length", [
    (2**62 - 1, 0),        # (offset + length + 1) * 4 wraps to 0: the old check passed and read nothing
    (0, 2**62 - 1),        # wraps to -4: the old check passed, then a negative size for the result
    (2**61, 2**61 - 1),    # another sum whose (sum + 1) * 4 wraps to 0
    (0, 3),                # no overflow: one offset short
])
def test_a_columns_offset_and_length_are_checked_without_overflow(offset, length):
    """The size check compares offset and length with the buffers without forming (offset + length + 1) * 4,
    which overflows for values no Arrow array has: they raise ValueError, never pass the check."""
    offsets = pa.array([b"a", b"b"], pa.binary()).buffers()[1].to_pybytes()   # 3 offsets: 2 rows
    data = b"ab"
    encode = producer_module._arrow_batches
    with pytest.raises(ValueError, match="shorter than its length"):
        encode.partitions((None, offsets, data, offset, length), 3)
    with pytest.raises(ValueError, match="shorter than its length"):
        encode.partitions((b"\xff", offsets, data, 2**60 + offset % 8, length + 2**60), 3)  # validity bits too
    assert encode.partitions((None, offsets, data, 0, 2), 3) == encode.partitions((b"\xff", offsets, data, 0, 2), 3)


def test_apache_kafka_accepts_the_compressed_batches_and_librdkafka_reads_them(kafka_broker):
    """Kafka's broker validates every compressed batch it is sent (LogValidator decompresses v2 batches): each
    codec's batches are appended, and confluent-kafka (librdkafka's decoders) reads every record back."""
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient, NewTopic

    bootstrap = kafka_broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})   # kept: a collected client cancels its futures
    whole = _batches()[0]
    expected = [((k.encode() if k is not None else None), v)
                for k, v in zip(whole.column(0).to_pylist(), whole.column(1).to_pylist())]
    for compression in ("gzip", "snappy", "lz4", "zstd"):
        topic = f"compressed-{compression}-{random.randrange(1 << 30)}"
        admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
        options = parse_sink_options({"kafka.bootstrap.servers": bootstrap, "topic": topic,
                                      "kafka.compression.type": compression, "deliveryGuarantee": "at_least_once"})
        producer = TaskProducer(options)
        try:
            assert producer.write(whole, topic) == whole.num_rows
            producer.flush()
        finally:
            producer.close()
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": topic, "auto.offset.reset": "earliest",
                             "enable.auto.commit": False})
        consumer.subscribe([topic])
        got, deadline = [], time.monotonic() + 30
        try:
            while len(got) < len(expected) and time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is not None:
                    assert message.error() is None, message.error()
                    got.append((message.key(), message.value()))
        finally:
            consumer.close()
        assert sorted(got, key=repr) == sorted(expected, key=repr), compression
