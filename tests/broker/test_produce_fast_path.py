"""Real clients' produce requests take the fast decode (protocol.produce_codec), not kafka-python's fallback: the
version each client picks, its client id, its transactional id (none here) and its record sets are the plain case.
A client whose requests silently fell back would still work, only slower, so only this test would notice."""
import asyncio
import subprocess

from confluent_kafka import Producer
from kafka import KafkaProducer

import broker_sim.server.dispatch as dispatch


def _aiokafka_send(bootstrap: str, topic: str) -> None:
    from aiokafka import AIOKafkaProducer

    async def run():
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", request_timeout_ms=10000)
        await producer.start()
        try:
            await (await producer.send(topic, b"aiokafka"))
        finally:
            await producer.stop()

    asyncio.run(asyncio.wait_for(run(), 30))


def test_every_real_clients_produce_request_is_decoded_by_the_fast_path(pylog_broker, monkeypatch):
    seen = []  # (version, client id or None when the fast decode declined)
    decode = dispatch.decode_produce

    def observed(frame, version):
        request = decode(frame, version)
        seen.append((version, request.header.client_id if request is not None else None))
        return request

    monkeypatch.setattr(dispatch, "decode_produce", observed)
    bootstrap = pylog_broker.bootstrap_servers

    producer = Producer({"bootstrap.servers": bootstrap, "client.id": "confluent-fast", "linger.ms": 0})
    for i in range(3):
        producer.produce("fast-path", f"confluent-{i}".encode())
    assert producer.flush(30) == 0
    kafka_python = KafkaProducer(bootstrap_servers=bootstrap, client_id="kafka-python-fast", acks=1)
    kafka_python.send("fast-path", b"kafka-python").get(timeout=30)
    kafka_python.close()
    _aiokafka_send(bootstrap, "fast-path")
    done = subprocess.run(["kcat", "-b", bootstrap, "-P", "-t", "fast-path", "-p", "0", "-X", "client.id=kcat-fast"],
                          input=b"kcat\n", capture_output=True, timeout=30)
    assert done.returncode == 0, done.stderr.decode(errors="replace")

    declined = [version for version, client_id in seen if client_id is None]
    assert not declined, f"produce requests left to kafka-python's decoder (versions {declined}) of {seen}"
    clients = {client_id for _, client_id in seen}
    assert {"confluent-fast", "kafka-python-fast", "kcat-fast"} <= clients, seen
    assert len(clients) == 4, f"aiokafka's requests are missing from {seen}"
