"""read_committed, compared with Apache Kafka: Fetch at isolation_level 1 across committed, aborted and ongoing
transactions of several producers interleaved in one partition, ListOffsets latest under read_committed, and what
confluent-kafka's and kafka-python's read_committed consumers read.

Each scenario writes the same transactional batches on both brokers with the raw client (InitProducerId,
AddPartitionsToTxn, Produce with the transactional id, EndTxn), waiting after each EndTxn until its marker is
written (Kafka answers EndTxn before it writes the markers), so the logs hold the same batches at the same offsets.
Answers name producers by their role ("A", "B", ...), never by the per-broker producer id; control batches are
compared byte for byte in their key and value (the COMMIT/ABORT marker and the coordinator epoch) and by their
attributes, with the broker-stamped timestamps left out.

The data batches carry CreateTime timestamps of 2020 and the markers the broker's clock, so the first marker would
roll a new segment (``segment.ms`` is measured from the first batch's timestamp): the topics set ``segment.ms`` to
ten years (``NO_ROLL``) but in the scenario about reads across segments. There Kafka's fetch stops at the end of a
segment where broker_sim's reads on (a difference kept: docs/kafka-conformance.md), so that scenario compares what
a client gathers fetching on to the end.
"""
from __future__ import annotations

import time
import uuid

import pytest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.producer import ProduceRequest
from kafka.record.default_records import DefaultRecordBatchBuilder

from differential import Scenario, create_topic
from test_transaction_apis import _add_partitions, _completed, _end, _init

T0 = 1_600_000_000_000
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
NO_ROLL = {"segment.ms": str(10 * 365 * 24 * 3600 * 1000)}


class Producer:
    """One transactional producer on one peer, speaking the raw protocol: ``begin``, ``send`` batches,
    ``end`` (which returns once the coordinator has written its markers)."""

    def __init__(self, peer, role: str, topic: str) -> None:
        self.peer, self.role, self.topic = peer, role, topic
        self.txn_id = peer.name(f"rc-{role}")
        self.producer_id, self.epoch = _init(peer, self.txn_id)
        self.sequence: dict[int, int] = {}
        self.added: set[int] = set()

    def send(self, values, partition: int = 0, timestamp: int = T0) -> int:
        """One transactional batch of ``values`` (AddPartitionsToTxn first in a new transaction); its base offset."""
        if partition not in self.added:
            errors = _add_partitions(self.peer, self.txn_id, self.producer_id, self.epoch, [(self.topic, partition)])
            assert set(errors.values()) == {0}, errors
            self.added.add(partition)
        sequence = self.sequence.get(partition, 0)
        builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True,
                                            producer_id=self.producer_id, producer_epoch=self.epoch,
                                            base_sequence=sequence, batch_size=1 << 20)
        for i, value in enumerate(values):
            builder.append(i, timestamp=timestamp + i, key=self.role.encode(), value=value.encode(), headers=[])
        records = bytes(builder.build())
        answer = self.peer.settled(lambda: ProduceRequest[9](
            transactional_id=self.txn_id, acks=-1, timeout_ms=10_000, topic_data=[ProduceRequest.TopicProduceData(
                name=self.topic, partition_data=[ProduceRequest.TopicProduceData.PartitionProduceData(
                    index=partition, records=records)])]))
        result = answer.responses[0].partition_responses[0]
        assert result.error_code == 0, answer
        self.sequence[partition] = sequence + len(values)
        return result.base_offset

    def end(self, commit: bool) -> None:
        assert _end(self.peer, self.txn_id, self.producer_id, self.epoch, commit) == 0
        assert _completed(self.peer, self.txn_id)["state"] == ("CompleteCommit" if commit else "CompleteAbort")
        self.added.clear()


def _roles(producers) -> dict[int, str]:
    return {p.producer_id: p.role for p in producers}


def _batches(data, roles: dict[int, str]) -> list:
    """Every whole batch of a record set as plain data: offsets, attributes, producer role, epoch, sequence, and
    (offset, key, value) of its records, a control batch's key and value as hex."""
    from kafka.record.memory_records import MemoryRecords
    out, records = [], MemoryRecords(bytes(data or b""))
    while records.has_next():
        batch = records.next_batch()
        if batch is None:
            break
        entry = {"base_offset": batch.base_offset, "last_offset_delta": batch.last_offset_delta,
                 "attributes": batch.attributes, "leader_epoch": batch.leader_epoch,
                 "producer": roles.get(batch.producer_id, batch.producer_id), "epoch": batch.producer_epoch,
                 "base_sequence": batch.base_sequence, "count": batch.records_count}
        if batch.is_control_batch:
            entry["control"] = [(r.offset, bytes(r.key).hex(), bytes(r.value).hex(), r.timestamp == batch.max_timestamp)
                                for r in batch]
        else:
            entry["records"] = [(r.offset, r.timestamp, bytes(r.key).decode(), bytes(r.value).decode()) for r in batch]
            entry["timestamps"] = (batch.first_timestamp, batch.max_timestamp)
        out.append(entry)
    return out


