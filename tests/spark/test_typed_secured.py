"""Typed columns against a secured broker and registry: SASL_SSL (SCRAM) to the brokers, https with Basic auth to
the Schema Registry, ACLs enforced; the query's user holds only the rights the README's "Typed data" table
lists, and losing the subject READ right fails the query before it starts, naming the refusal."""
from __future__ import annotations

import json
import tempfile

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from typed_samples import produce_serialized

pytestmark = pytest.mark.spark
EVENT = json.dumps({"type": "record", "name": "Event", "namespace": "com.acme", "fields": [
    {"name": "id", "type": "long"}, {"name": "name", "type": ["null", "string"], "default": None}]})

# what the README's "Typed data" section lists, beyond the source's and sink's own ACLs
TYPED_RIGHTS = [
    ("READ", "TOPIC", "sec-typed-in", "LITERAL"), ("READ", "GROUP", "pylog-", "PREFIXED"),
    ("WRITE", "TOPIC", "sec-typed-out", "LITERAL"), ("WRITE", "TRANSACTIONAL_ID", "pylog-sink-", "PREFIXED"),
    ("READ", "TOPIC", "__pylog_sink_log", "LITERAL"), ("WRITE", "TOPIC", "__pylog_sink_log", "LITERAL"),
    ("CREATE", "TOPIC", "__pylog_sink_log", "LITERAL"),
    ("READ", "SUBJECT", "sec-typed-in-value", "LITERAL"),     # the reader schema, and writer schemas by id
    ("WRITE", "SUBJECT", "sec-typed-out-value", "LITERAL"),   # auto.register.schemas
]


def _typed_options(secured, user: str, password: str) -> dict:
    return {**secured.spark_options(user, password), "schema.registry.url": secured.schema_registry_url,
            "schema.registry.basic.auth.user.info": f"{user}:{password}",
            "schema.registry.ssl.ca.location": secured.ca_file}


def test_typed_pipeline_on_sasl_ssl_and_registry_basic_auth_with_documented_rights(spark, pylog_secured_broker):
    from kafka.admin import KafkaAdminClient, NewTopic
    secured = pylog_secured_broker
    admin = KafkaAdminClient(**secured.kafka_python())
    admin.create_topics([NewTopic("sec-typed-in", 1, 1), NewTopic("sec-typed-out", 1, 1)])
    admin.close()
    secured.add_user("typed", "typed-secret")
    for operation, resource_type, name, pattern in TYPED_RIGHTS:
        secured.allow("User:typed", operation, resource_type, name, pattern=pattern)
    registry = SchemaRegistryClient(secured.schema_registry())
    serializer = AvroSerializer(registry, EVENT)
    produce_serialized(secured.bootstrap_servers, "sec-typed-in",
                       [(serializer, {"id": i, "name": f"n{i}" if i % 2 else None}) for i in range(6)],
                       config={k: v for k, v in secured.confluent().items() if k != "bootstrap.servers"})

    options = _typed_options(secured, "typed", "typed-secret")
    source = (spark.readStream.format("pylog").options(**options).option("subscribe", "sec-typed-in")
              .option("startingOffsets", "earliest").option("valueFormat", "avro").load())
    query = (source.selectExpr("struct(value.id * 10 AS id, upper(value.name) AS name) AS value")
             .writeStream.format("pylog").options(**options).option("topic", "sec-typed-out")
             .option("valueFormat", "avro").option("checkpointLocation", tempfile.mkdtemp(prefix="pylog-ckpt-"))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(180)
    assert query.exception() is None, query.exception()

    consumer = Consumer({**secured.confluent(), "group.id": "check-typed", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    consumer.assign([TopicPartition("sec-typed-out", 0, 0)])
    deserialize = AvroDeserializer(registry)
    context = SerializationContext("sec-typed-out", MessageField.VALUE)
    got = []
    try:
        for _ in range(100):
            if len(got) == 6:
                break
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                got.append(deserialize(message.value(), context))
    finally:
        consumer.close()
    assert sorted(got, key=lambda r: r["id"]) == [{"id": i * 10, "name": f"N{i}" if i % 2 else None}
                                                  for i in range(6)]

    secured.add_user("no-subject", "no-subject-secret")
    for operation, resource_type, name, pattern in TYPED_RIGHTS:
        if resource_type != "SUBJECT":
            secured.allow("User:no-subject", operation, resource_type, name, pattern=pattern)
    with pytest.raises(Exception, match=r"sec-typed-in-value.*answered 403"):
        (spark.read.format("pylog").options(**_typed_options(secured, "no-subject", "no-subject-secret"))
         .option("subscribe", "sec-typed-in").option("valueFormat", "avro").load())
    registry.close()
