"""Transactions in a partition: control markers, the last stable offset and the aborted-transaction index.

Real ``Partition`` objects in tmp_path, batches built as clients build them,
markers written as the transaction coordinator writes them.
"""
from __future__ import annotations

import asyncio

import pytest
from kafka.errors import InvalidProducerEpochError, InvalidRecordError, TransactionCoordinatorFencedError
from kafka.record.default_records import DefaultRecordBatch

from broker_sim.replication.partition import Partition
from broker_sim.storage.batch import parse_batches
from broker_sim.storage.log import LogConfig
from broker_sim.storage.txn_index import (
    ABORT, COMMIT, ENTRY, AbortedTxn, TransactionIndex, build_control_batch, control_type,
)

P1, P2, P3 = 1001, 1002, 1003


@pytest.fixture
def open_partition(tmp_path, clock):
    opened = []

    def open_(**config) -> Partition:
        partition = Partition("t", 0, tmp_path / "t-0", LogConfig(**config), broker_id=0, now_ms=clock)
        opened.append(partition)
        return partition

    yield open_
    for partition in opened:
        if not partition.log.closed:
            partition.close()


class Producer:
    """A transactional producer's batches for one partition: sequences counted per epoch."""

    def __init__(self, batches, producer_id: int, epoch: int = 0) -> None:
        self.batches, self.producer_id, self.epoch, self.sequence = batches, producer_id, epoch, 0

    def batch(self, *values: bytes, transactional: bool = True) -> bytes:
        data = self.batches.build(list(values), producer_id=self.producer_id, producer_epoch=self.epoch,
                                  base_sequence=self.sequence, transactional=transactional)
        self.sequence += len(values)
        return data


def _values(partition, start: int = 0) -> list[bytes]:
    data = partition.log.read_bytes(start, 1 << 20)
    out = []
    for header in parse_batches(data):
        if not header.is_control:
            out.extend(r.value for r in DefaultRecordBatch(data[header.position:header.position + header.size]))
    return out


# --- control batches ---------------------------------------------------------------------------

@pytest.mark.parametrize("commit", [True, False])
def test_control_batch_is_kafkas_marker(commit):
    data = build_control_batch(7, 3, 2, commit, 1234)
    (header,) = parse_batches(data)  # CRC valid after the control bit was set
    assert (header.is_control, header.is_transactional, header.producer_id, header.producer_epoch,
            header.base_sequence, header.record_count) == (True, True, 7, 3, -1, 1)
    (record,) = list(DefaultRecordBatch(data))
    assert record.key == bytes.fromhex("0000") + (b"\x00\x01" if commit else b"\x00\x00")
    assert record.value == bytes.fromhex("0000" "00000002")
    assert control_type(data) == (COMMIT if commit else ABORT)


def test_clients_may_not_produce_control_batches(open_partition):
    with pytest.raises(InvalidRecordError, match="control batches"):
        open_partition().append_records(build_control_batch(7, 0, 0, True, 1))


# --- last stable offset ------------------------------------------------------------------------------

def test_lso_is_the_first_offset_of_the_oldest_open_transaction(open_partition, batches):
    partition = open_partition()
    one, two = Producer(batches, P1), Producer(batches, P2)
    partition.append_records(batches.build([b"plain"]))
    assert partition.last_stable_offset == partition.high_watermark == 1
    partition.append_records(one.batch(b"a", b"b"))  # offsets 1-2
    partition.append_records(batches.build([b"plain2"]))  # 3
    partition.append_records(two.batch(b"c"))  # 4
    assert (partition.high_watermark, partition.last_stable_offset) == (5, 1)
    assert partition.write_txn_marker(P1, 0, 0, commit=True) == 5
    assert partition.last_stable_offset == 4  # P2's transaction is still open
    partition.write_txn_marker(P2, 0, 0, commit=False)
    assert partition.last_stable_offset == partition.high_watermark == 7


