"""Coordinators in a cluster accept partitions that other brokers lead (RF=1): they check the cluster's
metadata, as Kafka's ``metadataCache.contains``, not their own replicas.

Found by an external client suite: AddPartitionsToTxn (and OffsetCommit / TxnOffsetCommit) answered
UNKNOWN_TOPIC_OR_PARTITION for every partition the coordinator did not host.  Three in-process brokers
on a real ZooKeeper, from ``test_cluster_inprocess``'s helpers.
"""
from __future__ import annotations

from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaAdminClient
from kafka.protocol.producer import AddPartitionsToTxnRequest, InitProducerIdRequest

from kafka_wire import WireClient
from test_cluster_inprocess import cluster, create_topic, read_all, settle  # noqa: F401 (fixtures)


def _coordinator_of(cluster, txn_id: str):
    return next((b for b in cluster.brokers.values() if b.transactions.is_coordinator(txn_id)), None)


def test_transaction_and_offsets_over_partitions_hosted_by_one_broker_each(cluster):
    create_topic(cluster, "single-replica", 3, 1)
    hosts = {p: cluster.state("single-replica", p).leader for p in range(3)}
    assert len(set(hosts.values())) == 3, hosts  # each broker hosts one partition, and only that one
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": "rf1-tx"})
    producer.init_transactions(30)

    coordinator = settle(lambda: _coordinator_of(cluster, "wire-rf1-tx"), message="a coordinator of wire-rf1-tx")
    with WireClient(coordinator.bootstrap_servers) as client:
        init = client.call(InitProducerIdRequest[4](transactional_id="wire-rf1-tx", transaction_timeout_ms=60_000,
                                                    producer_id=-1, producer_epoch=-1))
        assert init.error_code == 0
        Topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
        answer = client.call(AddPartitionsToTxnRequest[3](
            v3_and_below_transactional_id="wire-rf1-tx", v3_and_below_producer_id=init.producer_id,
            v3_and_below_producer_epoch=init.producer_epoch,
            v3_and_below_topics=[Topic(name="single-replica", partitions=[0, 1, 2])]))
    codes = {p.partition_index: p.partition_error_code
             for t in answer.results_by_topic_v3_and_below for p in t.results_by_partition}
    assert codes == {0: 0, 1: 0, 2: 0}  # two of them on other brokers

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "rf1-group",
                         "enable.auto.commit": False})
    try:
        producer.begin_transaction()
        for p in range(3):
            producer.produce("single-replica", f"committed-{p}".encode(), partition=p)
        producer.send_offsets_to_transaction([TopicPartition("single-replica", p, 10 + p) for p in range(3)],
                                             consumer.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
        consumer.commit(offsets=[TopicPartition("single-replica", p, 20 + p) for p in range(2)], asynchronous=False)
        committed = consumer.committed([TopicPartition("single-replica", p) for p in range(3)], timeout=30)
        assert [(tp.partition, tp.offset, tp.error) for tp in committed] == [(0, 20, None), (1, 21, None),
                                                                            (2, 12, None)]
    finally:
        consumer.close()
    seen = read_all(cluster.bootstrap_servers, "single-replica", 3, isolation="read_committed")
    assert {p: [v for _, v in records] for p, records in seen.items()} == {
        p: [f"committed-{p}".encode()] for p in range(3)}


def test_a_transaction_whose_topic_is_deleted_still_completes(cluster):
    create_topic(cluster, "doomed", 1, 1)
    create_topic(cluster, "kept", 1, 1)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": "doomed-tx"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("doomed", b"gone", partition=0)
    producer.produce("kept", b"kept", partition=0)
    producer.flush(30)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        admin.delete_topics(["doomed"])
    finally:
        admin.close()
    settle(lambda: all("doomed" not in b.metadata.topics for b in cluster.brokers.values()), message="doomed gone")
    # as Kafka's marker channel: no marker is owed to a partition the metadata no longer has
    producer.commit_transaction(30)
    seen = read_all(cluster.bootstrap_servers, "kept", 1, isolation="read_committed")
    assert [v for _, v in seen[0]] == [b"kept"]
    producer.begin_transaction()  # the id is not wedged in PrepareCommit
    producer.produce("kept", b"next", partition=0)
    producer.commit_transaction(30)
