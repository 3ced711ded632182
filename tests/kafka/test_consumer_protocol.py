"""Real clients on the KIP-848 consumer group protocol (``group.protocol=consumer``), on broker_sim and on Apache
Kafka with the same assertions.

1. librdkafka: three consumers (each its own process, kip848_consumer.py) on a 6-partition topic of 30,000 records;
   one leaves, one joins, one is SIGKILLed, and the broker restarts under them. Every record is consumed, and a
   record is consumed twice only when the killed consumer had read it after its last commit (the others commit
   in their revocation callback, so a partition handed over is never read twice).
2. Static members (``group.instance.id``): a member that closes (a leave with epoch -2) and comes back within its
   session gets its partitions back, and the other member's assignment never moves.
3. A regex subscription covers every topic it matches, one created after the consumer started too.
4. Kafka's own Java consumer (``VerifiableConsumer --group-protocol consumer``): three of them, one killed; every
   record consumed, duplicates only after the killed one's last commit; Kafka's ``kafka-consumer-groups``
   describes the group (members, protocol) as on Kafka.

Both brokers run with a 500 ms heartbeat interval and a 6 s session (Kafka's floors lowered alike), so a kill is
noticed in seconds.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from broker_sim.local.kafka import java_command
from broker_sim.testing.waiting import wait_until

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "integration"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from client_helpers import BrokerProcess, free_port  # noqa: E402

CONSUMER = Path(__file__).resolve().parent / "kip848_consumer.py"
GROUP_CONFIG = {
    "group.consumer.heartbeat.interval.ms": "500", "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.session.timeout.ms": "6000", "group.consumer.min.session.timeout.ms": "6000",
}
RECORDS = 30_000
PARTITIONS = 6
DEADLINE_S = 120


class Broker:
    """broker_sim in its own process, or an Apache Kafka node of this test's, restartable on the same data."""

    def __init__(self, kind: str, server) -> None:
        self.kind, self.server, self.bootstrap_servers = kind, server, server.bootstrap_servers

    def restart(self) -> None:
        if self.kind == "pylog":
            self.server.kill()
            time.sleep(1.0)
            self.server.start()
        else:
            self.server.stop()
            time.sleep(1.0)
            self.server.restart(1)


@pytest.fixture(params=["pylog", "kafka"])
def broker(request, tmp_path):
    from broker_sim.testing.pytest_plugin import TEST_CONFIG
    from broker_sim.testing.requirements import require_kafka

    require_kafka()
    if request.param == "kafka":
        yield Broker("kafka", request.getfixturevalue("kafka_broker_factory")(config=GROUP_CONFIG))
        return
    process = BrokerProcess(tmp_path / "pylog-data", free_port(),
                            {**TEST_CONFIG, **GROUP_CONFIG, "schema.registry.listeners": ""})
    try:
        yield Broker("pylog", process.start())
    finally:
        process.kill()


def _topic(bootstrap: str, name: str, partitions: int = PARTITIONS, records: int = 0) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    if records:
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
        for i in range(records):
            producer.produce(name, key=str(i).encode(), value=str(i).encode(), partition=i % partitions)
            if i % 5000 == 0:
                producer.poll(0)
        assert producer.flush(30) == 0


