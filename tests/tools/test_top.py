"""``pylog top`` shows each group's committed offset, log end, lag and rates, refreshing a bounded number of times."""
from __future__ import annotations

import io
import json

from kafka import KafkaConsumer, KafkaProducer

from broker_sim.tools.cli import main


def test_top_shows_lag_and_rates_of_each_group(pylog_broker):
    bootstrap = pylog_broker.bootstrap_servers
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(10):
        producer.send("events", b"x%d" % i)
    producer.flush()
    consumer = KafkaConsumer("events", bootstrap_servers=bootstrap, group_id="slow", auto_offset_reset="earliest",
                             enable_auto_commit=False, max_poll_records=4)
    polled = 0
    while polled < 4:
        polled += sum(len(b) for b in consumer.poll(2000).values())
    consumer.commit()
    consumer.close()

    out = io.StringIO()
    assert main(["top", "--bootstrap-server", bootstrap, "--iterations", "2", "--interval", "0.2",
                 "--format", "json"], stdout=out) == 0
    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    [row] = second["rows"]
    assert (row["group"], row["topic"], row["partition"]) == ("slow", "events", 0)
    assert row["committed"] == polled and row["log_end"] == 10 and row["lag"] == 10 - polled
    assert first["rows"][0]["in_per_s"] is None and row["in_per_s"] == 0.0

    text = io.StringIO()
    assert main(["top", "--bootstrap-server", bootstrap, "--iterations", "1"], stdout=text) == 0
    lines = text.getvalue().splitlines()
    assert lines[1].split() == ["GROUP", "TOPIC", "PARTITION", "COMMITTED", "LOG-END", "LAG", "IN/S", "COMMIT/S"]
    assert lines[2].split()[:6] == ["slow", "events", "0", str(polled), "10", str(10 - polled)]
    producer.close()
