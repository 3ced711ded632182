"""Broker and topic configuration parsing, under Kafka's names."""
import pytest

from broker_sim.config import BrokerConfig, ConfigError, validate_topic_configs


def test_topic_defaults_come_from_broker_configs():
    config = BrokerConfig({"log.segment.bytes": 4096, "auto.create.topics.enable": False})
    assert config.effective_topic_configs({})["segment.bytes"] == "4096"
    assert config.effective_topic_configs({"segment.bytes": "999"})["segment.bytes"] == "999"
    assert config.get("auto.create.topics.enable") is False


def test_retention_hours_and_minutes_apply_only_without_ms():
    assert BrokerConfig({"log.retention.hours": 2}).topic_default("retention.ms") == str(2 * 3_600_000)
    assert BrokerConfig({"log.retention.minutes": 3, "log.retention.hours": 2}).topic_default(
        "retention.ms") == str(3 * 60_000)
    assert BrokerConfig({"log.retention.ms": 5, "log.retention.hours": 2}).topic_default("retention.ms") == "5"
    assert BrokerConfig({"log.retention.hours": -1}).topic_default("retention.ms") == "-1"
    assert BrokerConfig({}).topic_default("retention.ms") == "604800000"


def test_unknown_broker_config_names_the_key():
    with pytest.raises(ConfigError, match="unknown config 'log.segment.byte'"):
        BrokerConfig({"log.segment.byte": 1})


def test_bad_value_names_key_and_value():
    with pytest.raises(ConfigError, match="invalid value 'lots' for config 'num.partitions'"):
        BrokerConfig({"num.partitions": "lots"})
    with pytest.raises(ConfigError, match="accepted values: CreateTime, LogAppendTime"):
        validate_topic_configs({"message.timestamp.type": "Whenever"})
    with pytest.raises(ConfigError, match="cleanup.policy"):
        validate_topic_configs({"cleanup.policy": "shred"})


def test_cleanup_policy_accepts_both_orders():
    assert validate_topic_configs({"cleanup.policy": "delete,compact"})