def test_read_committed_stops_at_the_lso(open_partition, batches):
    partition = open_partition()
    one = Producer(batches, P1)
    partition.append_records(batches.build([b"before"]))
    partition.append_records(one.batch(b"open"))
    partition.append_records(batches.build([b"after"]))
    committed = partition.read(0, 1 << 20, min_one_batch=True, read_committed=True)
    everything = partition.read(0, 1 << 20, min_one_batch=True)
    assert sum(r.size for r in committed) < sum(r.size for r in everything)
    assert partition.read(1, 1 << 20, min_one_batch=True, read_committed=True) == []
    partition.write_txn_marker(P1, 0, 0, commit=True)
    assert len(partition.read(1, 1 << 20, min_one_batch=True, read_committed=True)) == 1


def test_a_second_transaction_of_the_same_producer_opens_at_its_first_batch(open_partition, batches):
    partition = open_partition()
    one = Producer(batches, P1)
    partition.append_records(one.batch(b"a"))
    partition.write_txn_marker(P1, 0, 0, commit=True)
    partition.append_records(one.batch(b"b"))
    assert partition.last_stable_offset == 2


# --- fencing ---------------------------------------------------------------------------------------------

def test_a_fencing_marker_refuses_the_zombies_later_batches(open_partition, batches):
    partition = open_partition()
    zombie = Producer(batches, P1, epoch=0)
    partition.append_records(zombie.batch(b"a"))
    partition.write_txn_marker(P1, 1, 0, commit=False)  # the coordinator aborted with the bumped epoch
    with pytest.raises(InvalidProducerEpochError):
        partition.append_records(zombie.batch(b"late"))
    with pytest.raises(InvalidProducerEpochError):
        partition.write_txn_marker(P1, 0, 0, commit=True)
    successor = Producer(batches, P1, epoch=2)
    partition.append_records(successor.batch(b"new"))
    assert partition.producers.ongoing_transactions() == {P1: 2}


def test_a_marker_from_an_older_coordinator_is_refused(open_partition, batches):
    partition = open_partition()
    partition.append_records(Producer(batches, P1).batch(b"a"))
    partition.write_txn_marker(P1, 0, 5, commit=True)
    with pytest.raises(TransactionCoordinatorFencedError):
        partition.write_txn_marker(P1, 0, 4, commit=True)


# --- aborted-transaction index -------------------------------------------------------------------------------

def test_an_abort_is_indexed_and_listed_for_fetches_that_overlap_it(open_partition, batches):
    partition = open_partition()
    one, two = Producer(batches, P1), Producer(batches, P2)
    partition.append_records(one.batch(b"a1"))  # 0
    partition.append_records(two.batch(b"b1"))  # 1
    partition.append_records(one.batch(b"a2"))  # 2
    partition.write_txn_marker(P1, 0, 0, commit=False)  # 3; P2 still open -> LSO 1
    partition.write_txn_marker(P2, 0, 0, commit=True)  # 4
    assert partition.log.active_segment.txn_index.entries == (AbortedTxn(P1, 0, 3, 1),)
    assert partition.aborted_transactions(0, 5) == [(P1, 0)]
    assert partition.aborted_transactions(3, 5) == [(P1, 0)]  # the marker itself is in range
    assert partition.aborted_transactions(4, 5) == []
    assert _values(partition) == [b"a1", b"b1", b"a2"]  # read_uncommitted readers see everything


def test_a_marker_with_nothing_written_here_adds_no_index_entry(open_partition):
    partition = open_partition()
    partition.write_txn_marker(P1, 0, 0, commit=False)
    assert partition.aborted_transactions(0, 10) == []


def _three_aborts(partition, batches):
    for pid in (P1, P2, P3):
        partition.append_records(Producer(batches, pid).batch(b"x" * 200))
        partition.write_txn_marker(pid, 0, 0, commit=False)


