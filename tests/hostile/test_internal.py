"""Hostile clients against the internal topics and inter-broker APIs, and a start that finds bad data.

- Produce to ``__consumer_offsets`` / ``__transaction_state`` (a valid key with a
  truncated value: on the unhardened broker acknowledged, then every start failed
  loading it) answers INVALID_TOPIC_EXCEPTION; CreateTopics of those names answers
  INVALID_REQUEST while missing and TOPIC_ALREADY_EXISTS once the coordinator made it.
- WriteTxnMarkers from a client (it could commit another producer's open
  transaction, whose abort then left its records committed) on a broker with an
  authorizer that does not allow it CLUSTER_ACTION answers CLUSTER_AUTHORIZATION_FAILED
  for every partition; the victim's abort really aborts.  (Without an authorizer Kafka
  writes any client's markers, as ``kafka-transactions abort`` sends them.)
- Bad records planted into the internal topics' log files of a stopped broker
  (the old hole, replayed by appending raw batches), and corrupt checkpoint files
  (leader epochs, log start offset, high watermarks, producer snapshots): the broker
  starts, keeps every other group's offsets and transaction, and serves.

Each test also bounds the broker's RSS growth (``RSS_BOUND``), runs a kafka-python and
a confluent-kafka round trip (``assert_serving``) and restarts the broker.
"""
from __future__ import annotations

import struct
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from crc32c import crc32c
from kafka.protocol.admin import CreateAclsRequest, CreateTopicsRequest, DescribeTransactionsRequest
from kafka.protocol.producer import WriteTxnMarkersRequest

from broker_sim.coordinator.group.records import (
    OFFSETS_TOPIC, CommittedOffset, GroupKey, OffsetKey, encode_key, encode_offset,
)
from broker_sim.coordinator.internal_topic import partition_for
from broker_sim.coordinator.records import build_batch
from broker_sim.coordinator.txn.records import TRANSACTION_STATE_TOPIC
from broker_sim.coordinator.txn.records import encode_key as txn_key
from broker_sim.storage.batch import parse_batches
from client_helpers import Record, create_topic, produce_kafka_python
from hostile import assert_alive, assert_serving, rss_bytes
from kafka_wire import (
    WireClient, batches_of, fetch_request, fetched_partitions, metadata, produce_request,
    produce_result,
)
from broker_sim.testing.waiting import wait_until

INVALID_TOPIC_EXCEPTION, CLUSTER_AUTHORIZATION_FAILED, TOPIC_ALREADY_EXISTS, INVALID_REQUEST = 17, 31, 36, 42
PARTITIONS = 3  # of each internal topic: few files to plant into, quick to create
CONFIG = {"offsets.topic.num.partitions": PARTITIONS, "transaction.state.log.num.partitions": PARTITIONS,
          "group.initial.rebalance.delay.ms": 0}
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
RSS_BOUND = 16 << 20  # measured 0.01-2.7 MiB over a ~44 MiB broker: the attacks are small requests


