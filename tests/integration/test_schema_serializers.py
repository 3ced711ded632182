"""confluent-kafka's Avro, JSON Schema and Protobuf serializers produce to pylog; the deserializers consume.

One broker (the pytest plugin's ``pylog_broker``) serves both the topics and the Schema Registry. Each format
goes through two schema versions, the second adding a field with a default: the serializers register
both under the topic's value subject (TopicNameStrategy), every record carries its version's id
(Confluent's wire format: magic byte 0, 4-byte big-endian id), and the deserializers read every record
back exactly — with the writer's schema, and for Avro also with the new version as the reader's
schema, which fills the default into the old records.

The Protobuf message classes are built at test time from FileDescriptorProtos (no protoc): the
serializer registers the file descriptor (base64, as confluent-kafka sends it) and the deserializer
fetches it back with ``format=serialized``.
"""
import json
import struct

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

AVRO_V1 = json.dumps({"type": "record", "name": "Event", "namespace": "com.acme",
                      "fields": [{"name": "id", "type": "long"}]})
AVRO_V2 = json.dumps({"type": "record", "name": "Event", "namespace": "com.acme",
                      "fields": [{"name": "id", "type": "long"},
                                 {"name": "source", "type": "string", "default": "web"}]})
# closed content models: adding an optional property to one is backward compatible in Confluent's rules
JSON_V1 = json.dumps({"title": "Event", "type": "object", "additionalProperties": False,
                      "properties": {"id": {"type": "integer"}}, "required": ["id"]})
JSON_V2 = json.dumps({"title": "Event", "type": "object", "additionalProperties": False,
                      "properties": {"id": {"type": "integer"}, "source": {"type": "string", "default": "web"}},
                      "required": ["id"]})


def event_class(*fields: tuple[str, int, int]):
    """A generated ``acme.Event`` message class with *fields* (name, number, descriptor type), in its own
    pool (each version is its own .proto file, as two builds of one application would be)."""
    proto = descriptor_pb2.FileDescriptorProto(name="acme/event.proto", package="acme", syntax="proto3")
    message = proto.message_type.add(name="Event")
    for name, number, kind in fields:
        message.field.add(name=name, number=number, type=kind,
                          label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("acme.Event"))


INT64, STRING = descriptor_pb2.FieldDescriptorProto.TYPE_INT64, descriptor_pb2.FieldDescriptorProto.TYPE_STRING
EventV1 = event_class(("id", 1, INT64))
EventV2 = event_class(("id", 1, INT64), ("source", 2, STRING))


@pytest.fixture
def broker(pylog_broker):
    """The plugin's broker, which serves the registry too (``schema_registry_url``)."""
    return pylog_broker


@pytest.fixture
def registry(broker):
    client = SchemaRegistryClient({"url": broker.schema_registry_url, "max.retries": 0})
    yield client
    client.close()


def create_topic(broker, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(timeout=30)


def produce(broker, topic: str, serialized: list[tuple]) -> None:
    """Produce ``(serializer, value)`` pairs in order; each value is serialized for the topic's value."""
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "all"})
    context = SerializationContext(topic, MessageField.VALUE)
    for serializer, value in serialized:
        producer.produce(topic, value=serializer(value, context))
    assert producer.flush(30) == 0


def consume_raw(broker, topic: str, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": f"{topic}-reader",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values = []
    try:
        for _ in range(200):
            if len(values) == count:
                break
            message = consumer.poll(0.2)
            if message is None:
                continue
            assert message.error() is None, message.error()
            values.append(message.value())
    finally:
        consumer.close()
    assert len(values) == count
    return values


def schema_ids(values: list[bytes]) -> list[int]:
    """The id in each record's Confluent framing (magic byte 0, then the id)."""
    assert all(value[0] == 0 for value in values)
    return [struct.unpack(">I", value[1:5])[0] for value in values]


def deserialized(deserializer, topic: str, values: list[bytes]) -> list:
    context = SerializationContext(topic, MessageField.VALUE)
    return [deserializer(value, context) for value in values]


def test_avro_two_versions_round_trip(broker, registry):
    topic = "events-avro"
    create_topic(broker, topic)
    v1, v2 = AvroSerializer(registry, AVRO_V1), AvroSerializer(registry, AVRO_V2)
    produce(broker, topic, [(v1, {"id": 1}), (v1, {"id": 2}), (v2, {"id": 3, "source": "app"})])
    values = consume_raw(broker, topic, 3)
    assert schema_ids(values) == [1, 1, 2]
    assert registry.get_versions(f"{topic}-value") == [1, 2]
    assert deserialized(AvroDeserializer(registry), topic, values) == [
        {"id": 1}, {"id": 2}, {"id": 3, "source": "app"}]
    # the new version as the reader's schema: old records get the field's default
    assert deserialized(AvroDeserializer(registry, AVRO_V2), topic, values) == [
        {"id": 1, "source": "web"}, {"id": 2, "source": "web"}, {"id": 3, "source": "app"}]


def test_json_schema_two_versions_round_trip(broker, registry):
    topic = "events-json"
    create_topic(broker, topic)
    v1, v2 = JSONSerializer(JSON_V1, registry), JSONSerializer(JSON_V2, registry)
    produce(broker, topic, [(v1, {"id": 1}), (v2, {"id": 2, "source": "app"})])
    values = consume_raw(broker, topic, 2)
    assert schema_ids(values) == [1, 2]
    assert [json.loads(value[5:]) for value in values] == [{"id": 1}, {"id": 2, "source": "app"}]
    assert registry.get_versions(f"{topic}-value") == [1, 2]
    assert deserialized(JSONDeserializer(None, schema_registry_client=registry), topic, values) == [
        {"id": 1}, {"id": 2, "source": "app"}]
    assert deserialized(JSONDeserializer(JSON_V2), topic, values) == [{"id": 1}, {"id": 2, "source": "app"}]


def test_protobuf_two_versions_round_trip(broker, registry):
    topic = "events-proto"
    create_topic(broker, topic)
    v1, v2 = ProtobufSerializer(EventV1, registry), ProtobufSerializer(EventV2, registry)
    produce(broker, topic, [(v1, EventV1(id=1)), (v2, EventV2(id=2, source="app"))])
    values = consume_raw(broker, topic, 2)
    assert schema_ids(values) == [1, 2]
    assert registry.get_versions(f"{topic}-value") == [1, 2]
    assert registry.get_latest_version(f"{topic}-value").schema.schema_type == "PROTOBUF"
    # the deserializer fetches each record's writer schema (format=serialized) and parses into the new class;
    # proto3's default for the string the old records lack is ""
    records = deserialized(ProtobufDeserializer(EventV2, schema_registry_client=registry), topic, values)
    assert records == [EventV2(id=1, source=""), EventV2(id=2, source="app")]
    assert deserialized(ProtobufDeserializer(EventV1, schema_registry_client=registry), topic, values[:1]) == [
        EventV1(id=1)]
