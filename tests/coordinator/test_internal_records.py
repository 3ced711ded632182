"""The batches both coordinators append: keys, values and tombstones; transactional on a producer's behalf."""
from __future__ import annotations

from broker_sim.coordinator.records import build_batch, iter_batches, iter_records


def test_batch_carries_keys_values_and_tombstones():
    batch = build_batch([(b"k1", b"v1"), (b"k2", None)], timestamp_ms=5)
    assert list(iter_records(batch)) == [(0, b"k1", b"v1"), (1, b"k2", None)]
    [header] = iter_batches(batch)
    assert not header.is_transactional and header.producer_id == -1


def test_a_producers_batch_is_transactional_without_a_sequence():
    [header] = iter_batches(build_batch([(b"k", b"v")], timestamp_ms=5, producer=(42, 3)))
    assert header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (42, 3, -1)
