"""Log compaction (storage/cleaner.py): what survives a clean, when a clean runs, and crash safety."""

from __future__ import annotations

import asyncio
import os
import pathlib
import shutil

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from broker_sim.storage.batch import parse_batches
from broker_sim.storage.cleaner import (
    CLEANER_CHECKPOINT,
    _build_or_discard,
    _commit,
    _plan,
    clean_log,
    clean_log_async,
    read_cleaner_checkpoint,
)
from broker_sim.storage.log import LogConfig, PartitionLog
from broker_sim.storage.producer_state import ProducerStateManager

COMPACT = {"cleanup_policy": "compact", "segment_bytes": 400, "index_interval_bytes": 100}


def keyed(pairs, *, timestamp=1_000, compression=0, producer_id=-1, producer_epoch=-1, base_sequence=-1,
          transactional=False) -> bytes:
    """One client batch of (key, value) records; None value = tombstone."""
    builder = DefaultRecordBatchBuilder(2, compression, int(transactional), producer_id, producer_epoch,
                                        base_sequence, 2**30)
    for i, (key, value) in enumerate(pairs):
        builder.append(i, timestamp=timestamp + i, key=key, value=value, headers=[])
    return bytes(builder.build())


def records(log: PartitionLog, start: int | None = None):
    """(offset, key, value) of every record from `start` (default: log start), read through PartitionLog.read."""
    data = log.read_bytes(log.log_start_offset if start is None else start, 1 << 30)
    out = []
    for header in stored_batches(data):
        batch = DefaultRecordBatch(bytes(data[header.position : header.position + header.size]))
        out.extend((r.offset, r.key, r.value) for r in batch)
    return out


def stored_batches(data):
    """Headers of stored batches, every CRC checked (compacted batches have fewer records than offsets, or none)."""
    headers = parse_batches(data, stored=True) if data else []
    for header in headers:
        assert DefaultRecordBatch(bytes(data[header.position : header.position + header.size])).validate_crc()
        assert 0 <= header.record_count <= header.last_offset_delta + 1
    return headers


def latest_per_key(rows, end):
    """What a clean of offsets below `end` must leave: the last record of each key below `end`, everything after."""
    last = {}
    for offset, key, _ in rows:
        if offset < end:
            last[key] = offset
    return [row for row in rows if row[0] >= end or last[row[1]] == row[0]]


def fill(log, produce, rounds, keys=5, *, timestamp=1_000, prefix="v"):
    for i in range(rounds):
        produce(log, keyed([(f"k{(i * 2 + j) % keys}".encode(), f"{prefix}{i}-{j}".encode()) for j in range(2)],
                           timestamp=timestamp + i * 10))


def test_clean_keeps_only_the_latest_record_per_key_at_its_original_offset(open_log, produce, clock):
    log = open_log(**COMPACT)
    fill(log, produce, 40)
    before = records(log)
    active = log.active_segment
    active_bytes = os.pread(active.file.fileno(), active.size, 0)
    end = active.base_offset

    result = clean_log(log, clock.now_ms())

    assert result is not None and result.records_removed == len(before) - len(latest_per_key(before, end))
    after = records(log)
    assert after == latest_per_key(before, end)
    assert [o for o, _, _ in after] == sorted({o for o, _, _ in after})  # ascending, with gaps
    assert log.active_segment is active and os.pread(active.file.fileno(), active.size + 1, 0) == active_bytes
    assert (log.log_start_offset, log.log_end_offset) == (0, 80)
    assert result.bytes_after < result.bytes_before
    assert read_cleaner_checkpoint(log.directory)[-1].end_offset == end
    assert sorted(p.name for p in log.directory.iterdir() if p.suffix in (".cleaned", ".swap")) == []

    reopened = open_log(**COMPACT)
    assert records(reopened) == after
    assert all(segment.load() is None for segment in reopened.segments[:-1])  # indexes written consistently


