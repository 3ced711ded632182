"""The kit example's pipeline test written with only the broker fixtures pylog had before the test kit
(pylog_broker, pylog_schema_registry_url): the comparison ``ci/bench_test_kit.py`` times."""
import json
import tempfile
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from pyspark.sql import SparkSession
from pyspark.sql.functions import col, upper

import connector

ORDER = ('{"type": "record", "name": "Order", "fields": '
         '[{"name": "id", "type": "string"}, {"name": "item", "type": "string"}]}')


@pytest.fixture(scope="session")
def spark():
    session = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2").config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())
    yield session
    session.stop()


def test_orders_are_cleaned_exactly_once(spark, pylog_broker, pylog_schema_registry_url):
    bootstrap, registry = pylog_broker.bootstrap_servers, pylog_schema_registry_url
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic("orders", 2), NewTopic("clean", 2)]).values():
        future.result(30)
    serialize = AvroSerializer(SchemaRegistryClient({"url": registry}), ORDER)
    producer = Producer({"bootstrap.servers": bootstrap})
    orders = [{"id": f"o{i}", "item": f"thing {i}"} for i in range(1000)]
    for order in orders:
        producer.produce("orders", key=order["id"].encode(),
                         value=serialize(order, SerializationContext("orders", MessageField.VALUE)))
    assert producer.flush(30) == 0
    options = {"kafka.bootstrap.servers": bootstrap, "subscribe": "orders", "startingOffsets": "earliest",
               "valueFormat": "avro", "schema.registry.url": registry}
    source = spark.readStream.format("pylog").options(**options).load()
    query = (source.select("key", upper(col("value.item")).alias("value")).writeStream.format("pylog")
             .option("kafka.bootstrap.servers", bootstrap).option("topic", "clean")
             .option("checkpointLocation", tempfile.mkdtemp()).start())
    deadline = time.monotonic() + 60
    while True:   # until the query's last batch ends at the topic's end
        progress = [p for p in query.recentProgress if p["sources"]]
        ends = json.loads(progress[-1]["sources"][0]["endOffset"]).get("orders", {}) if progress else {}
        if sum(ends.values()) >= 1000:
            break
        assert query.exception() is None and time.monotonic() < deadline, "the query did not consume the orders"
        time.sleep(0.2)
    connector.stop_query(query, options)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "check", "isolation.level": "read_committed",
                         "auto.offset.reset": "earliest", "enable.partition.eof": True})
    consumer.assign([TopicPartition("clean", p, 0) for p in range(2)])
    seen, ends = {}, 0
    while ends < 2:
        message = consumer.poll(5)
        assert message is not None, "reading clean timed out"
        if message.error():
            ends += 1
            continue
        seen.setdefault(message.key().decode(), []).append(message.value().decode())
    consumer.close()
    assert seen == {o["id"]: [o["item"].upper()] for o in orders}
