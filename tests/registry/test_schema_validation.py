"""Broker-side schema validation (registry/validation.py): Confluent Server's confluent.{key,value}.schema.validation
checked against a RegistryState, through storage.validator's inspect hook as the produce path runs it."""
from __future__ import annotations

import json
import struct

import kafka.errors as Errors
import pytest
from google.protobuf import descriptor_pb2
from kafka.record.default_records import DefaultRecordBatchBuilder

from broker_sim.config import (
    SUBJECT_NAME_STRATEGIES, BrokerConfig, ConfigError, checks_records, validate_topic_configs)
from broker_sim.registry import records
from broker_sim.registry.state import RegistryState
from broker_sim.registry.validation import (
    REGISTRY_NOT_READY, RegistryView, SchemaValidation, message_indexes, record_name_of, rules_of)
from broker_sim.storage.validator import RecordRules, RecordValidationError, validate_records

TOPIC_NAME, RECORD_NAME, TOPIC_RECORD_NAME = SUBJECT_NAME_STRATEGIES
USER = json.dumps({"type": "record", "name": "User", "namespace": "t",
                   "fields": [{"name": "name", "type": "string"}]})
ORDER = json.dumps({"type": "record", "name": "Order", "namespace": "t",
                    "fields": [{"name": "id", "type": "long"}]})
RULES = RecordRules(compact=False, max_message_bytes=1 << 20, max_decompressed_bytes=1 << 25)


class Registry:
    """A RegistryState fed _schemas records, as a broker's replay feeds it."""

    def __init__(self) -> None:
        self.state = RegistryState()
        self.offset = 0
        self.ready = True
        self.writer = True
        self.refreshes = 0

    def apply(self, key, value) -> None:
        self.state.apply(self.offset, *records.encode(key, value))
        self.offset += 1

    def register(self, subject: str, version: int, schema_id: int, schema: str = USER,
                 schema_type: str = "AVRO") -> None:
        self.apply(records.schema_key(subject, version),
                   records.SchemaValue(subject, version, schema_id, schema, schema_type))

    def state_of(self, refresh: bool) -> RegistryView | None:
        self.refreshes += refresh
        return RegistryView(self.state, not self.writer) if self.ready else None


def framed(schema_id: int, payload: bytes = b"\x06bob") -> bytes:
    return b"\x00" + struct.pack(">i", schema_id) + payload


def batch(*records_: tuple[bytes | None, bytes | None], compression: int = 0) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=compression, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for offset, (key, value) in enumerate(records_):
        builder.append(offset, timestamp=1, key=key, value=value, headers=[])
    return bytes(builder.build())


def topic_configs(**settings: str) -> dict[str, str]:
    configs = BrokerConfig({}).effective_topic_configs({})
    configs.update({name.replace("_", "."): value for name, value in settings.items()})
    return configs


VALUE_ON = topic_configs(confluent_value_schema_validation="true")
KEY_ON = topic_configs(confluent_key_schema_validation="true")


def check(registry: Registry, data: bytes, configs=VALUE_ON, topic: str = "orders") -> None:
    """The produce path's two steps: validate_records scanning each batch, then the verdict."""
    scan = SchemaValidation(registry.state_of)(topic, configs)
    validate_records(data, RULES, inspect=scan)
    scan.verdict()


def refused(registry: Registry, data: bytes, configs=VALUE_ON, topic: str = "orders") -> list[tuple[int, str]]:
    with pytest.raises(RecordValidationError) as caught:
        check(registry, data, configs, topic)
    assert caught.value.errno == Errors.InvalidRecordError.errno == 87
    assert caught.value.args[0].startswith(f"One or more records have been rejected due to "
                                           f"{len(caught.value.record_errors)} record errors")
    return caught.value.record_errors


@pytest.fixture
def registry() -> Registry:
    registry = Registry()
    registry.register("orders-value", 1, 1)
    return registry


def test_topic_name_strategy_accepts_an_id_registered_under_topic_value(registry):
    check(registry, batch((None, framed(1)), (b"k", framed(1))))


