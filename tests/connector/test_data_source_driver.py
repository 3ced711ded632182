"""PylogDataSource's driver-side hooks without a SparkSession: option warnings, save modes, the bootstrap budget."""
from __future__ import annotations

import logging
import socket
import time

import pytest
from pyspark.sql.types import StringType, StructField, StructType

from connector.datasource import PylogDataSource
from connector.options import PylogOptionError, parse_source_options
from connector.source.readers import source_schema
from connector.wire import BootstrapUnreachable, check_bootstrap

VALUE_ONLY = StructType([StructField("value", StringType())])


def _closed_port() -> int:
    """A port nothing listens on (bound, then released), so connecting to it is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_misspelled_source_option_is_warned_about_once_naming_the_closest_option(caplog):
    options = {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t", "startingOffset": "earliest",
               "checkpointLocation": "/tmp/c"}
    with caplog.at_level(logging.WARNING, logger="connector.options"):
        PylogDataSource(options).streamReader(source_schema())
        PylogDataSource(options).streamReader(source_schema())
    warnings = [r.getMessage() for r in caplog.records]
    assert warnings == ["pylog source: unknown option 'startingOffset' is ignored; did you mean 'startingOffsets'?"]


def test_a_misspelled_sink_option_is_warned_about(caplog, monkeypatch):
    monkeypatch.setattr("connector.datasource.prepare_sink", lambda schema, options, checkpoint=None: schema)
    options = {"kafka.bootstrap.servers": "127.0.0.1:9", "topic": "t", "deliveryGuarentee": "at_least_once"}
    with caplog.at_level(logging.WARNING, logger="connector.options"):
        PylogDataSource(options).streamWriter(VALUE_ONLY, False)
    assert [r.getMessage() for r in caplog.records] == [
        "pylog sink: unknown option 'deliveryGuarentee' is ignored; did you mean 'deliveryGuarantee'?"]


def test_batch_overwrite_is_refused_naming_append():
    source = PylogDataSource({"kafka.bootstrap.servers": "127.0.0.1:9", "topic": "t"})
    with pytest.raises(PylogOptionError, match=r'does not support save mode Overwrite.*mode\("append"\)'):
        source.writer(VALUE_ONLY, True)


def test_a_refused_bootstrap_address_fails_fast_naming_the_option_address_and_cause():
    address = f"127.0.0.1:{_closed_port()}"
    started = time.monotonic()
    with pytest.raises(BootstrapUnreachable) as raised:
        check_bootstrap(address, 500)
    assert f"kafka.bootstrap.servers={address} within bootstrapTimeoutMs=500" in str(raised.value)
    assert "Connection refused" in str(raised.value)
    assert time.monotonic() - started < 30


def test_the_source_driver_gives_up_on_a_refused_address_within_its_budget_not_fetch_offset_retries():
    from connector.source.offset_reader import OffsetReader
    address = f"127.0.0.1:{_closed_port()}"
    reader = OffsetReader(parse_source_options({"kafka.bootstrap.servers": address, "subscribe": "t",
                                                "bootstrapTimeoutMs": "1000"}).for_batch())
    started = time.monotonic()
    with pytest.raises(BootstrapUnreachable, match="Connection refused"):
        reader.partitions()
    # Before the budget the admin client's retries took fetchOffset.numRetries x 60 s (183 s).
    assert time.monotonic() - started < 60


def test_the_sink_driver_gives_up_on_a_refused_address_within_its_budget():
    address = f"127.0.0.1:{_closed_port()}"
    source = PylogDataSource({"kafka.bootstrap.servers": address, "topic": "t", "bootstrapTimeoutMs": "1000"})
    started = time.monotonic()
    with pytest.raises(BootstrapUnreachable, match=f"kafka.bootstrap.servers={address}"):
        source.streamWriter(VALUE_ONLY, False)
    assert time.monotonic() - started < 60
