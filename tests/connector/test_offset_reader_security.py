"""The driver's offset lookups do not retry what retrying cannot mend: wrong security settings or a missing
ACL fail the first attempt (fetchOffset.numRetries is for brokers that come back, not for settings)."""
from __future__ import annotations

import logging
import time

import pytest

from connector.errors import PylogAuthorizationError
from connector.options import parse_source_options
from connector.source.offset_reader import OffsetReader
from connector.wire import SecurityMisconfigured


def _reader(options: dict) -> OffsetReader:
    return OffsetReader(parse_source_options({**options, "subscribe": "guarded", "fetchOffset.numRetries": "3",
                                              "fetchOffset.retryIntervalMs": "10000"}))


@pytest.fixture
def secured(pylog_secured_broker):
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(**pylog_secured_broker.kafka_python())
    admin.create_topics([NewTopic("guarded", 1, 1)])
    admin.close()
    pylog_secured_broker.add_user("nobody", "nobody-pw")
    return pylog_secured_broker


@pytest.mark.parametrize("mistake", ["wrong password", "no ACL"])
def test_a_security_mistake_fails_the_first_offset_lookup(secured, caplog, mistake):
    options = secured.spark_options("nobody", "not-the-password" if mistake == "wrong password" else "nobody-pw")
    reader = _reader(options)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="connector.source.offset_reader"):
        with pytest.raises((SecurityMisconfigured, PylogAuthorizationError)) as raised:
            reader.latest(reader.partitions())   # as the stream reader plans a batch
    reader.close()
    elapsed = time.monotonic() - started
    assert elapsed < 10, f"{elapsed:.1f} s: the lookup was retried after {raised.value!r}"
    assert not [r for r in caplog.records if "Error in attempt" in r.getMessage()]
    assert ("nobody" in str(raised.value))
