"""PartitionLog: append, read, roll, retention, DeleteRecords, timestamps, truncation."""

from __future__ import annotations

import os

import pytest
from kafka.errors import MessageSizeTooLargeError, OffsetOutOfRangeError
from kafka.record.default_records import DefaultRecordBatch

from broker_sim.storage.batch import parse_batches
from broker_sim.storage.log import LogConfig
from broker_sim.storage.validator import rules_for, validate_records


def records_of(data: bytes):
    """(offset, timestamp, value) of every record in a read result."""
    out = []
    for header in parse_batches(data):
        batch = DefaultRecordBatch(bytes(data[header.position : header.position + header.size]))
        out.extend((r.offset, r.timestamp, r.value) for r in batch)
    return out


def test_offsets_are_assigned_sequentially_across_produce_calls(open_log, batches, produce):
    log = open_log()
    first = produce(log, batches.build(batches.values(3)) + batches.build(batches.values(2)))
    second = produce(log, batches.build(batches.values(4)))
    assert (first.first_offset, first.last_offset) == (0, 4)
    assert (second.first_offset, second.last_offset) == (5, 8)
    assert log.log_end_offset == 9 and log.log_start_offset == 0
    assert [o for o, _, _ in records_of(log.read_bytes(0, 1 << 20))] == list(range(9))


def test_read_returns_stored_bytes_with_offsets_and_leader_epoch_stamped(open_log, batches, produce):
    log = open_log()
    produce(log, batches.build(batches.values(2), compression=4), leader_epoch=3)
    produce(log, batches.build(batches.values(2)), leader_epoch=4)
    data = log.read_bytes(0, 1 << 20)
    headers = parse_batches(data)  # CRCs still verify
    assert [(h.base_offset, h.partition_leader_epoch) for h in headers] == [(0, 3), (2, 4)]
    assert [v for _, _, v in records_of(data)] == batches.values(2) * 2


def test_create_time_is_kept_and_reported(open_log, batches, produce):
    log = open_log()
    info = produce(log, batches.build(batches.values(3), timestamps=[7, 9, 8]))
    assert (info.log_append_time, info.max_timestamp) == (-1, 9)
    assert [ts for _, ts, _ in records_of(log.read_bytes(0, 1 << 20))] == [7, 9, 8]


def test_log_append_time_rewrites_timestamps_and_crc_still_verifies(open_log, batches, produce, clock):
    log = open_log(message_timestamp_type="LogAppendTime")
    appended_at = clock.advance(ms=4_000_000)
    info = produce(log, batches.build(batches.values(3), timestamp=1, compression=2))
    assert info.log_append_time == appended_at and info.max_timestamp == appended_at
    data = log.read_bytes(0, 1 << 20)
    (header,) = parse_batches(data)
    assert header.timestamp_type == 1
    assert [ts for _, ts, _ in records_of(data)] == [appended_at] * 3


def test_batch_over_the_logs_max_message_bytes_is_refused_by_its_record_rules(open_log, batches):
    """max.message.bytes is checked once, by the validator, with the rules the log's config gives it."""
    log = open_log(max_message_bytes=500)
    with pytest.raises(MessageSizeTooLargeError, match="max.message.bytes=500"):
        validate_records(batches.build(batches.values(10)), rules_for(log.config, 1 << 20))
    assert log.log_end_offset == 0 and log.size_in_bytes == 0


def test_segment_rolls_by_size_and_reads_span_segments(open_log, batches, produce):
    log = open_log(segment_bytes=1000)
    for i in range(10):
        produce(log, batches.build(batches.values(3, prefix=f"b{i}-")))
    assert len(log.segments) > 3
    assert all(s.size <= 1000 for s in log.segments)
    assert [s.base_offset for s in log.segments] == sorted(s.base_offset for s in log.segments)
    regions = log.read(0, 1 << 20)
    assert len(regions) == len(log.segments)
    data = log.read_bytes(0, 1 << 20)
    assert [o for o, _, _ in records_of(data)] == list(range(30))
    assert [o for o, _, _ in records_of(log.read_bytes(13, 1 << 20))][0] == 12  # whole batch containing 13


