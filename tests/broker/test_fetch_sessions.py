"""Incremental fetch sessions (KIP-227) on the wire: creation, incremental answers, errors, eviction, consumers."""
from __future__ import annotations

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.protocol.consumer import FetchRequest

from broker_sim.security.sasl import SaslLogin
from tests.integration.kafka_wire import (
    WireClient, batches_of, create_topics, produce_request, produce_result, record_batch,
)

SESSION_NOT_FOUND, INVALID_EPOCH = 70, 71


def entry(index: int, offset: int = 0):
    return FetchRequest.FetchTopic.FetchPartition(partition=index, fetch_offset=offset, partition_max_bytes=1 << 20,
                                                  current_leader_epoch=-1, last_fetched_epoch=-1, log_start_offset=-1)


def fetch(client: WireClient, topic: str, entries, *, session_id: int, epoch: int, forgotten=(), replica_id=-1):
    request = FetchRequest[12](
        replica_id=replica_id, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=session_id,
        session_epoch=epoch, topics=[FetchRequest.FetchTopic(topic=topic, partitions=list(entries))] if entries else [],
        forgotten_topics_data=[FetchRequest.ForgottenTopic(topic=topic, partitions=list(forgotten))] if forgotten
        else [], rack_id="")
    return client.call(request)


def answered(response) -> dict[int, int]:
    """partition -> records' base offsets count, of the partitions the answer names."""
    return {p.partition_index: len(batches_of(p.records)) for t in response.responses for p in t.partitions}


def test_a_session_answers_only_what_changed_and_refuses_wrong_epochs_and_ids(pylog_broker_factory):
    broker = pylog_broker_factory()
    with WireClient(broker.bootstrap_servers) as client:
        assert create_topics(client, {"s": 4})["s"][0] == 0
        full = fetch(client, "s", [entry(i) for i in range(4)], session_id=0, epoch=0)
        assert full.error_code == 0 and full.session_id != 0
        assert answered(full) == {0: 0, 1: 0, 2: 0, 3: 0}  # a full answer names every partition
        session = full.session_id
        idle = fetch(client, "s", [], session_id=session, epoch=1)  # nothing named: the session's four are read
        assert (idle.error_code, idle.session_id, answered(idle)) == (0, session, {})
        assert produce_result(client.call(produce_request("s", 2, record_batch([b"a", b"b"])))) == (0, 0)
        news = fetch(client, "s", [], session_id=session, epoch=2)
        assert answered(news) == {2: 1}  # only the partition with records (its high watermark moved too)
        moved = fetch(client, "s", [entry(2, 2)], session_id=session, epoch=3)  # the consumer moved on
        assert answered(moved) == {}
        assert produce_result(client.call(produce_request("s", 0, record_batch([b"c"])))) == (0, 0)
        forgot = fetch(client, "s", [], session_id=session, epoch=4, forgotten=[0])
        assert answered(forgot) == {}  # partition 0 left the session before its record could be told
        assert fetch(client, "s", [], session_id=session, epoch=4).error_code == INVALID_EPOCH
        assert fetch(client, "s", [], session_id=session, epoch=9).error_code == INVALID_EPOCH
        assert fetch(client, "s", [], session_id=session + 1, epoch=1).error_code == SESSION_NOT_FOUND
        again = fetch(client, "s", [entry(0)], session_id=session, epoch=5)  # the session survived the errors
        assert answered(again) == {0: 1}
        closed = fetch(client, "s", [entry(0)], session_id=session, epoch=-1)  # FINAL: closed, answered sessionless
        assert closed.session_id == 0 and answered(closed) == {0: 1}
        assert fetch(client, "s", [], session_id=session, epoch=6).error_code == SESSION_NOT_FOUND


