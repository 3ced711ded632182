"""A query whose principal misses one right of the README's table "The ACLs a query's principal needs" fails with
an error naming the principal, the right (as the table lists it) and the ``pylog acls add`` command granting it.

Each test gives a fresh user every right of the table but one, on a secured broker with an authorizer.
"""
from __future__ import annotations

import itertools
import tempfile
import time

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from broker_sim.testing.secured import SecuredBroker

_users = itertools.count()
SOURCE = [("READ", "TOPIC", "az-events", "LITERAL"), ("READ", "GROUP", "az-group", "LITERAL")]
SINK = [("WRITE", "TOPIC", "az-out", "LITERAL"), ("WRITE", "TRANSACTIONAL_ID", "az-sink-", "PREFIXED"),
        ("READ", "TOPIC", "__pylog_sink_log", "LITERAL"), ("WRITE", "TOPIC", "__pylog_sink_log", "LITERAL")]


@pytest.fixture(scope="module")
def secured(tmp_path_factory, spark):
    with SecuredBroker(tmp_path_factory.mktemp("acl-errors")) as broker:
        admin = KafkaAdminClient(**broker.kafka_python())
        admin.create_topics([NewTopic("az-events", 1, 1), NewTopic("az-out", 1, 1)])
        admin.close()
        producer = KafkaProducer(**broker.kafka_python())
        for i in range(3):
            producer.send("az-events", value=f"v{i}".encode(), partition=0)
        producer.flush(30)
        producer.close()
        # the admin's first exactly-once write creates the sink log topic (a user would need CREATE on it)
        _frame(spark).write.format("pylog").mode("append").options(**broker.spark_options()) \
            .option("topic", "az-out").option("sinkId", "az-sink").save()
        yield broker


def _frame(spark):
    return spark.createDataFrame([("k", "v")], "key STRING, value STRING")


def _user_without(secured, rights, missing) -> tuple[str, dict]:
    """A new user holding ``rights`` except ``missing``; (principal, its Spark options)."""
    user = f"az{next(_users)}"
    secured.add_user(user, "pw")
    for operation, resource_type, name, pattern in rights:
        if (operation, resource_type, name) != missing:
            secured.allow(f"User:{user}", operation, resource_type, name, pattern=pattern)
    return f"User:{user}", secured.spark_options(user, "pw")


def _write_fails(spark, options, **extra) -> str:
    with pytest.raises(Exception) as raised:
        _frame(spark).write.format("pylog").mode("append").options(**options).options(**extra) \
            .option("topic", "az-out").option("sinkId", "az-sink").save()
    return str(raised.value)


def test_a_source_without_read_on_its_topic_fails_instead_of_reading_nothing(spark, secured):
    principal, options = _user_without(secured, SOURCE, ("READ", "TOPIC", "az-events"))
    with pytest.raises(Exception) as raised:
        rows = spark.read.format("pylog").options(**options).option("subscribe", "az-events").load().collect()
        pytest.fail(f"read {len(rows)} rows without READ on the topic")
    message = str(raised.value)
    assert f"{principal} READ on TOPIC az-events" in message
    assert f"pylog acls add --allow-principal {principal} --operation READ --topic az-events" in message


def test_an_executor_refused_read_names_the_right_it_misses(spark, secured):
    """DESCRIBE on the topic lets the driver plan the batch (metadata, offsets); the executors' Fetch is refused,
    and their error says who lacks READ on which topic and how to grant it."""
    principal, options = _user_without(secured, SOURCE + [("DESCRIBE", "TOPIC", "az-events", "LITERAL")],
                                       ("READ", "TOPIC", "az-events"))
    with pytest.raises(Exception) as raised:
        rows = spark.read.format("pylog").options(**options).option("subscribe", "az-events").load().collect()
        pytest.fail(f"read {len(rows)} rows without READ on the topic")
    message = str(raised.value)
    assert "Fetch of az-events-0 at offset 0 failed" in message
    assert f"{principal} READ on TOPIC az-events" in message
    assert f"pylog acls add --allow-principal {principal} --operation READ --topic az-events" in message


def test_a_stream_from_its_group_without_read_on_the_group_names_the_group(spark, secured):
    principal, options = _user_without(secured, SOURCE, ("READ", "GROUP", "az-group"))
    checkpoint = tempfile.mkdtemp(prefix="pylog-az-ckpt-")
    query = (spark.readStream.format("pylog").options(**options).option("subscribe", "az-events")
             .option("groupId", "az-group").option("startingOffsets", "group").load()
             .writeStream.format("memory").queryName("az_group").option("checkpointLocation", checkpoint).start())
    deadline = time.monotonic() + 120
    try:
        while query.isActive and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        query.stop()
    assert query.exception() is not None, "the query ran without READ on its group"
    message = str(query.exception())
    assert f"{principal} READ on GROUP az-group" in message
    assert f"--operation READ --group az-group" in message


def test_a_sink_without_write_on_its_topic_names_write(spark, secured):
    principal, options = _user_without(secured, SINK, ("WRITE", "TOPIC", "az-out"))
    message = _write_fails(spark, options)
    assert f"{principal} WRITE on TOPIC az-out" in message
    assert f"pylog acls add --allow-principal {principal} --operation WRITE --topic az-out" in message


def test_an_exactly_once_sink_without_its_transactional_ids_names_the_prefix(spark, secured):
    principal, options = _user_without(secured, SINK, ("WRITE", "TRANSACTIONAL_ID", "az-sink-"))
    message = _write_fails(spark, options)
    assert f"{principal} WRITE on TRANSACTIONAL_ID az-sink- (PREFIXED)" in message
    assert "--transactional-id az-sink- --resource-pattern-type prefixed" in message


def test_an_exactly_once_sink_without_its_log_names_read_and_write_on_the_log(spark, secured):
    principal, options = _user_without(secured, [r for r in SINK if r[2] != "__pylog_sink_log"], None)
    message = _write_fails(spark, options)
    assert f"{principal} READ and WRITE on TOPIC __pylog_sink_log" in message
    assert "--operation READ --operation WRITE --topic __pylog_sink_log" in message


def test_an_at_least_once_sink_with_no_right_names_write_or_idempotent_write(spark, secured):
    principal, options = _user_without(secured, [], None)
    message = _write_fails(spark, options, deliveryGuarantee="at_least_once")
    assert f"{principal} WRITE on TOPIC az-out (or IDEMPOTENT_WRITE on the CLUSTER: KIP-679)" in message
