"""``pylog groups`` and ``pylog bench --workload groups`` against the in-process broker.

One consumer group goes through its life: members consume and commit, the
tools list and describe it (committed offsets and lag must match what was
produced and consumed), reset-offsets is refused while a member is active,
runs once the group is Empty, and a new member then starts where the reset
put the offsets.
"""

import io
import json
import subprocess
import sys
import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition

from broker_sim.tools.cli import main

TOPIC, GROUP, CLIENT_ID = "jobs", "workers", "pylog-test-worker"
PRODUCED = {0: 5, 1: 3}      # records per partition
COMMITTED = {0: 3, 1: 3}     # what the first member commits: lag 2 on partition 0, 0 on partition 1


class Result:
    def __init__(self, status: int, out: str, err: str):
        self.status, self.out, self.err = status, out, err


def pylog(broker, *argv: str) -> Result:
    """Run ``pylog --bootstrap-server <broker> argv...`` in-process; usage errors give status 2."""
    out, err = io.StringIO(), io.StringIO()
    try:
        status = main(["--bootstrap-server", broker.bootstrap_servers, *argv], stdout=out, stderr=err)
    except SystemExit as exc:
        status = exc.code
    return Result(status, out.getvalue(), err.getvalue())


def produce(broker) -> None:
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    for partition, count in PRODUCED.items():
        for i in range(count):
            producer.send(TOPIC, f"{partition}-{i}".encode(), partition=partition)
    producer.flush()
    producer.close()


def member(broker, auto_offset_reset: str) -> KafkaConsumer:
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=GROUP, client_id=CLIENT_ID,
                             enable_auto_commit=False, auto_offset_reset=auto_offset_reset,
                             session_timeout_ms=6000, heartbeat_interval_ms=1000)
    # kafka-python 3.0.12 can lose a join in flight when a leader that assigned before it knew the
    # topic's partitions rejoins ("No partition metadata for topic"): know them before subscribing
    consumer.partitions_for_topic(TOPIC)
    consumer.subscribe([TOPIC])
    return consumer


def poll_until(consumer: KafkaConsumer, count: int, timeout_s: float = 30.0) -> list:
    records, deadline = [], time.monotonic() + timeout_s
    while len(records) < count and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=200).values():
            records.extend(batch)
    assert len(records) >= count, f"consumed {len(records)} of {count} records in {timeout_s} s"
    return records


@pytest.fixture
def topic(pylog_broker):
    assert pylog(pylog_broker, "topics", "create", TOPIC, "--partitions", "2").status == 0
    produce(pylog_broker)
    return TOPIC


def test_group_life_list_describe_reset_then_new_member_starts_at_zero(pylog_broker, topic):
    consumer = member(pylog_broker, auto_offset_reset="earliest")
    try:
        poll_until(consumer, sum(PRODUCED.values()))
        consumer.commit({TopicPartition(TOPIC, p): OffsetAndMetadata(o, "", -1) for p, o in COMMITTED.items()})

        listed = pylog(pylog_broker, "groups", "list", "--format", "json")
        assert listed.status == 0, listed.err
        assert {"group": GROUP, "state": "Stable", "protocol_type": "consumer"} in json.loads(listed.out)
        text_list = pylog(pylog_broker, "groups", "list")
        assert text_list.out.split()[:3] == ["GROUP", "STATE", "PROTOCOL-TYPE"]
        assert GROUP in text_list.out

        described = pylog(pylog_broker, "groups", "describe", GROUP, "--format", "json")
        assert described.status == 0, described.err
        (group,) = json.loads(described.out)
        assert (group["group"], group["state"], group["protocol_type"]) == (GROUP, "Stable", "consumer")
        (only,) = group["members"]
        assert only["client_id"] == CLIENT_ID
        assert only["assignment"] == {TOPIC: [0, 1]}
        rows = {o["partition"]: o for o in group["offsets"]}
        for partition in PRODUCED:
            assert rows[partition]["committed_offset"] == COMMITTED[partition]
            assert rows[partition]["log_end_offset"] == PRODUCED[partition]
            assert rows[partition]["lag"] == PRODUCED[partition] - COMMITTED[partition]
            assert rows[partition]["member_id"] == only["member_id"]
        assert group["total_lag"] == 2

        refused = pylog(pylog_broker, "groups", "reset-offsets", GROUP, "--topic", TOPIC,
                        "--to-earliest", "--execute")
        assert refused.status == 1
        assert f"'{GROUP}'" in refused.err and "Stable" in refused.err and "inactive" in refused.err
    finally:
        consumer.close()  # LeaveGroup: the group becomes Empty

    empty = json.loads(pylog(pylog_broker, "groups", "describe", GROUP, "--format", "json").out)[0]
    assert empty["state"] == "Empty" and empty["members"] == []
    assert {o["partition"]: o["committed_offset"] for o in empty["offsets"]} == COMMITTED

    dry = pylog(pylog_broker, "groups", "reset-offsets", GROUP, "--topic", TOPIC, "--to-earliest",
                "--format", "json")
    assert dry.status == 0, dry.err
    assert [(r["partition"], r["current_offset"], r["new_offset"]) for r in json.loads(dry.out)] == [
        (0, 3, 0), (1, 3, 0)]
    assert "Dry run" in dry.err
    unchanged = json.loads(pylog(pylog_broker, "groups", "describe", GROUP, "--format", "json").out)[0]
    assert {o["partition"]: o["committed_offset"] for o in unchanged["offsets"]} == COMMITTED

    reset = pylog(pylog_broker, "groups", "reset-offsets", GROUP, "--topic", TOPIC, "--to-earliest", "--execute")
    assert reset.status == 0, reset.err

    # "latest": only the committed offsets the reset wrote can start it at 0.
    again = member(pylog_broker, auto_offset_reset="latest")
    try:
        records = poll_until(again, sum(PRODUCED.values()))
    finally:
        again.close()
    first = {}
    for record in records:
        first.setdefault(record.partition, record.offset)
    assert first == {0: 0, 1: 0}


