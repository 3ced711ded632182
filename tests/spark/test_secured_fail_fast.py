"""Security mistakes fail a Spark query within its bootstrap timeout, naming the cause and the option to change.

Before, a PLAINTEXT client on a SASL_SSL listener, a SASL_SSL client without the CA, or a mechanism the broker
does not enable sat in "Getting offsets" for about 190 s and failed with kafka-python's "Unable to bootstrap".
Each test here makes one mistake against a real secured broker (TLS from a throwaway CA, SCRAM users) or a
plaintext one and measures how long the query took to fail.
"""
from __future__ import annotations

import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from broker_sim.testing.secured import SecuredBroker
from tests.spark.spark_helpers import create_topic

BUDGET_MS = 20_000  # bootstrapTimeoutMs given to every query here; a mistake must fail well within it


@pytest.fixture(scope="module")
def secured(tmp_path_factory, spark):
    with SecuredBroker(tmp_path_factory.mktemp("fail-fast")) as broker:
        broker.add_user("spark", "spark-secret")
        admin = KafkaAdminClient(**broker.kafka_python())
        admin.create_topics([NewTopic("ff-events", 1, 1), NewTopic("ff-out", 1, 1)])
        admin.close()
        producer = KafkaProducer(**broker.kafka_python())
        for i in range(5):
            producer.send("ff-events", value=f"v{i}".encode(), partition=0)
        producer.flush(30)
        producer.close()
        # the right settings read the topic; this also warms up the session's Python workers, which a first
        # query would otherwise count in its time
        rows = spark.read.format("pylog").options(**_options(broker)).option("subscribe", "ff-events").load().collect()
        assert len(rows) == 5
        yield broker


def _options(broker, *, user="admin", password="admin-secret", **changes) -> dict:
    options = {**broker.spark_options(user, password), "bootstrapTimeoutMs": str(BUDGET_MS)}
    for key, value in changes.items():
        name = "kafka." + key.replace("_", ".")
        if value is None:
            options.pop(name, None)
        else:
            options[name] = value
    return options


def _read_fails(spark, options) -> tuple[str, float]:
    """(the error's text, seconds) of a batch read with ``options`` that must fail."""
    started = time.monotonic()
    with pytest.raises(Exception) as raised:
        spark.read.format("pylog").options(**options).option("subscribe", "ff-events").load().collect()
    return str(raised.value), time.monotonic() - started


def test_a_plaintext_client_on_a_sasl_ssl_listener_is_told_the_listeners_protocol(spark, secured):
    message, took = _read_fails(spark, _options(secured, security_protocol="PLAINTEXT", sasl_mechanism=None,
                                                sasl_jaas_config=None, ssl_truststore_location=None))
    assert took < BUDGET_MS / 1000, f"took {took:.1f} s"
    assert "is a SASL_SSL listener" in message
    assert "kafka.security.protocol=PLAINTEXT" in message and "set kafka.security.protocol=SASL_SSL" in message
    assert "kafka.ssl.truststore.location" in message and "kafka.sasl.jaas.config" in message


def test_a_sasl_plaintext_client_on_a_sasl_ssl_listener_is_told_to_use_tls(spark, secured):
    message, took = _read_fails(spark, _options(secured, security_protocol="SASL_PLAINTEXT"))
    assert took < BUDGET_MS / 1000, f"took {took:.1f} s"
    assert "is a SASL_SSL listener" in message and "set kafka.security.protocol=SASL_SSL" in message


def test_a_sasl_ssl_client_without_the_ca_is_told_the_certificate_is_not_trusted(spark, secured):
    message, took = _read_fails(spark, _options(secured, ssl_truststore_location=None))
    assert took < BUDGET_MS / 1000, f"took {took:.1f} s"
    assert "TLS handshake" in message and "not signed by a CA this client trusts" in message
    assert "kafka.ssl.truststore.location" in message


def test_a_mechanism_the_broker_does_not_enable_is_named_with_the_enabled_ones(spark, secured):
    options = _options(secured, sasl_mechanism="PLAIN",
                       sasl_jaas_config='org.apache.kafka.common.security.plain.PlainLoginModule required '
                                        'username="admin" password="admin-secret";')
    message, took = _read_fails(spark, options)
    assert took < BUDGET_MS / 1000, f"took {took:.1f} s"
    assert "does not enable SASL mechanism PLAIN" in message and "SCRAM-SHA-512" in message
    assert "kafka.sasl.mechanism" in message


