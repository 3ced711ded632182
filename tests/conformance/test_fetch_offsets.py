"""Reading a partition, compared with Apache Kafka: Fetch, ListOffsets, OffsetForLeaderEpoch, DescribeLogDirs and
when retention first deletes.

Each scenario creates its own topic on each broker, writes the same batches (explicit CreateTime timestamps, so
the answers do not depend on the clock) and asks both brokers the same requests at every version broker_sim
serves. Record sets are compared decoded, as (offset, timestamp, value) per batch: the bytes differ only in the
fields a broker stamps (base offset, partition leader epoch), which the decoded form shows too.
"""
from __future__ import annotations

import time

import pytest
from kafka.protocol.admin import CreateTopicsRequest, DescribeLogDirsRequest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest, OffsetForLeaderEpochRequest
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer import ProduceRequest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from differential import SETTLING, Pair, Peer, Scenario, error_codes

T0 = 1_600_000_000_000  # the batches' CreateTime: fixed, long past
FETCH_VERSIONS = range(4, 19)   # v13+: topics by id (KIP-516); v15+: ReplicaState
LIST_OFFSETS_VERSIONS = range(1, 11)
EARLIEST, LATEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -2, -1, -3, -4, -5
# a topic just created: Kafka may answer UNKNOWN_TOPIC_OR_PARTITION (3) for a moment as well as the settling codes;
# a produce refused with any of them wrote nothing, so it is sent again
NOT_YET = SETTLING | {3}


def _topic(peer, partitions: int = 1, configs: dict[str, str] | None = None) -> str:
    """A new topic on ``peer``, its partitions led (LEADER_NOT_AVAILABLE settles first on Kafka)."""
    name = peer.name("fo")
    created = peer.call(CreateTopicsRequest[5](topics=[CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[],
        configs=[CreateTopicsRequest.CreatableTopic.CreatableTopicConfig(name=k, value=v)
                 for k, v in (configs or {}).items()])], timeout_ms=10_000, validate_only=False))
    assert error_codes(created) == {0}, created
    peer.settled(lambda: MetadataRequest[8](topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                                            allow_auto_topic_creation=False,
                                            include_cluster_authorized_operations=False,
                                            include_topic_authorized_operations=False), codes=NOT_YET)
    return name


def _batch(values, first_timestamp: int, step_ms: int = 1000) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i, value in enumerate(values):
        builder.append(i, timestamp=first_timestamp + i * step_ms, key=None, value=value.encode(), headers=[])
    return bytes(builder.build())


def _produce(peer, topic: str, values, first_timestamp: int = T0, partition: int = 0, step_ms: int = 1000):
    """One batch of ``values``, timestamps ``first_timestamp`` + i * ``step_ms``; returns its base offset."""
    records = _batch(values, first_timestamp, step_ms)
    answer = peer.settled(lambda: ProduceRequest[9](transactional_id=None, acks=-1, timeout_ms=10_000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[ProduceRequest.TopicProduceData.PartitionProduceData(
            index=partition, records=records)])]), codes=NOT_YET)
    result = answer.responses[0].partition_responses[0]
    assert result.error_code == 0, answer
    return result.base_offset


def _records(data) -> list:
    """[[(offset, timestamp, value), ...] per batch] of a record set."""
    batches, records = [], MemoryRecords(bytes(data or b""))
    while records.has_next():
        batch = records.next_batch()
        if batch is None:
            break
        batches.append([(r.offset, r.timestamp, bytes(r.value).decode()) for r in batch])
    return batches


def _fetch_answer(response) -> dict:
    """The response as plain data, each record set decoded (``to_dict`` would give its bytes' repr)."""
    answer = response.to_dict()
    for topic, topic_data in zip(answer["responses"], response.responses):
        for partition, data in zip(topic["partitions"], topic_data.partitions):
            partition["records"] = _records(data.records)
    return answer


