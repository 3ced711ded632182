"""Transaction APIs at the protocol level: kafka-python's request classes over a raw socket, on broker_sim and on
Apache Kafka (``any_broker``).

What clients rely on but cannot show directly: produce verification
(INVALID_TXN_STATE for a partition not added), the last stable offset and
aborted-transaction list of read_committed fetches, ListOffsets under
read_committed, Kafka's per-version fencing error, the batched
AddPartitionsToTxn v4, WriteTxnMarkers, ListTransactions and DescribeTransactions.

Kafka answers some requests with a "not yet" code for a moment where broker_sim answers at once (the coordinator
loading its partition, CONCURRENT_TRANSACTIONS while markers go out), and writes the markers after it answered
EndTxn: ``settled`` retries those codes as Kafka's clients do, and reads after an EndTxn wait for the LSO.
"""
from __future__ import annotations

import time
import uuid

import pytest
from kafka.protocol.admin import DescribeTransactionsRequest, ListTransactionsRequest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import (
    AddPartitionsToTxnRequest, EndTxnRequest, InitProducerIdRequest, ProduceRequest, WriteTxnMarkersRequest,
)
from kafka.record.default_records import DefaultRecordBatchBuilder

from client_helpers import create_topic
from kafka_wire import WireClient, batches_of, fetched_partitions
from broker_sim.testing.waiting import wait_until

INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE, INVALID_TRANSACTION_TIMEOUT, PRODUCER_FENCED = 47, 48, 50, 90
TRANSACTION_ABORTABLE = 120
# "not yet": coordinator load in progress / not available / not coordinator, concurrent transactions
SETTLING = frozenset({14, 15, 16, 51})
Topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic


class TxWire(WireClient):
    """A wire client with this test's own topic (``topic``, 2 partitions) and transactional ids (``id(name)``):
    the Kafka node is the session's."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(bootstrap)
        self.tag = uuid.uuid4().hex[:8]
        self.topic = f"tx-{self.tag}"

    def id(self, name: str) -> str:
        return f"{name}-{self.tag}"

    def settled(self, request, code_of, timeout: float = 20):
        """The answer to ``request`` once ``code_of(answer)`` is not a settling code (or at the deadline)."""
        deadline = time.monotonic() + timeout
        while True:
            answer = self.call(request)
            if code_of(answer) not in SETTLING or time.monotonic() >= deadline:
                return answer
            time.sleep(0.1)


@pytest.fixture
def wire(any_broker):
    with TxWire(any_broker.bootstrap_servers) as client:
        create_topic(any_broker.bootstrap_servers, client.topic, 2)
        yield client


def init(wire, txn_id="wire-tx", version=4, timeout_ms=60_000):
    txn_id = wire.id(txn_id)
    wire.settled(FindCoordinatorRequest[3](key=txn_id, key_type=1), lambda a: a.error_code)
    return wire.settled(InitProducerIdRequest[version](transactional_id=txn_id, transaction_timeout_ms=timeout_ms,
                                                       producer_id=-1, producer_epoch=-1), lambda a: a.error_code)


def add_partitions(wire, pid, epoch, partitions, txn_id="wire-tx", version=3):
    response = wire.settled(AddPartitionsToTxnRequest[version](
        v3_and_below_transactional_id=wire.id(txn_id), v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[Topic(name=wire.topic, partitions=partitions)]),
        lambda a: max(p.partition_error_code for t in a.results_by_topic_v3_and_below for p in t.results_by_partition))
    return {p.partition_index: p.partition_error_code
            for t in response.results_by_topic_v3_and_below for p in t.results_by_partition}


def end_txn(wire, pid, epoch, commit, txn_id="wire-tx", version=3):
    return wire.settled(EndTxnRequest[version](transactional_id=wire.id(txn_id), producer_id=pid,
                                               producer_epoch=epoch, committed=commit),
                        lambda a: a.error_code).error_code


def produce(wire, partition, values, pid, epoch, sequence, txn_id="wire-tx"):
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True, producer_id=pid,
                                        producer_epoch=epoch, base_sequence=sequence, batch_size=1 << 20)
    for i, value in enumerate(values):
        builder.append(i, timestamp=int(time.time() * 1000), key=None, value=value, headers=[])
    response = wire.call(ProduceRequest[9](transactional_id=wire.id(txn_id), acks=-1, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(name=wire.topic, partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=partition, records=bytes(builder.build()))])]))
    return response.responses[0].partition_responses[0].error_code


def fetch_committed(wire, partition, offset=0):
    (answer,) = fetched_partitions(wire.call(FetchRequest[12](
        replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=1, session_id=0,
        session_epoch=-1, topics=[FetchRequest.FetchTopic(topic=wire.topic, partitions=[
            FetchRequest.FetchTopic.FetchPartition(partition=partition, fetch_offset=offset,
                                                   partition_max_bytes=1 << 20, current_leader_epoch=-1,
                                                   last_fetched_epoch=-1, log_start_offset=-1)])],
        forgotten_topics_data=[], rack_id="")))
    return answer


def latest(wire, partition, isolation):
    request = ListOffsetsRequest[7](replica_id=-1, isolation_level=isolation, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name=wire.topic, partitions=[
            ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(partition_index=partition,
                                                                     current_leader_epoch=-1, timestamp=-1)])])
    return wire.call(request).topics[0].partitions[0].offset


def stable_at(wire, partition, offset, timeout: float = 10) -> None:
    """Wait until the partition's LSO is ``offset`` (Kafka writes markers after answering EndTxn)."""
    wait_until(lambda: latest(wire, partition, 1) == offset, timeout_s=timeout, what=f"LSO {offset}")