def test_a_wrong_password_names_the_mechanism_and_the_user(spark, secured):
    message, took = _read_fails(spark, _options(secured, user="spark", password="wrong"))
    assert took < BUDGET_MS / 1000, f"took {took:.1f} s"
    assert "SASL SCRAM-SHA-512 login of user 'spark'" in message and "kafka.sasl.jaas.config" in message


def test_a_sasl_ssl_client_on_a_plaintext_listener_is_told_it_is_plaintext(spark, secured, pylog_broker):
    create_topic(pylog_broker.bootstrap_servers, "ff-plain")
    message, took = _read_fails(spark, {**_options(secured), "kafka.bootstrap.servers": pylog_broker.bootstrap_servers})
    assert took < BUDGET_MS / 1000, f"took {took:.1f} s"
    assert "is a PLAINTEXT listener" in message and "set kafka.security.protocol=PLAINTEXT" in message


def test_a_streaming_query_without_the_ca_stops_with_the_cause(spark, secured):
    checkpoint = tempfile.mkdtemp(prefix="pylog-ff-ckpt-")
    started = time.monotonic()
    source = (spark.readStream.format("pylog").options(**_options(secured, ssl_truststore_location=None))
              .option("subscribe", "ff-events").load())
    query = source.writeStream.format("memory").queryName("ff_stream").option("checkpointLocation", checkpoint).start()
    try:
        query.awaitTermination(BUDGET_MS / 1000)
    except Exception:  # StreamingQueryException: the query stopped with the error
        pass
    finally:
        took = time.monotonic() - started
        query.stop()
    assert query.exception() is not None, f"still running after {took:.1f} s"
    assert took < BUDGET_MS / 1000, f"took {took:.1f} s"
    message = str(query.exception())
    assert "not signed by a CA this client trusts" in message and "kafka.ssl.truststore.location" in message


def test_the_sink_fails_before_writing_when_it_speaks_plaintext_to_a_tls_listener(spark, secured):
    options = _options(secured, security_protocol="SASL_PLAINTEXT")
    frame = spark.createDataFrame([("k", "v")], "key STRING, value STRING")
    started = time.monotonic()
    with pytest.raises(Exception) as raised:
        frame.write.format("pylog").mode("append").options(**options).option("topic", "ff-out").save()
    took = time.monotonic() - started
    assert took < BUDGET_MS / 1000, f"took {took:.1f} s"
    assert "is a SASL_SSL listener" in str(raised.value) and "kafka.security.protocol" in str(raised.value)


# -- JKS / PKCS12 truststores ------------------------------------------------------------------------------------


def _keytool_truststore(ca_file: str, store_type: str, password: str) -> str:
    """A truststore holding the CA, made by Java's keytool as Spark users make theirs."""
    path = str(Path(tempfile.mkdtemp(prefix="pylog-jks-")) / f"truststore.{store_type.lower()}")
    subprocess.run(["keytool", "-importcert", "-noprompt", "-alias", "pylog-ca", "-file", ca_file,
                    "-keystore", path, "-storetype", store_type, "-storepass", password],
                   check=True, capture_output=True, timeout=120)
    return path


@pytest.mark.parametrize("store_type", ["JKS", "PKCS12"])
def test_a_java_truststore_with_its_password_reads_the_topic(spark, secured, store_type):
    truststore = _keytool_truststore(secured.ca_file, store_type, "changeit")
    options = {**_options(secured, ssl_truststore_location=truststore), "kafka.ssl.truststore.type": store_type,
               "kafka.ssl.truststore.password": "changeit"}
    rows = spark.read.format("pylog").options(**options).option("subscribe", "ff-events").load().collect()
    assert sorted(bytes(r.value) for r in rows) == [f"v{i}".encode() for i in range(5)]
    frame = spark.createDataFrame([("k", f"jks-{store_type}")], "key STRING, value STRING")
    frame.write.format("pylog").mode("append").options(**options).option("topic", "ff-out").save()


def test_a_java_truststore_with_a_wrong_password_fails_before_the_query_with_the_option(spark, secured):
    truststore = _keytool_truststore(secured.ca_file, "JKS", "changeit")
    options = {**_options(secured, ssl_truststore_location=truststore), "kafka.ssl.truststore.type": "JKS",
               "kafka.ssl.truststore.password": "wrong"}
    with pytest.raises(Exception) as raised:
        spark.read.format("pylog").options(**options).option("subscribe", "ff-events").load()
    assert "kafka.ssl.truststore.password" in str(raised.value) and truststore in str(raised.value)

