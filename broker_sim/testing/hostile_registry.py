"""Soak attacks on the Schema Registry (issue 44, findings 4 and 5; ``hostile_soak.py`` runs them).

* ``schemas_delete_records``: DeleteRecords on ``_schemas``-0 up to its high watermark (POLICY_VIOLATION:
  the topic is compacted);
* ``schemas_cleanup_policy``: IncrementalAlterConfigs and AlterConfigs setting ``_schemas`` to
  ``cleanup.policy=delete`` with ``retention.ms=1`` (POLICY_VIOLATION on a broker serving the registry);
* ``transitive_checks``: three ~1 MB versions under FULL_TRANSITIVE, then two clients registering and testing
  another against all of them at once (each stops at ``schema.registry.compute.timeout.ms``);
* ``slow_small_schemas``: anyOf JSON Schema compatibility tests and invalid 16 KB .proto registrations;
* ``unread_schema_lists``: 20 GET /schemas (a ~10 MB answer) that never read it, held 3 s;
* ``failing_validated_produce``: a 0.9 MB produce of 60,000 records that all fail broker-side schema
  validation.

The Kafka-side ones need only the broker; the others need its registry: ``registry_configs(port)`` gives the
broker configs that serve it at ``http://127.0.0.1:<port>``, and the soak's ``cache["surfaces"]`` must name
that port as ``"SCHEMA_REGISTRY"`` (without it they send nothing and return 0).

Each is ``name(port, rng, cache) -> requests sent``, as the soak's own attacks; nothing about the answers
is asserted here (``tests/hostile/test_registry_cost.py`` and ``test_registry_wipe.py`` do that).
"""
from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request

from broker_sim.testing.hostile_wire import _encode, _ensure_topic, _produce, _send_and_drain

VALIDATED_TOPIC = "soak-validated"
SCHEMAS_TOPIC = "_schemas"


def registry_configs(port: int) -> dict[str, str]:
    """The broker configs that serve the registry these attacks use."""
    return {"schema.registry.listeners": f"http://127.0.0.1:{port}"}


def _registry_port(cache) -> int | None:
    return cache.get("surfaces", {}).get("SCHEMA_REGISTRY")


