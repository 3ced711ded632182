"""A record means one thing to the broker and to every consumer (issue 44, finding 1).

The shifted record (broker_sim.testing.hostile_records: attributes 0x80) is read by Kafka as the value b"EVIL";
a reader taking the attributes for a varint reads a value framed with a registered schema id. The broker must
refuse it on a topic with ``confluent.value.schema.validation`` (its value is not framed, as Kafka reads it),
and where it accepts it (a plain topic) librdkafka and the connector on every read path (compiled, includeHeaders,
typed) must read the same key and value. Kafka's refusals (a 6-byte varint, a key length of 2**63-1) are
INVALID_RECORD without a traceback. The registry reads a record a client wrote to ``_schemas`` as Kafka does.
All while another client's requests stay fast, and across a restart.
"""
from __future__ import annotations

import json
import time
import uuid

from client_helpers import Record, create_topic, free_port, produce_kafka_python
from confluent_kafka import Consumer
from hostile import assert_serving
from kafka_wire import WireClient, list_offsets
from test_records import normal_client_latencies, produce_raw
from test_registry_wipe import Registry

from broker_sim.testing.hostile_records import (
    SHIFTED_VALUE, huge_key_length_batch, kafka_key_of_shifted, overlong_varint_batch, shifted_batch, shifted_pair)
from broker_sim.testing.hostile_wire import _batch

INVALID_RECORD = 87
LATENCY_BOUND_S = 0.5  # what an attack may add to the control's worst round trip, measured in the same test
ROUNDS = 100  # the attack's batches per kind


def _librdkafka_rows(bootstrap: str, topic: str, count: int) -> list[tuple]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    rows, deadline = [], time.monotonic() + 30
    try:
        while len(rows) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                rows.append((message.key(), message.value()))
    finally:
        consumer.close()
    return rows


def _connector_rows(bootstrap: str, topic: str, end: int, **options) -> list[dict]:
    """The rows the connector's partition reader gives for offsets [0, end) of ``topic``-0."""
    from pyspark.sql.pandas.types import to_arrow_schema

    from connector.options import parse_source_options
    from connector.source.offsets import OffsetRange
    from connector.source.partition_reader import RangeInputPartition, read_range
    from connector.source.readers import source_schema

    parsed = parse_source_options({"kafka.bootstrap.servers": bootstrap, "subscribe": topic, **options})
    parsed = parsed.resolve_typed().for_batch()
    schema = to_arrow_schema(source_schema(parsed.include_headers, parsed), timezone="UTC")
    return [row for batch in read_range(RangeInputPartition(OffsetRange(topic, 0, 0, end), parsed), schema)
            for row in batch.to_pylist()]


