"""protocol.produce_codec against kafka-python's ProduceRequest/ProduceResponse, the reference it replaces on the
hot path: the same decode for every version v3-v9 (flexible or not), the same response bytes, and None (so the
dispatcher falls back to kafka-python, which refuses as before) for every irregular frame."""
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from broker_sim.protocol.produce_codec import (
    PartitionAnswer, ProduceAnswer, RecordErrorAnswer, TopicAnswer, decode_request,
)
from broker_sim.protocol.validation import check_not_null

VERSIONS = st.integers(3, 9)
TEXT = st.text(max_size=12)
INT16 = st.integers(-2**15, 2**15 - 1)
INT32 = st.integers(-2**31, 2**31 - 1)
INT64 = st.integers(-2**63, 2**63 - 1)
PartitionData = ProduceRequest.TopicProduceData.PartitionProduceData
TopicResponse = ProduceResponse.TopicProduceResponse
PartitionResponse = TopicResponse.PartitionProduceResponse
RecordError = PartitionResponse.BatchIndexAndErrorMessage


def _frame(version, transactional_id, acks, timeout_ms, topics, client_id="client", correlation_id=7) -> bytes:
    request = ProduceRequest[version](
        transactional_id=transactional_id, acks=acks, timeout_ms=timeout_ms, topic_data=[
            ProduceRequest.TopicProduceData(name=name, partition_data=[
                PartitionData(index=index, records=records) for index, records in partitions])
            for name, partitions in topics])
    request.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(request.encode(header=True, framed=False))


def _reference(frame: bytes, version: int):
    """kafka-python's decode as the dispatcher does it (None when it refuses the frame)."""
    try:
        request = ProduceRequest.decode(frame, version=version, header=True)
        check_not_null(request, version)
    except Exception:  # noqa: BLE001 - any refusal
        return None
    return request


def _same(fast, reference) -> None:
    assert fast.header.client_id == reference.header.client_id
    assert fast.header.correlation_id == reference.header.correlation_id
    assert (fast.transactional_id, fast.acks, fast.timeout_ms) == (
        reference.transactional_id, reference.acks, reference.timeout_ms)
    assert [(t.name, [(p.index, bytes(p.records)) for p in t.partition_data]) for t in fast.topic_data] == [
        (t.name, [(p.index, bytes(p.records)) for p in t.partition_data]) for t in reference.topic_data]


requests = st.tuples(
    VERSIONS, st.none() | TEXT, INT16, INT32,
    st.lists(st.tuples(TEXT, st.lists(st.tuples(INT32, st.binary(max_size=300)), max_size=3)), max_size=3),
    TEXT, INT32)


@settings(max_examples=200, deadline=None)
@given(requests)
def test_every_version_decodes_as_kafka_python_decodes(request):
    version, transactional_id, acks, timeout_ms, topics, client_id, correlation_id = request
    frame = _frame(version, transactional_id, acks, timeout_ms, topics, client_id, correlation_id)
    fast = decode_request(frame, version)
    assert fast is not None, "a well-formed request was left to the slow path"
    _same(fast, _reference(frame, version))
    assert isinstance(fast.topic_data[0].partition_data[0].records, memoryview) if topics and topics[0][1] else True


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests, st.data())
def test_a_damaged_frame_is_decoded_as_kafka_python_decodes_it_or_left_to_it(request, data):
    """Cut, extended or with bytes overwritten: whenever the fast decode answers, kafka-python decodes the same
    frame to the same request (so the fast path never accepts what the broker refused before)."""
    version, transactional_id, acks, timeout_ms, topics, client_id, correlation_id = request
    frame = bytearray(_frame(version, transactional_id, acks, timeout_ms, topics, client_id, correlation_id))
    how = data.draw(st.sampled_from(["cut", "extend", "overwrite"]))
    if how == "cut":
        del frame[data.draw(st.integers(0, len(frame) - 1)):]
    elif how == "extend":
        frame += data.draw(st.binary(min_size=1, max_size=8))
    else:
        for _ in range(data.draw(st.integers(1, 4))):
            frame[data.draw(st.integers(0, len(frame) - 1))] = data.draw(st.integers(0, 255))
    frame = bytes(frame)
    fast = decode_request(frame, version)
    if how in ("cut", "extend"):
        assert fast is None, f"a frame with {how} bytes was accepted by the fast decode"
    if fast is not None:
        reference = _reference(frame, version)
        assert reference is not None, "the fast decode accepted a frame kafka-python refuses"
        _same(fast, reference)


def _v8(body: bytes) -> bytes:
    return struct.pack(">hhih", 0, 8, 1, 1) + b"c" + body


