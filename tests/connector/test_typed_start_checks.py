"""A typed sink refuses, on the driver before any task, a DataFrame column its format cannot encode: the error is a
PylogOptionError naming the column, its Spark type, the format and what the format encodes. Without Spark or a
registry: the refusal comes before the first registry request (the registry URL given is unreachable)."""
from __future__ import annotations

import json

import pytest
from pyspark.sql.types import (CalendarIntervalType, DateType, DayTimeIntervalType, DecimalType, LongType,
                               StringType, StructField, StructType, TimestampType)

from connector.errors import PylogOptionError
from connector.options import parse_sink_options


def _resolve(value_type, fmt: str, url: str = "http://127.0.0.1:9", **more):
    options = parse_sink_options({"kafka.bootstrap.servers": "127.0.0.1:9", "topic": f"out-{fmt}",
                                  "valueFormat": fmt,
                                  "schema.registry.url": url, **more})
    return options.resolve_typed(StructType([StructField("value", value_type)])).value_typed


def _struct(**fields):
    return StructType([StructField(name, data_type) for name, data_type in fields.items()])


@pytest.mark.parametrize("fmt, value_type, column, spark_type", [
    ("protobuf", _struct(id=LongType(), price=DecimalType(10, 2)), "value.price", "decimal(10,2)"),
    ("protobuf", _struct(inner=_struct(price=DecimalType(5, 1))), "value.inner.price", "decimal(5,1)"),
    ("avro", _struct(id=LongType(), span=CalendarIntervalType()), "value.span", "interval"),
    ("json", _struct(took=DayTimeIntervalType()), "value.took", "interval day to second"),
])
def test_a_column_the_format_cannot_encode_is_refused_naming_column_type_and_format(fmt, value_type, column,
                                                                                    spark_type):
    with pytest.raises(PylogOptionError) as failure:
        _resolve(value_type, fmt)
    message = str(failure.value)
    assert f"Column '{column}' is {spark_type}, which valueFormat={fmt} cannot encode" in message
    assert "encodes boolean" in message and "Type mapping" in message


def test_a_decimal_column_against_a_given_protobuf_schema_is_refused_before_any_task():
    schema = 'syntax = "proto3";\nmessage Price {\n  optional string price = 1;\n}\n'
    with pytest.raises(PylogOptionError) as failure:
        _resolve(_struct(price=DecimalType(10, 2)), "protobuf", valueSchema=schema, url="")
    assert "Column 'value.price' is decimal(10,2), which valueFormat=protobuf cannot encode" in str(failure.value)


def test_a_column_the_given_protobuf_schema_cannot_take_is_refused_naming_the_field():
    schema = 'syntax = "proto3";\nmessage Reading {\n  optional int64 at = 1;\n}\n'
    with pytest.raises(PylogOptionError) as failure:
        _resolve(_struct(at=StringType()), "protobuf", valueSchema=schema, url="")
    assert "Column 'value.at' cannot be written with valueFormat=protobuf" in str(failure.value)


def test_dates_timestamps_and_decimals_each_format_encodes_resolve(pylog_broker):
    url = pylog_broker.schema_registry_url
    _resolve(_struct(day=DateType(), at=TimestampType()), "protobuf", url)
    for fmt in ("avro", "json"):
        _resolve(_struct(day=DateType(), at=TimestampType(), price=DecimalType(10, 2)), fmt, url)
    derived = json.loads(_resolve(_struct(day=DateType()), "avro", url).schema_text)
    assert derived["fields"][0]["type"] == ["null", {"type": "int", "logicalType": "date"}]
