"""Fetch long-polls: it answers as soon as data arrives or when max_wait_ms runs out; byte limits hold.

Times are measured with the monotonic clock. Lower bounds are exact (the broker
must not answer an idle long poll before ``max_wait_ms``); upper bounds are
generous (a loaded 2-core CI box schedules late), and "it returned because of
the data" is proved by a long ``max_wait_ms`` that the answer comes far inside,
carrying the record, not by a tight wall-clock window.
Mutation: appends not waking parked fetches (Partition._wake_waiters a no-op) ->
"answered after 20.04 s: the append at 0.3 s did not end the 20000 ms wait".  ``max_bytes``/``partition_max_bytes`` bound the
response, except that the first partition with data returns at least one
whole batch even when that batch is bigger (KIP-74).
"""
from __future__ import annotations

import threading
import time

from client_helpers import create_topic
from kafka_wire import (
    WireClient, batches_of, fetch_request, fetched_partitions, produce_request, produce_result, record_batch,
)

MAX_WAIT_MS = 2000


def _produce(bootstrap: str, topic: str, partition: int, values) -> int:
    with WireClient(bootstrap) as client:
        code, base = produce_result(client.call(produce_request(topic, partition, record_batch(values))))
    assert code == 0
    return base


WAKE_MAX_WAIT_MS = 20_000  # the woken poll must come back far inside this


def test_long_poll_returns_soon_after_a_record_is_produced(any_broker, unique):
    bootstrap, topic = any_broker.bootstrap_servers, unique("poll")
    create_topic(bootstrap, topic)
    producer = threading.Timer(0.3, _produce, args=(bootstrap, topic, 0, [b"wake up"]))
    with WireClient(bootstrap, timeout=60) as client:
        started = time.monotonic()
        producer.start()
        response = client.call(fetch_request(topic, 0, 0, max_wait_ms=WAKE_MAX_WAIT_MS, min_bytes=1))
        elapsed = time.monotonic() - started
    producer.join()
    (partition,) = fetched_partitions(response)
    assert [r.value for b in batches_of(partition.records) for r in b] == [b"wake up"]
    assert elapsed < WAKE_MAX_WAIT_MS / 1000 / 2, \
        f"answered after {elapsed:.2f} s: the append at 0.3 s did not end the {WAKE_MAX_WAIT_MS} ms wait"


def test_long_poll_on_an_idle_partition_answers_after_max_wait(any_broker, unique):
    bootstrap, topic = any_broker.bootstrap_servers, unique("idle")
    create_topic(bootstrap, topic)
    with WireClient(bootstrap) as client:
        started = time.monotonic()
        response = client.call(fetch_request(topic, 0, 0, max_wait_ms=MAX_WAIT_MS, min_bytes=1))
        elapsed = time.monotonic() - started
    (partition,) = fetched_partitions(response)
    assert partition.error_code == 0 and not partition.records
    assert MAX_WAIT_MS / 1000 - 0.05 <= elapsed, f"answered after {elapsed:.2f} s, before max_wait_ms"
    assert elapsed < MAX_WAIT_MS / 1000 + 10, f"answered after {elapsed:.2f} s, long past max_wait_ms"


def test_min_bytes_not_reached_waits_for_max_wait_and_returns_what_there_is(any_broker, unique):
    bootstrap, topic = any_broker.bootstrap_servers, unique("few")
    create_topic(bootstrap, topic)
    _produce(bootstrap, topic, 0, [b"small"])
    with WireClient(bootstrap) as client:
        started = time.monotonic()
        response = client.call(fetch_request(topic, 0, 0, max_wait_ms=500, min_bytes=1_000_000))
        elapsed = time.monotonic() - started
    (partition,) = fetched_partitions(response)
    assert [r.value for b in batches_of(partition.records) for r in b] == [b"small"]
    assert 0.45 <= elapsed, f"answered after {elapsed:.2f} s, before max_wait_ms with min_bytes unmet"
    assert elapsed < 10, f"answered after {elapsed:.2f} s, long past max_wait_ms"


def test_partition_max_bytes_bounds_the_response_in_whole_batches(any_broker, unique):
    bootstrap, topic = any_broker.bootstrap_servers, unique("bounded")
    create_topic(bootstrap, topic)
    for i in range(5):
        _produce(bootstrap, topic, 0, [bytes([65 + i]) * 1000])
    batch_size = len(record_batch([b"x" * 1000]))
    limit = int(batch_size * 2.5)
    with WireClient(bootstrap) as client:
        (partition,) = fetched_partitions(client.call(
            fetch_request(topic, 0, 0, partition_max_bytes=limit, max_bytes=1 << 20)))
        assert 0 < len(partition.records) <= limit
        assert [b.base_offset for b in batches_of(partition.records)] == [0, 1]

        (partition,) = fetched_partitions(client.call(
            fetch_request(topic, 0, 0, partition_max_bytes=1 << 20, max_bytes=limit)))
        assert 0 < len(partition.records) <= limit


def test_first_batch_is_returned_whole_even_when_larger_than_the_limits(any_broker, unique):
    bootstrap, topic = any_broker.bootstrap_servers, unique("oversized")
    create_topic(bootstrap, topic, partitions=2)
    big = b"B" * 100_000
    _produce(bootstrap, topic, 0, [big])
    _produce(bootstrap, topic, 0, [b"after"])
    _produce(bootstrap, topic, 1, [big])
    with WireClient(bootstrap) as client:
        (partition,) = fetched_partitions(client.call(
            fetch_request(topic, 0, 0, partition_max_bytes=1000, max_bytes=1000)))
        batches = batches_of(partition.records)
        assert [r.value for b in batches for r in b] == [big]

        # two partitions and a response limit smaller than one batch: only the first partition gets data
        request = fetch_request(topic, 0, 0, partition_max_bytes=1000, max_bytes=1000)
        request.topics[0].partitions.append(type(request.topics[0].partitions[0])(
            partition=1, fetch_offset=0, partition_max_bytes=1000, current_leader_epoch=-1, last_fetched_epoch=-1,
            log_start_offset=-1))
        first, second = fetched_partitions(client.call(request))
        assert [r.value for b in batches_of(first.records) for r in b] == [big]
        assert not second.records and second.error_code == 0 and second.high_watermark == 1
