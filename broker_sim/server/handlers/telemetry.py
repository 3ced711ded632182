"""GetTelemetrySubscriptions (71) and PushTelemetry (72), KIP-714, answered as Kafka 4.1's KafkaApis does without a
metrics reporter plugin: ``ClientMetricsManager`` (``server/client_metrics.py``) owns every rule; these handlers
read the client's attributes off the connection, ask it, and build the answer.  Neither API is authorized (Kafka
checks no ACL for them); any unexpected failure of GetTelemetrySubscriptions is INVALID_REQUEST, as Kafka's
handler answers it.  Kafka does not advertise either API in ApiVersions without a plugin (the API table's
``advertised=False``), so clients do not push; a client that calls anyway gets Kafka's answers.
"""
from __future__ import annotations

import logging

import kafka.errors as Errors

from broker_sim.protocol.apis import messages
from broker_sim.server.client_metrics import ACCEPTED_COMPRESSION_TYPES, ClientMetricsManager, TelemetryError

log = logging.getLogger(__name__)
UNKNOWN = "unknown"  # Kafka's ClientInformation before (or without) ApiVersions v3+


def client_attributes(ctx) -> dict[str, str]:
    """What a subscription's ``match`` patterns test (ClientMetricsInstanceMetadata)."""
    connection = ctx.connection
    software = getattr(connection, "client_software", None) or (UNKNOWN, UNKNOWN)
    peer = getattr(connection, "peer", "?")
    return {"client_id": ctx.client_id or "", "client_software_name": software[0],
            "client_software_version": software[1], "client_source_address": getattr(connection, "ip", "?"),
            "client_source_port": peer.rsplit(":", 1)[1] if ":" in peer else "-1"}


class TelemetryApis:
    def __init__(self, manager: ClientMetricsManager) -> None:
        self._manager = manager

    async def get_telemetry_subscriptions(self, ctx, request):
        Response = messages.GetTelemetrySubscriptionsResponse
        try:
            found = self._manager.get_subscriptions(request.client_instance_id, client_attributes(ctx),
                                                    ctx.connection)
        except TelemetryError as exc:
            return _error_subscriptions(Response, exc.error.errno)
        except Exception:
            log.exception("GetTelemetrySubscriptions failed")
            return _error_subscriptions(Response, Errors.InvalidRequestError.errno)
        return Response(throttle_time_ms=0, error_code=0, client_instance_id=found.instance_id,
                        subscription_id=found.subscription_id,
                        accepted_compression_types=list(ACCEPTED_COMPRESSION_TYPES),
                        push_interval_ms=found.interval_ms, telemetry_max_bytes=found.max_bytes,
                        delta_temporality=True, requested_metrics=found.metrics)

    async def push_telemetry(self, ctx, request):
        Response = messages.PushTelemetryResponse
        try:
            self._manager.push(request.client_instance_id, request.subscription_id, request.terminating,
                               request.compression_type, request.metrics, client_attributes(ctx), ctx.connection)
        except TelemetryError as exc:
            return Response(throttle_time_ms=0, error_code=exc.error.errno)
        return Response(throttle_time_ms=0, error_code=0)


def _error_subscriptions(response_class, code: int):
    """Kafka's ``getErrorResponse``: the code, every other field its default."""
    return response_class(throttle_time_ms=0, error_code=code, client_instance_id=None, subscription_id=0,
                          accepted_compression_types=[], push_interval_ms=0, telemetry_max_bytes=0,
                          delta_temporality=False, requested_metrics=[])
