"""Transactions, compared with Apache Kafka: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
TxnOffsetCommit, EndTxn, WriteTxnMarkers, DescribeTransactions and ListTransactions, their error paths at every
version broker_sim serves (transaction version 1: KIP-890 part 2 is issue #39).

Producer ids are per broker, so answers carry whether an id is the one seen before, never the id itself.
"""
from __future__ import annotations

import time

import pytest
from kafka.protocol.admin import DescribeTransactionsRequest, ListTransactionsRequest
from kafka.protocol.consumer import OffsetFetchRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, EndTxnRequest, InitProducerIdRequest, TxnOffsetCommitRequest,
    WriteTxnMarkersRequest,
)

from differential import Scenario, create_topic

TIMEOUT_MS = 60_000
Topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
Transaction = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction


def _coordinator(peer, key: str, key_type: int = 1) -> None:
    """Wait until the broker coordinates ``key`` (Kafka creates its internal topic on the first FindCoordinator)."""
    peer.settled(lambda: FindCoordinatorRequest[3](key=key, key_type=key_type))


def _init(peer, txn_id: str, version: int = 4, timeout_ms: int = TIMEOUT_MS) -> tuple[int, int]:
    """(producer id, epoch) of a new instance of ``txn_id``."""
    _coordinator(peer, txn_id)
    answer = peer.settled(lambda: InitProducerIdRequest[version](transactional_id=txn_id,
                                                                 transaction_timeout_ms=timeout_ms,
                                                                 producer_id=-1, producer_epoch=-1))
    assert answer.error_code == 0, answer
    return answer.producer_id, answer.producer_epoch


def _add_partitions(peer, txn_id, producer_id, epoch, partitions, version: int = 3, *, settled=True):
    """{(topic, partition): error} of AddPartitionsToTxn v0-3."""
    by_topic: dict[str, list[int]] = {}
    for topic, index in partitions:
        by_topic.setdefault(topic, []).append(index)

    def request():
        return AddPartitionsToTxnRequest[version](
            v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=producer_id,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[Topic(name=t, partitions=ps) for t, ps in by_topic.items()])

    answer = peer.settled(request) if settled else peer.call(request())
    return {(t.name, p.partition_index): p.partition_error_code
            for t in answer.results_by_topic_v3_and_below for p in t.results_by_partition}


def _end(peer, txn_id, producer_id, epoch, commit: bool, version: int = 3, *, settled=True) -> int:
    def request():
        return EndTxnRequest[version](transactional_id=txn_id, producer_id=producer_id, producer_epoch=epoch,
                                      committed=commit)
    return (peer.settled(request) if settled else peer.call(request())).error_code


def _describe(peer, txn_id: str) -> dict:
    """DescribeTransactions of one id; topics by kind (the names are per broker, and so is the group's
    ``__consumer_offsets`` partition)."""
    state = peer.call(DescribeTransactionsRequest[0](transactional_ids=[txn_id])).transaction_states[0]
    return {"error": state.error_code, "state": state.transaction_state, "timeout": state.transaction_timeout_ms,
            "start_time_ms": "set" if state.transaction_start_time_ms > 0 else state.transaction_start_time_ms,
            "epoch": state.producer_epoch,
            "topics": sorted((t.topic, len(t.partitions)) if t.topic.startswith("__") else ("topic", sorted(t.partitions))
                             for t in state.topics)}


def _completed(peer, txn_id: str, timeout_s: float = 10.0) -> dict:
    """DescribeTransactions once the id is out of PrepareCommit/PrepareAbort (Kafka writes markers after it
    answered EndTxn)."""
    deadline = time.monotonic() + timeout_s
    while True:
        described = _describe(peer, txn_id)
        if not described["state"].startswith("Prepare") or time.monotonic() > deadline:
            return described
        time.sleep(0.05)


