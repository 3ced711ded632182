"""The metrics endpoint, scraped while clients produce and consume: Kafka's metric names, counts that match
what the clients did, monotonic counters, per-group lag, and an HTTP surface that refuses what it does not serve."""
from __future__ import annotations

import socket
import threading
import urllib.error
import urllib.request

import pytest
from kafka import KafkaConsumer, KafkaProducer
from prometheus_client.parser import text_string_to_metric_families

from broker_sim.server.broker import Broker

RECORDS = 3000


def scrape(broker) -> dict[tuple[str, tuple], float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{broker.metrics_port}/metrics", timeout=10).read().decode()
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def value(samples, name, **labels) -> float:
    return samples[(name, tuple(sorted((k, str(v)) for k, v in labels.items())))]


@pytest.fixture
def broker(tmp_path):
    with Broker(tmp_path / "data", port=0, config={"metrics.port": 0}) as running:
        yield running


def test_scrapes_during_a_load_count_what_the_clients_did(broker):
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, linger_ms=2)
    producer.send("events", b"warm-up").get(10)
    scrapes = []
    done = threading.Event()

    def produce():
        for i in range(RECORDS - 1):
            producer.send("events", b"record-%06d" % i)
        producer.flush(30)
        done.set()

    thread = threading.Thread(target=produce)
    thread.start()
    while not done.is_set():
        scrapes.append(scrape(broker))  # scraping while the broker appends
    thread.join()
    producer.close()
    consumer = KafkaConsumer("events", bootstrap_servers=broker.bootstrap_servers, group_id="readers",
                             auto_offset_reset="earliest", enable_auto_commit=False, max_poll_records=1000)
    read = 0
    while read < 1000:
        read += sum(len(batch) for batch in consumer.poll(2000).values())
    consumer.commit()
    final = scrape(broker)
    consumer.close()

    assert len(scrapes) >= 2
    messages_in = [value(s, "kafka_server_brokertopicmetrics_messagesin_total", topic="events", partition=0)
                   for s in scrapes + [final]]
    assert messages_in == sorted(messages_in) and messages_in[-1] == RECORDS  # monotonic, exact at the end
    assert value(final, "kafka_log_log_logendoffset", topic="events", partition=0) == RECORDS
    assert value(final, "kafka_server_brokertopicmetrics_bytesin_total", topic="events", partition=0) == \
        value(final, "kafka_log_log_size", topic="events", partition=0)
    assert value(final, "kafka_server_brokertopicmetrics_bytesout_total", topic="events", partition=0) > 0
    committed = value(final, "kafka_consumergroup_current_offset", consumergroup="readers", topic="events",
                      partition=0)
    assert committed >= 1000
    assert value(final, "kafka_consumergroup_lag", consumergroup="readers", topic="events",
                 partition=0) == RECORDS - committed
    assert value(final, "kafka_coordinator_group_groupmetadatamanager_numgroups") == 1
    assert value(final, "kafka_network_requestmetrics_requests_total", request="Produce", version=9) >= 1
    produce_count = value(final, "kafka_network_requestmetrics_totaltimems_count", request="Produce")
    assert produce_count == sum(v for (name, labels), v in final.items()
                                if name == "kafka_network_requestmetrics_requests_total"
                                and ("request", "Produce") in labels)
    assert value(final, "kafka_server_socket_server_metrics_connection_count", listener="PLAINTEXT") >= 1
    assert value(final, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert value(final, "kafka_server_replicamanager_leadercount") >= 1


def test_only_get_metrics_is_served_and_a_bad_request_does_not_hurt_the_broker(broker):
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(f"http://127.0.0.1:{broker.metrics_port}/admin", timeout=10)
    assert missing.value.code == 404
    with socket.create_connection(("127.0.0.1", broker.metrics_port), timeout=10) as sock:
        sock.sendall(b"x" * 20000)  # no end of headers within the limit: the connection is dropped
        sock.settimeout(10)
        try:
            answer = sock.recv(100)
        except ConnectionResetError:
            answer = b""
        assert answer == b""
    assert value(scrape(broker), "kafka_coordinator_group_groupmetadatamanager_numgroups") == 0


def test_metrics_are_off_unless_asked_for(tmp_path):
    with Broker(tmp_path / "data", port=0) as quiet:
        assert quiet.metrics_port is None
