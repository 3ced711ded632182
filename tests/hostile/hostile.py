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


def unread_bytes(port: int) -> int:
    """Bytes clients sent to the broker on ``port`` that it has not read yet: the receive queues of its
    established connections (Linux /proc/net/tcp and tcp6)."""
    total = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as lines:
                next(lines)
                for line in lines:
                    fields = line.split()
                    local_port = int(fields[1].rsplit(":", 1)[1], 16)
                    if local_port == port and fields[3] == "01":   # ESTABLISHED, the broker's side
                        total += int(fields[4].split(":")[1], 16)
        except FileNotFoundError:
            continue
    return total


def wait_read_or_refused(port: int, timeout: float = 30.0, steady_polls: int = 5) -> int:
    """Until the broker has read everything sent to it, or has stopped reading (the unread bytes stay the
    same over ``steady_polls`` polls 0.1 s apart): what a memory bound is measured after, instead of a
    fixed sleep that a slow machine outlasts. Returns the unread bytes."""
    import time

    deadline = time.monotonic() + timeout
    last, steady = None, 0
    while time.monotonic() < deadline:
        unread = unread_bytes(port)
        if unread == 0:
            return 0
        steady = steady + 1 if unread == last else 0
        if steady >= steady_polls:
            return unread
        last = unread
        time.sleep(0.1)
    raise AssertionError(f"the broker on port {port} kept reading for {timeout} s ({last} bytes unread)")