def test_a_value_without_the_magic_byte_is_refused_naming_record_and_subject(registry):
    errors = refused(registry, batch((None, framed(1)), (None, b'{"name": "bob"}'), (None, b"\x00\x00")))
    assert [index for index, _ in errors] == [1, 2]
    assert "value of record 1: not in the schema registry's wire format" in errors[0][1]
    assert "magic byte 123" in errors[0][1] and "'orders-value'" in errors[0][1]
    assert "only 2 bytes" in errors[1][1]


def test_an_unknown_schema_id_is_refused(registry):
    (error,) = refused(registry, batch((None, framed(99))))
    assert error == (0, "value of record 0: schema id 99 is not registered (value schema validation wants one "
                        "under subject 'orders-value')")


def test_an_id_registered_under_another_subject_is_refused_naming_both(registry):
    registry.register("payments-value", 1, 2, ORDER)
    (error,) = refused(registry, batch((None, framed(1)), (None, framed(2))))
    assert error[0] == 1
    assert "schema id 2 is not registered under subject 'orders-value' (TopicNameStrategy)" in error[1]
    assert "'payments-value' version 1" in error[1]


def test_every_failing_record_gets_its_error_and_the_message_shows_three(registry):
    errors = refused(registry, batch(*[(None, framed(7))] * 5))
    assert [index for index, _ in errors] == [0, 1, 2, 3, 4]


def test_a_refusal_names_at_most_max_record_errors_and_counts_them_all(registry):
    from broker_sim.registry.validation import MAX_RECORD_ERRORS

    failing = [(None, framed(7)), (None, b"raw"), (None, b"\x01raw value")] * 1000
    with pytest.raises(RecordValidationError) as caught:
        check(registry, batch(*failing, (None, framed(1))))
    errors = caught.value.record_errors
    assert len(errors) == MAX_RECORD_ERRORS == 1000
    assert [index for index, _ in errors] == list(range(1000))  # the first ones, in order
    assert caught.value.args[0].startswith("One or more records have been rejected due to 3000 record errors")
    assert "schema id 7 is not registered" in errors[0][1] and "only 3 bytes" in errors[1][1]
    assert "magic byte 1" in errors[2][1] and errors[999][1].startswith("value of record 999: ")


def test_a_tombstone_and_a_null_key_pass(registry):
    check(registry, batch((b"k", None), (None, framed(1))))
    registry.register("orders-key", 1, 1)
    check(registry, batch((None, None), (None, b"raw value: the value side is not validated")), KEY_ON)


def test_the_key_side_uses_topic_key(registry):
    errors = refused(registry, batch((framed(1), b"raw")), KEY_ON)
    assert "subject 'orders-key'" in errors[0][1] and errors[0][1].startswith("key of record 0: ")
    registry.register("orders-key", 1, 1)
    check(registry, batch((framed(1), b"raw")), KEY_ON)


def test_key_and_value_are_checked_independently(registry):
    both = topic_configs(confluent_key_schema_validation="true", confluent_value_schema_validation="true")
    errors = refused(registry, batch((b"plain key", framed(1))), both)
    assert len(errors) == 1 and errors[0][1].startswith("key of record 0")


def test_record_name_strategy_uses_the_avro_full_name(registry):
    configs = topic_configs(confluent_value_schema_validation="true",
                            confluent_value_subject_name_strategy=RECORD_NAME)
    refused(registry, batch((None, framed(1))), configs)  # registered under orders-value, not t.User
    registry.register("t.User", 1, 1)
    check(registry, batch((None, framed(1))), configs)


def test_topic_record_name_strategy_uses_topic_and_record_name(registry):
    configs = topic_configs(confluent_value_schema_validation="true",
                            confluent_value_subject_name_strategy=TOPIC_RECORD_NAME)
    registry.register("t.User", 1, 1)
    (error,) = refused(registry, batch((None, framed(1))), configs)
    assert "subject 'orders-t.User' (TopicRecordNameStrategy)" in error[1]
    registry.register("orders-t.User", 1, 1)
    check(registry, batch((None, framed(1))), configs)