def test_a_session_is_not_found_by_another_replica_and_lives_on_for_its_own(pylog_broker_factory):
    """Kafka's FetchManager: a session belongs to whoever made it (consumer or follower replica id, principal);
    another presenting its id and epoch is answered FETCH_SESSION_ID_NOT_FOUND, and the session is untouched."""
    broker = pylog_broker_factory()
    with WireClient(broker.bootstrap_servers) as client:
        assert create_topics(client, {"owned": 2})["owned"][0] == 0
        consumer = fetch(client, "owned", [entry(0), entry(1)], session_id=0, epoch=0)
        assert consumer.error_code == 0 and consumer.session_id != 0
        posing = fetch(client, "owned", [], session_id=consumer.session_id, epoch=1, replica_id=7)
        assert (posing.error_code, posing.responses) == (SESSION_NOT_FOUND, [])
        follower = fetch(client, "owned", [entry(0)], session_id=0, epoch=0, replica_id=7)
        assert follower.error_code == 0 and follower.session_id not in (0, consumer.session_id)
        stolen = fetch(client, "owned", [], session_id=follower.session_id, epoch=1)  # a consumer's request
        assert (stolen.error_code, stolen.responses) == (SESSION_NOT_FOUND, [])
        assert fetch(client, "owned", [], session_id=consumer.session_id, epoch=1).error_code == 0  # epoch 1 unused
        assert fetch(client, "owned", [], session_id=follower.session_id, epoch=1, replica_id=7).error_code == 0


PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" '
              'password="alice-secret" user_alice="alice-secret" user_mallory="mallory-secret";')


def test_a_session_is_not_found_by_another_principal(pylog_broker_factory):
    """The same for principals: a session alice made is FETCH_SESSION_ID_NOT_FOUND to mallory, who presents its id
    and epoch over a connection of her own, and alice's next incremental fetch is answered as if nothing happened."""
    broker = pylog_broker_factory(config={
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS})
    with WireClient(broker.bootstrap_servers) as client:
        assert create_topics(client, {"alices": 1})["alices"][0] == 0
    bootstrap = broker.bootstrap_servers_for("SASL_PLAINTEXT")
    with WireClient(bootstrap) as alice, WireClient(bootstrap) as mallory:
        alice.authenticate(SaslLogin("PLAIN", "alice", "alice-secret"))
        mallory.authenticate(SaslLogin("PLAIN", "mallory", "mallory-secret"))
        made = fetch(alice, "alices", [entry(0)], session_id=0, epoch=0)
        assert made.error_code == 0 and made.session_id != 0
        stolen = fetch(mallory, "alices", [], session_id=made.session_id, epoch=1)
        assert (stolen.error_code, stolen.responses) == (SESSION_NOT_FOUND, [])
        assert fetch(alice, "alices", [], session_id=made.session_id, epoch=1).error_code == 0


def test_sessions_are_bounded_by_the_cache_slots(pylog_broker_factory):
    broker = pylog_broker_factory(config={"max.incremental.fetch.session.cache.slots": "1"})
    with WireClient(broker.bootstrap_servers) as client:
        assert create_topics(client, {"b": 1})["b"][0] == 0
        first = fetch(client, "b", [entry(0)], session_id=0, epoch=0)
        assert first.session_id != 0
        second = fetch(client, "b", [entry(0)], session_id=0, epoch=0)  # no slot, none idle 2 minutes: sessionless
        assert second.error_code == 0 and second.session_id == 0 and answered(second) == {0: 0}
        assert fetch(client, "b", [], session_id=first.session_id, epoch=1).error_code == 0  # the first lives on


def test_kafka_python_consumers_read_everything_through_incremental_sessions(pylog_broker_factory):
    broker = pylog_broker_factory()
    with WireClient(broker.bootstrap_servers) as client:
        assert create_topics(client, {"kp": 3})["kp"][0] == 0
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, linger_ms=0)
    for i in range(300):  # a batch per record: a fetch of 1 KB per partition carries a dozen
        producer.send("kp", value=b"%d" % i, partition=i % 3).get(timeout=10)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest",
                             consumer_timeout_ms=10_000, max_partition_fetch_bytes=1024, fetch_max_wait_ms=50)
    try:
        consumer.assign([TopicPartition("kp", p) for p in range(3)])
        values = sorted(int(record.value) for _, record in zip(range(300), consumer))
        assert values == list(range(300))  # small fetches: many rounds, each after the first incremental
        for i in range(300, 330):
            producer.send("kp", value=b"%d" % i, partition=i % 3)
        producer.flush()
        assert sorted(int(record.value) for _, record in zip(range(30), consumer)) == list(range(300, 330))
    finally:
        consumer.close()
        producer.close()
    assert fetch_sessions(broker).incremental >= 5  # the consumer did use incremental fetches


def fetch_sessions(broker):
    """The broker's FetchSessionCache (the Fetch handler's)."""
    return broker.dispatcher.handlers[1].__self__.sessions
