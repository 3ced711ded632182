"""``pylog bench --workload registry``: Schema Registry lookups by id and registrations per second.

Example::

    $ pylog bench --workload registry --rounds 3
    $ python -m broker_sim.bench.registry --lookups 20000 --registrations 500 --rounds 1

One broker process (``python -m broker_sim --schema-registry-port N``).  Each round, on the same broker:

1. ``registrations``: POST ``/subjects/{s}/versions`` of distinct Avro schemas (a new record name each, so
   each is a new id: the full write path, catch-up, decide, append to ``_schemas``, answer), one keep-alive
   HTTP connection;
2. ``lookups_http``: GET ``/schemas/ids/{id}`` round-robin over the ids registered so far, one keep-alive
   HTTP connection (``http.client``), so the figure is the registry's, not connection setup's;
3. ``lookups_client``: confluent-kafka's ``SchemaRegistryClient.get_schema(id)`` with its cache cleared
   before every call (``clear_caches``), i.e. what a deserializer pays on a cache miss (httpx, parsing the
   answer into a ``Schema``).

Serializers cache ids, so a lookup happens once per schema per client; this measures how many such misses a
broker answers per second.  The report (JSON on stdout): ``{"workload": ..., "results": {metric: median},
"runs": [...]}``; the benchmark never fails a build.
"""
from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import time
import uuid
from dataclasses import replace
from typing import TextIO

from broker_sim.bench.brokers import HOST, BrokerProcess, free_port, pylog_broker

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
METRICS = ("registrations_per_s", "lookups_http_per_s", "lookups_client_per_s")


def registry_broker() -> tuple[BrokerProcess, str]:
    """(a pylog broker process serving a Schema Registry, the registry's URL)."""
    kind = pylog_broker()
    registry_port = free_port()
    base = kind.command
    process = BrokerProcess(replace(kind, command=lambda port, data_dir: base(port, data_dir) + [
        "--schema-registry-port", str(registry_port)]))
    return process, f"http://{HOST}:{registry_port}"


