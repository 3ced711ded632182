"""Records of the ``__transaction_state`` topic, in Kafka's own format.

Theory of operation: the transaction coordinator's durable state is a log of
key/value records in the internal compacted topic ``__transaction_state``:
one key per transactional id, the last value wins, a null value (tombstone)
removes the id.  Key and value are Kafka's ``TransactionLogKey`` and
``TransactionLogValue`` (apache/kafka transaction-coordinator message JSONs,
built at the first record encoded or decoded: ``MESSAGES``), so Kafka's tools
can read a pylog broker's topic; each starts with an int16 version.  Values
are written in version 0 (what Kafka writes for clients that
do not use transaction version 2) and read in versions 0 and 1 (flexible, with
tagged fields).  The layout is described in ``schemas/transaction-state.json``.

A transactional id's records all go to partition ``partition_for(txn_id)``
(``coordinator.internal_topic``), Kafka's ``abs(transactionalId.hashCode) %
partitions``, as a group's do.
"""
from __future__ import annotations

from dataclasses import dataclass

from broker_sim.coordinator.records import VERSION, LazyMessages, decode_body, message, record_version
from broker_sim.coordinator.txn.state import BY_STATUS, STATUS, TxnState

TRANSACTION_STATE_TOPIC = "__transaction_state"
KEY_VERSION = 0
VALUE_VERSION = 0

def _define() -> dict[str, type]:
    """The message classes (kafka-python's schema codec loads with them)."""
    TransactionLogKey = message("TransactionLogKey", "0", "none", [
        {"name": "transactionalId", "type": "string", "versions": "0"},
    ])
    TransactionLogValue = message("TransactionLogValue", "0-1", "1+", [
        {"name": "producerId", "type": "int64", "versions": "0+"},
        {"name": "previousProducerId", "type": "int64", "versions": "1+", "taggedVersions": "1+", "tag": 0,
         "default": -1},
        {"name": "nextProducerId", "type": "int64", "versions": "1+", "taggedVersions": "1+", "tag": 1,
         "default": -1},
        {"name": "producerEpoch", "type": "int16", "versions": "0+"},
        {"name": "transactionTimeoutMs", "type": "int32", "versions": "0+"},
        {"name": "transactionStatus", "type": "int8", "versions": "0+"},
        {"name": "transactionPartitions", "type": "[]PartitionsSchema", "versions": "0+", "nullableVersions": "0+",
         "fields": [
             {"name": "topic", "type": "string", "versions": "0+"},
             {"name": "partitionIds", "type": "[]int32", "versions": "0+"},
         ]},
        {"name": "transactionLastUpdateTimestampMs", "type": "int64", "versions": "0+"},
        {"name": "transactionStartTimestampMs", "type": "int64", "versions": "0+"},
        {"name": "clientTransactionVersion", "type": "int16", "versions": "1+", "taggedVersions": "1+", "tag": 2,
         "default": 0},
    ])
    return {"TransactionLogKey": TransactionLogKey, "TransactionLogValue": TransactionLogValue,
            "PartitionsRecord": TransactionLogValue.PartitionsSchema}


# built at the first record encoded or decoded (coordinator.records.LazyMessages)
MESSAGES = LazyMessages(("TransactionLogKey", "TransactionLogValue", "PartitionsRecord"), _define)


def __getattr__(name: str) -> type:
    return MESSAGES.lookup(__name__, name)


@dataclass(frozen=True)
class StoredTxn:
    """A transactional id's state as ``TransactionLogValue`` keeps it."""

    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[tuple[str, int]]
    last_update_ms: int
    start_ms: int
    previous_producer_id: int = -1


def encode_key(transactional_id: str) -> bytes:
    key = MESSAGES.TransactionLogKey(transactional_id=transactional_id)
    return VERSION.pack(KEY_VERSION) + key._struct.encode(key, version=KEY_VERSION, compact=False, tagged=False)


def decode_key(data: bytes | None) -> str:
    """The transactional id of a key; raises ValueError for a key version this broker does not know or bytes
    that are not a key."""
    version = record_version(data, "__transaction_state key")
    if version != KEY_VERSION:
        raise ValueError(f"unknown __transaction_state key version {version}")
    key = decode_body(MESSAGES.TransactionLogKey, data, 0, False)
    if key.transactional_id is None:
        raise ValueError("__transaction_state key with a null transactional id")
    return key.transactional_id


def encode_value(txn: StoredTxn, version: int = VALUE_VERSION) -> bytes:
    topics: dict[str, list[int]] = {}
    for topic, partition in sorted(txn.partitions):
        topics.setdefault(topic, []).append(partition)
    value = MESSAGES.TransactionLogValue(
        producer_id=txn.producer_id, previous_producer_id=txn.previous_producer_id, next_producer_id=-1,
        producer_epoch=txn.producer_epoch, transaction_timeout_ms=txn.timeout_ms,
        transaction_status=STATUS[txn.state],
        transaction_partitions=[MESSAGES.PartitionsRecord(topic=t, partition_ids=ps) for t, ps in topics.items()],
        transaction_last_update_timestamp_ms=txn.last_update_ms, transaction_start_timestamp_ms=txn.start_ms,
        client_transaction_version=0)
    flexible = version >= 1
    return VERSION.pack(version) + value._struct.encode(value, version=version, compact=flexible, tagged=flexible)


def decode_value(data: bytes) -> StoredTxn:
    """Raises ValueError for an unknown transaction status or bytes that are not a TransactionLogValue."""
    # newer: read with the newest known layout
    version = min(record_version(data, "TransactionLogValue"), MESSAGES.TransactionLogValue._struct.max_version)
    flexible = version >= 1
    value = decode_body(MESSAGES.TransactionLogValue, data, version, flexible)
    state = BY_STATUS.get(value.transaction_status)
    if state is None:
        raise ValueError(f"unknown transaction status {value.transaction_status}")
    if any(p.topic is None or p.partition_ids is None for p in value.transaction_partitions or ()):
        raise ValueError("TransactionLogValue with a null topic or partition list")
    partitions = frozenset((p.topic, i) for p in value.transaction_partitions or () for i in p.partition_ids)
    previous = value.previous_producer_id if flexible and value.previous_producer_id is not None else -1
    return StoredTxn(value.producer_id, value.producer_epoch, value.transaction_timeout_ms, state, partitions,
                     value.transaction_last_update_timestamp_ms, value.transaction_start_timestamp_ms, previous)


def record_to_json(key: bytes, value: bytes | None) -> dict:
    """A record as the JSON document ``schemas/transaction-state.json`` describes."""
    doc_value = None
    if value is not None:
        txn = decode_value(value)
        doc_value = {"version": VERSION.unpack_from(value)[0], "producer_id": txn.producer_id,
                     "producer_epoch": txn.producer_epoch, "timeout_ms": txn.timeout_ms, "state": str(txn.state),
                     "partitions": [{"topic": t, "partition": p} for t, p in sorted(txn.partitions)],
                     "last_update_ms": txn.last_update_ms, "start_ms": txn.start_ms}
    return {"key": {"version": VERSION.unpack_from(key)[0], "transactional_id": decode_key(key)},
            "value": doc_value}
