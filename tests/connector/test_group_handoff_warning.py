"""startingOffsets=group after a run that left a planned batch unconfirmed: the WARNING says how that run ended.

A group handed over by ``connector.stop_query`` during a batch names the stopped query, its last completed
batch and the unconfirmed ranges, and does not tell the user to use ``stop_query``; a group whose run
stopped some other way (here: committed as a running reader commits, then nothing) still suggests it. No
Spark: the query ``stop_query`` stops is a stand-in with the progress Spark reports, the broker in-process.
"""
from __future__ import annotations

import logging
import time

import pytest
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

import connector
from connector.options import parse_source_options
from connector.source.offset_reader import OffsetReader
from connector.source.offsets import group_metadata, to_json_dict, with_group

TOPIC = "handoff-warning"
END = {(TOPIC, 0): 300, (TOPIC, 1): 100}
PLANNED = {(TOPIC, 0): 600, (TOPIC, 1): 200}     # the batch the run was planning when it stopped
STARTED = "startingOffsets=group"


class StoppedQuery:
    """What ``stop_query`` reads of a StreamingQuery: ``stop()``, ``id``, ``name`` and Spark's last progress."""

    def __init__(self, group: str, batch_id: int) -> None:
        self.id, self.name, self.stopped = "5e1d-query-id", "etl", False
        self.lastProgress = {"batchId": batch_id, "sources": [{
            "description": "PythonMicroBatchStream(pylog)",
            "endOffset": with_group(to_json_dict(END), group), "latestOffset": to_json_dict(PLANNED)}]}

    def stop(self) -> None:
        self.stopped = True


@pytest.fixture
def options(pylog_broker):
    admin = KafkaAdminClient(bootstrap_servers=pylog_broker.bootstrap_servers)
    admin.create_topics([NewTopic(TOPIC, 2, 1)])
    admin.close()
    return {"kafka.bootstrap.servers": pylog_broker.bootstrap_servers, "subscribe": TOPIC}


def commit_as_a_running_query(options: dict, group: str) -> None:
    """The stream reader's commit (connector.source.readers): END completed, PLANNED the next batch's end."""
    run = {"run": "1a2b3c4d", "host": "driver-7", "pid": 4242, "started": int(time.time() * 1000)}
    reader = OffsetReader(parse_source_options(options))
    try:
        reader.commit_group_offsets(group, END, {tp: group_metadata(run, PLANNED[tp]) for tp in END})
    finally:
        reader.close()


def start_from_group(options: dict, group: str, caplog) -> list[str]:
    """The successor's start: its offsets and the WARNINGs its offset reader logged."""
    parsed = parse_source_options({**options, "groupId": group, "startingOffsets": "group"}).for_stream()
    reader = OffsetReader(parsed)
    try:
        with caplog.at_level(logging.WARNING, logger="connector.source.offset_reader"):
            assert reader.resolve_bound(parsed.starting, sorted(END), starting=True, option="startingOffsets") == END
    finally:
        reader.close()
    return [r.getMessage() for r in caplog.records if STARTED in r.getMessage()]


def test_after_stop_query_during_a_batch_the_successor_says_stop_query_stopped_it(options, caplog):
    group = "handoff-warning-stopped"
    commit_as_a_running_query(options, group)
    query = StoppedQuery(group, batch_id=7)
    handed = connector.stop_query(query, {**options, "groupId": group})
    assert query.stopped and handed[0]["unconfirmed"] == {TOPIC: {"0": [300, 600], "1": [100, 200]}}
    [warning] = start_from_group(options, group, caplog)
    assert (f"consumer group '{group}' was handed over by connector.stop_query, which stopped Spark query "
            f"5e1d-query-id 'etl' (pylog run 1a2b3c4d, driver driver-7, pid 4242) after batch 7, during the next "
            f"batch: {TOPIC}-0 offsets [300, 600), {TOPIC}-1 offsets [100, 200) (400 offsets) were planned and "
            f"not confirmed complete") in warning
    assert "For an exact handoff" not in warning


def test_after_any_other_stop_the_successor_suggests_stop_query(options, caplog):
    group = "handoff-warning-crashed"
    commit_as_a_running_query(options, group)
    [warning] = start_from_group(options, group, caplog)
    assert f"consumer group '{group}' was last committed by pylog run 1a2b3c4d (driver driver-7, pid 4242)" in warning
    assert f"{TOPIC}-0 offsets [300, 600), {TOPIC}-1 offsets [100, 200) (400 offsets)" in warning
    assert warning.endswith("For an exact handoff stop queries with connector.stop_query(query, options).")
