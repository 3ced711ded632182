"""The Spark data source "pylog": Kafka-protocol topics into Spark (``connector.source``) and back (``connector.sink``).

Two helpers for driver code: ``foreach_batch`` (``connector.sink_foreach``), the exactly-once sink as a
``foreachBatch`` function for update mode, and ``progress`` (``connector.query_progress``), Spark's Kafka source
metrics (offsets behind latest) for a running query.
"""
try:
    import pyspark  # noqa: F401
except ImportError as exc:  # a broker-only install: `pip install pylog` has no Spark
    raise ImportError("pylog's Spark connector needs PySpark: pip install 'pylog[spark]'") from exc

from connector.query_progress import progress
from connector.sink_foreach import foreach_batch

__all__ = ["foreach_batch", "progress"]
