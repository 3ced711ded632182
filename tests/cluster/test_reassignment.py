"""Partition reassignment (KIP-455), throttles (KIP-73) and broker addition on a real LocalCluster.

One module cluster: 3 brokers started, a 4th added with ``LocalCluster.add_broker()``.  Each test moves
partitions with kafka-python's admin client or the ``pylog reassign`` tool and checks the outcome on the
brokers themselves (Metadata, ZooKeeper's assignment znode, the partition directories on disk).
"""
from __future__ import annotations

import contextlib
import io
import json
import threading
import time

import pytest
from cluster_helpers import create_topic, produce, read_partition, start_cluster
from kafka import KafkaAdminClient, TopicPartition
from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType
from kafka.errors import InvalidReplicationAssignmentError, NoReassignmentInProgressError, UnknownTopicOrPartitionError

from broker_sim.controller import zk_layout
from broker_sim.tools import cli
from broker_sim.testing.waiting import wait_until

RACKS = ["a", "a", "b", "b"]  # broker i in RACKS[i]: brokers 0, 1 in rack a, 2, 3 (added) in rack b
RATE_CONFIGS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def cluster4(tmp_path_factory):
    running = start_cluster(tmp_path_factory.mktemp("reassign"), configs={"replica.fetch.max.bytes": "131072"},
                            racks=RACKS)
    try:
        added = running.add_broker()
        assert added == 3 and running.broker_ids == [0, 1, 2, 3]
        assert set(running.metadata().brokers) == {0, 1, 2, 3}
        yield running
    finally:
        running.stop_all()


@pytest.fixture
def admin(cluster4):
    cluster4.heal(wait=True)
    client = KafkaAdminClient(bootstrap_servers=cluster4.bootstrap_servers, request_timeout_ms=30000)
    yield client
    client.close()


def new_topic(cluster, topic: str, partitions: int, replication_factor: int, configs=None) -> None:
    create_topic(cluster.bootstrap_servers, topic, partitions=partitions, replication_factor=replication_factor,
                 configs=configs)
    cluster.wait_for_full_isr(topic, partitions, timeout_s=30)


def replicas_of(cluster, topic: str, partition: int) -> tuple:
    return tuple(cluster.partition(topic, partition).replicas)


def log_bytes(directory) -> int:
    return sum(f.stat().st_size for f in directory.glob("*.log")) if directory.exists() else 0


def set_rates(admin, brokers, rate: int | None) -> None:
    op = (AlterConfigOp.SET, str(rate)) if rate is not None else (AlterConfigOp.DELETE, None)
    admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, str(b), configs={n: op for n in RATE_CONFIGS})
                         for b in brokers], raise_on_unknown=False, incremental=True)


def throttle_topic(admin, topic: str, rate: int, brokers) -> None:
    admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs={
        "leader.replication.throttled.replicas": (AlterConfigOp.SET, "*"),
        "follower.replication.throttled.replicas": (AlterConfigOp.SET, "*")})],
        raise_on_unknown=False, incremental=True)
    set_rates(admin, brokers, rate)


def fill(cluster, topic: str, megabytes: int, *, partition: int = 0) -> int:
    count = megabytes * 1024
    results = produce(cluster.bootstrap_servers, topic, (b"%07d" % i + b"x" * 1017 for i in range(count)),
                      partition=partition, acks="all", extra={"linger.ms": 20, "batch.size": 262144})
    assert all(err is None for err, _ in results)
    return count


def copy_rate(directory, what: str) -> float:
    """The rate a replica's log grew at from 1 to 8 MiB (least-squares slope), asserted 1 MiB/s +-20%."""
    samples = []
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline:
        size = log_bytes(directory)
        samples.append((time.monotonic(), size))
        if size >= 8 * MIB:
            break
        time.sleep(0.05)
    window = [(t, s) for t, s in samples if 1 * MIB <= s <= 8 * MIB]
    assert len(window) > 10, f"the copy was not observed: {samples[-3:]}"
    mean_t = sum(t for t, _ in window) / len(window)
    mean_s = sum(s for _, s in window) / len(window)
    rate = (sum((t - mean_t) * (s - mean_s) for t, s in window) / sum((t - mean_t) ** 2 for t, _ in window))
    print(json.dumps({"throttled": what, "throttle_bytes_per_s": MIB, "measured_bytes_per_s": round(rate),
                      "ratio": round(rate / MIB, 3)}))
    assert 0.8 * MIB <= rate <= 1.2 * MIB, f"copied at {rate / MIB:.2f} MiB/s under a 1 MiB/s throttle ({what})"
    return rate


