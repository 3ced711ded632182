"""The partition's replica state machine: high watermark and ISR rules, follower appends, truncation.

Real ``Partition`` objects over real logs in tmp_path; time is the injected
clock, ISR writes go through an injected async writer that records what it was
asked and answers like ZooKeeper would (accept with a new version, or refuse).
A "follower" here is a second Partition fed with the leader's log bytes, as the
fetcher feeds it.
"""
from __future__ import annotations

import asyncio

import pytest
from kafka.errors import (
    InvalidRecordError, NotEnoughReplicasAfterAppendError, NotLeaderForPartitionError, OutOfOrderSequenceNumberError,
    RequestTimedOutError,
)
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from broker_sim.controller.cluster_state import PartitionState
from broker_sim.storage.batch import parse_batches
from replication_helpers import build_batch

LAG_MS = 10_000


class IsrWriter:
    """ZooKeeper's side of the leader's ISR writes: conditional on the version, recorded."""

    def __init__(self, accept: bool = True) -> None:
        self.accept = accept
        self.calls: list[tuple[int, ...]] = []

    async def __call__(self, partition, new_isr):
        self.calls.append(tuple(new_isr))
        await asyncio.sleep(0)
        if not self.accept:
            return None
        return PartitionState(partition.broker_id, partition.leader_epoch, tuple(new_isr), 0,
                              partition.zk_version + 1)


def state(leader: int, epoch: int, isr, zk_version: int = 0) -> PartitionState:
    return PartitionState(leader, epoch, tuple(isr), 0, zk_version)


def produce(partition, *values: bytes, **kwargs):
    return partition.append_records(build_batch(list(values), **kwargs))


def replicate(leader, follower) -> None:
    """One fetch round: the follower copies what it lacks, then the leader learns its new log end offset."""
    data = leader.log.read_bytes(follower.log_end_offset, 1 << 30)
    if data:
        follower.append_as_follower(data)
    follower.set_follower_high_watermark(leader.high_watermark)
    leader.update_follower_fetch(follower.broker_id, follower.log_end_offset, leader._now_ms())


def values(partition, start: int = 0) -> list[bytes]:
    data = partition.log.read_bytes(start, 1 << 30)
    out = []
    for batch in parse_batches(data):
        raw = data[batch.position:batch.position + batch.size]
        out.extend(record.value for record in DefaultRecordBatch(raw) if not batch.is_control)
    return out


def segment_bytes(partition) -> bytes:
    return b"".join(segment.log_path.read_bytes() for segment in partition.log.segments)


# -- single node -------------------------------------------------------------------------------

def test_a_new_partition_leads_a_one_replica_isr_and_commits_every_append(open_partition):
    partition = open_partition(0)
    assert (partition.is_leader, partition.leader_id, partition.isr, partition.replicas) == (True, 0, (0,), [0])
    produce(partition, b"a", b"b")
    assert partition.high_watermark == partition.log_end_offset == 2


# -- leader: high watermark ----------------------------------------------------------------------

def test_the_high_watermark_is_the_minimum_log_end_offset_of_the_isr(open_partition, clock):
    leader = open_partition(0)
    leader.make_leader(state(0, 1, [0, 1, 2]), [0, 1, 2])
    for i in range(5):
        produce(leader, b"v%d" % i)
    assert leader.high_watermark == 0, "followers have not fetched: nothing is committed"
    leader.update_follower_fetch(1, 5, clock.now_ms())
    assert leader.high_watermark == 0, "follower 2 of the ISR is unknown yet"
    leader.update_follower_fetch(2, 3, clock.now_ms())
    assert leader.high_watermark == 3
    leader.update_follower_fetch(2, 5, clock.now_ms())
    assert leader.high_watermark == 5


def test_the_high_watermark_never_moves_back_while_leading(open_partition, clock):
    leader = open_partition(0)
    leader.make_leader(state(0, 1, [0, 1]), [0, 1])
    produce(leader, b"a", b"b", b"c")
    leader.update_follower_fetch(1, 3, clock.now_ms())
    assert leader.high_watermark == 3
    leader.update_follower_fetch(1, 1, clock.now_ms())  # e.g. a follower that truncated reports a lower offset
    assert leader.high_watermark == 3


