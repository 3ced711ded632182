"""Recovery on open: torn tails, corruption, garbage, missing indexes, leftovers."""

from __future__ import annotations

import os

import pytest

from broker_sim.storage.batch import parse_batches


def fill(open_log, batches, produce, count=20, **config):
    log = open_log(index_interval_bytes=256, **config)
    payloads = []
    for i in range(count):
        data = batches.build(batches.values(3, prefix=f"{i}:"))
        produce(log, data)
        payloads.append(data)
    log.close()
    return log


def active_log_path(log):
    return log.active_segment.log_path


def assert_reads_back(log, batch_count):
    headers = parse_batches(log.read_bytes(0, 1 << 30))
    assert [h.base_offset for h in headers] == [3 * i for i in range(batch_count)]
    assert log.log_end_offset == 3 * batch_count


def test_torn_tail_is_truncated_and_every_whole_batch_is_readable(open_log, batches, produce):
    log = fill(open_log, batches, produce)
    path = active_log_path(log)
    size = path.stat().st_size
    os.truncate(path, size - 40)
    reopened = open_log()
    assert reopened.recovered_bytes_truncated > 0
    assert_reads_back(reopened, 19)
    assert produce(reopened, batches.build([b"after"])).first_offset == 57


def test_flipped_bit_in_the_last_batch_drops_that_batch(open_log, batches, produce):
    log = fill(open_log, batches, produce)
    path = active_log_path(log)
    with open(path, "r+b") as f:
        f.seek(-5, os.SEEK_END)
        byte = f.read(1)
        f.seek(-5, os.SEEK_END)
        f.write(bytes([byte[0] ^ 0x01]))
    reopened = open_log()
    assert reopened.recovered_bytes_truncated > 0
    assert_reads_back(reopened, 19)


def test_garbage_after_the_last_batch_is_truncated(open_log, batches, produce):
    log = fill(open_log, batches, produce)
    with open(active_log_path(log), "ab") as f:
        f.write(os.urandom(1000))
    reopened = open_log()
    assert reopened.recovered_bytes_truncated == 1000
    assert_reads_back(reopened, 20)


def test_zero_filled_tail_is_truncated(open_log, batches, produce):
    log = fill(open_log, batches, produce)
    with open(active_log_path(log), "ab") as f:
        f.write(bytes(4096))
    reopened = open_log()
    assert reopened.recovered_bytes_truncated == 4096
    assert_reads_back(reopened, 20)


@pytest.mark.parametrize("which", ["index", "timeindex"])
def test_deleted_index_files_of_a_sealed_segment_are_rebuilt(open_log, batches, produce, which):
    log = fill(open_log, batches, produce, segment_bytes=2000)
    assert len(log.segments) > 2
    first = log.segments[0]
    expected = first.offset_index.entries(), first.time_index.entries()
    os.unlink(first.log_path.with_suffix(f".{which}"))
    reopened = open_log(index_interval_bytes=256, segment_bytes=2000)
    rebuilt = reopened.segments[0]
    assert (rebuilt.offset_index.entries(), rebuilt.time_index.entries()) == expected
    assert reopened.recovered_bytes_truncated == 0
    assert_reads_back(reopened, 20)
    assert reopened.read_bytes(31, 1)[:8] == (30).to_bytes(8, "big")


def test_garbled_index_of_a_sealed_segment_is_rebuilt(open_log, batches, produce):
    log = fill(open_log, batches, produce, segment_bytes=2000)
    index_path = log.segments[0].log_path.with_suffix(".index")
    index_path.write_bytes(index_path.read_bytes()[:-3])
    reopened = open_log(index_interval_bytes=256, segment_bytes=2000)
    assert len(reopened.segments[0].offset_index) > 0
    assert_reads_back(reopened, 20)


def test_reopen_adopts_sealed_segments_without_rescanning(open_log, batches, produce, monkeypatch):
    from broker_sim.storage.segment import LogSegment

    log = fill(open_log, batches, produce, segment_bytes=2000)
    recovered = []
    real_recover = LogSegment.recover
    monkeypatch.setattr(LogSegment, "recover", lambda self: (recovered.append(self.base_offset), real_recover(self))[1])
    reopened = open_log()
    assert recovered == [reopened.active_segment.base_offset]
    assert [s.next_offset for s in reopened.segments] == [s.next_offset for s in log.segments]
    assert [s.max_timestamp for s in reopened.segments] == [s.max_timestamp for s in log.segments]


def test_leftover_and_orphan_files_are_removed(open_log, batches, produce, tmp_path):
    fill(open_log, batches, produce, count=2)
    directory = tmp_path / "topic-0"
    for name in ["00000000000000000000.log.deleted", "x.cleaned", "y.swap", "log-start-offset.tmp", f"{99:020d}.index"]:
        (directory / name).write_bytes(b"junk")
    reopened = open_log()
    assert sorted(p.name for p in directory.iterdir()) == [
        "00000000000000000000.index",
        "00000000000000000000.log",
        "00000000000000000000.timeindex",
    ]
    assert_reads_back(reopened, 2)


def test_lost_tail_below_checkpointed_start_restarts_log_at_start_offset(open_log, batches, produce):
    log = fill(open_log, batches, produce, count=4)
    path = active_log_path(log)
    reopened = open_log()
    reopened.delete_records_before(12)
    reopened.close()
    os.truncate(path, 10)
    again = open_log()
    assert (again.log_start_offset, again.log_end_offset) == (12, 12)
