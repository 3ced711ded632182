"""The sink log's records match connector/schemas/sink-log.json, read from the installed package's data."""
from __future__ import annotations

import importlib.resources
import json

import pytest

from connector.options import parse_sink_options
from connector.sink.sink_log import COMPLETED, INTENT, SinkLog, Txn


def test_batch_and_open_entries_match_the_packaged_schema(monkeypatch):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((importlib.resources.files("connector") / "schemas" / "sink-log.json").read_text())
    written = []
    monkeypatch.setattr(SinkLog, "_append", lambda self, entries: written.extend(entries))
    options = parse_sink_options({"kafka.bootstrap.servers": "127.0.0.1:9092", "topic": "clean", "sinkId": "s"})
    log = SinkLog(None, options, "query")
    txn = Txn(3, 1, "s-7-3-abcd.1", 4000, 2, {"clean-0": 10})
    log.put_open(7, Txn(3, 1, "s-7-3-abcd.1", 4000, 2))
    log.put_batch(7, INTENT, [txn])
    log.put_batch(7, COMPLETED, [txn])
    log.put_aborted(8)
    assert [key for key, _ in written] == ["s/query/open/s-7-3-abcd.1", f"s/query/batch/{7:020d}",
                                           f"s/query/batch/{7:020d}", f"s/query/abort/{8:020d}"]
    for _, value in written:
        jsonschema.validate(value, schema)