def test_segment_rolls_by_time_of_first_batch(open_log, batches, produce, clock):
    log = open_log(segment_ms=60_000)
    produce(log, batches.build([b"a"], timestamp=clock.now_ms()))
    clock.advance(ms=60_000)
    produce(log, batches.build([b"b"], timestamp=clock.now_ms()))
    assert len(log.segments) == 1
    clock.advance(ms=1)
    produce(log, batches.build([b"c"], timestamp=clock.now_ms()))
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_maybe_roll_rolls_an_idle_expired_segment_but_not_an_empty_one(open_log, batches, produce, clock):
    log = open_log(segment_ms=1000)
    clock.advance(ms=5000)
    assert not log.maybe_roll()
    produce(log, batches.build([b"a"], timestamp=clock.now_ms()))
    assert not log.maybe_roll()
    clock.advance(ms=1001)
    assert log.maybe_roll()
    assert [s.base_offset for s in log.segments] == [0, 1]
    assert log.segments[0].time_index.last_entry()[0] == clock.now_ms() - 1001


def test_index_lookup_lands_near_an_offset_in_a_large_segment(open_log, batches, produce):
    log = open_log(index_interval_bytes=1024)
    for i in range(500):
        produce(log, batches.build(batches.values(2, prefix=f"{i}:")))
    segment = log.active_segment
    assert len(segment.offset_index) > 50
    indexed_offset, position = segment.offset_index.lookup(601)
    assert indexed_offset <= 601 and 601 - indexed_offset < 30
    (region,) = log.read(601, 1)
    assert region.position >= position > 0
    data = log.read_bytes(601, 1)
    assert [o for o, _, _ in records_of(data)] == [600, 601]
    assert os.pread(region.file.fileno(), region.size, region.position) == data


def test_read_stops_before_max_offset_at_a_batch_boundary(open_log, batches, produce):
    log = open_log()
    for _ in range(5):
        produce(log, batches.build(batches.values(2)))
    assert [o for o, _, _ in records_of(log.read_bytes(0, 1 << 20, max_offset=6))] == list(range(6))
    assert log.read(6, 1 << 20, max_offset=6) == []
    assert log.read(10, 1 << 20) == []


def test_read_respects_max_bytes_but_returns_one_whole_batch_when_min_one_batch(open_log, batches, produce):
    log = open_log()
    sizes = [len(batches.build(batches.values(5)))] * 4
    for _ in range(4):
        produce(log, batches.build(batches.values(5)))
    assert sum(r.size for r in log.read(0, sizes[0] * 2 + 10)) == sizes[0] * 2
    assert sum(r.size for r in log.read(0, 10)) == sizes[0]
    assert log.read(0, 10, min_one_batch=False) == []


def test_read_out_of_range_offsets_raise(open_log, batches, produce):
    log = open_log()
    produce(log, batches.build(batches.values(2)))
    with pytest.raises(OffsetOutOfRangeError) as info:
        log.read(3, 100)
    assert info.value.errno == 1
    log.delete_records_before(1)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)


def test_retention_by_time_deletes_expired_segments_and_start_offset_persists(open_log, batches, produce, clock, tmp_path):
    log = open_log(segment_bytes=600, retention_ms=10_000, file_delete_delay_ms=0)
    start = clock.now_ms()
    for i in range(6):
        produce(log, batches.build(batches.values(3), timestamp=start + i * 1000))
    assert len(log.segments) == 6
    clock.advance(ms=11_500)  # older than 10 s: the segments with timestamps start+0 and start+1000
    assert log.enforce_retention() == 2
    assert log.log_start_offset == 6 == log.segments[0].base_offset
    assert not (tmp_path / "topic-0" / f"{0:020d}.log").exists()
    log.close()
    reopened = open_log()
    assert reopened.log_start_offset == 6 and reopened.log_end_offset == 18
    with pytest.raises(OffsetOutOfRangeError):
        reopened.read(5, 100)


def test_retention_rolls_and_deletes_an_entirely_expired_active_segment(open_log, batches, produce, clock):
    log = open_log(retention_ms=1000)
    produce(log, batches.build(batches.values(3), timestamp=clock.now_ms()))
    clock.advance(ms=5000)
    assert log.enforce_retention() == 1
    assert (log.log_start_offset, log.log_end_offset, log.size_in_bytes) == (3, 3, 0)
    assert produce(log, batches.build([b"x"], timestamp=clock.now_ms())).first_offset == 3


def test_retention_by_size_keeps_the_newest_segments_within_the_limit(open_log, batches, produce):
    log = open_log(segment_bytes=600)
    for _ in range(6):
        produce(log, batches.build(batches.values(3)))
    segment_size = log.segments[0].size
    log.config.retention_bytes = segment_size * 3
    assert log.enforce_retention() == 3
    assert log.size_in_bytes == segment_size * 3 and log.log_start_offset == 9


def test_retention_never_deletes_past_the_high_watermark(open_log, batches, produce, clock):
    log = open_log(segment_bytes=600, retention_ms=0)
    for _ in range(4):
        produce(log, batches.build(batches.values(3), timestamp=1))
    assert log.enforce_retention(high_watermark=6) == 2
    assert log.log_start_offset == 6


