"""The sink's task producer keeps several Produce requests in flight per broker (connector/sink/producer.py):
a connection lost with requests in flight loses, duplicates and reorders nothing."""
from __future__ import annotations

import time

import pyarrow as pa
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import NewTopic

from connector.options import parse_sink_options
from connector.sink import producer as producer_module
from connector.sink.producer import TaskProducer
from connector.wire import BrokerConnection

ROWS = 3000


def _read_all(bootstrap: str, topic: str, partitions: int, expected: int) -> dict[int, list[int]]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    consumer.assign(tps)
    consumer.seek_to_beginning()
    ends = consumer.end_offsets(tps)
    seen: dict[int, list[int]] = {p: [] for p in range(partitions)}
    deadline = time.monotonic() + 60
    while any(consumer.position(tp) < ends[tp] for tp in tps) and time.monotonic() < deadline:
        for tp, records in consumer.poll(500).items():
            seen[tp.partition].extend(int(r.value.split(b":")[0][1:]) for r in records)
    consumer.close()
    assert sum(map(len, seen.values())) == sum(ends.values()), "could not read up to the end offsets"
    return seen


def test_a_connection_lost_with_requests_in_flight_resends_them_in_order_once(pylog_broker, monkeypatch):
    bootstrap = pylog_broker.bootstrap_servers
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic("piped", 2, 1)])
    admin.close()
    # ~15 records a batch, one batch a request: a hundred and more requests, several in flight at a time
    options = parse_sink_options({"kafka.bootstrap.servers": bootstrap, "topic": "piped",
                                  "kafka.batch.size": "2000", "kafka.max.request.size": "2000",
                                  "deliveryGuarantee": "at_least_once"})
    producer = TaskProducer(options)
    sends, most_in_flight, cut = [0], [0], []
    original = BrokerConnection.send_produce

    def send_then_maybe_cut(connection, *args, **kwargs):
        handle = original(connection, *args, **kwargs)
        sends[0] += 1
        most_in_flight[0] = max([most_in_flight[0], *(len(q) + 1 for q in producer._in_flight.values())])
        if sends[0] == 40:   # the connection dies with this request and those before it unanswered
            cut.append(sum(map(len, producer._in_flight.values())) + 1)
            connection.abort()
        return handle

    monkeypatch.setattr(BrokerConnection, "send_produce", send_then_maybe_cut)
    keys = pa.array([f"key-{i % 97}" for i in range(ROWS)], pa.string())
    values = pa.array([f"v{i}:" + "x" * 100 for i in range(ROWS)], pa.string())
    batch = pa.RecordBatch.from_arrays([keys, values], names=["key", "value"])
    try:
        producer.init()
        for offset in range(0, ROWS, 250):
            producer.write(batch.slice(offset, 250), "piped")
        producer.flush()
    finally:
        producer.close()
    assert cut and cut[0] > 1, f"the connection was not cut with several requests in flight ({cut}, {sends[0]} sends)"
    assert 1 < most_in_flight[0] <= producer_module.MAX_IN_FLIGHT, most_in_flight[0]
    assert sends[0] > 100
    seen = _read_all(bootstrap, "piped", 2, ROWS)
    everything = sorted(v for values in seen.values() for v in values)
    assert everything == list(range(ROWS)), (f"{len(everything)} records for {ROWS} rows; "
                                             f"missing {sorted(set(range(ROWS)) - set(everything))[:10]}")
    for partition, values in seen.items():
        assert values == sorted(values), f"partition {partition} out of order"