def test_reads_and_timestamp_lookups_work_at_any_offset_after_a_clean(open_log, produce, clock):
    log = open_log(**COMPACT)
    fill(log, produce, 40)
    clean_log(log, clock.now_ms())
    after = records(log)
    offsets = [o for o, _, _ in after]
    for offset in range(0, log.log_end_offset):
        got = records(log, offset)
        assert got, offset
        # the read starts at the batch holding `offset` or, inside a gap, the next surviving record's batch
        assert [o for o, _, _ in got if o >= offset] == [o for o in offsets if o >= offset]
    for _, key, value in after:
        timestamp = 1_000 + int(value.split(b"-")[0][1:]) * 10 + int(value.split(b"-")[1])
        found = log.offset_for_timestamp(timestamp)
        assert found is not None and found[1] >= timestamp
        assert found[0] == min(o for o, _, v in after if 1_000 + int(v.split(b"-")[0][1:]) * 10
                               + int(v.split(b"-")[1]) >= timestamp)


def test_tombstones_survive_the_first_clean_and_go_after_delete_retention(open_log, produce, clock):
    log = open_log(**COMPACT, delete_retention_ms=60_000)
    produce(log, keyed([(b"gone", b"old"), (b"kept", b"1")]))
    produce(log, keyed([(b"gone", None)]))
    fill(log, produce, 20, keys=3)
    first = clean_log(log, clock.now_ms())
    assert first is not None
    rows = records(log)
    assert (2, b"gone", None) in rows and not [r for r in rows if r[2] == b"old"]
    assert read_cleaner_checkpoint(log.directory)[-1].tombstones == 1

    clock.advance(ms=59_999)
    assert clean_log(log, clock.now_ms()) is None  # nothing dirty, horizon not reached
    clock.advance(ms=1)
    second = clean_log(log, clock.now_ms())  # the horizon alone makes the log cleanable
    assert second is not None and second.records_removed == 1
    assert (2, b"gone", None) not in records(log)
    assert (1, b"kept", b"1") in records(log)
    assert all(not r.tombstones for r in read_cleaner_checkpoint(log.directory))


def test_tombstone_written_after_a_clean_gets_its_own_horizon(open_log, produce, clock):
    log = open_log(**COMPACT, delete_retention_ms=60_000, min_cleanable_dirty_ratio=0.0)
    fill(log, produce, 20, keys=3)
    clean_log(log, clock.now_ms())
    clock.advance(ms=50_000)
    produce(log, keyed([(b"k0", None)]))
    fill(log, produce, 20, keys=3, prefix="w")
    produce(log, keyed([(b"late", None)]))
    fill(log, produce, 8, keys=3, prefix="x")
    assert clean_log(log, clock.now_ms()) is not None
    tombstone = [r for r in records(log) if r[1] == b"late"]
    assert tombstone and tombstone[0][2] is None
    clock.advance(ms=30_000)  # 80 s after the first clean, 30 s after the tombstone's first clean
    fill(log, produce, 10, keys=3, prefix="y")
    clean_log(log, clock.now_ms())
    assert [r for r in records(log) if r[1] == b"late"] == tombstone
    clock.advance(ms=30_000)
    clean_log(log, clock.now_ms())
    assert not [r for r in records(log) if r[1] == b"late"]


def test_no_clean_while_the_dirty_ratio_is_not_above_the_minimum(open_log, produce, clock):
    log = open_log(**COMPACT, min_cleanable_dirty_ratio=0.5)
    fill(log, produce, 40, keys=40)  # unique keys: the clean removes nothing, all bytes become clean
    assert clean_log(log, clock.now_ms()) is not None
    clean_bytes = sum(s.size for s in log.segments[:-1])
    fill(log, produce, 12, keys=40, prefix="w")
    dirty = sum(s.size for s in log.segments[:-1]) - clean_bytes
    assert 0 < dirty / (dirty + clean_bytes) <= 0.5
    assert clean_log(log, clock.now_ms()) is None
    fill(log, produce, 60, keys=40, prefix="x")
    assert clean_log(log, clock.now_ms()) is not None


