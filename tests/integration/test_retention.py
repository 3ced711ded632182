"""Time- and size-based retention delete old segment files and move the earliest offset; new data stays.

The broker runs with 2 KiB segments and a 200 ms retention check (the first 200 ms after start).  Topics
start with retention off, so the test knows the segment layout before
retention may act, then IncrementalAlterConfigs switches it on (which also
proves that a config change reaches a running log).  Waits are bounded
polls of ListOffsets(EARLIEST) over the wire.
"""
from __future__ import annotations

import time

from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType

from client_helpers import consume_kafka_python, create_topic
from kafka_wire import EARLIEST, LATEST, WireClient, list_offsets, produce_request, produce_result, record_batch
from broker_sim.testing.waiting import wait_until

BROKER_CONFIG = {"internal.log.segment.bytes": "2048", "log.retention.check.interval.ms": "200",
                 "log.initial.task.delay.ms": "200"}
VALUE = b"r" * 200


def _segment_files(directory) -> dict[int, int]:
    """Base offset -> size of each .log file in a partition directory."""
    return {int(p.name[:-4]): p.stat().st_size for p in directory.glob("*.log")}


def _produce_one_per_batch(bootstrap: str, topic: str, count: int, timestamp: int) -> None:
    with WireClient(bootstrap) as client:
        for _ in range(count):
            code, _ = produce_result(client.call(produce_request(topic, 0, record_batch([VALUE],
                                                                                        timestamps=[timestamp]))))
            assert code == 0


def _set_topic_config(bootstrap: str, topic: str, key: str, value: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs={key: value})], incremental=True)
    finally:
        admin.close()


def _earliest(bootstrap: str, topic: str) -> int:
    with WireClient(bootstrap) as client:
        code, _, offset = list_offsets(client, topic, 0, EARLIEST)
    assert code == 0
    return offset


def test_time_retention_deletes_expired_segments_and_keeps_new_data(pylog_broker_factory):
    broker = pylog_broker_factory(config=BROKER_CONFIG)
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, "aged", configs={"retention.ms": "-1"})
    now = int(time.time() * 1000)
    _produce_one_per_batch(bootstrap, "aged", 40, now - 3_600_000)
    _produce_one_per_batch(bootstrap, "aged", 10, now)
    directory = broker.data_dir / "aged-0"
    before = _segment_files(directory)
    assert len(before) >= 5, f"expected several 2 KiB segments, got {before}"
    # the first segment holding a new record stays, with everything after it
    keep_from = max(base for base in before if base <= 40)
    assert keep_from > 0

    _set_topic_config(bootstrap, "aged", "retention.ms", "60000")

    wait_until(lambda: _earliest(bootstrap, "aged") == keep_from, timeout_s=10, what=f"earliest offset {keep_from}")
    assert min(_segment_files(directory)) == keep_from
    assert not [base for base in before if base < keep_from and (directory / f"{base:020d}.log").exists()]
    got = consume_kafka_python(bootstrap, "aged", 50 - keep_from)
    assert [r.offset for r in got] == list(range(keep_from, 50))
    with WireClient(bootstrap) as client:
        assert list_offsets(client, "aged", 0, LATEST)[2] == 50


def test_size_retention_keeps_at_least_retention_bytes_of_the_newest_segments(pylog_broker_factory):
    broker = pylog_broker_factory(config=BROKER_CONFIG)
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, "sized", configs={"retention.bytes": "-1"})
    _produce_one_per_batch(bootstrap, "sized", 60, int(time.time() * 1000))
    directory = broker.data_dir / "sized-0"
    before = _segment_files(directory)
    limit = 4096
    excess, keep_from = sum(before.values()) - limit, None
    for base in sorted(before):  # Kafka: delete oldest segments while the rest still holds retention.bytes
        if excess - before[base] < 0:
            keep_from = base
            break
        excess -= before[base]
    assert keep_from is not None and keep_from > 0

    _set_topic_config(bootstrap, "sized", "retention.bytes", str(limit))

    wait_until(lambda: _earliest(bootstrap, "sized") == keep_from, timeout_s=10, what=f"earliest offset {keep_from}")
    after = _segment_files(directory)
    assert min(after) == keep_from and sum(after.values()) >= limit
    got = consume_kafka_python(bootstrap, "sized", 60 - keep_from)
    assert [r.offset for r in got] == list(range(keep_from, 60))
    assert all(r.value == VALUE for r in got)