# --- InitProducerId -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", range(5))
def test_init_producer_id_idempotent(pair, version):
    """Without a transactional id: a producer id and epoch 0 at every version."""
    def run(peer):
        # Kafka answers COORDINATOR_LOAD_IN_PROGRESS until its producer id block is allocated
        answer = peer.settled(lambda: InitProducerIdRequest[version](
            transactional_id=None, transaction_timeout_ms=TIMEOUT_MS, producer_id=-1, producer_epoch=-1))
        return {"error": answer.error_code, "has_id": answer.producer_id >= 0, "epoch": answer.producer_epoch}
    assert pair.compare(Scenario(f"idempotent InitProducerId v{version}", run)) == {
        "error": 0, "has_id": True, "epoch": 0}


@pytest.mark.parametrize("version", [3, 4])
def test_init_producer_id_idempotent_with_its_id_gets_a_new_id(pair, version):
    """An idempotent producer naming its producer id and epoch (KIP-360) gets a new producer id, epoch 0:
    Kafka bumps epochs only for transactional ids."""
    def run(peer):
        first = peer.settled(lambda: InitProducerIdRequest[version](
            transactional_id=None, transaction_timeout_ms=TIMEOUT_MS, producer_id=-1, producer_epoch=-1))
        again = peer.call(InitProducerIdRequest[version](transactional_id=None, transaction_timeout_ms=TIMEOUT_MS,
                                                         producer_id=first.producer_id,
                                                         producer_epoch=first.producer_epoch))
        return {"error": again.error_code, "new_id": again.producer_id != first.producer_id,
                "epoch": again.producer_epoch}
    assert pair.compare(Scenario(f"idempotent InitProducerId v{version} with its id", run)) == {
        "error": 0, "new_id": True, "epoch": 0}


@pytest.mark.parametrize("version", range(5))
def test_init_producer_id_transaction_timeout_bounds(pair, version):
    """A timeout above transaction.max.timeout.ms (900000) or not positive: INVALID_TRANSACTION_TIMEOUT; at the
    bound: accepted."""
    def run(peer):
        txn_id = peer.name("txn")
        _coordinator(peer, txn_id)
        answers = {}
        for timeout in (900_001, 0, -1, 900_000):
            answer = peer.settled(lambda: InitProducerIdRequest[version](
                transactional_id=txn_id, transaction_timeout_ms=timeout, producer_id=-1, producer_epoch=-1))
            answers[timeout] = (answer.error_code, answer.producer_epoch)
        return answers
    assert pair.compare(Scenario(f"InitProducerId v{version} timeouts", run))["900001"][0] == 50


def test_init_producer_id_empty_transactional_id(pair):
    """An empty transactional id is not an idempotent producer: INVALID_REQUEST."""
    def run(peer):
        answer = peer.call(InitProducerIdRequest[4](transactional_id="", transaction_timeout_ms=TIMEOUT_MS,
                                                    producer_id=-1, producer_epoch=-1))
        return {"error": answer.error_code, "id": answer.producer_id, "epoch": answer.producer_epoch}
    pair.compare(Scenario("InitProducerId with an empty transactional id", run))


def test_init_producer_id_bumps_the_epoch_and_fences(pair):
    """A second InitProducerId for an id bumps the epoch, keeps the producer id; v3+ naming a wrong epoch of the
    current producer id is fenced, naming the current one bumps again."""
    def run(peer):
        txn_id = peer.name("txn")
        producer_id, epoch = _init(peer, txn_id)
        again = peer.call(InitProducerIdRequest[4](transactional_id=txn_id, transaction_timeout_ms=TIMEOUT_MS,
                                                   producer_id=-1, producer_epoch=-1))
        wrong = peer.call(InitProducerIdRequest[4](transactional_id=txn_id, transaction_timeout_ms=TIMEOUT_MS,
                                                   producer_id=producer_id, producer_epoch=epoch + 5))
        wrong_v3 = peer.call(InitProducerIdRequest[3](transactional_id=txn_id, transaction_timeout_ms=TIMEOUT_MS,
                                                      producer_id=producer_id, producer_epoch=epoch + 5))
        current = peer.call(InitProducerIdRequest[4](transactional_id=txn_id, transaction_timeout_ms=TIMEOUT_MS,
                                                     producer_id=producer_id, producer_epoch=again.producer_epoch))
        return {"first_epoch": epoch,
                "again": (again.error_code, again.producer_id == producer_id, again.producer_epoch),
                "wrong_epoch": wrong.error_code, "wrong_epoch_v3": wrong_v3.error_code,
                "current": (current.error_code, current.producer_id == producer_id, current.producer_epoch)}
    pair.compare(Scenario("InitProducerId epoch bumps", run))