def _call(port: int, method: str, path: str, body: dict | None = None, timeout: float = 60) -> int:
    """The HTTP status of one registry request (0: no answer)."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method,
                                     headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            answer.read()
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return 0


def _in_parallel(calls) -> None:
    threads = [threading.Thread(target=call, daemon=True) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)


def schemas_delete_records(port, rng, cache):
    """DeleteRecords on _schemas-0 to the high watermark, and to offset 1."""
    from kafka.protocol.admin import DeleteRecordsRequest
    topic = DeleteRecordsRequest.DeleteRecordsTopic
    frames = [_encode(DeleteRecordsRequest[1](timeout_ms=5000, topics=[topic(name=SCHEMAS_TOPIC, partitions=[
        topic.DeleteRecordsPartition(partition_index=0, offset=offset)])]), correlation_id=i)
        for i, offset in enumerate((-1, 1))]
    return _send_and_drain(port, frames, read_s=3)


def schemas_cleanup_policy(port, rng, cache):
    """_schemas set to cleanup.policy=delete with retention.ms=1, incrementally and by the legacy AlterConfigs."""
    from kafka.protocol.admin import AlterConfigsRequest, IncrementalAlterConfigsRequest
    wanted = {"cleanup.policy": "delete", "retention.ms": "1"}
    incremental = IncrementalAlterConfigsRequest.AlterConfigsResource
    legacy = AlterConfigsRequest.AlterConfigsResource
    frames = [
        _encode(IncrementalAlterConfigsRequest[1](validate_only=False, resources=[incremental(
            resource_type=2, resource_name=SCHEMAS_TOPIC, configs=[
                incremental.AlterableConfig(name=k, config_operation=0, value=v) for k, v in wanted.items()])]),
            correlation_id=1),
        _encode(AlterConfigsRequest[1](validate_only=False, resources=[legacy(
            resource_type=2, resource_name=SCHEMAS_TOPIC,
            configs=[legacy.AlterableConfig(name=k, value=v) for k, v in wanted.items()])]), correlation_id=2),
    ]
    return _send_and_drain(port, frames, read_s=3)


def _big_avro(fields: int, default: str) -> str:
    return json.dumps({"type": "record", "name": "Big", "fields": [
        {"name": f"f{i}_{'x' * 30}", "type": "string", "default": default} for i in range(fields)]})


def transitive_checks(port, rng, cache):
    """A registration and a test against three ~1 MB versions under FULL_TRANSITIVE, at once."""
    registry = _registry_port(cache)
    if registry is None:
        return 0
    sent = 0
    if not cache.get("registry_big_versions"):
        _call(registry, "PUT", "/config/soak-big", {"compatibility": "NONE"})
        for i in range(3):
            _call(registry, "POST", "/subjects/soak-big/versions", {"schema": _big_avro(6000, f"v{i}")})
        _call(registry, "PUT", "/config/soak-big", {"compatibility": "FULL_TRANSITIVE"})
        sent += 5
        cache["registry_big_versions"] = True
    tag = f"{rng.random():.6f}"
    _in_parallel([
        lambda: _call(registry, "POST", "/subjects/soak-big/versions", {"schema": _big_avro(6000, tag)}),
        lambda: _call(registry, "POST", "/compatibility/subjects/soak-big/versions", {"schema": _big_avro(6000, tag)}),
    ])
    return sent + 2


def _any_of(branches: int, kind: str) -> str:
    return json.dumps({"anyOf": [{"type": "object", "properties": {f"p{i}": {"type": kind}}, "required": [f"p{i}"]}
                                 for i in range(branches)]})


def slow_small_schemas(port, rng, cache):
    """Four clients: anyOf compatibility tests (150 branches each side) and invalid 16 KB .proto files."""
    registry = _registry_port(cache)
    if registry is None:
        return 0
    _call(registry, "POST", "/subjects/soak-json/versions", {"schema": _any_of(150, "string"), "schemaType": "JSON"})
    proto = 'syntax = "proto3";\nmessage A {\n' + "".join(f"  int32 f{n} = {n + 1};\n" for n in range(800)) \
        + "  int32 = ;\n}\n"

    def any_of() -> None:
        for _ in range(2):
            _call(registry, "POST", "/compatibility/subjects/soak-json/versions/latest",
                  {"schema": _any_of(150, "integer"), "schemaType": "JSON"})

    def invalid_proto() -> None:
        for _ in range(5):
            _call(registry, "POST", "/subjects/soak-proto/versions", {"schema": proto, "schemaType": "PROTOBUF"})
    _in_parallel([any_of, any_of, invalid_proto, invalid_proto])
    return 1 + 2 * 2 + 2 * 5


def unread_schema_lists(port, rng, cache):
    """40 schemas of 250 KB registered once; then 20 GET /schemas that never read the answer, held 3 s."""
    registry = _registry_port(cache)
    if registry is None:
        return 0
    sent = 0
    if not cache.get("registry_big_list"):
        for i in range(40):
            schema = json.dumps({"type": "record", "name": f"S{i}", "doc": "d" * 250_000, "fields": []})
            _call(registry, "POST", f"/subjects/soak-list-{i}/versions", {"schema": schema})
        sent += 40
        cache["registry_big_list"] = True
    socks = []
    for _ in range(20):
        try:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.connect(("127.0.0.1", registry))
            sock.sendall(b"GET /schemas HTTP/1.1\r\nHost: soak\r\n\r\n")
            socks.append(sock)
        except OSError:
            break
    time.sleep(3.0)
    for sock in socks:
        sock.close()
    return sent + len(socks)


def failing_validated_produce(port, rng, cache):
    """A 0.9 MB produce of 60,000 unframed records to a topic with confluent.value.schema.validation=true."""
    if _registry_port(cache) is None:
        return 0
    from kafka.record.default_records import DefaultRecordBatchBuilder
    if "validated_batch" not in cache:
        _ensure_topic(port, VALIDATED_TOPIC, {"confluent.value.schema.validation": "true"})
        builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                            producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
        for i in range(60_000):
            builder.append(i, timestamp=None, key=None, value=b"v%d" % i, headers=[])
        cache["validated_batch"] = bytes(builder.build())
    return _send_and_drain(port, [_encode(_produce(VALIDATED_TOPIC, 0, cache["validated_batch"], acks=-1))],
                           read_s=5) + 1


ATTACKS = [schemas_delete_records, schemas_cleanup_policy, transitive_checks, slow_small_schemas,
           unread_schema_lists, failing_validated_produce]
