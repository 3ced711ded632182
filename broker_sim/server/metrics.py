"""Prometheus metrics of one broker, named as Kafka's JMX metrics come out of the Prometheus JMX exporter.

Theory of operation: this module is the only one that knows Prometheus.  The
hot paths keep plain integers — each ``Partition`` counts ``bytes_in``,
``messages_in``, ``bytes_out`` (consumer fetches; like Kafka, no records-out
meter: a fetch serves file regions without counting records), ``isr_shrinks``
and ``isr_expands`` — and the
dispatcher hands each request's API, version and duration to
``BrokerMetrics.observe_request``, which keeps a count per API and version and
a count per latency bucket per API (plain numbers too, made into a counter and a
histogram family at a scrape: ``prometheus_client`` and ``server/http.py`` are
imported at the first scrape or ``metrics.port``, never by a broker nobody
scrapes).  Everything else is read when Prometheus
scrapes: ``BrokerCollector.collect`` walks the partitions, groups and
transactions the broker hands over once it has opened them (``BrokerMetrics.watch``)
and yields metric families.  A scrape (``BrokerMetrics.scrape``) collects those families on the broker's
event loop, where that state is mutated, so it reads it consistently and cheaply (numbers and labels,
the per-group series capped at ``metrics.consumergroup.max.series``); ``prometheus_client`` writes the
exposition text from them in a worker thread, off the loop.  Scrapes that arrive while one is being
built share its result, so N scrapers cost one build.  The endpoint is served by the broker's bounded
HTTP server (``server/http.py``: at most ``MAX_HTTP_CONNECTIONS`` scrapers, timed out, responses
written in slices as the client reads them, so a scraper that stops reading holds a bounded buffer).

Where it binds: ``metrics.host`` (default 127.0.0.1) and ``metrics.port``: an explicit bind, loopback
unless the operator chooses an interface only the monitoring reaches — as a Kafka broker's JMX exporter
agent is deployed.  The endpoint has no login (Prometheus scrapers speak neither SASL nor Kafka ACLs).

What it names: Kafka's JMX is not ACL-guarded, but /metrics is a network endpoint beside listeners whose
ACLs hide topics and groups, so with an authorizer (``authorizer.class.name``) it names them as one
principal would see them over Kafka: ``metrics.principal`` (default ``User:ANONYMOUS``, what an
unauthenticated client is).  A series labelled with a topic is kept only when that principal may DESCRIBE
the topic (as Metadata decides; a ``super.users`` principal sees all), a consumer group's series only when it
may DESCRIBE the group and the topic; ACLs for it must allow host ``*`` (a scrape has no Kafka host).  Totals
without names (partition and group counts, under-replicated partitions) still count everything.  Without
an authorizer every topic and group is named, as nothing is hidden.  The principal is fixed, so one build
still serves every scraper.

Names: Kafka's MBean ``kafka.<domain>:type=<Type>,name=<Name>[,k=v]`` becomes
``kafka_<domain>_<type>_<name>`` in lower case, ``...PerSec`` meters become
``..._total`` counters and the MBean keys become labels — the translation of
the JMX exporter's widely used Kafka rules, so Kafka dashboards need at most
small edits.  Per-partition labels are added where Kafka has per-topic meters
(``sum by (topic)`` gives Kafka's series).  Consumer lag uses kafka_exporter's
``kafka_consumergroup_lag``, as Kafka brokers export none.  What Kafka does
not have is prefixed ``pylog_``.
"""
from __future__ import annotations

import asyncio
import bisect
import logging
import time
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from broker_sim.server.http import HttpRequest, HttpServer

log = logging.getLogger(__name__)

# request latency buckets in ms (Kafka's TotalTimeMs is a histogram in ms)
LATENCY_BUCKETS_MS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)
_MAX_HTTP_REQUEST_BYTES = 8192
_HTTP_TIMEOUT_S = 10.0
MAX_HTTP_CONNECTIONS = 16  # concurrent scrapers (503 beyond)
DEFAULT_GROUP_SERIES = 2000  # metrics.consumergroup.max.series


class _Families:
    """Metric families collected already: what ``generate_latest`` formats in a worker thread."""

    def __init__(self, families: list) -> None:
        self._families = families

    def collect(self):
        return self._families


