"""ProducerStateManager: Kafka's idempotent-producer checks, snapshots and reload."""

from __future__ import annotations

import pytest
from kafka.errors import InvalidProducerEpochError, OutOfOrderSequenceNumberError

from broker_sim.storage.batch import parse_batches
from broker_sim.storage.producer_state import DuplicateBatch, ProducerStateManager


def produce_idempotent(log, state, batches, *, pid=7, epoch=0, seq=0, count=3, timestamp=1_000):
    """The broker's produce path: check, append unless duplicate, update. Returns (first, last) offsets."""
    data = batches.build(batches.values(count), producer_id=pid, producer_epoch=epoch, base_sequence=seq, timestamp=timestamp)
    (header,) = parse_batches(data)
    duplicate = state.check(header)
    if duplicate is not None:
        return duplicate.first_offset, duplicate.last_offset
    info = log.append(data, [header], leader_epoch=0)
    state.update(header, info.first_offset, info.max_timestamp)
    return info.first_offset, info.last_offset


@pytest.fixture
def state(tmp_path):
    (tmp_path / "topic-0").mkdir(exist_ok=True)
    return ProducerStateManager(tmp_path / "topic-0")


def header(batches, *, pid=7, epoch=0, seq=0, count=3):
    (h,) = parse_batches(batches.build(batches.values(count), producer_id=pid, producer_epoch=epoch, base_sequence=seq))
    return h


def test_retried_batch_is_a_duplicate_with_its_original_offsets(open_log, state, batches):
    log = open_log()
    assert produce_idempotent(log, state, batches, seq=0) == (0, 2)
    assert produce_idempotent(log, state, batches, seq=3) == (3, 5)
    assert produce_idempotent(log, state, batches, seq=0) == (0, 2)
    assert log.log_end_offset == 6
    assert state.check(header(batches, seq=3)) == DuplicateBatch(3, 5, 1_000)


def test_only_the_last_five_batches_are_remembered(open_log, state, batches):
    log = open_log()
    for i in range(6):
        produce_idempotent(log, state, batches, seq=3 * i)
    with pytest.raises(OutOfOrderSequenceNumberError):
        state.check(header(batches, seq=0))
    assert state.check(header(batches, seq=3)) == DuplicateBatch(3, 5, 1_000)


def test_gap_in_sequence_is_out_of_order(open_log, state, batches):
    produce_idempotent(open_log(), state, batches, seq=0)
    with pytest.raises(OutOfOrderSequenceNumberError) as info:
        state.check(header(batches, seq=4))
    assert info.value.errno == 45


def test_older_epoch_is_fenced(open_log, state, batches):
    produce_idempotent(open_log(), state, batches, epoch=2, seq=0)
    with pytest.raises(InvalidProducerEpochError) as info:
        state.check(header(batches, epoch=1, seq=3))
    assert info.value.errno == 47


def test_new_epoch_must_start_at_sequence_zero(open_log, state, batches):
    log = open_log()
    produce_idempotent(log, state, batches, epoch=0, seq=0)
    with pytest.raises(OutOfOrderSequenceNumberError):
        state.check(header(batches, epoch=1, seq=3))
    assert produce_idempotent(log, state, batches, epoch=1, seq=0) == (3, 5)
    assert state.producers[7].epoch == 1 and len(state.producers[7].batches) == 1


def test_unknown_producer_is_accepted_at_any_sequence_like_kafka_2_5_and_later(state, batches):
    assert state.check(header(batches, pid=99, seq=12345)) is None


def test_sequence_wraps_from_int32_max_to_zero(open_log, state, batches):
    log = open_log()
    produce_idempotent(log, state, batches, seq=2**31 - 3, count=3)
    assert state.producers[7].last_seq == 2**31 - 1
    assert state.check(header(batches, seq=0)) is None
    produce_idempotent(log, state, batches, seq=0)
    assert state.producers[7].last_seq == 2


def test_batches_without_producer_id_are_not_checked(state, batches):
    (h,) = parse_batches(batches.build([b"a"]))
    assert state.check(h) is None
    state.update(h, 0, 1)
    assert dict(state.producers) == {}


def test_snapshot_and_reload_restore_duplicate_detection(open_log, state, batches, tmp_path):
    log = open_log()
    for i in range(3):
        produce_idempotent(log, state, batches, seq=3 * i)
    state.take_snapshot(log.log_end_offset)
    produce_idempotent(log, state, batches, seq=9)  # after the snapshot: replayed from the log
    reloaded = ProducerStateManager(log.directory)
    reloaded.load(log)
    assert reloaded.producers[7].batches == state.producers[7].batches
    assert reloaded.check(header(batches, seq=3)) == DuplicateBatch(3, 5, 1_000)
    assert reloaded.check(header(batches, seq=12)) is None


def test_reload_from_the_log_alone_without_snapshot(open_log, state, batches):
    log = open_log()
    produce_idempotent(log, state, batches, pid=1, seq=0)
    produce_idempotent(log, state, batches, pid=2, epoch=4, seq=0)
    produce_idempotent(log, state, batches, pid=1, seq=3)
    reloaded = ProducerStateManager(log.directory)
    reloaded.load(log)
    assert {pid: (e.epoch, e.last_seq, e.last_offset) for pid, e in reloaded.producers.items()} == {
        1: (0, 5, 8),
        2: (4, 2, 5),
    }


def test_corrupt_snapshot_is_ignored_and_removed(open_log, state, batches):
    log = open_log()
    produce_idempotent(log, state, batches, seq=0)
    state.take_snapshot(log.log_end_offset)
    path = log.directory / f"{3:020d}.snapshot"
    path.write_bytes(path.read_bytes().replace(b'"epoch":0', b'"epoch":5'))
    reloaded = ProducerStateManager(log.directory)
    reloaded.load(log)
    assert reloaded.producers[7].epoch == 0
    assert not path.exists()


def test_snapshot_beyond_the_log_end_is_discarded(open_log, state, batches):
    log = open_log()
    produce_idempotent(log, state, batches, seq=0)
    produce_idempotent(log, state, batches, seq=3)
    state.take_snapshot(log.log_end_offset)
    log.truncate_to(3)
    reloaded = ProducerStateManager(log.directory)
    reloaded.load(log)
    assert reloaded.producers[7].last_seq == 2
    assert reloaded.snapshot_offsets() == []


def test_only_the_latest_two_snapshots_are_kept(open_log, state, batches):
    log = open_log()
    for i in range(4):
        produce_idempotent(log, state, batches, seq=3 * i)
        state.take_snapshot(log.log_end_offset)
    assert state.snapshot_offsets() == [9, 12]


def test_producers_below_the_log_start_are_forgotten_on_reload(open_log, state, batches):
    log = open_log()
    produce_idempotent(log, state, batches, pid=1, seq=0)
    produce_idempotent(log, state, batches, pid=2, seq=0)
    log.delete_records_before(3)
    reloaded = ProducerStateManager(log.directory)
    reloaded.load(log)
    assert set(reloaded.producers) == {2}


def test_snapshot_file_matches_its_published_json_schema(open_log, state, batches):
    import json
    from pathlib import Path

    jsonschema = pytest.importorskip("jsonschema")
    log = open_log()
    produce_idempotent(log, state, batches, seq=0)
    produce_idempotent(log, state, batches, pid=8, epoch=3, seq=0)
    state.take_snapshot(log.log_end_offset)
    schema = json.loads((Path(__file__).parents[2] / "broker_sim" / "schemas" / "producer-snapshot.json").read_text())
    document = json.loads((log.directory / f"{6:020d}.snapshot").read_text())
    jsonschema.validate(document, schema)