def _topic_id(peer, topic: str):
    """The topic's id on ``peer`` (Metadata v12), or a random one for a topic that does not exist there."""
    import uuid

    answer = peer.call(MetadataRequest[12](topics=[MetadataRequest.MetadataRequestTopic(name=topic, topic_id=None)],
                                           allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    found = [t.topic_id for t in answer.topics if t.error_code == 0]
    return found[0] if found else uuid.uuid4()


def _fetch(peer, version: int, topic: str, offset: int, *, partition: int = 0, max_bytes: int = 1 << 20,
           partition_max_bytes: int = 1 << 20, min_bytes: int = 1, max_wait_ms: int = 0, isolation_level: int = 0,
           session_id: int = 0, session_epoch: int = -1, replica_id: int = -1, current_leader_epoch: int = -1,
           last_fetched_epoch: int = -1, forgotten: list | None = None) -> dict:
    """One partition's Fetch at ``version``: by topic name to v12, by the peer's topic id from v13, the replica
    id in ReplicaState from v15 (``forgotten``: (topic, [partitions]) of an incremental fetch)."""
    Topic = FetchRequest.FetchTopic
    by_name = version < 13
    data = Topic.FetchPartition(partition=partition, current_leader_epoch=current_leader_epoch, fetch_offset=offset,
                                last_fetched_epoch=last_fetched_epoch, log_start_offset=-1,
                                partition_max_bytes=partition_max_bytes)
    fields = dict(max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
                  isolation_level=isolation_level, session_id=session_id, session_epoch=session_epoch,
                  topics=[Topic(topic=topic, partitions=[data]) if by_name
                          else Topic(topic_id=_topic_id(peer, topic), partitions=[data])],
                  forgotten_topics_data=[FetchRequest.ForgottenTopic(topic=t, partitions=p) if by_name
                                         else FetchRequest.ForgottenTopic(topic_id=_topic_id(peer, t), partitions=p)
                                         for t, p in forgotten or ()], rack_id="")
    if version >= 15:
        fields["replica_state"] = FetchRequest.ReplicaState(replica_id=replica_id, replica_epoch=-1)
    else:
        fields["replica_id"] = replica_id
    return _fetch_answer(peer.call(FetchRequest[version](**fields)))


def _fill(peer, batches: int = 3, per_batch: int = 2) -> str:
    """A topic with ``batches`` batches of ``per_batch`` records, offsets 0.., timestamps T0 + offset s."""
    topic = _topic(peer)
    for b in range(batches):
        _produce(peer, topic, [f"v{b * per_batch + i}" for i in range(per_batch)], T0 + b * per_batch * 1000)
    return topic


# -- Fetch ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_fetch_positions_and_offset_fields(pair, version):
    """From the start, the middle of a batch (its whole batch comes back), the end (nothing) and beyond both ends
    (OFFSET_OUT_OF_RANGE), with the high watermark, last stable offset and log start offset fields."""
    def run(peer):
        topic = _fill(peer)
        return {offset: _fetch(peer, version, topic, offset) for offset in (0, 3, 6, 7, -1, 1000)}

    pair.compare(Scenario(f"fetch positions v{version}", run, ignore=("*.responses.*.topic",)))


@pytest.mark.parametrize("version", [4, 12, 13, 18])
def test_fetch_unknown_topic_and_partition(pair, version):
    def run(peer):
        topic = _fill(peer, batches=1)
        return {"unknown topic": _fetch(peer, version, peer.name("missing"), 0),
                "unknown partition": _fetch(peer, version, topic, 0, partition=5)}

    pair.compare(Scenario(f"fetch unknown v{version}", run, ignore=("*.responses.*.topic",)))


@pytest.mark.parametrize("version", [9, 12, 17])
def test_fetch_leader_epoch_checks(pair, version):
    """current_leader_epoch (v9+) ahead of the leader's is UNKNOWN_LEADER_EPOCH, equal is served; v12's
    last_fetched_epoch above the log's epochs answers a diverging epoch instead of records."""
    def run(peer):
        topic = _fill(peer)
        seen = {"current 0": _fetch(peer, version, topic, 0, current_leader_epoch=0),
                "current 4 (ahead)": _fetch(peer, version, topic, 0, current_leader_epoch=4)}
        if version >= 12:
            seen["last fetched epoch 3"] = _fetch(peer, version, topic, 6, last_fetched_epoch=3)
            seen["last fetched epoch 0"] = _fetch(peer, version, topic, 4, last_fetched_epoch=0)
        return seen

    pair.compare(Scenario(f"fetch leader epochs v{version}", run, ignore=("*.responses.*.topic",)))


@pytest.mark.parametrize("version", [4, 12])
def test_fetch_size_limits_return_at_least_one_batch(pair, version):
    """max_bytes 0 or 1 and partition_max_bytes 1: the first batch still comes back whole (KIP-74)."""
    def run(peer):
        topic = _fill(peer)
        return {"max_bytes 0": _fetch(peer, version, topic, 0, max_bytes=0),
                "max_bytes 1": _fetch(peer, version, topic, 0, max_bytes=1),
                "partition_max_bytes 1": _fetch(peer, version, topic, 0, partition_max_bytes=1),
                "partition_max_bytes 0": _fetch(peer, version, topic, 0, partition_max_bytes=0)}

    pair.compare(Scenario(f"fetch size limits v{version}", run, ignore=("*.responses.*.topic",)))


def test_fetch_min_bytes_waits_for_max_wait(pair):
    """min_bytes above what there is: the answer comes after max_wait_ms with what there is."""
    def run(peer):
        topic = _fill(peer, batches=1)
        started = time.monotonic()
        answer = _fetch(peer, 12, topic, 0, min_bytes=1 << 20, max_wait_ms=300)
        waited = time.monotonic() - started
        return {"answer": answer, "waited at least max_wait": waited >= 0.25, "then answered": waited < 5}

    pair.compare(Scenario("fetch min_bytes", run, ignore=("answer.responses.*.topic",)))


@pytest.mark.parametrize("isolation_level", [0, 1])
def test_fetch_isolation_levels_on_a_plain_topic(pair, isolation_level):
    def run(peer):
        topic = _fill(peer)
        return _fetch(peer, 12, topic, 0, isolation_level=isolation_level)

    pair.compare(Scenario(f"fetch isolation {isolation_level}", run, ignore=("responses.*.topic",)))


def test_fetch_sessions(pair):
    """A full fetch with epoch 0 creates a session; an incremental fetch at the next epoch names only partitions
    with news; a wrong epoch is INVALID_FETCH_SESSION_EPOCH and an unknown id FETCH_SESSION_ID_NOT_FOUND."""
    def run(peer):
        topic = _fill(peer, batches=1)
        created = _fetch(peer, 12, topic, 0, session_id=0, session_epoch=0)
        session = created["session_id"]
        seen = {"created": created, "got a session": session != 0}
        _produce(peer, topic, ["later"], T0 + 10_000)
        seen["incremental, news"] = _fetch(peer, 12, topic, 2, session_id=session, session_epoch=1)
        seen["incremental, nothing new"] = _fetch(peer, 12, topic, 3, session_id=session, session_epoch=2)
        seen["wrong epoch"] = _fetch(peer, 12, topic, 3, session_id=session, session_epoch=7)
        seen["unknown id"] = _fetch(peer, 12, topic, 3, session_id=session + 1000, session_epoch=1)
        seen["final epoch"] = _fetch(peer, 12, topic, 0, session_id=0, session_epoch=-1)
        return seen

    pair.compare(Scenario("fetch sessions", run, ignore=("*.session_id", "*.responses.*.topic")))


@pytest.mark.parametrize("version", [13, 18])
def test_fetch_sessions_by_topic_id(pair, version):
    """v13+ sessions: partitions named by topic id, one forgotten by id (the answer names topics by id only)."""
    def run(peer):
        topic, other = _fill(peer, batches=1), _fill(peer, batches=1)
        created = _fetch(peer, version, topic, 0, session_id=0, session_epoch=0)
        session = created["session_id"]
        seen = {"created": created, "got a session": session != 0}
        seen["second topic added"] = _fetch(peer, version, other, 0, session_id=session, session_epoch=1)
        _produce(peer, other, ["later"], T0 + 10_000)
        seen["first forgotten, news of the second"] = _fetch(peer, version, other, 2, session_id=session,
                                                             session_epoch=2, forgotten=[(topic, [0])])
        return seen

    pair.compare(Scenario(f"fetch sessions by id v{version}", run, ignore=("*.session_id",)))


def test_fetch_with_a_replica_id_from_a_client(pair):
    """replica_id >= 0 from a client connection (not a broker): refused, nothing read."""
    def run(peer):
        topic = _fill(peer, batches=1)
        return {version: _fetch(peer, version, topic, 0, replica_id=1) for version in (4, 12, 15, 18)}

    pair.compare(Scenario("fetch replica_id from a client", run, ignore=("*.responses.*.topic",)))


# -- ListOffsets ----------------------------------------------------------------------------------------------

def _list_offsets(peer, version: int, topic: str, timestamps, *, partition: int = 0, isolation_level: int = 0):
    Topic = ListOffsetsRequest.ListOffsetsTopic
    return peer.call(ListOffsetsRequest[version](replica_id=-1, isolation_level=isolation_level, topics=[
        Topic(name=topic, partitions=[Topic.ListOffsetsPartition(
            partition_index=partition, current_leader_epoch=-1, timestamp=timestamp, max_num_offsets=1)
            for timestamp in timestamps])]))


@pytest.mark.parametrize("version", LIST_OFFSETS_VERSIONS)
def test_list_offsets_queries(pair, version):
    """Earliest, latest, max timestamp, earliest-local, latest-tiered and timestamp searches before, between,
    on and after the records, each asked alone (a partition named twice in one request is refused)."""
    queries = {"earliest": EARLIEST, "latest": LATEST, "max timestamp": MAX_TIMESTAMP,
               "earliest local": EARLIEST_LOCAL, "latest tiered": LATEST_TIERED, "before": T0 - 5000,
               "first": T0, "between": T0 + 2500, "last": T0 + 5000, "after": T0 + 60_000, "other negative": -7}

    def run(peer):
        topic = _fill(peer)
        return {name: _list_offsets(peer, version, topic, [timestamp]) for name, timestamp in queries.items()}

    pair.compare(Scenario(f"list offsets v{version}", run, ignore=("*.topics.*.name",)))


@pytest.mark.parametrize("layout", ["ties in one batch", "ties across batches", "max in a middle batch"])
def test_list_offsets_max_timestamp_among_equal_timestamps(pair, layout):
    """ListOffsets -3 when several records share the largest timestamp: Kafka takes the first batch whose max
    timestamp is the partition's and, in it, the first record with that timestamp."""
    def run(peer):
        topic = _topic(peer)
        if layout == "ties in one batch":
            _produce(peer, topic, ["a", "b", "c"], first_timestamp=T0, step_ms=0)
        elif layout == "ties across batches":
            for value in ("a", "b", "c"):
                _produce(peer, topic, [value, value + "2"], first_timestamp=T0, step_ms=0)
        else:
            _produce(peer, topic, ["a", "b"], first_timestamp=T0)
            _produce(peer, topic, ["c", "d", "e"], first_timestamp=T0 + 9000, step_ms=0)
            _produce(peer, topic, ["f"], first_timestamp=T0 + 5000)
            _produce(peer, topic, ["g", "h"], first_timestamp=T0 + 9000, step_ms=0)
        return _list_offsets(peer, 7, topic, [MAX_TIMESTAMP])

    pair.compare(Scenario(f"max timestamp, {layout}", run, ignore=("topics.*.name",)))


@pytest.mark.parametrize("version", [1, 7])
def test_list_offsets_unknown_partition_and_topic(pair, version):
    def run(peer):
        topic = _fill(peer, batches=1)
        return {"unknown partition": _list_offsets(peer, version, topic, [LATEST], partition=9),
                "unknown topic": _list_offsets(peer, version, peer.name("missing"), [LATEST])}

    pair.compare(Scenario(f"list offsets unknown v{version}", run, ignore=("*.topics.*.name",)))


@pytest.mark.parametrize("version", [2, 7])
def test_list_offsets_isolation_levels(pair, version):
    def run(peer):
        topic = _fill(peer)
        return {level: _list_offsets(peer, version, topic, [LATEST], isolation_level=level) for level in (0, 1)}

    pair.compare(Scenario(f"list offsets isolation v{version}", run, ignore=("*.topics.*.name",)))


# -- OffsetForLeaderEpoch -------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [2, 3, 4])
def test_offset_for_leader_epoch(pair, version):
    """The current epoch (0) ends at the log end offset; an epoch above it and below it; a current leader epoch
    check that is stale or ahead (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH); an unknown partition and topic; a
    follower's replica_id from a client (no authorizer: answered as any other)."""
    Topic = OffsetForLeaderEpochRequest.OffsetForLeaderTopic

    def ask(peer, topic, leader_epoch, current=-1, partition=0, replica_id=-1):
        fields = {"replica_id": replica_id} if version >= 3 else {}
        return peer.call(OffsetForLeaderEpochRequest[version](**fields, topics=[Topic(topic=topic, partitions=[
            Topic.OffsetForLeaderPartition(partition=partition, current_leader_epoch=current,
                                           leader_epoch=leader_epoch)])]))

    def run(peer):
        topic = _fill(peer)
        return {"epoch 0": ask(peer, topic, 0), "epoch 5": ask(peer, topic, 5), "epoch -1": ask(peer, topic, -1),
                "current 0": ask(peer, topic, 0, current=0), "current 3 (ahead)": ask(peer, topic, 0, current=3),
                "unknown partition": ask(peer, topic, 0, partition=4),
                "unknown topic": ask(peer, peer.name("missing"), 0),
                "replica_id 1 from a client": ask(peer, topic, 0, replica_id=1)}

    pair.compare(Scenario(f"offset for leader epoch v{version}", run, ignore=("*.topics.*.topic",)))


# -- DescribeLogDirs ------------------------------------------------------------------------------------------

# paths, names and sizes differ by broker
LOG_DIR_SIZES = ("results.*.log_dir", "results.*.topics.*.name", "results.*.topics.*.partitions.*.partition_size",
                 "results.*.total_bytes", "results.*.usable_bytes")


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_describe_log_dirs_shape(pair, version):
    """One log dir with the asked partition (its size, lag 0)."""
    def run(peer):
        topic = _fill(peer, batches=1)
        asked = DescribeLogDirsRequest[version](topics=[DescribeLogDirsRequest.DescribableLogDirTopic(
            topic=topic, partitions=[0])])
        return peer.call(asked)

    kafka = pair.compare(Scenario(f"describe log dirs v{version}", run, ignore=LOG_DIR_SIZES))
    assert len(kafka["results"]) == 1


@pytest.mark.parametrize("version", [1, 4])
def test_describe_log_dirs_of_every_topic_lists_ours(pair, version):
    """topics=null: every partition of the broker, ours among them (the others differ by broker and are left out)."""
    def run(peer):
        topic = _fill(peer, batches=1)
        answer = peer.call(DescribeLogDirsRequest[version](topics=None))
        for result in answer.results:
            result.topics = [t for t in result.topics if t.name == topic]
        return answer

    pair.compare(Scenario(f"describe every log dir v{version}", run, ignore=LOG_DIR_SIZES))


# -- retention timing -----------------------------------------------------------------------------------------

def _expired_topic(peer) -> str:
    """A topic whose first segment (offsets 0-1, CreateTime years ago) is past retention.ms and whose active
    segment (offset 2, now) is not."""
    topic = _topic(peer, configs={"retention.ms": "60000", "segment.ms": "100"})
    _produce(peer, topic, ["old-1", "old-2"], T0)
    time.sleep(0.2)  # past segment.ms: the next batch rolls a new segment, so the old one may be deleted alone
    _produce(peer, topic, ["new"], int(time.time() * 1000))
    return topic


def _log_start(peer, topic: str) -> int:
    return _list_offsets(peer, 7, topic, [EARLIEST]).topics[0].partitions[0].offset


def test_first_retention_pass_runs_after_log_initial_task_delay(kafka_broker_factory, pylog_broker_factory):
    """log.initial.task.delay.ms=4000 with a 300 s check interval: expired records are still there before the
    delay and deleted (the log start offset moves to 2) a few seconds after it, on both brokers; not after the
    check interval."""
    config = {"log.initial.task.delay.ms": "4000", "log.retention.check.interval.ms": "300000"}
    # Kafka first: it needs seconds to start and broker_sim milliseconds, so both are still inside their initial
    # delay when the records are written
    kafka = kafka_broker_factory(config=config)
    pylog = pylog_broker_factory(config={**config, "schema.registry.listeners": ""})
    pair = Pair(Peer("pylog", pylog.bootstrap_servers, pylog), Peer("kafka", kafka.bootstrap_servers, kafka))
    try:
        topics = {peer.kind: _expired_topic(peer) for peer in pair.peers}
        assert {kind: _log_start(peer, topics[kind]) for kind, peer in
                (("kafka", pair.kafka), ("pylog", pair.pylog))} == {"kafka": 0, "pylog": 0}

        def run(peer):
            deadline = time.monotonic() + 20
            while _log_start(peer, topics[peer.kind]) == 0 and time.monotonic() < deadline:
                time.sleep(0.2)
            return {"log start offset": _log_start(peer, topics[peer.kind])}

        assert pair.compare(Scenario("first retention pass", run)) == {"log start offset": 2}
    finally:
        pair.close()
