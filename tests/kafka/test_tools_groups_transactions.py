"""``kafka-consumer-groups`` and ``kafka-transactions`` against broker_sim and against Apache Kafka: the same
commands, the same exit statuses and (normalized) outputs.

Each test builds the same state on both brokers (a topic with records of fixed timestamps, a transactional
producer) under names of its own, then runs each command on both at once (``test_tools_admin.both``).  What is
per broker is normalized on top of ``test_tools_admin.normalized``: producer ids, member ids, coordinator ids,
times and durations.  Output lines naming other tests' groups or transactions (Kafka's node is the session's)
are left out.

``describe-producers``, ``find-hanging`` and ``abort --start-offset`` read the partitions' producer state with
DescribeProducers (API 61): their tables are compared with only the producer ids (and a marker's broker-stamped
timestamp) masked, rows in sorted order (Kafka lists producers in its hash map's order of its own ids).

Not compared: how ``--describe`` of a deleted group fails (see there).
"""
from __future__ import annotations

import re
import time
import uuid
from datetime import datetime, timezone
from concurrent.futures import ThreadPoolExecutor

import pytest
from kafka import KafkaProducer

from broker_sim.local.kafka import run_tool
from broker_sim.protocol.client import WireConnection
from test_tools_admin import normalized, pylog_node1  # noqa: F401 (a fixture)

# a minute ago, then every second (recent: older records would go at Kafka's first retention pass)
RECORD_TIMES_MS = [(int(time.time()) - 60 + i) * 1000 for i in range(5)]
# an open transaction's record, stamped an hour ago: older than find-hanging's 15-minute bound
OPEN_TIME_MS = (int(time.time()) - 3600) * 1000
_NUMBER = re.compile(r"\d+")
_PADDING = re.compile(r"[ \t]+")


def _topic_with_records(bootstrap: str, topic: str) -> None:
    """Two partitions of five records each, stamped RECORD_TIMES_MS."""
    from kafka.protocol.admin import CreateTopicsRequest

    host, port = bootstrap.rsplit(":", 1)
    with WireConnection.connect(host, int(port), timeout_s=10) as connection:
        created = connection.call(CreateTopicsRequest[4](timeout_ms=10_000, validate_only=False, topics=[
            CreateTopicsRequest.CreatableTopic(name=topic, num_partitions=2, replication_factor=1, assignments=[],
                                               configs=[])]))
    assert [t.error_code for t in created.topics] == [0], created
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        for partition in (0, 1):
            for i, at in enumerate(RECORD_TIMES_MS):
                producer.send(topic, b"v%d" % i, partition=partition, timestamp_ms=at)
        producer.flush(15)
    finally:
        producer.close()


def _mine(text: str, *names: str, numbers: bool = True) -> str:
    """The lines naming one of ``names`` (and the header), column padding (as wide as the widest value) and,
    unless ``numbers``, every number (producer ids, times) replaced."""
    lines = [line for line in text.splitlines()
             if any(name in line for name in names) or line.startswith(("GROUP", "TransactionalId", "Coordinator"))]
    kept = _PADDING.sub(" ", "\n".join(lines))
    return kept if numbers else _NUMBER.sub("<n>", kept)


def _run_both(kafka, pylog, tool: str, args_of: dict) -> dict:
    """{"kafka": (exit status, output), "pylog": ...}: ``args_of[kind]`` run on each broker at once."""
    def run(kind, server):
        args = [a.format(bs=server.bootstrap_servers) for a in args_of[kind]]
        result = run_tool(tool, *args)
        return result.returncode, normalized(result.stdout + result.stderr)
    with ThreadPoolExecutor(2) as pool:
        futures = {kind: pool.submit(run, kind, server) for kind, server in (("kafka", kafka), ("pylog", pylog))}
        return {kind: future.result() for kind, future in futures.items()}


def _same(kafka, pylog, tool: str, *args: str, keep=lambda text: text) -> tuple[int, str]:
    """Run one command on both; assert the same status and (``keep``-filtered) output; return Kafka's."""
    got = _run_both(kafka, pylog, tool, {"kafka": args, "pylog": args})
    answers = {kind: (status, keep(output)) for kind, (status, output) in got.items()}
    assert answers["pylog"] == answers["kafka"], f"{tool} {' '.join(args)}"
    return answers["kafka"]


