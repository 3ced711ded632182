"""Sink options: strings in, one frozen SinkOptions out; bad ones fail naming the option."""
from __future__ import annotations

import pickle

import pytest

from connector.options import PylogOptionError, default_sink_id, parse_sink_options

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def test_defaults_are_exactly_once_with_a_stable_sink_id():
    options = parse_sink_options({**BASE, "TOPIC": "clean"})
    assert options.exactly_once and options.topic == "clean"
    assert options.sink_id == default_sink_id("clean") == parse_sink_options({**BASE, "topic": "clean"}).sink_id
    assert options.sink_id != default_sink_id(None) and options.sink_id.startswith("pylog-sink-")
    assert options.transaction_timeout_ms == 900_000 and options.sink_log_topic == "__pylog_sink_log"
    assert pickle.loads(pickle.dumps(options)) == options


def test_producer_settings_are_typed():
    options = parse_sink_options({**BASE, "deliveryGuarantee": "AT_LEAST_ONCE", "kafka.compression.type": "lz4",
                                  "kafka.batch.size": "65536", "kafka.request.timeout.ms": "5000",
                                  "sinkId": "orders-v2", "transactionTimeoutMs": "60000"})
    assert not options.exactly_once and options.compression == 3 and options.batch_bytes == 65536
    assert options.request_timeout_ms == 5000 and options.sink_id == "orders-v2"
    assert options.transaction_timeout_ms == 60000


@pytest.mark.parametrize("extra,message", [
    ({"kafka.bootstrap.servers": ""}, "Option 'kafka.bootstrap.servers' must be specified"),
    ({"deliveryGuarantee": "twice"}, "Option 'deliveryGuarantee' must be one of exactly_once, at_least_once"),
    ({"kafka.acks": "1"}, "Option 'kafka.acks' must be all"),
    ({"kafka.key.serializer": "x"}, "Kafka option 'key.serializer' is not supported"),
    ({"kafka.value.serializer": "x"}, "Kafka option 'value.serializer' is not supported"),
    ({"kafka.transactional.id": "x"}, "Kafka option 'transactional.id' is not supported"),
    ({"kafka.enable.idempotence": "false"}, "Kafka option 'enable.idempotence' is not supported"),
    ({"kafka.compression.type": "brotli"}, "Option 'kafka.compression.type' must be one of none, gzip"),
    ({"transactionTimeoutMs": "0"}, "Option 'transactionTimeoutMs' must be a positive integer"),
    ({"sinkId": "a b"}, "Option 'sinkId' must be 1-100 characters"),
    ({"kafka.security.protocol": "KERBEROS"}, "Option 'kafka.security.protocol' must be one of"),
    ({"kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "PLAIN"},
     "kafka.security.protocol=SASL_PLAINTEXT needs credentials: set kafka.sasl.jaas.config"),
    ({"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "GSSAPI"},
     "Option 'kafka.sasl.mechanism' must be one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"),
    ({"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "PLAIN",
      "kafka.sasl.jaas.config": "com.example.KerberosModule required;"}, "login module com.example.KerberosModule"),
])
def test_bad_options_name_the_option(extra, message):
    with pytest.raises(PylogOptionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_sink_options({**BASE, **extra})
