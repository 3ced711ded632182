"""A pass-through Avro query keeps registering compatible output schemas when its upstream evolves, without Spark:
the source's Spark type carries each field's default, doc and aliases in its metadata, the sink's derived schema
writes them back (and makes nullable fields ``["null", T]`` with default null, as Confluent's AvroData does), and
the registry's BACKWARD check accepts it. A refusal (409) names the field added without a default and the option
that sets the output schema; a subject that is not there is named with the ``valueSubject`` option and the
subjects that are."""
from __future__ import annotations

import json
import time

import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType

from connector.errors import PylogOptionError
from connector.options import parse_sink_options, parse_source_options
from connector.typed.registry_client import RegistryClient, RegistryConfig

V1 = {"type": "record", "name": "Reading", "namespace": "com.acme", "fields": [{"name": "id", "type": "long"}]}
V2 = {**V1, "fields": [{"name": "id", "type": "long", "doc": "the sensor"},
                       {"name": "unit", "type": "string", "default": "C", "aliases": ["u"]},
                       {"name": "note", "type": ["null", "string"], "default": None}]}


def _source_type(url: str, topic: str):
    """The value column's Spark type a pylog source reading ``topic`` gets (the subject's latest version)."""
    options = parse_source_options({"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": topic,
                                    "valueFormat": "avro", "schema.registry.url": url}).resolve_typed()
    return options.value_typed.spark_type()


def _sink(url: str, topic: str, value_type, **more):
    """The sink's resolution of a DataFrame whose value column is ``value_type`` (what streamWriter does)."""
    options = parse_sink_options({"kafka.bootstrap.servers": "127.0.0.1:9", "topic": topic, "valueFormat": "avro",
                                  "schema.registry.url": url, **more})
    return options.resolve_typed(StructType([StructField("value", value_type)])).value_typed


def test_a_pass_through_query_registers_a_compatible_schema_after_its_upstream_adds_a_field_with_a_default(
        pylog_broker):
    url = pylog_broker.schema_registry_url
    client = RegistryClient(RegistryConfig((url,)))
    client.register("in-value", "AVRO", json.dumps(V1))
    first = _sink(url, "out", _source_type(url, "in"))
    client.register("in-value", "AVRO", json.dumps(V2))   # the upstream moves on; the query restarts
    restarted = _sink(url, "out", _source_type(url, "in"))
    assert restarted.schema_id != first.schema_id
    assert client.versions("out-value") == [1, 2]
    fields = {f["name"]: f for f in json.loads(client.version("out-value", 2).text)["fields"]}
    assert fields["unit"] == {"name": "unit", "type": "string", "default": "C", "aliases": ["u"]}
    assert fields["note"] == {"name": "note", "type": ["null", "string"], "default": None}
    assert fields["id"]["doc"] == "the sensor"


def test_a_nullable_column_added_to_the_dataframe_registers_as_optional_with_default_null(pylog_broker):
    url = pylog_broker.schema_registry_url
    _sink(url, "grow", StructType([StructField("id", LongType(), False)]))
    grown = StructType([StructField("id", LongType(), False), StructField("name", StringType(), True)])
    _sink(url, "grow", grown)
    latest = json.loads(RegistryClient(RegistryConfig((url,))).version("grow-value").text)
    assert latest["fields"][1] == {"name": "name", "type": ["null", "string"], "default": None}


def test_a_refused_schema_names_the_field_added_without_a_default_and_the_option_that_sets_the_schema(
        pylog_broker):
    url = pylog_broker.schema_registry_url
    _sink(url, "strict", StructType([StructField("id", LongType(), False)]))
    # built by hand: no metadata, so nothing says what 'unit' defaults to
    added = StructType([StructField("id", LongType(), False), StructField("unit", StringType(), False)])
    with pytest.raises(PylogOptionError) as failure:
        _sink(url, "strict", added)
    message = str(failure.value)
    assert "subject 'strict-value'" in message
    assert "field 'value.unit' is added without a default" in message
    assert "the option 'valueSchema'" in message and "use.latest.version=true" in message
    assert "409" in message


def test_a_missing_subject_names_the_subject_option_and_the_subjects_of_the_topic(pylog_broker):
    url = pylog_broker.schema_registry_url
    client = RegistryClient(RegistryConfig((url,)))
    client.register("events-key", "AVRO", json.dumps(V1))
    client.register("events.v1-value", "AVRO", json.dumps(V1))
    with pytest.raises(PylogOptionError) as failure:
        _source_type(url, "events")
    message = str(failure.value)
    assert "subject 'events-value' is not in the Schema Registry" in message
    assert "'valueSubject'" in message
    assert "events-key" in message and "events.v1-value" in message


def test_an_unreachable_registry_fails_the_sink_at_once_naming_the_url_option():
    started = time.monotonic()
    with pytest.raises(PylogOptionError) as failure:
        _sink("http://127.0.0.1:9", "out", StructType([StructField("id", LongType())]))
    assert time.monotonic() - started < 5
    assert "Option 'schema.registry.url'" in str(failure.value) and "http://127.0.0.1:9" in str(failure.value)