def test_making_a_leader_at_the_same_epoch_only_adopts_the_isr(open_partition):
    leader = open_partition(0)
    assert leader.make_leader(state(0, 3, [0, 1]), [0, 1]) is True
    assert leader.epochs.latest_epoch == 3
    assert leader.make_leader(state(0, 3, [0], zk_version=4), [0, 1]) is False
    assert (leader.isr, leader.zk_version, leader.leader_epoch) == ((0,), 4, 3)


def test_leader_epochs_stamp_appended_batches_and_the_epochs_cache(open_partition):
    leader = open_partition(0)
    produce(leader, b"a")
    leader.make_leader(state(0, 2, [0]), [0])
    produce(leader, b"b")
    headers = list(leader.log.iter_batches())
    assert [h.partition_leader_epoch for h in headers] == [0, 2]
    assert leader.epochs.entries == [(0, 0), (2, 1)]
    assert leader.end_offset_for_epoch(0) == (0, 1)


def test_a_fetch_waiter_wakes_when_the_high_watermark_moves(open_partition, clock):
    async def scenario():
        leader = open_partition(0)
        leader.make_leader(state(0, 1, [0, 1]), [0, 1])
        produce(leader, b"a")
        waiter = leader.wait_for_append()
        assert not waiter.done()
        leader.update_follower_fetch(1, 1, clock.now_ms())
        assert waiter.done(), "a consumer long poll must wake when records become committed"

    asyncio.run(scenario())


# -- leader: ISR -----------------------------------------------------------------------------------

def test_a_follower_that_stops_fetching_leaves_the_isr_after_the_lag_time(open_partition, clock):
    async def scenario():
        writer = IsrWriter()
        leader = open_partition(0, isr_writer=writer)
        leader.make_leader(state(0, 1, [0, 1, 2]), [0, 1, 2])
        produce(leader, b"a")
        leader.update_follower_fetch(1, 1, clock.now_ms())
        leader.update_follower_fetch(2, 0, clock.now_ms())  # follower 2 stops after this fetch
        assert leader.high_watermark == 0
        clock.advance(ms=LAG_MS)
        assert leader.maybe_shrink_isr(clock.now_ms(), LAG_MS) is False, "exactly the lag time is still in sync"
        clock.advance(ms=1)
        leader.update_follower_fetch(1, 1, clock.now_ms())
        assert leader.maybe_shrink_isr(clock.now_ms(), LAG_MS) is True
        assert leader.isr == (0, 1, 2), "the ISR changes only once ZooKeeper accepted the write"
        await leader.isr_update_task
        assert writer.calls == [(0, 1)]
        assert leader.isr == (0, 1) and leader.zk_version == 1
        assert leader.high_watermark == 1, "without the lagging follower the HW advances"

    asyncio.run(scenario())


def test_a_follower_at_the_log_end_stays_in_sync_however_long_ago_it_fetched(open_partition, clock):
    async def scenario():
        leader = open_partition(0, isr_writer=IsrWriter())
        leader.make_leader(state(0, 1, [0, 1]), [0, 1])
        produce(leader, b"a")
        leader.update_follower_fetch(1, 1, clock.now_ms())
        clock.advance(ms=10 * LAG_MS)
        assert leader.maybe_shrink_isr(clock.now_ms(), LAG_MS) is False

    asyncio.run(scenario())


def test_a_refused_isr_write_leaves_the_isr_alone(open_partition, clock):
    async def scenario():
        writer = IsrWriter(accept=False)
        leader = open_partition(0, isr_writer=writer)
        leader.make_leader(state(0, 1, [0, 1]), [0, 1])
        produce(leader, b"a")
        clock.advance(ms=LAG_MS + 1)
        assert leader.maybe_shrink_isr(clock.now_ms(), LAG_MS)
        await leader.isr_update_task
        assert writer.calls == [(0,)] and leader.isr == (0, 1) and leader.high_watermark == 0

    asyncio.run(scenario())


