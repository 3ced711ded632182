"""Property-based fuzzing of request frames: a bad request closes one connection, never the broker.

Frames are fed straight to the broker's dispatcher on its own event loop (no
sockets): random bytes, a real header with a random body, and real requests
from kafka-python's encoders with bits flipped or bytes cut.  Every frame must
end in a response or in ``CloseConnection``; any other exception is a broker
bug.  After the run, a real client still produces and consumes.
"""
import asyncio
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.producer import ProduceRequest

from broker_sim.protocol.apis import APIS
from broker_sim.server.network import CloseConnection


class FakeConnection:
    peer = "fuzz"
    sendfile_ok = False
    inter_broker = False
    authenticator = None
    close_after_response = False
    listener = "PLAINTEXT"
    principal = "User:ANONYMOUS"

    def throttle(self, milliseconds):
        pass


def _valid_requests():
    produce = ProduceRequest[9](transactional_id=None, acks=1, timeout_ms=1000, topic_data=[
        ProduceRequest.TopicProduceData(name="fuzz", partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=b"\x00" * 70)])])
    fetch = FetchRequest[12](replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                             session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(topic="fuzz", partitions=[
                                 FetchRequest.FetchTopic.FetchPartition(partition=0, fetch_offset=0,
                                                                        partition_max_bytes=1 << 20)])],
                             forgotten_topics_data=[], rack_id="")
    requests = [ApiVersionsRequest[3](client_software_name="fuzz", client_software_version="1"),
                MetadataRequest[12](topics=[MetadataRequest.MetadataRequestTopic(name="fuzz")],
                                    allow_auto_topic_creation=True, include_topic_authorized_operations=False),
                ListOffsetsRequest[7](replica_id=-1, isolation_level=0, topics=[]),
                produce, fetch]
    encoded = []
    for request in requests:
        request.with_header(correlation_id=1, client_id="fuzz")
        encoded.append(bytes(request.encode(header=True)))
    return encoded


VALID = _valid_requests()


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    from broker_sim.server.broker import Broker
    with Broker(tmp_path_factory.mktemp("fuzz"), port=0, config={"num.partitions": 1}) as b:
        yield b


def _handle(broker, frame: bytes):
    future = asyncio.run_coroutine_threadsafe(broker.dispatcher.handle(FakeConnection(), frame), broker._loop)
    try:
        return future.result(timeout=3)
    except CloseConnection:
        return "closed"
    except TimeoutError:
        # a mutated max_wait_ms can ask for an hours-long poll, which Kafka honours too
        future.cancel()
        assert frame[:2] == b"\x00\x01", "only a Fetch long poll may take this long"
        return None


header_and_body = st.builds(
    lambda key, version, body: struct.pack(">hhih", key, version, 7, -1) + body,
    st.sampled_from(sorted(APIS)), st.integers(-1, 20), st.binary(max_size=200))


def _mutate(data: bytes, flips, cut) -> bytes:
    buf = bytearray(data)
    for position, bit in flips:
        if buf:
            buf[position % len(buf)] ^= 1 << bit
    return bytes(buf[:cut]) if cut is not None else bytes(buf)


mutated = st.builds(_mutate, st.sampled_from(VALID),
                    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 7)), max_size=4),
                    st.one_of(st.none(), st.integers(0, 300)))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(frame=st.one_of(st.binary(max_size=300), header_and_body, mutated))
def test_any_frame_gets_a_response_or_closes_only_its_connection(broker, frame):
    result = _handle(broker, frame)
    assert result == "closed" or result is None or all(isinstance(p, bytes) for p in result)


def test_broker_still_serves_clients_after_fuzzing(broker):
    from kafka import KafkaConsumer, KafkaProducer
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    producer.send("after-fuzz", b"still here").get(timeout=10)
    producer.close()
    consumer = KafkaConsumer("after-fuzz", bootstrap_servers=broker.bootstrap_servers,
                             auto_offset_reset="earliest", consumer_timeout_ms=5000)
    assert [r.value for r in consumer] == [b"still here"]
    consumer.close()
