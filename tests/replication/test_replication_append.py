"""ReplicaManager.append_records, the one owner of a Produce request's appends: each rule answers its
partition with a value, in request order, and nothing raises.  Real partitions over real logs in tmp_path."""
from __future__ import annotations

import asyncio
import uuid

import kafka.errors as Errors
import pytest

from broker_sim.config import BrokerConfig
from broker_sim.controller.cluster_state import PartitionState
from broker_sim.controller.metadata import TopicInfo
from broker_sim.replication.replica_manager import ReplicaManager
from broker_sim.storage.batch import parse_batches
from replication_helpers import build_batch


@pytest.fixture
def manager(tmp_path, clock):
    verified = []

    def verify(transactional_id, producer_id, producer_epoch, topic, index):
        verified.append((transactional_id, producer_id, producer_epoch, topic, index))
        return Errors.InvalidTxnStateError.errno if index == 1 else 0

    replicas = ReplicaManager(tmp_path, BrokerConfig({}), broker_id=0, now_ms=clock,
                              internal_topics={"__consumer_offsets"}, verify_transaction=verify)
    replicas.verified = verified
    for name, configs in (("t", {"min.insync.replicas": "2", "compression.type": "gzip"}),
                          ("__consumer_offsets", {})):
        replicas.open_topic(TopicInfo(name, uuid.uuid4(), 2, configs))
    yield replicas
    replicas.close()


def append(manager, entries, acks=1, transactional_id=None):
    return asyncio.run(manager.append_records(entries, required_acks=acks, timeout_ms=100,
                                              transactional_id=transactional_id))


def test_each_partition_gets_its_rules_answer_in_request_order(manager):
    results = append(manager, [("t", 0, build_batch([b"a", b"b"])), ("t", 0, None), ("__consumer_offsets", 0,
                                                                                    build_batch([b"x"])),
                               ("t", 7, build_batch([b"c"])), ("t", 0, build_batch([b"d"]))])
    assert [r.error_code for r in results] == [0, Errors.InvalidRecordError.errno, Errors.InvalidTopicError.errno,
                                               Errors.UnknownTopicOrPartitionError.errno, 0]
    assert (results[0].base_offset, results[4].base_offset) == (0, 2)
    assert append(manager, [("t", 0, build_batch([b"e"]))], acks=2)[0].error_code == \
        Errors.InvalidRequiredAcksError.errno


def test_acks_all_below_min_insync_replicas_is_refused_by_the_partition_else_waits_for_the_isr(manager):
    (result,) = append(manager, [("t", 0, build_batch([b"a"]))], acks=-1)
    assert result.error_code == Errors.NotEnoughReplicasError.errno
    assert "min.insync.replicas=2" in result.reason
    with pytest.raises(Errors.NotEnoughReplicasError):
        manager.get("t", 1).append_records(build_batch([b"b"]), required_acks=-1)
    manager.get("t", 0).make_leader(PartitionState(0, 1, (0, 1), 0, 1), [0, 1])
    (result,) = append(manager, [("t", 0, build_batch([b"a"]))], acks=-1)  # appended; follower 1 never fetches
    assert result.error_code == Errors.RequestTimedOutError.errno


def test_records_are_stored_in_the_topics_compression_type(manager):
    (result,) = append(manager, [("t", 0, build_batch([b"v" * 100] * 20))])
    assert result.error_code == 0
    (stored,) = parse_batches(manager.get("t", 0).log.read_bytes(0, 1 << 20))
    assert (stored.compression, stored.record_count) == (1, 20)


def test_a_transactional_batch_needs_the_coordinators_verification(manager):
    batch = build_batch([b"a"], producer_id=7, producer_epoch=0, base_sequence=0, transactional=True)
    results = append(manager, [("t", 0, batch), ("t", 1, batch)], transactional_id="tx")
    assert [r.error_code for r in results] == [0, Errors.InvalidTxnStateError.errno]
    assert manager.verified == [("tx", 7, 0, "t", 0), ("tx", 7, 0, "t", 1)]