def test_a_follower_that_caught_up_rejoins_the_isr(open_partition, clock):
    async def scenario():
        writer = IsrWriter()
        leader = open_partition(0, isr_writer=writer)
        leader.make_leader(state(0, 1, [0]), [0, 1])
        produce(leader, b"a", b"b")
        assert leader.high_watermark == 2
        leader.update_follower_fetch(1, 1, clock.now_ms())
        assert leader.isr_update_task is None, "below the high watermark: not caught up"
        leader.update_follower_fetch(1, 2, clock.now_ms())
        await leader.isr_update_task
        assert writer.calls == [(0, 1)] and leader.isr == (0, 1)

    asyncio.run(scenario())


def test_while_a_follower_joins_the_isr_the_high_watermark_waits_for_it_too(open_partition, clock):
    """KIP-497's maximal ISR: between the leader asking ZooKeeper to add a caught-up follower and the answer, the
    high watermark counts that follower already; else an acks=all write could be acknowledged without it, and
    its election from the new ISR lose the write.
    Mutation: update_high_watermark over ``self.isr`` only -> ``assert 4 == 2``."""
    async def scenario():
        release = asyncio.Event()

        async def slow_writer(partition, new_isr):
            await release.wait()
            return PartitionState(partition.broker_id, partition.leader_epoch, tuple(new_isr), 0,
                                  partition.zk_version + 1)

        leader = open_partition(0, isr_writer=slow_writer)
        leader.make_leader(state(0, 1, [0, 1]), [0, 1, 2])
        produce(leader, b"a", b"b")
        leader.update_follower_fetch(1, 2, clock.now_ms())
        assert leader.high_watermark == 2
        leader.update_follower_fetch(2, 2, clock.now_ms())  # caught up: the ISR write (0, 1, 2) is in flight
        assert leader.isr_update_task is not None and leader.isr == (0, 1)
        produce(leader, b"c", b"d")
        leader.update_follower_fetch(1, 4, clock.now_ms())
        assert leader.high_watermark == 2, "acknowledged past a follower the ISR is taking in"
        release.set()
        await leader.isr_update_task
        assert leader.isr == (0, 1, 2) and leader.high_watermark == 2
        leader.update_follower_fetch(2, 4, clock.now_ms())
        assert leader.high_watermark == 4

    asyncio.run(scenario())


def test_a_follower_must_reach_the_start_of_the_leaders_epoch_to_rejoin(open_partition, clock):
    async def scenario():
        writer = IsrWriter()
        leader = open_partition(0, isr_writer=writer)
        produce(leader, b"a", b"b", b"c")  # HW 3 under the single-node ISR
        leader.make_leader(state(0, 1, [0]), [0, 1])
        leader.high_watermark = 1  # as if the HW the new leader knew were behind its log end
        leader.update_follower_fetch(1, 2, clock.now_ms())
        assert writer.calls == [] and leader.isr_update_task is None
        leader.update_follower_fetch(1, 3, clock.now_ms())
        await leader.isr_update_task
        assert writer.calls == [(0, 1)]

    asyncio.run(scenario())


# -- acks=all purgatory ----------------------------------------------------------------------------

def test_acks_all_waits_for_the_isr(open_partition, clock):
    async def scenario():
        leader = open_partition(0)
        leader.make_leader(state(0, 1, [0, 1]), [0, 1])
        result = produce(leader, b"a", b"b")
        waiting = asyncio.ensure_future(leader.wait_for_high_watermark(result.last_offset + 1, 5.0, min_isr=2))
        await asyncio.sleep(0.01)
        assert not waiting.done()
        leader.update_follower_fetch(1, 2, clock.now_ms())
        await asyncio.wait_for(waiting, 1.0)

    asyncio.run(scenario())


def test_acks_all_times_out(open_partition):
    async def scenario():
        leader = open_partition(0)
        leader.make_leader(state(0, 1, [0, 1]), [0, 1])
        produce(leader, b"a")
        with pytest.raises(RequestTimedOutError, match="waiting for \\[1\\]"):
            await leader.wait_for_high_watermark(1, 0.05)

    asyncio.run(scenario())


def test_acks_all_fails_when_leadership_is_lost(open_partition):
    async def scenario():
        leader = open_partition(0)
        leader.make_leader(state(0, 1, [0, 1]), [0, 1])
        produce(leader, b"a")
        waiting = asyncio.ensure_future(leader.wait_for_high_watermark(1, 5.0))
        await asyncio.sleep(0.01)
        assert leader.make_follower(state(1, 2, [1]), [0, 1]) is True
        with pytest.raises(NotLeaderForPartitionError):
            await asyncio.wait_for(waiting, 1.0)

    asyncio.run(scenario())


