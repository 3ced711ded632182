"""The Schema Registry on a broker: its ``RegistryService`` over ``_schemas``-0 and the REST layer over that.

``registry_for(broker, forward=..., authorize=...)`` builds the broker's
``BrokerSchemaLog`` (``schema_log.py``: appends wait for the ISR at most
``replica.socket.timeout.ms``), the ``RegistryService`` over it (the broker's
clock; ``forward`` sends a write to the writer when this broker is not it; the
``IdCheckpoint`` in the broker's data dir keeps ids above any it ever saw; its
``ComputeLane`` parses and checks schemas off the event loop,
``schema.registry.compute.*``) and
the REST handler (``authorize(principal, operation, resource)`` checks each
route), and replays what the local replica of ``_schemas`` holds.  Nothing
else in ``broker_sim.registry`` knows the broker; the HTTP side is
``server/schema_registry.py``.
"""
from __future__ import annotations

from broker_sim.registry import rest
from broker_sim.registry.compute import ComputeLane
from broker_sim.registry.id_checkpoint import IdCheckpoint
from broker_sim.registry.schema_log import BrokerSchemaLog
from broker_sim.registry.service import RegistryService


def registry_for(broker, *, forward, authorize):
    """(schema log, service, REST handler) of ``broker``, with the local ``_schemas`` replayed."""
    schema_log = BrokerSchemaLog(broker, timeout_s=broker.config.get("replica.socket.timeout.ms") / 1000.0)
    config = broker.config
    compute = ComputeLane(config.get("schema.registry.compute.threads"),
                          config.get("schema.registry.compute.timeout.ms") / 1000.0)
    service = RegistryService(schema_log, clock=broker.now_ms, forward=forward,
                              id_checkpoint=IdCheckpoint(broker.data_dir), compute=compute)
    handler = rest.RegistryRest(service, authorize=authorize)
    service.catch_up()  # the replay at start parses on the spot: nothing is served before it
    return schema_log, service, handler


def catch_up(service: RegistryService, schema_log: BrokerSchemaLog) -> int:
    """Replay what the local replica of ``_schemas`` gained, up to a schema not parsed yet (the service's
    tail parses those off the event loop, ``RegistryService.catch_up_off_loop``; the service rebuilds from the
    log's start when the log ends below what it replayed: ``BrokerSchemaLog.end_offset``)."""
    return service.catch_up(defer_parses=True)
