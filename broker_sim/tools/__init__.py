"""The ``pylog`` command-line tools for any Kafka-protocol broker, and the broker image's health check.

Owns the ``pylog`` commands only; ``cli`` dispatches ``pylog bench`` to :mod:`broker_sim.bench` and
``pylog cluster up`` to :mod:`broker_sim.local`. Must not import ``broker_sim.testing`` nor the broker's
internals (server, storage, replication, coordinator).

Theory of operation
-------------------
The tools are ordinary Kafka clients. They talk to a broker only through the
wire protocol (kafka-python underneath; the health check sends one ApiVersions
request through :class:`broker_sim.protocol.client.WireConnection`), so they
work the same against ``broker_sim``, Apache Kafka or Tansu.

Modules, one job each:

- :mod:`~broker_sim.tools.cli` — argument parsing, dispatch, exit codes.
- :mod:`~broker_sim.tools.errors` — the one expected-failure type and how
  client exceptions become one-line messages.
- :mod:`~broker_sim.tools.clients` — building kafka-python clients from the
  common options.
- :mod:`~broker_sim.tools.topics` — ``pylog topics create|list|describe|delete``.
- :mod:`~broker_sim.tools.console` — ``pylog produce`` and ``pylog consume``.
- :mod:`~broker_sim.tools.groups` — ``pylog groups list|describe|reset-offsets|delete``.
- :mod:`~broker_sim.tools.transactions` — ``pylog transactions list|describe``.
- :mod:`~broker_sim.tools.security` — ``pylog acls|users|quotas``.
- :mod:`~broker_sim.tools.schemas` — ``pylog schemas``: a Schema Registry's REST API (pylog's or
  Confluent's), through the standard library's HTTP client.
- :mod:`~broker_sim.tools.top` — ``pylog top``.
- :mod:`~broker_sim.tools.reassign` — ``pylog reassign`` (kafka-reassign-partitions.sh) and
  ``pylog cluster decommission``.
- :mod:`~broker_sim.tools.healthcheck` — ``python -m broker_sim.tools.healthcheck HOST:PORT``.
- :mod:`~broker_sim.tools.cluster` — the old import path of ``LocalCluster``
  (now :mod:`broker_sim.local.cluster`).

Quick start::

    $ pylog-broker --data-dir /tmp/pylog --port 9092 --host 127.0.0.1 &
    $ pylog topics create events --partitions 3
    $ printf 'k1:hello\\nk2:world\\n' | pylog produce events --key-separator :
    $ pylog consume events --from-beginning --max-messages 2 --print-key
"""
