"""DescribeProducers (API 61, KIP-664), compared with Apache Kafka: the producer state of partitions written by
idempotent producers, by a transaction while it is open (``current_txn_start_offset``), after its commit or abort
(-1, the marker's coordinator epoch), by a fenced transaction (the coordinator's abort bumps the epoch), the
errors of missing partitions, unknown topics and illegal names, and the order Kafka lists producers in.

Every batch is written with the raw client (test_read_committed's ``Producer`` and ``_plain``, InitProducerId
without a transactional id for the idempotent ones) and carries CreateTime timestamps of a minute before the
module loaded (recent: Kafka expires an idle producer by its last timestamp, producer.id.expiration.ms).  Answers
name producers by their role, never by the per-broker producer id; a last timestamp is the offset from that
minute when a batch wrote it, or "broker clock" when a marker did (the coordinator stamps markers).
"""
from __future__ import annotations

import time

from kafka.protocol.admin import DescribeProducersRequest
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest
from kafka.record.default_records import DefaultRecordBatchBuilder

from broker_sim.server.handlers.transactions import kafka_listing_order
from differential import Scenario, create_topic
from test_read_committed import Producer, _plain
from test_transaction_apis import _init

WRITTEN = (int(time.time()) - 60) * 1000  # the batches' timestamps: WRITTEN + i seconds
SECOND = 1000
# one segment, kept for good (the producer state lives as long as the batches that wrote it)
CONFIGS = {"segment.ms": str(10 * 365 * 24 * 3600 * 1000), "retention.ms": "-1"}
Topic = DescribeProducersRequest.TopicRequest


def _describe(peer, *topics: tuple[str, list[int]]):
    return peer.settled(lambda: DescribeProducersRequest[0](
        topics=[Topic(name=name, partition_indexes=list(indexes)) for name, indexes in topics]))


def _timestamp(value: int):
    if 0 <= value - WRITTEN < 60 * SECOND:
        return ("written", (value - WRITTEN) // SECOND)
    if abs(value - time.time() * 1000) < 10 * 60 * SECOND:
        return "broker clock"
    return value


def _plain_answer(response, roles: dict[int, str], names: dict[str, str] | None = None) -> list:
    """The answer as plain data: topics by their role in the scenario, producers by role (sorted: their order
    follows the per-broker ids, see ``test_kafka_lists_producers_in_its_hash_map_order``)."""
    names = names or {}
    return [{"topic": names.get(t.name, t.name), "partitions": [
        {"index": p.partition_index, "error": p.error_code, "message": p.error_message,
         "producers": sorted(({"producer": roles.get(s.producer_id, "other"), "epoch": s.producer_epoch,
                               "last_sequence": s.last_sequence, "last_timestamp": _timestamp(s.last_timestamp),
                               "coordinator_epoch": s.coordinator_epoch,
                               "current_txn_start_offset": s.current_txn_start_offset}
                              for s in p.active_producers), key=lambda s: s["producer"])}
        for p in t.partitions]} for t in response.topics]


class Idempotent:
    """An idempotent producer on one peer (InitProducerId without a transactional id), raw batches."""

    def __init__(self, peer, role: str, topic: str) -> None:
        self.peer, self.role, self.topic = peer, role, topic
        answer = peer.settled(lambda: InitProducerIdRequest[4](transactional_id=None, transaction_timeout_ms=60_000,
                                                               producer_id=-1, producer_epoch=-1))
        assert answer.error_code == 0, answer
        self.producer_id, self.epoch = answer.producer_id, answer.producer_epoch
        self.sequence: dict[int, int] = {}

    def send(self, count: int, partition: int = 0, second: int = 0) -> int:
        sequence = self.sequence.get(partition, 0)
        builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                            producer_id=self.producer_id, producer_epoch=self.epoch,
                                            base_sequence=sequence, batch_size=1 << 20)
        for i in range(count):
            builder.append(i, timestamp=WRITTEN + second * SECOND, key=self.role.encode(), value=b"v", headers=[])
        records = bytes(builder.build())
        answer = self.peer.settled(lambda: ProduceRequest[9](
            transactional_id=None, acks=-1, timeout_ms=10_000, topic_data=[ProduceRequest.TopicProduceData(
                name=self.topic, partition_data=[ProduceRequest.TopicProduceData.PartitionProduceData(
                    index=partition, records=records)])]))
        result = answer.responses[0].partition_responses[0]
        assert result.error_code == 0, answer
        self.sequence[partition] = sequence + count
        return result.base_offset


def test_idempotent_producers(pair):
    """Two idempotent producers: epoch 0, the last sequence of their last batch in the partition, its timestamp,
    no coordinator epoch (-1) and no transaction (-1); a partition with plain records only lists nobody."""
    def run(peer):
        topic = create_topic(peer, "dp", partitions=3, configs=CONFIGS)
        a, b = Idempotent(peer, "A", topic), Idempotent(peer, "B", topic)
        a.send(3, second=1)
        _plain(peer, topic, ["p0"], timestamp=WRITTEN)
        a.send(2, second=2)
        b.send(1, second=3)
        b.send(4, partition=1, second=4)
        return _plain_answer(_describe(peer, (topic, [0, 1, 2])), {a.producer_id: "A", b.producer_id: "B"},
                             {topic: "topic"})
    answer = pair.compare(Scenario("DescribeProducers, idempotent producers", run))
    assert [p["producers"] for p in answer[0]["partitions"]][2] == []
    assert answer[0]["partitions"][0]["producers"][0]["last_sequence"] == 4