def _commit(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


def _committed(bootstrap: str, group: str, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        return {(tp.topic, tp.partition): tp.offset
                for tp in consumer.committed([TopicPartition(t, p) for t, p in partitions], timeout=15)}
    finally:
        consumer.close()


def _transactional(bootstrap: str, txn_id: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5})
    producer.init_transactions(15)
    return producer


def _committed_transaction(bootstrap: str, txn_id: str, topic: str, values: list[bytes]) -> None:
    producer = _transactional(bootstrap, txn_id)
    producer.begin_transaction()
    for value in values:
        producer.produce(topic, value=value, partition=0)
    producer.commit_transaction(15)


def _read_committed(bootstrap: str, topic: str, until: bytes) -> list[bytes]:
    """Values a read_committed consumer sees in partition 0 up to and including ``until``."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"rc-{uuid.uuid4().hex[:6]}",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 100})
    seen: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        wait_until(lambda: _poll_into(consumer, seen, until), timeout_s=20, what=f"{until!r} read_committed")
        return seen
    finally:
        consumer.close()


def _poll_into(consumer, seen: list[bytes], until: bytes) -> bool:
    for message in consumer.consume(100, timeout=0.2):
        assert not message.error(), message.error()
        seen.append(message.value())
    return until in seen


def _described(bootstrap: str, txn_ids: list[str]) -> dict[str, tuple[int, str, int]]:
    """(error, state, producer id) of each transactional id, as DescribeTransactions answers."""
    with WireClient(bootstrap) as client:
        response = client.call(DescribeTransactionsRequest[0](transactional_ids=txn_ids))
    return {t.transactional_id: (t.error_code, t.transaction_state, t.producer_id) for t in response.transaction_states}


def _create_topics(client: WireClient, name: str) -> tuple[int, str]:
    Topic = CreateTopicsRequest.CreatableTopic
    answer = client.call(CreateTopicsRequest[5](topics=[Topic(name=name, num_partitions=1, replication_factor=1,
                                                              assignments=[], configs=[])],
                                                timeout_ms=5000, validate_only=False)).topics[0]
    return answer.error_code, answer.error_message


def test_clients_cannot_produce_to_or_create_internal_topics(hostile_broker):
    broker = hostile_broker(config=CONFIG)
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, "data", 1)
    rss_before = rss_bytes(broker.process.pid)
    with WireClient(bootstrap) as client:
        # before any transactional producer the coordinator has not made it: nobody else may
        assert _create_topics(client, TRANSACTION_STATE_TOPIC) == (
            INVALID_REQUEST, f"Creation of internal topic {TRANSACTION_STATE_TOPIC} is prohibited.")
        _commit(bootstrap, "real", {("data", 0): 3})
        _committed_transaction(bootstrap, "tx-real", "data", [b"committed"])
        for topic in (OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC):
            assert _create_topics(client, topic)[0] == TOPIC_ALREADY_EXISTS
        # the attack of issue 10: a valid key with a truncated value, into every partition, with each acks
        poison = {OFFSETS_TOPIC: build_batch([(encode_key(OffsetKey("real", "data", 0)), b"\x00\x03\x00")], 0),
                  TRANSACTION_STATE_TOPIC: build_batch([(txn_key("tx-real"), b"\x00\x00\x00\x00")], 0)}
        for topic, records in poison.items():
            for partition in range(PARTITIONS):
                for acks in (-1, 1):
                    response = client.call(produce_request(topic, partition, records, acks=acks))
                    assert produce_result(response) == (INVALID_TOPIC_EXCEPTION, -1)
                    # Kafka answers it without an error message (its InvalidTopicException is not a custom one)
                    assert response.responses[0].partition_responses[0].error_message is None
        # acks=0 has no answer to carry the error: the connection is closed, as for any failed acks=0 produce
        client.send_bytes(client.encode(produce_request(OFFSETS_TOPIC, 0, poison[OFFSETS_TOPIC], acks=0))[1])
        assert client.is_closed_by_peer()
    assert rss_bytes(broker.process.pid) - rss_before < RSS_BOUND
    assert_serving(broker)

    broker = hostile_broker.restart(broker)
    assert _committed(broker.bootstrap_servers, "real", [("data", 0)]) == {("data", 0): 3}
    _committed_transaction(broker.bootstrap_servers, "tx-real", "data", [b"after restart"])
    assert _read_committed(broker.bootstrap_servers, "data", b"after restart") == [b"committed", b"after restart"]
    assert_serving(broker)


def _deny_cluster_action(bootstrap: str) -> None:
    """Everyone may do everything on resources without ACLs, but for CLUSTER_ACTION, the brokers' own."""
    with WireClient(bootstrap) as client:
        response = client.call(CreateAclsRequest[3](creations=[CreateAclsRequest.AclCreation(
            resource_type=4, resource_name="kafka-cluster", resource_pattern_type=3, principal="User:ANONYMOUS",
            host="*", operation=9, permission_type=2)]))  # CLUSTER, LITERAL, CLUSTER_ACTION, DENY
        assert [r.error_code for r in response.results] == [0]


def test_a_clients_write_txn_markers_cannot_commit_another_producers_transaction(hostile_broker):
    broker = hostile_broker(config={**CONFIG, "authorizer.class.name": AUTHORIZER,
                                    "allow.everyone.if.no.acl.found": "true"})
    bootstrap = broker.bootstrap_servers
    _deny_cluster_action(bootstrap)
    create_topic(bootstrap, "data", 1)
    victim = _transactional(bootstrap, "victim")
    victim.begin_transaction()
    for i in range(3):
        victim.produce("data", value=b"uncommitted %d" % i, partition=0)
    victim.flush(15)
    rss_before = rss_bytes(broker.process.pid)
    with WireClient(bootstrap) as client:
        # the attacker reads the open transaction's producer id and epoch from the batches (read_uncommitted)
        [fetched] = fetched_partitions(client.call(fetch_request("data", 0, 0)))
        [batch] = batches_of(fetched.records)
        Marker = WriteTxnMarkersRequest.WritableTxnMarker
        response = client.call(WriteTxnMarkersRequest[1](markers=[Marker(
            producer_id=batch.producer_id, producer_epoch=batch.producer_epoch, transaction_result=True,
            coordinator_epoch=epoch, topics=[Marker.WritableTxnMarkerTopic(name=t, partition_indexes=[0, 1])
                                             for t in ("data", OFFSETS_TOPIC)])
            for epoch in (0, 1)]))
        codes = {(t.name, p.partition_index, m.producer_id, p.error_code)
                 for m in response.markers for t in m.topics for p in t.partitions}
        assert codes == {(t, p, batch.producer_id, CLUSTER_AUTHORIZATION_FAILED)
                         for t in ("data", OFFSETS_TOPIC) for p in (0, 1)}
    victim.abort_transaction(15)
    produce_kafka_python(bootstrap, "data", [Record(None, b"sentinel", partition=0)])
    assert _read_committed(bootstrap, "data", b"sentinel") == [b"sentinel"]
    assert rss_bytes(broker.process.pid) - rss_before < RSS_BOUND
    assert_serving(broker)

    broker = hostile_broker.restart(broker)
    assert _read_committed(broker.bootstrap_servers, "data", b"sentinel") == [b"sentinel"]
    assert_serving(broker)


# --- a start that finds bad data ------------------------------------------------------------

def _with_crc(batch: bytearray) -> bytes:
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))  # CRC32C covers attributes to the end
    return bytes(batch)