def test_reset_shift_and_to_offset_are_clamped_to_the_log(pylog_broker, topic):
    commit = pylog(pylog_broker, "groups", "reset-offsets", "fresh", "--topic", f"{TOPIC}:0,1",
                   "--to-offset", "1", "--execute")
    assert commit.status == 0, commit.err
    shifted = pylog(pylog_broker, "groups", "reset-offsets", "fresh", "--topic", TOPIC, "--shift-by", "+10",
                    "--format", "json")
    assert shifted.status == 0, shifted.err
    assert [(r["partition"], r["new_offset"]) for r in json.loads(shifted.out)] == [(0, 5), (1, 3)]
    back = pylog(pylog_broker, "groups", "reset-offsets", "fresh", "--topic", f"{TOPIC}:1", "--shift-by", "-5",
                 "--format", "json")
    assert [(r["partition"], r["new_offset"]) for r in json.loads(back.out)] == [(1, 0)]
    future = pylog(pylog_broker, "groups", "reset-offsets", "fresh", "--topic", TOPIC,
                   "--to-datetime", "2999-01-01T00:00:00Z", "--format", "json")
    assert [r["new_offset"] for r in json.loads(future.out)] == [5, 3]
    past = pylog(pylog_broker, "groups", "reset-offsets", "fresh", "--topic", TOPIC,
                 "--to-datetime", "2000-01-01T00:00:00+00:00", "--format", "json")
    assert [r["new_offset"] for r in json.loads(past.out)] == [0, 0]


def test_delete_empty_group_then_it_is_gone(pylog_broker, topic):
    assert pylog(pylog_broker, "groups", "reset-offsets", "old", "--topic", TOPIC, "--to-latest",
                 "--execute").status == 0
    assert "old" in pylog(pylog_broker, "groups", "list").out.split()
    deleted = pylog(pylog_broker, "groups", "delete", "old")
    assert deleted.status == 0, deleted.err
    assert "'old'" in deleted.out
    assert "old" not in pylog(pylog_broker, "groups", "list").out.split()
    missing = pylog(pylog_broker, "groups", "delete", "old")
    assert missing.status == 1 and "'old'" in missing.err


def test_describe_unknown_group_fails_naming_it(pylog_broker):
    result = pylog(pylog_broker, "groups", "describe", "nobody")
    assert result.status == 1
    assert "'nobody'" in result.err and "does not exist" in result.err
    assert "Traceback" not in result.err


def test_reset_unknown_topic_or_partition_names_it(pylog_broker, topic):
    unknown = pylog(pylog_broker, "groups", "reset-offsets", GROUP, "--topic", "ghost", "--to-latest")
    assert unknown.status == 1 and "'ghost'" in unknown.err
    partition = pylog(pylog_broker, "groups", "reset-offsets", GROUP, "--topic", f"{TOPIC}:9", "--to-latest")
    assert partition.status == 1 and "partition 9" in partition.err
    no_commit = pylog(pylog_broker, "groups", "reset-offsets", GROUP, "--topic", TOPIC, "--shift-by", "1")
    assert no_commit.status == 1 and "--shift-by" in no_commit.err


@pytest.mark.parametrize("argv, option", [
    (["--topic", "t"], "--to-earliest"),
    (["--to-latest"], "--topic"),
    (["--topic", "t:x", "--to-latest"], "--topic"),
    (["--topic", "t", "--to-offset", "-1"], "--to-offset"),
    (["--topic", "t", "--to-datetime", "yesterday"], "--to-datetime"),
    (["--topic", "t", "--to-latest", "--dry-run", "--execute"], "--execute"),
    (["--topic", "t", "--to-latest", "--to-earliest"], "--to-earliest"),
])
def test_bad_reset_arguments_are_usage_errors_naming_the_option(pylog_broker, capsys, argv, option):
    result = pylog(pylog_broker, "groups", "reset-offsets", "g", *argv)
    assert result.status == 2
    assert option in capsys.readouterr().err


def test_group_bench_prints_json_with_expected_keys():
    run = subprocess.run(
        [sys.executable, "-m", "broker_sim.tools.cli", "bench", "--workload", "groups", "--brokers", "pylog",
         "--rounds", "1", "--cycles", "1", "--members", "2", "--group-partitions", "2", "--commits", "20",
         "--timeout-s", "45"],  # a loaded CI machine has needed more than 20 s to form the group
        capture_output=True, text=True, timeout=150)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert set(report) == {"workload", "results", "ratios", "runs"}
    assert report["workload"]["members"] == 2 and report["workload"]["session_timeout_ms"] == 6000
    (pylog_run,) = report["runs"]
    assert (pylog_run["broker"], pylog_run["round"]) == ("pylog", 1)
    assert set(pylog_run["commits"]) == {"kafka_python_commit", "confluent_commit", "raw_commit"}
    results = report["results"]["pylog"]
    assert "errors" not in results, results["errors"]
    for metric in ("form_s", "join_s", "death_s", "death_minus_session_timeout_s",
                   "kafka_python_commit_per_s", "confluent_commit_per_s", "raw_commit_per_s"):
        assert isinstance(results[metric], float), metric
    assert results["death_s"] >= 6.0 - 0.5  # nothing can notice a SIGKILL before the session times out
    assert report["ratios"] == {}
