"""Property: whatever sequence of appends, rolls, reopens and torn tails, every whole batch survives."""

from __future__ import annotations

import os
import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from broker_sim.storage.batch import parse_batches
from broker_sim.storage.log import LogConfig, PartitionLog

CONFIG = LogConfig(segment_bytes=1500, index_interval_bytes=200, segment_ms=10_000)


def build(values, timestamp):
    builder = DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 2**30)
    for i, value in enumerate(values):
        builder.append(i, timestamp=timestamp, key=None, value=value, headers=[])
    return bytes(builder.build())


appends = st.lists(st.lists(st.binary(min_size=0, max_size=300), min_size=1, max_size=5), min_size=1, max_size=3)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("append"), appends),
        st.tuples(st.just("roll"), st.integers(0, 20_000)),
        st.tuples(st.just("reopen"), st.none()),
        st.tuples(st.just("tear"), st.integers(1, 400)),
    ),
    max_size=25,
)


@settings(max_examples=60, deadline=None, database=None)
@given(operations)
def test_every_whole_batch_written_before_a_tear_is_readable_with_contiguous_offsets(ops):
    now = [1_000_000]
    with tempfile.TemporaryDirectory() as directory:
        log = PartitionLog(directory, CONFIG, now_ms=lambda: now[0])
        expected: list[list[bytes]] = []  # values of each surviving batch, in offset order
        for op, arg in ops:
            if op == "append":
                data = b"".join(build(values, now[0]) for values in arg)
                log.append(data, parse_batches(data), leader_epoch=1)
                expected.extend(arg)
            elif op == "roll":
                now[0] += arg
                log.maybe_roll()
            elif op == "reopen":
                log.close()
                log = PartitionLog(directory, CONFIG, now_ms=lambda: now[0])
                assert log.recovered_bytes_truncated == 0
            else:
                active = log.active_segment
                headers = list(active.batches_from(active.base_offset))
                new_size = max(active.size - arg, 0)
                kept = [h for h in headers if h.position + h.size <= new_size]
                log.close()
                os.truncate(active.log_path, new_size)
                log = PartitionLog(directory, CONFIG, now_ms=lambda: now[0])
                assert log.recovered_bytes_truncated == new_size - sum(h.size for h in kept)
                assert log.log_end_offset == (kept[-1].next_offset if kept else active.base_offset)
                del expected[len(expected) - (len(headers) - len(kept)) :]
        data = log.read_bytes(log.log_start_offset, 1 << 30)
        got = []
        next_offset = 0
        for header in parse_batches(data) if data else []:
            assert header.base_offset == next_offset
            next_offset = header.next_offset
            got.append([r.value or b"" for r in DefaultRecordBatch(data[header.position : header.position + header.size])])
        assert got == expected
        assert log.log_end_offset == next_offset == sum(len(v) for v in expected)
        log.close()
