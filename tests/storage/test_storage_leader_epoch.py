"""LeaderEpochCache: assignment, persistence, OffsetForLeaderEpoch answers, truncation."""

from __future__ import annotations

import pytest

from broker_sim.storage.batch import parse_batches
from broker_sim.storage.leader_epoch import LeaderEpochCache


def test_assign_persists_in_kafka_checkpoint_format_and_reloads(tmp_path):
    cache = LeaderEpochCache(tmp_path)
    assert cache.latest_epoch == -1
    assert cache.assign(0, 0) and cache.assign(2, 10)
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n2 10\n"
    assert LeaderEpochCache(tmp_path).entries == [(0, 0), (2, 10)]


def test_assign_ignores_epochs_not_above_the_latest(tmp_path):
    cache = LeaderEpochCache(tmp_path)
    cache.assign(3, 5)
    assert not cache.assign(3, 9)
    assert not cache.assign(1, 9)
    assert cache.entries == [(3, 5)]


def test_assign_drops_entries_starting_at_or_after_the_new_start_offset(tmp_path):
    cache = LeaderEpochCache(tmp_path)
    cache.assign(1, 0)
    cache.assign(2, 10)
    cache.assign(4, 10)
    assert cache.entries == [(1, 0), (4, 10)]


def test_end_offset_for_follows_kafka(tmp_path):
    cache = LeaderEpochCache(tmp_path)
    assert cache.end_offset_for(0, 50) == (-1, -1)
    cache.assign(1, 5)
    cache.assign(3, 20)
    cache.assign(6, 40)
    assert cache.end_offset_for(6, 50) == (6, 50)  # latest: log end offset
    assert cache.end_offset_for(3, 50) == (3, 40)
    assert cache.end_offset_for(4, 50) == (3, 40)  # unknown epoch between: floor epoch, next start
    assert cache.end_offset_for(0, 50) == (0, 5)  # below the first epoch
    assert cache.end_offset_for(7, 50) == (-1, -1)  # above the latest
    assert cache.end_offset_for(-1, 50) == (-1, -1)


def test_truncate_from_end_drops_epochs_starting_at_or_after_the_offset(tmp_path):
    cache = LeaderEpochCache(tmp_path)
    for epoch, start in [(1, 0), (2, 10), (3, 20)]:
        cache.assign(epoch, start)
    cache.truncate_from_end(10)
    assert LeaderEpochCache(tmp_path).entries == [(1, 0)]


def test_truncate_from_start_keeps_the_epoch_in_force_at_the_new_start(tmp_path):
    cache = LeaderEpochCache(tmp_path)
    for epoch, start in [(1, 0), (2, 10), (3, 20)]:
        cache.assign(epoch, start)
    cache.truncate_from_start(15)
    assert LeaderEpochCache(tmp_path).entries == [(2, 15), (3, 20)]
    cache.truncate_from_start(20)
    assert cache.entries == [(3, 20)]


@pytest.mark.parametrize("text", [
    b"0\n2\n0 0\n",              # count says 2, one entry
    b"0\n1\nzero 0\n",           # not a number
    b"7\n0\n",                   # unknown version
    b"0\n2\n3 10\n1 20\n",       # epochs going backwards
    b"0\n2\n1 20\n3 10\n",       # start offsets going backwards
    b"\xff\xfe\x00",             # not text
])
def test_an_unreadable_checkpoint_is_rebuilt_from_the_epochs_in_the_batches(tmp_path, open_log, batches, text):
    log = open_log()
    for epoch, count in ((0, 2), (0, 1), (2, 3), (5, 1)):
        data = batches.build(batches.values(count))
        log.append(data, parse_batches(data), leader_epoch=epoch)
    (log.directory / "leader-epoch-checkpoint").write_bytes(text)
    cache = LeaderEpochCache(log.directory, rebuild_from=log)
    assert cache.entries == [(0, 0), (2, 3), (5, 6)]  # each epoch from its first batch, as LogSegment.recover
    assert LeaderEpochCache(log.directory).entries == cache.entries  # and written back


def test_an_unreadable_checkpoint_without_a_log_starts_empty(tmp_path):
    (tmp_path / "leader-epoch-checkpoint").write_text("0\n1\n")
    assert LeaderEpochCache(tmp_path).entries == []
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n0\n"