class Member:
    """One kip848_consumer.py process and the events it wrote."""

    def __init__(self, broker, group: str, directory: Path, name: str, subscription: str,
                 instance: str | None = None) -> None:
        self.name, self.path = name, directory / f"{name}.events"
        args = [sys.executable, str(CONSUMER), broker.bootstrap_servers, group, str(self.path), subscription]
        if instance:
            args.append(instance)
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=open(directory / f"{name}.err", "ab"),
                                        stdin=subprocess.DEVNULL, start_new_session=True)

    def lines(self) -> list[str]:
        return self.path.read_text().splitlines() if self.path.exists() else []

    def records(self) -> list[tuple[str, int, int]]:
        return [(t, int(p), int(o)) for kind, t, p, o in (line.split() for line in self.lines() if line[0] == "R")
                if kind == "R"]

    def uncommitted_tail(self) -> list[tuple[str, int, int]]:
        """The records read after the last successful commit (what a kill may leave uncommitted)."""
        tail: list = []
        for line in self.lines():
            if line == "C":
                tail = []
            elif line.startswith("R "):
                _, t, p, o = line.split()
                tail.append((t, int(p), int(o)))
        return tail

    def assignment(self) -> set[str]:
        owned: set[str] = set()
        for line in self.lines():
            if line.startswith("A +"):
                owned |= set(filter(None, line[3:].split(",")))
            elif line.startswith("A -"):
                owned -= set(filter(None, line[3:].split(",")))
        return owned

    def stop(self, timeout_s: float = 30) -> None:
        """SIGTERM: it commits, leaves the group and closes."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout_s)
        assert "X" in self.lines(), f"{self.name} did not close cleanly: {self.lines()[-5:]}"

    def kill(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)


def _consumed(members) -> Counter:
    return Counter(r for m in members for r in m.records())


def _wait_consumed(members, topic: str, count: int, what: str) -> None:
    wait_until(lambda: len({r for r in _consumed(members) if r[0] == topic}) >= count, timeout_s=DEADLINE_S,
               what=f"{what}: {count} distinct records of {topic} consumed", interval_s=0.3)


def test_three_librdkafka_members_join_leave_die_and_ride_a_restart_reading_every_record(broker, tmp_path):
    topic, group = f"kip848-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    _topic(broker.bootstrap_servers, topic, records=RECORDS)
    members = [Member(broker, group, tmp_path, f"m{i}", topic) for i in range(3)]
    try:
        _wait_consumed(members, topic, RECORDS // 5, "three members")
        wait_until(lambda: all(m.assignment() for m in members), timeout_s=30, what="each member assigned some")
        members[0].stop()                                   # leaves
        members.append(Member(broker, group, tmp_path, "m3", topic))   # joins
        _wait_consumed(members, topic, RECORDS // 2, "after a leave and a join")
        victim = members[1]
        victim.kill()                                       # dies without a word: its session expires
        broker.restart()
        _wait_consumed(members, topic, RECORDS, "after a kill and a restart")
        for member in members[2:]:
            member.stop()
    finally:
        for member in members:
            if member.process.poll() is None:
                member.kill()
    consumed = _consumed(members)
    assert len(consumed) == RECORDS and {r[2] for r in consumed if r[1] == 0} == set(range(RECORDS // PARTITIONS))
    duplicates = {r for r, n in consumed.items() if n > 1}
    redelivered = set(victim.uncommitted_tail())
    assert duplicates <= redelivered, (f"{broker.kind}: {len(duplicates - redelivered)} records read twice that no "
                                       f"kill explains, e.g. {sorted(duplicates - redelivered)[:5]}")


def test_a_static_member_that_closes_and_returns_gets_its_partitions_back_and_the_other_keeps_its(broker, tmp_path):
    topic, group = f"kip848s-{uuid.uuid4().hex[:6]}", f"gs-{uuid.uuid4().hex[:6]}"
    _topic(broker.bootstrap_servers, topic, partitions=4, records=400)
    first = Member(broker, group, tmp_path, "static-1", topic, instance="instance-1")
    second = Member(broker, group, tmp_path, "static-2", topic, instance="instance-2")
    members = [first, second]
    try:
        wait_until(lambda: len(first.assignment()) == 2 and len(second.assignment()) == 2, timeout_s=60,
                   what="two static members with two partitions each")
        held, kept, lines_before = first.assignment(), second.assignment(), len(second.lines())
        first.stop()                                        # a static member's close: it leaves with epoch -2
        back = Member(broker, group, tmp_path, "static-1-again", topic, instance="instance-1")
        members.append(back)
        wait_until(lambda: back.assignment(), timeout_s=30, what="the returning member assigned")
        time.sleep(2)                                       # heartbeats of the other member in between
        assert back.assignment() == held
        moved = [line for line in second.lines()[lines_before:] if line.startswith("A ")]
        assert second.assignment() == kept and not moved, f"{broker.kind}: the other member moved: {moved}"
        _wait_consumed(members, topic, 400, "static members")
        for member in (second, back):
            member.stop()
    finally:
        for member in members:
            if member.process.poll() is None:
                member.kill()


def test_a_regex_subscription_reads_every_matching_topic_one_created_later_too(broker, tmp_path):
    stem = f"kip848r{uuid.uuid4().hex[:6]}"
    _topic(broker.bootstrap_servers, f"{stem}-a", partitions=2, records=100)
    _topic(broker.bootstrap_servers, f"other{stem}", partitions=2, records=100)   # not matched
    member = Member(broker, f"gr-{uuid.uuid4().hex[:6]}", tmp_path, "regex", f"^{stem}-.*")
    try:
        _wait_consumed([member], f"{stem}-a", 100, "the matching topic")
        _topic(broker.bootstrap_servers, f"{stem}-b", partitions=2, records=100)
        # Kafka resolves regexes again when topics are created (within its 10 s batch interval) and clients
        # refresh their metadata: allow for both
        _wait_consumed([member], f"{stem}-b", 100, "a matching topic created later")
        member.stop()
    finally:
        if member.process.poll() is None:
            member.kill()
    assert not [r for r in member.records() if r[0] == f"other{stem}"]


# --- Kafka's Java consumer ---------------------------------------------------------------------------------

class JavaMember:
    def __init__(self, broker, topic: str, group: str, directory: Path, name: str) -> None:
        self.name, self.out = name, directory / f"{name}.out"
        args = ["--bootstrap-server", broker.bootstrap_servers, "--topic", topic, "--group-id", group,
                "--group-protocol", "consumer", "--reset-policy", "earliest", "--verbose"]
        with open(self.out, "wb") as out, open(directory / f"{name}.err", "wb") as err:
            self.process = subprocess.Popen(java_command("org.apache.kafka.tools.VerifiableConsumer", args),
                                            stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                            start_new_session=True)

    def events(self) -> list[dict]:
        import json

        found = []
        for line in self.out.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                try:
                    found.append(json.loads(line))
                except ValueError:
                    pass
        return found

    def records(self) -> list[tuple[int, int]]:
        return [(e["partition"], e["offset"]) for e in self.events() if e.get("name") == "record_data"]

    def uncommitted_tail(self) -> set[tuple[int, int]]:
        """Records read above the last successfully committed offset of their partition."""
        committed: dict[int, int] = {}
        for e in self.events():
            if e.get("name") == "offsets_committed" and e.get("success"):
                for o in e.get("offsets", ()):
                    committed[o["partition"]] = max(committed.get(o["partition"], 0), o["offset"])
        return {(p, o) for p, o in self.records() if o >= committed.get(p, 0)}

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)


def test_kafkas_java_consumers_share_the_topic_and_one_killed_loses_nothing(broker, tmp_path):
    topic, group = f"kip848j-{uuid.uuid4().hex[:6]}", f"gj-{uuid.uuid4().hex[:6]}"
    records = RECORDS // 3
    _topic(broker.bootstrap_servers, topic, records=records)
    members = [JavaMember(broker, topic, group, tmp_path, f"java{i}") for i in range(3)]

    def distinct() -> int:
        return len({r for m in members for r in m.records()})

    try:
        wait_until(lambda: distinct() >= records // 4, timeout_s=DEADLINE_S, what="a quarter read", interval_s=0.5)
        victim = members[0]
        victim.kill()
        wait_until(lambda: distinct() >= records, timeout_s=DEADLINE_S, what="every record read", interval_s=0.5)

        def described() -> list[list[str]]:
            """kafka-consumer-groups --describe --members: GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS rows."""
            done = subprocess.run(java_command("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", [
                "--bootstrap-server", broker.bootstrap_servers, "--describe", "--group", group, "--members"]),
                capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, done.stderr[-2000:]
            return [line.split() for line in done.stdout.splitlines() if line.startswith(group)]

        # the killed member is described until its session (6 s) ends; then the two live ones are given its
        # partitions, over a heartbeat or two (revocation before assignment): until they have every partition
        def settled():
            found = described()
            return found if len(found) == 2 and sum(int(row[-1]) for row in found) == PARTITIONS else None

        rows = wait_until(settled, timeout_s=60, what="the group described with its two live members, every "
                          "partition between them", interval_s=1)
    finally:
        for member in members:
            member.kill()
    consumed = Counter(r for m in members for r in m.records())
    assert len(consumed) == records
    duplicates = {r for r, n in consumed.items() if n > 1}
    assert duplicates <= victim.uncommitted_tail(), f"{broker.kind}: read twice with no kill to explain it"
    assert len(rows) == 2 and sum(int(row[-1]) for row in rows) == PARTITIONS, rows


def test_pylog_groups_describes_a_consumer_protocol_group_with_its_epochs(broker, tmp_path):
    """``pylog groups describe`` (ConsumerGroupDescribe where DescribeGroups says "not a classic group"): the
    assignor, the group and assignment epochs, each member's epoch and partitions, the committed offsets."""
    import io
    import json

    from broker_sim.tools.cli import main

    topic, group = f"kip848t-{uuid.uuid4().hex[:6]}", f"gt-{uuid.uuid4().hex[:6]}"
    _topic(broker.bootstrap_servers, topic, partitions=4, records=800)
    members = [Member(broker, group, tmp_path, f"t{i}", topic) for i in range(2)]
    try:
        _wait_consumed(members, topic, 800, "two members")
        wait_until(lambda: all(len(m.assignment()) == 2 for m in members), timeout_s=30, what="2 partitions each")

        def describe(fmt: str) -> str:
            out, err = io.StringIO(), io.StringIO()
            assert main(["--bootstrap-server", broker.bootstrap_servers, "groups", "describe", group,
                         "--format", fmt], stdout=out, stderr=err) == 0, err.getvalue()
            return out.getvalue()

        # the members commit every 200 records: wait for a description with the group Stable and every offset in
        def settled():
            found = json.loads(describe("json"))[0]
            stable = found["state"] == "Stable" and all(o["committed_offset"] for o in found["offsets"])
            return found if stable and len(found["offsets"]) == 4 else None

        doc = wait_until(settled, timeout_s=30, what="a Stable group with its offsets", interval_s=0.5)
        text = describe("text")
    finally:
        for member in members:
            member.kill()
    assert doc["group_protocol"] == "consumer" and doc["protocol"] == "uniform" and doc["group_epoch"] >= 2
    assert sorted(sum(len(p) for p in m["assignment"].values()) for m in doc["members"]) == [2, 2]
    assert all(m["member_epoch"] == doc["assignment_epoch"] for m in doc["members"])
    assert "group protocol consumer" in text and "EPOCH" in text and "TARGET-ASSIGNMENT" in text