def _fetch(peer, topic: str, offset: int, roles: dict[int, str], *, isolation_level: int = READ_COMMITTED,
           version: int = 12, max_bytes: int = 1 << 20, partition_max_bytes: int = 1 << 20) -> dict:
    Topic = FetchRequest.FetchTopic
    response = peer.call(FetchRequest[version](
        replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=max_bytes, isolation_level=isolation_level,
        session_id=0, session_epoch=-1, topics=[Topic(topic=topic, partitions=[Topic.FetchPartition(
            partition=0, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1, log_start_offset=-1,
            partition_max_bytes=partition_max_bytes)])], forgotten_topics_data=[], rack_id=""))
    partition = response.responses[0].partitions[0]
    aborted = partition.aborted_transactions
    return {"error": partition.error_code, "high_watermark": partition.high_watermark,
            "last_stable_offset": partition.last_stable_offset, "log_start_offset": partition.log_start_offset,
            "aborted_transactions": None if aborted is None else sorted(
                (roles.get(a.producer_id, a.producer_id), a.first_offset) for a in aborted),
            "batches": _batches(partition.records, roles)}


def _latest(peer, topic: str, isolation_level: int, version: int = 7) -> tuple[int, int]:
    """(error, offset) of ListOffsets latest (-1) at ``isolation_level``."""
    answer = peer.call(ListOffsetsRequest[version](replica_id=-1, isolation_level=isolation_level, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
            ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                partition_index=0, current_leader_epoch=-1, timestamp=-1)])]))
    partition = answer.topics[0].partitions[0]
    return partition.error_code, partition.offset


