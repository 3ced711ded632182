"""A librdkafka consumer of the KIP-848 protocol (group.protocol=consumer), for tests/kafka/test_consumer_protocol.py.

``python kip848_consumer.py BOOTSTRAP GROUP OUT TOPIC_OR_REGEX [INSTANCE_ID]`` consumes until SIGTERM, writing one
line per event to OUT (flushed): ``R <topic> <partition> <offset>`` per record, ``C`` once a synchronous commit of
everything consumed so far succeeded (every 200 records, and in the revocation callback, so a partition that moves
to another member has its consumed offsets committed first: at-least-once with no duplicate but after a kill),
``A <partitions>`` per assignment change, ``E <error>`` per error, ``X`` when it closed cleanly. A subscription
starting with ``^`` is a regex.
"""
from __future__ import annotations

import signal
import sys

from confluent_kafka import Consumer, KafkaException

COMMIT_EVERY = 200


def main() -> int:
    bootstrap, group, out_path, subscription = sys.argv[1:5]
    instance = sys.argv[5] if len(sys.argv) > 5 else None
    config = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
              "auto.offset.reset": "earliest", "enable.auto.commit": False}
    if instance:
        config["group.instance.id"] = instance
    consumer = Consumer(config)
    out = open(out_path, "a", buffering=1)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    uncommitted = 0

    def commit() -> None:
        nonlocal uncommitted
        try:
            consumer.commit(asynchronous=False)
        except KafkaException as exc:   # nothing consumed yet (NO_OFFSET), or the group moved on: said, not fatal
            out.write(f"E commit {exc.args[0]}\n")
            return
        uncommitted = 0
        out.write("C\n")

    def assigned(_consumer, partitions) -> None:
        out.write("A +" + ",".join(f"{p.topic}:{p.partition}" for p in partitions) + "\n")

    def revoked(_consumer, partitions) -> None:
        if uncommitted:
            commit()
        out.write("A -" + ",".join(f"{p.topic}:{p.partition}" for p in partitions) + "\n")

    consumer.subscribe([subscription], on_assign=assigned, on_revoke=revoked)
    while not stopping:
        message = consumer.poll(0.2)
        if message is None:
            continue
        if message.error():
            out.write(f"E {message.error()}\n")
            continue
        out.write(f"R {message.topic()} {message.partition()} {message.offset()}\n")
        uncommitted += 1
        if uncommitted >= COMMIT_EVERY:
            commit()
    if uncommitted:
        commit()
    consumer.close()
    out.write("X\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
