"""``pylog bench``'s confluent-kafka ``produce_batch`` workload (broker_sim/bench/workloads.py): records the local
queue does not take are sent again, so the figure counts every record once, delivered."""
from __future__ import annotations

from broker_sim.bench import workloads
from broker_sim.progress import Progress


def test_records_a_full_local_queue_refused_are_sent_again_and_all_are_counted_once(pylog_broker):
    from confluent_kafka import Consumer, TopicPartition

    records = 25_000  # three produce_batch calls of 10,000 against a queue that holds 1,500 at a time
    result = workloads.confluent_produce(
        pylog_broker.bootstrap_servers, "batch-full-queue", records, 20, "all", 60,
        Progress("test", enabled=False, total=records), security={"queue.buffering.max.messages": 1_500},
        batch=True)
    assert "error" not in result and result["records"] == records
    consumer = Consumer({"bootstrap.servers": pylog_broker.bootstrap_servers, "group.id": "batch-full-queue"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition("batch-full-queue", 0), timeout=10)
    finally:
        consumer.close()
    assert (low, high) == (0, records)
