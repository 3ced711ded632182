"""The broker-wide LRU of open segment files: storage descriptors stay bounded whatever the partition count."""

from __future__ import annotations

import os
from pathlib import Path

from broker_sim.storage.batch import parse_batches
from broker_sim.storage.log import LogConfig, PartitionLog, partition_limit, shared_open_segments
from broker_sim.storage.segment import FILES_PER_SEGMENT


def descriptors_under(directory: Path) -> int:
    """Descriptors this process holds on files under `directory`."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        count += target.startswith(str(directory))
    return count


def test_many_partitions_share_a_bounded_lru_and_keep_every_record(tmp_path, batches, clock):
    lru = shared_open_segments(30)  # 10 segments of up to 3 files
    config = LogConfig(segment_bytes=1024 * 1024, index_interval_bytes=1)  # index entries (two more files) at once
    logs = [PartitionLog(tmp_path / f"t-{i}", config, now_ms=clock, open_segments=lru) for i in range(60)]
    try:
        assert descriptors_under(tmp_path) <= 10 * FILES_PER_SEGMENT
        for round_ in range(3):  # every append reopens a released active segment and its indexes
            for i, log in enumerate(logs):
                records = batches.build([b"%d-%d" % (i, round_)])
                log.append(records, parse_batches(records), leader_epoch=0)
            assert descriptors_under(tmp_path) <= 10 * FILES_PER_SEGMENT
        for i, log in enumerate(logs):
            assert log.log_end_offset == 3
            values = [header.base_offset for header in parse_batches(log.read_bytes(0, 1 << 20))]
            assert values == [0, 1, 2]
            assert log.active_segment.offset_index.entries()[-1][0] == 2  # the index survived its release
        assert descriptors_under(tmp_path) <= 10 * FILES_PER_SEGMENT
    finally:
        for log in logs:
            log.close()
    assert descriptors_under(tmp_path) == 0
    reopened = [PartitionLog(tmp_path / f"t-{i}", config, now_ms=clock, open_segments=lru) for i in range(60)]
    try:  # loading recovers each active segment through the same LRU
        assert descriptors_under(tmp_path) <= 10 * FILES_PER_SEGMENT
        assert [log.log_end_offset for log in reopened] == [3] * 60
    finally:
        for log in reopened:
            log.close()


def test_the_default_partition_limit_is_half_the_open_file_limit():
    assert partition_limit(20000) == 10000  # this machine's hard limit: at least 10,000 partitions
    assert partition_limit(1024) == 512
