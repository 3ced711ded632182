"""Test helpers over the one wire client, for tests that must control exact bytes.

Theory of operation: ``broker_sim.protocol.client.WireConnection`` frames
kafka-python's request classes and decodes the responses (the response class
comes from the request header), so a test can send the same ProduceRequest
twice, a truncated frame, or a version the broker does not speak, and see
exactly what came back (or that the connection was closed: ``ConnectionClosed``
from ``broker_sim.protocol.client``).  ``WireClient`` is that connection with
the tests' defaults; builders for the requests the tests repeat (Produce,
Fetch, ListOffsets, topic admin) and for crafted record batches live here too.
"""
from __future__ import annotations

import struct
import time

from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from broker_sim.protocol.client import WireConnection, split_address

LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3  # ListOffsets special timestamps
CLIENT_ID = "pylog-integration"


class WireClient(WireConnection):
    """A ``WireConnection`` to ``host:port`` with the tests' client id; ``timeout`` bounds the connect and
    each read (``call(..., timeout_s=)`` bounds a whole answer)."""

    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        host, port = split_address(bootstrap)
        opened = WireConnection.connect(host, port, timeout_s=timeout, client_id=CLIENT_ID)
        super().__init__(opened.sock, address=opened.address, client_id=CLIENT_ID)


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


COORDINATOR_LOAD_IN_PROGRESS = 14


def init_producer_id(client: WireClient, timeout: float = 15) -> tuple[int, int]:
    """An idempotent producer id and epoch, retrying COORDINATOR_LOAD_IN_PROGRESS as Kafka's clients do (a fresh
    Apache Kafka answers it until its controller granted the broker a block of producer ids)."""
    deadline = time.monotonic() + timeout
    while True:
        response = client.call(InitProducerIdRequest[4](transactional_id=None, transaction_timeout_ms=60000,
                                                        producer_id=-1, producer_epoch=-1))
        if response.error_code != COORDINATOR_LOAD_IN_PROGRESS or time.monotonic() >= deadline:
            break
        time.sleep(0.1)
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


def varint(value: int) -> bytes:
    """A zigzag varint, as record fields are written."""
    from kafka.record.util import encode_varint
    out = bytearray()
    encode_varint(value, out.append)
    return bytes(out)


def crafted_record(offset_delta: int, key: bytes | None, value: bytes | None, *, length_error: int = 0,
                   value_length: int | None = None) -> bytes:
    """One record v2, byte by byte; ``length_error`` makes its length prefix lie, ``value_length`` its value's."""
    body = b"\x00" + varint(0) + varint(offset_delta)
    body += varint(-1) if key is None else varint(len(key)) + key
    if value is None:
        body += varint(-1)
    else:
        body += varint(len(value) if value_length is None else value_length) + value
    body += varint(0)  # no headers
    return varint(len(body) + length_error) + body


def crafted_batch(payload: bytes, count: int, *, codec: int = 0, producer_id: int = -1,
                  base_sequence: int = -1) -> bytes:
    """A RecordBatch v2 claiming ``count`` records around ``payload`` (compressed already when ``codec``),
    with a valid CRC whatever the payload holds."""
    from crc32c import crc32c

    from broker_sim.storage.batch import HEADER
    size = HEADER.size + len(payload)
    data = bytearray(HEADER.pack(0, size - 12, -1, 2, 0, codec, count - 1, 1000, 1000, producer_id,
                                 0 if producer_id >= 0 else -1, base_sequence, count)) + payload
    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    return bytes(data)


XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)


def xerial_snappy(data: bytes, block: int = 32 * 1024) -> bytes:
    """Snappy in the xerial framing Java's SnappyOutputStream and kafka-python write: [length][raw block]..."""
    import cramjam
    out = bytearray(XERIAL_HEADER)
    for start in range(0, len(data), block):
        piece = bytes(cramjam.snappy.compress_raw(data[start:start + block]))
        out += struct.pack(">i", len(piece)) + piece
    return bytes(out)


