"""Command-line tools for any Kafka-protocol broker: ``pylog`` and its benchmark.

Theory of operation
-------------------
The tools are ordinary Kafka clients. They talk to a broker only through the
wire protocol (kafka-python underneath; the benchmark also drives
confluent-kafka), so they work the same against ``broker_sim``, Apache Kafka or
Tansu. Nothing here imports the broker's internals: the benchmark starts brokers
as separate processes.

Modules, one job each:

- :mod:`~broker_sim.tools.cli` — argument parsing, dispatch, exit codes.
- :mod:`~broker_sim.tools.errors` — the one expected-failure type and how
  client exceptions become one-line messages.
- :mod:`~broker_sim.tools.clients` — building kafka-python clients from the
  common options.
- :mod:`~broker_sim.tools.progress` — rate-limited progress lines on stderr.
- :mod:`~broker_sim.tools.topics` — ``pylog topics create|list|describe|delete``.
- :mod:`~broker_sim.tools.console` — ``pylog produce`` and ``pylog consume``.
- :mod:`~broker_sim.tools.groups` — ``pylog groups list|describe|reset-offsets|delete``.
- :mod:`~broker_sim.tools.bench` — ``pylog bench``: rounds, medians, ratios, JSON.
- :mod:`~broker_sim.tools.bench_brokers` — starting and stopping broker processes.
- :mod:`~broker_sim.tools.bench_workloads` — the timed client workloads.
- :mod:`~broker_sim.tools.bench_groups` — ``pylog bench --workload groups``:
  rebalance times and OffsetCommit round trips.
- :mod:`~broker_sim.tools.bench_group_member` — one group member process of it.

Quick start::

    $ pylog-broker --data-dir /tmp/pylog --port 9092 --host 127.0.0.1 &
    $ pylog topics create events --partitions 3
    $ printf 'k1:hello\\nk2:world\\n' | pylog produce events --key-separator :
    $ pylog consume events --from-beginning --max-messages 2 --print-key
"""
