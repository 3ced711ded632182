"""Hostile Fetch requests (issue 10): one partition named 10,000 times, a client asking for 2 GB, a client
that never reads its responses, a client posing as a follower.

Each test checks the answer, a stated bound on the broker's RSS growth, that kafka-python and
confluent-kafka still round-trip, that acknowledged data is intact, and a clean restart.
"""
from __future__ import annotations

import socket

from hostile import assert_serving, rss_bytes, wait_read_or_refused
from kafka.protocol.consumer import FetchRequest
from kafka_wire import (LATEST, WireClient, batches_of, fetch_request, fetched_partitions, framed, list_offsets,
                        metadata, produce_request, produce_result, record_batch)
from broker_sim.testing.waiting import wait_until

MB = 1 << 20
INT32_MAX = 2**31 - 1
NOT_LEADER_OR_FOLLOWER = 6


def _produce(client: WireClient, topic: str, batches: list[bytes]) -> None:
    metadata(client, [topic])
    for batch in batches:
        wait_until(lambda: produce_result(client.call(produce_request(topic, 0, batch)))[0] == 0, timeout_s=10,
                   what=f"produce to {topic} acknowledged")


def _fetch(topic: str, copies: int, *, max_bytes: int = INT32_MAX, partition_max_bytes: int = INT32_MAX,
           replica_id: int = -1, offsets=None):
    """A Fetch naming partition 0 of ``topic`` ``copies`` times (at ``offsets[i]``, default 0)."""
    offsets = offsets or [0] * copies
    return FetchRequest[12](
        replica_id=replica_id, max_wait_ms=0, min_bytes=1, max_bytes=max_bytes, isolation_level=0, session_id=0,
        session_epoch=-1, topics=[FetchRequest.FetchTopic(topic=topic, partitions=[
            FetchRequest.FetchTopic.FetchPartition(partition=0, fetch_offset=offsets[i],
                                                   partition_max_bytes=partition_max_bytes, current_leader_epoch=-1,
                                                   last_fetched_epoch=-1, log_start_offset=-1)
            for i in range(copies)])], forgotten_topics_data=[], rack_id="")


def test_one_partition_named_10000_times_is_answered_once(hostile_broker):
    broker = hostile_broker()
    topic = "dup"
    with WireClient(broker.bootstrap_servers, timeout=30) as client:
        _produce(client, topic, [record_batch([bytes(50_000)] * 5, key=None) for _ in range(2)])
        before = rss_bytes(broker.process.pid)
        response = client.call(_fetch(topic, 10_000))
        grown = rss_bytes(broker.process.pid) - before
        partitions = fetched_partitions(response)
        assert len(partitions) == 1 and partitions[0].partition_index == 0 and partitions[0].error_code == 0
        assert len(batches_of(partitions[0].records)) == 2
        # answered once: ~500 KB of records, not 10,000 copies of them (main grew RSS by 2.5 GB here)
        assert grown < 50 * MB, f"RSS grew by {grown / MB:.0f} MB (bound 50 MB)"
        # Kafka's fetchData map: the first position, the last occurrence's fetch offset wins
        second = fetched_partitions(client.call(_fetch(topic, 3, offsets=[0, 0, 5])))
        assert len(second) == 1 and batches_of(second[0].records)[0].base_offset == 5
    assert_serving(broker)
    broker = hostile_broker.restart(broker)
    with WireClient(broker.bootstrap_servers) as client:
        assert list_offsets(client, topic, 0, LATEST)[2] == 10
    assert_serving(broker)