@pytest.mark.parametrize("version", range(4))
def test_old_epoch_is_fenced_by_version(pair, version):
    """After a second InitProducerId, the first instance's AddPartitionsToTxn, AddOffsetsToTxn and EndTxn are
    refused: PRODUCER_FENCED where the version knows it, INVALID_PRODUCER_EPOCH before."""
    def run(peer):
        topic = create_topic(peer)
        txn_id = peer.name("txn")
        producer_id, epoch = _init(peer, txn_id)
        _init(peer, txn_id)
        added = _add_partitions(peer, txn_id, producer_id, epoch, [(topic, 0)], version)
        offsets = peer.settled(lambda: AddOffsetsToTxnRequest[version](
            transactional_id=txn_id, producer_id=producer_id, producer_epoch=epoch, group_id=peer.name("g")))
        return {"add_partitions": list(added.values()), "add_offsets": offsets.error_code,
                "end_txn": _end(peer, txn_id, producer_id, epoch, True, version),
                "unknown_producer_id": list(_add_partitions(peer, txn_id, producer_id + 1000, epoch, [(topic, 0)],
                                                            version).values())}
    pair.compare(Scenario(f"fenced epoch v{version}", run))


def test_init_producer_id_fences_an_ongoing_transaction(pair):
    """InitProducerId while a transaction is Ongoing aborts it with a fenced epoch: the new instance gets epoch +2
    (Kafka may answer CONCURRENT_TRANSACTIONS while the markers go out)."""
    def run(peer):
        topic = create_topic(peer)
        txn_id = peer.name("txn")
        producer_id, epoch = _init(peer, txn_id)
        _add_partitions(peer, txn_id, producer_id, epoch, [(topic, 0)])
        _, new_epoch = _init(peer, txn_id)
        return {"epoch_step": new_epoch - epoch, "described": _describe(peer, txn_id),
                "old_end": _end(peer, txn_id, producer_id, epoch, True)}
    pair.compare(Scenario("InitProducerId fences an Ongoing transaction", run))


# --- AddPartitionsToTxn -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", range(4))
def test_add_partitions_unknown_topic(pair, version):
    """A partition of no topic: UNKNOWN_TOPIC_OR_PARTITION for it, OPERATION_NOT_ATTEMPTED for the others."""
    def run(peer):
        topic = create_topic(peer)
        txn_id = peer.name("txn")
        producer_id, epoch = _init(peer, txn_id)
        added = _add_partitions(peer, txn_id, producer_id, epoch, [(topic, 0), (topic, 7), (peer.name("none"), 0)],
                                version)
        return {"errors": sorted(added.values()), "described": _describe(peer, txn_id)}
    pair.compare(Scenario(f"AddPartitionsToTxn v{version} unknown topic", run))


