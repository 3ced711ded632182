"""Hostile admin clients against the registry's log (issue 44, finding 5): DeleteRecords on ``_schemas``, its
cleanup.policy altered to ``delete``, the topic deleted, its log emptied while the broker was down.

Each test registers schemas and produces records framed with their ids (Confluent's wire format: magic 0, a
4-byte id), attacks, restarts the broker on its data dir and checks that every old record still resolves to
the schema it was written with, and that a new registration gets an id no old record carries.  A GET
/subjects on another connection is timed before (the control) and right after each attack.
"""
from __future__ import annotations

import json
import struct
import time
import urllib.error
import urllib.request

from kafka.protocol.admin import AlterConfigsRequest, DeleteRecordsRequest, DescribeConfigsRequest

from client_helpers import Record, consume_kafka_python, create_topic, free_port, produce_kafka_python
from hostile import assert_serving
from kafka_wire import WireClient, delete_topics, set_topic_configs
from broker_sim.testing.waiting import wait_until

POLICY_VIOLATION = 44
INVALID_REQUEST = 42
LATENCY_BOUND_S = 0.5  # what an attack may add to the control's worst round trip, measured in the same test
CONTENT = "application/vnd.schemaregistry.v1+json"


def _schema(name: str) -> str:
    return json.dumps({"type": "record", "name": name, "fields": [{"name": "f", "type": "string"}]})


class Registry:
    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}"

    def call(self, method: str, path: str, body: dict | None = None) -> tuple[int, object]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Content-Type": CONTENT})
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")

    def register(self, subject: str, schema: str) -> int:
        status, body = self.call("POST", f"/subjects/{subject}/versions", {"schema": schema})
        assert status == 200, (status, body)
        return body["id"]

    def schema_of(self, schema_id: int) -> str | None:
        status, body = self.call("GET", f"/schemas/ids/{schema_id}")
        if status == 404:
            return None
        assert status == 200, (status, body)
        return body["schema"]

    def wait_ready(self, timeout: float = 20) -> None:
        """Until the registry answers (a broker's Kafka port can accept before its registry listens)."""
        def answers() -> bool:
            try:
                return self.call("GET", "/subjects")[0] == 200
            except OSError:
                return False
        wait_until(answers, timeout_s=timeout, what=f"the registry at {self.url}")

    def timed_read(self) -> float:
        start = time.monotonic()
        status, _ = self.call("GET", "/subjects")
        assert status == 200
        return time.monotonic() - start


def _registry_broker(hostile_broker):
    port = free_port()
    broker = hostile_broker({"schema.registry.listeners": f"http://127.0.0.1:{port}"})
    registry = Registry(port)
    registry.wait_ready()
    return broker, registry


def _write_framed(broker, registry: Registry, topic: str, names: list[str]) -> dict[int, str]:
    """Register one schema per name (a subject each) and produce to ``topic`` one record framed with each id."""
    written = {}
    for name in names:
        schema = _schema(name)
        written[registry.register(f"{topic}-{name}", schema)] = schema
    produce_kafka_python(broker.bootstrap_servers, topic,
                         [Record(None, b"\0" + struct.pack(">I", schema_id) + b"payload") for schema_id in written])
    return written


def _assert_old_records_resolve(broker, registry: Registry, topic: str, written: dict[int, str]) -> None:
    """Each record's id (read back through a consumer) names the schema it was framed with."""
    got = consume_kafka_python(broker.bootstrap_servers, topic, len(written))
    ids = [struct.unpack(">I", r.value[1:5])[0] for r in got]
    assert ids == list(written)
    for schema_id in ids:
        held = registry.schema_of(schema_id)
        assert held is not None and json.loads(held) == json.loads(written[schema_id]), (schema_id, held)


def _delete_records(client: WireClient, topic: str, offset: int) -> tuple[int, int]:
    topic_request = DeleteRecordsRequest.DeleteRecordsTopic
    request = DeleteRecordsRequest[1](timeout_ms=30000, topics=[topic_request(name=topic, partitions=[
        topic_request.DeleteRecordsPartition(partition_index=0, offset=offset)])])
    result = client.call(request).topics[0].partitions[0]
    return result.error_code, result.low_watermark


def _legacy_alter(client: WireClient, topic: str, configs: dict[str, str]) -> int:
    resource = AlterConfigsRequest.AlterConfigsResource
    request = AlterConfigsRequest[1](validate_only=False, resources=[resource(
        resource_type=2, resource_name=topic,
        configs=[resource.AlterableConfig(name=k, value=v) for k, v in configs.items()])])
    return client.call(request).responses[0].error_code


def _cleanup_policy(client: WireClient, topic: str) -> str:
    resource = DescribeConfigsRequest.DescribeConfigsResource
    request = DescribeConfigsRequest[1](include_synonyms=False, resources=[resource(
        resource_type=2, resource_name=topic, configuration_keys=["cleanup.policy"])])
    return client.call(request).results[0].configs[0].value