def test_acks_all_after_the_isr_shrank_below_the_minimum(open_partition, clock):
    async def scenario():
        leader = open_partition(0, isr_writer=IsrWriter())
        leader.make_leader(state(0, 1, [0, 1]), [0, 1])
        produce(leader, b"a")
        waiting = asyncio.ensure_future(leader.wait_for_high_watermark(1, 5.0, min_isr=2))
        clock.advance(ms=LAG_MS + 1)
        leader.maybe_shrink_isr(clock.now_ms(), LAG_MS)
        with pytest.raises(NotEnoughReplicasAfterAppendError):
            await asyncio.wait_for(waiting, 1.0)

    asyncio.run(scenario())


# -- follower ------------------------------------------------------------------------------------

def test_a_follower_refuses_produce_naming_the_leader(open_partition):
    follower = open_partition(1)
    follower.make_follower(state(0, 1, [0, 1]), [0, 1])
    with pytest.raises(NotLeaderForPartitionError, match="the leader is broker 0"):
        produce(follower, b"a")


def test_a_follower_log_is_byte_identical_with_offsets_epochs_and_timestamps(open_partition, clock):
    leader = open_partition(0, message_timestamp_type="LogAppendTime")
    follower = open_partition(1, message_timestamp_type="LogAppendTime")
    leader.make_leader(state(0, 1, [0, 1]), [0, 1])
    follower.make_follower(state(0, 1, [0, 1]), [0, 1])
    produce(leader, b"a", b"b")
    clock.advance(ms=5)
    replicate(leader, follower)
    leader.make_leader(state(0, 4, [0, 1]), [0, 1])
    follower.make_follower(state(0, 4, [0, 1]), [0, 1])
    produce(leader, b"c")
    replicate(leader, follower)
    replicate(leader, follower)  # the second round carries the new high watermark
    assert segment_bytes(follower) == segment_bytes(leader)
    assert follower.log_end_offset == leader.log_end_offset == 3
    assert follower.high_watermark == leader.high_watermark == 3
    assert follower.epochs.entries == leader.epochs.entries == [(1, 0), (4, 2)]


def test_the_follower_high_watermark_is_bounded_by_its_log_end(open_partition):
    follower = open_partition(1)
    follower.make_follower(state(0, 1, [0, 1]), [0, 1])
    leader = open_partition(0)
    produce(leader, b"a", b"b")
    follower.append_as_follower(leader.log.read_bytes(0, 1 << 30))
    follower.set_follower_high_watermark(10)
    assert follower.high_watermark == 2


def test_producer_state_replicates_so_a_retry_is_deduplicated_after_failover(open_partition, clock):
    leader = open_partition(0)
    follower = open_partition(1)
    leader.make_leader(state(0, 1, [0, 1]), [0, 1])
    follower.make_follower(state(0, 1, [0, 1]), [0, 1])
    first = build_batch([b"a", b"b"], producer_id=7, producer_epoch=0, base_sequence=0)
    second = build_batch([b"c"], producer_id=7, producer_epoch=0, base_sequence=2)
    leader.append_records(first)
    leader.append_records(second)
    replicate(leader, follower)
    # the old leader dies after appending; the follower takes over and the producer retries the last batch
    follower.make_leader(state(1, 2, [1, 0]), [0, 1])   # its HW waits for broker 0 to fetch
    retry = follower.append_records(second)
    assert retry.duplicate and retry.base_offset == 2
    with pytest.raises(OutOfOrderSequenceNumberError):
        follower.append_records(build_batch([b"d"], producer_id=7, producer_epoch=0, base_sequence=5))
    follower.append_records(build_batch([b"d"], producer_id=7, producer_epoch=0, base_sequence=3))
    assert values(follower) == [b"a", b"b", b"c", b"d"]