def test_the_shifted_record_means_one_thing_to_the_broker_and_every_consumer(hostile_broker):
    registry_port = free_port()
    broker = hostile_broker({"schema.registry.listeners": f"http://127.0.0.1:{registry_port}"})
    registry = Registry(registry_port)
    bootstrap = broker.bootstrap_servers
    validated, plain = f"validated-{uuid.uuid4().hex[:6]}", f"plain-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, validated, configs={"confluent.value.schema.validation": "true"})
    create_topic(bootstrap, plain)
    schema_id = registry.register(f"{validated}-value", json.dumps("string"))
    registry.register(f"{plain}-value", json.dumps("string"))

    with normal_client_latencies(bootstrap) as control:
        time.sleep(1.0)
    with normal_client_latencies(bootstrap) as attacked:
        answers = [produce_raw(bootstrap, validated, shifted_batch(schema_id)) for _ in range(ROUNDS)]
        refusals = [produce_raw(bootstrap, plain, batch) for _ in range(ROUNDS // 2)
                    for batch in (overlong_varint_batch(), huge_key_length_batch())]
        accepted = produce_raw(bootstrap, plain, shifted_batch(schema_id))
    assert control and attacked
    assert max(attacked) <= LATENCY_BOUND_S + max(control), (max(attacked), max(control))

    # the validator reads the value as Kafka does (b"EVIL", not framed): refused, naming the record
    assert {(a.error_code, a.base_offset) for a in answers} == {(INVALID_RECORD, -1)}, answers[0]
    assert all(a.record_errors and a.record_errors[0].batch_index == 0 for a in answers), answers[0]
    assert {(a.error_code, a.error_message) for a in refusals} == {(INVALID_RECORD, None)}, refusals[:2]
    assert (accepted.error_code, accepted.base_offset) == (0, 0)
    log = broker.log_path.read_text(errors="replace")
    assert "Traceback" not in log and "OverflowError" not in log, log[-3000:]

    expected = (kafka_key_of_shifted(schema_id), SHIFTED_VALUE)
    for round_ in ("before restart", "after restart"):
        assert _librdkafka_rows(bootstrap, plain, 1) == [expected], round_
        for options in ({}, {"includeHeaders": "true"}):
            rows = _connector_rows(bootstrap, plain, 1, **options)
            assert [(r["key"], r["value"], r["offset"]) for r in rows] == [(*expected, 0)], (round_, options)
        typed = _connector_rows(bootstrap, plain, 1, valueFormat="avro", **{
            "schema.registry.url": registry.url, "mode": "PERMISSIVE"})
        # b"EVIL" is not framed with a schema id: a typed read must not find the Avro string "EVIL" in it
        assert [r["value"] for r in typed] != ["EVIL"], (round_, typed)
        assert_serving(broker)
        broker = hostile_broker.restart(broker)
        bootstrap = broker.bootstrap_servers
    with WireClient(bootstrap) as client:  # nothing of the refused batches was appended
        assert list_offsets(client, validated, 0, -1)[::2] == (0, 0)
        assert list_offsets(client, plain, 0, -1)[::2] == (0, 1)


def test_a_shifted_registration_in_schemas_means_what_kafka_reads(hostile_broker):
    """A client writes to ``_schemas`` (a plain topic while the broker runs no registry) a record that a varint
    reading of its attributes takes for a schema registration (subject evil-value, id 99), while Kafka (and so
    Confluent's registry) reads a key that is not JSON. Once the broker starts its registry on that log, the
    registry reads it as Kafka does and registers nothing (it read it with kafka-python's record reader, and
    served the schema), before and after a restart."""
    broker = hostile_broker()
    create_topic(broker.bootstrap_servers, "_schemas", configs={"cleanup.policy": "compact"})
    key = json.dumps({"keytype": "SCHEMA", "subject": "evil-value", "version": 1, "magic": 1}).encode()
    value = json.dumps({"subject": "evil-value", "version": 1, "id": 99, "schema": json.dumps("string"),
                        "deleted": False})[:-1].encode() + b" " * 15 + b"}"
    with normal_client_latencies(broker.bootstrap_servers) as control:
        time.sleep(0.5)
    with normal_client_latencies(broker.bootstrap_servers) as attacked:
        answer = produce_raw(broker.bootstrap_servers, "_schemas", _batch(shifted_pair(key, value), count=1))
    assert (answer.error_code, answer.base_offset) == (0, 0)  # Kafka accepts it: a valid record
    assert control and attacked and max(attacked) <= LATENCY_BOUND_S + max(control), (max(attacked), max(control))
    # the other reading puts the record at its offset delta, its Kafka key's length (166): NOOP records
    # (which every registry skips) move the log's end past it
    noop = json.dumps({"keytype": "NOOP", "magic": 0}).encode()
    produce_kafka_python(broker.bootstrap_servers, "_schemas", [Record(noop, None)] * 300)
    assert broker.terminate() == 0
    registry_port = free_port()
    broker = hostile_broker({"schema.registry.listeners": f"http://127.0.0.1:{registry_port}"}, broker.data_dir,
                            broker.port)
    registry = Registry(registry_port)
    for round_ in ("with the registry", "after a restart"):
        assert _subjects(registry) == [], round_
        assert registry.schema_of(99) is None, round_
        assert_serving(broker)
        broker = hostile_broker.restart(broker)


def _subjects(registry: Registry, timeout_s: float = 20.0) -> list:
    """GET /subjects once the registry listens (it may start a moment after the broker answers)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            status, subjects = registry.call("GET", "/subjects")
        except OSError:
            assert time.monotonic() < deadline, "the registry never listened"
            time.sleep(0.1)
            continue
        assert status == 200, (status, subjects)
        return subjects
