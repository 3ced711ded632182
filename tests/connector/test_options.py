"""Option parsing without Spark: kafka.* mapping, defaults by mode, the default consumer group."""
from __future__ import annotations

import pickle

import pytest

from connector.options import (
    SINK_OPTION_NAMES,
    SOURCE_OPTION_NAMES,
    OffsetBound,
    PylogOptionError,
    parse_source_options,
    unknown_options,
)

BASE = {"kafka.bootstrap.servers": "h:1", "subscribe": "a,b"}


def test_options_are_case_insensitive_typed_frozen_and_picklable():
    options = parse_source_options({**BASE, "MAXOFFSETSPERTRIGGER": "10", "failOnDataLoss": "FALSE",
                                    "maxTriggerDelay": "30s"})
    assert (options.topics, options.max_offsets_per_trigger, options.fail_on_data_loss) == (("a", "b"), 10, False)
    assert options.max_trigger_delay_ms == 30_000
    assert pickle.loads(pickle.dumps(options)) == options
    with pytest.raises(AttributeError):
        options.topics = ("c",)


def test_kafka_options_become_kafka_python_keyword_arguments():
    options = parse_source_options({**BASE, "kafka.security.protocol": "ssl", "kafka.fetch.max.bytes": "1000",
                                    "kafka.max.partition.fetch.bytes": "500", "kafka.request.timeout.ms": "9000",
                                    "kafka.client.id": "me", "kafka.ssl.truststore.location": "/ca.pem",
                                    "kafka.ssl.endpoint.identification.algorithm": ""})
    assert options.client_kwargs == {"security_protocol": "SSL", "fetch_max_bytes": 1000,
                                     "max_partition_fetch_bytes": 500, "request_timeout_ms": 9000,
                                     "client_id": "me", "ssl_cafile": "/ca.pem", "ssl_check_hostname": False}


def test_mode_defaults_follow_spark():
    options = parse_source_options(BASE)
    assert options.for_stream().starting == OffsetBound("latest")
    batch = options.for_batch()
    assert (batch.starting, batch.ending) == (OffsetBound("earliest"), OffsetBound("latest"))


def test_timestamp_options_win_over_offsets():
    options = parse_source_options({**BASE, "startingOffsets": "earliest", "startingTimestamp": "5",
                                    "startingOffsetsByTimestamp": '{"a": {"0": 7}}'})
    assert options.starting == OffsetBound("timestamp", timestamp=5)


def test_default_group_is_stable_per_subscription_and_kafka_group_id_overrides_it():
    first = parse_source_options(BASE).group_id
    assert first == parse_source_options({**BASE, "subscribe": "b, a"}).group_id
    assert first.startswith("pylog-") and first != parse_source_options({**BASE, "subscribe": "c"}).group_id
    assert parse_source_options({**BASE, "kafka.group.id": "legacy"}).group_id == "legacy"
    assert parse_source_options({**BASE, "kafka.group.id": "legacy", "groupId": "mine"}).group_id == "mine"


def test_errors_are_value_errors_naming_the_option():
    with pytest.raises(PylogOptionError, match="Option 'groupFallback' must be one of earliest, latest, error"):
        parse_source_options({**BASE, "groupFallback": "skip"})


def test_default_group_stem_takes_group_id_prefix_and_only_explicit_groups_count_as_set():
    assert parse_source_options({**BASE, "groupIdPrefix": "etl"}).group_id.startswith("etl-")
    assert not parse_source_options(BASE).group_id_set
    assert parse_source_options({**BASE, "groupId": "mine"}).group_id_set
    assert parse_source_options({**BASE, "kafka.group.id": "legacy"}).group_id_set


def test_starting_offsets_group_needs_an_explicit_group_id_in_streams():
    with pytest.raises(PylogOptionError, match="startingOffsets=group needs the option 'groupId'"):
        parse_source_options({**BASE, "startingOffsets": "group"}).for_stream()
    chosen = parse_source_options({**BASE, "startingOffsets": "group", "groupId": "g"}).for_stream()
    assert chosen.starting == OffsetBound("group")


def test_bootstrap_timeout_is_a_positive_number_of_milliseconds():
    assert parse_source_options(BASE).bootstrap_timeout_ms == 10_000
    assert parse_source_options({**BASE, "bootstrapTimeoutMs": "2500"}).bootstrap_timeout_ms == 2500
    with pytest.raises(PylogOptionError, match="Option 'bootstrapTimeoutMs' must be a positive integer, got 'soon'"):
        parse_source_options({**BASE, "bootstrapTimeoutMs": "soon"})


def test_unknown_options_are_named_with_the_closest_known_one():
    found = unknown_options({**BASE, "startingOffset": "earliest", "maxOffsetPerTrigger": "5", "zzz": "1",
                             "checkpointLocation": "/c", "kafka.whatever": "1"}, SOURCE_OPTION_NAMES)
    assert found == [("maxOffsetPerTrigger", "maxOffsetsPerTrigger"), ("startingOffset", "startingOffsets"),
                     ("zzz", None)]
    assert unknown_options({"kafka.bootstrap.servers": "h:1", "topics": "t"}, SINK_OPTION_NAMES) == \
        [("topics", "topic")]


def test_sasl_options_take_kafkas_jaas_string():
    """Spark users pass Kafka's JAAS string; username and password come out of it (quotes escaped)."""
    options = parse_source_options({**BASE, "kafka.security.protocol": "sasl_ssl",
                                    "kafka.sasl.mechanism": "scram-sha-512",
                                    "kafka.ssl.ca.location": "/ca.pem", "kafka.sasl.jaas.config":
                                    'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                    'username="alice" password="p\\"w";'})
    assert options.client_kwargs == {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
                                     "ssl_cafile": "/ca.pem", "sasl_plain_username": "alice",
                                     "sasl_plain_password": 'p"w'}