def test_a_transaction_open_committed_then_aborted(pair):
    """A transactional producer: while its transaction is open, the offset of its first batch in the partition
    (current_txn_start_offset), only there; once its COMMIT marker is written -1 and the coordinator's epoch; the
    next transaction opens at its own first batch, and its ABORT closes it."""
    def run(peer):
        topic = create_topic(peer, "dp", partitions=2, configs=CONFIGS)
        _plain(peer, topic, ["p0", "p1", "p2"], timestamp=WRITTEN)
        txn = Producer(peer, "T", topic)
        roles = {txn.producer_id: "T"}
        answers = {"before": _plain_answer(_describe(peer, (topic, [0])), roles)}
        txn.send(["t0", "t1"], timestamp=WRITTEN + 5 * SECOND)
        txn.send(["t2"], timestamp=WRITTEN + 6 * SECOND)
        txn.send(["t3"], partition=1, timestamp=WRITTEN + 7 * SECOND)
        answers["open"] = _plain_answer(_describe(peer, (topic, [0, 1])), roles)
        txn.end(commit=True)
        answers["committed"] = _plain_answer(_describe(peer, (topic, [0, 1])), roles)
        txn.send(["t4"], timestamp=WRITTEN + 8 * SECOND)
        answers["next_open"] = _plain_answer(_describe(peer, (topic, [0, 1])), roles)
        txn.end(commit=False)
        answers["aborted"] = _plain_answer(_describe(peer, (topic, [0, 1])), roles)
        return {key: value[0]["partitions"] for key, value in answers.items()}
    answer = pair.compare(Scenario("DescribeProducers, a transaction's life", run))
    assert answer["open"][0]["producers"][0]["current_txn_start_offset"] == 3
    assert answer["committed"][0]["producers"][0]["current_txn_start_offset"] == -1
    assert answer["next_open"][0]["producers"][0]["current_txn_start_offset"] == 7  # 3-5 data, 6 the marker


def test_a_fenced_transaction(pair):
    """A second InitProducerId of the transactional id fences the open transaction: the coordinator aborts it
    with the next epoch, so the partition's entry has that epoch, no batches of it (last sequence -1), the
    coordinator epoch and no open transaction."""
    def run(peer):
        topic = create_topic(peer, "dp", configs=CONFIGS)
        txn = Producer(peer, "T", topic)
        txn.send(["t0"], timestamp=WRITTEN + 2 * SECOND)
        roles, names = {txn.producer_id: "T"}, {topic: "topic"}
        open_ = _plain_answer(_describe(peer, (topic, [0])), roles, names)
        _, epoch = _init(peer, txn.txn_id)
        deadline = time.monotonic() + 15
        while True:  # Kafka writes the abort marker after it answered
            fenced = _plain_answer(_describe(peer, (topic, [0])), roles, names)
            if fenced[0]["partitions"][0]["producers"][0]["current_txn_start_offset"] < 0 \
                    or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        return {"open": open_, "fenced": fenced, "new_epoch_step": epoch - txn.epoch}
    answer = pair.compare(Scenario("DescribeProducers, a fenced transaction", run))
    assert answer["fenced"][0]["partitions"][0]["producers"][0]["last_sequence"] == -1


def test_missing_partitions_unknown_topics_and_illegal_names(pair):
    """Per topic, for all its partitions: an illegal name INVALID_TOPIC_EXCEPTION with Kafka 4.1's message, a
    topic that does not exist UNKNOWN_TOPIC_OR_PARTITION with its message; a partition the topic does not have
    (or a negative index) UNKNOWN_TOPIC_OR_PARTITION without one.  Topics and partitions come back in request
    order, repeated ones repeated; no topics, no answer."""
    def run(peer):
        topic = create_topic(peer, "dp", partitions=2, configs=CONFIGS)
        missing = peer.name("dp-missing")
        names = {topic: "topic", missing: "missing"}
        requested = [(topic, [1, 2, -1, 1]), (missing, [0, 3]), ("", [0]), (".", [0]), ("..", [1]),
                     ("bad name!", [0, 0]), ("x" * 250, [0]), ("\u00e9t\u00e9", [0]), (topic, [0]), (missing, [])]
        return {"answer": _plain_answer(_describe(peer, *requested), {}, names),
                "nothing": peer.call(DescribeProducersRequest[0](topics=[])).to_dict()["topics"]}
    answer = pair.compare(Scenario("DescribeProducers, errors", run))
    assert [p["error"] for p in answer["answer"][0]["partitions"]] == [0, 3, 3, 0]


def test_kafka_lists_producers_in_its_hash_map_order(pair):
    """Fourteen producers write to one partition, the newest producer id first: Kafka lists them in its
    java.util.HashMap's order (by bucket of the id's hash in a table of 32, insertion order within a bucket), not
    in the order they wrote, and broker_sim lists its own ids the same way."""
    def run(peer):
        topic = create_topic(peer, "dp", configs=CONFIGS)
        producers = [Idempotent(peer, f"P{i}", topic) for i in range(14)]
        written = [p.producer_id for p in reversed(producers)]
        for producer in reversed(producers):
            producer.send(1)
        listed = [s.producer_id for s in _describe(peer, (topic, [0])).topics[0].partitions[0].active_producers]
        return {"count": len(listed), "listed_as_written": listed == written,
                "hash_map_order": listed == kafka_listing_order(written)}
    assert pair.compare(Scenario("DescribeProducers, listing order", run)) == {
        "count": 14, "listed_as_written": False, "hash_map_order": True}
