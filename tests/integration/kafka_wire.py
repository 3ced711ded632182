"""A tiny blocking Kafka wire client for tests that must control exact bytes.

Theory of operation: kafka-python's schema classes encode requests and decode
responses; this module only frames them over a plain socket, so a test can
send the same ProduceRequest twice, a truncated frame, or a version the
broker does not speak, and see exactly what came back (or that the
connection was closed).  Builders for the few requests the tests repeat
(Produce, Fetch, ListOffsets) live here too.
"""
from __future__ import annotations

import socket
import struct
import time

from kafka.protocol.consumer import FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse
from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse, ProduceRequest, ProduceResponse
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

_SIZE = struct.Struct(">i")
LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3  # ListOffsets special timestamps
RESPONSE_CLASSES = {
    ProduceRequest.API_KEY: ProduceResponse,
    FetchRequest.API_KEY: FetchResponse,
    ListOffsetsRequest.API_KEY: ListOffsetsResponse,
    MetadataRequest.API_KEY: MetadataResponse,
    ApiVersionsRequest.API_KEY: ApiVersionsResponse,
    InitProducerIdRequest.API_KEY: InitProducerIdResponse,
}


class ConnectionClosed(Exception):
    """The broker closed the connection before a whole response arrived."""


class WireClient:
    """One TCP connection to a broker; requests are answered in order."""

    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self._correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "WireClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def encode(self, request) -> tuple[int, bytes]:
        """(correlation id, framed bytes) of a versioned request (built as ``Cls[version](...)``)."""
        self._correlation_id += 1
        request.with_header(correlation_id=self._correlation_id, client_id="pylog-integration")
        return self._correlation_id, bytes(request.encode(header=True, framed=True))

    def recv_frame(self) -> bytes:
        (size,) = _SIZE.unpack(self._recv_exact(4))
        return self._recv_exact(size)

    def call(self, request):
        """Send one request, return its decoded response (raises ConnectionClosed)."""
        correlation_id, data = self.encode(request)
        self.send_bytes(data)
        return self.read_response(request.API_KEY, request.API_VERSION, correlation_id)

    def read_response(self, api_key: int, version: int, correlation_id: int):
        payload = self.recv_frame()
        response = RESPONSE_CLASSES[api_key].decode(payload, version=version, header=True)
        assert response.header.correlation_id == correlation_id
        return response

    def is_closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True when the broker closes the connection within ``timeout`` without sending anything."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(1)
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False
        return data == b""

    def _recv_exact(self, n: int) -> bytes:
        chunks, got = [], 0
        while got < n:
            try:
                chunk = self.sock.recv(n - got)
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                raise ConnectionClosed(f"connection closed after {got} of {n} bytes")
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)


def record_batch(values, *, producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
                 timestamps=None, key: bytes | None = b"k", compression: int = 0) -> bytes:
    """A RecordBatch v2 holding ``values`` (one record each)."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=compression, is_transactional=False,
                                        producer_id=producer_id, producer_epoch=producer_epoch,
                                        base_sequence=base_sequence, batch_size=1 << 30)
    now = int(time.time() * 1000)
    for i, value in enumerate(values):
        timestamp = timestamps[i] if timestamps is not None else now
        builder.append(i, timestamp=timestamp, key=key, value=value, headers=[])
    return bytes(builder.build())


def produce_request(topic: str, partition: int, records: bytes, *, acks: int = -1, version: int = 9):
    return ProduceRequest[version](
        transactional_id=None, acks=acks, timeout_ms=5000, topic_data=[
            ProduceRequest.TopicProduceData(name=topic, partition_data=[
                ProduceRequest.TopicProduceData.PartitionProduceData(index=partition, records=records)])])


def produce_result(response):
    """(error code, base offset) of a single-partition ProduceResponse."""
    partition = response.responses[0].partition_responses[0]
    return partition.error_code, partition.base_offset


def init_producer_id(client: WireClient) -> tuple[int, int]:
    response = client.call(InitProducerIdRequest[4](transactional_id=None, transaction_timeout_ms=60000,
                                                    producer_id=-1, producer_epoch=-1))
    assert response.error_code == 0, response
    return response.producer_id, response.producer_epoch


def metadata(client: WireClient, topics: list[str], *, auto_create: bool = True):
    return client.call(MetadataRequest[12](
        topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
        allow_auto_topic_creation=auto_create, include_topic_authorized_operations=False))


def fetch_request(topic: str, partition: int, offset: int, *, max_wait_ms: int = 0, min_bytes: int = 1,
                  max_bytes: int = 1 << 20, partition_max_bytes: int = 1 << 20, version: int = 12):
    return FetchRequest[version](
        replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes, isolation_level=0,
        session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(topic=topic, partitions=[
            FetchRequest.FetchTopic.FetchPartition(partition=partition, fetch_offset=offset,
                                                   partition_max_bytes=partition_max_bytes,
                                                   current_leader_epoch=-1, last_fetched_epoch=-1,
                                                   log_start_offset=-1)])],
        forgotten_topics_data=[], rack_id="")


def fetched_partitions(response):
    return [p for topic in response.responses for p in topic.partitions]


def batches_of(records: bytes | None) -> list:
    """The record batches of a Fetch response's records field."""
    batches = []
    memory = MemoryRecords(bytes(records or b""))
    while memory.has_next():
        batch = memory.next_batch()
        if batch is None:
            break
        batches.append(batch)
    return batches


def list_offsets(client: WireClient, topic: str, partition: int, timestamp: int, *, version: int = 7):
    """(error code, timestamp, offset) of a single-partition ListOffsets query."""
    request = ListOffsetsRequest[version](replica_id=-1, isolation_level=0, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
            ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                partition_index=partition, current_leader_epoch=-1, timestamp=timestamp)])])
    answer = client.call(request).topics[0].partitions[0]
    return answer.error_code, answer.timestamp, answer.offset


def framed(request, correlation_id: int = 1) -> bytes:
    """The framed bytes of a versioned request, for a test that sends without reading the answers."""
    request.with_header(correlation_id=correlation_id, client_id="pylog-integration")
    return bytes(request.encode(header=True, framed=True))