def test_fetch_max_bytes_caps_what_a_client_asks_for_but_keeps_the_first_batch(hostile_broker):
    broker = hostile_broker(config={"fetch.max.bytes": 100_000})
    with WireClient(broker.bootstrap_servers, timeout=30) as client:
        _produce(client, "capped", [record_batch([bytes(30_000)], key=None) for _ in range(10)])
        _produce(client, "big-first", [record_batch([bytes(250_000)], key=None) for _ in range(3)])
        records = fetched_partitions(client.call(_fetch("capped", 1)))[0].records
        assert 90_000 <= len(records) <= 100_000, len(records)  # 3 of the 10 batches fit in 100,000 bytes
        assert len(batches_of(records)) == 3
        # KIP-74: a first batch larger than the limit still comes back whole, alone
        records = fetched_partitions(client.call(_fetch("big-first", 1)))[0].records
        assert len(batches_of(records)) == 1 and len(records) > 250_000
        # the per-partition limit is still honoured below the broker's
        records = fetched_partitions(client.call(_fetch("capped", 1, partition_max_bytes=40_000)))[0].records
        assert len(batches_of(records)) == 1
    assert_serving(broker)
    broker = hostile_broker.restart(broker)
    with WireClient(broker.bootstrap_servers) as client:
        assert list_offsets(client, "capped", 0, LATEST)[2] == 10
    assert_serving(broker)


def test_a_client_that_never_reads_its_responses_is_not_buffered_for(hostile_broker):
    broker = hostile_broker()
    topic = "unread"
    with WireClient(broker.bootstrap_servers, timeout=30) as client:
        # 40 KB batches: regions below the sendfile threshold are read into the response, the worst case
        _produce(client, topic, [record_batch([bytes(40_000)], key=None) for _ in range(25)])
    before = rss_bytes(broker.process.pid)
    hog = socket.create_connection(("127.0.0.1", broker.port), timeout=10)
    hog.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    thousand = framed(fetch_request(topic, 0, 0, max_bytes=MB, partition_max_bytes=MB)) * 1000
    sent = 0
    hog.settimeout(1.0)
    try:
        # ~1 MB of response each: 200 GB if the broker buffered them all; more than the kernel's
        # socket buffers hold (a few MB), so sending blocks once the broker stops reading
        for _ in range(200):
            hog.sendall(thousand)
            sent += 1000
    except socket.timeout:
        pass  # the broker stopped reading us: back-pressure reached the sender
    assert sent < 200_000, "the broker kept reading requests while their responses went unread"
    assert wait_read_or_refused(broker.port) > 0, "the broker read every unread fetch"
    grown = rss_bytes(broker.process.pid) - before
    # one response in flight (<= 1 MB asked here), the transport's write buffer, and <= 64 queued requests
    assert grown < 30 * MB, f"{sent} unread fetches grew RSS by {grown / MB:.0f} MB (bound 30 MB)"
    assert_serving(broker)  # while the hog is still connected
    hog.close()
    broker = hostile_broker.restart(broker)
    with WireClient(broker.bootstrap_servers) as client:
        assert list_offsets(client, topic, 0, LATEST)[2] == 25
    assert_serving(broker)


def test_a_follower_fetch_from_a_client_is_refused(hostile_broker):
    broker = hostile_broker()
    topic = "not-a-follower"
    with WireClient(broker.bootstrap_servers) as client:
        _produce(client, topic, [record_batch([b"one", b"two"])])
        before = rss_bytes(broker.process.pid)
        # as Kafka without an authorizer: a follower fetch, and no such follower of the partition (not even the
        # broker's own id 0): every partition NOT_LEADER_OR_FOLLOWER, no records, no offsets
        for replica_id in (0, 1, 7):
            partitions = fetched_partitions(client.call(_fetch(topic, 1, replica_id=replica_id, offsets=[2])))
            assert [(p.error_code, p.high_watermark, len(p.records or b"")) for p in partitions] == \
                [(NOT_LEADER_OR_FOLLOWER, -1, 0)]
        # a real consumer sees the same high watermark and records: no follower state moved
        consumer = fetched_partitions(client.call(fetch_request(topic, 0, 0)))[0]
        assert consumer.error_code == 0 and consumer.high_watermark == 2
        assert [r.value for b in batches_of(consumer.records) for r in b] == [b"one", b"two"]
        assert rss_bytes(broker.process.pid) - before < 20 * MB
    assert_serving(broker)
    broker = hostile_broker.restart(broker)
    with WireClient(broker.bootstrap_servers) as client:
        assert list_offsets(client, topic, 0, LATEST)[2] == 2
    assert_serving(broker)
