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