class _Latency:
    """One API's request times: a count per ``LATENCY_BUCKETS_MS`` bucket (the last one +Inf) and their sum."""

    __slots__ = ("counts", "sum_ms", "created")

    def __init__(self, created: float) -> None:
        self.counts = [0] * (len(LATENCY_BUCKETS_MS) + 1)
        self.sum_ms = 0.0
        self.created = created

    def observe(self, ms: float) -> None:
        self.counts[bisect.bisect_left(LATENCY_BUCKETS_MS, ms)] += 1  # the first bucket whose bound is >= ms
        self.sum_ms += ms

    def cumulative(self) -> list[int]:
        total, running = [], 0
        for count in self.counts:
            running += count
            total.append(running)
        return total


class BrokerMetrics:
    """The broker's registry: request metrics updated per request, the rest collected at scrape time."""

    def __init__(self, max_group_series: int = DEFAULT_GROUP_SERIES) -> None:
        self.max_group_series = max_group_series
        self._collector: BrokerCollector | None = None
        self._building: asyncio.Future | None = None  # the scrape being built, shared by those arriving meanwhile
        self.scrapes_built = 0
        # per request: plain numbers (Kafka's RequestsPerSec by API and version, TotalTimeMs by API), made into
        # metric families only at a scrape, so a broker that is never scraped never imports prometheus_client
        self._requests: dict[tuple[str, int], list] = {}  # (API, version) -> [count, created (epoch s)]
        self._total_time: dict[str, _Latency] = {}  # API -> its TotalTimeMs histogram
        # SASL outcomes (Kafka: socket-server-metrics successful-/failed-authentication-total)
        self.successful_authentications = 0
        self.failed_authentications = 0
        # the Schema Registry's HTTP Basic logins (registry/auth.py's BasicAuthenticator: successes, failures)
        self.schema_registry_logins = None
        self.restricted_to = None  # (authorizer, principal) whose view /metrics names (restrict)

    def restrict(self, authorizer, principal: str) -> None:
        """Name only the topics and groups ``principal`` may DESCRIBE through ``authorizer`` (None: all), from the
        next scrape on; see the module docstring."""
        self.restricted_to = (authorizer, principal) if authorizer is not None else None

    def _describable(self, resource_type) -> Callable[[str], bool]:
        """Whether a scrape may name a resource of this type (one authorizer decision per name and scrape)."""
        restricted = self.restricted_to
        if restricted is None:
            return lambda name: True
        from broker_sim.security.acl import Operation

        authorizer, principal = restricted
        decided: dict[str, bool] = {}

        def describable(name: str) -> bool:
            answer = decided.get(name)
            if answer is None:
                answer = decided[name] = authorizer.authorize(principal, "", Operation.DESCRIBE, resource_type, name)
            return answer
        return describable

    def watch(self, replicas, metadata, groups, transactions, connections, loop_monitor) -> None:
        """Report these parts of the broker at every scrape from now on (once the broker has opened them)."""
        self._collector = BrokerCollector(self, replicas, metadata, groups, transactions, connections, loop_monitor)

    def observe_request(self, api_name: str, version: int, seconds: float) -> None:
        counted = self._requests.get((api_name, version))
        if counted is None:
            counted = self._requests[(api_name, version)] = [0, time.time()]
        counted[0] += 1
        latency = self._total_time.get(api_name)
        if latency is None:
            latency = self._total_time[api_name] = _Latency(time.time())
        latency.observe(seconds * 1000.0)

    def request_count(self, *api_names: str) -> int:
        """Requests of these APIs answered so far, all versions (what /metrics reports; callable from any
        thread)."""
        return sum(counted[0] for (api, _), counted in list(self._requests.items()) if api in api_names)

    def _collect(self) -> list:
        """The broker's families, read now (on the broker's loop: the state they read is mutated there)."""
        families = self._request_families()
        return families + (list(self._collector.collect()) if self._collector is not None else [])

    def _request_families(self) -> list:
        """RequestsPerSec and TotalTimeMs as the counter and histogram prometheus_client's own would expose."""
        from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily
        from prometheus_client.samples import Sample
        from prometheus_client.utils import floatToGoString

        requests = CounterMetricFamily("kafka_network_requestmetrics_requests", "Requests handled, by API and "
                                       "version (Kafka: kafka.network:type=RequestMetrics,name=RequestsPerSec)",
                                       labels=["request", "version"])
        for (api, version), (count, created) in list(self._requests.items()):
            requests.add_metric([api, str(version)], count, created=created)
        total_time = HistogramMetricFamily("kafka_network_requestmetrics_totaltimems", "Request handling time in "
                                           "ms, by API (Kafka: kafka.network:type=RequestMetrics,name=TotalTimeMs)",
                                           labels=["request"])
        bounds = [floatToGoString(bound) for bound in LATENCY_BUCKETS_MS + (float("inf"),)]
        for api, latency in list(self._total_time.items()):
            total_time.add_metric([api], list(zip(bounds, latency.cumulative())), latency.sum_ms)
            total_time.samples.append(Sample(total_time.name + "_created", {"request": api}, latency.created))
        return [requests, total_time]

    def _format(self, families: list) -> bytes:
        """The exposition text of the collected families: off the loop."""
        from prometheus_client import generate_latest

        return generate_latest(_Families(families))

    def exposition(self) -> bytes:
        """The Prometheus text exposition of everything, built at once (on the broker's loop or a stopped one)."""
        return self._format(self._collect())

    async def scrape(self) -> bytes:
        """What GET /metrics answers: collected on the loop, formatted in a thread; concurrent scrapes share
        one build."""
        if self._building is None:
            self._building = asyncio.ensure_future(self._build())
        building = self._building
        return await asyncio.shield(building)

    async def _build(self) -> bytes:
        try:
            families = self._collect()
            self.scrapes_built += 1
            return await asyncio.get_running_loop().run_in_executor(None, self._format, families)
        finally:
            self._building = None


