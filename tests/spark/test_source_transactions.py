"""read_committed (the default kafka.isolation.level) against transactional producers, on broker_sim and on
Apache Kafka (``broker``)."""
from __future__ import annotations

import pytest
from kafka import KafkaProducer

from spark_helpers import batch, create_topic, run_available_now, source_progress, stream

pytestmark = pytest.mark.spark


def _produce_committed_aborted_committed(bootstrap: str, topic: str) -> None:
    """Partition 0 gets: committed c0,c1 | marker | aborted a0,a1,a2 | marker | committed c2 | marker."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"{topic}-txn", linger_ms=5)
    try:
        producer.init_transactions()
        for values, commit in (([b"c0", b"c1"], True), ([b"a0", b"a1", b"a2"], False), ([b"c2"], True)):
            producer.begin_transaction()
            for value in values:
                producer.send(topic, value=value, partition=0)
            producer.flush(30)
            if commit:
                producer.commit_transaction()
            else:
                producer.abort_transaction()
    finally:
        producer.close()


COMMITTED = [(0, b"c0"), (1, b"c1"), (7, b"c2")]
EVERYTHING = [(0, b"c0"), (1, b"c1"), (3, b"a0"), (4, b"a1"), (5, b"a2"), (7, b"c2")]


@pytest.fixture
def transactional_topic(broker):
    topic = broker.name("txns")
    create_topic(broker.bootstrap_servers, topic, partitions=1)
    _produce_committed_aborted_committed(broker.bootstrap_servers, topic)
    return topic


@pytest.mark.parametrize("isolation, expected", [
    (None, COMMITTED),                    # the default is read_committed, as in Spark
    ("read_committed", COMMITTED),
    ("read_uncommitted", EVERYTHING),
])
def test_batch_read_skips_aborted_transactions_unless_read_uncommitted(spark, broker, transactional_topic, isolation,
                                                                       expected):
    options = {"kafka.isolation.level": isolation} if isolation else {}
    df = batch(spark, broker.bootstrap_servers, subscribe=transactional_topic, **options)
    assert [(r.offset, r.value) for r in df.orderBy("offset").collect()] == expected


@pytest.mark.parametrize("isolation, expected", [(None, COMMITTED), ("read_uncommitted", EVERYTHING)])
def test_stream_read_skips_aborted_transactions_unless_read_uncommitted(spark, broker, transactional_topic,
                                                                        isolation, expected):
    options = {"kafka.isolation.level": isolation} if isolation else {}
    query, rows = run_available_now(stream(spark, broker.bootstrap_servers, subscribe=transactional_topic,
                                           startingOffsets="earliest", **options))
    assert [(offset, value) for _, offset, _, value in rows] == expected
    # Control markers take offsets (2, 6, 8) but are never rows: the stream still ends past the last marker.
    assert source_progress(query, "endOffset") == {transactional_topic: {"0": 9}}