def test_produce_to_a_partition_not_added_to_the_transaction_is_refused(wire):
    answer = init(wire)
    pid, epoch = answer.producer_id, answer.producer_epoch
    assert produce(wire, 0, [b"early"], pid, epoch, 0) == INVALID_TXN_STATE  # before AddPartitionsToTxn
    assert add_partitions(wire, pid, epoch, [0]) == {0: 0}
    assert produce(wire, 1, [b"elsewhere"], pid, epoch, 0) == INVALID_TXN_STATE
    assert produce(wire, 0, [b"ok"], pid, epoch, 0) == 0


def test_read_committed_fetch_reports_lso_and_aborted_transactions(wire):
    answer = init(wire)
    pid, epoch = answer.producer_id, answer.producer_epoch
    add_partitions(wire, pid, epoch, [0])
    assert produce(wire, 0, [b"a0", b"a1"], pid, epoch, 0) == 0
    open_fetch = fetch_committed(wire, 0)
    assert (open_fetch.high_watermark, open_fetch.last_stable_offset, open_fetch.records or b"") == (2, 0, b"")
    assert (latest(wire, 0, 1), latest(wire, 0, 0)) == (0, 2)

    assert end_txn(wire, pid, epoch, commit=False) == 0
    add_partitions(wire, pid, epoch, [0])
    assert produce(wire, 0, [b"c0"], pid, epoch, 2) == 0
    assert end_txn(wire, pid, epoch, commit=True) == 0
    stable_at(wire, 0, 5)
    done = fetch_committed(wire, 0)
    assert (done.high_watermark, done.last_stable_offset) == (5, 5)
    assert [(a.producer_id, a.first_offset) for a in done.aborted_transactions] == [(pid, 0)]
    batches = batches_of(done.records)
    assert [b.is_control_batch for b in batches] == [False, True, False, True]
    assert latest(wire, 0, 1) == 5
    # a fetch past the aborted transaction is not told about it
    assert fetch_committed(wire, 0, offset=3).aborted_transactions == []


@pytest.mark.parametrize("version,expected", [(3, INVALID_PRODUCER_EPOCH), (4, PRODUCER_FENCED)])
def test_fenced_init_producer_id_error_depends_on_the_version(wire, version, expected):
    first = init(wire)
    init(wire)
    init(wire)
    stale = wire.call(InitProducerIdRequest[version](transactional_id=wire.id("wire-tx"), transaction_timeout_ms=60_000,
                                                     producer_id=first.producer_id,
                                                     producer_epoch=first.producer_epoch))
    assert stale.error_code == expected