def test_min_compaction_lag_holds_back_young_segments(open_log, produce, clock):
    log = open_log(**COMPACT, min_compaction_lag_ms=10_000)
    fill(log, produce, 40, timestamp=clock.now_ms())
    assert clean_log(log, clock.now_ms()) is None
    clock.advance(ms=9_000)
    assert clean_log(log, clock.now_ms()) is None
    clock.advance(ms=2_000)
    before = records(log)
    result = clean_log(log, clock.now_ms())
    assert result is not None and result.end_offset == log.active_segment.base_offset
    assert records(log) == latest_per_key(before, result.end_offset)


def test_min_compaction_lag_cleans_only_old_enough_segments(open_log, produce, clock):
    log = open_log(**COMPACT, min_compaction_lag_ms=10_000)
    fill(log, produce, 20, timestamp=clock.now_ms() - 60_000)
    fill(log, produce, 20, timestamp=clock.now_ms(), prefix="w")
    before = records(log)
    result = clean_log(log, clock.now_ms())
    young = min(s.base_offset for s in log.segments if s.max_timestamp > clock.now_ms() - 10_000)
    assert result is not None and 0 < result.end_offset == young < log.active_segment.base_offset
    assert records(log) == latest_per_key(before, young)


def test_max_compaction_lag_forces_a_clean_below_the_ratio(open_log, produce, clock):
    log = open_log(**COMPACT, min_cleanable_dirty_ratio=1.0, max_compaction_lag_ms=60_000)
    fill(log, produce, 40, timestamp=clock.now_ms())
    assert clean_log(log, clock.now_ms()) is None
    clock.advance(ms=60_000)
    assert clean_log(log, clock.now_ms()) is None  # the first batch's max timestamp is clock + 1
    clock.advance(ms=2)
    assert clean_log(log, clock.now_ms()) is not None


def test_delete_policy_logs_are_not_cleaned_and_compact_logs_keep_expired_segments(open_log, produce, clock):
    deleting = open_log(segment_bytes=400)
    fill(deleting, produce, 40)
    assert clean_log(deleting, clock.now_ms()) is None
    compacted = open_log(deleting.directory.with_name("c-0"), **COMPACT, retention_ms=1)
    fill(compacted, produce, 40)
    assert compacted.enforce_retention() == 0


def test_compact_delete_logs_lose_old_segments_to_retention_and_compact_the_rest(open_log, produce, clock):
    """cleanup.policy=compact,delete: retention.bytes deletes whole old segments, then the cleaner compacts
    what is left to the latest record per key (below its clean end).
    Mutation: clean_log skipping logs whose policy is not exactly 'compact' -> 'the cleaner did not run';
    retention ignoring the delete half of compact,delete -> 'retention deleted nothing'.
    """
    both = open_log(**{**COMPACT, "cleanup_policy": "compact,delete"}, retention_bytes=2000)
    fill(both, produce, 60)
    before = records(both)
    assert len(both.segments) > 6
    assert both.enforce_retention() > 0, "retention deleted nothing"
    start = both.log_start_offset
    assert start > 0 and len(both.segments) >= 3, "retention must leave several segments to compact"
    assert both.size_in_bytes <= 2000 + 400
    remaining = [row for row in before if row[0] >= start]
    assert records(both) == remaining, "retention removed more (or other) than a prefix of whole segments"
    result = clean_log(both, clock.now_ms())
    assert result is not None, "the cleaner did not run on a compact,delete log"
    assert start < result.end_offset <= both.active_segment.base_offset
    kept = records(both)
    assert kept == latest_per_key(remaining, result.end_offset)
    assert len(kept) < len(remaining), "compaction removed nothing"