@pytest.mark.parametrize("frame, version, why", [
    (_v8(b"\xff\xff" + struct.pack(">hi", 1, 100) + struct.pack(">i", -1)), 8, "a null topic array"),
    (_v8(b"\xff\xff" + struct.pack(">hi", 1, 100) + struct.pack(">i", 2**31 - 1)), 8, "2**31-1 topics in 20 bytes"),
    (_v8(b"\xff\xff" + struct.pack(">hii", 1, 100, 1) + b"\xff\xff" + struct.pack(">i", 0)), 8, "a null topic name"),
    (_v8(b"\xff\xff" + struct.pack(">hii", 1, 100, 1) + b"\x00\x01t" + struct.pack(">iii", 1, 0, -1)), 8,
     "null records"),
    (_v8(b"\xff\xff" + struct.pack(">hii", 1, 100, 1) + b"\x00\x01t" + struct.pack(">iii", 1, 0, -5)), 8,
     "a negative records length"),
    (_v8(b"\xff\xff" + struct.pack(">hii", 1, 100, 1) + b"\x00\x01t" + struct.pack(">iii", 1, 0, 2**31 - 1)), 8,
     "a records length past the frame"),
    (_v8(b"\xff\xfe" + struct.pack(">hii", 1, 100, 0)), 8, "a transactional id length of -2"),
    (struct.pack(">hhih", 0, 8, 1, -1) + b"\xff\xff" + struct.pack(">hii", 1, 100, 0), 8, "a null client id"),
    (_v8(b"\x00\x02\xff\xfe" + struct.pack(">hii", 1, 100, 0)), 8, "a transactional id that is not UTF-8"),
    (_v8(b"\xff\xff" + struct.pack(">hii", 1, 100, 0)), 7, "a header naming another version"),
    (struct.pack(">hhih", 0, 9, 1, 1) + b"c\x00\x00" + struct.pack(">hi", 1, 100) + b"\x00\x00", 9,
     "a null compact topic array"),
    (struct.pack(">hhih", 0, 9, 1, 1) + b"c\x00\x00" + struct.pack(">hi", 1, 100) + b"\xff\xff\xff\xff\xff\x01",
     9, "a varint longer than 5 bytes"),
    (struct.pack(">hhih", 0, 9, 1, 1) + b"c\x00\x00" + struct.pack(">hi", 1, 100) + b"\x02\x02t\x02"
     + struct.pack(">i", 0) + b"\x00\x00\x00\x00", 9, "null compact records"),
    (_v8(b"\xff\xff" + struct.pack(">hii", 1, 100, 0)), 2, "a version below 3"),
    (struct.pack(">hhih", 0, 10, 1, 1) + b"c\x00\x00" + struct.pack(">hi", 1, 100) + b"\x01\x00", 10,
     "a version above 9"),
])
def test_an_irregular_frame_is_left_to_kafka_python(frame, version, why):
    assert decode_request(frame, version) is None, why


TAGGED = b"\x01\x00\x01X"  # one tagged field: tag 0, one byte


def _v9(header_tags=b"\x00", partition_tags=b"\x00", topic_tags=b"\x00", request_tags=b"\x00") -> bytes:
    return (struct.pack(">hhih", 0, 9, 1, 1) + b"c" + header_tags + b"\x00" + struct.pack(">hi", 1, 100)
            + b"\x02\x02t\x02" + struct.pack(">i", 0) + b"\x04abc" + partition_tags + topic_tags + request_tags)


@pytest.mark.parametrize("where", ["header_tags", "partition_tags", "topic_tags", "request_tags"])
def test_a_tagged_field_anywhere_is_left_to_kafka_python(where):
    assert decode_request(_v9(), 9) is not None  # the frame without it is the plain case
    assert decode_request(_v9(**{where: TAGGED}), 9) is None


def _answers(draw_topics, version):
    ours = ProduceAnswer([TopicAnswer(name, [
        PartitionAnswer(index, code, base, append_time, start, message,
                        [RecordErrorAnswer(i, m) for i, m in errors]) for index, code, base, append_time, start,
        message, errors in partitions]) for name, partitions in draw_topics])
    theirs = ProduceResponse[version](responses=[TopicResponse(name=name, partition_responses=[
        PartitionResponse(index=index, error_code=code, base_offset=base, log_append_time_ms=append_time,
                          log_start_offset=start, error_message=message,
                          record_errors=[RecordError(batch_index=i, batch_index_error_message=m) for i, m in errors])
        for index, code, base, append_time, start, message, errors in partitions]) for name, partitions in draw_topics])
    return ours, theirs


@settings(max_examples=150, deadline=None)
@given(VERSIONS, INT32, INT32, st.lists(st.tuples(TEXT, st.lists(st.tuples(
    INT32, INT16, INT64, INT64, INT64, st.none() | TEXT, st.lists(st.tuples(INT32, st.none() | TEXT), max_size=3)),
    max_size=3)), max_size=3))
def test_every_version_encodes_the_response_as_kafka_python_does(version, correlation_id, throttle, topics):
    ours, theirs = _answers(topics, version)
    ours.throttle_time_ms = throttle
    theirs.throttle_time_ms = throttle
    theirs.with_header(correlation_id=correlation_id)
    assert ours.encode(version, correlation_id) == bytes(theirs.encode(header=True, framed=True))


def test_a_version_outside_3_to_9_is_not_encoded():
    with pytest.raises(ValueError, match="v10"):
        ProduceAnswer([]).encode(10, 1)