def _plant(partition_dir, batches: list[bytes]) -> None:
    """Append ``batches`` to the active segment of a stopped broker's partition, offsets following its log."""
    segment = max(partition_dir.glob("*.log"))
    data = segment.read_bytes()
    next_offset = parse_batches(data, verify_crc=False)[-1].next_offset if data else int(segment.stem)
    with open(segment, "ab") as log:
        for raw in batches:
            batch = bytearray(raw)
            struct.pack_into(">q", batch, 0, next_offset)  # base offset: outside the CRC
            log.write(batch)
            next_offset += struct.unpack_from(">i", batch, 23)[0] + 1  # last offset delta


def _lying(records: list[tuple[bytes, bytes]], count: int) -> bytes:
    batch = bytearray(build_batch(records, 0))
    struct.pack_into(">i", batch, 57, count)
    return _with_crc(batch)


def test_bad_coordinator_records_on_disk_are_skipped_and_the_rest_loads(hostile_broker):
    broker = hostile_broker(config=CONFIG)
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, "data", 1)
    # other groups and transactions, in the same partitions as the bad records and in others
    groups = {f"group-{n}": n + 1 for n in range(6)}
    for group, offset in groups.items():
        _commit(bootstrap, group, {("data", 0): offset})
    txn_ids = [f"tx-{n}" for n in range(4)]
    for txn_id in txn_ids:
        _committed_transaction(bootstrap, txn_id, "data", [txn_id.encode()])
    victim_group, victim_txn = "group-0", "tx-0"
    described = _described(bootstrap, txn_ids)
    assert {state for _, state, _ in described.values()} == {"CompleteCommit"}
    assert broker.terminate() == 0

    offsets_dir = broker.data_dir / f"{OFFSETS_TOPIC}-{partition_for(victim_group, PARTITIONS)}"
    good_offset = encode_offset(CommittedOffset(1))
    _plant(offsets_dir, [
        build_batch([(encode_key(OffsetKey(victim_group, "data", 0)), good_offset[:5])], 0),  # truncated value
        build_batch([(b"\x00\x09" + encode_key(GroupKey(victim_group))[2:], good_offset)], 0),  # unknown key version
        build_batch([(encode_key(GroupKey(victim_group)), good_offset)], 0),  # an offset where a group belongs
        _lying([(encode_key(OffsetKey(victim_group, "data", 0)), good_offset)], 30),  # a lying record count
    ])
    txn_dir = broker.data_dir / f"{TRANSACTION_STATE_TOPIC}-{partition_for(victim_txn, PARTITIONS)}"
    _plant(txn_dir, [
        build_batch([(txn_key(victim_txn), b"\x00\x00\x00\x00\x00")], 0),  # truncated value
        build_batch([(b"\x00\x03" + txn_key(victim_txn)[2:], b"\x00\x00")], 0),  # unknown key version
        build_batch([(txn_key(victim_txn), good_offset)], 0),  # a value of the other topic's type
        _lying([(txn_key(victim_txn), good_offset)], 12),
    ])

    broker = hostile_broker(config=CONFIG, data_dir=broker.data_dir, port=broker.port)
    rss_before = rss_bytes(broker.process.pid)
    # 3 records skipped in each topic; log recovery already truncates the batch with a lying count
    wait_until(lambda: broker.log_path.read_text(errors="replace").count("skipping the record at offset") == 6,
               timeout_s=10, what="the bad records skipped and logged")
    for group, offset in groups.items():
        assert _committed(broker.bootstrap_servers, group, [("data", 0)]) == {("data", 0): offset}, group
    assert _described(broker.bootstrap_servers, txn_ids) == described
    for txn_id in txn_ids:  # a new instance of each id fences the old one and commits again
        _committed_transaction(broker.bootstrap_servers, txn_id, "data", [b"again " + txn_id.encode()])
    _commit(broker.bootstrap_servers, victim_group, {("data", 0): 42})
    assert rss_bytes(broker.process.pid) - rss_before < RSS_BOUND
    assert_serving(broker)

    broker = hostile_broker.restart(broker)
    assert _committed(broker.bootstrap_servers, victim_group, [("data", 0)]) == {("data", 0): 42}
    seen = _read_committed(broker.bootstrap_servers, "data", b"again tx-3")
    assert seen == [t.encode() for t in txn_ids] + [b"again " + t.encode() for t in txn_ids]
    assert_serving(broker)


