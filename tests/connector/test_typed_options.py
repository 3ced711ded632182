"""Typed-column options and plumbing without Spark: option errors name the option, the registry client's
failover, auth and errors, and the column decoder's FAILFAST / PERMISSIVE handling of bad records."""
from __future__ import annotations

import json
import struct

import pytest

from connector.errors import PylogOptionError
from connector.options import parse_sink_options, parse_source_options
from connector.typed.columns import ColumnDecoder, MalformedRecordError, StringDecoder
from connector.typed.registry_client import RegistryClient, RegistryConfig, RegistryError

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "events"}
EVENT = json.dumps({"type": "record", "name": "Event", "fields": [{"name": "id", "type": "long"}]})


@pytest.mark.parametrize("options, message", [
    ({"valueFormat": "parquet"}, "Option 'valueFormat' must be one of binary, string, json, avro, protobuf, "
                                 "got 'parquet'"),
    ({"keyFormat": "avro", "keySchemaVersion": "0"}, "Option 'keySchemaVersion' must be 'latest' or a version"),
    ({"valueSubject": "x"}, "Option 'valueSubject' needs 'valueFormat' to be avro, protobuf or json"),
    ({"valueFormat": "avro", "valueMessageName": "A"}, "Option 'valueMessageName' applies to valueFormat=protobuf"),
    ({"mode": "DROPMALFORMED"}, "Option 'mode' must be one of FAILFAST, PERMISSIVE, got 'DROPMALFORMED'"),
    ({"schema.registry.url": "registry:8081"}, "must be http:// or https:// URLs, got 'registry:8081'"),
    ({"schema.registry.url": "http://r", "schema.registry.basic.auth.user.info": "nocolon"},
     "must be <username>:<password>"),
    ({"schema.registry.url": "http://r", "schema.registry.basic.auth.credentials.source": "SASL_INHERIT"},
     "SASL_INHERIT but no SASL username"),
    ({"schema.registry.url": "http://r", "schema.registry.timeout.ms": "-1"},
     "'schema.registry.timeout.ms' must be a positive number"),
])
def test_bad_typed_source_options_name_the_option(options, message):
    with pytest.raises(PylogOptionError) as failure:
        parse_source_options({**BASE, **options})
    assert message in str(failure.value)


def test_the_default_subject_needs_one_topic_and_a_schema_source():
    with pytest.raises(PylogOptionError, match="needs the option 'schema.registry.url' or an inline 'valueSchema'"):
        parse_source_options({**BASE, "valueFormat": "avro"}).resolve_typed()
    options = parse_source_options({**BASE, "subscribe": "a,b", "valueFormat": "avro",
                                    "schema.registry.url": "http://127.0.0.1:9"})
    with pytest.raises(PylogOptionError, match="Option 'valueSubject' is required.*exactly one topic"):
        options.resolve_typed()


def test_inline_schema_without_registry_is_bare_and_typed():
    options = parse_source_options({**BASE, "valueFormat": "avro", "valueSchema": EVENT, "mode": "permissive"})
    resolved = options.resolve_typed().value_typed
    assert resolved.framed is False and resolved.spark_type().simpleString() == "struct<id:bigint>"
    assert options.permissive


def test_sink_refuses_auto_register_together_with_use_latest_version():
    with pytest.raises(PylogOptionError, match="cannot both be true"):
        parse_sink_options({**BASE, "topic": "t", "auto.register.schemas": "true", "use.latest.version": "true"})
    options = parse_sink_options({**BASE, "topic": "t", "use.latest.version": "true"})
    assert options.use_latest and not options.auto_register


def test_sasl_inherit_takes_the_kafka_login():
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";'
    options = parse_source_options({**BASE, "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "PLAIN",
                                    "kafka.sasl.jaas.config": jaas, "schema.registry.url": "https://r",
                                    "schema.registry.basic.auth.credentials.source": "SASL_INHERIT"})
    assert options.registry.user_info == "u:p"


# -- the registry client, against the broker's registry -----------------------------------------------------------

