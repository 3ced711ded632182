"""BrokerClient: pipelined kafka-python requests over asyncio streams, against a real broker.

The timeout and broken-connection cases use a bare asyncio server that accepts
and then stays silent or hangs up, the two ways a peer fails.
"""
from __future__ import annotations

import asyncio

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.producer import ProduceRequest

from broker_sim.replication.client import BrokerClient
from broker_sim.server.broker import Broker
from replication_helpers import build_batch


@pytest.fixture
def broker(tmp_path):
    with Broker(tmp_path / "broker") as running:
        yield running


def test_requests_are_pipelined_and_matched_to_their_responses(broker):
    async def scenario():
        client = BrokerClient("127.0.0.1", broker.port, client_id="pipelined", timeout_s=10)
        try:
            metadata = [MetadataRequest[12](topics=[MetadataRequest.MetadataRequestTopic(name=f"t{i}")],
                                            allow_auto_topic_creation=True,
                                            include_topic_authorized_operations=False) for i in range(20)]
            versions = ApiVersionsRequest[3](client_software_name="pylog", client_software_version="1")
            answers = await asyncio.gather(*(client.request(r) for r in metadata), client.request(versions))
            assert [a.topics[0].name for a in answers[:-1]] == [f"t{i}" for i in range(20)]
            assert answers[-1].error_code == 0 and answers[-1].api_keys
            assert len({a.header.correlation_id for a in answers}) == 21
        finally:
            client.close()

    asyncio.run(scenario())


def test_a_request_without_a_response_returns_none(broker):
    async def scenario():
        client = BrokerClient("127.0.0.1", broker.port, client_id="acks0", timeout_s=10)
        try:
            await client.request(MetadataRequest[12](  # auto-creates the topic
                topics=[MetadataRequest.MetadataRequestTopic(name="fire-and-forget")],
                allow_auto_topic_creation=True, include_topic_authorized_operations=False))
            request = ProduceRequest[9](transactional_id=None, acks=0, timeout_ms=1000, topic_data=[
                ProduceRequest.TopicProduceData(name="fire-and-forget", partition_data=[
                    ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=build_batch([b"x"]))])])
            assert await client.request(request) is None
            # the connection still works afterwards
            answer = await client.request(ApiVersionsRequest[3](client_software_name="p",
                                                                client_software_version="1"))
            assert answer.error_code == 0
        finally:
            client.close()

    asyncio.run(scenario())


def test_connection_refused_is_a_connection_error_and_the_same_client_reconnects_later(tmp_path):
    first = Broker(tmp_path / "broker").start()
    port = first.port
    first.stop()
    versions = ApiVersionsRequest[3](client_software_name="p", client_software_version="1")

    async def scenario():
        loop = asyncio.get_running_loop()
        client = BrokerClient("127.0.0.1", port, client_id="late", timeout_s=5)
        try:
            with pytest.raises(ConnectionError):
                await client.request(versions)
            again = await loop.run_in_executor(None, Broker(tmp_path / "broker-2", port=port).start)
            try:
                assert (await client.request(versions)).error_code == 0
                await loop.run_in_executor(None, again.stop)
                with pytest.raises(ConnectionError):  # the broker went away under an open connection
                    await client.request(versions)
            finally:
                await loop.run_in_executor(None, again.stop)
        finally:
            client.close()

    asyncio.run(scenario())


def test_a_silent_peer_times_out_and_fails_every_request_in_flight():
    async def scenario():
        async def silent(reader, writer):
            await reader.read(1 << 20)
            await asyncio.sleep(5)
            writer.close()

        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = BrokerClient("127.0.0.1", port, client_id="silent", timeout_s=0.2)
        try:
            loop = asyncio.get_running_loop()
            started = loop.time()
            results = await asyncio.gather(
                *(client.request(ApiVersionsRequest[3](client_software_name="p", client_software_version="1"))
                  for _ in range(3)), return_exceptions=True)
            assert all(isinstance(r, ConnectionError) for r in results), results
            assert loop.time() - started < 2
            assert not client.connected
        finally:
            client.close()
            server.close()

    asyncio.run(scenario())


def test_a_peer_that_hangs_up_fails_the_request_at_once():
    async def scenario():
        async def hang_up(reader, writer):
            await reader.read(1)
            writer.close()

        server = await asyncio.start_server(hang_up, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = BrokerClient("127.0.0.1", port, client_id="hangup", timeout_s=10)
        try:
            loop = asyncio.get_running_loop()
            started = loop.time()
            with pytest.raises(ConnectionError):
                await client.request(ApiVersionsRequest[3](client_software_name="p", client_software_version="1"))
            assert loop.time() - started < 2
        finally:
            client.close()
            server.close()

    asyncio.run(scenario())