class BrokerCollector:
    """Reads the broker's state at scrape time (on its event loop); see the module docstring for the names."""

    def __init__(self, metrics: BrokerMetrics, replicas, metadata, groups, transactions, connections,
                 loop_monitor) -> None:
        self.metrics = metrics
        self.replicas = replicas  # ReplicaManager: the partitions on this broker
        self.metadata = metadata  # in a cluster, the partition states (offline partitions)
        self.groups = groups
        self.transactions = transactions
        self.connections = connections  # server/network.py's Connections: counts, pool, bytes sent
        self.loop_monitor = loop_monitor

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily  # imported at the first scrape
        from broker_sim.security.acl import ResourceType

        self._shown_topic = self.metrics._describable(ResourceType.TOPIC)
        self._shown_group = self.metrics._describable(ResourceType.GROUP)
        yield from self._partition_metrics()
        yield from self._group_metrics()
        yield from self._transaction_metrics()
        connections = GaugeMetricFamily("kafka_server_socket_server_metrics_connection_count",
                                        "Open client connections (Kafka: socket-server-metrics connection-count)",
                                        labels=["listener"])
        connections.add_metric(["PLAINTEXT"], len(self.connections))
        yield connections
        pool = self.connections.pool
        if pool is not None:
            yield GaugeMetricFamily("kafka_network_socketserver_memorypoolused",
                                    "Request bytes held (queued.max.request.bytes pool)", value=pool.used)
            yield GaugeMetricFamily("kafka_network_socketserver_memorypoolavailable",
                                    "Request bytes still available in the pool", value=pool.available)
        yield CounterMetricFamily("pylog_network_fetch_sendfile_bytes",
                                  "Log bytes sent to fetchers with sendfile (zero-copy)",
                                  value=self.connections.sendfile_bytes)
        yield CounterMetricFamily("pylog_network_fetch_copied_bytes",
                                  "Log bytes sent to fetchers by read and write (TLS, small regions)",
                                  value=self.connections.copied_bytes)
        yield CounterMetricFamily("kafka_server_socket_server_metrics_successful_authentication",
                                  "SASL authentications that succeeded (Kafka: successful-authentication-total)",
                                  value=self.metrics.successful_authentications)
        yield CounterMetricFamily("kafka_server_socket_server_metrics_failed_authentication",
                                  "SASL authentications refused (Kafka: failed-authentication-total)",
                                  value=self.metrics.failed_authentications)
        logins = self.metrics.schema_registry_logins
        if logins is not None:
            yield CounterMetricFamily("pylog_schema_registry_successful_authentication",
                                      "Schema Registry HTTP Basic logins that succeeded", value=logins.successes)
            yield CounterMetricFamily("pylog_schema_registry_failed_authentication",
                                      "Schema Registry HTTP Basic logins refused (401)", value=logins.failures)
        monitor = self.loop_monitor
        yield CounterMetricFamily("pylog_event_loop_stalls", "Event-loop stalls over 100 ms", value=monitor.stalls)
        yield GaugeMetricFamily("pylog_event_loop_max_lag_ms", "Longest event-loop stall since start, ms",
                                value=monitor.max_lag_ms)

    def _partition_metrics(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily  # imported at the first scrape

        labels = ["topic", "partition"]
        families = {
            "bytes_in": CounterMetricFamily("kafka_server_brokertopicmetrics_bytesin", "Bytes appended by "
                                            "producers (Kafka: BrokerTopicMetrics BytesInPerSec)", labels=labels),
            "messages_in": CounterMetricFamily("kafka_server_brokertopicmetrics_messagesin", "Records appended by "
                                               "producers (Kafka: BrokerTopicMetrics MessagesInPerSec)",
                                               labels=labels),
            "bytes_out": CounterMetricFamily("kafka_server_brokertopicmetrics_bytesout", "Bytes sent to consumers "
                                             "(Kafka: BrokerTopicMetrics BytesOutPerSec)", labels=labels),
        }
        end = GaugeMetricFamily("kafka_log_log_logendoffset", "Log end offset (Kafka: Log LogEndOffset)",
                                labels=labels)
        start = GaugeMetricFamily("kafka_log_log_logstartoffset", "Log start offset (Kafka: Log LogStartOffset)",
                                  labels=labels)
        size = GaugeMetricFamily("kafka_log_log_size", "Bytes on disk (Kafka: Log Size)", labels=labels)
        under = GaugeMetricFamily("kafka_cluster_partition_underreplicated", "1 when the ISR is smaller than the "
                                  "replica set (Kafka: Partition UnderReplicated; leaders only)", labels=labels)
        shrinks = expands = partitions = leaders = under_count = 0
        for (topic, index), partition in sorted(self.replicas.partitions.items()):
            key = [topic, str(index)]
            shown = self._shown_topic(topic)
            if shown:
                for name, family in families.items():
                    family.add_metric(key, getattr(partition, name))
                end.add_metric(key, partition.log_end_offset)
                start.add_metric(key, partition.log_start_offset)
                size.add_metric(key, partition.log.size_in_bytes)
            shrinks += partition.isr_shrinks
            expands += partition.isr_expands
            partitions += 1
            if partition.is_leader:
                leaders += 1
                lagging = len(partition.isr) < len(partition.replicas)
                under_count += lagging
                if shown:
                    under.add_metric(key, int(lagging))
        yield from families.values()
        yield from (end, start, size, under)
        yield GaugeMetricFamily("kafka_server_replicamanager_underreplicatedpartitions",
                                "Partitions led here whose ISR is smaller than their replica set",
                                value=under_count)
        yield GaugeMetricFamily("kafka_server_replicamanager_partitioncount", "Replicas on this broker",
                                value=partitions)
        yield GaugeMetricFamily("kafka_server_replicamanager_leadercount", "Partitions led by this broker",
                                value=leaders)
        yield CounterMetricFamily("kafka_server_replicamanager_isrshrinks", "ISR shrinks of partitions led here",
                                  value=shrinks)
        yield CounterMetricFamily("kafka_server_replicamanager_isrexpands", "ISR expansions of partitions led here",
                                  value=expands)
        states = getattr(self.metadata, "partition_states", None)
        offline = sum(1 for state in states.values() if state.leader < 0) if states is not None else 0
        yield GaugeMetricFamily("kafka_controller_kafkacontroller_offlinepartitionscount",
                                "Partitions without a live leader, as this broker sees the cluster", value=offline)

    def _group_metrics(self):
        from prometheus_client.core import GaugeMetricFamily

        groups = self.groups.groups
        yield GaugeMetricFamily("kafka_coordinator_group_groupmetadatamanager_numgroups",
                                "Consumer groups coordinated here", value=len(groups))
        by_state: dict[str, int] = {}
        for group in groups.values():
            by_state[str(group.state.value)] = by_state.get(str(group.state.value), 0) + 1
        for state in ("Stable", "PreparingRebalance", "CompletingRebalance", "Empty", "Dead"):
            yield GaugeMetricFamily(f"kafka_coordinator_group_groupmetadatamanager_numgroups{state.lower()}",
                                    f"Groups in state {state}", value=by_state.get(state, 0))
        labels = ["consumergroup", "topic", "partition"]
        lag = GaugeMetricFamily("kafka_consumergroup_lag", "Log end offset minus the committed offset, for "
                                "partitions led by this broker (kafka_exporter's name)", labels=labels)
        current = GaugeMetricFamily("kafka_consumergroup_current_offset", "Committed offset (kafka_exporter's name)",
                                    labels=labels)
        partitions = self.replicas.partitions
        budget = self.metrics.max_group_series
        dropped = 0
        for group_id in sorted(groups):  # a client can create groups: the series are capped, the rest counted
            if not self._shown_group(group_id):
                continue
            offsets = {key: committed for key, committed in groups[group_id].offsets.items()
                       if self._shown_topic(key[0])}
            if budget < len(offsets):
                dropped += len(offsets)
                budget = 0
                continue
            budget -= len(offsets)
            for (topic, index), committed in sorted(offsets.items()):
                key = [group_id, topic, str(index)]
                current.add_metric(key, committed.offset)
                partition = partitions.get((topic, index))
                if partition is not None and partition.is_leader:
                    lag.add_metric(key, max(0, partition.high_watermark - committed.offset))
        yield lag
        yield current
        yield GaugeMetricFamily("pylog_consumergroup_series_dropped", "Committed (group, topic, partition) "
                                "offsets left out of kafka_consumergroup_* (metrics.consumergroup.max.series)",
                                value=dropped)

    def _transaction_metrics(self):
        from prometheus_client.core import GaugeMetricFamily

        family = GaugeMetricFamily("pylog_transaction_coordinator_transactions",
                                   "Transactional ids coordinated here, by state (Ongoing = open)", labels=["state"])
        counts: dict[str, int] = {}
        for txn in self.transactions.transactions.values():
            counts[str(txn.state)] = counts.get(str(txn.state), 0) + 1
        for state, count in sorted(counts.items()):
            family.add_metric([state], count)
        yield family


async def serve_metrics(metrics: BrokerMetrics, host: str, port: int) -> HttpServer:
    """GET /metrics on ``host:port`` (``metrics.host``, ``metrics.port``), served by the bounded HTTP server
    (``server/http.py``): keep-alive, the request and its headers within 8 KiB, no body, at most
    ``MAX_HTTP_CONNECTIONS`` scrapers, each timed out."""

    from prometheus_client import CONTENT_TYPE_LATEST

    from broker_sim.server.http import HttpLimits, HttpResponse, HttpServer

    async def handle(request: HttpRequest) -> HttpResponse:
        if request.method not in ("GET", "HEAD"):
            return HttpResponse(405, {"Content-Type": "text/plain", "Allow": "GET, HEAD"}, b"only GET\n")
        if request.path not in ("/metrics", "/"):
            return HttpResponse(404, {"Content-Type": "text/plain"}, b"see /metrics\n")
        return HttpResponse(200, {"Content-Type": CONTENT_TYPE_LATEST}, await metrics.scrape())

    limits = HttpLimits(max_request_line_bytes=_MAX_HTTP_REQUEST_BYTES, max_header_bytes=_MAX_HTTP_REQUEST_BYTES,
                        max_body_bytes=0, max_connections=MAX_HTTP_CONNECTIONS, header_timeout_s=_HTTP_TIMEOUT_S,
                        body_timeout_s=_HTTP_TIMEOUT_S, idle_timeout_s=_HTTP_TIMEOUT_S,
                        write_timeout_s=_HTTP_TIMEOUT_S)
    return await HttpServer(handle, limits, name="metrics").start(host, port)