def test_add_partitions_v4_verify_only(pair):
    """AddPartitionsToTxn v4 (the brokers' form) with verify_only: NONE for partitions in the Ongoing
    transaction, TRANSACTION_ABORTABLE for the others; an old epoch PRODUCER_FENCED."""
    def run(peer):
        topic = create_topic(peer, partitions=2)
        txn_id = peer.name("txn")
        producer_id, epoch = _init(peer, txn_id)
        before = peer.call(AddPartitionsToTxnRequest[4](transactions=[Transaction(
            transactional_id=txn_id, producer_id=producer_id, producer_epoch=epoch, verify_only=True,
            topics=[Topic(name=topic, partitions=[0])])]))
        _add_partitions(peer, txn_id, producer_id, epoch, [(topic, 0)])
        answers = {}
        for name, epoch_sent, verify in (("verify", epoch, True), ("old_epoch", epoch - 1, True),
                                         ("add", epoch, False)):
            answer = peer.call(AddPartitionsToTxnRequest[4](transactions=[Transaction(
                transactional_id=txn_id, producer_id=producer_id, producer_epoch=epoch_sent, verify_only=verify,
                topics=[Topic(name=topic, partitions=[0, 1])])]))
            answers[name] = (answer.error_code, sorted(
                (t.name == topic, p.partition_index, p.partition_error_code)
                for r in answer.results_by_transaction for t in r.topic_results for p in t.results_by_partition))
        answers["before"] = [p.partition_error_code for r in before.results_by_transaction for t in r.topic_results
                             for p in t.results_by_partition]
        answers["described"] = _describe(peer, txn_id)
        return answers
    pair.compare(Scenario("AddPartitionsToTxn v4 verify only", run))


# --- AddOffsetsToTxn, TxnOffsetCommit, EndTxn ---------------------------------------------------------------------

@pytest.mark.parametrize("version", range(4))
def test_offsets_in_a_transaction_commit(pair, version):
    """AddOffsetsToTxn then TxnOffsetCommit: the offset is pending (OffsetFetch v7 require_stable answers
    UNSTABLE_OFFSET_COMMIT) until EndTxn commits it."""
    def run(peer):
        topic = create_topic(peer)
        txn_id, group = peer.name("txn"), peer.name("g")
        _coordinator(peer, group, 0)
        producer_id, epoch = _init(peer, txn_id)
        added = peer.settled(lambda: AddOffsetsToTxnRequest[version](
            transactional_id=txn_id, producer_id=producer_id, producer_epoch=epoch, group_id=group))
        Partition = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition
        committed = peer.settled(lambda: TxnOffsetCommitRequest[version](
            transactional_id=txn_id, group_id=group, producer_id=producer_id, producer_epoch=epoch,
            generation_id=-1, member_id="", group_instance_id=None,
            topics=[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name=topic, partitions=[
                Partition(partition_index=0, committed_offset=5, committed_leader_epoch=-1,
                          committed_metadata="m")])]))

        def fetch(stable: bool):
            answer = peer.call(OffsetFetchRequest[7](group_id=group, require_stable=stable, topics=[
                OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])]))
            return answer.error_code, [(p.committed_offset, p.error_code) for t in answer.topics
                                       for p in t.partitions]
        pending = {"stable": fetch(True), "unstable": fetch(False)}
        described = _describe(peer, txn_id)
        ended = _end(peer, txn_id, producer_id, epoch, True, version)
        _completed(peer, txn_id)
        return {"add_offsets": added.error_code,
                "txn_commit": [p.error_code for t in committed.topics for p in t.partitions],
                "pending": pending, "described": described, "end": ended, "after": fetch(True)}
    pair.compare(Scenario(f"transactional offsets v{version}", run))


def test_txn_offset_commit_errors(pair):
    """TxnOffsetCommit without AddOffsetsToTxn, with an old epoch, an unknown member or a wrong generation."""
    Partition = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition

    def run(peer):
        topic = create_topic(peer)
        txn_id, group = peer.name("txn"), peer.name("g")
        _coordinator(peer, group, 0)
        producer_id, epoch = _init(peer, txn_id)

        def commit(version=3, epoch_sent=epoch, member="", generation=-1):
            answer = peer.call(TxnOffsetCommitRequest[version](
                transactional_id=txn_id, group_id=group, producer_id=producer_id, producer_epoch=epoch_sent,
                generation_id=generation, member_id=member, group_instance_id=None,
                topics=[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name=topic, partitions=[
                    Partition(partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                              committed_metadata="")])]))
            return [p.error_code for t in answer.topics for p in t.partitions]
        not_added = commit()
        peer.settled(lambda: AddOffsetsToTxnRequest[3](transactional_id=txn_id, producer_id=producer_id,
                                                       producer_epoch=epoch, group_id=group))
        return {"not_added": not_added, "old_epoch": commit(epoch_sent=epoch - 1),
                "old_epoch_v0": commit(version=0, epoch_sent=epoch - 1),
                "unknown_member": commit(member="nobody", generation=1),
                "generation_no_member": commit(generation=3)}
    pair.compare(Scenario("TxnOffsetCommit errors", run))