def test_rebuilt_batches_keep_producer_fields_offsets_and_codec(open_log, produce, clock):
    log = open_log(**COMPACT)
    produce(log, keyed([(b"a", b"1" * 50), (b"b", b"1" * 50), (b"c", b"1" * 50)], compression=1,
                       producer_id=7, producer_epoch=2, base_sequence=0))
    produce(log, keyed([(b"b", b"2")], producer_id=7, producer_epoch=2, base_sequence=3))
    produce(log, keyed([(b"b", b"3")]))
    fill(log, produce, 30, keys=3)
    producers = ProducerStateManager(log.directory)
    producers.load(log)
    clean_log(log, clock.now_ms(), producer_last_offsets={7: producers.producers[7].last_offset})
    data = log.read_bytes(0, 1 << 20)
    first = stored_batches(data)[0]
    assert (first.base_offset, first.last_offset_delta, first.record_count) == (0, 2, 2)
    assert (first.producer_id, first.producer_epoch, first.base_sequence, first.compression) == (7, 2, 0, 1)
    assert [(r.offset, r.key) for r in DefaultRecordBatch(data[: first.size])] == [(0, b"a"), (2, b"c")]
    # the producer's last batch stays as an empty header: "b"=2 is superseded, so no record of it is left
    empty = stored_batches(data)[1]
    assert (empty.base_offset, empty.last_offset_delta, empty.record_count, empty.size) == (3, 0, 0, 61)
    assert (empty.producer_id, empty.producer_epoch, empty.base_sequence, empty.last_sequence) == (7, 2, 3, 3)
    assert (3, b"b", b"2") not in records(log) and (4, b"b", b"3") in records(log)
    reloaded = ProducerStateManager(log.directory)
    reloaded.load(open_log(**COMPACT))
    assert reloaded.producers[7].last_seq == 3


@pytest.mark.parametrize("timestamp_type", ["CreateTime", "LogAppendTime"])
def test_a_producers_fully_superseded_last_batch_stays_as_an_empty_header(open_log, produce, clock, timestamp_type):
    """Kafka's RETAIN_EMPTY: every header field but the codec, baseTimestamp, length, CRC and count is kept."""
    log = open_log(**COMPACT, message_timestamp_type=timestamp_type)
    produce(log, keyed([(b"a", b"1"), (b"b", b"1" * 40), (b"c", b"1" * 40)], timestamp=5_000, compression=1,
                       producer_id=7, producer_epoch=2, base_sequence=10), leader_epoch=4)
    produce(log, keyed([(b"a", b"2"), (b"b", b"2"), (b"c", b"2")]))  # a plain producer supersedes all three
    fill(log, produce, 30, keys=3)
    original = stored_batches(log.read_bytes(0, 1 << 20))[0]
    assert (original.record_count, original.compression) == (3, 1)
    producers = ProducerStateManager(log.directory)
    producers.load(log)
    assert producers.producers[7].last_offset == 2
    result = clean_log(log, clock.now_ms(), producer_last_offsets={7: 2})

    assert result is not None and result.records_removed >= 3
    data = log.read_bytes(0, 1 << 20)
    empty = stored_batches(data)[0]
    assert bytes(data[:61]) == data[: empty.size]  # the header and nothing else
    assert empty._replace(crc=0) == original._replace(
        size=61, crc=0, attributes=original.attributes & ~0x07, base_timestamp=-1, record_count=0)
    assert (empty.base_offset, empty.last_offset_delta, empty.partition_leader_epoch) == (0, 2, 4)
    assert (empty.producer_id, empty.producer_epoch, empty.base_sequence, empty.last_sequence) == (7, 2, 10, 12)
    assert empty.timestamp_type == (1 if timestamp_type == "LogAppendTime" else 0)
    assert empty.max_timestamp == (clock.now_ms() if timestamp_type == "LogAppendTime" else 5_002)
    assert list(DefaultRecordBatch(bytes(data[:61]))) == []
    rows = records(log)
    assert [row for row in rows if row[1] in (b"a", b"b", b"c")] == [(3, b"a", b"2"), (4, b"b", b"2"), (5, b"c", b"2")]

    # a second pass keeps it byte for byte while it is still the producer's last batch
    fill(log, produce, 10, keys=3, prefix="w")
    clean_log(log, clock.now_ms(), producer_last_offsets={7: 2})
    assert log.read_bytes(0, 1 << 20)[:61] == data[:61]

    # recovery (indexes lost) keeps it, and the producer state rebuilt from the log has its sequence
    log.close()
    for path in [*log.directory.glob("*.index"), *log.directory.glob("*.timeindex"),
                 *log.directory.glob("*.snapshot")]:
        path.unlink()
    reopened = open_log(**COMPACT, message_timestamp_type=timestamp_type)
    assert reopened.recovered_bytes_truncated == 0
    assert reopened.read_bytes(0, 1 << 20)[:61] == data[:61]
    assert [row for row in records(reopened) if row[1] in (b"a", b"b", b"c")] == [
        (3, b"a", b"2"), (4, b"b", b"2"), (5, b"c", b"2")]
    assert all(segment.load() is None for segment in reopened.segments[:-1])
    rebuilt = ProducerStateManager(reopened.directory)
    rebuilt.load(reopened)
    entry = rebuilt.producers[7]
    assert (entry.epoch, entry.last_seq, entry.last_offset) == (2, 12, 2)


