"""Kafka 4.1.1's message definitions that kafka-python 3 does not ship, as kafka-python message classes.

Theory of operation: each ``*.json`` here is Apache Kafka 4.1.1's own file (its
``clients/src/main/resources/common/message`` directory, Apache License 2.0, taken unchanged from
``kafka-clients-4.1.1-sources.jar``), so a field, a version range or a default is Kafka's by
construction.  kafka-python builds a class from a JSON file when the class is defined
(``load_json=`` names this package as the place to read it from); the API table
(``broker_sim.protocol.apis``) names this module as the package of the rows that use them, and
``ApiSpec`` imports it on the first request of such an API, like kafka-python's own packages.

Requests and responses (``ApiMessage``): the KIP-848 consumer group protocol (ConsumerGroupHeartbeat,
ConsumerGroupDescribe) and client telemetry (KIP-714: GetTelemetrySubscriptions, PushTelemetry).
Coordinator records (``coordinator_record``): the consumer group's keys and values as Kafka 4 writes them
to ``__consumer_offsets`` (``broker_sim.coordinator.group.records``).
"""
from __future__ import annotations

from kafka.protocol.api_message import ApiMessage

_HERE = __name__


class ConsumerGroupHeartbeatRequest(ApiMessage, load_json=_HERE): pass
class ConsumerGroupHeartbeatResponse(ApiMessage, load_json=_HERE): pass
class ConsumerGroupDescribeRequest(ApiMessage, load_json=_HERE): pass
class ConsumerGroupDescribeResponse(ApiMessage, load_json=_HERE): pass
class GetTelemetrySubscriptionsRequest(ApiMessage, load_json=_HERE): pass
class GetTelemetrySubscriptionsResponse(ApiMessage, load_json=_HERE): pass
class PushTelemetryRequest(ApiMessage, load_json=_HERE): pass
class PushTelemetryResponse(ApiMessage, load_json=_HERE): pass



def coordinator_record(name: str) -> dict:
    """The JSON definition of a coordinator record here (``type`` coordinator-key or coordinator-value), its
    common structs resolved: for ``broker_sim.coordinator.records.message``."""
    from kafka.protocol.schemas import load_json

    return load_json(name, package=_HERE)
