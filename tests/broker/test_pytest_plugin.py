"""Installing pylog gives every pytest run the broker fixtures (entry point pytest11)."""
import pytest

pytest_plugins = ["pytester"]


def test_installed_plugin_provides_a_working_broker_fixture(pytester: pytest.Pytester):
    pytester.makepyfile(test_user="""
        from kafka import KafkaConsumer, KafkaProducer

        def test_roundtrip(pylog_broker):
            producer = KafkaProducer(bootstrap_servers=pylog_broker.bootstrap_servers)
            producer.send("user-topic", b"from a user's test").get(timeout=10)
            producer.close()
            consumer = KafkaConsumer("user-topic", bootstrap_servers=pylog_broker.bootstrap_servers,
                                     auto_offset_reset="earliest", consumer_timeout_ms=5000)
            assert [r.value for r in consumer] == [b"from a user's test"]
            consumer.close()

        def test_factory_takes_broker_configs(pylog_broker_factory):
            broker = pylog_broker_factory(config={"num.partitions": 4})
            assert broker.config.get("num.partitions") == 4
    """)
    # a subprocess with no conftest: the fixtures can only come from the installed entry point
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=2)


def test_the_secured_broker_fixture_enforces_what_it_is_given(pylog_secured_broker):
    """A user's test: a new user with one ACL reads what the admin wrote; without the ACL it may not."""
    from kafka import KafkaConsumer, KafkaProducer
    secured = pylog_secured_broker
    producer = KafkaProducer(**secured.kafka_python())
    producer.send("private", b"secret").get(10)
    producer.close()
    secured.add_user("reader", "reader-secret")
    consumer = KafkaConsumer("private", **secured.kafka_python("reader", "reader-secret"), group_id=None,
                             auto_offset_reset="earliest", consumer_timeout_ms=3000)
    assert list(consumer) == []  # the topic is hidden from a principal that may not DESCRIBE it
    consumer.close()
    secured.allow("User:reader", "READ", "TOPIC", "private")
    consumer = KafkaConsumer("private", **secured.kafka_python("reader", "reader-secret"), group_id=None,
                             auto_offset_reset="earliest", consumer_timeout_ms=10000)
    got = []
    for message in consumer:
        got.append(message.value)
        break
    consumer.close()
    assert got == [b"secret"]


def test_the_secured_broker_fixture_secures_its_schema_registry_too(pylog_secured_broker):
    """https with the broker's CA, Basic against the SCRAM users, and the authorizer: a new user is refused
    until allow(..., "SUBJECT", ...) grants it, then registers and reads."""
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    secured = pylog_secured_broker
    assert secured.schema_registry_url.startswith("https://127.0.0.1:")
    schema = Schema('{"type":"record","name":"E","fields":[{"name":"a","type":"long"}]}', "AVRO")
    assert SchemaRegistryClient(secured.schema_registry()).register_schema("admin-value", schema) == 1
    secured.add_user("writer", "writer-secret")
    writer = {**secured.schema_registry("writer", "writer-secret"), "max.retries": 0}
    with pytest.raises(SchemaRegistryError) as refused:
        SchemaRegistryClient(writer).register_schema("events-value", schema)
    assert (refused.value.http_status_code, refused.value.error_code) == (403, 40301)
    with pytest.raises(SchemaRegistryError) as unknown:
        SchemaRegistryClient({**writer, "basic.auth.user.info": "writer:wrong"}).get_subjects()
    assert (unknown.value.http_status_code, unknown.value.error_code) == (401, 40101)
    for operation in ("WRITE", "READ", "DESCRIBE"):
        secured.allow("User:writer", operation, "SUBJECT", "events-", pattern="PREFIXED")
    assert SchemaRegistryClient(writer).register_schema("events-value", schema) == 1
    assert SchemaRegistryClient(writer).get_subjects() == ["events-value"]  # admin-value stays hidden