@pytest.mark.parametrize("version,expected", [(1, INVALID_PRODUCER_EPOCH), (2, PRODUCER_FENCED)])
def test_fenced_end_txn_error_depends_on_the_version(wire, version, expected):
    first = init(wire)
    init(wire)
    assert end_txn(wire, first.producer_id, first.producer_epoch, True, version=version) == expected


def test_transaction_timeout_above_the_maximum_is_refused(wire):
    assert init(wire, timeout_ms=900_001).error_code == INVALID_TRANSACTION_TIMEOUT


def test_add_partitions_v4_batches_transactions_and_verifies(wire):
    one, two = init(wire, "one"), init(wire, "two")
    ids = {wire.id("one"): "one", wire.id("two"): "two"}
    Txn = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction

    def call(verify_only):
        response = wire.call(AddPartitionsToTxnRequest[4](transactions=[
            Txn(transactional_id=wire.id(txn_id), producer_id=answer.producer_id,
                producer_epoch=answer.producer_epoch, verify_only=verify_only,
                topics=[Topic(name=wire.topic, partitions=[0, 1])])
            for txn_id, answer in (("one", one), ("two", two))]))
        return {ids[r.transactional_id]: sorted((p.partition_index, p.partition_error_code)
                                           for t in r.topic_results for p in t.results_by_partition)
                for r in response.results_by_transaction}

    # KIP-890: a partition not in the transaction is the producer's to abort
    assert call(verify_only=True) == {"one": [(0, TRANSACTION_ABORTABLE), (1, TRANSACTION_ABORTABLE)],
                                      "two": [(0, TRANSACTION_ABORTABLE), (1, TRANSACTION_ABORTABLE)]}
    assert call(verify_only=False) == {"one": [(0, 0), (1, 0)], "two": [(0, 0), (1, 0)]}
    assert call(verify_only=True) == {"one": [(0, 0), (1, 0)], "two": [(0, 0), (1, 0)]}


def test_write_txn_markers_from_a_client_without_an_authorizer_ends_the_transaction(wire):
    answer = init(wire)
    pid, epoch = answer.producer_id, answer.producer_epoch
    add_partitions(wire, pid, epoch, [1])
    produce(wire, 1, [b"v"], pid, epoch, 0)
    Marker = WriteTxnMarkersRequest.WritableTxnMarker
    response = wire.call(WriteTxnMarkersRequest[1](markers=[Marker(
        producer_id=pid, producer_epoch=epoch, transaction_result=True, coordinator_epoch=0,
        topics=[Marker.WritableTxnMarkerTopic(name=wire.topic, partition_indexes=[1])])]))
    # a broker-to-broker API, but without an authorizer Kafka writes a client's markers too
    assert [(p.partition_index, p.error_code) for t in response.markers[0].topics for p in t.partitions] == [(1, 0)]
    assert latest(wire, 1, 1) == 2  # the batch and its marker: the LSO passed both


def test_list_and_describe_transactions(wire):
    answer = init(wire)
    add_partitions(wire, answer.producer_id, answer.producer_epoch, [0, 1])
    idle = init(wire, "idle")
    listed = wire.call(ListTransactionsRequest[1](state_filters=["Ongoing", "Bogus"], producer_id_filters=[
        answer.producer_id, idle.producer_id], duration_filter=-1))
    assert [(t.transactional_id, t.producer_id, t.transaction_state) for t in listed.transaction_states] == [
        (wire.id("wire-tx"), answer.producer_id, "Ongoing")]
    assert listed.unknown_state_filters == ["Bogus"]
    described = wire.call(DescribeTransactionsRequest[0](transactional_ids=[wire.id("wire-tx"), wire.id("missing")]))
    found, missing = described.transaction_states
    assert (found.error_code, found.transaction_state, found.producer_epoch, found.transaction_timeout_ms) == (
        0, "Ongoing", answer.producer_epoch, 60_000)
    assert [(t.topic, sorted(t.partitions)) for t in found.topics] == [(wire.topic, [0, 1])]
    assert missing.error_code == 105  # TRANSACTIONAL_ID_NOT_FOUND
