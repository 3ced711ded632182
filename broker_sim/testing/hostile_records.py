"""Crafted records that readers of another record definition than Kafka's would read differently (issue 44,
finding 1): the soak's attacks and the builders tests/hostile/test_record_definition.py and
tests/conformance/test_record_parsers.py send.

Theory of operation: Kafka's ``DefaultRecord.readFrom`` reads a record's attributes as ONE byte; a reader that
reads them as a varint (kafka-python's and aiokafka's record readers do) sees every later field one byte on
when that byte is 0x80 or more. :func:`shifted_record` is built so that both readings parse to the last byte:
Kafka's gives a 7-byte key and the value ``b"EVIL"``, the varint reading an empty key and a value framed with a
registered schema id (Confluent's wire format: 0, the id, then the Avro string "EVIL"). A broker or connector
reading it the second way would let it pass ``confluent.value.schema.validation`` while every Kafka consumer
reads b"EVIL". Varints past 5 bytes and a key length of 2**63-1 (a 10-byte varint) are what Kafka refuses
("Varint is too long"): INVALID_RECORD, never an uncaught error.

``ATTACKS`` (signature ``name(port, rng, cache) -> None``) is wired into ``hostile_soak.py`` by the lead.
"""
from __future__ import annotations

import struct

from broker_sim.testing.hostile_wire import _batch, _encode, _ensure_topic, _produce, _send_and_drain, _varint

RECORDS_TOPIC = "hostile-records"
VALIDATED_TOPIC = "hostile-records-validated"
SHIFTED_VALUE = b"EVIL"


def shifted_record(schema_id: int = 1) -> bytes:
    """One record v2 that Kafka reads as (key 00 14 00 <id>, value b"EVIL") and a reader taking the attributes
    for a varint as (offset delta 7, key b"", value 00 <id> 08 'EVIL')."""
    framed_head = b"\x00" + struct.pack(">I", schema_id)
    # Kafka: attributes 80 | timestampDelta 00 | offsetDelta 00 | key length 0E (7): 00 14 <framed head> |
    # value length 08 (4): EVIL | headers 00.  As a varint: attributes 80 00 | timestampDelta 00 |
    # offsetDelta 0E (7) | key length 00 | value length 14 (10): <framed head> 08 EVIL | headers 00.
    body = bytes([0x80, 0x00, 0x00, 0x0E, 0x00, 0x14]) + framed_head + b"\x08" + SHIFTED_VALUE + b"\x00"
    return _varint(len(body)) + body


def kafka_key_of_shifted(schema_id: int = 1) -> bytes:
    """The key Kafka (and every reader of its definition) reads in :func:`shifted_record`."""
    return b"\x00\x14\x00" + struct.pack(">I", schema_id)


def shifted_batch(schema_id: int = 1) -> bytes:
    return _batch(shifted_record(schema_id), count=1)


def _record_with(key_length: bytes) -> bytes:
    """A record (k, v) whose key length is written as ``key_length``."""
    body = b"\x00\x00\x00" + key_length + b"k" + _varint(1) + b"v" + b"\x00"
    return _varint(len(body)) + body


def overlong_varint_batch() -> bytes:
    """A key length of 1 written in 6 bytes (Kafka: "Varint is too long", INVALID_RECORD)."""
    return _batch(_record_with(b"\x82\x80\x80\x80\x80\x00"), count=1)


def huge_key_length_batch() -> bytes:
    """A key length of 2**63-1 as a 10-byte varint (once an uncaught OverflowError; Kafka: INVALID_RECORD)."""
    return _batch(_record_with(_varint(2**63 - 1)), count=1)


def _produce_once(port: int, cache, topic: str, configs: dict[str, str], records: bytes) -> int:
    if topic not in cache:
        _ensure_topic(port, topic, configs)
        cache[topic] = True
    return _send_and_drain(port, [_encode(_produce(topic, 0, records))], read_s=3)


def shifted_attributes(port, rng, cache):
    """The shifted record to a plain topic (accepted: Kafka accepts it) and to a validated one (refused where
    the broker runs a registry; CreateTopics refuses the config without one, and the topic is then plain)."""
    schema_id = rng.randint(1, 5)
    _produce_once(port, cache, RECORDS_TOPIC, {}, shifted_batch(schema_id))
    return _produce_once(port, cache, VALIDATED_TOPIC, {"confluent.value.schema.validation": "true"},
                         shifted_batch(schema_id))


def overlong_varints(port, rng, cache):
    return _produce_once(port, cache, RECORDS_TOPIC, {}, overlong_varint_batch())


def huge_key_length(port, rng, cache):
    return _produce_once(port, cache, RECORDS_TOPIC, {}, huge_key_length_batch())


ATTACKS = [shifted_attributes, overlong_varints, huge_key_length]


def shifted_pair(key: bytes, value: bytes) -> bytes:
    """One record v2 that a reader taking the attributes for a varint reads as (``key``, ``value``), while Kafka
    reads a key of varint bytes and the value's last 16 bytes: ``value`` must end in 16 bytes before which a
    space may stand (JSON ending in 15 spaces and "}" does), as the byte 0x20, Kafka's value length (16), is
    inserted there in the other reading's value."""
    head, tail = value[:-16], value[-16:]
    region = _varint(len(key)) + key + _varint(len(head) + 17) + head
    body = bytes([0x80, 0x00, 0x00]) + _varint(len(region)) + region + b"\x20" + tail + b"\x00"
    return _varint(len(body)) + body
