"""One member of the group benchmark's consumer group, run as its own process.

Usage (started by :mod:`broker_sim.bench.groups`, not by hand)::

    python -m broker_sim.bench.group_member BOOTSTRAP TOPIC GROUP SESSION_TIMEOUT_MS HEARTBEAT_INTERVAL_MS

A kafka-python consumer subscribes to TOPIC in GROUP and polls every 100 ms
(no records are produced; polling is what runs the rebalance callbacks). Each
event is one JSON line on stdout, flushed at once::

    {"event": "subscribing", "t": 81234.501}
    {"event": "revoked", "t": 81240.117}
    {"event": "assigned", "t": 81240.342, "partitions": [0, 4, 8]}

``t`` is ``time.monotonic()``: on Linux CLOCK_MONOTONIC is one clock for all
processes, so the benchmark compares it with its own. The assignors are
kafka-python's eager ones (range, roundrobin), so "assigned" carries the
member's whole assignment. SIGTERM closes the consumer (LeaveGroup) and exits
0; SIGKILL is how the benchmark makes a member die without leaving.
"""

import json
import logging
import signal
import sys
import time

POLL_TIMEOUT_MS = 100


def _emit(event: str, **fields) -> None:
    print(json.dumps({"event": event, "t": time.monotonic(), **fields}), flush=True)


def main(argv: list[str]) -> int:
    from kafka import ConsumerRebalanceListener, KafkaConsumer

    bootstrap, topic, group, session_timeout_ms, heartbeat_interval_ms = argv
    # the member's log (its stderr file) tells a benchmark that timed out how far the member's joins got
    logging.basicConfig(level=logging.WARNING, format="%(relativeCreated)d ms %(name)s %(levelname)s %(message)s")
    logging.getLogger("kafka.coordinator").setLevel(logging.INFO)

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            _emit("revoked")

        def on_partitions_assigned(self, assigned):
            _emit("assigned", partitions=sorted(tp.partition for tp in assigned if tp.topic == topic))

    def terminate(_signum, _frame):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, terminate)
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=group, client_id=f"pylog-bench-member-{group}",
        enable_auto_commit=False, session_timeout_ms=int(session_timeout_ms),
        heartbeat_interval_ms=int(heartbeat_interval_ms), max_poll_interval_ms=300_000)
    try:
        # this client's metadata knows the topic's partitions before it joins: a leader elected with none would
        # assign nothing, and kafka-python rejoins only when its metadata changes (a flaky "holds []" round)
        deadline = time.monotonic() + 60
        while not consumer.partitions_for_topic(topic) and time.monotonic() < deadline:
            time.sleep(0.05)
        _emit("subscribing")
        consumer.subscribe([topic], listener=Listener())
        while True:
            consumer.poll(timeout_ms=POLL_TIMEOUT_MS)
    finally:
        consumer.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