def test_an_empty_batch_goes_once_it_is_no_longer_its_producers_last(open_log, produce, clock):
    log = open_log(**COMPACT, min_cleanable_dirty_ratio=0.0)
    produce(log, keyed([(b"a", b"1")], producer_id=7, producer_epoch=0, base_sequence=0))
    produce(log, keyed([(b"a", b"2")]))
    fill(log, produce, 20, keys=3)
    clean_log(log, clock.now_ms(), producer_last_offsets={7: 0})
    assert stored_batches(log.read_bytes(0, 1 << 20))[0].record_count == 0
    produce(log, keyed([(b"z", b"1")], producer_id=7, producer_epoch=0, base_sequence=1))
    fill(log, produce, 20, keys=3, prefix="w")
    last = log.log_end_offset - 41
    clean_log(log, clock.now_ms(), producer_last_offsets={7: last})
    headers = stored_batches(log.read_bytes(0, 1 << 20))
    assert all(h.base_offset != 0 for h in headers)
    assert all(h.record_count > 0 for h in headers)


def test_transactional_control_and_unkeyed_records(open_log, produce, clock):
    log = open_log(**COMPACT)
    produce(log, keyed([(b"t", b"txn"), (b"a", b"old")], producer_id=9, producer_epoch=0, base_sequence=0,
                       transactional=True))
    produce(log, keyed([(None, b"unkeyed"), (b"t", b"plain")]))
    fill(log, produce, 30, keys=3)
    clean_log(log, clock.now_ms())
    rows = records(log)
    assert (0, b"t", b"txn") in rows and (1, b"a", b"old") in rows  # transactional batch kept as-is
    assert (2, None, b"unkeyed") not in rows  # Kafka drops unkeyed records from compacted logs
    assert (3, b"t", b"plain") in rows  # a transactional write supersedes nothing


def test_second_clean_merges_small_segments(open_log, produce, clock):
    log = open_log(**COMPACT, min_cleanable_dirty_ratio=0.0)
    fill(log, produce, 60, keys=2)
    clean_log(log, clock.now_ms())
    count = len(log.segments)
    fill(log, produce, 4, keys=2, prefix="w")
    before = records(log)
    result = clean_log(log, clock.now_ms())
    assert result is not None and len(log.segments) < count
    assert records(log) == latest_per_key(before, result.end_offset)


def test_clean_is_abandoned_when_retention_removed_a_segment_meanwhile(open_log, produce, clock):
    log = open_log(**{**COMPACT, "cleanup_policy": "compact,delete"})
    fill(log, produce, 40)
    plan = _plan(log, clock.now_ms(), None, {})
    _build_or_discard(plan)
    log.delete_records_before(log.segments[1].base_offset)
    before = records(log)
    assert _commit(plan) is None
    assert records(log) == before
    assert not [p for p in log.directory.iterdir() if p.name.endswith(".cleaned")]
    assert clean_log(log, clock.now_ms()) is not None


def test_async_clean_runs_the_work_in_a_thread_with_the_same_result(open_log, produce, clock):
    log = open_log(**COMPACT)
    fill(log, produce, 40)
    before = records(log)
    result = asyncio.run(clean_log_async(log, clock.now_ms()))
    assert result is not None and records(log) == latest_per_key(before, result.end_offset)


