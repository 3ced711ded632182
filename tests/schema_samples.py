"""Avro schemas the Schema Registry tests share (tests/integration, tests/tools): one event record in two
compatible versions, an incompatible third, and a pair of records where one references the other."""
from __future__ import annotations

import json


def avro(fields: list[dict], name: str = "Event") -> str:
    """A record schema as Avro prints it (compact, attributes in Avro's order), so a registry that
    answers either the text as registered or Avro's own rendering answers the same string."""
    return json.dumps({"type": "record", "name": name, "namespace": "com.acme", "fields": fields},
                      separators=(",", ":"))


V1 = avro([{"name": "id", "type": "long"}])
V2 = avro([{"name": "id", "type": "long"}, {"name": "source", "type": "string", "default": "web"}])
# a field without a default: a reader with it cannot read V1/V2 data, so BACKWARD refuses it
INCOMPATIBLE = avro([{"name": "id", "type": "long"}, {"name": "owner", "type": "string"}])
CUSTOMER = avro([{"name": "name", "type": "string"}], name="Customer")
ORDER = avro([{"name": "customer", "type": "com.acme.Customer"}], name="Order")


def compiled_proto(text: str, file_name: str, references=None):
    """The ParsedSchema of ``text`` and a function from a full message name to a generated message class
    (a fresh pool holding the well-known files and the schema as ``file_name``, as protoc output would)."""
    from google.protobuf import descriptor_pool, message_factory

    from broker_sim.registry.types import parse
    from broker_sim.registry.types.protobuf import WELL_KNOWN_FILES
    parsed = parse("PROTOBUF", text, references)
    pool = descriptor_pool.DescriptorPool()
    added = set()

    def add(path):
        if path in added:
            return
        for dependency in WELL_KNOWN_FILES[path].dependency:
            add(dependency)
        pool.Add(WELL_KNOWN_FILES[path])
        added.add(path)
    for path, ref in parsed.model.dependencies:
        for dependency in ref.model.file.dependency:
            if dependency in WELL_KNOWN_FILES:
                add(dependency)
        file = type(ref.model.file)()
        file.CopyFrom(ref.model.file)
        file.name = path
        pool.Add(file)
    for dependency in parsed.model.file.dependency:
        if dependency in WELL_KNOWN_FILES:
            add(dependency)
    file = type(parsed.model.file)()
    file.CopyFrom(parsed.model.file)
    file.name = file_name
    pool.Add(file)
    return parsed, lambda name: message_factory.GetMessageClass(pool.FindMessageTypeByName(name))
