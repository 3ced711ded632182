"""Hostile clients against storage: partition floods, tiny segments, a full disk, bad topic names, bad files.

Each test asserts the error answered, that nothing half-made remains (directories, metadata), that
descriptors and RSS stay bounded, that normal clients still round-trip, and that a restart succeeds.
"""
from __future__ import annotations

import os
import resource
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from client_helpers import BrokerProcess, consume_kafka_python, free_port
from hostile import assert_serving, rss_bytes
from kafka.protocol.metadata import ApiVersionsRequest
from kafka_wire import (
    WireClient, create_partitions, create_topics, delete_topics, fetch_request, fetched_partitions, batches_of,
    metadata, produce_request, produce_result, record_batch, set_topic_configs,
)
from broker_sim.testing.waiting import wait_until

POLICY_VIOLATION, INVALID_PARTITIONS, INVALID_TOPIC, KAFKA_STORAGE_ERROR = 44, 37, 17, 56
UNKNOWN_TOPIC_OR_PARTITION = 3
MIB = 1 << 20


def open_fds(pid: int) -> int:
    """Descriptors the broker holds on files of its data directory (sockets come and go with clients)."""
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:  # closed meanwhile
            continue
        count += "/data/" in target
    return count


def partition_dirs(data_dir: Path, topic: str) -> list[str]:
    return sorted(p.name for p in data_dir.iterdir() if p.name.rsplit("-", 1)[0] == topic)


def partition_count(broker) -> int:
    return sum(1 for p in broker.data_dir.iterdir() if p.is_dir())


class LimitedBrokerProcess(BrokerProcess):
    """A broker process started with a hard RLIMIT_NOFILE, so the partition budget it derives is known."""

    nofile = 4096

    def start(self, timeout: float = 20) -> "LimitedBrokerProcess":
        args = [sys.executable, "-m", "broker_sim", "--data-dir", str(self.data_dir), "--port", str(self.port),
                "--host", "127.0.0.1"]
        for key, value in self.config.items():
            args += ["--config", f"{key}={value}"]
        limit = self.nofile

        def lower_limit():
            resource.setrlimit(resource.RLIMIT_NOFILE, (1024, limit))  # soft below hard: the broker raises it

        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log, preexec_fn=lower_limit)
        wait_until(lambda: self._ready(), timeout_s=timeout, what=f"broker on port {self.port} listening")
        return self


