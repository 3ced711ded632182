"""Record timestamps a producer may not set (Kafka 4's message.timestamp.before.max.ms / after.max.ms, KIP-937,
after.max.ms one hour by default): a record timestamped 2^63-1 would keep its segment from rolling or expiring
for ever. With CreateTime each such record fails its batch with INVALID_TIMESTAMP and a KIP-467 record error
naming it. A batch header's max timestamp (what the log rolls by) is not trusted: as Kafka's
``setMaxTimestamp``, the broker stores the records' own maximum in its place. LogAppendTime topics take any
timestamp (the broker's replaces it)."""
from __future__ import annotations

import struct
import time
import uuid

from client_helpers import create_topic
from hostile import assert_serving
from kafka_wire import WireClient, list_offsets, record_batch
from test_records import produce_raw

from broker_sim.config import LONG_MAX

INVALID_TIMESTAMP = 32
HOUR = 3_600_000


def with_max_timestamp(batch: bytes, max_timestamp: int) -> bytes:
    """``batch`` with its header's maxTimestamp replaced and its CRC made valid again."""
    from crc32c import crc32c
    data = bytearray(batch)
    struct.pack_into(">q", data, 35, max_timestamp)
    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    return bytes(data)


def test_records_timestamped_out_of_bounds_are_refused(hostile_broker):
    broker = hostile_broker()
    bootstrap = broker.bootstrap_servers
    plain, bounded, append_time = (f"{kind}-{uuid.uuid4().hex[:6]}" for kind in ("plain", "bounded", "append"))
    create_topic(bootstrap, plain)
    create_topic(bootstrap, bounded, configs={"message.timestamp.before.max.ms": str(24 * HOUR)})
    create_topic(bootstrap, append_time, configs={"message.timestamp.type": "LogAppendTime"})
    now = int(time.time() * 1000)

    refused = [
        (plain, record_batch([b"a", b"b", b"c"], timestamps=[now, LONG_MAX, now]), [1]),
        (plain, record_batch([b"a", b"b"], timestamps=[now + 2 * HOUR, now + 3 * HOUR]), [0, 1]),
        (bounded, record_batch([b"a", b"b"], timestamps=[now, 1000]), [1]),
    ]
    for topic, batch, bad in refused:
        answer = produce_raw(bootstrap, topic, batch)
        assert (answer.error_code, answer.base_offset) == (INVALID_TIMESTAMP, -1), (topic, bad, answer)
        assert [e.batch_index for e in answer.record_errors] == bad, answer
        assert answer.error_message == "One or more records have been rejected due to invalid timestamp"
        assert all("is out of range" in e.batch_index_error_message for e in answer.record_errors), answer

    accepted = [(plain, record_batch([b"a", b"b"], timestamps=[now + HOUR // 2, 1000])),  # before: unbounded
                (plain, record_batch([b"a"], timestamps=[-1])),
                (bounded, record_batch([b"a"], timestamps=[now - HOUR])),
                (append_time, record_batch([b"a"], timestamps=[LONG_MAX])),
                (plain, with_max_timestamp(record_batch([b"a"], timestamps=[now]), LONG_MAX))]
    for topic, batch in accepted:
        answer = produce_raw(bootstrap, topic, batch)
        assert answer.error_code == 0, (topic, answer)
    with WireClient(bootstrap) as client:  # the largest timestamp the plain topic holds is the accepted one
        assert list_offsets(client, plain, 0, -3)[1] == now + HOUR // 2
    assert_serving(broker)
    hostile_broker.restart(broker)
