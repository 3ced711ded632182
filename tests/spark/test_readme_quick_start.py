"""The README's Quick start Spark snippet, run as written (its address and checkpoint moved to the test's own)
on the records the Quick start produces: the output topic holds them upper-cased, committed."""
from __future__ import annotations

import re
from pathlib import Path

from kafka import KafkaConsumer

from spark_helpers import create_topic, produce

README = Path(__file__).resolve().parents[2] / "README.md"


def quick_start_spark_snippet() -> str:
    text = README.read_text()
    section = text[text.index("\n## Quick start\n"):]
    section = section[:section.index("\n## ", 1)]
    blocks = [block for block in re.findall(r"```python\n(.*?)\n```", section, re.S)
              if 'readStream.format("pylog")' in block]
    assert len(blocks) == 1, "the README's Quick start has no (or more than one) Spark snippet"
    return blocks[0]


def test_the_quick_start_spark_snippet_runs_as_written(spark, pylog_broker, tmp_path):
    bootstrap = pylog_broker.bootstrap_servers
    create_topic(bootstrap, "events", partitions=3)
    produce(bootstrap, "events", [(0, b"k1", b"hello"), (1, b"k2", b"world")])  # the Quick start's `pylog produce`
    snippet = quick_start_spark_snippet()
    assert "127.0.0.1:9092" in snippet and "/tmp/pylog-quickstart-checkpoint" in snippet
    code = snippet.replace("127.0.0.1:9092", bootstrap).replace("/tmp/pylog-quickstart-checkpoint",
                                                               str(tmp_path / "checkpoint"))
    exec(compile(code, "README.md Quick start", "exec"), {})
    consumer = KafkaConsumer("events-shouted", bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             isolation_level="read_committed", consumer_timeout_ms=10_000)
    records = set()
    try:
        for record in consumer:   # the query ended: what it wrote is committed; stop at the two expected
            records.add((record.key, record.value))
            if len(records) == 2:
                break
    finally:
        consumer.close()
    assert records == {(b"k1", b"HELLO"), (b"k2", b"WORLD")}