def _assert_quick(control: float, during: float) -> None:
    assert during < LATENCY_BOUND_S + control, f"GET /subjects took {during:.2f} s after the attack (control {control:.3f} s)"


def test_delete_records_on_schemas_is_refused_and_the_registry_survives_a_restart(hostile_broker):
    broker, registry = _registry_broker(hostile_broker)
    topic = "wipe-delete-records"
    create_topic(broker.bootstrap_servers, topic)
    written = _write_framed(broker, registry, topic, ["A", "B"])
    control = registry.timed_read()

    with WireClient(broker.bootstrap_servers) as client:
        for offset in (-1, 1):  # to the high watermark, and past the first record only
            code, low = _delete_records(client, "_schemas", offset)
            assert (code, low) == (POLICY_VIOLATION, -1), (offset, code, low)
    _assert_quick(control, registry.timed_read())
    _assert_old_records_resolve(broker, registry, topic, written)

    broker = hostile_broker.restart(broker)
    registry.wait_ready()
    _assert_old_records_resolve(broker, registry, topic, written)
    new_id = registry.register(f"{topic}-C", _schema("C"))
    assert new_id > max(written), (new_id, written)
    assert_serving(broker)


def test_schemas_keeps_its_compact_policy_and_the_registry_survives_a_restart(hostile_broker):
    broker, registry = _registry_broker(hostile_broker)
    topic = "wipe-alter-configs"
    create_topic(broker.bootstrap_servers, topic)
    written = _write_framed(broker, registry, topic, ["A", "B"])
    control = registry.timed_read()

    with WireClient(broker.bootstrap_servers) as client:
        attacks = [
            set_topic_configs(client, "_schemas", {"cleanup.policy": "delete", "retention.ms": "1"}),
            set_topic_configs(client, "_schemas", {"cleanup.policy": "compact,delete", "retention.ms": "1"}),
            _legacy_alter(client, "_schemas", {"cleanup.policy": "delete", "retention.ms": "1"}),
            _legacy_alter(client, "_schemas", {"retention.ms": "1"}),  # replaces the overrides: back to delete
        ]
        assert attacks == [POLICY_VIOLATION] * 4, attacks
        assert _cleanup_policy(client, "_schemas") == "compact"
        # under compact alone retention does not apply: other settings may still change
        assert set_topic_configs(client, "_schemas", {"retention.ms": "1"}) == 0
        assert _cleanup_policy(client, "_schemas") == "compact"
        assert set_topic_configs(client, topic, {"cleanup.policy": "compact,delete"}) == 0  # other topics may
    _assert_quick(control, registry.timed_read())

    broker = hostile_broker.restart(broker)
    registry.wait_ready()
    _assert_old_records_resolve(broker, registry, topic, written)
    assert registry.register(f"{topic}-C", _schema("C")) > max(written)
    assert_serving(broker)


def test_ids_are_never_reused_after_schemas_lost_its_records(hostile_broker):
    """DeleteTopics on ``_schemas`` is refused (INVALID_REQUEST, an internal topic here); what remains is a
    log that lost its records under the broker (a disk restored from an old copy, a log truncated while the
    broker was down).  The registry then replays what is left, but ids continue above every id the broker
    ever issued, so an old record never resolves to a schema registered afterwards."""
    broker, registry = _registry_broker(hostile_broker)
    topic = "wipe-truncated"
    create_topic(broker.bootstrap_servers, topic)
    written = _write_framed(broker, registry, topic, ["A", "B", "C"])
    control = registry.timed_read()
    with WireClient(broker.bootstrap_servers) as client:
        assert delete_topics(client, ["_schemas"]) == {"_schemas": INVALID_REQUEST}
    _assert_quick(control, registry.timed_read())

    assert broker.terminate() == 0
    for segment in (broker.data_dir / "_schemas-0").glob("*.log"):
        segment.write_bytes(b"")  # every record gone; recovery starts the log empty
    broker = hostile_broker(broker.config, broker.data_dir, broker.port)
    registry.wait_ready()
    assert registry.call("GET", "/subjects") == (200, [])  # the registry is empty ...

    fresh = registry.register("after-Z", _schema("Z"))
    assert fresh > max(written), f"id {fresh} reused: old records framed with it now name schema Z"
    for schema_id in written:
        assert registry.schema_of(schema_id) is None  # ... its old ids are unknown, never another schema
    broker = hostile_broker.restart(broker)
    registry.wait_ready()
    assert registry.register("after-Y", _schema("Y")) > fresh
    assert json.loads(registry.schema_of(fresh)) == json.loads(_schema("Z"))
    assert_serving(broker)
