"""LeaderEpochCache: assignment, persistence, OffsetForLeaderEpoch answers, truncation."""

from __future__ import annotations

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