@pytest.mark.parametrize("version", range(4))
def test_end_txn_in_wrong_states(pair, version):
    """EndTxn with no transaction open (Empty): INVALID_TXN_STATE; a retried commit after CompleteCommit: NONE;
    abort after CompleteCommit: INVALID_TXN_STATE; a next transaction starts (Kafka: after its markers)."""
    def run(peer):
        topic = create_topic(peer)
        txn_id = peer.name("txn")
        producer_id, epoch = _init(peer, txn_id)
        answers = {"empty_commit": _end(peer, txn_id, producer_id, epoch, True, version),
                   "empty_abort": _end(peer, txn_id, producer_id, epoch, False, version)}
        _add_partitions(peer, txn_id, producer_id, epoch, [(topic, 0)])
        answers["commit"] = _end(peer, txn_id, producer_id, epoch, True, version)
        answers["commit_again"] = _end(peer, txn_id, producer_id, epoch, True, version)
        answers["abort_after_commit"] = _end(peer, txn_id, producer_id, epoch, False, version)
        answers["next"] = list(_add_partitions(peer, txn_id, producer_id, epoch, [(topic, 0)]).values())
        answers["abort"] = _end(peer, txn_id, producer_id, epoch, False, version)
        answers["commit_after_abort"] = _end(peer, txn_id, producer_id, epoch, True, version)
        answers["described"] = _completed(peer, txn_id)
        answers["unknown_id"] = _end(peer, peer.name("nope"), producer_id, epoch, True, version)
        return answers
    pair.compare(Scenario(f"EndTxn v{version} states", run))


# --- WriteTxnMarkers ----------------------------------------------------------------------------------------------

def test_write_txn_markers_from_a_client_without_authorizer(pair):
    """WriteTxnMarkers is the coordinators' API, but with no authorizer configured Kafka takes it from anyone."""
    Marker = WriteTxnMarkersRequest.WritableTxnMarker

    def run(peer):
        topic = create_topic(peer)
        txn_id = peer.name("txn")
        producer_id, epoch = _init(peer, txn_id)
        answer = peer.call(WriteTxnMarkersRequest[1](markers=[Marker(
            producer_id=producer_id, producer_epoch=epoch, transaction_result=False, coordinator_epoch=0,
            topics=[Marker.WritableTxnMarkerTopic(name=topic, partition_indexes=[0])])]))
        unknown = peer.call(WriteTxnMarkersRequest[1](markers=[Marker(
            producer_id=producer_id, producer_epoch=epoch, transaction_result=True, coordinator_epoch=0,
            topics=[Marker.WritableTxnMarkerTopic(name=peer.name("none"), partition_indexes=[0])])]))
        return {"written": [p.error_code for m in answer.markers for t in m.topics for p in t.partitions],
                "unknown_topic": [p.error_code for m in unknown.markers for t in m.topics for p in t.partitions]}
    pair.compare(Scenario("WriteTxnMarkers from a client", run))


# --- DescribeTransactions / ListTransactions ----------------------------------------------------------------------

def test_describe_transactions(pair):
    """Ongoing with its partitions, then CompleteCommit without; an unknown id TRANSACTIONAL_ID_NOT_FOUND."""
    def run(peer):
        topic = create_topic(peer, partitions=2)
        txn_id = peer.name("txn")
        producer_id, epoch = _init(peer, txn_id)
        _coordinator(peer, peer.name("nope"))
        empty = _describe(peer, txn_id)
        _add_partitions(peer, txn_id, producer_id, epoch, [(topic, 1), (topic, 0)])
        ongoing = _describe(peer, txn_id)
        _end(peer, txn_id, producer_id, epoch, True)
        return {"empty": empty, "ongoing": ongoing, "done": _completed(peer, txn_id),
                "unknown": _describe(peer, peer.name("nope"))}
    answer = pair.compare(Scenario("DescribeTransactions", run))
    assert answer["ongoing"]["state"] == "Ongoing"