def test_partition_flood_is_refused_whole_and_big_topics_do_not_block_the_loop(hostile_broker, tmp_path):
    broker = LimitedBrokerProcess(tmp_path / "data", free_port(), {})
    try:
        broker.start()
        pid = broker.process.pid
        budget = 4096 // 2  # half the raised limit, 1 descriptor per partition (see log.DESCRIPTORS_PER_PARTITION)
        rss_before, fds_before = rss_bytes(pid), open_fds(pid)
        with WireClient(broker.bootstrap_servers, timeout=60) as client:
            code, message = create_topics(client, {"flood": 10_000})["flood"]
            assert code == POLICY_VIOLATION, message
            assert "max.broker.partitions" in message and "10000" in message and str(budget) in message
            code, message = create_topics(client, {"flood": 10_000}, validate_only=True)["flood"]
            assert code == POLICY_VIOLATION, message
            assert create_topics(client, {"flood": 10_001})["flood"][0] == INVALID_PARTITIONS
            assert partition_dirs(broker.data_dir, "flood") == []
            assert metadata(client, ["flood"], auto_create=False).topics[0].error_code == UNKNOWN_TOPIC_OR_PARTITION
            assert open_fds(pid) - fds_before < 20

            # A big topic within the budget: created in slices, the loop answers others meanwhile.
            big = budget - 200
            latencies: list[float] = []
            done = threading.Event()

            def ping():
                with WireClient(broker.bootstrap_servers, timeout=60) as pinger:
                    while not done.is_set():
                        started = time.monotonic()
                        pinger.call(ApiVersionsRequest[3](client_software_name="ping", client_software_version="1"))
                        latencies.append(time.monotonic() - started)
                        time.sleep(0.005)

            pinger = threading.Thread(target=ping)
            pinger.start()
            started = time.monotonic()
            try:
                assert create_topics(client, {"big": big})["big"] == (0, None)
            finally:
                creation_s = time.monotonic() - started
                done.set()
                pinger.join()
            worst = max(latencies)
            print(f"{big} partitions created in {creation_s:.2f} s; worst ApiVersions latency meanwhile "
                  f"{worst * 1000:.0f} ms over {len(latencies)} calls")
            assert len(latencies) > 3 and worst < creation_s / 3, (worst, creation_s)
            assert len(partition_dirs(broker.data_dir, "big")) == big

            code, message = create_partitions(client, "big", big + 300)
            assert code == POLICY_VIOLATION, message
            assert len(partition_dirs(broker.data_dir, "big")) == big
            assert create_partitions(client, "big", big + 5) == (0, None)
            assert len(partition_dirs(broker.data_dir, "big")) == big + 5
            assert create_topics(client, {"filler": budget - big - 5})["filler"] == (0, None)  # the budget is full
            answer = metadata(client, ["one-more"]).topics[0]  # auto-creation: refused the same way
            assert answer.error_code == POLICY_VIOLATION and partition_dirs(broker.data_dir, "one-more") == []
            assert delete_topics(client, ["filler"]) == {"filler": 0}
        # Empty partitions hold one descriptor each (the active .log); bound: three each plus slack.
        assert open_fds(pid) - fds_before < 3 * (big + 5) + 50
        grown = rss_bytes(pid) - rss_before
        print(f"RSS grew {grown / MIB:.0f} MB for {big + 5} partitions")
        assert grown < 64 * MIB  # measured ~8 KB per open partition (11 MB for 1443)
        assert_serving(broker)
        status = broker.terminate(60)
        assert status == 0, broker.log_path.read_text()[-3000:]
        broker = hostile_broker(data_dir=broker.data_dir)  # the ordinary (higher) limit now
        with WireClient(broker.bootstrap_servers) as client:
            answer = metadata(client, ["big", "flood"], auto_create=False).topics
            assert [(t.error_code, len(t.partitions)) for t in answer] == [
                (0, big + 5), (UNKNOWN_TOPIC_OR_PARTITION, 0)]
        assert_serving(broker)
    finally:
        broker.kill()


def test_tiny_segments_keep_descriptors_bounded_and_data_readable(hostile_broker):
    broker = hostile_broker(config={"internal.log.segment.bytes": "1024"})
    pid = broker.process.pid
    with WireClient(broker.bootstrap_servers) as client:
        assert create_topics(client, {"tiny": 1})["tiny"] == (0, None)
        fds_before, rss_before = open_fds(pid), rss_bytes(pid)
        # every batch (~0.95 KB) fills a segment: two do not fit in one, and a batch larger than its segment
        # would be refused (RECORD_LIST_TOO_LARGE, as on Kafka)
        for i in range(400):
            code, offset = produce_result(client.call(produce_request("tiny", 0, record_batch([b"%04d" % i * 220]))))
            assert (code, offset) == (0, i)
        segments = [p for p in (broker.data_dir / "tiny-0").iterdir() if p.suffix == ".log"]
        assert len(segments) >= 399
        assert open_fds(pid) - fds_before < 10  # not 3 per segment: ~1200
        fetched = fetched_partitions(client.call(fetch_request("tiny", 0, 150, max_bytes=4 * MIB)))[0]
        assert fetched.error_code == 0 and batches_of(fetched.records)[0].base_offset == 150
    assert rss_bytes(pid) - rss_before < 64 * MIB
    values = [r.value for r in consume_kafka_python(broker.bootstrap_servers, "tiny", 400, timeout=60)]
    assert values == [b"%04d" % i * 220 for i in range(400)]
    # 5: FDS_PER_PARTITION, whatever the segment count, once the consumer's last responses have left
    wait_until(lambda: open_fds(pid) <= 5 * partition_count(broker), timeout_s=10, what="<= 5 files per partition")
    assert_serving(broker)
    broker = hostile_broker.restart(broker)
    assert open_fds(broker.process.pid) <= 5 * partition_count(broker)  # loading: a segment at a time
    values = [r.value for r in consume_kafka_python(broker.bootstrap_servers, "tiny", 400, timeout=60)]
    assert values == [b"%04d" % i * 220 for i in range(400)]


