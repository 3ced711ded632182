"""Malformed and unsupported requests over real sockets close one connection, never the broker.

Each case sends its bytes on its own connection and checks what Kafka does
(connection closed, or for ApiVersions an UNSUPPORTED_VERSION answer in the v0
layout on a connection that stays usable); then a different client on a new
connection must still produce and consume.  Produce and Fetch naming a topic
or partition that does not exist get UNKNOWN_TOPIC_OR_PARTITION for it.
"""
from __future__ import annotations

import struct

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest

from client_helpers import Record, consume_aiokafka, produce_aiokafka
from kafka_wire import (
    WireClient, fetch_request, fetched_partitions, metadata, produce_request, produce_result, record_batch,
)

UNKNOWN_TOPIC_OR_PARTITION, UNSUPPORTED_VERSION = 3, 35
MAX_FRAME = 100_000


def _header(api_key: int, version: int, correlation_id: int = 7) -> bytes:
    client_id = b"bad-input"
    return struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id


def _frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def _valid_metadata_frame() -> bytes:
    request = MetadataRequest[12](topics=[MetadataRequest.MetadataRequestTopic(name="some-topic-name")],
                                  allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    request.with_header(correlation_id=7, client_id="bad-input")
    return bytes(request.encode(header=True, framed=True))


def _truncated_metadata_frame() -> bytes:
    body = _valid_metadata_frame()[4:]
    return _frame(body[:-12])


CLOSING_INPUTS = {
    "absurd-frame-length": struct.pack(">i", 2**31 - 1) + b"\x00" * 64,
    "frame-over-socket-request-max-bytes": struct.pack(">i", MAX_FRAME + 1) + b"\x00" * 64,
    "negative-frame-length": struct.pack(">i", -5) + b"\x00" * 16,
    "garbage-bytes": _frame(bytes(range(256)) * 3),
    "frame-shorter-than-a-header": _frame(b"\x00\x03"),
    "truncated-metadata-request": _truncated_metadata_frame(),
    "unknown-api-key": _frame(_header(999, 0) + b"\x00" * 16),
    "unsupported-metadata-version": _frame(_header(3, 99) + b"\x00" * 16),
    "unsupported-produce-version": _frame(_header(0, 2) + b"\x00" * 16),
}


@pytest.fixture
def broker(pylog_broker_factory):
    return pylog_broker_factory(config={"socket.request.max.bytes": str(MAX_FRAME)})


def assert_broker_serves(bootstrap: str, topic: str) -> None:
    """A fresh client on fresh connections produces and consumes."""
    produce_aiokafka(bootstrap, topic, [Record(b"still", b"serving")])
    got = consume_aiokafka(bootstrap, topic, 1, timeout=10)
    assert [(r.key, r.value) for r in got] == [(b"still", b"serving")]


@pytest.mark.parametrize("name", list(CLOSING_INPUTS))
def test_bad_request_closes_only_its_connection(broker, name):
    with WireClient(broker.bootstrap_servers) as bystander:
        metadata(bystander, ["bystander"])
        with WireClient(broker.bootstrap_servers) as client:
            client.send_bytes(CLOSING_INPUTS[name])
            assert client.is_closed_by_peer(), f"{name}: connection left open"
        # a connection opened before the bad one keeps working
        assert metadata(bystander, ["bystander"]).topics[0].error_code == 0
    assert_broker_serves(broker.bootstrap_servers, f"after-{name}")


def test_frame_cut_short_by_a_disconnect_leaves_the_broker_serving(broker):
    frame = _valid_metadata_frame()
    with WireClient(broker.bootstrap_servers) as client:
        client.send_bytes(frame[: len(frame) // 2])
    assert_broker_serves(broker.bootstrap_servers, "after-partial-frame")


def test_api_versions_of_an_unknown_version_is_answered_in_v0_and_the_connection_stays_open(broker):
    with WireClient(broker.bootstrap_servers) as client:
        client.send_bytes(_frame(_header(18, 99, correlation_id=41) + b"\x00" * 8))
        answer = ApiVersionsResponse.decode(client.recv_frame(), version=0, header=True)
        assert answer.header.correlation_id == 41
        assert answer.error_code == UNSUPPORTED_VERSION
        supported = {a.api_key: (a.min_version, a.max_version) for a in answer.api_keys}
        assert list(supported) == [18] and supported[18][0] == 0 and supported[18][1] >= 3  # only its own, as Kafka

        again = client.call(ApiVersionsRequest[3](client_software_name="pylog-tests", client_software_version="1"))
        assert again.error_code == 0 and {0, 1, 2, 3, 18} <= {a.api_key for a in again.api_keys}
    assert_broker_serves(broker.bootstrap_servers, "after-api-versions-99")


def test_produce_and_fetch_for_missing_topic_or_partition_get_unknown_topic_or_partition(broker):
    with WireClient(broker.bootstrap_servers) as client:
        assert metadata(client, ["exists"]).topics[0].error_code == 0
        assert produce_result(client.call(produce_request("never-created", 0, record_batch([b"x"]))))[0] == \
            UNKNOWN_TOPIC_OR_PARTITION
        assert produce_result(client.call(produce_request("exists", 7, record_batch([b"x"]))))[0] == \
            UNKNOWN_TOPIC_OR_PARTITION
        for topic, partition in (("never-created", 0), ("exists", 7)):
            (answer,) = fetched_partitions(client.call(fetch_request(topic, partition, 0)))
            assert answer.error_code == UNKNOWN_TOPIC_OR_PARTITION, (topic, partition)
        # produce did not create the topic as a side effect
        assert metadata(client, ["never-created"], auto_create=False).topics[0].error_code == \
            UNKNOWN_TOPIC_OR_PARTITION
    assert_broker_serves(broker.bootstrap_servers, "exists")