def test_registry_client_fails_over_and_reports_404_and_refused_urls(pylog_broker):
    url = pylog_broker.schema_registry_url
    client = RegistryClient(RegistryConfig(("http://127.0.0.1:9", url)))   # the first refuses connections
    schema_id = client.register("events-value", "AVRO", EVENT)
    assert client.schema(schema_id).text == client.version("events-value").text
    assert client.lookup("events-value", "AVRO", EVENT) == schema_id
    with pytest.raises(RegistryError) as failure:
        client.schema(987654)
    assert failure.value.status == 404 and failure.value.code == 40403
    with pytest.raises(RegistryError, match="127.0.0.1:9.*unreachable"):
        RegistryClient(RegistryConfig(("http://127.0.0.1:9",), timeout_ms=2000)).schema(1)


def test_user_info_in_the_url_is_sent_as_basic_auth(pylog_secured_broker):
    from urllib.parse import urlsplit
    secured = pylog_secured_broker
    parts = urlsplit(secured.schema_registry_url)
    config = secured.schema_registry()
    user, password = config["basic.auth.user.info"].split(":", 1)
    with_user = f"{parts.scheme}://{user}:{password}@{parts.netloc}"
    client = RegistryClient(RegistryConfig((with_user,), ca_location=secured.ca_file))
    assert client.register("url-auth-value", "AVRO", EVENT) > 0
    wrong = RegistryClient(RegistryConfig((f"{parts.scheme}://{user}:wrong@{parts.netloc}",),
                                          ca_location=secured.ca_file))
    with pytest.raises(RegistryError) as failure:
        wrong.schema(1)
    assert failure.value.status == 401


# -- bad records --------------------------------------------------------------------------------------------------

def _decoder(permissive: bool):
    options = parse_source_options({**BASE, "valueFormat": "avro", "valueSchema": EVENT,
                                    "mode": "PERMISSIVE" if permissive else "FAILFAST"}).resolve_typed()
    return ColumnDecoder(options.value_typed, permissive)


def _where(i: int) -> str:
    return f"topic events partition 0 offset {100 + i}"


def test_failfast_names_the_record_and_permissive_keeps_its_bytes():
    good, bad = b"\x02", b"\x02\x00"   # id 1; the same with a trailing byte
    with pytest.raises(MalformedRecordError, match="Malformed value at topic events partition 0 offset 101"):
        _decoder(False).decode([good, bad, None], _where)
    arrays = _decoder(True).decode([good, bad, None], _where)
    assert arrays["value"].to_pylist() == [{"id": 1}, None, None]
    assert arrays["_corrupt_value"].to_pylist() == [None, bad, None]
    assert "valueSchemaId" not in arrays   # bare records carry no id


def test_string_format_treats_invalid_utf8_as_a_bad_record():
    with pytest.raises(MalformedRecordError, match="offset 100: not UTF-8"):
        StringDecoder("key", False).decode([b"\xff", b"ok"], _where)
    arrays = StringDecoder("key", True).decode([b"\xff", b"ok", None], _where)
    assert arrays["key"].to_pylist() == [None, "ok", None]
    assert arrays["_corrupt_key"].to_pylist() == [b"\xff", None, None]


def test_framed_records_of_two_ids_and_an_unknown_id(pylog_broker):
    url = pylog_broker.schema_registry_url
    v2 = json.dumps({"type": "record", "name": "Event", "fields": [
        {"name": "id", "type": "long"}, {"name": "src", "type": "string", "default": "web"}]})
    client = RegistryClient(RegistryConfig((url,)))
    v1_id, v2_id = client.register("mixed-value", "AVRO", EVENT), client.register("mixed-value", "AVRO", v2)
    options = parse_source_options({**BASE, "subscribe": "mixed", "valueFormat": "avro", "mode": "PERMISSIVE",
                                    "schema.registry.url": url}).resolve_typed()
    decoder = ColumnDecoder(options.value_typed, True)
    frame = struct.Struct(">bI")
    unknown = frame.pack(0, 987654) + b"\x02"
    arrays = decoder.decode([frame.pack(0, v1_id) + b"\x04", frame.pack(0, v2_id) + b"\x06\x02x", unknown], _where)
    assert arrays["value"].to_pylist() == [{"id": 2, "src": "web"}, {"id": 3, "src": "x"}, None]
    assert arrays["valueSchemaId"].to_pylist() == [v1_id, v2_id, 987654]
    assert arrays["_corrupt_value"].to_pylist() == [None, None, unknown]