def test_alter_and_list_refuse_bad_requests_naming_the_problem(cluster4, admin, topic_name):
    new_topic(cluster4, topic_name, 1, 2)
    assert admin.list_partition_reassignments() == {}
    tp = TopicPartition(topic_name, 0)
    results = admin.alter_partition_reassignments({
        tp: [0, 9], TopicPartition(topic_name, 5): [0, 1], TopicPartition("no-such-topic", 0): [0]})
    assert results[tp] is InvalidReplicationAssignmentError  # broker 9 is not alive
    assert results[TopicPartition(topic_name, 5)] is UnknownTopicOrPartitionError
    assert results[TopicPartition("no-such-topic", 0)] is UnknownTopicOrPartitionError
    assert admin.alter_partition_reassignments({tp: [1, 1]})[tp] is InvalidReplicationAssignmentError
    assert admin.alter_partition_reassignments({tp: None})[tp] is NoReassignmentInProgressError
    assert admin.list_partition_reassignments() == {}


def test_a_broker_that_is_not_the_controller_answers_not_controller(cluster4, admin, topic_name):
    from kafka.protocol.admin import AlterPartitionReassignmentsRequest as Alter
    from kafka.protocol.admin import ListPartitionReassignmentsRequest as List

    from broker_sim.protocol.client import WireConnection

    new_topic(cluster4, topic_name, 1, 2)
    before = replicas_of(cluster4, topic_name, 0)
    other = next(b for b in cluster4.broker_ids if b != cluster4.controller_id())
    alter = Alter[0](timeout_ms=5000, topics=[Alter.ReassignableTopic(name=topic_name, partitions=[
        Alter.ReassignableTopic.ReassignablePartition(partition_index=0, replicas=[0, 1])])])
    with WireConnection.to(cluster4.address(other), timeout_s=10) as connection:
        assert connection.call(alter).error_code == 41  # NOT_CONTROLLER: clients look for the controller
        assert connection.call(List[0](timeout_ms=5000, topics=None)).error_code == 41
    assert not admin.list_partition_reassignments() and replicas_of(cluster4, topic_name, 0) == before


def test_reassignment_moves_replicas_and_removed_brokers_delete_their_logs(cluster4, admin, topic_name):
    new_topic(cluster4, topic_name, 2, 2)
    values = [b"v%d" % i for i in range(200)]
    produce(cluster4.bootstrap_servers, topic_name, values, partition=0)
    before = replicas_of(cluster4, topic_name, 0)
    target = [3] + [b for b in (0, 1, 2) if b not in before][:1]
    assert admin.alter_partition_reassignments({TopicPartition(topic_name, 0): target}) == {
        TopicPartition(topic_name, 0): None}
    wait_until(lambda: replicas_of(cluster4, topic_name, 0) == tuple(target)
               and not admin.list_partition_reassignments(),
               timeout_s=30, what="the reassignment", interval_s=0.2)
    # the broker answering Metadata follows the partition's state and its assignment through two ZooKeeper
    # watches, so for a moment it can show the new replicas with the ISR before its shrink (seen once in CI)
    state = wait_until(lambda: (lambda s: s if s.leader in target and set(s.isr) <= set(target) else None)(
                           cluster4.partition(topic_name, 0)),
                       timeout_s=10, what="the leader and ISR within the target replicas", interval_s=0.2)
    assert tuple(state.replicas) == tuple(target)
    # the removed brokers deleted their logs; the added one holds every record
    wait_until(lambda: set(cluster4.partition_dirs(topic_name, 0)) == set(target), timeout_s=30,
               what="removed logs deleted", interval_s=0.2)
    assert [v for _, v in read_partition(cluster4.bootstrap_servers, topic_name, 0, 200)] == values
    data, _ = cluster4._zk.get(zk_layout.topic_path(topic_name))
    assignment = zk_layout.decode_topic_assignment(topic_name, data)
    assert assignment.replicas[0] == tuple(target) and not assignment.adding and not assignment.removing


