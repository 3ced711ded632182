"""The executor's read of one offset range with the next Fetch prefetched (connector/source/partition_reader.py):
it yields the range's records in order, never fetches past the range, and leaves no thread or socket behind
when Spark closes it mid-range; a range read to its end leaves its one connection idle for the next task."""
from __future__ import annotations

import threading
import time

import pytest
from pyspark.sql.pandas.types import to_arrow_schema

import connector.wire
from connector.options import parse_source_options
from connector.source import partition_reader
from connector.source.offsets import OffsetRange
from connector.source.partition_reader import RangeInputPartition, read_range
from connector.source.readers import source_schema

TOPIC = "prefetch"
RECORDS = 3_000


@pytest.fixture
def loaded_broker(pylog_broker):
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": pylog_broker.bootstrap_servers, "linger.ms": 5,
                         "batch.size": 4096, "acks": 1})
    for i in range(RECORDS):
        producer.produce(TOPIC, key=b"%d" % i, value=b"v%05d" % i, partition=0)
    assert producer.flush(60) == 0
    return pylog_broker


@pytest.fixture(autouse=True)
def no_idle_connections():
    """Each test starts and ends without connections kept by an earlier range."""
    connector.wire.IDLE_CONNECTIONS.close_all()
    yield
    connector.wire.IDLE_CONNECTIONS.close_all()


