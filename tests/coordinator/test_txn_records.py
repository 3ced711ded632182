"""__transaction_state record formats (Kafka's TransactionLogKey / TransactionLogValue)."""
from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from broker_sim.coordinator.records import build_batch, iter_records
from broker_sim.coordinator.txn.records import (
    StoredTxn, decode_key, decode_value, encode_key, encode_value, record_to_json,
)
from broker_sim.coordinator.txn.state import COMPLETE_COMMIT, EMPTY, ONGOING, TxnState

TXN = StoredTxn(producer_id=5, producer_epoch=3, timeout_ms=60_000, state=ONGOING,
                partitions=frozenset({("a", 0), ("a", 2), ("b", 1)}), last_update_ms=10, start_ms=9)


def test_key_is_version_0_and_the_transactional_id():
    assert encode_key("tx") == struct.pack(">hh2s", 0, 2, b"tx")
    assert decode_key(encode_key("tx-é")) == "tx-é"


def test_unknown_key_versions_are_refused():
    with pytest.raises(ValueError, match="key version 3"):
        decode_key(struct.pack(">hh2s", 3, 2, b"tx"))


def test_value_v0_layout_is_kafkas():
    expected = (struct.pack(">hqhib", 0, 5, 3, 60_000, 1)
                + struct.pack(">i", 2)  # two topics
                + struct.pack(">h1si", 1, b"a", 2) + struct.pack(">ii", 0, 2)
                + struct.pack(">h1si", 1, b"b", 1) + struct.pack(">i", 1)
                + struct.pack(">qq", 10, 9))
    assert encode_value(TXN) == expected


@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize("state", list(TxnState))
def test_values_round_trip_in_both_versions(version, state):
    txn = StoredTxn(7, 0, 1000, state, frozenset() if state is EMPTY else TXN.partitions, 1, -1)
    assert decode_value(encode_value(txn, version)) == txn


def test_an_unknown_status_is_refused():
    data = bytearray(encode_value(TXN))
    data[2 + 8 + 2 + 4] = 42
    with pytest.raises(ValueError, match="status 42"):
        decode_value(bytes(data))


def test_records_replay_from_a_batch_and_render_as_json():
    records = [(encode_key("tx"), encode_value(TXN)),
               (encode_key("tx"), encode_value(StoredTxn(5, 3, 60_000, COMPLETE_COMMIT, frozenset(), 11, 9))),
               (encode_key("gone"), None)]
    replayed = [(decode_key(k), v and decode_value(v)) for _, k, v in iter_records(build_batch(records, 1))]
    assert [t for t, _ in replayed] == ["tx", "tx", "gone"]
    assert replayed[1][1].state is COMPLETE_COMMIT and replayed[2][1] is None
    doc = record_to_json(*records[0])
    assert doc == {"key": {"version": 0, "transactional_id": "tx"},
                   "value": {"version": 0, "producer_id": 5, "producer_epoch": 3, "timeout_ms": 60_000,
                             "state": "Ongoing", "partitions": [{"topic": "a", "partition": 0},
                                                                {"topic": "a", "partition": 2},
                                                                {"topic": "b", "partition": 1}],
                             "last_update_ms": 10, "start_ms": 9}}
    assert record_to_json(*records[2])["value"] is None


def test_records_match_the_documented_format():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((Path(__file__).parents[2] / "broker_sim" / "schemas" / "transaction-state.json").read_text())
    for txn in (TXN, StoredTxn(5, 4, 60_000, EMPTY, frozenset(), 10, -1)):
        jsonschema.validate(record_to_json(encode_key("tx"), encode_value(txn)), schema)
    jsonschema.validate(record_to_json(encode_key("tx"), None), schema)
    doc = record_to_json(encode_key("tx"), encode_value(TXN))
    doc["value"]["state"] = "Sleeping"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, schema)
