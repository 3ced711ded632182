"""pylog's broker: a pure-Python Kafka-protocol broker, its ``pylog`` tools, benchmarks and test harness.

Arrows point down: server -> replication/coordinator/security -> storage/controller -> protocol/config.
The product packages never import ``testing``, ``bench`` or ``local``; ``schemas/`` holds the broker's own formats.
Importing ``broker_sim`` defers the ``__init__`` of kafka-python and aiokafka until something uses what it defines
(``lazy_packages``): the broker needs only their submodules, and their ``__init__`` imports their whole clients.
"""
from broker_sim.lazy_packages import defer_client_packages

defer_client_packages()
