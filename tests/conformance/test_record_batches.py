"""Raw record batches produced to Apache Kafka and to broker_sim: the same answer, the same stored bytes.

Each case of ``batch_corpus.CASES`` is produced with a raw ProduceRequest to a fresh topic on both brokers. The
answers compared are the partition's error code, whether it carries an error message, the KIP-467 record errors'
indices, its base offset and log append time, and whether the connection stayed open; for an accepted case also
every stored batch, fetched back raw, with the header fields a broker rewrites masked, and what Kafka's own
reader (tests/conformance/java/RecordOracle.java, ``record_fuzz.KafkaOracle``) reads in it.
"""
from __future__ import annotations

import time

import pytest
from batch_corpus import CASES, masked, split_batches
from differential import Scenario
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.producer import ProduceRequest

from record_fuzz import KafkaOracle, compile_oracle

from broker_sim.protocol.client import ConnectionClosed

UNKNOWN_TOPIC = "an unknown topic (auto-create is Metadata's, never Produce's)"
FETCH_BYTES = 4 << 20


@pytest.fixture(scope="module")
def record_oracle(pair, tmp_path_factory):
    """Kafka's record reader in one JVM (the pair fixture has required Kafka's jars)."""
    oracle = KafkaOracle(compile_oracle(tmp_path_factory.mktemp("record-oracle")))
    yield oracle
    oracle.close()


@pytest.fixture(scope="module")
def topics(pair):
    """{broker kind: {case name: its fresh topic}}, all created up front in one CreateTopics per broker."""
    created = {}
    for peer in pair.peers:
        names = {case.name: peer.name("batch") for case in CASES}
        config = CreateTopicsRequest.CreatableTopic.CreatableTopicConfig
        answer = peer.call(CreateTopicsRequest[5](timeout_ms=30000, validate_only=False, topics=[
            CreateTopicsRequest.CreatableTopic(
                name=names[case.name], num_partitions=1, replication_factor=1, assignments=[],
                configs=[config(name=k, value=v) for k, v in case.configs.items()])
            for case in CASES]), timeout_s=60)
        assert {t.error_code for t in answer.topics} == {0}, answer
        _await_leaders(peer, list(names.values()))
        created[peer.kind] = names
    return created


def _await_leaders(peer, names: list[str], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        answer = peer.call(MetadataRequest[12](
            topics=[MetadataRequest.MetadataRequestTopic(name=n) for n in names],
            allow_auto_topic_creation=False, include_topic_authorized_operations=False))
        if all(t.error_code == 0 and t.partitions and all(p.leader_id >= 0 for p in t.partitions)
               for t in answer.topics):
            return
        assert time.monotonic() < deadline, f"{peer.kind}: topics without a leader after {timeout_s} s"
        time.sleep(0.05)


def _produce(peer, topic: str, case, records: bytes) -> dict:
    """The partition's answer on a connection of its own, and whether the broker kept that connection."""
    request = ProduceRequest[case.version](transactional_id=None, acks=case.acks, timeout_ms=10000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=case.partition, records=records)])])
    with peer.connect() as connection:
        try:
            response = connection.call(request, timeout_s=30)
            connection.call(ApiVersionsRequest[0](), timeout_s=10)
            open_ = True
        except (ConnectionClosed, OSError):
            response, open_ = None, False
    answer = {"connection_open": open_}
    if response is not None:
        p = response.responses[0].partition_responses[0]
        answer.update(error_code=p.error_code, base_offset=p.base_offset,
                      log_append_time_ms=p.log_append_time_ms, log_start_offset=p.log_start_offset,
                      has_error_message=p.error_message is not None,
                      record_errors=[e.batch_index for e in p.record_errors])
    return answer


def _stored(peer, topic: str, oracle: KafkaOracle) -> dict:
    """Every batch the partition holds (masked, hex) and what Kafka's reader reads in each."""
    request = FetchRequest[12](
        replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=FETCH_BYTES, isolation_level=0, session_id=0,
        session_epoch=-1, topics=[FetchRequest.FetchTopic(topic=topic, partitions=[
            FetchRequest.FetchTopic.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=FETCH_BYTES,
                                                   current_leader_epoch=-1, last_fetched_epoch=-1,
                                                   log_start_offset=-1)])],
        forgotten_topics_data=[], rack_id="")
    partition = peer.call(request).responses[0].partitions[0]
    batches = split_batches(bytes(partition.records or b""))
    return {"fetch_error_code": partition.error_code, "high_watermark": partition.high_watermark,
            "batches": [masked(b).hex() for b in batches], "read": [_read(answer) for answer in oracle.read(batches)]}


def _read(answer):
    """Kafka's reading of one stored batch: its records (offset, timestamp, key, value, headers; bytes as hex),
    or the exception Kafka's reader throws."""
    if answer[0] == "error":
        return f"unreadable: {answer[1]}"
    return [{"crc_valid": crc, "control": control, "next_offset": next_offset,
             "records": [(offset, timestamp, _hex(key), _hex(value), [(k.hex(), _hex(v)) for k, v in headers])
                         for offset, timestamp, key, value, headers in rows]}
            for crc, control, next_offset, rows in answer]


def _hex(raw: bytes | None) -> str | None:
    return None if raw is None else raw.hex()


def _scenario(case, topics, oracle: KafkaOracle) -> Scenario:
    records = case.build(int(time.time() * 1000))

    def run(peer):
        topic = topics[peer.kind][case.name]
        answer = _produce(peer, topic, case, records)
        answer["stored"] = _stored(peer, topic, oracle) if case.partition == 0 else None
        return answer

    return Scenario(case.name, run)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_batch_answered_and_stored_as_kafka_does(pair, topics, record_oracle, case):
    """Produce one corpus case to both brokers: the same answer, the same stored batches, the same records read."""
    pair.compare(_scenario(case, topics, record_oracle))


def test_produce_to_an_unknown_topic_is_refused_as_kafka_refuses_it(pair):
    """UNKNOWN_TOPIC_OR_PARTITION, and no topic appears: auto-creation is Metadata's, never Produce's."""
    case = CASES[0]
    records = case.build(int(time.time() * 1000))

    def run(peer):
        topic = peer.name("never-created")
        answer = _produce(peer, topic, case, records)
        listed = peer.call(MetadataRequest[12](topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                                               allow_auto_topic_creation=False,
                                               include_topic_authorized_operations=False))
        answer["metadata_error_code"] = listed.topics[0].error_code
        return answer

    answer = pair.compare(Scenario(UNKNOWN_TOPIC, run))
    assert answer["error_code"] == 3
