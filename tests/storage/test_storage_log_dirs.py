"""storage/log_dirs.py: log.dirs parsing, placement in the emptiest dir, restart scan, the future-copy move."""
from __future__ import annotations

import pytest

from broker_sim.storage.batch import parse_batches
from broker_sim.storage.log import LogConfig, PartitionLog
from broker_sim.storage.log_dirs import LogDirs, copy_pass, finish_copy, future_path, parse_log_dirs


def test_log_dirs_are_parsed_placed_in_the_emptiest_and_found_again(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    assert parse_log_dirs("", tmp_path) == [tmp_path]
    assert parse_log_dirs(f" {a} ,{b}", tmp_path) == [a, b]
    with pytest.raises(ValueError, match="twice"):
        parse_log_dirs(f"{a},{a}", tmp_path)
    dirs = LogDirs([a, b])
    paths = [dirs.path("t", i) for i in range(3)]
    assert paths == [a / "t-0", b / "t-1", a / "t-2"]
    for path in paths:
        path.mkdir()
    (b / "t-2").mkdir()  # a move cut short after its rename: the copy in the first listed dir wins
    (b / "t-3.0123-future").mkdir()  # a move interrupted before its rename: removed
    again = LogDirs([a, b])
    assert again.located == {("t", 0): a, ("t", 1): b, ("t", 2): a}
    assert sorted(p.name for p in b.iterdir() if not p.name.endswith("-delete")) == ["t-1"]
    assert again.path("u", 0) == b / "u-0"  # b has fewer partitions now


def test_a_future_copy_brought_up_to_date_on_the_loop_holds_every_record(tmp_path, batches, clock):
    source = PartitionLog(tmp_path / "a" / "t-0", LogConfig(segment_bytes=4096), now_ms=clock)
    def produce(count, start):
        for i in range(start, start + count):
            records = batches.build([b"r%04d" % i])
            source.append(records, parse_batches(records), leader_epoch=0)
    produce(100, 0)  # several segments
    future = future_path(tmp_path / "b", "t-0")
    copy_pass(source.directory, future)
    produce(30, 100)  # appended to the active segment after the copy, and maybe a roll
    finish_copy(source.directory, future, tmp_path / "b" / "t-0")
    source.close()
    moved = PartitionLog(tmp_path / "b" / "t-0", LogConfig(segment_bytes=4096), now_ms=clock)
    try:
        assert moved.log_end_offset == 130
        assert [h.base_offset for h in parse_batches(moved.read_bytes(0, 1 << 20))][:5] == [0, 1, 2, 3, 4]
        offsets = []
        position = 0
        while position < 130:
            headers = parse_batches(moved.read_bytes(position, 1 << 20))
            offsets += [h.base_offset for h in headers]
            position = headers[-1].base_offset + 1
        assert offsets == list(range(130))
        assert moved.recovered_bytes_truncated == 0
        state = ([s.base_offset for s in moved.segments], moved.log_end_offset, moved.active_segment.max_timestamp)
    finally:
        moved.close()
    # how the broker reopens a moved replica: the active segment adopted from its indexes, not rescanned
    adopted = PartitionLog(tmp_path / "b" / "t-0", LogConfig(segment_bytes=4096), now_ms=clock, recover_tail=False)
    try:
        assert ([s.base_offset for s in adopted.segments], adopted.log_end_offset,
                adopted.active_segment.max_timestamp) == state
        records = batches.build([b"after"])
        assert adopted.append(records, parse_batches(records), leader_epoch=0).first_offset == 130
    finally:
        adopted.close()


def test_segments_the_source_deleted_during_a_move_do_not_come_back_on_the_target(tmp_path, batches, clock):
    """Retention / DeleteRecords on the source between the copy pass and ``finish_copy``: the target ends with
    exactly the source's files (no deleted segment resurrected, its disk space and records gone for good)."""
    config = LogConfig(segment_bytes=1024)
    source = PartitionLog(tmp_path / "a" / "t-0", config, now_ms=clock)
    for i in range(100):
        records = batches.build([b"r%04d" % i])
        source.append(records, parse_batches(records), leader_epoch=0)
    future = future_path(tmp_path / "b", "t-0")
    copy_pass(source.directory, future)
    copied_segments = sorted(p.name for p in future.glob("*.log"))
    start = source.segments[2].base_offset  # the first two segments go, as DeleteRecords would drop them
    source.delete_records_before(start)
    kept = sorted(p.name for p in source.directory.iterdir())
    kept_segments = [s.base_offset for s in source.segments]
    assert len(copied_segments) > len([name for name in kept if name.endswith(".log")])
    finish_copy(source.directory, future, tmp_path / "b" / "t-0")
    source.close()
    assert sorted(p.name for p in (tmp_path / "b" / "t-0").iterdir()) == kept
    moved = PartitionLog(tmp_path / "b" / "t-0", config, now_ms=clock)
    try:
        assert [s.base_offset for s in moved.segments] == kept_segments
        assert moved.log_start_offset == start and moved.log_end_offset == 100
        assert parse_batches(moved.read_bytes(start, 1 << 20))[0].base_offset == start
    finally:
        moved.close()


def test_a_copy_pass_keeps_to_replica_alter_log_dirs_io_max_bytes_per_second(tmp_path):
    """The move's copy is paced by Kafka's ``replica.alter.log.dirs.io.max.bytes.per.second`` (default: no limit),
    every byte counted; the copy is whole and fsynced either way."""
    import os
    import time

    from broker_sim.config import BrokerConfig
    from broker_sim.replication.throttle import ReplicationThrottles

    source = tmp_path / "a" / "t-0"
    source.mkdir(parents=True)
    data = os.urandom(3 << 20)
    (source / "00000000000000000000.log").write_bytes(data)
    rate = 4 << 20
    timings = {}
    for name, config in (("unlimited", {}), ("paced", {"replica.alter.log.dirs.io.max.bytes.per.second": rate})):
        throttles = ReplicationThrottles(BrokerConfig(config), broker_id=0)
        future = future_path(tmp_path / name, "t-0")
        started = time.monotonic()
        assert copy_pass(source, future, throttles.pace_copy) == len(data)
        timings[name] = time.monotonic() - started
        assert (future / "00000000000000000000.log").read_bytes() == data
        assert throttles.alter_log_dirs.recorded_bytes == len(data)
    assert timings["paced"] >= 0.9 * len(data) / rate, timings  # 3 MiB at 4 MiB/s: 0.75 s at least
    assert timings["unlimited"] < timings["paced"] / 3, timings