def test_aborts_are_found_across_rolled_segments(open_partition, batches):
    partition = open_partition(segment_bytes=300)
    _three_aborts(partition, batches)
    assert len(partition.log.segments) > 1
    assert partition.aborted_transactions(0, 100) == [(P1, 0), (P2, 2), (P3, 4)]
    assert partition.aborted_transactions(2, 100) == [(P2, 2), (P3, 4)]


def test_the_index_survives_a_restart(open_partition, batches):
    partition = open_partition(segment_bytes=300)
    _three_aborts(partition, batches)
    partition.close()
    reopened = open_partition(segment_bytes=300)
    assert reopened.aborted_transactions(0, 100) == [(P1, 0), (P2, 2), (P3, 4)]


def test_recovery_rebuilds_lost_index_files_from_the_log(open_partition, batches, tmp_path):
    partition = open_partition(segment_bytes=300)
    _three_aborts(partition, batches)
    open_txn = Producer(batches, 2000)
    partition.append_records(open_txn.batch(b"open"))
    partition.close()
    for path in (tmp_path / "t-0").iterdir():
        if path.suffix in (".txnindex", ".snapshot"):
            path.unlink()
    reopened = open_partition(segment_bytes=300)
    assert reopened.aborted_transactions(0, 100) == [(P1, 0), (P2, 2), (P3, 4)]
    assert reopened.last_stable_offset == 6  # the open transaction is open again


def test_an_open_transaction_survives_a_restart(open_partition, batches):
    partition = open_partition()
    partition.append_records(batches.build([b"x"]))
    partition.append_records(Producer(batches, P1).batch(b"open"))
    partition.close()
    reopened = open_partition()
    assert reopened.last_stable_offset == 1
    reopened.write_txn_marker(P1, 0, 0, commit=False)
    assert reopened.aborted_transactions(0, 10) == [(P1, 1)]


def test_index_files_drop_a_torn_last_entry(tmp_path):
    path = tmp_path / "00000000000000000000.txnindex"
    index = TransactionIndex(path)
    index.append(AbortedTxn(1, 0, 5, 6))
    index.append(AbortedTxn(2, 6, 9, 10))
    path.write_bytes(path.read_bytes()[:-3])
    reopened = TransactionIndex(path)
    assert reopened.entries == (AbortedTxn(1, 0, 5, 6),)
    assert path.stat().st_size == ENTRY.size


def test_truncation_drops_entries_of_removed_markers(open_partition, batches):
    partition = open_partition()
    _three_aborts(partition, batches)
    partition.log.truncate_to(3)
    assert partition.log.collect_aborted_txns(0, 100) == [AbortedTxn(P1, 0, 1, 2)]


def test_compaction_keeps_markers_transactional_batches_and_index_entries(open_partition, keyed_batches):
    partition = open_partition(cleanup_policy="compact", segment_bytes=400, index_interval_bytes=100)
    aborted = keyed_batches([(b"k", b"aborted")], producer_id=P1, producer_epoch=0, base_sequence=0,
                            transactional=True)
    partition.append_records(aborted)
    partition.write_txn_marker(P1, 0, 0, commit=False)
    for i in range(12):
        partition.append_records(keyed_batches([(b"other", b"v%d" % i)]))
    result = asyncio.run(partition.clean())
    assert result is not None and result.records_removed > 0
    assert partition.aborted_transactions(0, partition.high_watermark) == [(P1, 0)]
    headers = list(partition.log.iter_batches())
    assert headers[0].is_transactional and headers[1].is_control


@pytest.fixture
def keyed_batches():
    from kafka.record.default_records import DefaultRecordBatchBuilder

    def build(pairs, *, producer_id=-1, producer_epoch=-1, base_sequence=-1, transactional=False) -> bytes:
        builder = DefaultRecordBatchBuilder(2, 0, int(transactional), producer_id, producer_epoch, base_sequence,
                                            2**30)
        for i, (key, value) in enumerate(pairs):
            builder.append(i, timestamp=1_000, key=key, value=value, headers=[])
        return bytes(builder.build())

    return build