@pytest.fixture
def both_topics(kafka_broker, pylog_node1):  # noqa: F811
    topic = f"tools-{uuid.uuid4().hex[:8]}"
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda server: _topic_with_records(server.bootstrap_servers, topic), (kafka_broker, pylog_node1)))
    return topic


def test_consumer_groups_reset_describe_delete(kafka_broker, pylog_node1, both_topics):  # noqa: F811
    """--reset-offsets (--to-offset, --shift-by --dry-run, --to-earliest, --to-datetime; --execute) creates and
    moves an inactive group's offsets; --list, --describe (--offsets, --members, --state), --delete-offsets and
    --delete see and change them alike."""
    topic, group = both_topics, f"tools-g-{uuid.uuid4().hex[:8]}"
    kafka, pylog = kafka_broker, pylog_node1

    def groups(*args, keep=lambda text: _mine(text, group)):
        return _same(kafka, pylog, "kafka-consumer-groups", "--bootstrap-server", "{bs}", *args, keep=keep)

    reset = ("--reset-offsets", "--group", group, "--topic", topic)
    status, output = groups(*reset, "--to-offset", "2", "--execute")
    assert status == 0 and output.count(group) == 2, output
    groups(*reset, "--shift-by", "1", "--dry-run")
    groups("--reset-offsets", "--group", group, "--all-topics", "--to-earliest", "--execute")
    third = datetime.fromtimestamp(RECORD_TIMES_MS[3] / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    groups(*reset, "--to-datetime", third, "--execute")
    groups("--list")
    groups("--describe", "--group", group)
    groups("--describe", "--group", group, "--members", keep=lambda text: text)
    groups("--describe", "--group", group, "--state")
    groups("--delete-offsets", "--group", group, "--topic", f"{topic}:0", keep=lambda text: text)
    groups("--describe", "--group", group, "--offsets")
    groups("--delete", "--group", group, keep=lambda text: text)
    # Kafka 4.1's tool asks ConsumerGroupDescribe (KIP-848, issue #39) first and prints its GroupIdNotFound
    # exception; broker_sim does not serve it, so the tool falls back to DescribeGroups' Dead group
    groups("--describe", "--group", group, keep=lambda text: "not found" in text or "does not exist" in text)


def _open_transaction(bootstrap: str, transactional_id: str, topic: str, timestamp_ms: int | None = None) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id,
                             transaction_timeout_ms=600_000)
    producer.init_transactions()
    producer.begin_transaction()
    producer.send(topic, b"open", partition=0, timestamp_ms=timestamp_ms)
    producer.flush(15)
    producer.close(0)  # the transaction stays Ongoing


def _describe_row(kafka, pylog, transactional_id: str) -> dict:
    """{kind: [column values]} of ``kafka-transactions describe``."""
    got = _run_both(kafka, pylog, "kafka-transactions",
                    {kind: ("--bootstrap-server", "{bs}", "describe", "--transactional-id", transactional_id)
                     for kind in ("kafka", "pylog")})
    rows = {}
    for kind, (status, output) in got.items():
        assert status == 0, output
        header, row = [line.split("\t") for line in output.strip().splitlines()[-2:]]
        rows[kind] = dict(zip([h.strip() for h in header], [v.strip() for v in row]))
    return rows


def test_transactions_list_describe_and_abort(kafka_broker, pylog_node1, both_topics):  # noqa: F811
    """list (and --transactional-id-pattern, a full match), describe, and abort of a hanging transaction by
    --producer-id/--producer-epoch/--coordinator-epoch (WriteTxnMarkers from the tool: no authorizer here)."""
    topic, kafka, pylog = both_topics, kafka_broker, pylog_node1
    base = f"tools-tx-{uuid.uuid4().hex[:8]}"
    ids = (f"{base}-open",)
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda server: _open_transaction(server.bootstrap_servers, ids[0], topic), (kafka, pylog)))

    def txns(*args, keep=lambda text: _mine(text, base, numbers=False)):
        return _same(kafka, pylog, "kafka-transactions", "--bootstrap-server", "{bs}", *args, keep=keep)

    status, listed = txns("list")
    assert status == 0 and "Ongoing" in listed, listed
    assert txns("list", "--transactional-id-pattern", f"{base}-.*")[1] == listed
    assert base not in txns("list", "--transactional-id-pattern", base)[1], "a pattern must match the whole id"
    rows = _describe_row(kafka, pylog, ids[0])
    volatile = ("ProducerId", "CurrentTransactionStartTimeMs", "TransactionDurationMs")
    assert ({k: v for k, v in rows["pylog"].items() if k not in volatile}
            == {k: v for k, v in rows["kafka"].items() if k not in volatile}), rows
    abort = {kind: ("--bootstrap-server", "{bs}", "abort", "--topic", topic, "--partition", "0",
                    "--producer-id", rows[kind]["ProducerId"], "--producer-epoch", rows[kind]["ProducerEpoch"],
                    "--coordinator-epoch", "0")
             for kind in ("kafka", "pylog")}
    aborted = _run_both(kafka, pylog, "kafka-transactions", abort)
    assert aborted["pylog"] == aborted["kafka"] and aborted["kafka"][0] == 0, aborted