def test_cancel_puts_back_the_origin_replicas(cluster4, admin, topic_name):
    new_topic(cluster4, topic_name, 1, 2)
    origin = replicas_of(cluster4, topic_name, 0)
    fill(cluster4, topic_name, 2)
    spare = next(b for b in (3, 2, 1, 0) if b not in origin)
    throttle_topic(admin, topic_name, 50_000, cluster4.broker_ids)  # 2 MB at 50 KB/s: in flight for 40 s
    try:
        tp = TopicPartition(topic_name, 0)
        assert admin.alter_partition_reassignments({tp: [spare, origin[0]]})[tp] is None
        listed = wait_until(lambda: admin.list_partition_reassignments(), timeout_s=10, what="the reassignment listed",
                            interval_s=0.2)
        assert listed[tp] == {"replicas": [spare, origin[0], origin[1]], "adding_replicas": [spare],
                              "removing_replicas": [origin[1]]}
        wait_until(lambda: spare in cluster4.partition_dirs(topic_name, 0), timeout_s=10,
                   what="the new replica created", interval_s=0.2)
        assert admin.alter_partition_reassignments({tp: None})[tp] is None
        wait_until(lambda: not admin.list_partition_reassignments(), timeout_s=10, what="the cancellation",
                   interval_s=0.2)
        # The controller clears the reassignment in ZooKeeper first; brokers learn the origin replicas from it a
        # moment later (Kafka's controller sends UpdateMetadata after that write too), so Metadata is awaited.
        wait_until(lambda: replicas_of(cluster4, topic_name, 0) == origin, timeout_s=10,
                   what="the origin replicas in Metadata", interval_s=0.2)
        wait_until(lambda: spare not in cluster4.partition_dirs(topic_name, 0), timeout_s=10,
                   what="the cancelled replica deleted", interval_s=0.2)
    finally:
        set_rates(admin, cluster4.broker_ids, None)


def test_throttle_of_one_mib_per_second_is_honoured(cluster4, admin, topic_name, tmp_path):
    new_topic(cluster4, topic_name, 1, 1)
    source = replicas_of(cluster4, topic_name, 0)[0]
    target = next(b for b in (3, 2, 1, 0) if b != source)
    fill(cluster4, topic_name, 9)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic_name, "partition": 0, "replicas": [target], "log_dirs": ["any"]}]}))
    out = io.StringIO()
    assert cli.main(["--bootstrap-server", cluster4.bootstrap_servers, "reassign", "--execute",
                     "--reassignment-json-file", str(plan), "--throttle", str(MIB)], stdout=out) == 0
    copy_rate(cluster4.broker_data_dir(target) / f"{topic_name}-0", "both sides")
    out = io.StringIO()
    wait_until(lambda: cli.main(["--bootstrap-server", cluster4.bootstrap_servers, "reassign", "--verify",
                                 "--reassignment-json-file", str(plan)], stdout=out) == 0,
               timeout_s=30, what="the verify", interval_s=0.2)
    assert "is completed" in out.getvalue() and "Clearing broker-level throttles" in out.getvalue()


def test_a_leader_throttle_alone_holds_the_rate(cluster4, admin, topic_name):
    new_topic(cluster4, topic_name, 1, 1)
    source = replicas_of(cluster4, topic_name, 0)[0]
    target = next(b for b in (3, 2, 1, 0) if b != source)
    fill(cluster4, topic_name, 9)
    admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic_name, configs={
        "leader.replication.throttled.replicas": (AlterConfigOp.SET, f"0:{source}")})],
        raise_on_unknown=False, incremental=True)
    admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, str(source), configs={
        "leader.replication.throttled.rate": (AlterConfigOp.SET, str(MIB))})], raise_on_unknown=False,
        incremental=True)
    try:
        tp = TopicPartition(topic_name, 0)
        assert admin.alter_partition_reassignments({tp: [target]})[tp] is None
        copy_rate(cluster4.broker_data_dir(target) / f"{topic_name}-0", "leader only")
    finally:
        set_rates(admin, cluster4.broker_ids, None)
    wait_until(lambda: replicas_of(cluster4, topic_name, 0) == (target,), timeout_s=30, what="the reassignment",
               interval_s=0.2)


