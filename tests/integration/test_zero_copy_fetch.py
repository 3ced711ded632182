"""Large Fetch responses arrive whole, even to a client that reads slowly; broker_sim sends them with sendfile.

The client-visible part runs on Apache Kafka too (it sends file regions with sendfile as well, through its
``FileRecords.writeTo``); broker_sim's sendfile counter is checked on broker_sim only."""
import os
import socket
import time

from kafka import KafkaProducer

from client_helpers import create_topic
from kafka_wire import WireClient, batches_of, fetch_request, fetched_partitions


def test_large_fetch_to_a_slow_reader_arrives_whole(any_broker, unique):
    """...and the bytes went out through sendfile, not a copy.
    Mutation: sendfile_ok forced False (every region read and written) -> the sendfile counter stayed
    below the ~8 MB fetched; the content checks alone passed."""
    bootstrap, topic = any_broker.bootstrap_servers, unique("big-fetch")
    create_topic(bootstrap, topic)
    producer = KafkaProducer(bootstrap_servers=bootstrap, batch_size=256 * 1024, linger_ms=20,
                             max_request_size=8 * 1024 * 1024)
    payloads = [os.urandom(1000) for _ in range(8000)]  # ~8 MB, incompressible
    for value in payloads:
        producer.send(topic, value)
    producer.flush()
    producer.close()

    sent_before = any_broker.server.connections.sendfile_bytes if any_broker.kind == "pylog" else 0
    with WireClient(bootstrap, timeout=30) as client:
        # a small receive buffer and pauses make the broker's socket fill up mid-sendfile
        client.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
        request = fetch_request(topic, 0, 0, max_bytes=16 << 20, partition_max_bytes=16 << 20)
        correlation_id, data = client.encode(request)
        client.send_bytes(data)
        time.sleep(0.5)
        response = client.read_response(request, correlation_id)
    (partition,) = fetched_partitions(response)
    assert partition.error_code == 0
    values = [record.value for batch in batches_of(partition.records) for record in batch]
    assert values == payloads
    if any_broker.kind == "pylog":
        fetched, sent = len(partition.records), any_broker.server.connections.sendfile_bytes - sent_before
        assert sent >= fetched - (1 << 20), f"{sent} of {fetched} bytes went out by sendfile"
