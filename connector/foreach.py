"""``connector.foreach_batch``: the exactly-once pylog sink as a ``foreachBatch`` function, for update mode.

Usage::

    import connector

    query = (windowed_counts                      # an aggregation with a watermark
             .selectExpr("CAST(window.start AS STRING) AS key", "CAST(count AS STRING) AS value")
             .writeStream.outputMode("update")
             .foreachBatch(connector.foreach_batch(**{"kafka.bootstrap.servers": "127.0.0.1:9092",
                                                     "topic": "counts"}))
             .option("checkpointLocation", "/tmp/ckpt")
             .start())

Why it exists: Spark refuses ``writeStream.format("pylog")`` in update mode
(``requirement failed: pylog does not support Update mode.``). Spark's Kafka
sink passes because its write builder implements
``SupportsStreamingUpdateAsAppend``; Spark 4.3's Python data sources build
writes with ``PythonWriteBuilder``, which implements only ``SupportsTruncate``
(append and complete modes), and the check runs in the JVM before any pylog
code, so pylog cannot answer with a better message either.

Theory of operation: ``foreach_batch(**options)`` validates the sink options
once, on the driver, and returns a function of ``(batch_df, batch_id)``.
Spark calls it on the driver for each micro-batch, on the thread that runs
the query, where the local property ``sql.streaming.queryId`` holds the
query's id (kept in the checkpoint, so a restart keeps it). The function
writes the batch with ``batch_df.write.format("pylog")``, passing the query id
and batch id as the internal options ``pylog.queryId`` / ``pylog.batchId``:
the batch writer then runs exactly the streaming sink's protocol — one
transaction per task, the driver's two-phase commit through the sink log,
keyed ``<sinkId>/<query id>/batch/<batch id>`` — so a batch that Spark replays
after a crash (foreachBatch finished, the checkpoint's commit did not) is
found COMPLETED and its new transactions are aborted instead of committed,
and one interrupted mid-commit is rolled forward. Options are the sink's
(``connector.options.parse_sink_options``).
"""
from __future__ import annotations

from typing import Callable, Mapping

from connector.options import (
    BATCH_ID_OPTION, QUERY_ID_OPTION, SINK_OPTION_NAMES, PylogOptionError, parse_sink_options, warn_unknown_options,
)


def foreach_batch(options: Mapping[str, str] | None = None, /, **more: str) -> Callable:
    """A ``foreachBatch`` function that writes each micro-batch exactly once to pylog; see the module docstring.

    Options come as a mapping, keyword arguments or both (``kafka.bootstrap.servers`` needs the mapping or
    ``**{...}``). Raises ``PylogOptionError`` for bad options at once, before the query starts.
    """
    merged = {str(k): str(v) for k, v in {**(options or {}), **more}.items()}
    for internal in (QUERY_ID_OPTION, BATCH_ID_OPTION):
        if internal.lower() in (k.lower() for k in merged):
            raise PylogOptionError(f"Option '{internal}' is set by connector.foreach_batch itself")
    parse_sink_options(merged)
    warn_unknown_options(merged, SINK_OPTION_NAMES, "foreach_batch")

    def write_batch(batch_df, batch_id: int) -> None:
        session = batch_df.sparkSession
        query_id = session.sparkContext.getLocalProperty("sql.streaming.queryId")
        if not query_id:
            raise PylogOptionError("connector.foreach_batch must be given to writeStream.foreachBatch(): it found no "
                                   "streaming query id (local property sql.streaming.queryId) on this thread")
        # Registered by hand so the writer works wherever this function could be imported, even where Spark's
        # discovery of pyspark_pylog cannot see pylog (a notebook that put a checkout on sys.path itself).
        from connector.datasource import PylogDataSource
        session.dataSource.register(PylogDataSource)
        (batch_df.write.format("pylog").options(**merged)
         .option(QUERY_ID_OPTION, query_id).option(BATCH_ID_OPTION, str(batch_id))
         .mode("append").save())

    return write_batch
