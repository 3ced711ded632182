"""pylog's broker: a pure-Python Kafka-protocol broker, its ``pylog`` tools, benchmarks and test harness.

Arrows point down: server -> replication/coordinator/security -> storage/controller -> protocol/config.
The product packages never import ``testing``, ``bench`` or ``local``; ``schemas/`` holds the broker's own formats.
"""