def test_transactions_replicate_with_their_aborted_index_and_last_stable_offset(open_partition):
    leader = open_partition(0)
    follower = open_partition(1)
    leader.make_leader(state(0, 1, [0, 1]), [0, 1])
    follower.make_follower(state(0, 1, [0, 1]), [0, 1])
    leader.append_records(build_batch([b"x1", b"x2"], producer_id=5, producer_epoch=0, base_sequence=0,
                                      transactional=True))
    leader.append_records(build_batch([b"y1"], producer_id=6, producer_epoch=0, base_sequence=0,
                                      transactional=True))
    leader.write_txn_marker(5, 0, 3, commit=False)
    replicate(leader, follower)
    replicate(leader, follower)  # the leader's HW moved with the first round's fetch offset
    assert follower.producers.ongoing_transactions() == leader.producers.ongoing_transactions() == {6: 2}
    assert follower.aborted_transactions(0, 10) == leader.aborted_transactions(0, 10) == [(5, 0)]
    assert follower.producers.producers[5].coordinator_epoch == 3
    assert follower.last_stable_offset == leader.last_stable_offset == 2
    leader.write_txn_marker(6, 0, 3, commit=True)
    replicate(leader, follower)
    replicate(leader, follower)
    assert follower.producers.ongoing_transactions() == {}
    assert follower.last_stable_offset == follower.high_watermark == 5
    assert segment_bytes(follower) == segment_bytes(leader)


def test_the_follower_state_survives_a_restart(open_partition, tmp_path, clock):
    leader = open_partition(0)
    follower = open_partition(1)
    leader.make_leader(state(0, 3, [0, 1]), [0, 1])
    follower.make_follower(state(0, 3, [0, 1]), [0, 1])
    leader.append_records(build_batch([b"a"], producer_id=5, producer_epoch=0, base_sequence=0,
                                      transactional=True))
    leader.write_txn_marker(5, 0, 0, commit=False)
    replicate(leader, follower)
    follower.close()
    reopened = open_partition(1)
    assert reopened.log_end_offset == 2
    assert reopened.epochs.latest_epoch == 3
    assert reopened.aborted_transactions(0, 10) == [(5, 0)]


def _keyed(pairs, **kwargs) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=kwargs.get("producer_id", -1),
                                        producer_epoch=kwargs.get("producer_epoch", -1),
                                        base_sequence=kwargs.get("base_sequence", -1), batch_size=2**30)
    for i, (key, value) in enumerate(pairs):
        builder.append(i, timestamp=1_000 + i, key=key, value=value, headers=[])
    return bytes(builder.build())


def test_a_follower_copies_a_compacted_log_with_an_empty_batch_and_keeps_the_producers_sequence(open_partition):
    """Compacted batches (fewer records than offsets, or none: an idempotent producer's last batch kept as an
    empty header) come from the leader's log, so the follower takes them, unlike a client's produce."""
    compact = {"cleanup_policy": "compact", "segment_bytes": 400, "min_cleanable_dirty_ratio": 0.0}
    leader = open_partition(0, **compact)
    leader.append_records(_keyed([(b"a", b"1"), (b"b", b"1")], producer_id=7, producer_epoch=0, base_sequence=0))
    leader.append_records(_keyed([(b"a", b"2"), (b"b", b"2"), (b"c", b"2")]))
    for i in range(30):
        leader.append_records(_keyed([(f"f{i}".encode(), b"x" * 20), (b"c", str(i).encode())]))
    assert asyncio.run(leader.clean()) is not None
    data = leader.log.read_bytes(0, 1 << 30)
    headers = parse_batches(data, stored=True)
    assert (headers[0].base_offset, headers[0].record_count, headers[0].last_sequence) == (0, 0, 1)
    assert any(0 < h.record_count < h.last_offset_delta + 1 for h in headers)  # and partly compacted ones
    with pytest.raises(InvalidRecordError):
        leader.append_records(data[:headers[0].size])  # a client may not send an empty batch

    follower = open_partition(1, **compact)
    follower.make_follower(state(0, 1, [0]), [0, 1])
    assert follower.append_as_follower(data) is not None
    assert segment_bytes(follower) == segment_bytes(leader)
    assert follower.log_end_offset == leader.log_end_offset
    assert follower.producers.producers[7].last_seq == 1
    follower.close()
    reopened = open_partition(1, **compact)  # recovery of the copied segments keeps the empty batch
    assert segment_bytes(reopened) == segment_bytes(leader)
    reopened.make_leader(state(1, 2, [1]), [0, 1])
    retry = reopened.append_records(_keyed([(b"a", b"1"), (b"b", b"1")], producer_id=7, producer_epoch=0,
                                           base_sequence=0))
    assert retry.duplicate and retry.base_offset == 0
    with pytest.raises(OutOfOrderSequenceNumberError):
        reopened.append_records(_keyed([(b"d", b"1")], producer_id=7, producer_epoch=0, base_sequence=3))
    assert not reopened.append_records(_keyed([(b"d", b"1")], producer_id=7, producer_epoch=0,
                                              base_sequence=2)).duplicate


