"""``pylog bench --workload security``: what TLS and SASL_SSL cost, against PLAINTEXT, in one run.

Example::

    $ pylog bench --workload security --records 300000 --rounds 3
    $ python -m broker_sim.bench.security --records 100000 --rounds 1

One broker process (``python -m broker_sim``) with three listeners — PLAINTEXT, SSL and SASL_SSL
(SCRAM-SHA-512, ACLs enforced, the client a super user) — certificates from a throwaway CA.  Each round
runs, for each listener in turn (rotated per round, so drift on the machine spreads over all three):
confluent-kafka produces ``--records`` records of ``--record-size`` bytes (acks=1) to a fresh topic, then
consumes them from offset 0.  The report (JSON on stdout)::

    {"workload": {...}, "results": {"PLAINTEXT": {"produce_mb_per_s": ..., "consume_mb_per_s": ...}, ...},
     "ratios": {"SSL": {"produce": 0.8, "consume": 0.5}, "SASL_SSL": {...}}, "runs": [...]}

``results`` are medians over rounds; ratios are listener / PLAINTEXT (1.0 = no cost).  Fetches on TLS
connections are copied through user space (no sendfile), which is most of the consume cost.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import TextIO

from broker_sim.bench import workloads
from broker_sim.bench.brokers import BrokerProcess, free_port, pylog_broker
from broker_sim.progress import Progress

LISTENERS = ("PLAINTEXT", "SSL", "SASL_SSL")
TIMEOUT_S = 300.0


def _secured_broker(directory: Path):
    """(BrokerProcess, {listener: (bootstrap, confluent settings, kafka-python settings)})."""
    from broker_sim.local.certificates import CertificateAuthority

    ca = CertificateAuthority(directory / "ca")
    ports = {name: free_port() for name in LISTENERS}
    kind = pylog_broker()
    base = kind.command

    def command(port: int, data_dir: str) -> list[str]:
        configs = {
            "listeners": ",".join(f"{name}://127.0.0.1:{ports[name] if name != 'PLAINTEXT' else port}"
                                  for name in LISTENERS),
            "ssl.keystore.location": ca.issue("broker").keystore,
            "sasl.enabled.mechanisms": "SCRAM-SHA-512", "authorizer.class.name": "AclAuthorizer",
            "super.users": "User:bench;User:ANONYMOUS"}
        extra = [arg for key, value in configs.items() for arg in ("--config", f"{key}={value}")]
        return base(port, data_dir) + extra + ["--add-scram", "SCRAM-SHA-512=[name=bench,password=bench-secret]"]
    process = BrokerProcess(replace(kind, command=command))
    tls = {"security.protocol": "SSL", "ssl.ca.location": ca.truststore}
    sasl = {"security.protocol": "SASL_SSL", "ssl.ca.location": ca.truststore, "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "bench", "sasl.password": "bench-secret"}
    python = {"SSL": dict(security_protocol="SSL", ssl_cafile=ca.truststore),
              "SASL_SSL": dict(security_protocol="SASL_SSL", ssl_cafile=ca.truststore, sasl_mechanism="SCRAM-SHA-512",
                               sasl_plain_username="bench", sasl_plain_password="bench-secret")}
    return process, ports, {"PLAINTEXT": {}, "SSL": tls, "SASL_SSL": sasl}, python


def run(records: int, record_size: int, rounds: int, err: TextIO) -> dict:
    directory = Path(tempfile.mkdtemp(prefix="pylog-bench-security-ca-"))
    process, ports, confluent, python = _secured_broker(directory)
    process.start()
    runs = []
    try:
        ports["PLAINTEXT"] = process.port
        for round_number in range(rounds):
            order = LISTENERS[round_number % 3:] + LISTENERS[:round_number % 3]
            for listener in order:
                bootstrap = f"127.0.0.1:{ports[listener]}"
                topic = f"bench-{listener.lower()}-{uuid.uuid4().hex[:6]}"
                workloads.create_topic(bootstrap, topic, 30.0, python.get(listener))
                quiet = Progress(listener, enabled=False, total=records, stream=err)
                produced = workloads.confluent_produce(bootstrap, topic, records, record_size, "1", TIMEOUT_S, quiet,
                                                       confluent[listener])
                consumed = workloads.confluent_consume(bootstrap, topic, records, record_size, TIMEOUT_S, quiet,
                                                       confluent[listener])
                runs.append({"round": round_number + 1, "listener": listener, "produce": produced,
                             "consume": consumed})
                print(f"round {round_number + 1} {listener}: produce {produced.get('mb_per_s')} MB/s, "
                      f"consume {consumed.get('mb_per_s')} MB/s", file=err)
    finally:
        process.stop()
    results = {}
    for listener in LISTENERS:
        mine = [r for r in runs if r["listener"] == listener]
        results[listener] = {
            f"{what}_{unit}": _median([r[what].get(unit) for r in mine])
            for what in ("produce", "consume") for unit in ("mb_per_s", "records_per_s")}
    plain = results["PLAINTEXT"]
    ratios = {listener: {what: _ratio(results[listener][f"{what}_mb_per_s"], plain[f"{what}_mb_per_s"])
                         for what in ("produce", "consume")} for listener in ("SSL", "SASL_SSL")}
    return {"workload": {"records": records, "record_size": record_size, "rounds": rounds,
                         "client": "confluent-kafka (librdkafka), acks=1, one partition",
                         "sasl": "SCRAM-SHA-512 over TLS, ACLs enforced (super user)",
                         "note": "TLS fetches are copied through user space (no sendfile); ratios are "
                                 "listener / PLAINTEXT medians of the same run"},
            "results": results, "ratios": ratios, "runs": runs}


def _median(values):
    numbers = [v for v in values if isinstance(v, (int, float))]
    return round(statistics.median(numbers), 2) if numbers else None


def _ratio(value, base):
    return round(value / base, 3) if value and base else None


def run_from_args(args: argparse.Namespace, *, out: TextIO, err: TextIO) -> int:
    """``pylog bench --workload security``: --records (default 1,000,000 is cut to 300,000: TLS is slower),
    --record-size, --rounds; the JSON goes to *out* (and --output)."""
    from broker_sim.bench import runner

    records = min(args.records, 300_000)
    report = run(records, args.record_size, args.rounds, err)
    report["quotas"] = run_quotas(1_000_000, 20.0, 10_000, err)
    runner.print_report(report, args.output, out=out)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m broker_sim.bench.security",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--record-size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quota-only", action="store_true", help="only the quota run")
    parser.add_argument("--quota", type=int, default=1_000_000, help="bytes/s of the quota run")
    parser.add_argument("--quota-seconds", type=float, default=20.0)
    args = parser.parse_args(argv)
    report = {} if args.quota_only else run(args.records, args.record_size, args.rounds, sys.stderr)
    report["quotas"] = run_quotas(args.quota, args.quota_seconds, 10_000, sys.stderr)
    print(json.dumps(report, indent=2))
    return 0


# --- quotas: how close a throttled client lands to its quota --------------------------------------------

def _alter_quota(bootstrap: str, client_id: str, key: str, value: float) -> None:
    """AlterClientQuotas for one client id over a plain connection (kafka-python has no admin call for it)."""
    from kafka.protocol.admin import AlterClientQuotasRequest

    from broker_sim.protocol.client import WireConnection

    entry = AlterClientQuotasRequest.EntryData
    request = AlterClientQuotasRequest[1](entries=[entry(
        entity=[entry.EntityData(entity_type="client-id", entity_name=client_id)],
        ops=[entry.OpData(key=key, value=float(value), remove=False)])], validate_only=False)
    with WireConnection.to(bootstrap, timeout_s=30, client_id="pylog-bench") as connection:
        response = connection.call(request)
    if response.entries[0].error_code:
        raise RuntimeError(f"AlterClientQuotas failed: {response.entries[0].error_message}")


def run_quotas(rate: int, seconds: float, record_size: int, err: TextIO) -> dict:
    """A confluent-kafka producer and then a consumer, each with a quota of ``rate`` bytes/s, running
    flat out for ``seconds``: the rate they achieve after the first quota window, against the quota."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    process = BrokerProcess(pylog_broker())
    process.start()
    bootstrap = process.bootstrap_servers
    try:
        workloads.create_topic(bootstrap, "quota-bench", 30.0)
        _alter_quota(bootstrap, "bench-throttled-producer", "producer_byte_rate", rate)
        _alter_quota(bootstrap, "bench-throttled-consumer", "consumer_byte_rate", rate)
        value = workloads.payload(record_size)
        acked: list[float] = []
        throttles: list[int] = []
        producer = Producer({"bootstrap.servers": bootstrap, "client.id": "bench-throttled-producer",
                             "linger.ms": 5, "queue.buffering.max.kbytes": 4096,
                             "throttle_cb": lambda event: throttles.append(event.throttle_time)})
        started = time.monotonic()
        while time.monotonic() - started < seconds:
            try:
                producer.produce("quota-bench", value, partition=0,
                                 on_delivery=lambda e, m: acked.append(time.monotonic()) if e is None else None)
            except BufferError:
                producer.poll(0.05)
            producer.poll(0)
        producer.flush(120)
        warm = started + seconds / 4  # past the first quota window
        produced = sum(1 for t in acked if warm <= t <= started + seconds) * record_size / (seconds * 3 / 4)
        # the consumer: the topic now holds more than it may read in the time
        consumer = Consumer({"bootstrap.servers": bootstrap, "client.id": "bench-throttled-consumer",
                             "group.id": "quota-bench", "enable.auto.commit": False,
                             "fetch.max.bytes": 1 << 20, "max.partition.fetch.bytes": 1 << 20})
        consumer.assign([TopicPartition("quota-bench", 0, OFFSET_BEGINNING)])
        received: list[float] = []
        started = time.monotonic()
        while time.monotonic() - started < seconds:
            for message in consumer.consume(1000, 0.2):
                if message.error() is None:
                    received.append(time.monotonic())
        consumer.close()
        warm = started + seconds / 4
        consumed = sum(1 for t in received if warm <= t) * record_size / (seconds * 3 / 4)
    finally:
        process.stop()
    result = {"quota_bytes_per_s": rate, "producer_bytes_per_s": round(produced), "consumer_bytes_per_s":
              round(consumed), "producer_ratio": round(produced / rate, 3), "consumer_ratio": round(consumed / rate, 3),
              "producer_throttle_reports": len(throttles),
              "max_producer_throttle_s": round(max(throttles), 3) if throttles else 0,
              "workload": {"seconds": seconds, "record_size": record_size, "client": "confluent-kafka",
                           "measured": "after the first quarter of the run (the quota window filling)",
                           "within_20_percent": None}}
    result["workload"]["within_20_percent"] = all(0.8 <= result[k] <= 1.2
                                                  for k in ("producer_ratio", "consumer_ratio"))
    print(f"quota {rate} B/s: producer {result['producer_ratio']}x, consumer {result['consumer_ratio']}x",
          file=err)
    return result


if __name__ == "__main__":
    sys.exit(main())
