"""The request metrics kept as plain numbers expose exactly what prometheus_client's own Counter and Histogram
would: the same families, samples, bucket boundaries (a time equal to a bound counts in that bucket) and
``_created`` series, so dashboards see no difference."""
from __future__ import annotations

import random

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from broker_sim.server import metrics as metrics_module
from broker_sim.server.metrics import LATENCY_BUCKETS_MS, BrokerMetrics

CREATED = 1_700_000_000.5


def test_request_metrics_expose_what_prometheus_clients_counter_and_histogram_would(monkeypatch):
    monkeypatch.setattr(metrics_module.time, "time", lambda: CREATED)
    monkeypatch.setattr("prometheus_client.metrics.time.time", lambda: CREATED)
    registry = CollectorRegistry(auto_describe=False)
    requests = Counter("kafka_network_requestmetrics_requests", "Requests handled, by API and version "
                       "(Kafka: kafka.network:type=RequestMetrics,name=RequestsPerSec)", ["request", "version"],
                       registry=registry)
    total_time = Histogram("kafka_network_requestmetrics_totaltimems", "Request handling time in ms, by API "
                           "(Kafka: kafka.network:type=RequestMetrics,name=TotalTimeMs)", ["request"],
                           buckets=LATENCY_BUCKETS_MS, registry=registry)
    ours = BrokerMetrics()
    rnd = random.Random(25)
    bounds_s = [bound / 1000 for bound in LATENCY_BUCKETS_MS]  # exactly on a bucket's bound
    for _ in range(2000):
        api, version = rnd.choice(["Produce", "Fetch", "Metadata", "ApiVersions"]), rnd.randint(0, 12)
        seconds = rnd.choice(bounds_s + [0.0, 45.0, rnd.random() / 100, rnd.random() * 40])
        ours.observe_request(api, version, seconds)
        requests.labels(api, str(version)).inc()
        total_time.labels(api).observe(seconds * 1000.0)
    assert ours.exposition() == generate_latest(registry)
    assert ours.request_count("Fetch", "Produce") == sum(
        sample.value for metric in requests.collect() for sample in metric.samples
        if sample.name.endswith("_total") and sample.labels["request"] in ("Fetch", "Produce"))