def test_deleted_segment_stays_readable_through_an_earlier_region(open_log, batches, produce, clock):
    log = open_log(segment_bytes=600, file_delete_delay_ms=60_000)
    for _ in range(3):
        produce(log, batches.build(batches.values(3)))
    (region, *_) = log.read(0, 1 << 20)
    log.delete_records_before(6)
    assert log.log_start_offset == 6
    assert len(os.pread(region.file.fileno(), region.size, region.position)) == region.size
    clock.advance(ms=60_000)
    log.enforce_retention()
    fd = region.file.fileno()
    assert len(os.pread(fd, region.size, region.position)) == region.size  # the region holds its file
    del region
    with pytest.raises(OSError):  # ... and the descriptor closes with the last holder
        os.fstat(fd)


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_only_the_active_and_recently_read_segments_hold_descriptors(open_log, batches, produce, tmp_path):
    from broker_sim.storage.log import OPEN_INACTIVE_SEGMENTS

    before = open_fds()
    log = open_log(segment_bytes=600, index_interval_bytes=100)
    for _ in range(40):
        produce(log, batches.build(batches.values(3)))
    assert len(log.segments) == 40
    assert open_fds() - before <= 3 + OPEN_INACTIVE_SEGMENTS
    assert [o for o, _, _ in records_of(log.read_bytes(0, 1 << 20))] == list(range(120))  # reopened on demand
    assert open_fds() - before <= 3 + OPEN_INACTIVE_SEGMENTS
    assert sum(segment.files_open for segment in log.segments[:-1]) == OPEN_INACTIVE_SEGMENTS
    assert log.offset_for_timestamp(1_000) == (0, 1_000)
    log.close()
    before = open_fds()
    reopened = open_log(segment_bytes=600, index_interval_bytes=100)  # loading opens one segment at a time
    assert open_fds() - before <= 3 + OPEN_INACTIVE_SEGMENTS
    assert [o for o, _, _ in records_of(reopened.read_bytes(57, 1 << 20))][0] == 57


def test_a_region_keeps_an_evicted_segment_readable(open_log, batches, produce):
    log = open_log(segment_bytes=600)
    for _ in range(10):
        produce(log, batches.build(batches.values(3)))
    (region, *_) = log.read(0, 100)
    for offset in range(3, 27, 3):  # read every other segment: the first is evicted from the open ones
        log.read(offset, 100)
    assert not log.segments[0].files_open
    data = os.pread(region.file.fileno(), region.size, region.position)
    assert [o for o, _, _ in records_of(data)] == [0, 1, 2]


def test_truncation_back_into_a_sealed_segment_makes_it_active_again(open_log, batches, produce):
    log = open_log(segment_bytes=600)
    for _ in range(6):
        produce(log, batches.build(batches.values(3)))
    log.truncate_to(4)
    assert log.log_end_offset == 3
    assert produce(log, batches.build(batches.values(2))).first_offset == 3
    assert [o for o, _, _ in records_of(log.read_bytes(0, 1 << 20))] == [0, 1, 2, 3, 4]


def test_delete_records_inside_a_segment_persists_across_reopen(open_log, batches, produce):
    log = open_log()
    for _ in range(3):
        produce(log, batches.build(batches.values(3)))
    assert log.delete_records_before(4) == 4
    assert len(log.segments) == 1
    assert [o for o, _, _ in records_of(log.read_bytes(4, 1 << 20))][0] == 3  # the batch holding 4
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(10)
    log.close()
    assert open_log().log_start_offset == 4


def test_offset_for_timestamp_finds_the_exact_first_record(open_log, batches, produce):
    log = open_log(index_interval_bytes=100, segment_bytes=2000)
    for i in range(20):
        produce(log, batches.build([b"a", b"b", b"c"], timestamps=[i * 100, i * 100 + 50, i * 100 + 20], compression=1))
    assert log.offset_for_timestamp(0) == (0, 0)
    assert log.offset_for_timestamp(1021) == (31, 1050)
    assert log.offset_for_timestamp(1050) == (31, 1050)
    assert log.offset_for_timestamp(1051) == (33, 1100)
    assert log.offset_for_timestamp(1951) is None
    log.delete_records_before(32)
    assert log.offset_for_timestamp(0) == (32, 1020)


