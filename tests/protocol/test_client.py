"""WireConnection, the one framed-request client: against a real broker on loopback, and against a tiny
socket server of this module's own for the failure paths a broker does not take on request (a wrong
correlation id, a frame cut short, an oversize frame, an answer that never ends)."""
from __future__ import annotations

import socket
import struct
import threading
import time

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse
from kafka.protocol.producer import ProduceResponse

from broker_sim.protocol.client import (
    DEFAULT_PORT, ConnectionClosed, ResponseTooLarge, WireConnection, WireError, decode_response, split_address,
)
from broker_sim.server.broker import Broker
from tests.integration.kafka_wire import produce_request, produce_result, record_batch

API_VERSIONS_V0 = ApiVersionsRequest[0]


# -- against the broker -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with Broker(tmp_path_factory.mktemp("client"), port=0) as running:
        yield running


def test_call_decodes_the_response_class_of_the_request_and_counts_correlation_ids(broker):
    with WireConnection.to(broker.bootstrap_servers, timeout_s=10, client_id="client-test") as connection:
        versions = connection.call(ApiVersionsRequest[3](client_software_name="t", client_software_version="1"))
        metadata = connection.call(MetadataRequest[12](topics=None, allow_auto_topic_creation=False,
                                                       include_topic_authorized_operations=False))
    assert isinstance(versions, ApiVersionsResponse) and versions.version == 3 and versions.error_code == 0
    assert {api.api_key for api in versions.api_keys} >= {0, 1, 3, 18}
    assert (versions.header.correlation_id, metadata.header.correlation_id) == (1, 2)
    assert [b.port for b in metadata.brokers] == [broker.port]


def test_acks_0_produce_returns_none_and_the_next_answer_still_pairs(broker):
    with WireConnection.connect("127.0.0.1", broker.port, timeout_s=10) as connection:
        connection.call(MetadataRequest[12](topics=[MetadataRequest.MetadataRequestTopic(name="acks0-client")],
                                            allow_auto_topic_creation=True,
                                            include_topic_authorized_operations=False))
        assert connection.call(produce_request("acks0-client", 0, record_batch([b"x"]), acks=0)) is None
        answer = connection.call(produce_request("acks0-client", 0, record_batch([b"y"]), acks=-1),
                                 timeout_s=10)
    assert answer.header.correlation_id == 3
    assert produce_result(answer) == (0, 1)  # the acks=0 record went in first


def test_connect_to_a_closed_port_is_a_wire_error_naming_the_address():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(WireError, match=f"127.0.0.1:{port}"):
        WireConnection.connect("127.0.0.1", port, timeout_s=2)


# -- against a server of our own ------------------------------------------------------------------------

class FakeBroker:
    """Accepts one connection, reads one request frame, hands (connection, correlation id) to ``answer``."""

    def __init__(self, answer) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.answer = answer
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        connection, _ = self.server.accept()
        with connection:
            (size,) = struct.unpack(">i", _read(connection, 4))
            _, _, correlation_id = struct.unpack_from(">hhi", _read(connection, size))
            self.answer(connection, correlation_id)
            self.done.wait(10)  # hold the connection open until the test is over

    def close(self) -> None:
        self.done.set()
        self.thread.join(10)
        self.server.close()


