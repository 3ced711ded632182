"""What every hostile-client test checks after its attack: the broker process is alive, its memory
grew by no more than a bound, and normal clients (kafka-python and confluent-kafka) still round-trip.
"""
from __future__ import annotations

import uuid

from client_helpers import Record, consume_confluent, consume_kafka_python, produce_confluent, produce_kafka_python


def rss_bytes(pid: int, field: str = "VmRSS") -> int:
    """Resident set size of a process (Linux /proc); ``field="VmHWM"``: its peak so far."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} for pid {pid}")


def peak_rss_bytes(pid: int) -> int:
    """Peak resident set size of a process (VmHWM): catches a spike that RSS after the fact would not."""
    return rss_bytes(pid, "VmHWM")


def assert_alive(broker) -> None:
    assert broker.process.poll() is None, (
        f"broker died with {broker.process.returncode}: {broker.log_path.read_text()[-3000:]}")


def assert_serving(broker, topic: str | None = None) -> None:
    """The broker is alive and a kafka-python and a confluent-kafka producer/consumer round trip works."""
    assert_alive(broker)
    topic = topic or f"roundtrip-{uuid.uuid4().hex[:8]}"
    bootstrap = broker.bootstrap_servers
    sent_kp = [Record(b"k%d" % i, b"kafka-python %d" % i) for i in range(5)]
    sent_ck = [Record(b"c%d" % i, b"confluent %d" % i) for i in range(5)]
    produce_kafka_python(bootstrap, topic, sent_kp)
    produce_confluent(bootstrap, topic, sent_ck)
    expected = [r.content() for r in sent_kp + sent_ck]
    got_kp = [r.content() for r in consume_kafka_python(bootstrap, topic, len(expected))]
    got_ck = [r.content() for r in consume_confluent(bootstrap, topic, len(expected))]
    assert got_kp == expected, got_kp
    assert got_ck == expected, got_ck