def test_max_timestamp_and_offset_is_the_first_record_with_the_largest_timestamp(open_log, batches, produce):
    log = open_log(segment_bytes=200)
    assert log.max_timestamp_and_offset() is None
    for ts in ([5, 6, 7], [90, 99, 10], [1, 2, 3], [99, 4, 4]):
        produce(log, batches.build([b"x"] * 3, timestamps=ts))
    assert len(log.segments) > 1
    assert log.max_timestamp_and_offset() == (99, 4)


def test_truncate_to_drops_the_tail_and_appends_continue_from_there(open_log, batches, produce):
    log = open_log(segment_bytes=600)
    for _ in range(6):
        produce(log, batches.build(batches.values(3)))
    log.truncate_to(7)  # inside the batch 6..8: the whole batch goes
    assert log.log_end_offset == 6
    assert [o for o, _, _ in records_of(log.read_bytes(0, 1 << 20))] == list(range(6))
    assert produce(log, batches.build([b"z"])).first_offset == 6
    log.close()
    assert open_log().log_end_offset == 7


def test_truncate_below_first_segment_restarts_the_log_at_that_offset(open_log, batches, produce):
    log = open_log(segment_bytes=600)
    for _ in range(4):
        produce(log, batches.build(batches.values(3)))
    log.delete_records_before(6)
    log.truncate_to(2)
    assert (log.log_start_offset, log.log_end_offset, len(log.segments)) == (2, 2, 1)


def test_log_start_offset_checkpoint_uses_kafka_text_format(open_log, batches, produce, tmp_path):
    log = open_log()
    produce(log, batches.build(batches.values(3)))
    log.delete_records_before(2)
    assert (tmp_path / "topic-0" / "log-start-offset").read_text() == "0\n1\n2\n"


def test_flush_messages_fsyncs_the_active_segment(open_log, batches, produce, monkeypatch):
    log = open_log(flush_interval_messages=5)
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    produce(log, batches.build(batches.values(3)))
    assert log.active_segment.file.fileno() not in synced
    produce(log, batches.build(batches.values(3)))
    assert log.active_segment.file.fileno() in synced


def test_topic_configs_override_defaults_and_bad_values_name_the_key():
    config = LogConfig.from_topic_configs(
        {"segment.bytes": "2097152", "retention.ms": "-1", "message.timestamp.type": "LogAppendTime",
         "cleanup.policy": "delete"}
    )
    assert (config.segment_bytes, config.retention_ms, config.message_timestamp_type) == (2097152, -1, "LogAppendTime")
    assert LogConfig.from_topic_configs({"segment.bytes": "2097152", "internal.segment.bytes": "2048"}).segment_bytes \
        == 2048
    assert LogConfig.from_topic_configs({"segment.bytes": "2097152", "internal.segment.bytes": ""}).segment_bytes \
        == 2097152
    with pytest.raises(ValueError, match="invalid value '2048' for config 'segment.bytes': must be >= 1048576"):
        LogConfig.from_topic_configs({"segment.bytes": "2048"})
    with pytest.raises(ValueError, match="invalid value 'soon' for config 'segment.ms'"):
        LogConfig.from_topic_configs({"segment.ms": "soon"})
    with pytest.raises(ValueError, match="message.timestamp.type"):
        LogConfig.from_topic_configs({"message.timestamp.type": "Now"})


def test_delete_removes_the_directory(open_log, batches, produce, tmp_path):
    log = open_log()
    produce(log, batches.build([b"a"]))
    log.delete()
    assert not (tmp_path / "topic-0").exists()


def test_replayed_old_create_time_data_does_not_roll_every_append(open_log, batches, produce, clock):
    log = open_log(segment_ms=60_000)
    for i in range(5):
        produce(log, batches.build([b"old"], timestamp=1_000 + i))
    assert len(log.segments) == 1



def test_open_segments_releases_the_least_recently_used_beyond_its_capacity(tmp_path):
    from broker_sim.storage.segment import LogSegment, OpenSegments

    open_segments = OpenSegments(2)
    segments = [LogSegment(tmp_path, base, index_interval_bytes=4096, now_ms=0) for base in (0, 10, 20)]
    for segment in segments:
        segment.make_inactive(open_segments)
    assert [s.files_open for s in segments] == [False, True, True]
    segments[1].file  # noqa: B018 - a read: 10 becomes the most recent, 20 the least
    segments[0].file  # noqa: B018 - reopened, so 20 is released
    assert [s.files_open for s in segments] == [True, True, False] and len(open_segments) == 2
    segments[2].make_active()  # truncation made it the last segment: held outside the LRU
    assert segments[2].files_open and len(open_segments) == 2
    segments[1].make_active()
    assert segments[1].files_open and len(open_segments) == 1
    for segment in segments:
        segment.close()
    assert len(open_segments) == 0