def test_record_name_strategy_uses_the_json_schema_title(registry):
    schema = json.dumps({"title": "Invoice", "type": "object", "properties": {"n": {"type": "integer"}}})
    registry.register("Invoice", 1, 3, schema, "JSON")
    configs = topic_configs(confluent_value_schema_validation="true",
                            confluent_value_subject_name_strategy=RECORD_NAME)
    check(registry, batch((None, framed(3, b'{"n": 1}'))), configs)


def test_a_schema_without_a_record_name_is_refused_under_record_name_strategy(registry):
    registry.register("strings", 1, 4, json.dumps({"type": "object"}), "JSON")
    configs = topic_configs(confluent_value_schema_validation="true",
                            confluent_value_subject_name_strategy=RECORD_NAME)
    (error,) = refused(registry, batch((None, framed(4))), configs)
    assert "schema id 4 (JSON) has no record name, which RecordNameStrategy needs" in error[1]


def test_a_soft_deleted_version_still_validates_a_permanently_deleted_one_does_not(registry):
    registry.apply(records.delete_subject_key("orders-value"), records.DeleteSubjectValue("orders-value", 1))
    check(registry, batch((None, framed(1))))
    registry.apply(records.schema_key("orders-value", 1), None)  # the permanent delete's tombstone
    (error,) = refused(registry, batch((None, framed(1))))
    assert "schema id 1 is not registered" in error[1]


def test_a_new_registration_is_seen_by_the_next_produce(registry):
    refused(registry, batch((None, framed(5))))
    registry.register("orders-value", 2, 5, ORDER)
    check(registry, batch((None, framed(5))))


def test_a_failing_id_is_looked_up_again_after_catching_up(registry):
    refused(registry, batch((None, framed(5))))
    assert registry.refreshes == 1
    check(registry, batch((None, framed(1))))
    assert registry.refreshes == 1  # a passing produce does not catch up


def test_a_registry_still_loading_answers_a_retriable_error(registry):
    registry.ready = False
    with pytest.raises(REGISTRY_NOT_READY) as caught:
        check(registry, batch((None, framed(1))))
    assert caught.value.retriable and "still loading _schemas" in str(caught.value)


def test_a_follower_answers_retriable_for_an_id_beyond_its_replay(registry):
    registry.writer = False
    with pytest.raises(REGISTRY_NOT_READY, match="schema id 2 is above every id this broker's replica"):
        check(registry, batch((None, framed(2))))
    registry.register("orders-value", 2, 2, ORDER)  # the replica catches up
    check(registry, batch((None, framed(2))))
    registry.apply(records.schema_key("orders-value", 2), None)  # permanently deleted: below the mark now
    (error,) = refused(registry, batch((None, framed(2))))
    assert "schema id 2 is not registered" in error[1]


def test_the_writer_refuses_an_id_beyond_its_replay(registry):
    (error,) = refused(registry, batch((None, framed(2))))
    assert "schema id 2 is not registered" in error[1]


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_compressed_batches_are_checked_from_the_validators_decompressed_copy(registry, codec):
    check(registry, batch((None, framed(1)), (None, framed(1)), compression=codec))
    errors = refused(registry, batch((None, framed(1)), (None, b"raw"), compression=codec))
    assert [index for index, _ in errors] == [1]


def test_record_indexes_run_across_the_batches_of_a_partition(registry):
    errors = refused(registry, batch((None, framed(1)), (None, framed(1))) + batch((None, framed(1)), (None, b"x")))
    assert [index for index, _ in errors] == [3]


def test_protobuf_message_indexes_are_read_as_confluents_serializer_writes_them():
    assert message_indexes(b"\x00rest") == (0,)  # the first message: a single 0
    assert message_indexes(b"\x04\x02\x04rest") == (1, 2)  # count 2 (zigzag 4), then 1 and 2
    assert message_indexes(b"\x04\x02") is None  # truncated
    assert message_indexes(b"\x7f") is None  # a negative count


