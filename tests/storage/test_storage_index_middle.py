"""The offset and time indexes read from the middle of a multi-segment log (issue 24, item 3).

A log with small segments and a small ``index.interval.bytes`` has many offset-index and time-index entries
per segment; it is read from EVERY offset (the first batch returned must hold that offset: an off-by-one in
the offset index or the segment lookup skips or repeats records) and searched by timestamp at, between and
beyond the records' timestamps (the time index: Kafka's "first offset whose timestamp >= target"),
compared with a model that is a plain list of (offset, timestamp).  A hypothesis property does the same on
random logs, and a real client (kafka-python) does it against a broker: ``seek`` to every offset, and
``offsets_for_times``.
"""
from __future__ import annotations

import random
import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from broker_sim.storage.batch import parse_batches
from broker_sim.storage.log import LogConfig, PartitionLog

Model = list  # [(offset, timestamp)] of every record, in offset order


def _batch(values: list[bytes], timestamps: list[int]) -> bytes:
    builder = DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 2**30)
    for i, (value, timestamp) in enumerate(zip(values, timestamps)):
        builder.append(i, timestamp=timestamp, key=None, value=value, headers=[])
    return bytes(builder.build())


def _fill(log: PartitionLog, batches: list[list[tuple[int, int]]]) -> Model:
    """Append batches given as [(value size, timestamp)] (one append call per 1-3 batches); the model."""
    model: Model = []
    pending = b""
    for i, records in enumerate(batches):
        values = [b"%d" % (len(model) + j) for j in range(len(records))]
        values = [v.ljust(size, b".") for v, (size, _) in zip(values, records)]
        pending += _batch(values, [ts for _, ts in records])
        first = len(model)
        model.extend((first + j, ts) for j, (_, ts) in enumerate(records))
        if i % 3 != 1:
            log.append(pending, parse_batches(pending), leader_epoch=0)
            pending = b""
    if pending:
        log.append(pending, parse_batches(pending), leader_epoch=0)
    return model


def _first_records(log: PartitionLog, offset: int, max_bytes: int) -> list[tuple[int, int]]:
    """(offset, timestamp) of the records of the batches ``read`` returns from ``offset``."""
    data = log.read_bytes(offset, max_bytes)
    out, position = [], 0
    while position < len(data):
        size = int.from_bytes(data[position + 8:position + 12], "big") + 12
        out.extend((r.offset, r.timestamp) for r in DefaultRecordBatch(data[position:position + size]))
        position += size
    return out


def _expected_for_time(model: Model, target: int):
    return next(((o, ts) for o, ts in model if ts >= target), None)


def _check_every_offset(log: PartitionLog, model: Model, max_bytes: int = 1) -> None:
    for offset, timestamp in model:
        records = _first_records(log, offset, max_bytes)
        assert records, f"read({offset}) returned nothing"
        # the first batch returned holds the offset: it starts at or before it and nothing before it is skipped
        assert records[0][0] <= offset, f"read({offset}) started after it, at {records[0][0]}"
        assert (offset, timestamp) in records, f"read({offset}) skipped it: {records[0][0]}..{records[-1][0]}"
        assert model[records[0][0]] == records[0]
    assert _first_records(log, len(model), 1 << 20) == []


def _check_timestamps(log: PartitionLog, model: Model, targets) -> None:
    for target in targets:
        assert log.offset_for_timestamp(target) == _expected_for_time(model, target), f"timestamp {target}"