# -- truncation ----------------------------------------------------------------------------------

def test_truncation_drops_records_epochs_producer_state_and_txn_index(open_partition):
    partition = open_partition(1)
    partition.append_records(build_batch([b"a", b"b"], producer_id=7, producer_epoch=0, base_sequence=0))
    partition.make_leader(state(1, 1, [1]), [1])
    partition.append_records(build_batch([b"c"], producer_id=7, producer_epoch=0, base_sequence=2))
    partition.append_records(build_batch([b"t"], producer_id=8, producer_epoch=0, base_sequence=0,
                                         transactional=True))
    partition.write_txn_marker(8, 0, 0, commit=False)
    partition.append_records(build_batch([b"u"], producer_id=9, producer_epoch=0, base_sequence=0,
                                         transactional=True))
    assert partition.aborted_transactions(0, 10) == [(8, 3)]
    assert partition.producers.ongoing_transactions() == {9: 5}
    partition.make_follower(state(0, 2, [0, 1]), [0, 1])
    partition.truncate_to(2)
    assert partition.log_end_offset == 2 and partition.high_watermark == 2
    assert values(partition) == [b"a", b"b"]
    assert partition.epochs.entries == [(0, 0)]
    assert set(partition.producers.producers) == {7}
    assert partition.producers.producers[7].last_seq == 1, "sequence 2 was truncated: it may be written again"
    assert partition.producers.ongoing_transactions() == {}
    assert partition.aborted_transactions(0, 10) == []
    assert partition.last_stable_offset == 2


def test_truncation_beyond_a_snapshot_reloads_from_it(open_partition):
    partition = open_partition(1, segment_bytes=200)
    for sequence in range(6):
        partition.append_records(build_batch([b"x" * 60], producer_id=7, producer_epoch=0, base_sequence=sequence))
    assert len(partition.log.segments) > 2 and partition.producers.snapshot_offsets()
    partition.make_follower(state(0, 1, [0, 1]), [0, 1])
    partition.truncate_to(4)
    assert partition.log_end_offset == 4
    assert all(offset <= 4 for offset in partition.producers.snapshot_offsets())
    assert partition.producers.producers[7].last_seq == 3


def test_truncating_at_or_past_the_log_end_is_a_no_op(open_partition):
    partition = open_partition(1)
    produce(partition, b"a")
    partition.make_follower(state(0, 1, [0, 1]), [0, 1])
    partition.truncate_to(5)
    assert partition.log_end_offset == 1


def test_truncating_at_the_log_end_drops_an_epoch_led_without_appending(open_partition):
    """Kafka's UnifiedLog.truncateTo: a leader that died before its first append must forget that epoch."""
    partition = open_partition(1)
    produce(partition, b"a")                                  # epoch 0 from offset 0
    partition.make_leader(state(1, 3, [1, 0]), [1, 0])        # epoch 3 starts at the log end, nothing appended
    assert [e.epoch for e in partition.epochs.entries] == [0, 3]
    partition.make_follower(state(0, 4, [0]), [0, 1])
    partition.truncate_to(partition.log_end_offset)
    assert [e.epoch for e in partition.epochs.entries] == [0]
    assert partition.log_end_offset == 1


def test_a_follower_behind_the_leaders_log_start_restarts_its_log_there(open_partition):
    follower = open_partition(1)
    produce(follower, b"old")
    follower.make_follower(state(0, 1, [0, 1]), [0, 1])
    follower.truncate_fully_and_start_at(50)
    assert (follower.log_start_offset, follower.log_end_offset, follower.high_watermark) == (50, 50, 50)
    assert follower.epochs.entries == []