def test_protobuf_record_name_follows_the_message_indexes():
    proto = descriptor_pb2.FileDescriptorProto(package="shop")
    first = proto.message_type.add(name="Order")
    proto.message_type.add(name="Refund").nested_type.add(name="Line")
    first.nested_type.add(name="Item")

    class Parsed:
        schema_type = "PROTOBUF"
        name = "shop.Order"
        model = type("Model", (), {"file": proto})
    assert record_name_of(Parsed, (0,)) == "shop.Order"
    assert record_name_of(Parsed, (1, 0)) == "shop.Refund.Line"
    assert record_name_of(Parsed, (0, 0)) == "shop.Order.Item"
    assert record_name_of(Parsed, (2,)) is None


def test_record_name_strategy_names_the_protobuf_message_the_indexes_pick(registry):
    registry.register("shop.Refund", 1, 6, "syntax = \"proto3\"; package shop; message Order { int64 id = 1; } "
                                            "message Refund { int64 id = 1; }", "PROTOBUF")
    configs = topic_configs(confluent_value_schema_validation="true",
                            confluent_value_subject_name_strategy=RECORD_NAME)
    check(registry, batch((None, framed(6, b"\x02\x02\x08\x01"))), configs)  # indexes [1]: shop.Refund
    errors = refused(registry, batch((None, framed(6, b"\x00\x08\x01"))), configs)  # [0]: shop.Order
    assert "not registered under subject 'shop.Order' (RecordNameStrategy)" in errors[0][1]
    errors = refused(registry, batch((None, framed(6, b"\x7f"))), configs)
    assert "no message indexes follow the id" in errors[0][1]


def test_rules_come_from_the_effective_topic_configs():
    assert rules_of(topic_configs()) == ()
    assert not checks_records(topic_configs())
    configs = topic_configs(confluent_value_schema_validation="true",
                            confluent_key_schema_validation="true",
                            confluent_key_subject_name_strategy=RECORD_NAME)
    assert checks_records(configs)
    assert [(rule.side, rule.strategy) for rule in rules_of(configs)] == [("key", RECORD_NAME),
                                                                        ("value", TOPIC_NAME)]


def test_strategies_are_the_java_class_names_and_others_are_refused_naming_config_and_choices():
    validate_topic_configs({"confluent.key.subject.name.strategy": TOPIC_RECORD_NAME})
    with pytest.raises(ConfigError) as caught:
        validate_topic_configs({"confluent.value.subject.name.strategy": "TopicNameStrategy"})
    assert "'confluent.value.subject.name.strategy'" in str(caught.value)
    assert all(name in str(caught.value) for name in SUBJECT_NAME_STRATEGIES)


def test_validation_needs_the_brokers_registry():
    with pytest.raises(ConfigError, match="confluent.value.schema.validation=true needs schema.registry.listeners"):
        BrokerConfig({}).check_topic_configs({"confluent.value.schema.validation": "true"})
    BrokerConfig({}).check_topic_configs({"confluent.value.schema.validation": "false"})
    with pytest.raises(ConfigError, match="schema.registry.listeners"):
        BrokerConfig({"confluent.key.schema.validation": "true"})


class _Refusing:
    def __call__(self, topic, configs):
        raise AssertionError(f"{topic} is not validated: its produce must not reach the check")


def _append(replicas, topic: str, data: bytes):
    import asyncio
    (result,) = asyncio.run(replicas.append_records([(topic, 0, data)], required_acks=1, timeout_ms=1000))
    return result


@pytest.fixture
def replicas(tmp_path):
    import uuid

    from broker_sim.controller.metadata import TopicInfo
    from broker_sim.replication.replica_manager import ReplicaManager

    manager = ReplicaManager(tmp_path, BrokerConfig({}), broker_id=0, now_ms=lambda: 1_000)
    manager.open_topic(TopicInfo("orders", uuid.uuid4(), 1, {"confluent.value.schema.validation": "true"}))
    manager.open_topic(TopicInfo("plain", uuid.uuid4(), 1, {}))
    yield manager
    manager.close()


