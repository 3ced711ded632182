"""Network partitions between broker containers: what processes on one loopback cannot show.

* An isolated leader is a zombie: clients still reach it, it takes acks=1 writes, but it can never
  acknowledge an acks=all write (its followers are gone and it cannot shrink the ISR without ZooKeeper).
  After the heal it truncates to the new leader (KIP-101) and its acks=1 writes are gone — Kafka's
  documented behaviour; the count is reported. No acks=all write is lost.
* The Jepsen-style workload (broker_sim.testing.jepsen_workload) under the partition nemesis: a leader isolated,
  a follower isolated, ZooKeeper split from every broker, a bridge; heal after each; the checker must hold.
  ``PYLOG_PARTITION_SECONDS`` (default 65) sets the faulty phase; ``ci/stress_partitions.sh N`` runs N
  longer rounds.
"""
from __future__ import annotations

import json
import os
import sys
import time

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from broker_sim.testing.jepsen_checker import check
from broker_sim.testing.jepsen_workload import WorkloadOptions, run_workload, workload_budget_s

pytestmark = [pytest.mark.containers, pytest.mark.slow]

# the workload runs this long, then on until a round of each partition kind has completed (a slow machine's rounds
# take ~22 s: docker network calls, the fault, the heal), at most PARTITION_MAX_SECONDS
PARTITION_SECONDS = float(os.environ.get("PYLOG_PARTITION_SECONDS", "60"))
PARTITION_MAX_SECONDS = PARTITION_SECONDS + 90.0


def _report(name: str, result: dict) -> None:
    print(json.dumps({name: result}, indent=2))
    path = os.environ.get("PYLOG_PARTITION_REPORT")
    if path:
        with open(path, "a") as report:
            report.write(json.dumps({name: result}) + "\n")


def _read(bootstrap: str, topic: str) -> list[tuple[int, bytes]]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        end = consumer.end_offsets([tp])[tp]
        got, deadline = [], time.monotonic() + 60
        while consumer.position(tp) < end:
            assert time.monotonic() < deadline, f"read {consumer.position(tp)} of {end}"
            for records in consumer.poll(timeout_ms=500).values():
                got.extend((r.offset, r.value) for r in records)
        return got
    finally:
        consumer.close()


def test_an_isolated_leader_is_fenced_and_truncated_and_no_acks_all_write_is_lost(tmp_path):
    """Mutation: PylogClusterContainers.partition a no-op -> "an isolated leader acknowledged an acks=all
    write: 3 == 0" (the test cannot pass on a fault that did not happen)."""
    from broker_sim.testing.containers import PylogClusterContainers
    from broker_sim.testing.requirements import missing
    from broker_sim.testing.containers import docker_unavailable

    reason = docker_unavailable()
    if reason:
        missing("docker", reason)
    with PylogClusterContainers(brokers=3, data_root=tmp_path) as cluster:
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        admin.create_topics([NewTopic("zombie", 1, 3, topic_configs={"min.insync.replicas": "2"})])
        admin.close()
        cluster.wait_for_full_isr("zombie", 1, timeout_s=60)
        acked_all = []
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all")
        for i in range(20):
            producer.send("zombie", f"before-{i}".encode()).get(timeout=30)
            acked_all.append(f"before-{i}".encode())
        producer.close()

        leader = cluster.leader_of("zombie", 0)
        others = [b for b in range(3) if b != leader]
        cluster.isolate(leader)
        started = time.monotonic()
        zombie = cluster.brokers[leader].get_bootstrap_server()
        # requests to the zombie itself, over one connection (a client library would refresh its metadata from a
        # healthy broker and send to the new leader, which proves nothing about the zombie — seen under load):
        # acks=1 is appended there; acks=all must never be acknowledged
        from tests.integration.kafka_wire import WireClient, produce_request, record_batch
        acked_one = []
        for i in range(10):
            try:
                with WireClient(zombie, timeout=10) as client:
                    answer = client.call(produce_request("zombie", 0, record_batch(
                        [f"zombie-acks1-{i}".encode()], key=None), acks=1))
                if answer.responses[0].partition_responses[0].error_code == 0:
                    acked_one.append(i)
            except Exception:  # noqa: BLE001 - the zombie may already refuse or hang up; not acknowledged
                pass
        acks_all_on_zombie = 0
        for i in range(3):
            try:  # the broker waits at most the request's timeout_ms (5 s) for the ISR
                with WireClient(zombie, timeout=15) as client:
                    answer = client.call(produce_request("zombie", 0, record_batch(
                        [f"zombie-acksall-{i}".encode()], key=None), acks=-1))
                if answer.responses[0].partition_responses[0].error_code == 0:
                    acks_all_on_zombie += 1
            except Exception:  # noqa: BLE001 - NOT_ENOUGH_REPLICAS / timeout / closed: what must happen
                pass
        assert acks_all_on_zombie == 0, "an isolated leader acknowledged an acks=all write"

        # None until then; the id, broker 0 included (wait_for returns anything but None/False)
        new_leader = cluster.wait_for(
            lambda: found if (found := cluster.leader_of("zombie", 0, via=others)) not in (leader, -1) else None,
            # a 6 s ZooKeeper session: the controller moves leadership in well under 30 s, also on loaded cores
            timeout_s=60, what="leadership never moved off the isolated leader")
        assert new_leader in others, new_leader
        elected_s = time.monotonic() - started
        majority = ",".join(cluster.brokers[b].get_bootstrap_server() for b in others)
        producer = KafkaProducer(bootstrap_servers=majority, acks="all")
        for i in range(20):
            producer.send("zombie", f"after-{i}".encode()).get(timeout=30)
            acked_all.append(f"after-{i}".encode())
        producer.close()

        healed = time.monotonic()
        cluster.heal_network()
        cluster.wait_for_full_isr("zombie", 1, timeout_s=120)
        recovered_s = time.monotonic() - healed
        # every replica, the old leader included, now holds exactly the acks=all writes, in order
        from broker_sim.testing.jepsen_checker import replica_difference, replica_logs
        replicas = cluster.wait_for(
            lambda: logs if len(logs := replica_logs(cluster.partition_dirs("zombie", 0))) == 3
            and replica_difference(logs) is None else None, timeout_s=60, what="replicas identical after heal")
        values = [v for _, v in _read(cluster.bootstrap_servers, "zombie")]
        assert values == acked_all, "the log is not exactly the acknowledged acks=all writes"
        lost_acks1 = sum(1 for i in acked_one if f"zombie-acks1-{i}".encode() not in values)
        _report("isolated_leader", {"leader": leader, "new_leader": new_leader, "elected_after_s": round(elected_s, 1),
                                    "recovered_after_heal_s": round(recovered_s, 1),
                                    "acks1_acknowledged_by_zombie": len(acked_one),
                                    "acks1_lost_at_heal": lost_acks1, "acks_all_acknowledged_by_zombie": 0,
                                    "acks_all_lost": 0, "replicas_compared": sorted(replicas)})
        assert lost_acks1 == len(acked_one), "a zombie's acks=1 write survived the truncation"