def test_corrupt_checkpoint_files_are_rebuilt_or_ignored(hostile_broker):
    broker = hostile_broker(config=CONFIG)
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, "data", 1)
    sent = [Record(b"k", b"idempotent %d" % i, partition=0) for i in range(20)]
    produce_kafka_python(bootstrap, "data", sent, enable_idempotence=True)
    assert broker.terminate() == 0

    partition_dir = broker.data_dir / "data-0"
    snapshots = sorted(partition_dir.glob("*.snapshot"))
    assert snapshots, list(partition_dir.iterdir())  # a clean stop snapshots producer state
    snapshots[-1].write_bytes(snapshots[-1].read_bytes()[:17])  # truncated JSON
    (partition_dir / f"{0:020d}.snapshot").write_bytes(b"\xff\xfe not json")  # garbage at an older offset
    (partition_dir / "leader-epoch-checkpoint").write_bytes(b"0\n2\n0 0\n")  # count says 2, one entry
    (partition_dir / "log-start-offset").write_bytes(b"\x00\x01garbage")
    (broker.data_dir / "replication-offset-checkpoint").write_text("0\nnot a number\n")

    broker = hostile_broker(config=CONFIG, data_dir=broker.data_dir, port=broker.port)
    rss_before = rss_bytes(broker.process.pid)
    wait_until(lambda: "ignoring producer state snapshot" in broker.log_path.read_text(errors="replace"), timeout_s=10,
               what="the corrupt snapshot logged")
    log_text = broker.log_path.read_text(errors="replace")
    assert "unreadable leader epoch checkpoint" in log_text
    assert "unreadable log start offset checkpoint" in log_text
    assert "ignoring producer state snapshot" in log_text
    assert (partition_dir / "leader-epoch-checkpoint").read_text().startswith("0\n1\n0 0")  # rebuilt from the log
    with WireClient(broker.bootstrap_servers) as client:
        [answer] = fetched_partitions(client.call(fetch_request("data", 0, 0)))
        assert answer.error_code == 0 and answer.log_start_offset == 0
        values = [r.value for batch in batches_of(answer.records) for r in batch]
        assert values == [r.value for r in sent]
        assert metadata(client, ["data"]).topics[0].error_code == 0
    # producer state rebuilt from the log: the same idempotent producer id keeps its sequence
    produce_kafka_python(broker.bootstrap_servers, "data", [Record(b"k", b"after", partition=0)],
                         enable_idempotence=True)
    assert rss_bytes(broker.process.pid) - rss_before < RSS_BOUND
    assert_alive(broker)
    assert_serving(broker)

    broker = hostile_broker.restart(broker)
    last_start = broker.log_path.read_text(errors="replace").split("listening on")[-2]
    for repaired in ("unreadable leader epoch", "unreadable log start offset", "ignoring producer state snapshot"):
        assert repaired not in last_start
    assert_serving(broker)
