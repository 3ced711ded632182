"""Connections kept between Spark tasks of one Python worker (connector.wire.ConnectionPool, IDLE_CONNECTIONS):
handed out once, bounded in number and idle time, never a dead one, never across settings; a sink task that
flushed leaves its connections for the next task, one that failed closes them."""
from __future__ import annotations

import pyarrow as pa
import pytest
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

import connector.wire
from connector.options import parse_sink_options
from connector.sink.producer import TaskProducer
from connector.wire import BrokerConnection, ConnectionPool
from broker_sim.testing.clock import ManualClock


def _connect(broker) -> BrokerConnection:
    return BrokerConnection("127.0.0.1", broker.port, timeout_s=10, client_id="pool-test")


def _closed(connection: BrokerConnection) -> bool:
    return connection._wire.sock.fileno() == -1


@pytest.fixture(autouse=True)
def no_idle_connections():
    connector.wire.IDLE_CONNECTIONS.close_all()
    yield
    connector.wire.IDLE_CONNECTIONS.close_all()


def test_a_kept_connection_is_handed_out_once_and_only_for_the_same_settings(pylog_broker):
    pool = ConnectionPool()
    connection = _connect(pylog_broker)
    key = ConnectionPool.key(connection.address, "pool-test", {"security_protocol": "PLAINTEXT"})
    other = ConnectionPool.key(connection.address, "pool-test", {"security_protocol": "SSL"})
    pool.put(key, connection)
    assert pool.take(other) is None
    assert pool.take(key) is connection
    assert pool.take(key) is None
    connection.close()


def test_connections_idle_past_the_limit_are_closed_and_the_oldest_go_first_beyond_the_bound(pylog_broker):
    clock = ManualClock()
    pool = ConnectionPool(max_idle=2, idle_s=60, clock=clock.now_s)
    first, second, third = (_connect(pylog_broker) for _ in range(3))
    for i, connection in enumerate((first, second, third)):
        clock.advance(seconds=1)
        pool.put(("k", i), connection)
    assert _closed(first) and not _closed(second) and len(pool) == 2
    clock.advance(seconds=61)
    assert pool.take(("k", 2)) is None
    assert _closed(second) and _closed(third) and len(pool) == 0


def test_a_connection_the_broker_closed_while_idle_is_dropped_not_handed_out(pylog_broker):
    pool = ConnectionPool()
    connection = _connect(pylog_broker)
    pool.put("k", connection)
    pylog_broker.stop()
    assert pool.take("k") is None
    assert _closed(connection)


def _batch(count: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array([f"v{i}" for i in range(count)], pa.string())], names=["value"])


def test_a_sink_task_that_flushed_leaves_its_connections_to_the_next_task_of_the_worker(pylog_broker, monkeypatch):
    bootstrap = pylog_broker.bootstrap_servers
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic("pooled", 2, 1)])
    admin.close()
    opened = []
    real_init = BrokerConnection.__init__

    def init(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        opened.append(self)

    monkeypatch.setattr(BrokerConnection, "__init__", init)
    options = parse_sink_options({"kafka.bootstrap.servers": bootstrap, "topic": "pooled",
                                  "deliveryGuarantee": "at_least_once"})
    for task in range(3):
        producer = TaskProducer(options)
        producer.start_init()
        producer.write(_batch(50), "pooled")
        producer.flush()
        producer.release()
        if task == 0:
            first_task = len(opened)
    assert first_task >= 1 and len(opened) == first_task, "later tasks opened connections of their own"

    failing = TaskProducer(options)
    failing.start_init()
    failing.write(_batch(5), "pooled")
    failing.flush()
    in_use = [c for c in opened if not _closed(c) and c not in connector.wire.IDLE_CONNECTIONS]
    failing.close()   # a task that failed after its writes: nothing is kept
    assert in_use and all(_closed(c) for c in in_use)
