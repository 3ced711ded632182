"""``pylog groups list/describe`` recognise the consumer group of a pylog Spark query: Empty (the source commits
as a non-member), committed by a run whose identity and unconfirmed batch the commits' metadata carries."""

import io
import json
import time

from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from broker_sim.tools.cli import main
from connector.options import parse_source_options
from connector.source.offset_reader import OffsetReader
from connector.source.offsets import group_metadata

GROUP = "pylog-0123456789ab-cafe0001"


def pylog(broker, *argv: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    assert main(["--bootstrap-server", broker.bootstrap_servers, *argv], stdout=out, stderr=err) == 0, err.getvalue()
    return out.getvalue()


def commit(broker, offsets: dict, run: dict, planned: dict) -> None:
    """Commit as the stream reader does (connector.source.readers._commit_to_group)."""
    reader = OffsetReader(parse_source_options({"kafka.bootstrap.servers": broker.bootstrap_servers,
                                                "subscribe": "events"}))
    try:
        reader.commit_group_offsets(GROUP, offsets, {tp: group_metadata(run, planned.get(tp)) for tp in offsets})
    finally:
        reader.close()


def test_a_query_group_shows_its_run_and_unconfirmed_batch_then_its_stop(pylog_broker):
    admin = KafkaAdminClient(bootstrap_servers=pylog_broker.bootstrap_servers)
    admin.create_topics([NewTopic("events", 2, 1)])
    admin.close()
    now = int(time.time() * 1000)
    run = {"run": "1a2b3c4d", "host": "driver-7", "pid": 4242, "started": now - 60_000, "batches": 7, "at": now}
    commit(pylog_broker, {("events", 0): 300, ("events", 1): 100}, run, {("events", 0): 600})

    listed = {row["group"]: row for row in json.loads(pylog(pylog_broker, "groups", "list", "--format", "json"))}
    assert listed[GROUP]["state"] == "Empty"
    assert listed[GROUP]["committed_by"] == {**run, "in_flight": {"events-0": [300, 600]}}
    line = next(line for line in pylog(pylog_broker, "groups", "list").splitlines() if line.startswith(GROUP))
    assert "pylog query run 1a2b3c4d on driver-7 pid 4242, 7 batches, last commit" in line
    assert line.endswith("not confirmed: events-0:300..600")

    stopped = {**run, "state": "stopped", "query": "9f1c-query-id", "name": "etl", "batchId": 8, "at": now + 1}
    commit(pylog_broker, {("events", 0): 600, ("events", 1): 100}, stopped, {})
    (described,) = json.loads(pylog(pylog_broker, "groups", "describe", GROUP, "--format", "json"))
    assert described["committed_by"]["in_flight"] == {}
    assert described["committed_by"]["query"] == "9f1c-query-id"
    text = pylog(pylog_broker, "groups", "describe", GROUP)
    assert "Committed by pylog query run 1a2b3c4d on driver-7 pid 4242, stopped: Spark query 9f1c-query-id 'etl' " \
           "after batch 8, last commit" in text
