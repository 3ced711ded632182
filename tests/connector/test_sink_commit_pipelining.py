"""The exactly-once sink's driver commit (connector/sink/commit.py) finds every task transaction's coordinator
in one FindCoordinator and pipelines the EndTxn requests after the first; a connection lost with EndTxns in
flight sends the unanswered ones again, and every transaction is committed once."""
from __future__ import annotations

import pyarrow as pa
from committed_reads import committed_row_numbers
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from connector.options import parse_sink_options
from connector.sink.brokers import SinkCluster
from connector.sink.commit import commit_batch
from connector.sink.producer import TaskProducer
from connector.sink.sink_log import COMPLETED, SinkLog, Txn, ensure_log_topic
from connector.sink.writer import SinkCommitMessage
from connector.wire import BrokerConnection

TASKS = 4
ROWS = 300


def _open_transactions(options, query_id: str, batch_id: int) -> list[SinkCommitMessage]:
    """TASKS task transactions, written and left open as write_task leaves them."""
    messages = []
    for task in range(TASKS):
        transactional_id = f"{options.sink_id}-{batch_id}-{task}-cafe.0"
        producer = TaskProducer(options, transactional_id)
        try:
            producer.start_init(lambda cluster, pid, epoch, task=task, tid=transactional_id: SinkLog(
                cluster, options, query_id).put_open(batch_id, Txn(task, 0, tid, pid, epoch)))
            numbers = range(task * ROWS, (task + 1) * ROWS)
            producer.write(pa.RecordBatch.from_arrays(
                [pa.array([f"k{i}" for i in numbers]), pa.array([f"v{i}:payload" for i in numbers])],
                names=["key", "value"]), options.topic)
            producer.flush()
        finally:
            producer.close()
        messages.append(SinkCommitMessage(query_id, batch_id, task, 0, ROWS, transactional_id, producer.producer_id,
                                          producer.epoch,
                                          tuple(sorted((t, p, n) for (t, p), n in producer.counts.items()))))
    return messages


def _setup(bootstrap: str, topic: str):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, 3, 1)])
    admin.close()
    options = parse_sink_options({"kafka.bootstrap.servers": bootstrap, "topic": topic})
    ensure_log_topic(options)
    return options


def test_the_commit_finds_coordinators_at_once_and_pipelines_its_end_txns(pylog_broker, monkeypatch):
    bootstrap = pylog_broker.bootstrap_servers
    options = _setup(bootstrap, "commit_piped")
    messages = _open_transactions(options, "q-piped", 0)
    events: list[str] = []
    send, read = BrokerConnection.send_end_txn, BrokerConnection.read_end_txn
    finds = []
    find = BrokerConnection.find_coordinator
    monkeypatch.setattr(BrokerConnection, "send_end_txn",
                        lambda c, tid, *a: events.append(f"send {tid[-8:]}") or send(c, tid, *a))
    monkeypatch.setattr(BrokerConnection, "read_end_txn",
                        lambda c, handle: events.append(f"read {handle[0].transactional_id[-8:]}") or read(c, handle))
    monkeypatch.setattr(BrokerConnection, "find_coordinator",
                        lambda c, key, key_type: finds.append(key) or find(c, key, key_type))
    commit_batch(options, messages, 0)
    ids = [m.transactional_id[-8:] for m in messages]
    assert events == [f"send {ids[0]}", f"read {ids[0]}", *(f"send {i}" for i in ids[1:]),
                      *(f"read {i}" for i in ids[1:])], events
    assert finds == [], f"one FindCoordinator per transaction: {finds}"
    assert committed_row_numbers(bootstrap, "commit_piped", 3) == list(range(TASKS * ROWS))
    cluster = SinkCluster(options, "test")
    try:
        assert SinkLog(cluster, options, "q-piped").read().batches[0][0] == COMPLETED
    finally:
        cluster.close()


def test_a_connection_lost_with_end_txns_in_flight_commits_every_transaction_once(pylog_broker, monkeypatch):
    bootstrap = pylog_broker.bootstrap_servers
    options = _setup(bootstrap, "commit_cut")
    messages = _open_transactions(options, "q-cut", 0)
    send = BrokerConnection.send_end_txn
    sends = [0]

    def send_then_cut(connection, *args):
        handle = send(connection, *args)
        sends[0] += 1
        if sends[0] == 3:   # the pipelined EndTxns of tasks 1 and 2 are unanswered when the connection dies
            connection.abort()
        return handle

    monkeypatch.setattr(BrokerConnection, "send_end_txn", send_then_cut)
    commit_batch(options, messages, 0)
    assert sends[0] == 3, sends   # the 4th went through the one-by-one retry (EndTxn on a new connection)
    assert committed_row_numbers(bootstrap, "commit_cut", 3) == list(range(TASKS * ROWS))