def test_a_follower_follows_the_leaders_log_start_offset(open_partition):
    leader = open_partition(0)
    follower = open_partition(1)
    leader.make_leader(state(0, 1, [0, 1]), [0, 1])
    follower.make_follower(state(0, 1, [0, 1]), [0, 1])
    for i in range(4):
        produce(leader, b"v%d" % i)
    replicate(leader, follower)
    replicate(leader, follower)
    assert leader.delete_records_before(2) == 2
    follower.follow_log_start_offset(leader.log_start_offset)
    assert follower.log_start_offset == 2
    follower.follow_log_start_offset(1)
    assert follower.log_start_offset == 2, "the log start never moves back"


def test_records_below_the_log_end_are_refused(open_partition):
    leader = open_partition(0)
    follower = open_partition(1)
    follower.make_follower(state(0, 1, [0, 1]), [0, 1])
    produce(leader, b"a", b"b")
    data = leader.log.read_bytes(0, 1 << 30)
    follower.append_as_follower(data)
    with pytest.raises(Exception, match="below the next expected offset"):
        follower.append_as_follower(data)


# -- the follower's truncation rules (KIP-101/279), as the fetcher applies them --------------------

def _follower_with_epochs(open_partition, epochs_and_counts):
    """A follower whose log holds ``count`` records written at each ``epoch``, in order."""
    leader = open_partition(9)
    for epoch, count in epochs_and_counts:
        leader.make_leader(state(9, epoch, [9]), [9])
        for i in range(count):
            produce(leader, b"e%d-%d" % (epoch, i))
    follower = open_partition(1)
    follower.make_follower(state(0, 9, [0, 1]), [0, 1])
    follower.append_as_follower(leader.log.read_bytes(0, 1 << 30))
    return follower


def test_truncation_to_the_end_of_the_same_epoch_on_the_leader(open_partition):
    from broker_sim.replication.fetcher import truncate_for_epoch_end
    follower = _follower_with_epochs(open_partition, [(1, 3), (2, 4)])  # epochs (1, 0), (2, 3); LEO 7
    assert truncate_for_epoch_end(follower, 2, 5) is True
    assert follower.log_end_offset == 5 and follower.epochs.entries == [(1, 0), (2, 3)]


def test_truncation_for_an_epoch_the_leader_never_had_takes_two_rounds(open_partition):
    from broker_sim.replication.fetcher import truncate_for_epoch_end
    follower = _follower_with_epochs(open_partition, [(1, 3), (3, 4)])  # epoch 3 never reached the leader
    # we asked for epoch 3; the leader knows epochs 1 and 2, and answers for 1: it ended at offset 2 there
    assert truncate_for_epoch_end(follower, 1, 2) is True
    assert follower.log_end_offset == 2 and follower.epochs.entries == [(1, 0)]


def test_truncation_when_the_leader_answers_with_an_epoch_we_lack(open_partition):
    from broker_sim.replication.fetcher import truncate_for_epoch_end
    follower = _follower_with_epochs(open_partition, [(1, 3), (3, 4)])
    # the leader answers epoch 2 (its largest <= our 3), ending at 6: we never had 2, so cut to the end of 1
    assert truncate_for_epoch_end(follower, 2, 6) is False
    assert follower.log_end_offset == 3 and follower.epochs.latest_epoch == 1


def test_truncation_without_an_answer_falls_back_to_the_high_watermark(open_partition):
    from broker_sim.replication.fetcher import truncate_for_epoch_end
    follower = _follower_with_epochs(open_partition, [(1, 5)])
    follower.set_follower_high_watermark(2)
    assert truncate_for_epoch_end(follower, -1, -1) is True
    assert follower.log_end_offset == 2


def test_whole_batches_drops_a_cut_off_last_batch():
    from broker_sim.replication.fetcher import whole_batches
    one, two = build_batch([b"a"]), build_batch([b"b", b"c"])
    assert whole_batches(one + two[:-3]) == one
    assert whole_batches(one + two) == one + two
    assert whole_batches(None) == b""