@pytest.fixture
def spied(monkeypatch):
    """Every BrokerConnection the reader opens and every Fetch offset it asks for (the real calls go through)."""
    seen = {"connections": [], "fetches": []}
    real_init, real_fetch = connector.wire.BrokerConnection.__init__, partition_reader._LeaderConnection.fetch

    def init(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        seen["connections"].append(self)

    def fetch(self, offset, **kwargs):
        seen["fetches"].append(offset)
        return real_fetch(self, offset, **kwargs)

    monkeypatch.setattr(connector.wire.BrokerConnection, "__init__", init)
    monkeypatch.setattr(partition_reader._LeaderConnection, "fetch", fetch)
    return seen


def _reader(broker, start: int, until: int):
    options = parse_source_options({"kafka.bootstrap.servers": broker.bootstrap_servers, "subscribe": TOPIC,
                                    "kafka.max.partition.fetch.bytes": "2048"}).for_batch()
    partition = RangeInputPartition(OffsetRange(TOPIC, 0, start, until), options)
    return read_range(partition, to_arrow_schema(source_schema(), timezone="UTC"))


def _prefetch_threads() -> list:
    return [t for t in threading.enumerate() if t.name.startswith("pylog-prefetch") and t.is_alive()]


def _open_connections(seen) -> list:
    return [c for c in seen["connections"] if c._wire.sock.fileno() != -1]


def _assert_nothing_left(seen) -> None:
    assert _prefetch_threads() == []
    assert seen["connections"], "the reader opened no connection"
    assert [c.address for c in _open_connections(seen)] == []
    assert len(connector.wire.IDLE_CONNECTIONS) == 0


def test_a_range_is_read_whole_in_order_and_nothing_is_fetched_past_its_end(loaded_broker, spied):
    rows = []
    for batch in _reader(loaded_broker, 100, 2_500):
        rows.extend(batch.column("offset").to_pylist())
    assert rows == list(range(100, 2_500))
    assert len(spied["fetches"]) > 10  # many fetches of 2 KiB: the prefetch path ran
    assert max(spied["fetches"]) < 2_500 and spied["fetches"] == sorted(spied["fetches"])
    assert _prefetch_threads() == []
    kept = _open_connections(spied)
    assert len(kept) == 1 and kept[0] in connector.wire.IDLE_CONNECTIONS, "the finished range kept no connection"
    connector.wire.IDLE_CONNECTIONS.close_all()
    _assert_nothing_left(spied)


def test_the_next_range_of_the_partition_reuses_the_kept_connection_without_a_metadata_lookup(loaded_broker, spied,
                                                                                            monkeypatch):
    lookups = []
    real_metadata = connector.wire.BrokerConnection.metadata

    def metadata(self, topic, **kwargs):
        lookups.append(topic)
        return real_metadata(self, topic, **kwargs)

    monkeypatch.setattr(connector.wire.BrokerConnection, "metadata", metadata)
    first = [o for b in _reader(loaded_broker, 0, 100) for o in b.column("offset").to_pylist()]
    second = [o for b in _reader(loaded_broker, 100, 200) for o in b.column("offset").to_pylist()]
    assert first == list(range(100)) and second == list(range(100, 200))
    assert len(spied["connections"]) == 1, "the second range opened a connection of its own"
    assert lookups == [TOPIC], "the second range looked its leader up again"


def test_a_kept_connection_the_broker_closed_is_replaced_not_used(loaded_broker, spied):
    assert [o for b in _reader(loaded_broker, 0, 10) for o in b.column("offset").to_pylist()] == list(range(10))
    kept = _open_connections(spied)[0]
    kept._wire.sock.shutdown(2)   # as a broker closing an idle connection: the socket reads EOF
    assert [o for b in _reader(loaded_broker, 10, 20) for o in b.column("offset").to_pylist()] == list(range(10, 20))
    assert len(spied["connections"]) == 2 and kept not in connector.wire.IDLE_CONNECTIONS


def test_closing_the_reader_mid_range_aborts_the_fetch_in_flight_and_closes_its_socket(loaded_broker, spied):
    reader = _reader(loaded_broker, 0, RECORDS)
    first = next(reader)
    assert first.num_rows > 0
    deadline = time.monotonic() + 10
    while not _prefetch_threads() and len(spied["fetches"]) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(spied["fetches"]) == 2, "the next Fetch was not prefetched while the batch was consumed"
    reader.close()
    _assert_nothing_left(spied)


def test_a_fetch_blocked_at_the_log_end_is_woken_by_close(loaded_broker, spied):
    # the range reaches past the log's end: the prefetch at the end long-polls the broker (max wait 500 ms)
    reader = _reader(loaded_broker, RECORDS - 10, RECORDS + 1_000)
    assert next(reader).column("offset").to_pylist() == list(range(RECORDS - 10, RECORDS))
    deadline = time.monotonic() + 10
    while spied["fetches"][-1] != RECORDS and time.monotonic() < deadline:
        time.sleep(0.01)
    reader.close()
    _assert_nothing_left(spied)


def test_a_range_is_fetched_4_mib_at_a_time_unless_the_option_says_otherwise(loaded_broker, monkeypatch):
    asked = []
    real_fetch = connector.wire.BrokerConnection.fetch

    def fetch(self, topic, partition, offset, **kwargs):
        asked.append((kwargs["partition_max_bytes"], kwargs["max_bytes"]))
        return real_fetch(self, topic, partition, offset, **kwargs)

    monkeypatch.setattr(connector.wire.BrokerConnection, "fetch", fetch)
    schema = to_arrow_schema(source_schema(), timezone="UTC")
    small = {"kafka.max.partition.fetch.bytes": "2048", "kafka.fetch.max.bytes": "4096"}
    for extra, expected in (({}, (4 << 20, 52_428_800)), (small, (2048, 4096))):
        asked.clear()
        options = parse_source_options({"kafka.bootstrap.servers": loaded_broker.bootstrap_servers, "subscribe": TOPIC,
                                        **extra}).for_batch()
        rows = sum(b.num_rows for b in read_range(RangeInputPartition(OffsetRange(TOPIC, 0, 0, RECORDS), options),
                                                  schema))
        assert rows == RECORDS
        assert asked and set(asked) == {expected}


def test_the_next_fetch_is_sent_before_the_current_answer_is_decoded(loaded_broker, spied, monkeypatch):
    """The next Fetch's offset is read from the batch headers, so it is sent before the decode of the answer in
    hand, not after: the receive overlaps the decode too, not only Spark's use of the batch."""
    from connector.source import arrow_records

    events = []
    real_start, real_decode = partition_reader._Prefetch.start, arrow_records.decode

    def start(self, offset, deadline):
        events.append(("fetch", offset))
        return real_start(self, offset, deadline)

    def decode(records, low, high, **kwargs):
        columns = real_decode(records, low, high, **kwargs)
        events.append(("decode", low, columns.next_offset))
        return columns

    monkeypatch.setattr(partition_reader._Prefetch, "start", start)
    monkeypatch.setattr(arrow_records, "decode", decode)
    rows = sum(batch.num_rows for batch in _reader(loaded_broker, 0, 2_500))
    assert rows == 2_500
    decodes = [event for event in events if event[0] == "decode"]
    assert len(decodes) > 10
    for before, event in zip(events, events[1:]):
        if event[0] == "decode" and event[2] < 2_500:  # every decode but the last, which ends the range
            assert before == ("fetch", event[2]), events
    assert _prefetch_threads() == [] and all(c in connector.wire.IDLE_CONNECTIONS for c in _open_connections(spied))