def wait_for_registry(url: str, timeout_s: float = 30.0) -> None:
    """Until ``GET /subjects`` answers 200 (the broker accepts Kafka connections a moment before)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            status, _ = Http(url).call("GET", "/subjects")
            if status == 200:
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"no schema registry at {url} after {timeout_s:g} s")
        time.sleep(0.05)


class Http:
    """One keep-alive HTTP/1.1 connection to the registry."""

    def __init__(self, url: str) -> None:
        host, _, port = url.removeprefix("http://").partition(":")
        self.connection = http.client.HTTPConnection(host, int(port), timeout=30)

    def call(self, method: str, path: str, body: dict | None = None) -> tuple[int, object]:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": CONTENT_TYPE} if data else {}
        self.connection.request(method, path, body=data, headers=headers)
        response = self.connection.getresponse()
        payload = response.read()
        return response.status, json.loads(payload) if payload else None

    def close(self) -> None:
        self.connection.close()


def schema(name: str) -> str:
    return json.dumps({"type": "record", "name": name, "namespace": "bench",
                       "fields": [{"name": "id", "type": "long"}, {"name": "payload", "type": "bytes"}]})


EVENT_SCHEMA = schema("Event")


def registrations(url: str, count: int) -> tuple[dict, list[int]]:
    """Register ``count`` distinct schemas under one subject (compatibility NONE): (result, their ids)."""
    connection = Http(url)
    subject = f"bench-{uuid.uuid4().hex[:8]}-value"
    ids = []
    try:
        status, answer = connection.call("PUT", f"/config/{subject}", {"compatibility": "NONE"})
        if status != 200:
            return {"error": f"PUT /config/{subject}: {status} {answer}"}, ids
        started = time.perf_counter()
        for n in range(count):
            status, answer = connection.call("POST", f"/subjects/{subject}/versions",
                                             {"schema": schema(f"Record{n}"), "schemaType": "AVRO"})
            if status != 200:
                return {"error": f"registration {n}: {status} {answer}"}, ids
            ids.append(answer["id"])
        elapsed = time.perf_counter() - started
    finally:
        connection.close()
    return {"registrations": count, "seconds": round(elapsed, 4),
            "registrations_per_s": round(count / elapsed, 1)}, ids


def lookups_http(url: str, ids: list[int], count: int) -> dict:
    connection = Http(url)
    try:
        started = time.perf_counter()
        for n in range(count):
            status, answer = connection.call("GET", f"/schemas/ids/{ids[n % len(ids)]}")
            if status != 200:
                return {"error": f"GET /schemas/ids/{ids[n % len(ids)]}: {status} {answer}"}
        elapsed = time.perf_counter() - started
    finally:
        connection.close()
    return {"lookups": count, "seconds": round(elapsed, 4), "lookups_http_per_s": round(count / elapsed, 1)}


def lookups_client(url: str, ids: list[int], count: int) -> dict:
    from confluent_kafka.schema_registry import SchemaRegistryClient

    client = SchemaRegistryClient({"url": url})
    started = time.perf_counter()
    for n in range(count):
        client.clear_caches()
        client.get_schema(ids[n % len(ids)])
    elapsed = time.perf_counter() - started
    return {"lookups": count, "seconds": round(elapsed, 4), "lookups_client_per_s": round(count / elapsed, 1)}


def run(lookups: int, registrations_per_round: int, rounds: int, err: TextIO) -> dict:
    process, url = registry_broker()
    process.start()
    runs = []
    try:
        wait_for_registry(url)
        for round_number in range(1, rounds + 1):
            run = {"round": round_number}
            try:
                run["registrations"], ids = registrations(url, registrations_per_round)
                if ids:
                    run["lookups_http"] = lookups_http(url, ids, lookups)
                    run["lookups_client"] = lookups_client(url, ids, max(lookups // 4, 1))
            except Exception as exc:  # noqa: BLE001 - a failure is a result to report, never a failed build
                run["error"] = f"{type(exc).__name__}: {exc}"
            runs.append(run)
            print(f"bench registry round {round_number}: " + ", ".join(
                f"{metric} {part[metric]:,.0f}" for part in run.values() if isinstance(part, dict)
                for metric in METRICS if metric in part), file=err, flush=True)
    finally:
        process.stop()
    results = {}
    for metric in METRICS:
        values = [part[metric] for r in runs for part in r.values() if isinstance(part, dict) and metric in part]
        if values:
            results[metric] = round(statistics.median(values), 1)
    errors = [f"round {r['round']}: {part['error'] if isinstance(part, dict) else part}"
              for r in runs for key, part in r.items()
              if key == "error" or (isinstance(part, dict) and "error" in part)]
    if errors:
        results["errors"] = errors
    return {"workload": {"rounds": rounds, "registrations_per_round": registrations_per_round,
                         "lookups_http_per_round": lookups, "lookups_client_per_round": max(lookups // 4, 1),
                         "schemas": "Avro records, a distinct name each (each registration is a new id)",
                         "connection": "one keep-alive HTTP/1.1 connection per step (http.client); the client "
                                       "step: SchemaRegistryClient (httpx) with clear_caches() before each call",
                         "broker": "one pylog broker process, single node, registry on the same process"},
            "results": results, "runs": runs}


def run_from_args(args: argparse.Namespace, *, out: TextIO, err: TextIO) -> int:
    """``pylog bench --workload registry``: --rounds (default 3); the lookups per round are --records capped at
    20,000, the registrations 500; the JSON goes to *out* (and --output)."""
    from broker_sim.bench import runner

    report = run(min(args.records, 20_000), 500, args.rounds, err)
    runner.print_report(report, args.output, out=out)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m broker_sim.bench.registry", description=__doc__.split("\n")[0])
    parser.add_argument("--lookups", type=int, default=20_000)
    parser.add_argument("--registrations", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    print(json.dumps(run(args.lookups, args.registrations, args.rounds, sys.stderr), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