def test_the_spark_sources_group_commit_is_refused_while_a_consumer_group_holds_the_id_and_taken_once_empty(
        broker, tmp_path):
    """The connector commits as a non-member (generation -1); a group id that consumers of the new protocol hold
    gets Kafka's UNKNOWN_MEMBER_ID, told as such, and once they left the commit lands in the (empty) group."""
    from connector.options import parse_source_options
    from connector.source.offset_reader import OffsetReader

    topic, group = f"kip848c-{uuid.uuid4().hex[:6]}", f"gc-{uuid.uuid4().hex[:6]}"
    _topic(broker.bootstrap_servers, topic, partitions=2, records=10)
    member = Member(broker, group, tmp_path, "holder", topic)
    reader = OffsetReader(parse_source_options({"kafka.bootstrap.servers": broker.bootstrap_servers,
                                                "subscribe": topic}))
    try:
        _wait_consumed([member], topic, 10, "the group's own consumer")
        with pytest.raises(RuntimeError, match="UNKNOWN_MEMBER_ID: the group has active members"):
            reader.commit_group_offsets(group, {(topic, 0): 3})
        member.stop()
        wait_until(lambda: _try_commit(reader, group, {(topic, 0): 4, (topic, 1): 4}), timeout_s=30,
                   what="the commit taken by the emptied group", retry_on=(RuntimeError,), interval_s=0.5)
        assert reader.group_commits([(topic, 0), (topic, 1)], group) == {(topic, 0): (4, ""), (topic, 1): (4, "")}
    finally:
        reader.close()
        if member.process.poll() is None:
            member.kill()


def _try_commit(reader, group: str, offsets: dict) -> bool:
    reader.commit_group_offsets(group, offsets)
    return True