@pytest.mark.parametrize("version", range(3))
def test_list_transactions_filters(pair, version):
    """ListTransactions by state and producer id (v0+), duration (v1+) and transactional id pattern (v2+, a full
    match of the id); unknown states are listed back."""
    def run(peer):
        topic = create_topic(peer)
        base = peer.name("ltx")
        ids = [f"{base}-a", f"{base}-b"]
        producers = {}
        for txn_id in ids:
            producers[txn_id] = _init(peer, txn_id)
        pid_a, epoch_a = producers[ids[0]]
        _add_partitions(peer, ids[0], pid_a, epoch_a, [(topic, 0)])
        mine = [pid for pid, _ in producers.values()]
        names = {pid: txn_id[len(base):] for txn_id, (pid, _) in producers.items()}

        def listed(**filters):
            fields = dict(state_filters=filters.get("states", []), producer_id_filters=filters.get("pids", mine))
            if version >= 1:
                fields["duration_filter"] = filters.get("duration", -1)
            if version >= 2:
                fields["transactional_id_pattern"] = filters.get("pattern")
            answer = peer.call(ListTransactionsRequest[version](**fields))
            return {"error": answer.error_code, "unknown": sorted(answer.unknown_state_filters),
                    "listed": sorted((names.get(t.producer_id, "?"), t.transaction_state)
                                     for t in answer.transaction_states if t.producer_id in names)}
        answers = {"all": listed(), "ongoing": listed(states=["Ongoing"]),
                   "empty_and_bogus": listed(states=["Empty", "Bogus"]), "only_bogus": listed(states=["Bogus"]),
                   "one_pid": listed(pids=[pid_a])}
        if version >= 1:
            answers["long_running"] = listed(duration=3_600_000)
        if version >= 2:
            answers["full_pattern"] = listed(pattern=f"{base}-.")
            answers["partial_pattern"] = listed(pattern="ltx")
            answers["empty_pattern"] = listed(pattern="")
            answers["bad_pattern"] = listed(pattern="(")
        return answers
    pair.compare(Scenario(f"ListTransactions v{version}", run))


# --- timeouts -----------------------------------------------------------------------------------------------------

def test_timed_out_transaction_is_aborted_and_its_epoch_fenced(fresh_pair):
    """An Ongoing transaction past its timeout is aborted by the coordinator with a bumped epoch; the old
    instance's next requests are fenced (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH on old versions)."""
    pair = fresh_pair({"transaction.abort.timed.out.transaction.cleanup.interval.ms": "100"})

    def run(peer):
        topic = create_topic(peer)
        txn_id = peer.name("txn")
        producer_id, epoch = _init(peer, txn_id, timeout_ms=500)
        _add_partitions(peer, txn_id, producer_id, epoch, [(topic, 0)])
        deadline = time.monotonic() + 10
        while _describe(peer, txn_id)["state"] != "CompleteAbort" and time.monotonic() < deadline:
            time.sleep(0.1)
        return {"described": _completed(peer, txn_id),
                "end_v3": _end(peer, txn_id, producer_id, epoch, True, 3, settled=False),
                "end_v1": _end(peer, txn_id, producer_id, epoch, False, 1, settled=False),
                "add_v0": list(_add_partitions(peer, txn_id, producer_id, epoch, [(topic, 0)], 0,
                                               settled=False).values()),
                "reinit_v4": peer.call(InitProducerIdRequest[4](
                    transactional_id=txn_id, transaction_timeout_ms=500, producer_id=producer_id,
                    producer_epoch=epoch)).error_code}
    answer = pair.compare(Scenario("transaction timeout", run))
    assert answer["described"]["state"] == "CompleteAbort"
