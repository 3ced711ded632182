"""The "pylog" Spark data source: Kafka-protocol topics as a streaming or batch DataFrame, and as a sink.

Usage (no registration needed once pylog is installed; ``pyspark_pylog``
exposes ``DefaultSource``)::

    df = (spark.readStream.format("pylog")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events")
          .option("startingOffsets", "earliest")
          .option("maxOffsetsPerTrigger", "10000")
          .load())
    df.selectExpr("CAST(value AS STRING)").writeStream.format("console").start()

    batch = (spark.read.format("pylog")
             .option("kafka.bootstrap.servers", "127.0.0.1:9092")
             .option("subscribe", "events")
             .option("endingOffsets", '{"events":{"0":100}}')
             .load())

or register the class explicitly: ``spark.dataSource.register(PylogDataSource)``.
Writing — ``df.writeStream.format("pylog")`` / ``df.write.format("pylog")``,
exactly-once by default — is ``connector.sink``.

Rows: key binary, value binary, topic string, partition int, offset long,
timestamp timestamp, timestampType int, and with ``includeHeaders=true``
headers array<struct<key string, value binary>> — Spark's Kafka source
schema. Options: see ``connector.options`` and the README's "Spark source".

Theory of operation: ``PylogDataSource`` only holds the options and builds
readers (``connector.source.readers``) and writers
(``connector.sink.writer``). It parses the options once (at ``load()``, so
bad options fail before a query starts); what happens next is the readers'
and writers' business.
"""
from __future__ import annotations

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from connector.options import (
    BATCH_ID_OPTION,
    QUERY_ID_OPTION,
    SINK_OPTION_NAMES,
    SOURCE_OPTION_NAMES,
    PylogOptionError,
    SinkOptions,
    SourceOptions,
    parse_sink_options,
    parse_source_options,
    warn_unknown_options,
)
from connector.sink.writer import PylogBatchWriter, PylogStreamWriter, prepare_sink, stream_writer
from connector.source.readers import PylogBatchReader, PylogStreamReader, source_schema

OVERWRITE_MESSAGE = (
    "pylog does not support save mode Overwrite: a Kafka topic cannot be truncated, and appending instead would "
    "duplicate data (Spark's Kafka sink refuses it too). Write with df.write.format(\"pylog\").mode(\"append\")"
    ".save(); Spark's default mode (ErrorIfExists) and Ignore are refused by Spark for Python data sources.")


class PylogDataSource(DataSource):
    """Holds the options and builds readers and writers; see the module docstring.

    Spark creates the data source before it knows whether it reads or writes,
    so the options are parsed as source options when it asks for a schema or a
    reader (``load()`` asks for the schema, so a bad read option still fails
    there), and as sink options when it asks for a writer.
    """

    def __init__(self, options) -> None:
        super().__init__(options)
        self._source_options: SourceOptions | None = None

    @classmethod
    def name(cls) -> str:
        return "pylog"

    @property
    def source_options(self) -> SourceOptions:
        if self._source_options is None:
            self._source_options = parse_source_options(self.options).resolve_typed()
        return self._source_options

    def schema(self) -> StructType:
        return source_schema(self.source_options.include_headers, self.source_options)

    def reader(self, schema: StructType) -> PylogBatchReader:
        warn_unknown_options(self.options, SOURCE_OPTION_NAMES, "source")
        return PylogBatchReader(self.source_options.for_batch(), schema)

    def streamReader(self, schema: StructType) -> PylogStreamReader:
        warn_unknown_options(self.options, SOURCE_OPTION_NAMES, "source")
        return PylogStreamReader(self.source_options.for_stream(), schema)

    def sink_options(self) -> SinkOptions:
        return parse_sink_options(self.options)

    def writer(self, schema: StructType, overwrite: bool) -> PylogBatchWriter:
        """``df.write``: Spark passes ``overwrite`` for mode("overwrite"), which a topic cannot honour."""
        if overwrite:
            raise PylogOptionError(OVERWRITE_MESSAGE)
        options = self.sink_options()
        query_id = self.options.get(QUERY_ID_OPTION)
        if query_id is None:   # connector.foreach_batch checked its options once, when the query was built
            warn_unknown_options(self.options, SINK_OPTION_NAMES, "sink")
            schema = prepare_sink(schema, options)
            return PylogBatchWriter(options.resolve_typed(schema), schema)
        schema = prepare_sink(schema, options)
        return PylogBatchWriter(options.resolve_typed(schema), schema, query_id, int(self.options[BATCH_ID_OPTION]))

    def streamWriter(self, schema: StructType, overwrite: bool) -> PylogStreamWriter:
        """``writeStream``: append mode, and complete mode (``overwrite``), which Spark's Kafka sink also
        accepts by appending each batch's full result. Update mode never reaches Python (see the README)."""
        warn_unknown_options(self.options, SINK_OPTION_NAMES, "sink")
        options = self.sink_options()
        checkpoint = self.options.get("checkpointLocation")
        schema = prepare_sink(schema, options, checkpoint)
        return stream_writer(options.resolve_typed(schema), schema, checkpoint)