def test_unreadable_checkpoint_means_clean_from_the_start(open_log, produce, clock):
    log = open_log(**COMPACT)
    fill(log, produce, 40)
    clean_log(log, clock.now_ms())
    after = records(log)
    (log.directory / CLEANER_CHECKPOINT).write_text("garbage")
    assert clean_log(log, clock.now_ms()) is not None
    assert records(log) == after


# -- crash safety --------------------------------------------------------------


def test_partial_cleaned_files_are_deleted_on_open(open_log, produce, clock, tmp_path):
    log = open_log(**COMPACT)
    fill(log, produce, 40)
    before = records(log)
    plan = _plan(log, clock.now_ms(), None, {})
    _build_or_discard(plan)  # "crash" before the swap: the .cleaned files stay behind
    cleaned = sorted(p.name for p in log.directory.iterdir() if p.name.endswith(".cleaned"))
    assert cleaned
    (log.directory / cleaned[0]).write_bytes(b"torn")
    copy = tmp_path / "crashed-0"
    shutil.copytree(log.directory, copy)
    reopened = PartitionLog(copy, LogConfig(**COMPACT), now_ms=clock)
    try:
        assert records(reopened) == before
        assert not [p for p in copy.iterdir() if p.name.endswith((".cleaned", ".swap"))]
    finally:
        reopened.close()


def test_a_crash_at_any_step_of_the_swap_loses_and_duplicates_nothing(open_log, produce, clock, tmp_path,
                                                                      monkeypatch):
    log = open_log(**COMPACT)
    fill(log, produce, 40)
    produce(log, keyed([(b"k1", None)]))
    fill(log, produce, 10, prefix="w")
    before = records(log)
    snapshots = []

    def snapshot():
        target = tmp_path / f"crash{len(snapshots)}" / "topic-0"
        shutil.copytree(log.directory, target)
        snapshots.append(target)

    real_replace, real_unlink = os.replace, pathlib.Path.unlink

    def replace(src, dst, *args, **kwargs):
        snapshot()
        return real_replace(src, dst, *args, **kwargs)

    def unlink(self, *args, **kwargs):
        if self.parent == log.directory:
            snapshot()
        return real_unlink(self, *args, **kwargs)

    plan = _plan(log, clock.now_ms(), None, {})
    _build_or_discard(plan)
    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(pathlib.Path, "unlink", unlink)
    result = _commit(plan)
    monkeypatch.undo()
    assert result is not None and len(snapshots) > 10
    after = records(log)
    snapshot()

    assert any(list(d.glob("*.log.swap")) for d in snapshots)  # crashes after the commit point are covered
    original = set(before)
    for directory in snapshots:
        reopened = PartitionLog(directory, LogConfig(**COMPACT), now_ms=clock)
        try:
            rows = records(reopened)
            offsets = [o for o, _, _ in rows]
            assert offsets == sorted(set(offsets)), directory  # no duplicates, in order
            assert set(rows) <= original, directory  # nothing invented
            assert set(after) <= set(rows), directory  # nothing the clean keeps is lost
            assert latest_per_key(rows, reopened.log_end_offset) == latest_per_key(before, log.log_end_offset)
            assert not [p for p in directory.iterdir() if p.name.endswith((".cleaned", ".swap"))]
            assert reopened.log_end_offset == log.log_end_offset
        finally:
            reopened.close()


@pytest.mark.parametrize("compression", [0, 1, 4])
def test_cleaned_log_recovers_cleanly_after_losing_its_indexes(open_log, produce, clock, compression):
    log = open_log(**COMPACT)
    for i in range(30):
        produce(log, keyed([(f"k{i % 4}".encode(), b"x" * 20), (f"j{i % 2}".encode(), b"y")], compression=compression))
    clean_log(log, clock.now_ms())
    after = records(log)
    log.close()
    for path in log.directory.glob("*.index"):
        path.unlink()
    reopened = open_log(**COMPACT)
    assert reopened.recovered_bytes_truncated == 0
    assert records(reopened) == after