def test_the_produce_path_checks_validated_topics_only(replicas, registry):
    replicas.record_check = _Refusing()
    assert _append(replicas, "plain", batch((None, b"raw"))).error_code == 0  # other topics pay nothing
    replicas.record_check = SchemaValidation(registry.state_of)
    assert _append(replicas, "orders", batch((None, framed(1)))).error_code == 0
    refused_ = _append(replicas, "orders", batch((None, framed(1)), (None, b"raw")))
    assert refused_.error_code == 87 and [index for index, _ in refused_.record_errors] == [1]
    assert replicas.get("orders", 0).log_end_offset == 1  # nothing of the refused batch was appended


def test_a_validated_topic_on_a_broker_without_a_check_refuses_everything(replicas):
    result = _append(replicas, "orders", batch((None, framed(1))))
    assert result.error_code == 87 and "schema.registry.listeners is not set" in result.reason


def test_turning_validation_off_stops_the_check(replicas, registry):
    import uuid

    from broker_sim.controller.metadata import TopicInfo

    replicas.reconfigure(TopicInfo("orders", uuid.uuid4(), 1, {"confluent.value.schema.validation": "false"}))
    replicas.record_check = _Refusing()
    assert _append(replicas, "orders", batch((None, b"raw"))).error_code == 0


class _FakeLog:
    def __init__(self, replica: bool, writer: bool) -> None:
        self.replica, self.writer = replica, writer

    def has_replica(self) -> bool:
        return self.replica

    def is_writer(self) -> bool:
        return self.writer

    def end_offset(self) -> int:
        return 0

    def start_offset(self) -> int:
        return 0


def _broker_registry(registry: Registry, *, replica=True, writer=True, topic_replicas=None, started=True):
    from types import SimpleNamespace

    from broker_sim.controller.metadata import TopicInfo

    service = SimpleNamespace(state=registry.state, _position=0, catch_ups=0)
    service.catch_up = lambda defer_parses=False: setattr(service, "catch_ups", service.catch_ups + 1) or 0
    topics = {} if topic_replicas is None else {"_schemas": TopicInfo("_schemas", None, 1, {}, True,
                                                                      [topic_replicas])}
    broker = SimpleNamespace(broker_id=4, metadata=SimpleNamespace(topics=topics))
    return SimpleNamespace(service=service if started else None, log=_FakeLog(replica, writer), broker=broker)


def test_on_a_broker_the_check_reads_its_registry(registry):
    from broker_sim.registry.validation import broker_validation

    on_writer = _broker_registry(registry)
    scan = broker_validation(on_writer)("orders", VALUE_ON)
    validate_records(batch((None, framed(1))), RULES, inspect=scan)
    scan.verdict()
    scan = broker_validation(on_writer)("orders", VALUE_ON)
    validate_records(batch((None, framed(9))), RULES, inspect=scan)
    with pytest.raises(RecordValidationError):  # the writer holds every id: an unknown one is refused
        scan.verdict()
    assert on_writer.service.catch_ups == 1  # caught up once before refusing

    def verdict_on(broker_registry, value=framed(9)):
        scan = broker_validation(broker_registry)("orders", VALUE_ON)
        validate_records(batch((None, value)), RULES, inspect=scan)
        scan.verdict()
    with pytest.raises(REGISTRY_NOT_READY, match="above every id"):  # a follower may lag the writer
        verdict_on(_broker_registry(registry, writer=False))
    with pytest.raises(REGISTRY_NOT_READY, match="still loading"):  # the registry is not started yet
        verdict_on(_broker_registry(registry, started=False))
    with pytest.raises(REGISTRY_NOT_READY, match="still loading"):  # _schemas assigned here, not open yet
        verdict_on(_broker_registry(registry, replica=False, topic_replicas=[4, 5, 6]))
    with pytest.raises(Errors.InvalidRecordError, match="holds no replica of _schemas"):
        verdict_on(_broker_registry(registry, replica=False, topic_replicas=[1, 2, 3]))
    with pytest.raises(RecordValidationError, match="schema id 9 is not registered"):  # no _schemas: no schema
        verdict_on(_broker_registry(registry, replica=False))