def test_partition_nemesis_keeps_every_acks_all_write(tmp_path):
    """The checker on a run with every partition kind; valid means no anomaly AND enough evidence."""
    from broker_sim.testing.containers import PARTITION_FAULTS, PylogClusterContainers, docker_unavailable
    from broker_sim.testing.containers import partition_nemesis
    from broker_sim.testing.requirements import missing

    reason = docker_unavailable()
    if reason:
        missing("docker", reason)
    seed = int(os.environ.get("PYLOG_NEMESIS_SEED", str(int(time.time()))))
    options = WorkloadOptions(topic="partitions", partitions=3, replication_factor=3, min_insync_replicas=2,
                              producers=2, rate_per_producer=50.0, duration_s=PARTITION_SECONDS,
                              min_faults=len(PARTITION_FAULTS), max_duration_s=PARTITION_MAX_SECONDS,
                              nemesis_interval_s=1.0, fault_s=(7.0, 8.0), seed=seed, heal_timeout_s=90.0,
                              message_timeout_ms=30_000, final_read_timeout_s=30.0, replica_sync_timeout_s=30.0,
                              log=lambda line: print(line, file=sys.stderr, flush=True))
    started = time.monotonic()
    with PylogClusterContainers(brokers=3, data_root=tmp_path) as cluster:
        history = run_workload(cluster, options, nemesis_factory=partition_nemesis())
    result = check(history)
    faults = [e for e in history.events if e.get("fault")]
    recovered: dict[str, list[float]] = {}
    for event in history.events:
        if "recovered_s" in event:
            recovered.setdefault(event["healed"], []).append(event["recovered_s"])
    summary = {"seed": seed, "rounds": len(faults), "duration_s": round(time.monotonic() - started, 1),
               "faults_by_kind": {k: sum(1 for f in faults if f["fault"] == k) for k in PARTITION_FAULTS},
               "acknowledged": result["acked"], "anomalies": sum(result[a] for a in result if a in (
                   "lost", "duplicated", "wrong_offset", "nonmonotonic", "reordered", "unexpected",
                   "lost_reads", "nonmonotonic_polls", "skipped_reads", "divergent")),
               "recovery_s_by_kind": {k: max(v) for k, v in recovered.items()},
               # a producer's fatal error (e.g. librdkafka's idempotence desync) starts a new incarnation: its
               # in-flight values are indeterminate and the checks above still hold; reported for the record
               "producer_fatal_errors": [e["error"] for e in history.events if e.get("fatal")],
               # librdkafka's epoch-bump resends (the checker's module docstring): the client's, not an anomaly
               "client_duplicated": result["client_duplicated"],
               "valid": result["valid"], "problems": result["problems"]}
    (tmp_path / "history.json").write_text(history.to_json())
    _report("partition_nemesis", summary)
    assert all(summary["faults_by_kind"].values()), (summary["faults_by_kind"], history.events)
    assert result["valid"], json.dumps(result, indent=2)


# the run's own bounds, so a stuck phase fails with its message, not the pytest-timeout kill
test_partition_nemesis_keeps_every_acks_all_write = pytest.mark.timeout(
    int(workload_budget_s(WorkloadOptions(duration_s=PARTITION_SECONDS, max_duration_s=PARTITION_MAX_SECONDS,
                                          fault_s=(7.0, 8.0), heal_timeout_s=90.0, final_read_timeout_s=30.0,
                                          replica_sync_timeout_s=30.0)) + 180)
)(test_partition_nemesis_keeps_every_acks_all_write)
