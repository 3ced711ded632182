"""log.dirs (JBOD): placement in the emptiest dir, DescribeLogDirs, AlterReplicaLogDirs, restart, via kafka-python."""
from __future__ import annotations

from pathlib import Path

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import NoError

from broker_sim.testing.waiting import wait_until


def partitions_in(directory: Path, topic: str) -> list[int]:
    return sorted(int(p.name.rsplit("-", 1)[1]) for p in directory.iterdir()
                  if p.is_dir() and p.name.rsplit("-", 1)[0] == topic)


def log_dirs_of(admin: KafkaAdminClient, topic: str) -> dict[str, dict[int, tuple[int, int]]]:
    """log dir -> {partition: (size, offset lag)} for ``topic``, from DescribeLogDirs."""
    (answer,) = admin.describe_log_dirs()
    found = {}
    for result in answer["log_dirs"]:
        assert result["error_code"] == 0
        found[result["log_dir"]] = {p["partition_index"]: (p["partition_size"], p["offset_lag"])
                                    for t in result["topics"] if t["name"] == topic for p in t["partitions"]}
    return found


def test_partitions_spread_over_log_dirs_move_between_them_and_are_found_after_a_restart(
        pylog_broker_factory, tmp_path):
    dirs = [tmp_path / "disk-a", tmp_path / "disk-b", tmp_path / "disk-c"]
    config = {"log.dirs": ",".join(map(str, dirs))}
    data_dir = tmp_path / "data"
    broker = pylog_broker_factory(config=config, data_dir=data_dir)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks="all", linger_ms=0)
    try:
        admin.create_topics([NewTopic("jbod", 5, 1)])
        admin.create_topics([NewTopic("more", 1, 1)])
        # the emptiest dir, ties to the first listed: 0, 1, 2 in a, b, c, then 3, 4 in a, b, and "more" in c
        assert [partitions_in(d, "jbod") for d in dirs] == [[0, 3], [1, 4], [2]]
        assert [partitions_in(d, "more") for d in dirs] == [[], [], [0]]
        assert not any(p.name.startswith(("jbod", "more")) for p in data_dir.iterdir())
        for i in range(200):
            producer.send("jbod", value=b"v%03d" % i, partition=0)
        producer.flush()
        described = log_dirs_of(admin, "jbod")
        assert set(described) == {str(d) for d in dirs}
        assert described[str(dirs[0])][0][0] == (dirs[0] / "jbod-0" / "00000000000000000000.log").stat().st_size > 0
        assert described[str(dirs[0])][3] == (0, 0) and described[str(dirs[2])] == {2: (0, 0)}

        # move partition 0 (with its records) from disk-a to disk-c while a producer keeps writing
        result = admin.alter_replica_log_dirs({("jbod", 0, broker.broker_id): str(dirs[2])})
        assert list(result.values()) == [NoError]
        for i in range(200, 400):
            producer.send("jbod", value=b"v%03d" % i, partition=0)
        producer.flush()
        wait_until(lambda: 0 in log_dirs_of(admin, "jbod")[str(dirs[2])], timeout_s=20, what="jbod-0 in disk-c",
                   interval_s=0.05)
        assert partitions_in(dirs[0], "jbod") == [3] and partitions_in(dirs[2], "jbod") == [0, 2]
        for i in range(400, 500):
            producer.send("jbod", value=b"v%03d" % i, partition=0)
        producer.flush()
        bad = admin.alter_replica_log_dirs({("jbod", 1, broker.broker_id): str(tmp_path / "nowhere"),
                                            ("absent", 0, broker.broker_id): str(dirs[0])})
        assert {tpr.topic: error.__name__ for tpr, error in bad.items()} == {
            "jbod": "LogDirNotFoundError", "absent": "ReplicaNotAvailableError"}
    finally:
        producer.close()
        admin.close()
        broker.stop()

    restarted = pylog_broker_factory(config=config, data_dir=data_dir)
    consumer = KafkaConsumer(bootstrap_servers=restarted.bootstrap_servers, auto_offset_reset="earliest",
                             consumer_timeout_ms=10_000)
    try:
        consumer.assign([TopicPartition("jbod", 0)])
        values = [record.value for _, record in zip(range(500), consumer)]
        assert values == [b"v%03d" % i for i in range(500)]  # none lost, none twice, in order
        assert [partitions_in(d, "jbod") for d in dirs] == [[3], [1, 4], [0, 2]]
    finally:
        consumer.close()


def test_pylog_log_dirs_describe_prints_kafka_log_dirs_json(pylog_broker_factory, tmp_path):
    import io
    import json

    from broker_sim.tools.cli import main

    dirs = [tmp_path / "d1", tmp_path / "d2"]
    broker = pylog_broker_factory(config={"log.dirs": ",".join(map(str, dirs))})
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        admin.create_topics([NewTopic("shown", 2, 1), NewTopic("hidden", 1, 1)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    producer.send("shown", b"x" * 100, partition=1).get(timeout=10)
    producer.close()
    out, err = io.StringIO(), io.StringIO()
    status = main(["log-dirs", "describe", "--bootstrap-server", broker.bootstrap_servers, "--topic-list", "shown",
                   "--broker-list", str(broker.broker_id)], stdout=out, stderr=err)
    assert status == 0, err.getvalue()
    lines = out.getvalue().splitlines()
    assert lines[:2] == ["Querying brokers for log directories information",
                         f"Received log directory information from brokers {broker.broker_id}"]
    described = json.loads(lines[2])
    assert described["version"] == 1 and [b["broker"] for b in described["brokers"]] == [broker.broker_id]
    log_dirs = {d["logDir"]: d for d in described["brokers"][0]["logDirs"]}
    assert set(log_dirs) == {str(d) for d in dirs}
    assert [d["error"] for d in log_dirs.values()] == [None, None]
    shown_0, = log_dirs[str(dirs[0])]["partitions"]  # hidden-0, in d1 too, is filtered out
    shown_1, = log_dirs[str(dirs[1])]["partitions"]
    assert shown_0 == {"partition": "shown-0", "size": 0, "offsetLag": 0, "isFuture": False}
    assert shown_1["partition"] == "shown-1" and shown_1["size"] > 100

    out, err = io.StringIO(), io.StringIO()
    assert main(["log-dirs", "describe", "--bootstrap-server", broker.bootstrap_servers, "--broker-list", "7"],
                stdout=out, stderr=err) == 1
    assert "The given brokers do not exist from --broker-list: 7" in err.getvalue()
