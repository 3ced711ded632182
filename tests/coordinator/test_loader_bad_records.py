"""Coordinators load past bad records: what cannot be decoded is skipped and logged, the rest of the partition loads.

Bad bytes are planted the way they reached the log before Produce to internal
topics was refused: raw batches appended to the partition's log with no
validation (``PartitionLog.append``).  Each test then reloads (``reopen``, a
restart) and checks that the good records around the bad ones are all there
and that the log names the partition and offset of what was skipped.
"""
from __future__ import annotations

import logging
import struct

from crc32c import crc32c

from broker_sim.coordinator.group.records import (
    OFFSETS_TOPIC, CommittedOffset, GroupKey, OffsetKey, encode_key, encode_offset,
)
from broker_sim.coordinator.internal_topic import partition_for
from broker_sim.coordinator.records import build_batch
from broker_sim.coordinator.txn.records import TRANSACTION_STATE_TOPIC, StoredTxn
from broker_sim.coordinator.txn.records import encode_key as txn_key
from broker_sim.coordinator.txn.records import encode_value as txn_value
from broker_sim.coordinator.txn.state import ONGOING
from broker_sim.storage.batch import parse_batches

from test_group_offsets import commit, fetched
from test_txn_coordinator import _open_txn
from test_txn_coordinator import make, markers  # noqa: F401 (fixtures)

PARTITIONS = 3


def plant(partition, records: list[tuple[bytes | None, bytes | None]]) -> int:
    """Append ``records`` as one raw batch, unvalidated; returns its base offset."""
    data = build_batch(records, timestamp_ms=0)
    return plant_bytes(partition, data)


def plant_bytes(partition, data: bytes) -> int:
    info = partition.log.append(data, parse_batches(data, verify_crc=False), leader_epoch=0)
    return info.first_offset


def lying_count(data: bytes, count: int) -> bytes:
    """``data`` (one batch) claiming ``count`` records, with a CRC that matches the lie."""
    patched = bytearray(data)
    struct.pack_into(">i", patched, 57, count)  # records count, the header's last field
    struct.pack_into(">I", patched, 17, crc32c(bytes(patched[21:])))  # CRC32C from attributes to the end
    return bytes(patched)


def _group_in(index: int, prefix: str) -> str:
    return next(f"{prefix}{n}" for n in range(1000) if partition_for(f"{prefix}{n}", PARTITIONS) == index)


def test_undecodable_offsets_records_are_skipped_and_the_rest_loads(make_coordinator, offsets_topic, caplog):
    coordinator = make_coordinator()
    commit(coordinator, "good", offsets=[("events", 0, 10)])
    index = partition_for("good", PARTITIONS)
    partition = offsets_topic.partition(index)
    other = _group_in(index, "victim")
    misplaced = _group_in((index + 1) % PARTITIONS, "elsewhere")
    valid = encode_offset(CommittedOffset(99))
    bad = plant(partition, [
        (encode_key(OffsetKey("good", "events", 0)), valid[:7]),        # valid key, truncated value
        (encode_key(OffsetKey(other, "events", 1)), b"\x00\x09garbage"),  # value of an unknown, newer version
        (b"\x00\x07whatever", valid),                                    # unknown key version
        (None, valid),                                                   # no key at all
        (b"\x00", valid),                                                # a key shorter than its version
        (encode_key(GroupKey(other)), valid),                            # an offset value as group metadata
        (encode_key(OffsetKey(misplaced, "events", 0)), valid),          # a group of another partition
    ])
    commit(coordinator, other, offsets=[("events", 1, 5)])

    offsets_topic.reopen()
    with caplog.at_level(logging.WARNING, logger="broker_sim.coordinator.group.coordinator"):
        restarted = make_coordinator()
    assert fetched(restarted, "good") == {("events", 0): 10}
    assert fetched(restarted, other) == {("events", 1): 5}
    assert misplaced not in restarted.groups
    skipped = [r.getMessage() for r in caplog.records if "skipping the record" in r.getMessage()]
    assert len(skipped) == 7
    assert all(m.startswith(f"{OFFSETS_TOPIC}-{index}: skipping the record at offset ") for m in skipped)
    assert {int(m.split(" at offset ")[1].split(":")[0]) for m in skipped} == set(range(bad, bad + 7))
    # the loaded coordinator keeps working on the same partition
    assert commit(restarted, "good", offsets=[("events", 0, 11)]) == {("events", 0): 0}


def test_a_batch_with_a_lying_record_count_is_skipped_whole(make_coordinator, offsets_topic, caplog):
    coordinator = make_coordinator()
    coordinator.ensure_topic()
    index = partition_for("g", PARTITIONS)
    partition = offsets_topic.partition(index)
    records = [(encode_key(OffsetKey("g", "events", 3)), encode_offset(CommittedOffset(3)))]
    bad = plant_bytes(partition, lying_count(build_batch(records, 0), 40))
    commit(coordinator, "g", offsets=[("events", 0, 10)])

    offsets_topic.reopen()
    with caplog.at_level(logging.WARNING, logger="broker_sim.coordinator.group.coordinator"):
        restarted = make_coordinator()
    assert fetched(restarted, "g") == {("events", 0): 10}
    assert any(f"{OFFSETS_TOPIC}-{index}: skipping the unreadable batch at offset {bad}" in r.getMessage()
               for r in caplog.records)


def test_undecodable_transaction_state_records_are_skipped_and_the_rest_loads(make, state_topic, caplog):
    coordinator = make()
    pid, epoch = _open_txn(coordinator, "tx")
    index = coordinator.partition_of("tx")
    other = _group_in(index, "other-tx")
    misplaced = _group_in((index + 1) % PARTITIONS, "far-tx")
    partition = state_topic.partition(index)
    valid = txn_value(StoredTxn(7, 0, 60_000, ONGOING, frozenset({("events", 0)}), 0, 0))
    bad = plant(partition, [
        (txn_key("tx"), valid[:9]),                 # valid key, truncated value
        (txn_key(other), encode_offset(CommittedOffset(5))),  # a value of another topic's type
        (txn_key(other), valid[:16] + b"\x42" + valid[17:]),  # status 66 (after version, id, epoch, timeout)
        (b"\x00\x05" + txn_key("tx")[2:], valid),   # unknown key version
        (None, valid),                              # no key
        (txn_key(misplaced), valid),                # an id of another partition
    ])
    _open_txn(coordinator, other)

    state_topic.reopen()
    with caplog.at_level(logging.WARNING, logger="broker_sim.coordinator.txn.coordinator"):
        restarted = make()
    assert (restarted.transactions["tx"].producer_id, restarted.transactions["tx"].producer_epoch) == (pid, epoch)
    assert restarted.transactions["tx"].state is ONGOING
    assert restarted.transactions["tx"].partitions == {("events", 0), ("events", 1)}
    assert restarted.transactions[other].state is ONGOING
    assert misplaced not in restarted.transactions
    skipped = [r.getMessage() for r in caplog.records if "skipping the record" in r.getMessage()]
    assert len(skipped) == 6
    assert all(m.startswith(f"{TRANSACTION_STATE_TOPIC}-{index}: skipping the record at offset ") for m in skipped)
    assert {int(m.split(" at offset ")[1].split(":")[0]) for m in skipped} == set(range(bad, bad + 6))