def test_controller_and_target_replica_sigkilled_mid_reassignment(cluster4, admin, topic_name):
    new_topic(cluster4, topic_name, 1, 2,
                 configs={"min.insync.replicas": "1"})
    origin = replicas_of(cluster4, topic_name, 0)
    count = fill(cluster4, topic_name, 2)
    spares = [b for b in (3, 2, 1, 0) if b not in origin]
    target = [spares[0], spares[1]]
    throttle_topic(admin, topic_name, 100_000, cluster4.broker_ids)
    try:
        tp = TopicPartition(topic_name, 0)
        assert admin.alter_partition_reassignments({tp: target})[tp] is None
        wait_until(lambda: all(b in cluster4.partition_dirs(topic_name, 0) for b in target), timeout_s=15,
                   what="the target replicas created", interval_s=0.2)
        controller = cluster4.controller_id()
        cluster4.kill(controller)
        cluster4.restart(controller, wait=True)
        victim = target[1]
        cluster4.kill(victim)
        cluster4.restart(victim, wait=True)
        admin.close()
        fresh = KafkaAdminClient(bootstrap_servers=cluster4.bootstrap_servers, request_timeout_ms=30000)
        try:
            listed = wait_until(lambda: fresh.list_partition_reassignments(), timeout_s=15,
                                what="the reassignment listed", interval_s=0.2)
            assert listed[tp]["adding_replicas"] == target  # still in flight: the throttle holds it
            set_rates(fresh, cluster4.broker_ids, None)
            wait_until(lambda: not fresh.list_partition_reassignments()
                       and replicas_of(cluster4, topic_name, 0) == tuple(target),
                       timeout_s=60, what="the reassignment completed", interval_s=0.2)
        finally:
            fresh.close()
    finally:
        cluster4.heal(wait=True)
    records = read_partition(cluster4.bootstrap_servers, topic_name, 0, count)
    assert [o for o, _ in records] == list(range(count))
    assert [v[:7] for _, v in records] == [b"%07d" % i for i in range(count)]
    wait_until(lambda: set(cluster4.partition_dirs(topic_name, 0)) == set(target), timeout_s=30,
               what="the origin logs deleted", interval_s=0.2)


def test_a_running_reassignment_can_be_changed(cluster4, admin, topic_name):
    new_topic(cluster4, topic_name, 1, 2)
    origin = replicas_of(cluster4, topic_name, 0)
    count = fill(cluster4, topic_name, 1)
    first, second = [b for b in (3, 2, 1, 0) if b not in origin][:2]
    throttle_topic(admin, topic_name, 30_000, cluster4.broker_ids)
    try:
        tp = TopicPartition(topic_name, 0)
        assert admin.alter_partition_reassignments({tp: [first, origin[0]]})[tp] is None
        wait_until(lambda: first in cluster4.partition_dirs(topic_name, 0), timeout_s=10,
                   what="the first target created", interval_s=0.2)
        assert admin.alter_partition_reassignments({tp: [second, origin[1]]})[tp] is None
        listed = wait_until(lambda: admin.list_partition_reassignments().get(tp, {}).get("adding_replicas") == [second]
                            and admin.list_partition_reassignments()[tp],
                            timeout_s=10, what="the new target listed", interval_s=0.2)
        assert listed["removing_replicas"] == [origin[0]]  # from the same origin; the first target is dropped
        wait_until(lambda: first not in cluster4.partition_dirs(topic_name, 0), timeout_s=15,
                   what="the dropped target deleted", interval_s=0.2)
    finally:
        set_rates(admin, cluster4.broker_ids, None)
    wait_until(lambda: replicas_of(cluster4, topic_name, 0) == (second, origin[1])
               and not admin.list_partition_reassignments(),
               timeout_s=30, what="the changed reassignment", interval_s=0.2)
    assert len(read_partition(cluster4.bootstrap_servers, topic_name, 0, count)) == count


def test_the_admin_reassign_partitions_znode_is_run_and_removed(cluster4, admin, topic_name):
    new_topic(cluster4, topic_name, 2, 1)
    produce(cluster4.bootstrap_servers, topic_name, [b"a", b"b"], partition=1)
    targets = {}
    for partition in (0, 1):
        current = replicas_of(cluster4, topic_name, partition)[0]
        targets[(topic_name, partition)] = [next(b for b in (3, 2, 1, 0) if b != current)]
    targets[("no-such-topic", 0)] = [1]  # dropped with an error in the controller's log, as Kafka does
    cluster4._zk.create(zk_layout.REASSIGN_PARTITIONS, zk_layout.encode_reassign_partitions(targets))
    wait_until(lambda: cluster4._zk.exists(zk_layout.REASSIGN_PARTITIONS) is None, timeout_s=30,
               what="the znode removed", interval_s=0.2)
    for (topic, partition), replicas in targets.items():
        if topic == topic_name:  # the brokers' metadata follows the controller's last write a moment later
            wait_until(lambda: replicas_of(cluster4, topic, partition) == tuple(replicas), timeout_s=30,
                       what=f"partition {partition} on {replicas}", interval_s=0.2)
    assert [v for _, v in read_partition(cluster4.bootstrap_servers, topic_name, 1, 2)] == [b"a", b"b"]


