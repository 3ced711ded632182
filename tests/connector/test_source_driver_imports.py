"""The source driver's Python worker loads no kafka-python client (issue 25: a query's first offset lookup cost
~0.4 s, most of it importing kafka's admin client, consumer and network stack and bootstrapping an admin client).

The driver's calls run in a fresh interpreter, as in Spark's streaming source runner: the stream reader plans
a batch (initialOffset, latestOffset, partitions) and commits its consumer group (OffsetCommit, OffsetFetch on
a restart from ``startingOffsets=group``); then ``sys.modules`` must hold no kafka client module.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

DRIVER = """
import json, sys
from pyspark.sql.streaming.datasource import ReadAllAvailable
from connector.datasource import PylogDataSource
from connector.source.readers import source_schema

options = {"kafka.bootstrap.servers": sys.argv[1], "subscribe": "imports", "startingOffsets": "earliest",
           "groupId": "imports-group"}
reader = PylogDataSource(options).streamReader(source_schema())
start = reader.initialOffset()
end = reader.latestOffset(start, ReadAllAvailable())
planned = reader.partitions(start, end)
reader.commit(end)
reader.stop()
restarted = PylogDataSource({**options, "startingOffsets": "group"}).streamReader(source_schema())
resumed = restarted.initialOffset()
restarted.stop()
client_modules = sorted(m for m in sys.modules
                        if m.split(".")[:2] in (["kafka", "admin"], ["kafka", "consumer"], ["kafka", "net"],
                                                ["kafka", "producer"], ["kafka", "coordinator"]))
# what the sink or a registry needs, never a source driver without a registry: ~30 ms of each query's first call
sink_or_registry = sorted(m for m in ("kafka.protocol.producer", "connector.typed.registry_client", "urllib.request")
                          if m in sys.modules)
# Fetch's message classes: only executors fetch (~18 ms of each query's first call)
executor_only = sorted(m for m in ("kafka.protocol.consumer.fetch",) if m in sys.modules)
print(json.dumps({"start": start, "end": end, "ranges": len(planned), "resumed": resumed,
                  "client_modules": client_modules, "sink_or_registry": sink_or_registry,
                  "executor_only": executor_only}))
"""


def test_the_source_drivers_offset_lookups_and_group_commits_load_no_kafka_client(pylog_broker):
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.admin import NewTopic

    bootstrap = pylog_broker.bootstrap_servers
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic("imports", 2, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(5):
        producer.send("imports", b"v%d" % i, partition=i % 2)
    producer.flush()
    producer.close()

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    run = subprocess.run([sys.executable, "-c", DRIVER, bootstrap], capture_output=True, text=True, env=env,
                         timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["start"] == {"imports": {"0": 0, "1": 0}}
    assert result["end"] == {"imports": {"0": 3, "1": 2}}
    assert result["ranges"] == 2
    assert result["resumed"] == {"imports": {"0": 3, "1": 2}}   # the group commit is real, read back
    assert result["client_modules"] == []
    assert result["sink_or_registry"] == []
    assert result["executor_only"] == []


def test_the_sinks_api_keys_are_kafkas():
    """connector.wire names the sink's API keys (and Fetch's) without importing their messages; they must be
    Kafka's."""
    from kafka.protocol.consumer import FetchRequest
    from kafka.protocol.producer import AddPartitionsToTxnRequest, EndTxnRequest, InitProducerIdRequest, ProduceRequest

    from connector import wire

    assert (wire.PRODUCE_KEY, wire.INIT_PRODUCER_ID_KEY, wire.ADD_PARTITIONS_TO_TXN_KEY, wire.END_TXN_KEY) == (
        ProduceRequest.API_KEY, InitProducerIdRequest.API_KEY, AddPartitionsToTxnRequest.API_KEY,
        EndTxnRequest.API_KEY)
    assert wire.FETCH_KEY == FetchRequest.API_KEY
