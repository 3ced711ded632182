"""The broker process: listeners and connections, request dispatch, the handlers, metrics and ``Broker``, the
composition root that wires replication, the coordinators, the controller and security together.

Imports point down only (replication, coordinator, controller, security, storage, protocol, config); nothing here
imports broker_sim.tools, testing, bench or local.
"""