def _plain(peer, topic: str, values, timestamp: int = T0) -> int:
    """One non-transactional batch; its base offset."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i, value in enumerate(values):
        builder.append(i, timestamp=timestamp + i, key=b"plain", value=value.encode(), headers=[])
    records = bytes(builder.build())
    answer = peer.settled(lambda: ProduceRequest[9](transactional_id=None, acks=-1, timeout_ms=10_000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=records)])]))
    result = answer.responses[0].partition_responses[0]
    assert result.error_code == 0, answer
    return result.base_offset


def _interleaved(peer, configs=NO_ROLL):
    """Producers A (committed), B (aborted), C (ongoing) and plain records interleaved in one partition:

    offset 0-1 A, 2 B, 3 plain, 4 A, 5 B's ABORT, 6 C, 7 A's COMMIT, 8-9 D, 10 D's ABORT (past C, the LSO).
    """
    topic = create_topic(peer, "rc", configs=configs)
    a, b, c, d = (Producer(peer, role, topic) for role in "ABCD")
    a.send(["a0", "a1"])
    b.send(["b0"])
    _plain(peer, topic, ["p0"])
    a.send(["a2"])
    b.end(commit=False)
    c.send(["c0"])
    a.end(commit=True)
    d.send(["d0", "d1"])
    d.end(commit=False)
    return topic, (a, b, c, d)


def test_fetch_read_committed_interleaved_transactions(pair):
    """With C ongoing at offset 6: read_committed stops at the LSO (6) with B's aborted transaction listed, and an
    aborted transaction past the LSO (D) too, as Kafka's upper bound is the log end in a small segment;
    read_uncommitted reads everything with no aborted list. Fetch v4 (the first with isolation) to v12."""
    def run(peer):
        topic, producers = _interleaved(peer)
        roles = _roles(producers)
        answer = {f"committed_v{v}": _fetch(peer, topic, 0, roles, version=v) for v in (4, 11, 12)}
        answer["uncommitted"] = _fetch(peer, topic, 0, roles, isolation_level=READ_UNCOMMITTED)
        answer["from_abort_marker"] = _fetch(peer, topic, 5, roles)
        answer["at_lso"] = _fetch(peer, topic, 6, roles)
        answer["past_lso"] = _fetch(peer, topic, 8, roles)
        return answer
    answer = pair.compare(Scenario("read_committed, interleaved transactions", run))
    assert answer["committed_v12"]["last_stable_offset"] == 6
    assert answer["committed_v12"]["aborted_transactions"] == [["B", 2], ["D", 8]]


def test_fetch_read_committed_across_segments(pair):
    """With the default segment.ms the first marker rolls a segment on both brokers (the 2020 timestamps): a
    client fetching on from offset 0 to the LSO, then to the end once C commits, gathers the same batches and the
    same aborted transactions on both (Kafka in one fetch per segment, broker_sim in fewer)."""
    def gather(peer, topic, roles, end: int) -> dict:
        offset, batches, aborted = 0, [], set()
        for _ in range(20):
            answer = _fetch(peer, topic, offset, roles)
            aborted |= {tuple(a) for a in answer["aborted_transactions"] or ()}
            if not answer["batches"]:
                break
            batches += answer["batches"]
            last = answer["batches"][-1]
            offset = last["base_offset"] + last["last_offset_delta"] + 1
            if offset >= end:
                break
        return {"batches": batches, "aborted": sorted(aborted), "next_offset": offset}

    def run(peer):
        topic, producers = _interleaved(peer, configs=None)
        roles = _roles(producers)
        ongoing = gather(peer, topic, roles, 6)
        producers[2].end(commit=True)
        return {"ongoing": ongoing, "ended": gather(peer, topic, roles, 12)}
    answer = pair.compare(Scenario("read_committed across segments", run))
    assert answer["ended"]["aborted"] == [["B", 2], ["D", 8]]


def test_fetch_read_committed_after_all_end(pair):
    """Once every transaction ended: the LSO is the high watermark, both aborted transactions are listed, the
    COMMIT and ABORT markers come back as control batches (attributes, key and value: version, type, coordinator
    epoch); a fetch starting inside B's aborted transaction (offset 3) still lists it with its first offset 2."""
    def run(peer):
        topic, producers = _interleaved(peer)
        producers[2].end(commit=True)
        roles = _roles(producers)
        return {"from_0": _fetch(peer, topic, 0, roles), "inside_aborted": _fetch(peer, topic, 3, roles),
                "after_aborts": _fetch(peer, topic, 11, roles), "at_end": _fetch(peer, topic, 12, roles),
                "uncommitted": _fetch(peer, topic, 0, roles, isolation_level=READ_UNCOMMITTED)}
    answer = pair.compare(Scenario("read_committed, all ended", run))
    assert answer["from_0"]["last_stable_offset"] == answer["from_0"]["high_watermark"] == 12


@pytest.mark.parametrize("limit", ["partition_max_bytes", "max_bytes"])
def test_fetch_read_committed_ending_mid_transaction(pair, limit):
    """A fetch whose byte limit ends inside a transaction (after A's first batch, 0-1): the batches that fit (and
    Kafka's partial batch, which a reader drops), the aborted transactions up to Kafka's upper bound."""
    def run(peer):
        topic, producers = _interleaved(peer)
        producers[2].end(commit=True)
        roles = _roles(producers)
        first = _fetch(peer, topic, 0, roles, max_bytes=1)["batches"]
        assert len(first) == 1
        answers = {}
        for extra in (0, 30, 200):
            size = 61 + 18 * 2 + extra  # a batch header and two short records, then part of the next batches
            answers[extra] = _fetch(peer, topic, 0, roles, **{limit: size})
        return answers
    pair.compare(Scenario(f"read_committed, {limit} ends mid-transaction", run))


def test_fetch_read_committed_aborted_list_bounded_by_the_offset_index(pair):
    """In a segment past index.interval.bytes (4096) the aborted list of a fetch reading only A's first batch
    stops at the first offset index entry after the bytes read: B's aborted transaction, written after 12 KB of
    plain records, is not listed; a fetch of everything lists both. Timestamps are the clock's: no time roll."""
    def run(peer):
        now = int(time.time() * 1000)
        topic = create_topic(peer, "rc")
        a, b = Producer(peer, "A", topic), Producer(peer, "B", topic)
        a.send(["a0"], timestamp=now)
        for _ in range(6):
            _plain(peer, topic, ["x" * 1000, "y" * 1000], timestamp=now)
        a.end(commit=False)
        b.send(["b0"], timestamp=now)
        b.end(commit=False)
        roles = _roles((a, b))
        first = _fetch(peer, topic, 0, roles, max_bytes=1)
        everything = _fetch(peer, topic, 0, roles)
        return {"first_batch": {k: v for k, v in first.items() if k != "batches"},
                "first_batch_offsets": [batch["base_offset"] for batch in first["batches"]],
                "everything": {k: v for k, v in everything.items() if k != "batches"},
                "everything_offsets": [batch["base_offset"] for batch in everything["batches"]]}
    answer = pair.compare(Scenario("read_committed, aborted list bounded by the offset index", run))
    assert answer["first_batch"]["aborted_transactions"] == [["A", 0]]
    assert answer["everything"]["aborted_transactions"] == [["A", 0], ["B", 14]]


