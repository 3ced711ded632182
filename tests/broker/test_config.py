"""Broker and topic configuration parsing, under Kafka's names."""
import dataclasses

import pytest

from broker_sim.config import TOPIC_CONFIGS, BrokerConfig, ConfigError, validate_topic_configs
from broker_sim.storage.log import LogConfig


def test_topic_defaults_come_from_broker_configs():
    config = BrokerConfig({"log.segment.bytes": 4194304, "auto.create.topics.enable": False})
    assert config.effective_topic_configs({})["segment.bytes"] == "4194304"
    assert config.effective_topic_configs({"segment.bytes": "2097152"})["segment.bytes"] == "2097152"
    assert config.get("auto.create.topics.enable") is False


def test_segment_bytes_minimum_is_kafka_4s_and_internal_segment_bytes_goes_below_it():
    for name in ("log.segment.bytes", "offsets.topic.segment.bytes", "transaction.state.log.segment.bytes"):
        with pytest.raises(ConfigError, match=f"invalid value '1048575' for config '{name}': must be >= 1048576"):
            BrokerConfig({name: 1048575})
    with pytest.raises(ConfigError, match="'segment.bytes'"):
        validate_topic_configs({"segment.bytes": "14"})
    assert validate_topic_configs({"internal.segment.bytes": "14"}) == {"internal.segment.bytes": "14"}
    config = BrokerConfig({"internal.log.segment.bytes": 2048})
    assert config.effective_topic_configs({})["internal.segment.bytes"] == "2048"
    assert BrokerConfig({}).effective_topic_configs({})["internal.segment.bytes"] == ""


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


def test_every_log_config_field_comes_from_one_topic_config_row_with_its_default():
    named = [row.field for row in TOPIC_CONFIGS.values() if row.field]
    assert sorted(named) == sorted(field.name for field in dataclasses.fields(LogConfig))
    defaults = LogConfig.from_topic_configs(BrokerConfig({}).effective_topic_configs({}))
    assert defaults == LogConfig()


def test_a_topic_config_and_its_broker_default_share_one_rule():
    """retention.bytes: pylog's minimum -1 at both levels (Kafka's LONG has none; -1 is what the broker kept)."""
    with pytest.raises(ConfigError, match="'log.retention.bytes': must be >= -1"):
        BrokerConfig({"log.retention.bytes": -2})
    with pytest.raises(ConfigError, match="'retention.bytes': must be >= -1"):
        validate_topic_configs({"retention.bytes": "-2"})
    with pytest.raises(ValueError, match="'retention.bytes': must be >= -1"):
        LogConfig.from_topic_configs({"retention.bytes": "-2"})
    assert LogConfig.from_topic_configs({"retention.bytes": "-1", "min.insync.replicas": "2",
                                         "compression.type": "zstd"}) == LogConfig(
        retention_bytes=-1, min_insync_replicas=2, compression_type="zstd")


def test_stored_topic_configs_an_older_pylog_accepted_never_stop_the_topic_from_opening(tmp_path, caplog):
    """pylog's number parsing is Java's now; values that older versions stored through Python's int() (1_000,
    full-width digits) are read as they were, with a WARNING, and an unreadable one falls back to the default
    with an ERROR: the broker restarts and serves the topic either way."""
    import json
    import logging

    from kafka import KafkaConsumer, KafkaProducer

    from broker_sim.server.broker import Broker

    with Broker(tmp_path, port=0, config={"num.partitions": 1}) as broker:
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
        producer.send("legacy", b"before").get(timeout=30)
        producer.close()
    topics_file = tmp_path / "pylog-topics.json"
    document = json.loads(topics_file.read_text())
    [topic] = [t for t in document["topics"] if t["name"] == "legacy"]
    topic["configs"] = {"retention.ms": "6_000_000", "max.message.bytes": "\uff12\uff10\uff10\uff10\uff10",
                        "segment.ms": "soon"}
    topics_file.write_text(json.dumps(document))
    with caplog.at_level(logging.WARNING, logger="broker_sim.config"):
        with Broker(tmp_path, port=0) as broker:
            config = broker.replicas.get("legacy", 0).log.config
            assert (config.retention_ms, config.max_message_bytes) == (6_000_000, 20_000)
            assert config.segment_ms == LogConfig().segment_ms
            producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
            producer.send("legacy", b"after").get(timeout=30)
            producer.close()
            consumer = KafkaConsumer("legacy", bootstrap_servers=broker.bootstrap_servers,
                                     auto_offset_reset="earliest", consumer_timeout_ms=10_000)
            assert [m.value for m in consumer][:2] == [b"before", b"after"]
            consumer.close()
    messages = [r.getMessage() for r in caplog.records]
    assert any("retention.ms='6_000_000' is read as '6000000'" in m for m in messages), messages
    assert any("segment.ms='soon' does not parse" in m for m in messages), messages
