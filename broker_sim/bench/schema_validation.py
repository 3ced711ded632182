"""``pylog bench --workload schema-validation``: what broker-side schema validation costs produce throughput.

Example::

    $ pylog bench --workload schema-validation --records 300000 --rounds 5
    $ python -m broker_sim.bench.schema_validation --records 100000 --rounds 3

One broker process with its Schema Registry (``--schema-registry-port``).  An Avro schema is registered
under ``bench-validated-value``; every record is the same 200-byte value in Confluent's wire format (magic
byte 0, that schema's id, then payload bytes), as a serializer would send.  Each round produces
``--records`` such records with confluent-kafka (acks=1, one partition) to ``bench-validated``
(``confluent.value.schema.validation=true``) and to ``bench-plain`` (no validation), alternating which
goes first, so drift on the machine spreads over both.  Before the rounds one raw (unframed) record is
sent to the validated topic, to show the check is on: it must come back INVALID_RECORD.

Besides records/s (wall clock, which other load on a shared machine moves a lot), each produce reports the
broker process's CPU time per record (user + system, from ``/proc/<pid>/stat``): what validation adds to
the broker's own work, far steadier than throughput on a busy machine.

The report (JSON on stdout)::

    {"workload": {...}, "results": {"validated_records_per_s": ..., "plain_records_per_s": ...,
                                    "ratio": 0.97, "goal": ">= 0.9", "validated_broker_cpu_us_per_record": ...,
                                    "plain_broker_cpu_us_per_record": ..., "cpu_ratio": 0.95}, "runs": [...]}

``results`` are medians over rounds, ``ratio`` is validated / plain throughput (1.0 = validation is free),
``cpu_ratio`` plain / validated broker CPU per record (likewise).  Never a
pass/fail: the benchmark reports what it measured.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import struct
import sys
from typing import TextIO

from broker_sim.bench import workloads
from broker_sim.bench.registry import EVENT_SCHEMA, Http, registry_broker, wait_for_registry
from broker_sim.progress import Progress

VALUE_SIZE = 200
VALIDATED, PLAIN = "bench-validated", "bench-plain"
TIMEOUT_S = 300.0


def framed_value(schema_id: int, size: int = VALUE_SIZE) -> bytes:
    """``size`` bytes in Confluent's wire format: magic byte 0, the schema id, random payload."""
    return b"\x00" + struct.pack(">i", schema_id) + os.urandom(size - 5)


def _create_topics(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([
        NewTopic(VALIDATED, 1, 1, config={"confluent.value.schema.validation": "true"}),
        NewTopic(PLAIN, 1, 1)])
    for future in futures.values():
        future.result(timeout=30)


def _raw_record_refused(bootstrap: str) -> str:
    """The error a raw record to the validated topic gets (the check is on: INVALID_RECORD)."""
    from confluent_kafka import Producer

    outcome = []
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(VALIDATED, b"not framed", on_delivery=lambda error, _message: outcome.append(error))
    producer.flush(30)
    return outcome[0].name() if outcome and outcome[0] is not None else "accepted"


def run(records: int, rounds: int, err: TextIO) -> dict:
    process, url = registry_broker()
    process.start()
    runs = []
    try:
        wait_for_registry(url)
        connection = Http(url)
        status, answer = connection.call("POST", f"/subjects/{VALIDATED}-value/versions", {"schema": EVENT_SCHEMA})
        connection.close()
        if status != 200:
            raise RuntimeError(f"registering the schema: {status} {answer}")
        value = framed_value(answer["id"])
        _create_topics(process.bootstrap_servers)
        raw = _raw_record_refused(process.bootstrap_servers)
        for round_number in range(1, rounds + 1):
            order = (VALIDATED, PLAIN) if round_number % 2 else (PLAIN, VALIDATED)
            run = {"round": round_number, "order": list(order)}
            for topic in order:
                quiet = Progress(topic, enabled=False, total=records, stream=err)
                cpu_before = process.cpu_s()
                run[topic] = workloads.confluent_produce(process.bootstrap_servers, topic, records, VALUE_SIZE, "1",
                                                         TIMEOUT_S, quiet, value=value)
                cpu_after = process.cpu_s()
                if cpu_before is not None and cpu_after is not None and "records" in run[topic]:
                    run[topic]["broker_cpu_us_per_record"] = round(
                        (cpu_after - cpu_before) * 1e6 / max(run[topic]["records"], 1), 3)
            runs.append(run)
            print(f"bench schema-validation round {round_number}: " + ", ".join(
                f"{topic} {run[topic].get('records_per_s', run[topic].get('error'))}" for topic in order),
                file=err, flush=True)
    finally:
        process.stop()
    validated = [r[VALIDATED]["records_per_s"] for r in runs if "records_per_s" in r[VALIDATED]]
    plain = [r[PLAIN]["records_per_s"] for r in runs if "records_per_s" in r[PLAIN]]
    results = {"validated_records_per_s": round(statistics.median(validated), 1) if validated else None,
               "plain_records_per_s": round(statistics.median(plain), 1) if plain else None,
               "per_round_ratio": [round(r[VALIDATED]["records_per_s"] / r[PLAIN]["records_per_s"], 3)
                                   for r in runs if "records_per_s" in r[VALIDATED] and "records_per_s" in r[PLAIN]],
               "raw_record_to_validated_topic": raw, "goal": "ratio >= 0.9"}
    if validated and plain:
        results["ratio"] = round(results["validated_records_per_s"] / results["plain_records_per_s"], 3)
    for topic, name in ((VALIDATED, "validated"), (PLAIN, "plain")):
        cpu = [r[topic]["broker_cpu_us_per_record"] for r in runs if "broker_cpu_us_per_record" in r[topic]]
        if cpu:
            results[f"{name}_broker_cpu_us_per_record"] = round(statistics.median(cpu), 3)
    if results.get("validated_broker_cpu_us_per_record") and results.get("plain_broker_cpu_us_per_record"):
        results["cpu_ratio"] = round(results["plain_broker_cpu_us_per_record"]
                                     / results["validated_broker_cpu_us_per_record"], 3)
    errors = [f"round {r['round']} {topic}: {r[topic]['error']}" for r in runs for topic in (VALIDATED, PLAIN)
              if "error" in r[topic]]
    if errors:
        results["errors"] = errors
    return {"workload": {"records_per_round_per_topic": records, "value_bytes": VALUE_SIZE, "rounds": rounds,
                         "order": "alternating: validated first in odd rounds, plain first in even ones",
                         "producer": {**workloads.CONFLUENT_PRODUCER, "acks": "1"},
                         "topics": {VALIDATED: "confluent.value.schema.validation=true (TopicNameStrategy)",
                                    PLAIN: "no validation"},
                         "records": "one Avro schema id, the same framed 200-byte value in every record",
                         "broker": "one pylog broker process with its schema registry"},
            "results": results, "runs": runs}


def run_from_args(args: argparse.Namespace, *, out: TextIO, err: TextIO) -> int:
    """``pylog bench --workload schema-validation``: --records (capped at 300,000 per topic and round), --rounds;
    the JSON goes to *out* (and --output)."""
    from broker_sim.bench import runner

    report = run(min(args.records, 300_000), args.rounds, err)
    runner.print_report(report, args.output, out=out)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m broker_sim.bench.schema_validation",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args(argv)
    print(json.dumps(run(args.records, args.rounds, sys.stderr), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