def test_full_disk_fails_topic_changes_whole_and_leaves_no_ghost(hostile_broker):
    """Disk full, realistically: RLIMIT_FSIZE on the running broker makes growing any file fail with EFBIG
    (Python ignores SIGXFSZ) — the metadata file's rewrite included — without root or a tmpfs."""
    broker = hostile_broker()
    pid = broker.process.pid
    with WireClient(broker.bootstrap_servers) as client:
        assert create_topics(client, {"kept": 2})["kept"] == (0, None)
        for i in range(5):
            assert produce_result(client.call(produce_request("kept", 0, record_batch([b"kept %d" % i]))))[0] == 0
        topics_file = broker.data_dir / "pylog-topics.json"
        before = topics_file.read_bytes()
        rss_before = rss_bytes(pid)
        _, hard = resource.prlimit(pid, resource.RLIMIT_FSIZE)
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (8, hard))  # the soft limit, so it can be undone
        try:
            code, message = create_topics(client, {"ghost": 3})["ghost"]
            assert code == KAFKA_STORAGE_ERROR and "pylog-topics.json" in message, message
            answer = metadata(client, ["auto-ghost"]).topics[0]  # auto-creation: a topic error, not a closed connection
            assert answer.error_code == KAFKA_STORAGE_ERROR
            assert delete_topics(client, ["kept"]) == {"kept": KAFKA_STORAGE_ERROR}
            assert create_partitions(client, "kept", 4)[0] == KAFKA_STORAGE_ERROR
            assert set_topic_configs(client, "kept", {"retention.ms": "1234"}) == KAFKA_STORAGE_ERROR
            assert topics_file.read_bytes() == before
            answer = metadata(client, ["ghost", "auto-ghost", "kept"], auto_create=False).topics
            assert [(t.error_code, len(t.partitions)) for t in answer] == [
                (UNKNOWN_TOPIC_OR_PARTITION, 0), (UNKNOWN_TOPIC_OR_PARTITION, 0), (0, 2)]
            assert partition_dirs(broker.data_dir, "ghost") == partition_dirs(broker.data_dir, "auto-ghost") == []
            assert partition_dirs(broker.data_dir, "kept") == ["kept-0", "kept-1"]
        finally:
            resource.prlimit(pid, resource.RLIMIT_FSIZE, (hard, hard))
        assert create_topics(client, {"ghost": 3})["ghost"] == (0, None)  # the disk has room again
    assert rss_bytes(pid) - rss_before < 32 * MIB
    assert_serving(broker)
    broker = hostile_broker.restart(broker)
    with WireClient(broker.bootstrap_servers) as client:
        answer = metadata(client, ["ghost", "auto-ghost", "kept"], auto_create=False).topics
        assert [(t.error_code, len(t.partitions)) for t in answer] == [
            (0, 3), (UNKNOWN_TOPIC_OR_PARTITION, 0), (0, 2)]
    values = [r.value for r in consume_kafka_python(broker.bootstrap_servers, "kept", 5)]
    assert values == [b"kept %d" % i for i in range(5)]
    assert "retention.ms" not in (broker.data_dir / "pylog-topics.json").read_text()
    assert_serving(broker)