def _targets(model: Model) -> list[int]:
    stamps = sorted({ts for _, ts in model})
    between = [a + (b - a) // 2 for a, b in zip(stamps, stamps[1:]) if b - a > 1]
    return [stamps[0] - 1000, stamps[0] - 1, *stamps, *(ts + 1 for ts in stamps), *between, stamps[-1] + 1,
            stamps[-1] + 10**9, 0]


def _shuffled_timestamps(count: int, seed: int) -> list[int]:
    """Mostly increasing, with some records older than their predecessors (producers' CreateTime)."""
    rng = random.Random(seed)
    now, out = 1_700_000_000_000, []
    for _ in range(count):
        now += rng.choice((0, 1, 3, 10, 250))
        out.append(now - rng.choice((0, 0, 0, 0, 40, 700)))
    return out


@pytest.fixture
def big_log(tmp_path):
    config = LogConfig(segment_bytes=6000, index_interval_bytes=150, segment_ms=10**12)
    log = PartitionLog(tmp_path / "t-0", config, now_ms=lambda: 1_700_000_000_000)
    rng = random.Random(24)
    stamps = iter(_shuffled_timestamps(2000, 7))
    batches = [[(rng.choice((5, 20, 60, 140)), next(stamps)) for _ in range(rng.randint(1, 4))]
               for _ in range(450)]
    model = _fill(log, batches)
    yield log, model, tmp_path / "t-0", config
    log.close()


def test_a_read_from_every_offset_of_a_multi_segment_log_starts_at_that_offset(big_log):
    log, model, directory, config = big_log
    segments = log.segments
    assert len(segments) >= 8, f"only {len(segments)} segments"
    assert min(len(s.offset_index) for s in segments[:-1]) >= 10, "too few offset-index entries to test"
    assert min(len(s.time_index) for s in segments[:-1]) >= 5, "too few time-index entries to test"
    _check_every_offset(log, model)
    _check_every_offset(log, model, max_bytes=700)
    log.close()
    reopened = PartitionLog(directory, config, now_ms=lambda: 1_700_000_000_000)  # indexes read from their files
    try:
        assert reopened.recovered_bytes_truncated == 0
        assert [len(s.offset_index) for s in reopened.segments[:-1]] == [len(s.offset_index) for s in segments[:-1]]
        _check_every_offset(reopened, model)
    finally:
        reopened.close()


def test_offset_for_timestamp_at_between_and_beyond_the_index_entries(big_log):
    log, model, directory, config = big_log
    entries = [ts for s in log.segments for ts, _ in s.time_index.entries()]
    assert len(entries) >= 60
    targets = _targets(model) + [ts + d for ts in entries for d in (-1, 0, 1)]
    _check_timestamps(log, model, targets)
    log.close()
    reopened = PartitionLog(directory, config, now_ms=lambda: 1_700_000_000_000)
    try:
        _check_timestamps(reopened, model, targets)
    finally:
        reopened.close()


# records: (value size, ms since the previous record, ms its timestamp lags the clock: some go backwards)
batch_lists = st.lists(st.lists(st.tuples(st.sampled_from((1, 30, 90, 200)), st.sampled_from((0, 1, 1, 2, 3, 40)),
                                          st.sampled_from((0, 0, 0, 1, 2, 30))), min_size=1, max_size=5),
                       min_size=1, max_size=40)


@settings(max_examples=40, deadline=None, database=None)
@given(batch_lists, st.sampled_from((700, 1500, 4000)), st.sampled_from((0, 60, 300)), st.data())
def test_property_reads_and_time_searches_match_a_list_model(batches, segment_bytes, interval, data):
    base = 1_700_000_000_000
    stamped = []
    clock = base
    for records in batches:
        batch = []
        for size, step, lag in records:
            clock += step
            batch.append((size, clock - lag))
        stamped.append(batch)
    with tempfile.TemporaryDirectory() as directory:
        config = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=interval, segment_ms=10**12)
        log = PartitionLog(directory, config, now_ms=lambda: base)
        try:
            model = _fill(log, stamped)
            _check_every_offset(log, model)
            stamps = [ts for _, ts in model]
            targets = data.draw(st.lists(st.integers(min(stamps) - 5, max(stamps) + 5), max_size=30))
            entries = [ts + d for segment in log.segments for ts, _ in segment.time_index.entries() for d in (-1, 0, 1)]
            _check_timestamps(log, model, targets + entries + [min(stamps), max(stamps), max(stamps) + 1])
        finally:
            log.close()


def test_a_real_client_seeks_to_every_offset_and_finds_offsets_by_time(pylog_broker):
    """kafka-python against the broker: a topic with many small segments and index entries; ``seek`` to every
    offset returns that record first; ``offsets_for_times`` at, between and beyond the timestamps."""
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic

    topic = "index-middle"
    admin = KafkaAdminClient(bootstrap_servers=pylog_broker.bootstrap_servers)
    admin.create_topics([NewTopic(topic, 1, 1, topic_configs={"internal.segment.bytes": "1200",
                                                               "index.interval.bytes": "40"})])
    admin.close()
    stamps = _shuffled_timestamps(400, 11)
    producer = KafkaProducer(bootstrap_servers=pylog_broker.bootstrap_servers, linger_ms=5, batch_size=120)
    for i, ts in enumerate(stamps):
        producer.send(topic, value=b"%d" % i, timestamp_ms=ts)
    producer.flush(30)
    producer.close()
    model = list(enumerate(stamps))
    log = pylog_broker.replicas.get(topic, 0).log
    assert len(log.segments) >= 5 and sum(len(s.offset_index) for s in log.segments) >= 25
    tp = TopicPartition(topic, 0)
    consumer = KafkaConsumer(bootstrap_servers=pylog_broker.bootstrap_servers, enable_auto_commit=False,
                             max_poll_records=1, fetch_max_wait_ms=50)
    try:
        consumer.assign([tp])
        for offset in reversed(range(len(stamps))):  # backwards: no seek is served from an earlier fetch
            consumer.seek(tp, offset)
            records = []
            for _ in range(100):
                records = consumer.poll(timeout_ms=200).get(tp, [])
                if records:
                    break
            assert records and (records[0].offset, records[0].value, records[0].timestamp) == (
                offset, b"%d" % offset, stamps[offset]), f"seek({offset})"
        targets = _targets(model)[::3]
        for target in targets:
            found = consumer.offsets_for_times({tp: target})[tp]
            expected = _expected_for_time(model, target)
            assert (None if found is None else (found.offset, found.timestamp)) == expected, f"time {target}"
    finally:
        consumer.close()