def test_lso_held_by_an_ongoing_transaction_and_released_by_end_txn(pair):
    """An ongoing transaction holds the LSO at its first offset (Fetch and ListOffsets latest read_committed),
    while read_uncommitted sees the high watermark; EndTxn commit releases it to the end, past the marker.
    ListOffsets v2 (the first with isolation) to v7."""
    def run(peer):
        topic = create_topic(peer, "rc", configs=NO_ROLL)
        a, b = Producer(peer, "A", topic), Producer(peer, "B", topic)
        _plain(peer, topic, ["p0", "p1"])
        a.send(["a0"])
        b.send(["b0"])
        a.send(["a1"])
        roles = _roles((a, b))
        answers = {"held": {f"list_v{v}": (_latest(peer, topic, READ_COMMITTED, v),
                                           _latest(peer, topic, READ_UNCOMMITTED, v)) for v in (2, 5, 7)}}
        answers["held"]["fetch"] = _fetch(peer, topic, 0, roles)
        a.end(commit=True)
        answers["b_holds"] = {"list": _latest(peer, topic, READ_COMMITTED), "fetch": _fetch(peer, topic, 0, roles)}
        b.end(commit=False)
        answers["released"] = {"list": (_latest(peer, topic, READ_COMMITTED), _latest(peer, topic, READ_UNCOMMITTED)),
                               "fetch": _fetch(peer, topic, 0, roles)}
        return answers
    answer = pair.compare(Scenario("LSO held and released", run))
    assert answer["held"]["list_v7"] == [[0, 2], [0, 5]]


def test_consumers_read_exactly_the_committed_records(pair):
    """confluent-kafka and kafka-python consumers with isolation.level=read_committed read the committed
    records only (A's and the plain ones, then C's once it commits), never B's or D's, never a marker."""
    def run(peer):
        topic, producers = _interleaved(peer)
        before = {"confluent": _confluent_values(peer, topic, 3), "kafka_python": _kafka_python_values(peer, topic, 3)}
        producers[2].end(commit=True)
        after = {"confluent": _confluent_values(peer, topic, 5), "kafka_python": _kafka_python_values(peer, topic, 5)}
        return {"before_c_commits": before, "after": after}
    answer = pair.compare(Scenario("read_committed consumers", run))
    assert answer["after"]["confluent"] == ["a0", "a1", "p0", "a2", "c0"]


def _confluent_values(peer, topic: str, expected: int, timeout_s: float = 20.0) -> list[str]:
    """The values a confluent-kafka read_committed consumer reads from the start: once it has ``expected``,
    it polls on until it reached the partition's end (the LSO), so records past it would show."""
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": peer.bootstrap_servers, "group.id": f"rc-{uuid.uuid4().hex[:8]}",
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        values, at_end = [], False
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not (at_end and len(values) >= expected):
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error():
                at_end = message.error().code() == -191  # _PARTITION_EOF
                continue
            values.append(message.value().decode())
        return values
    finally:
        consumer.close()


def _kafka_python_values(peer, topic: str, expected: int, timeout_s: float = 20.0) -> list[str]:
    """The values a kafka-python read_committed consumer reads from the start, polled until it has ``expected``
    and its position reached the committed end (ListOffsets latest read_committed)."""
    from kafka import KafkaConsumer, TopicPartition
    partition = TopicPartition(topic, 0)
    consumer = KafkaConsumer(bootstrap_servers=peer.bootstrap_servers, isolation_level="read_committed",
                             enable_auto_commit=False, auto_offset_reset="earliest")
    try:
        consumer.assign([partition])
        consumer.seek(partition, 0)
        end = consumer.end_offsets([partition])[partition]
        values = []
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not (len(values) >= expected and consumer.position(partition) >= end):
            for records in consumer.poll(timeout_ms=200).values():
                values += [r.value.decode() for r in records]
        return values
    finally:
        consumer.close()