def test_illegal_topic_names_are_refused_with_kafkas_message(hostile_broker):
    broker = hostile_broker()
    pid = broker.process.pid
    rss_before = rss_bytes(pid)
    bad = ["abc\n", ".", "..", "a" * 250, "with space", "tab\t", "ünicode", "semi;colon"]
    with WireClient(broker.bootstrap_servers) as client:
        answers = create_topics(client, dict.fromkeys(bad, 1))
        assert {name: code for name, (code, _) in answers.items()} == dict.fromkeys(bad, INVALID_TOPIC)
        assert "contains a character other than ASCII alphanumerics" in answers["abc\n"][1]
        assert answers["."][1] == 'Topic name cannot be "." or ".."'
        assert "can't be longer than 249 characters" in answers["a" * 250][1]
        assert [t.error_code for t in metadata(client, ["abc\n", ".."]).topics] == [INVALID_TOPIC] * 2
        assert create_topics(client, {"a" * 249: 1, "a.b": 1}) == {"a" * 249: (0, None), "a.b": (0, None)}
        code, message = create_topics(client, {"a_b": 1})["a_b"]
        assert code == INVALID_TOPIC and "collides with existing topic: a.b" in message
        assert not [p for p in broker.data_dir.iterdir() if "\n" in p.name or p.name.startswith(".")]
    assert rss_bytes(pid) - rss_before < 32 * MIB
    assert_serving(broker)
    broker = hostile_broker.restart(broker)
    with WireClient(broker.bootstrap_servers) as client:
        assert [t.error_code for t in metadata(client, ["a" * 249, "a.b"], auto_create=False).topics] == [0, 0]
    assert_serving(broker)


def test_a_start_with_corrupt_files_serves_everything_else(hostile_broker):
    broker = hostile_broker(config={"internal.log.segment.bytes": "1024"})
    with WireClient(broker.bootstrap_servers) as client:
        assert create_topics(client, {"good": 1, "bad": 1}) == {"good": (0, None), "bad": (0, None)}
        for i in range(20):
            for topic in ("good", "bad"):
                code, _ = produce_result(client.call(produce_request(topic, 0, record_batch([b"%s %03d" % (
                    topic.encode(), i) * 60]))))
                assert code == 0
    status = broker.terminate()
    assert status == 0
    good = broker.data_dir / "good-0"
    sealed = sorted(good.glob("*.index"))[3]
    sealed.write_bytes(b"garbage")  # not a multiple of the entry size
    sealed.with_suffix(".timeindex").write_bytes(os.urandom(24))
    # a checkpoint is derived data: reset as Kafka's LogManager does; a segment that cannot be read is not
    (good / "log-start-offset").write_bytes(b"\x00garbage\n")
    active = max((broker.data_dir / "bad-0").glob("*.log"))
    active.unlink()
    active.mkdir()
    (broker.data_dir / "not a partition").mkdir()
    broker = hostile_broker(config=broker.config, data_dir=broker.data_dir, port=broker.port)
    log = broker.log_path.read_text()
    assert "bad-0" in log and "serving the other partitions" in log
    assert f"{sealed.with_suffix('.log')}: {sealed.name}: length 7 is not a multiple of 8; rebuilding" in log
    values = [r.value for r in consume_kafka_python(broker.bootstrap_servers, "good", 20)]
    assert values == [b"good %03d" % i * 60 for i in range(20)]
    with WireClient(broker.bootstrap_servers) as client:
        assert produce_result(client.call(produce_request("bad", 0, record_batch([b"x"]))))[0] == KAFKA_STORAGE_ERROR
        assert produce_result(client.call(produce_request("good", 0, record_batch([b"x"]))))[0] == 0
    assert_serving(broker)
    broker = hostile_broker.restart(broker)
    assert_serving(broker)

    # An unreadable topics file: moved aside, topics rebuilt from the partition directories.
    status = broker.terminate()
    assert status == 0
    (broker.data_dir / "pylog-topics.json").write_bytes(b'{"version": 1, "topics": [{"name": ')
    broker = hostile_broker(config=broker.config, data_dir=broker.data_dir, port=broker.port)
    assert "pylog-topics.json is unreadable" in broker.log_path.read_text()
    assert (broker.data_dir / "pylog-topics.json.corrupt").exists()
    values = [r.value for r in consume_kafka_python(broker.bootstrap_servers, "good", 21)]
    assert values == [b"good %03d" % i * 60 for i in range(20)] + [b"x"]
    assert_serving(broker)
    broker = hostile_broker.restart(broker)
    assert_serving(broker)


