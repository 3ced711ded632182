"""Large Fetch responses go out with sendfile intact, even to a client that reads slowly."""
import os
import socket
import time

from kafka import KafkaProducer

from kafka_wire import WireClient, batches_of, fetch_request, fetched_partitions


def test_large_fetch_to_a_slow_reader_arrives_whole(pylog_broker):
    """...and the bytes went out through sendfile, not a copy.
    Mutation: sendfile_ok forced False (every region read and written) -> the sendfile counter stayed
    below the ~8 MB fetched; the content checks alone passed."""
    bootstrap = pylog_broker.bootstrap_servers
    producer = KafkaProducer(bootstrap_servers=bootstrap, batch_size=256 * 1024, linger_ms=20,
                             max_request_size=8 * 1024 * 1024)
    payloads = [os.urandom(1000) for _ in range(8000)]  # ~8 MB, incompressible
    for value in payloads:
        producer.send("big-fetch", value)
    producer.flush()
    producer.close()

    sent_before = pylog_broker.connections.sendfile_bytes
    with WireClient(bootstrap, timeout=30) as client:
        # a small receive buffer and pauses make the broker's socket fill up mid-sendfile
        client.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
        request = fetch_request("big-fetch", 0, 0, max_bytes=16 << 20, partition_max_bytes=16 << 20)
        correlation_id, data = client.encode(request)
        client.send_bytes(data)
        time.sleep(0.5)
        response = client.read_response(request, correlation_id)
    (partition,) = fetched_partitions(response)
    assert partition.error_code == 0
    values = [record.value for batch in batches_of(partition.records) for record in batch]
    assert values == payloads
    fetched = len(partition.records)
    assert pylog_broker.connections.sendfile_bytes - sent_before >= fetched - (1 << 20), \
        f"{pylog_broker.connections.sendfile_bytes - sent_before} of {fetched} bytes went out by sendfile"