def _producer_rows(text: str, *topics: str) -> list:
    """A producers table (describe-producers, or find-hanging's rows of ``topics``): the header, then the rows
    sorted, each a list of its columns with the producer id masked and a timestamp the tests did not write (a
    marker's, stamped by the broker) too."""
    lines = [line for line in text.strip().splitlines() if "\t" in line]
    if not lines:
        return [text]
    header = [column.strip() for column in lines[0].split("\t") if column.strip()]
    written = {str(t) for t in (*RECORD_TIMES_MS, OPEN_TIME_MS)}
    rows = []
    for line in lines[1:]:
        row = dict(zip(header, (column.strip() for column in line.split("\t"))))
        if topics and row.get("Topic") not in topics:
            continue
        row["ProducerId"] = "<id>"
        if row["LastTimestamp"] not in written:
            row["LastTimestamp"] = "<broker clock>"
        row.pop("Duration(min)", None)
        rows.append([row[h] for h in header if h in row])
    return [header, *sorted(rows)]


def test_transactions_describe_producers_find_hanging_and_abort_by_start_offset(kafka_broker, pylog_node1,
                                                                                both_topics):  # noqa: F811
    """describe-producers (from the leader and --broker-id 1) lists the idempotent producer that wrote the
    records and the open transaction (start offset 5); find-hanging --broker-id 1 finds it a candidate (its
    record is an hour old) but not hanging (its coordinator has it Ongoing on the partition); abort
    --start-offset 5 finds its producer by the start offset and writes the ABORT marker, after which
    describe-producers shows no open transaction and coordinator epoch 0; an illegal topic name fails with
    Kafka's INVALID_TOPIC_EXCEPTION message."""
    topic, kafka, pylog = both_topics, kafka_broker, pylog_node1
    transactional_id = f"tools-dp-{uuid.uuid4().hex[:8]}"
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda server: _open_transaction(server.bootstrap_servers, transactional_id, topic,
                                                       OPEN_TIME_MS), (kafka, pylog)))

    def txns(*args, keep=lambda text: text):
        return _same(kafka, pylog, "kafka-transactions", "--bootstrap-server", "{bs}", *args, keep=keep)

    describe = ("describe-producers", "--topic", topic, "--partition", "0")
    status, table = txns(*describe, keep=_producer_rows)
    assert status == 0 and table[1:] == [["<id>", "0", "-1", "0", str(OPEN_TIME_MS), "5"],
                                         ["<id>", "0", "-1", "4", str(RECORD_TIMES_MS[4]), "None"]], table
    assert txns(*describe, "--broker-id", "1", keep=_producer_rows)[1] == table
    assert txns("describe-producers", "--topic", topic, "--partition", "1", keep=_producer_rows)[1][1:] == [
        ["<id>", "0", "-1", "4", str(RECORD_TIMES_MS[4]), "None"]]
    status, hanging = txns("find-hanging", "--broker-id", "1", keep=lambda text: _producer_rows(text, topic))
    assert status == 0 and hanging[1:] == [], hanging
    status, _ = txns("abort", "--topic", topic, "--partition", "0", "--start-offset", "5")
    assert status == 0
    status, table = txns(*describe, keep=_producer_rows)
    assert table[1:] == [["<id>", "0", "-1", "4", str(RECORD_TIMES_MS[4]), "None"],
                         ["<id>", "0", "0", "0", "<broker clock>", "None"]], table
    status, missing = txns("abort", "--topic", topic, "--partition", "0", "--start-offset", "5")
    assert status == 1 and "Could not find any open transactions starting at offset 5" in missing, missing
    status, refused = txns("describe-producers", "--topic", "bad!", "--partition", "0", "--broker-id", "1")
    assert status == 1 and "Topic name is invalid: 'bad!' contains" in refused, refused
