"""format("pylog") over Spark Connect: a topic read, upper-cased and written to another topic exactly-once.

Theory of operation:
1. ``SparkSession.builder.remote(...)`` gives a Spark Connect session. ``local[2]`` starts a Connect server
   inside this process (pyspark's own, on port 15002); ``sc://host:port`` dials a running one.
2. The server, not this client, runs the pylog data source: ``format("pylog")`` is found there as in classic
   Spark (the ``pyspark_pylog`` module), so pylog must be installed where the server's Python workers run.
3. One streaming query with ``trigger(availableNow=True)`` copies every record of ``--source`` that is in the
   topic when it starts to ``--sink``, value upper-cased, key kept; a re-run with the same ``--checkpoint``
   copies only what came since.
4. It prints one JSON line: ``{"source": <records read>, "sink": <records in the sink topic>}``.

Run it (a broker on 127.0.0.1:9092, e.g. ``pylog-broker --port 9092``):

    pip install "pylog[connect]"
    pylog topics create events --partitions 2 && pylog topics create events-upper --partitions 2
    printf 'k1:hello\\nk2:world\\n' | pylog produce events --key-separator :
    python examples/spark_connect.py --bootstrap 127.0.0.1:9092 --source events --sink events-upper
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default=os.environ.get("PYLOG_BOOTSTRAP", "127.0.0.1:9092"),
                        help="kafka.bootstrap.servers (default: $PYLOG_BOOTSTRAP or 127.0.0.1:9092)")
    parser.add_argument("--remote", default=os.environ.get("SPARK_REMOTE", "local[2]"),
                        help="Spark Connect URL: local[N] starts a server in this process, sc://host:port "
                             "dials one (default: $SPARK_REMOTE or local[2])")
    parser.add_argument("--source", default="events", help="topic to read (default: events)")
    parser.add_argument("--sink", default="events-upper", help="topic to write (default: events-upper)")
    parser.add_argument("--checkpoint", default=None,
                        help="checkpointLocation of the query (default: a new temporary directory)")
    return parser.parse_args(argv)


def main(argv=None) -> None:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    args = parse_args(argv)
    spark = SparkSession.builder.remote(args.remote).config("spark.sql.shuffle.partitions", "2").getOrCreate()
    try:
        source = (spark.readStream.format("pylog")
                  .option("kafka.bootstrap.servers", args.bootstrap)
                  .option("subscribe", args.source)
                  .option("startingOffsets", "earliest")
                  .load())
        query = (source.select("key", F.upper(F.col("value").cast("string")).alias("value"))
                 .writeStream.format("pylog")
                 .option("kafka.bootstrap.servers", args.bootstrap)
                 .option("topic", args.sink)
                 .option("checkpointLocation", args.checkpoint or tempfile.mkdtemp(prefix="pylog-connect-"))
                 .trigger(availableNow=True)
                 .start())
        query.awaitTermination()
        read = sum(p.numInputRows for p in query.recentProgress)   # p["numInputRows"] is None under Connect
        written = (spark.read.format("pylog").option("kafka.bootstrap.servers", args.bootstrap)
                   .option("subscribe", args.sink).load().count())
        print(json.dumps({"source": read, "sink": written}), flush=True)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
