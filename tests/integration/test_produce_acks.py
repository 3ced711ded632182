"""Produce with acks 0, 1 and all (-1): every record arrives; acks=0 gets no response at all.

With acks=0 Kafka sends no ProduceResponse, so a client pipelining a next
request on the same connection must get that request's answer next; the
wire test proves the broker writes nothing for the acks=0 request.
"""
from __future__ import annotations

import pytest

from client_helpers import Record, consume_kafka_python, create_topic, produce_confluent, produce_kafka_python
from kafka_wire import EARLIEST, LATEST, WireClient, list_offsets, produce_request, produce_result, record_batch

N = 50


@pytest.mark.parametrize("acks", [0, 1, "all", -1], ids=["acks0", "acks1", "acks-all", "acks-minus1"])
@pytest.mark.parametrize("producer", ["kafka-python", "confluent-kafka"])
def test_records_arrive_with_every_acks_setting(any_broker, unique, producer, acks):
    bootstrap, topic = any_broker.bootstrap_servers, unique("acks")
    create_topic(bootstrap, topic)
    sent = [Record(b"k%d" % i, b"acks %s record %d" % (str(acks).encode(), i)) for i in range(N)]
    if producer == "kafka-python":
        metadata_list = produce_kafka_python(bootstrap, topic, sent, acks=acks)
        if acks != 0:
            assert [m.offset for m in metadata_list] == list(range(N))
    else:
        delivered = produce_confluent(bootstrap, topic, sent, acks=acks)
        assert len(delivered) == N
        if acks != 0:
            assert [m.offset() for m in delivered] == list(range(N))
    got = consume_kafka_python(bootstrap, topic, N)
    assert [(r.key, r.value) for r in got] == [(r.key, r.value) for r in sent]


def test_acks_zero_produce_gets_no_response_and_the_next_request_is_answered(any_broker, unique):
    topic = unique("acks0")
    create_topic(any_broker.bootstrap_servers, topic)
    with WireClient(any_broker.bootstrap_servers) as client:
        correlation_id, data = client.encode(produce_request(topic, 0, record_batch([b"fire", b"forget"]), acks=0))
        client.send_bytes(data)
        # read_response asserts the correlation id is this request's: no ProduceResponse came first
        assert list_offsets(client, topic, 0, EARLIEST)[::2] == (0, 0)
        assert produce_result(client.call(produce_request(topic, 0, record_batch([b"acked"]), acks=1))) == (0, 2)
        assert list_offsets(client, topic, 0, LATEST)[::2] == (0, 3)
