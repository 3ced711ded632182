"""``python -m broker_sim.bench.produce_path``: the broker's produce path in-process, without sockets or clients.

What it measures: CPU time per Produce request through the Produce handler (``ProduceApi``: authorization
off, no quotas) into ``ReplicaManager.append_records`` and a real on-disk log, the requests pre-built
(``--records-per-batch`` records of ``--value-bytes`` bytes, uncompressed, acks alternating 1 and -1).  A warm-up
of ``--warmup`` requests is not counted; then the best of ``--chunks`` chunks of ``--chunk`` requests, by
``time.process_time`` (the least disturbed chunk: this machine is shared).  It isolates the broker's own work
from the network and the client, which vary far more than it does: run it from two checkouts in turn to compare
them (``PYTHONPATH=<checkout> python -m broker_sim.bench.produce_path``); it measures the code it is run from.
``--wire``: the requests are pre-encoded frames (ProduceRequest v9, as librdkafka and confluent-kafka send) handed
to the broker's ``Dispatcher`` instead, so the figure adds the request's decode and the response's encode.

Prints one JSON document: ``{"workload": {...}, "us_per_request": ..., "requests_per_s": ...,
"records_per_s": ..., "chunks_us_per_request": [...]}``.  Never fails a build (exit 2 only for bad options).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

from broker_sim.arguments import positive_int


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m broker_sim.bench.produce_path", description=__doc__.split("\n")[0])
    parser.add_argument("--chunk", type=positive_int, default=1000, help="requests per timed chunk (default 1000)")
    parser.add_argument("--chunks", type=positive_int, default=20, help="timed chunks (default 20)")
    parser.add_argument("--warmup", type=positive_int, default=500, help="requests before timing (default 500)")
    parser.add_argument("--records-per-batch", type=positive_int, default=10, help="records per request (default 10)")
    parser.add_argument("--value-bytes", type=positive_int, default=100, help="bytes per record value (default 100)")
    parser.add_argument("--wire", action="store_true",
                        help="frames through the dispatcher (decode, handler, encode) instead of request objects")
    return parser


def _batch(records: int, value_bytes: int) -> bytes:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    for i in range(records):
        builder.append(i, timestamp=1_000, key=None, value=b"x" * value_bytes, headers=[])
    return bytes(builder.build())


async def _measure(data_dir: Path, args) -> list[float]:
    from kafka.protocol.producer import ProduceRequest, ProduceResponse

    from broker_sim.config import BrokerConfig
    from broker_sim.controller.metadata import TopicInfo
    from broker_sim.replication.replica_manager import ReplicaManager
    from broker_sim.server.handlers.access import Access
    from broker_sim.server.handlers.produce import ProduceApi

    replicas = ReplicaManager(data_dir, BrokerConfig({"log.segment.bytes": 1 << 30}), broker_id=0,
                              now_ms=lambda: time.time_ns() // 1_000_000)
    replicas.open_topic(TopicInfo("bench", uuid.uuid4(), 1, {}))
    api = ProduceApi(Access(None), replicas, None)
    ctx = SimpleNamespace(connection=SimpleNamespace(inter_broker=False, principal="User:ANONYMOUS"),
                          client_id="bench-produce-path", version=9)
    records = _batch(args.records_per_batch, args.value_bytes)
    partition_data = ProduceRequest.TopicProduceData.PartitionProduceData

    def request(acks: int):
        return ProduceRequest[9](transactional_id=None, acks=acks, timeout_ms=30_000, topic_data=[
            ProduceRequest.TopicProduceData(name="bench", partition_data=[partition_data(index=0, records=records)])])

    handle = api.produce
    if args.wire:  # the same requests as frames, through the dispatcher (every other API's handler is unused)
        from broker_sim.protocol.apis import APIS
        from broker_sim.server.dispatch import Dispatcher

        dispatcher = Dispatcher({key: api.produce for key in APIS})
        connection = SimpleNamespace(inter_broker=False, principal="User:ANONYMOUS", authenticator=None,
                                     listener="PLAINTEXT", peer="bench")
        frames = {}
        for acks in (1, -1):
            built = request(acks)
            built.with_header(correlation_id=1, client_id="bench-produce-path")
            frames[acks] = bytes(built.encode(header=True, framed=False))

        def request(acks: int):  # noqa: F811 - the frame of the same request
            return frames[acks]

        async def handle(_ctx, frame):  # noqa: F811
            return await dispatcher.handle(connection, frame)

    try:
        for i in range(args.warmup):
            await handle(ctx, request(1 if i % 2 else -1))
        chunks = []
        for _ in range(args.chunks):
            requests = [request(1 if i % 2 else -1) for i in range(args.chunk)]
            start = time.process_time()
            for r in requests:
                response = await handle(ctx, r)
            chunks.append((time.process_time() - start) / args.chunk)
            if args.wire:
                response = ProduceResponse.decode(response[0][4:], version=9, header=True)
            code = response.responses[0].partition_responses[0].error_code
            if code:
                raise RuntimeError(f"produce answered error code {code}")
        return chunks
    finally:
        replicas.close()


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="pylog-produce-path-") as data_dir:
        chunks = asyncio.run(_measure(Path(data_dir), args))
    best = min(chunks)
    print(json.dumps({
        "workload": {"wire": args.wire, "chunk": args.chunk, "chunks": args.chunks, "warmup": args.warmup,
                     "records_per_batch": args.records_per_batch, "value_bytes": args.value_bytes,
                     "acks": "alternating 1 and -1", "clock": "process_time, best chunk",
                     "python": sys.version.split()[0]},
        "us_per_request": round(best * 1e6, 2),
        "requests_per_s": round(1 / best),
        "records_per_s": round(args.records_per_batch / best),
        "chunks_us_per_request": [round(c * 1e6, 2) for c in chunks],
    }, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
