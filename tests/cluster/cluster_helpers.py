"""Client helpers for the cluster tests: create topics, produce with chosen acks, read partitions.

All clients are confluent-kafka (librdkafka), bounded by explicit timeouts.
"""
from __future__ import annotations

import os
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker_sim.testing.jepsen_workload import FAST_FAILOVER_CONFIGS

CLUSTER_CONFIGS = {**FAST_FAILOVER_CONFIGS}


def zookeeper_missing() -> str | None:
    from broker_sim.local.zookeeper import zookeeper_available

    return zookeeper_available()


def start_cluster(directory, brokers: int = 3, configs: dict | None = None, **options):
    """A started LocalCluster with the fast-failover settings (``options``: more LocalCluster arguments, e.g.
    ``racks``); skips the test without ZooKeeper."""
    from broker_sim.local.cluster import LocalCluster

    reason = zookeeper_missing()
    if reason:
        pytest.skip(f"no ZooKeeper for cluster tests: {reason}")
    return LocalCluster(directory, brokers=brokers, configs={**CLUSTER_CONFIGS, **(configs or {})},
                        start_timeout_s=float(os.environ.get("PYLOG_CLUSTER_START_TIMEOUT_S", "60")),
                        **options).start()


def create_topic(bootstrap: str, topic: str, *, partitions: int = 1, replication_factor: int = 3,
                 configs: dict | None = None, timeout_s: float = 30.0) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=replication_factor,
                                            config={k: str(v) for k, v in (configs or {}).items()})],
                                  operation_timeout=timeout_s, request_timeout=timeout_s)
    futures[topic].result(timeout_s)


def produce(bootstrap: str, topic: str, values, *, partition: int = 0, acks: str = "all", retries: int | None = None,
            idempotent: bool = False, timeout_s: float = 30.0, extra: dict | None = None) -> list:
    """Send *values* (bytes) to one partition and flush.

    Returns one (error or None, offset) per value, in send order; errors are KafkaError objects.
    """
    config = {"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
              "message.timeout.ms": int(timeout_s * 1000), "enable.idempotence": idempotent, **(extra or {})}
    if retries is not None:
        config["retries"] = retries
    results: dict[int, tuple] = {}
    producer = Producer(config)
    for index, value in enumerate(values):
        producer.produce(topic, value, partition=partition,
                         on_delivery=lambda err, msg, i=index: results.__setitem__(i, (err, msg.offset())))
        producer.poll(0)
    remaining = producer.flush(timeout_s + 5)
    assert remaining == 0, f"{remaining} messages neither delivered nor failed after {timeout_s + 5} s"
    return [results[i] for i in range(len(results))]


def read_partition(bootstrap: str, topic: str, partition: int, count: int, *, timeout_s: float = 30.0) -> list:
    """The first *count* (offset, value) records of one partition, read from the beginning."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "cluster-tests", "enable.auto.commit": False,
                         "enable.partition.eof": False})
    records: list = []
    deadline = time.monotonic() + timeout_s
    try:
        consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        while len(records) < count and time.monotonic() < deadline:
            for message in consumer.consume(500, 0.5):
                if message.error() is None:
                    records.append((message.offset(), message.value()))
    finally:
        consumer.close()
    return records


def error_code(err) -> int | None:
    return None if err is None else err.code()


NOT_ENOUGH_REPLICAS = KafkaError.NOT_ENOUGH_REPLICAS


def raw_produce(address: str, topic: str, partition: int, value: bytes, *, acks: int = 1,
                timeout_s: float = 10.0) -> int:
    """One ProduceRequest v9 sent straight to the broker at *address* (no client routing or retries);
    returns the partition's error code."""
    from broker_sim.protocol.client import WireConnection
    from tests.integration.kafka_wire import produce_request, record_batch

    request = produce_request(topic, partition, record_batch([value], key=None), acks=acks, version=9)
    with WireConnection.to(address, timeout_s=timeout_s, client_id="pylog-cluster-tests") as connection:
        response = connection.call(request)
    return response.responses[0].partition_responses[0].error_code
