"""The Spark data source "pylog": ``datasource`` (options in, readers/writers out), ``source/``, ``sink/``; for
driver code ``foreach_batch`` (the exactly-once sink in update mode), ``progress`` (Kafka source metrics) and
``stop_query`` (stop a query with an exact consumer-group handoff).
Never imports broker_sim's broker side (server, replication, storage, coordinator, controller, local, testing,
bench): only the client-side ``broker_sim.protocol``, ``broker_sim.security.sasl``'s login and ``broker_sim.config``'s
``ConfigError`` (JAAS parsing).
"""
try:
    import pyspark  # noqa: F401
except ImportError as exc:  # a broker-only install: `pip install pylog` has no Spark
    raise ImportError("pylog's Spark connector needs PySpark: pip install 'pylog[spark]'") from exc

from connector.foreach import foreach_batch
from connector.source.progress import progress, stop_query

__all__ = ["foreach_batch", "progress", "stop_query"]
