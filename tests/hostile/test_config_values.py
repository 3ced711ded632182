"""Config values a client sets (CreateTopics, IncrementalAlterConfigs, dynamic broker configs) parse as Kafka's
ConfigDef parses them, with Java's Long.parseLong / Integer.parseInt / Double.parseDouble's decimal form: no
full-width digits, no '1_048_576', nothing outside a long's (or an INT config's) range; and no value is longer
than CONFIG_VALUE_MAX_CHARS (a 30 MB value was stored and described to every client). Each refusal names the
config, the value's problem and the bound; nothing is stored."""
from __future__ import annotations

import uuid

import pytest
from client_helpers import create_topic
from kafka.protocol.admin import DescribeConfigsRequest
from kafka_wire import WireClient, create_topics, set_topic_configs

from broker_sim.config import CONFIG_VALUE_MAX_CHARS, ConfigError, validate_topic_configs

INVALID_CONFIG = 40
BAD = {
    "retention.ms": ["１２３", "1_048_576", "9223372036854775808", "1 000", "0x10", "12e3", ""],
    "max.message.bytes": ["2147483648", "١٢٣"],
    "segment.bytes": ["4294967296"],
    "min.cleanable.dirty.ratio": ["０.５", "0_5", "nan", "Infinity"],
}


@pytest.mark.parametrize("name,value", [(n, v) for n, values in BAD.items() for v in values])
def test_numbers_parse_as_java_does(name, value):
    with pytest.raises(ConfigError, match=name.replace(".", r"\.")):
        validate_topic_configs({name: value})


def test_java_forms_still_parse():
    validate_topic_configs({"retention.ms": "+9223372036854775807", "max.message.bytes": " 2147483647 ",
                            "retention.bytes": "-1", "min.cleanable.dirty.ratio": ".5",
                            "segment.ms": "1", "delete.retention.ms": "0"})


def test_hostile_config_values_are_refused_over_the_wire(hostile_broker):
    broker = hostile_broker()
    topic = f"configs-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap_servers, topic)
    huge = "0:1," * ((8 << 20) // 4)  # 8 MB: a throttled-replicas list no cluster has
    messages = []
    with WireClient(broker.bootstrap_servers, timeout=60) as client:
        for name, value in [("retention.ms", "１２３"), ("max.message.bytes", "1_048_576"),
                            ("retention.ms", "9223372036854775808"),
                            ("leader.replication.throttled.replicas", huge)]:
            new = f"new-{uuid.uuid4().hex[:6]}"
            code, message = create_topics(client, {new: 1}, configs={name: value})[new]
            assert code == INVALID_CONFIG, (name, value[:20], code, message)
            assert name in message, message
            messages.append(message)
            assert set_topic_configs(client, topic, {name: value}) == INVALID_CONFIG, (name, value[:20])
        resource = DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=2, resource_name=topic,
            configuration_keys=["retention.ms", "leader.replication.throttled.replicas"])
        described = client.call(DescribeConfigsRequest[4](resources=[resource], include_synonyms=False,
                                                          include_documentation=False))
    values = {c.name: c.value for c in described.results[0].configs}
    assert values == {"retention.ms": "604800000", "leader.replication.throttled.replicas": ""}, values
    assert str(CONFIG_VALUE_MAX_CHARS) in messages[-1], messages[-1]
    log = broker.log_path.read_text(errors="replace")
    assert "Traceback" not in log, log[-3000:]
    hostile_broker.restart(broker)