def test_a_bulk_decode_of_a_batch_of_two_schema_ids_reads_each_row_with_its_own_writer(pylog_broker):
    """Once both ids' decoders exist, a batch starting with id 1 goes to id 1's compiled column decoder: a row of
    id 2 in it must be read with id 2's writer schema (the compiled path refuses another header and the batch
    goes record by record), not with id 1's. The two writers list the same two longs in opposite orders, so
    either reading succeeds and only the values tell them apart."""
    from connector.typed import avro_arrow
    url = pylog_broker.schema_registry_url
    ab = json.dumps({"type": "record", "name": "Pair", "fields": [{"name": "a", "type": "long"},
                                                                  {"name": "b", "type": "long"}]})
    ba = json.dumps({"type": "record", "name": "Pair", "fields": [{"name": "b", "type": "long"},
                                                                  {"name": "a", "type": "long"}]})
    client = RegistryClient(RegistryConfig((url,)))
    ab_id, ba_id = client.register("pairs-value", "AVRO", ab), client.register("pairs-value", "AVRO", ba)
    options = parse_source_options({**BASE, "subscribe": "pairs", "valueFormat": "avro",
                                    "schema.registry.url": url}).resolve_typed()
    decoder = ColumnDecoder(options.value_typed, False)
    frame = struct.Struct(">bI")
    ab_row = frame.pack(0, ab_id) + b"\x02\x04"        # a=1, b=2
    ba_row = frame.pack(0, ba_id) + b"\x14\x28"        # b=10, a=20
    # one uniform batch of each id first: both ids' decoders (and compiled decoders) are built
    assert decoder.decode([ab_row], _where)["value"].to_pylist() == [{"b": 2, "a": 1}]
    assert decoder.decode([ba_row], _where)["value"].to_pylist() == [{"b": 10, "a": 20}]
    if avro_arrow.available():
        assert decoder._bulk[ab_id] is not None and decoder._bulk[ba_id] is not None   # the bulk path is taken
    arrays = decoder.decode([ab_row, ba_row, ab_row, ba_row], _where)
    assert arrays["value"].to_pylist() == [{"b": 2, "a": 1}, {"b": 10, "a": 20}] * 2
    assert arrays["valueSchemaId"].to_pylist() == [ab_id, ba_id] * 2
    arrays = decoder.decode([ba_row, ab_row], _where)
    assert arrays["value"].to_pylist() == [{"b": 10, "a": 20}, {"b": 2, "a": 1}]


def test_a_typed_sink_writing_a_topic_column_must_name_its_subject():
    from pyspark.sql.types import LongType, StringType, StructField, StructType
    schema = StructType([StructField("topic", StringType()),
                         StructField("value", StructType([StructField("id", LongType())]))])
    options = parse_sink_options({"kafka.bootstrap.servers": "127.0.0.1:9092", "valueFormat": "avro",
                                  "schema.registry.url": "http://127.0.0.1:9"})
    with pytest.raises(PylogOptionError, match="Option 'valueSubject' is required.*not a topic column"):
        options.resolve_typed(schema)


def test_registering_the_same_schema_again_asks_the_registry_once(pylog_broker):
    client = RegistryClient(RegistryConfig((pylog_broker.schema_registry_url,)))
    first = client.register("once-value", "AVRO", EVENT)
    client.config = RegistryConfig(("http://127.0.0.1:9",))   # unreachable from now on
    assert client.register("once-value", "AVRO", EVENT) == first
