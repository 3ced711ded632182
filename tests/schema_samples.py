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