def _open_segment_files(pid: int, partition_dir: str) -> list[str]:
    """The ``.log`` files of one partition the process has open (Linux /proc/<pid>/fd)."""
    names = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if f"/{partition_dir}/" in target and target.endswith(".log"):
            names.append(os.path.basename(target))
    return sorted(names)


def _has_bytes(sock: socket.socket) -> bool:
    try:
        return bool(sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
    except BlockingIOError:
        return False


def test_pending_sendfile_keeps_its_segment_readable_while_the_open_ones_are_evicted(hostile_broker):
    """Slow readers hold zero-copy responses over 20 old segments while only 2 stay open per partition.

    Each response (~5.4 MB: one whole segment of six batches, as a Fetch reads one segment, Kafka's
    LocalLog.read) outgrows the socket buffers (receive window fixed at 64 KB, send buffer at most 4 MB),
    so its sendfile is still pending when the next readers' fetches evict its segment; a segment that
    closed its file on eviction would cut those responses short.
    """
    broker = hostile_broker(config={"internal.log.segment.bytes": "6000000"})
    pid = broker.process.pid
    values = [bytes([65 + i % 58]) * 900_000 for i in range(120)]  # six batches per segment, 20 segments
    with WireClient(broker.bootstrap_servers) as client:
        assert create_topics(client, {"old": 1})["old"] == (0, None)
        for i, value in enumerate(values):
            assert produce_result(client.call(produce_request("old", 0, record_batch([value], key=None)))) == (0, i)
    fds_before, rss_before = open_fds(pid), rss_bytes(pid)
    readers = []
    try:
        for i in range(20):
            reader = WireClient(broker.bootstrap_servers, timeout=30)
            reader.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
            request = fetch_request("old", 0, 6 * i, max_bytes=6_000_000, partition_max_bytes=6_000_000)
            correlation_id, data = reader.encode(request)
            reader.send_bytes(data)
            readers.append((reader, request, correlation_id))
        # every fetch has been answered (its response began to arrive), so every segment has been read and
        # all but two evicted while the responses wait; the descriptors' return below shows the evictions
        wait_until(lambda: all(_has_bytes(reader.sock) for reader, *_ in readers), timeout_s=30,
                   what="every fetch answered")
        for i, (reader, request, correlation_id) in enumerate(readers):
            response = reader.read_response(request, correlation_id)
            batches = batches_of(fetched_partitions(response)[0].records)
            assert [b.base_offset for b in batches] == list(range(6 * i, 6 * i + 6))
            assert [r.value for b in batches for r in b] == values[6 * i:6 * i + 6]
    finally:
        for reader, *_ in readers:
            reader.close()
    wait_until(lambda: open_fds(pid) - fds_before < 10, timeout_s=10, what="descriptors back to the baseline")
    # the evictions happened: of the 21 segments only the two most recently read and the active one are open
    wait_until(lambda: len(_open_segment_files(pid, "old-0")) <= 3, timeout_s=10,
               what=f"<= 3 open segments of old-0 (open: {_open_segment_files(pid, 'old-0')})")
    assert rss_bytes(pid) - rss_before < 64 * MIB  # sendfile: the 108 MB sent were never in memory
    assert_serving(broker)
    broker = hostile_broker.restart(broker)
    got = [r.value for r in consume_kafka_python(broker.bootstrap_servers, "old", 120, timeout=60)]
    assert got == values