def _read(connection: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = connection.recv(n - len(data))
        assert chunk, "the client closed the connection"
        data += chunk
    return data


def _api_versions_v0_frame(correlation_id: int) -> bytes:
    response = ApiVersionsResponse[0](error_code=0, api_keys=[])
    response.with_header(correlation_id=correlation_id)
    return bytes(response.encode(header=True, framed=True))


@pytest.fixture
def fake_broker():
    started = []

    def start(answer) -> FakeBroker:
        started.append(FakeBroker(answer))
        return started[-1]

    yield start
    for server in started:
        server.close()


def _call(server: FakeBroker, timeout_s: float = 5.0, **options):
    with WireConnection.connect("127.0.0.1", server.port, timeout_s=5, **options) as connection:
        return connection.call(API_VERSIONS_V0(), timeout_s=timeout_s)


def test_a_well_formed_answer_is_decoded(fake_broker):
    server = fake_broker(lambda conn, cid: conn.sendall(_api_versions_v0_frame(cid)))
    assert _call(server).error_code == 0


def test_an_answer_to_another_correlation_id_is_a_wire_error(fake_broker):
    server = fake_broker(lambda conn, cid: conn.sendall(_api_versions_v0_frame(cid + 1)))
    with pytest.raises(WireError, match="correlation id 2, expected 1") as raised:
        _call(server)
    assert type(raised.value) is WireError


def test_a_peer_closing_mid_frame_is_connection_closed(fake_broker):
    def cut_short(conn, cid):
        conn.sendall(_api_versions_v0_frame(cid)[:8])
        conn.shutdown(socket.SHUT_WR)

    server = fake_broker(cut_short)
    with pytest.raises(ConnectionClosed, match="after 4 of 10 bytes"):
        _call(server)


@pytest.mark.parametrize("declared", [(1 << 20) + 1, -1])
def test_an_oversize_frame_fails_before_its_body_is_read(fake_broker, declared):
    """Only the size is sent: a client that tried to read the body would wait out the deadline instead."""
    server = fake_broker(lambda conn, cid: conn.sendall(struct.pack(">i", declared)))
    started = time.monotonic()
    with pytest.raises(ResponseTooLarge, match=f"{declared} bytes"):
        _call(server, timeout_s=5, max_response_bytes=1 << 20)
    assert time.monotonic() - started < 2


def test_the_deadline_bounds_the_whole_answer_not_each_read(fake_broker):
    """A byte every 50 ms for 2 s never trips the 5 s per-read timeout; the 0.5 s deadline for the whole
    answer does (without it the call would fail only ~7 s in)."""
    def trickle(conn, cid):
        for byte in struct.pack(">i", 1 << 16) + bytes(36):
            try:
                conn.sendall(bytes([byte]))
            except OSError:
                return
            time.sleep(0.05)

    server = fake_broker(trickle)
    started = time.monotonic()
    with pytest.raises(socket.timeout):
        _call(server, timeout_s=0.5)
    assert 0.4 < time.monotonic() - started < 3


def _metadata_v12_body() -> bytes:
    response = MetadataResponse[12](throttle_time_ms=7, brokers=[MetadataResponse.MetadataResponseBroker(
        node_id=3, host="b3", port=9093, rack=None)], cluster_id="c", controller_id=3, topics=[])
    return bytes(response.encode())


# header v1 (a flexible response): two tagged fields, tag 0 with 3 bytes and tag 5 with none
_TAGGED_HEADER_FIELDS = b"\x02" + b"\x00\x03abc" + b"\x05\x00"


def test_a_flexible_answer_with_tagged_header_fields_decodes_as_kafka_python_decodes_it(fake_broker):
    """The header is read in place (not by kafka-python's copy of the whole frame): its tagged fields must be
    skipped exactly, or the body would be decoded from the wrong byte."""
    body = _metadata_v12_body()

    def answer(conn, cid):
        frame = struct.pack(">i", cid) + _TAGGED_HEADER_FIELDS + body
        conn.sendall(struct.pack(">i", len(frame)) + frame)

    server = fake_broker(answer)
    with WireConnection.connect("127.0.0.1", server.port, timeout_s=5) as connection:
        got = connection.call(MetadataRequest[12](topics=None, allow_auto_topic_creation=False,
                                                  include_topic_authorized_operations=False), timeout_s=5)
    reference = MetadataResponse[12].decode(struct.pack(">i", 1) + _TAGGED_HEADER_FIELDS + body, header=True)
    assert got == reference and got.header.correlation_id == 1
    assert (got.throttle_time_ms, got.brokers[0].host, got.brokers[0].port) == (7, "b3", 9093)


def test_decode_response_reads_a_v0_header_and_refuses_tagged_fields_past_the_frame():
    body = ProduceResponse[8](responses=[], throttle_time_ms=5).encode()
    correlation_id, response = decode_response(bytearray(struct.pack(">i", 9) + body), ProduceResponse[8])
    assert (correlation_id, response.header.correlation_id, response.throttle_time_ms) == (9, 9, 5)
    with pytest.raises(WireError, match="tagged fields run past the response"):
        decode_response(struct.pack(">i", 9) + b"\x01\x00\x7fab", MetadataResponse[12])
    with pytest.raises(WireError, match="ends inside a varint"):
        decode_response(struct.pack(">i", 9) + b"\x81", MetadataResponse[12])
    with pytest.raises(WireError, match="no correlation id"):
        decode_response(b"\x00\x01", MetadataResponse[12])


def test_a_closed_connection_is_seen_by_is_closed_by_peer(fake_broker):
    server = fake_broker(lambda conn, cid: conn.shutdown(socket.SHUT_WR))
    with WireConnection.connect("127.0.0.1", server.port, timeout_s=5) as connection:
        connection.send_bytes(connection.encode(API_VERSIONS_V0())[1])
        assert connection.is_closed_by_peer(timeout=5)


def test_an_open_idle_connection_is_not_closed_by_peer(fake_broker):
    server = fake_broker(lambda conn, cid: None)
    with WireConnection.connect("127.0.0.1", server.port, timeout_s=5) as connection:
        connection.send_bytes(connection.encode(API_VERSIONS_V0())[1])
        assert not connection.is_closed_by_peer(timeout=0.3)


# -- addresses -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("address, expected", [
    ("broker-1:9093", ("broker-1", 9093)),
    ("  broker-1:9093 ", ("broker-1", 9093)),
    ("broker-1", ("broker-1", DEFAULT_PORT)),
    ("[::1]:9093", ("::1", 9093)),
    ("::1", ("::1", DEFAULT_PORT)),
    (":9093", ("localhost", 9093)),
])
def test_split_address(address, expected):
    assert split_address(address) == expected


def test_split_address_takes_a_default_port_and_refuses_a_bad_one():
    assert split_address("broker-1", default_port=19092) == ("broker-1", 19092)
    with pytest.raises(ValueError):
        split_address("broker-1:ninety")