def compressed_zeros(codec: int, prefix: bytes, zeros: int) -> bytes:
    """``prefix`` then ``zeros`` zero bytes (a multiple of 1 MiB) compressed with Kafka codec ``codec``
    (1 gzip, 2 xerial snappy, 3 lz4 frame, 4 zstd), never holding them uncompressed."""
    import zlib

    import lz4.frame
    import zstandard
    block, blocks = bytes(1 << 20), zeros >> 20
    if codec == 2:
        zero_block = xerial_snappy(block, len(block))[len(XERIAL_HEADER):]
        return xerial_snappy(prefix, len(prefix)) + zero_block * blocks
    if codec == 1:
        stream, head = zlib.compressobj(1, wbits=31), b""
    elif codec == 3:
        stream = lz4.frame.LZ4FrameCompressor()
        head = stream.begin()
    else:
        stream, head = zstandard.ZstdCompressor(level=1).compressobj(), b""
    parts = [head, stream.compress(prefix)] + [stream.compress(block) for _ in range(blocks)]
    return b"".join(parts) + stream.flush()


def one_record_bomb(codec: int, record_bytes: int) -> bytes:
    """A batch whose single record expands to ``record_bytes`` zero bytes (zstd: 1 GiB in ~32 KB)."""
    head = b"\x00" + varint(0) + varint(0) + varint(1) + b"k" + varint(record_bytes)
    prefix = varint(len(head) + record_bytes + 1) + head  # + 1: the header count after the value
    return crafted_batch(compressed_zeros(codec, prefix, record_bytes), 1, codec=codec)


# --- topic admin (CreateTopics, CreatePartitions, DeleteTopics) -------------

def create_topics(client: WireClient, topics: dict[str, int], *, configs: dict[str, str] | None = None,
                  validate_only: bool = False, version: int = 5) -> dict[str, tuple[int, str | None]]:
    """name -> (error code, error message) of one CreateTopics request for ``topics`` (name -> partitions)."""
    from kafka.protocol.admin import CreateTopicsRequest
    topic = CreateTopicsRequest.CreatableTopic
    request = CreateTopicsRequest[version](timeout_ms=60000, validate_only=validate_only, topics=[
        topic(name=name, num_partitions=count, replication_factor=1, assignments=[],
              configs=[topic.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])
        for name, count in topics.items()])
    return {t.name: (t.error_code, t.error_message) for t in client.call(request).topics}


def create_partitions(client: WireClient, topic: str, count: int, *, version: int = 3) -> tuple[int, str | None]:
    """(error code, error message) of one CreatePartitions request growing ``topic`` to ``count``."""
    from kafka.protocol.admin import CreatePartitionsRequest
    request = CreatePartitionsRequest[version](timeout_ms=60000, validate_only=False, topics=[
        CreatePartitionsRequest.CreatePartitionsTopic(name=topic, count=count, assignments=None)])
    result = client.call(request).results[0]
    return result.error_code, result.error_message


def delete_topics(client: WireClient, names: list[str], *, version: int = 4) -> dict[str, int]:
    """name -> error code of one DeleteTopics request."""
    from kafka.protocol.admin import DeleteTopicsRequest
    request = DeleteTopicsRequest[version](timeout_ms=60000, topic_names=names)
    return {r.name: r.error_code for r in client.call(request).responses}


def set_topic_configs(client: WireClient, topic: str, configs: dict[str, str], *, version: int = 1) -> int:
    """Error code of one IncrementalAlterConfigs request SETting ``configs`` on ``topic``."""
    from kafka.protocol.admin import IncrementalAlterConfigsRequest
    resource = IncrementalAlterConfigsRequest.AlterConfigsResource
    request = IncrementalAlterConfigsRequest[version](validate_only=False, resources=[resource(
        resource_type=2, resource_name=topic, configs=[
            resource.AlterableConfig(name=k, config_operation=0, value=v) for k, v in configs.items()])])
    return client.call(request).responses[0].error_code


def framed(request, correlation_id: int = 1) -> bytes:
    """The framed bytes of a versioned request, for a test that sends without reading the answers."""
    request.with_header(correlation_id=correlation_id, client_id=CLIENT_ID)
    return bytes(request.encode(header=True, framed=True))
