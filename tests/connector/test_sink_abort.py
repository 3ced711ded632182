"""The sink's abort and sweep close transactions no task reported, on pylog's broker and on Apache Kafka.

Spark reports the tasks still running at a stop as None, often all of them: ``abort_batch`` then has no
message and must take the query id it was given (the checkpoint's), mark the batch aborted and fence every
transaction the sink log lists; a task that records its transaction after the mark must see it
(``SinkLog.aborted_between``). ``sweep_orphans`` (a restarted query's planning) fences what a crashed run left
open, except what an INTENT still needs. Each check reads the output's last stable offset against its high
watermark: an open transaction holds the first behind the second.
"""
from __future__ import annotations

import uuid

from confluent_kafka import Producer
from kafka import KafkaConsumer
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.structs import TopicPartition

from connector.options import parse_sink_options
from connector.sink.brokers import SinkCluster
from connector.sink.commit import abort_batch, sweep_orphans
from connector.sink.sink_log import INTENT, SinkLog, Txn, ensure_log_topic


def _setup(broker):
    name = uuid.uuid4().hex[:8]
    topic = f"abort-out-{name}"
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        admin.create_topics([NewTopic(topic, 1, 1)])
    finally:
        admin.close()
    options = parse_sink_options({"kafka.bootstrap.servers": broker.bootstrap_servers, "topic": topic,
                                  "sinkId": f"s-{name}", "sinkLogTopic": f"__abort_log_{name}"})
    ensure_log_topic(options)
    return options, topic, name


def _open_transaction(bootstrap: str, topic: str, transactional_id: str) -> Producer:
    """A transaction holding one record, left open (its producer kept alive)."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                         "log_level": 0})   # quiet after the test's broker is gone
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"held")
    producer.flush(30)
    return producer


def _lso_and_hw(bootstrap: str, topic: str) -> tuple[int, int]:
    tp = TopicPartition(topic, 0)
    ends = []
    for isolation in ("read_committed", "read_uncommitted"):
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation)
        try:
            ends.append(consumer.end_offsets([tp])[tp])
        finally:
            consumer.close()
    return ends[0], ends[1]


def _record_open(options, query_id: str, batch: int, partition: int, transactional_id: str) -> int:
    cluster = SinkCluster(options, "test")
    try:
        return SinkLog(cluster, options, query_id).put_open(batch, Txn(partition, 0, transactional_id, -1, -1))
    finally:
        cluster.close()


def test_an_abort_no_task_reported_to_fences_what_the_log_lists(any_broker):
    options, topic, name = _setup(any_broker)
    query_id = f"q-{name}"
    held = [_open_transaction(any_broker.bootstrap_servers, topic, f"{options.sink_id}-3-{p}-n.0") for p in (0, 1)]
    for p in (0, 1):
        _record_open(options, query_id, 3, p, f"{options.sink_id}-3-{p}-n.0")
    lso, hw = _lso_and_hw(any_broker.bootstrap_servers, topic)
    assert lso < hw, "the transactions were not open"
    abort_batch(options, [], 3, query_id)   # every task unreported: Spark's None messages
    lso, hw = _lso_and_hw(any_broker.bootstrap_servers, topic)
    assert lso == hw == 4, (lso, hw)   # two records, two abort markers
    del held


def test_a_task_that_records_itself_after_the_abort_marker_sees_it(any_broker):
    options, _, name = _setup(any_broker)
    query_id = f"q-{name}"
    cluster = SinkCluster(options, "test")
    try:
        log = SinkLog(cluster, options, query_id)
        start = log.end_offset()
        before = log.put_open(4, Txn(0, 0, "before", 1, 0))
        log.put_aborted(4)
        after = log.put_open(4, Txn(1, 0, "after", 2, 0))
        assert log.end_offset() == after + 1
        assert not log.aborted_between(4, start, before + 1), "an entry before the marker must not see it"
        assert log.aborted_between(4, start, after), "an entry after the marker must see it"
        assert not log.aborted_between(5, start, after), "another batch's task must not see it"
        assert SinkLog(cluster, options, f"other-{query_id}").aborted_between(4, start, after) is False
    finally:
        cluster.close()


def test_a_restart_sweep_fences_orphans_but_not_what_an_intent_needs(any_broker):
    options, topic, name = _setup(any_broker)
    query_id = f"q-{name}"
    orphan, needed = f"{options.sink_id}-7-0-n.0", f"{options.sink_id}-6-0-n.0"
    held = [_open_transaction(any_broker.bootstrap_servers, topic, orphan)]
    _record_open(options, query_id, 7, 0, orphan)
    _record_open(options, query_id, 6, 0, needed)
    cluster = SinkCluster(options, "test")
    try:
        SinkLog(cluster, options, query_id).put_batch(6, INTENT, [Txn(0, 0, needed, 1, 0)])
    finally:
        cluster.close()
    assert sweep_orphans(options, query_id) == 1
    lso, hw = _lso_and_hw(any_broker.bootstrap_servers, topic)
    assert lso == hw == 2, (lso, hw)   # the record and its abort marker
    cluster = SinkCluster(options, "test")
    try:
        state = SinkLog(cluster, options, query_id).read()
    finally:
        cluster.close()
    assert set(state.open) == {needed}, "the swept entry is deleted, the INTENT's kept"
    del held