def test_leading_again_at_the_epoch_led_before_a_restart_keeps_the_epochs_start(open_partition, clock):
    async def scenario():
        writer = IsrWriter()
        partition = open_partition(0, isr_writer=writer)
        partition.make_leader(state(0, 2, [0]), [0, 1])
        produce(partition, b"a", b"b", b"c")
        partition.close()
        reopened = open_partition(0, isr_writer=writer)
        reopened.make_follower(state(-1, reopened.leader_epoch, []), [])  # what ensure_partition does
        assert reopened.make_leader(state(0, 2, [0]), [0, 1]) is True
        assert reopened.leader_epoch_start_offset == 0 and reopened.epochs.entries == [(2, 0)]
        reopened.update_follower_fetch(1, 3, clock.now_ms())
        await reopened.isr_update_task
        assert writer.calls == [(0, 1)]

    asyncio.run(scenario())


def test_ensure_partition_opens_a_replica_that_leads_nothing_yet(tmp_path, clock):
    from broker_sim.config import BrokerConfig
    from broker_sim.controller.metadata import TopicInfo
    from broker_sim.replication.replica_manager import ReplicaManager
    import uuid

    manager = ReplicaManager(tmp_path, BrokerConfig({}), broker_id=3, now_ms=clock,
                             topic_exists=lambda name: name == "t")
    try:
        info = TopicInfo("t", uuid.uuid4(), 2, {}, False, [[3, 4], [4, 5]])
        partition = manager.ensure_partition(info, 0)
        assert manager.ensure_partition(info, 0) is partition
        assert not partition.is_leader
        with pytest.raises(NotLeaderForPartitionError):
            produce(partition, b"x")
        with pytest.raises(NotLeaderForPartitionError, match="hosts no replica of t-1"):
            manager.get("t", 1)
        with pytest.raises(Exception, match="hosts no partition other-0"):
            manager.get("other", 0)
        assert manager.become_leader("t", 0, state(3, 1, [3]), [3, 4]) is True
        assert manager.get_leader("t", 0).append_records(build_batch([b"x"])).base_offset == 0
        manager.remove_partition("t", 0, delete=True)
        assert ("t", 0) not in manager.partitions and not (tmp_path / "t-0").exists()
    finally:
        manager.close()


def test_a_replica_reopened_in_cluster_mode_starts_from_its_checkpointed_high_watermark(tmp_path, clock):
    from broker_sim.config import BrokerConfig
    from broker_sim.controller.metadata import TopicInfo
    from broker_sim.replication.replica_manager import ReplicaManager
    import uuid

    info = TopicInfo("t", uuid.uuid4(), 1, {}, False, [[0, 1]])
    manager = ReplicaManager(tmp_path, BrokerConfig({}), broker_id=0, now_ms=clock)
    partition = manager.ensure_partition(info, 0)
    manager.become_leader("t", 0, state(0, 1, [0, 1]), [0, 1])
    produce(partition, b"a", b"b", b"c")
    partition.update_follower_fetch(1, 2, clock.now_ms())
    assert partition.high_watermark == 2
    manager.close()
    assert (tmp_path / "replication-offset-checkpoint").read_text().split("\n")[:3] == ["0", "1", "t 0 2"]

    reopened = ReplicaManager(tmp_path, BrokerConfig({}), broker_id=0, now_ms=clock)
    try:
        partition = reopened.ensure_partition(info, 0)
        assert (partition.log_end_offset, partition.high_watermark) == (3, 2)
        reopened.become_leader("t", 0, state(0, 2, [0, 1]), [0, 1])
        assert partition.read(2, 1 << 20, min_one_batch=True) == [], "offset 2 was never committed"
    finally:
        reopened.close()


def test_a_new_leader_hands_its_coordinator_every_record_of_its_log_not_just_below_its_stale_hw(open_partition):
    """Coordinators load up to the log end (Kafka does): a follower learns the HW one fetch late."""
    from broker_sim.coordinator.internal_topic import read_partition
    leader, follower = open_partition(0), open_partition(1)
    leader.make_leader(state(0, 1, [0, 1]), [0, 1])
    follower.make_follower(state(0, 1, [0, 1]), [0, 1])
    produce(leader, b"a", b"b")
    replicate(leader, follower)          # the follower has both records; its HW is still the old one
    assert follower.high_watermark < follower.log_end_offset
    follower.make_leader(state(1, 2, [1, 0]), [0, 1])   # its HW waits for broker 0 to fetch
    assert follower.high_watermark < follower.log_end_offset
    assert [value for _, _, value in read_partition(follower)] == [b"a", b"b"]