def test_generate_spreads_each_partition_over_the_racks(cluster4, tmp_path):
    """--generate places replicas rack-aware (Kafka's AdminUtils order) from the brokers' broker.rack; ids in
    order would put 0 and 1 (both rack a) together for some partition whatever the shift."""
    new_topic(cluster4, "gen-racks", 8, 2)
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": "gen-racks"}]}))
    out = io.StringIO()
    assert cli.main(["--bootstrap-server", cluster4.bootstrap_servers, "reassign", "--generate",
                     "--topics-to-move-json-file", str(topics), "--broker-list", "0,1,2,3"], stdout=out) == 0
    proposed = json.loads(out.getvalue().split("Proposed partition reassignment configuration")[1])
    racks = {p["partition"]: {RACKS[b] for b in p["replicas"]} for p in proposed["partitions"]}
    assert sorted(racks) == list(range(8)) and all(r == {"a", "b"} for r in racks.values()), racks
    out = io.StringIO()
    assert cli.main(["--bootstrap-server", cluster4.bootstrap_servers, "reassign", "--generate",
                     "--disable-rack-aware", "--topics-to-move-json-file", str(topics), "--broker-list", "0,1,2,3"],
                    stdout=out) == 0
    proposed = json.loads(out.getvalue().split("Proposed partition reassignment configuration")[1])
    assert any({RACKS[b] for b in p["replicas"]} == {"a"} or {RACKS[b] for b in p["replicas"]} == {"b"}
               for p in proposed["partitions"]), proposed


def test_reassignment_json_and_tool_arguments_are_checked(tmp_path):
    from broker_sim.tools.reassign import drain_plan, read_reassignment
    from broker_sim.tools.errors import ToolError

    def bad(doc, message):
        path = tmp_path / "plan.json"
        path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
        with pytest.raises(ToolError, match=message):
            read_reassignment(str(path))

    bad("{", "is not JSON")
    bad({"version": 2, "partitions": []}, "version 2")
    bad({"version": 1, "partitions": []}, '"partitions" must be a non-empty list')
    bad({"partitions": [{"topic": "t", "partition": -1, "replicas": [1]}]}, 'needs "topic"')
    bad({"partitions": [{"topic": "t", "partition": 0, "replicas": [1, 1]}]}, "duplicate broker ids")
    bad({"partitions": [{"topic": "t", "partition": 0, "replicas": [1], "log_dirs": ["/d"]}]}, "log_dirs other")
    bad({"partitions": [{"topic": "t", "partition": 0, "replicas": [1]}] * 2}, "appears twice")
    assert drain_plan({("t", 0): [2, 0], ("t", 1): [0, 1], ("t", 2): [1, 3]}, 0, [0, 1, 2, 3]) == {
        ("t", 0): [2, 3], ("t", 1): [2, 1]}  # the least loaded broker not holding the partition, same position
    with pytest.raises(ToolError, match="no other live broker"):
        drain_plan({("t", 0): [0, 1]}, 0, [0, 1])
    for argv, message in ((["--verify", "--reassignment-json-file", "f", "--throttle", "100"],
                           "--throttle: only valid with --execute"),
                          (["--generate", "--broker-list", "0,1"], "--generate needs --topics-to-move-json-file"),
                          (["--cancel"], "need --reassignment-json-file")):
        err = io.StringIO()
        with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as exited:
            cli.main(["reassign", *argv])
        assert exited.value.code == 2 and message in err.getvalue()


def test_the_foreground_cluster_adds_a_broker_on_sigusr1(tmp_path):
    import signal
    import subprocess
    import sys

    from cluster_helpers import zookeeper_missing

    from broker_sim.local.cluster import fetch_metadata

    reason = zookeeper_missing()
    if reason:
        pytest.skip(reason)
    process = subprocess.Popen([sys.executable, "-m", "broker_sim", "cluster", "--brokers", "1",
                                "--data-dir", str(tmp_path / "fg")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        assert line.startswith("PYLOG_BOOTSTRAP_SERVERS="), process.stderr.read() if not line else line
        process.stdout.readline()  # PYLOG_SCHEMA_REGISTRY_URL=...
        process.send_signal(signal.SIGUSR1)
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.append(process.stdout.readline()), daemon=True)
        reader.start()
        reader.join(60)  # bounded: a broker that is never added must fail the test, not hang it
        assert lines, "no new PYLOG_BOOTSTRAP_SERVERS line within 60 s of SIGUSR1"
        line = lines[0]
        servers = line.strip().split("=", 1)[1].split(",")
        assert line.startswith("PYLOG_BOOTSTRAP_SERVERS=") and len(servers) == 2, line
        host, port = servers[1].rsplit(":", 1)
        assert set(fetch_metadata(host, int(port), ()).brokers) == {0, 1}
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
        err = process.stderr.read()
        assert "added broker 1" in err and "broker 1: status 0" in err, err
    finally:
        if process.poll() is None:  # SIGTERM first: the foreground cluster stops its ZooKeeper and brokers
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
