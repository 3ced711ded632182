"""The pytest plugin as a user meets it: a test run outside the checkout shows none of kafka-python's warnings."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

USER_TEST = '''
import warnings

from kafka import KafkaConsumer, KafkaProducer


def test_roundtrip(pylog_broker):
    producer = KafkaProducer(bootstrap_servers=pylog_broker.bootstrap_servers)
    producer.send("t", b"x").get(timeout=30)
    producer.close()
    consumer = KafkaConsumer("t", bootstrap_servers=pylog_broker.bootstrap_servers, auto_offset_reset="earliest",
                             consumer_timeout_ms=5000)
    assert [m.value for m in consumer] == [b"x"]
    consumer.close()


def test_the_users_own_deprecation_warnings_still_show():
    warnings.warn("mine is deprecated", DeprecationWarning)
'''


def test_a_users_run_shows_their_warnings_and_none_of_kafka_pythons(tmp_path):
    (tmp_path / "test_user.py").write_text(USER_TEST)
    env = dict(os.environ, PYTHONPATH=str(ROOT))   # this checkout's plugin, found through pylog's entry point
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_user.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed, 1 warning" in done.stdout, done.stdout
    assert "mine is deprecated" in done.stdout
    assert "read_text is deprecated" not in done.stdout and "open_text is deprecated" not in done.stdout
