"""A Jepsen-style fault workload for a pylog cluster (Jepsen's Kafka workload is the model).

Example (what ``tests/cluster/test_nemesis.py`` and ``ci/stress_cluster.sh`` do)::

    with LocalCluster(tmp, brokers=3, configs=FAST_FAILOVER_CONFIGS) as cluster:
        history = run_workload(cluster, WorkloadOptions(duration_s=30, seed=7))
        result = check(history)            # JSON-able dict; result["valid"] is the verdict
        print(json.dumps(result, indent=2))

Theory of operation
-------------------
The workload runs real clients against real broker processes while a nemesis
breaks the brokers, and records a *history*; :func:`check` is a pure function
of that history. The workload never decides validity, the checker never
touches the cluster.

Clients (confluent-kafka, i.e. librdkafka):

* *producers*: idempotent, ``acks=all``; each sends unique values
  ``"<producer>/<seq>"`` round-robin over the partitions at a fixed rate. The
  send of every value is recorded before ``produce()``; a delivery report
  without error records the acknowledged ``(partition, offset)``; a delivery
  error (or a value still unacknowledged when the run ends) makes the value
  *indeterminate*: it may or may not be in the log (Jepsen's ``:info``). A
  producer that hits a fatal error (e.g. an idempotence failure librdkafka
  cannot recover from) is replaced by a new incarnation with a new name, so
  every value stays unique and the order checks stay per producer.
* *consumers*: one per partition, ``assign`` from the beginning,
  ``read_committed``, no group; they poll throughout the run and record every
  ``(partition, offset, value)`` in the order read. ``auto.offset.reset`` is
  ``error``: an out-of-range position is recorded and the consumer re-seeks to
  where it was (a new *run* of observations), it is never silently rewound.
* *nemesis*: every ``nemesis_interval_s`` it picks the current leader of a
  random workload partition (or, with ``controller_probability``, the
  controller), and either SIGKILLs it (restarting it after ``fault_s``) or
  SIGSTOPs it (SIGCONT after ``fault_s``). One fault at a time, so with RF=3 and
  ``min.insync.replicas=2`` the cluster should stay writable. The ``kill2`` and
  ``pause2`` faults (for the stress script) take a second broker down with the
  target: writes stall, and the checks must hold all the same.
* *end*: the nemesis stops, every broker is healed, the run waits until every
  partition is back to a full ISR, producers flush, a *final read* consumes
  every partition from the beginning up to its high watermark, and each
  replica's segment files are read from the brokers' data dirs.

The checks, and when a run is valid or inconclusive: :mod:`broker_sim.testing.jepsen_checker`.
"""
from __future__ import annotations

import json
import random
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from broker_sim.local.cluster import ClusterError, LocalCluster
from broker_sim.testing.jepsen_checker import History, check, end_offset, replica_difference, replica_logs, value_of

# Broker settings for fast failover in tests (zookeeper.session.timeout.ms etc. as the brief asks).
FAST_FAILOVER_CONFIGS = {
    "zookeeper.session.timeout.ms": "3000",
    "replica.lag.time.max.ms": "3000",
    "leader.imbalance.check.interval.seconds": "5",
}
# kill: SIGKILL, restart after the fault; pause: SIGSTOP, SIGCONT after it; kill2 / pause2: the same to
# the target and one more broker at once (with RF=3 and min.insync.replicas=2 writes then stall).
FAULTS = ("kill", "pause", "kill2", "pause2")


# --------------------------------------------------------------------------- the workload

@dataclass
class WorkloadOptions:
    """Knobs of :func:`run_workload`; the defaults are the CI run's."""
    topic: str = "jepsen"
    partitions: int = 3
    replication_factor: int = 3
    min_insync_replicas: int = 2
    producers: int = 3
    duration_s: float = 30.0
    # past duration_s the run goes on until the nemesis has injected min_faults faults, up to max_duration_s (a slow
    # machine's heals take longer: a fixed duration would see fewer faults, and a check of every kind would be luck)
    min_faults: int = 0
    max_duration_s: float | None = None       # None: duration_s
    rate_per_producer: float = 100.0          # sends per second per producer
    nemesis_interval_s: float = 3.0           # from one fault's heal to the next fault
    fault_s: tuple[float, float] = (1.5, 6.0)  # uniform; pauses past the 3 s session timeout make zombies
    faults: tuple[str, ...] = ("kill", "pause")  # from FAULTS
    controller_probability: float = 0.25
    seed: int | None = None
    message_timeout_ms: int = 30_000
    heal_timeout_s: float = 90.0
    final_read_timeout_s: float = 60.0
    replica_sync_timeout_s: float = 60.0
    log: Callable[[str], None] | None = None


RESTART_TIMEOUT_S = 60.0  # a killed broker's restart by the nemesis
THREAD_JOIN_S = 60.0  # all client threads at the end, together


def workload_budget_s(options: WorkloadOptions) -> float:
    """The longest :func:`run_workload` can take with these options before it returns or raises: every
    phase has its own bound (a test's timeout must be above this, or a slow run is killed, not reported)."""
    nemesis_join = options.fault_s[1] + RESTART_TIMEOUT_S + 5.0
    return (max(options.duration_s, options.max_duration_s or 0.0) + nemesis_join + 2 * options.heal_timeout_s
            + options.message_timeout_ms / 1000.0 + 30.0  # producers flush, together
            + 2 * options.final_read_timeout_s + 10.0     # high watermarks, final read, consumers catch up
            + options.replica_sync_timeout_s + THREAD_JOIN_S + 60.0)  # + topic creation and full ISR


class _Clock:
    def __init__(self) -> None:
        self.start = time.monotonic()

    def __call__(self) -> float:
        return round(time.monotonic() - self.start, 3)


def _producer_config(bootstrap: str, options: WorkloadOptions) -> dict:
    return {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 2,
        "message.timeout.ms": options.message_timeout_ms,
        # longer than any fault: librdkafka bumps the idempotent producer's epoch when a request times out with its
        # outcome unknown and resends the batch as a new one (epoch + 1, sequence 0), which no broker can tell from
        # new records. A 5 s timeout under a 4.8 s pause of the leader once left the same value at two offsets
        # (epoch 0 seq 848, then epoch 1 seq 0): a client duplicate, not a broker's.
        "request.timeout.ms": int(options.fault_s[1] * 1000) + 5000,
        "retry.backoff.ms": 100,
        "reconnect.backoff.max.ms": 1000,
        "topic.metadata.refresh.interval.ms": 2000,
        "log_level": 0,  # client errors are observed through delivery reports and consumer errors
    }


def _consumer_config(bootstrap: str, name: str) -> dict:
    return {
        "bootstrap.servers": bootstrap,
        "group.id": f"jepsen-{name}",   # required by librdkafka; no group protocol is used with assign()
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "error",
        "isolation.level": "read_committed",
        "enable.partition.eof": False,
        "fetch.wait.max.ms": 100,
        "reconnect.backoff.max.ms": 1000,
        "topic.metadata.refresh.interval.ms": 2000,
        "log_level": 0,  # client errors are observed through delivery reports and consumer errors
    }


class _Worker(threading.Thread):
    """A client thread of the workload (its ``_run``): what ends it (``failure``) is reported by the workload."""

    failure: BaseException | None = None

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # noqa: BLE001 - reported by the workload
            self.failure = exc


class _ProducerWorker(_Worker):
    """One logical producer: sends at a fixed rate; a fatal error starts a new incarnation."""

    def __init__(self, index: int, bootstrap: str, options: WorkloadOptions, stop: threading.Event,
                 clock: _Clock, events: list) -> None:
        super().__init__(name=f"jepsen-producer-{index}", daemon=True)
        self.index, self.bootstrap, self.options, self.stop_event = index, bootstrap, options, stop
        self.clock, self.events = clock, events
        self.sends: dict[str, list] = {}
        self.acks: dict[str, list] = {}
        self.ack_times: dict[str, float] = {}
        self.errors: dict[str, str] = {}
        self.incarnation = 0
        self._fatal = threading.Event()
        self._fatal_error = ""

    def _delivered(self, err, msg) -> None:
        value = msg.value().decode()
        if err is None:
            self.acks[value] = [msg.partition(), msg.offset()]
            self.ack_times[value] = self.clock()
        else:
            self.errors[value] = f"{err.name()}: {err.str()}"

    def _error(self, err) -> None:
        if err.fatal():
            self._fatal_seen(err)

    def _raised(self, exc) -> bool:
        """A KafkaException out of produce/poll/flush: True when it is the client's fatal error, noted (confluent-kafka
        raises a fatal error from poll() and flush() instead of calling error_cb)."""
        error = exc.args[0] if exc.args else None
        if error is None or not hasattr(error, "fatal") or not error.fatal():
            return False
        self._fatal_seen(error)
        return True

    def _fatal_seen(self, error) -> None:
        self._fatal_error = error.str()
        self._fatal.set()

    def _record_fatal(self, name: str) -> None:
        self.events.append({"t": self.clock(), "producer": name, "fatal": True, "error": self._fatal_error})

    def _new_producer(self):
        from confluent_kafka import Producer

        self._fatal.clear()
        return Producer({**_producer_config(self.bootstrap, self.options), "error_cb": self._error,
                         "client.id": f"jepsen-p{self.index}.{self.incarnation}"})

    def _flush(self, producer, timeout_s: float) -> int:
        """flush(); a fatal error raised from it is noted (its messages' delivery reports carry the error)."""
        from confluent_kafka import KafkaException

        try:
            return producer.flush(timeout_s)
        except KafkaException as exc:
            if not self._raised(exc):
                raise
            return len(producer)

    def _run(self) -> None:
        from confluent_kafka import KafkaException

        producer = self._new_producer()
        name = f"p{self.index}.{self.incarnation}"
        seq = 0
        interval = 1.0 / self.options.rate_per_producer
        next_send = time.monotonic()
        while not self.stop_event.is_set():
            if self._fatal.is_set():
                self._record_fatal(name)
                self._flush(producer, 5)
                self.incarnation += 1
                producer = self._new_producer()
                name, seq = f"p{self.index}.{self.incarnation}", 0
            value = value_of(name, seq)
            partition = (seq + self.index) % self.options.partitions
            self.sends[value] = [name, seq, partition]
            try:
                producer.produce(self.options.topic, value.encode(), partition=partition,
                                 on_delivery=self._delivered)
            except BufferError:
                del self.sends[value]
                producer.poll(0.05)
                continue
            except KafkaException as exc:
                self.errors[value] = f"produce() raised: {exc}"
                self._raised(exc)
            seq += 1
            next_send += interval
            if next_send - time.monotonic() < -1.0:  # fell behind (e.g. the queue was full): do not burst to catch up
                next_send = time.monotonic()
            # poll() returns as soon as it has served one delivery report, so poll until the send is due: sending on
            # every return tied the rate to the acks (4x the rate while they flowed) and pushed next_send seconds
            # ahead, so the loop then slept through a fault window, sending nothing
            while (delay := next_send - time.monotonic()) > 0 and not self.stop_event.is_set():
                try:
                    producer.poll(delay)
                except KafkaException as exc:
                    if not self._raised(exc):
                        raise
        remaining = self._flush(producer, self.options.message_timeout_ms / 1000 + 5)
        if self._fatal.is_set():
            self._record_fatal(name)
        if remaining:
            self.events.append({"t": self.clock(), "producer": name, "unflushed": remaining})


class _ConsumerWorker(_Worker):
    """Reads one partition from the beginning until told to stop; records runs of observations."""

    def __init__(self, partition: int, bootstrap: str, topic: str, stop: threading.Event,
                 clock: _Clock, events: list, name: str = "reader") -> None:
        super().__init__(name=f"jepsen-consumer-{partition}", daemon=True)
        self.partition, self.bootstrap, self.topic, self.stop_event = partition, bootstrap, topic, stop
        self.clock, self.events, self.label = clock, events, name
        self.runs: list[list[list]] = [[]]
        self.next_offset = 0
        self.out_of_range = 0

    def _run(self) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

        consumer = Consumer(_consumer_config(self.bootstrap, f"{self.label}-{self.partition}"))
        try:
            consumer.assign([TopicPartition(self.topic, self.partition, OFFSET_BEGINNING)])
            while not self.stop_event.is_set():
                for message in consumer.consume(500, 0.2):
                    error = message.error()
                    if error is not None:
                        if error.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                            self.out_of_range += 1
                            if self.out_of_range <= 20:
                                self.events.append({"t": self.clock(), "consumer": self.partition,
                                                    "offset_out_of_range": self.next_offset,
                                                    "error": error.str()})
                            self.runs.append([])
                            consumer.assign([TopicPartition(self.topic, self.partition, self.next_offset)])
                            time.sleep(0.2)
                            break
                        continue  # transient (broker down, leader moving): librdkafka retries
                    self.runs[-1].append([message.partition(), message.offset(), message.value().decode()])
                    self.next_offset = message.offset() + 1
        finally:
            consumer.close()


def high_watermarks(bootstrap: str, topic: str, partitions: int, *, timeout_s: float) -> dict[int, int]:
    """Each partition's high watermark, asked of its leader (retried until *timeout_s*)."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer(_consumer_config(bootstrap, "watermarks"))
    deadline = time.monotonic() + timeout_s
    marks: dict[int, int] = {}
    try:
        for partition in range(partitions):
            while True:
                try:
                    marks[partition] = consumer.get_watermark_offsets(
                        TopicPartition(topic, partition), timeout=5.0, cached=False)[1]
                    break
                except KafkaException:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)
    finally:
        consumer.close()
    return marks


def final_read(bootstrap: str, topic: str, ends: dict[int, int], *, timeout_s: float) -> tuple[dict, bool]:
    """Read every partition from the beginning up to its end offset in *ends*.

    Returns ({partition: [[offset, value], ...]}, complete?).
    """
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(_consumer_config(bootstrap, "final"))
    records: dict[int, list[list]] = {p: [] for p in ends}
    position = {p: 0 for p in ends}
    deadline = time.monotonic() + timeout_s
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        while any(position[p] < ends[p] for p in ends) and time.monotonic() < deadline:
            for message in consumer.consume(1000, 0.5):
                if message.error() is not None:
                    continue
                p = message.partition()
                if message.offset() < ends[p]:
                    records[p].append([message.offset(), message.value().decode()])
                position[p] = max(position[p], message.offset() + 1)
    finally:
        consumer.close()
    return records, all(position[p] >= ends[p] for p in ends)


class Nemesis(threading.Thread):
    """Faults the current leader of a random partition (or the controller) one at a time."""

    def __init__(self, cluster, options: WorkloadOptions, stop: threading.Event, clock: _Clock,
                 events: list, rng: random.Random) -> None:
        super().__init__(name="jepsen-nemesis", daemon=True)
        self.cluster, self.options, self.stop_event = cluster, options, stop
        self.clock, self.events, self.rng = clock, events, rng
        self.failure: BaseException | None = None
        self.faults_injected = 0
        self.faults_completed = 0  # faults whose round (fault, heal, recovery wait) has returned

    def _log(self, event: dict) -> None:
        event = {"t": self.clock(), **event}
        self.events.append(event)
        if "fault" in event:
            self.faults_injected += 1
        if self.options.log:
            self.options.log("nemesis " + json.dumps(event))

    def run(self) -> None:
        try:
            while not self.stop_event.wait(self.options.nemesis_interval_s):
                injected = self.faults_injected
                self._one_fault()
                self.faults_completed += self.faults_injected > injected
        except BaseException as exc:  # noqa: BLE001 - reported by the workload
            self.failure = exc
            self._log({"error": f"{type(exc).__name__}: {exc}"})

    def _pick_target(self) -> tuple[int, str] | None:
        try:
            if self.rng.random() < self.options.controller_probability:
                return self.cluster.controller_id(timeout_s=5.0), "controller"
            partition = self.rng.randrange(self.options.partitions)
            return (self.cluster.leader_of(self.options.topic, partition, timeout_s=5.0),
                    f"leader of {self.options.topic}-{partition}")
        except ClusterError as exc:
            self._log({"skipped": f"cluster query failed: {exc}"})
            return None

    def _one_fault(self) -> None:
        target = self._pick_target()
        if target is None:
            return
        broker_id, role = target
        if broker_id not in self.cluster.available_brokers():
            self._log({"skipped": f"{role} is {broker_id}, not an available broker"})
            return
        fault = self.rng.choice(self.options.faults)
        if fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r}; choose from {', '.join(FAULTS)}")
        victims = [broker_id]
        if fault.endswith("2"):  # a minority no more: the target and one more broker
            others = [b for b in self.cluster.available_brokers() if b != broker_id]
            victims += self.rng.sample(others, min(1, len(others)))
        action = fault.rstrip("2")
        duration = round(self.rng.uniform(*self.options.fault_s), 2)
        self._log({"fault": fault, "broker": broker_id, "brokers": victims, "role": role, "for_s": duration})
        for victim in victims:
            if action == "kill":
                self.cluster.kill(victim)
            else:
                self.cluster.pause(victim)
        self.stop_event.wait(duration)
        for victim in victims:
            self._heal(victim, action)

    def _heal(self, broker_id: int, fault: str) -> None:
        if fault == "kill":
            try:
                self.cluster.restart(broker_id, wait=True, timeout_s=RESTART_TIMEOUT_S)
            except ClusterError as exc:
                self._log({"heal_failed": broker_id, "error": str(exc)[:2000]})
                return
        else:
            self.cluster.resume(broker_id)
        self._log({"healed": broker_id, "after": fault})


def create_topic(bootstrap: str, options: WorkloadOptions, *, timeout_s: float = 30.0) -> None:
    """Create the workload topic (RF, min.insync.replicas) with confluent-kafka's admin client."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(options.topic, num_partitions=options.partitions, replication_factor=options.replication_factor,
                  config={"min.insync.replicas": str(options.min_insync_replicas)})],
        operation_timeout=timeout_s, request_timeout=timeout_s)
    futures[options.topic].result(timeout_s)


def run_workload(cluster, options: WorkloadOptions | None = None, *, nemesis_factory=None) -> History:
    """Run producers, consumers and the nemesis against *cluster* (a started LocalCluster).

    ``nemesis_factory``: the fault thread's class (default :class:`Nemesis`: kills and pauses; the containers'
    ``partition_nemesis()`` cuts the network instead). Creates ``options.topic`` (it must not exist), runs for
    ``options.duration_s`` (and on, up to ``max_duration_s``, until ``min_faults`` fault rounds have completed),
    heals, reads everything and returns the :class:`History`. Client or nemesis
    thread crashes are raised as RuntimeError after cleanup.
    """
    options = options or WorkloadOptions()
    rng = random.Random(options.seed)
    clock = _Clock()
    history = History(replication_factor=options.replication_factor)
    events = history.events

    def log(message: str) -> None:
        if options.log:
            options.log(message)

    bootstrap = cluster.bootstrap_servers
    create_topic(bootstrap, options)
    cluster.wait_for_full_isr(options.topic, options.partitions, timeout_s=60.0)
    events.append({"t": clock(), "topic_ready": options.topic})

    stop_clients, stop_consumers, stop_nemesis = threading.Event(), threading.Event(), threading.Event()
    consumers = [_ConsumerWorker(p, bootstrap, options.topic, stop_consumers, clock, events)
                 for p in range(options.partitions)]
    producers = [_ProducerWorker(i, bootstrap, options, stop_clients, clock, events)
                 for i in range(options.producers)]
    nemesis = (nemesis_factory or Nemesis)(cluster, options, stop_nemesis, clock, events, rng)
    threads = [*consumers, *producers, nemesis]
    try:
        for thread in threads:
            thread.start()
        log(f"workload running for {options.duration_s:g} s")
        started = time.monotonic()
        stop_clients.wait(options.duration_s)
        until = started + max(options.duration_s, options.max_duration_s or 0.0)
        # faults_completed is read only with min_faults: a nemesis_factory's own class need not count it otherwise
        while (options.min_faults and nemesis.faults_completed < options.min_faults and nemesis.is_alive()
               and time.monotonic() < until):
            stop_clients.wait(0.2)

        stop_nemesis.set()
        nemesis.join(options.fault_s[1] + RESTART_TIMEOUT_S + 5.0)
        events.append({"t": clock(), "nemesis_stopped": True})
        try:
            cluster.heal(wait=True, timeout_s=options.heal_timeout_s)
            cluster.wait_for_full_isr(options.topic, options.partitions, timeout_s=options.heal_timeout_s)
            events.append({"t": clock(), "healed": "all"})
        except ClusterError as exc:
            history.healed = False
            events.append({"t": clock(), "heal_failed": str(exc)[:2000]})
        log("healed; stopping producers")

        stop_clients.set()
        flushed_by = time.monotonic() + options.message_timeout_ms / 1000 + 30
        for producer in producers:
            producer.join(max(0.0, flushed_by - time.monotonic()))
        ends = high_watermarks(bootstrap, options.topic, options.partitions, timeout_s=options.final_read_timeout_s)
        events.append({"t": clock(), "high_watermarks": {str(p): o for p, o in ends.items()}})
        history.final, history.final_complete = final_read(bootstrap, options.topic, ends,
                                                           timeout_s=options.final_read_timeout_s)
        catch_up = time.monotonic() + 10.0
        while time.monotonic() < catch_up and any(c.next_offset < ends[c.partition] for c in consumers):
            time.sleep(0.1)
        log("final read done; comparing replicas")
        history.replica_logs = _settled_replica_logs(cluster, options, ends)
    finally:
        stop_nemesis.set()
        stop_clients.set()
        stop_consumers.set()
        joined_by = time.monotonic() + THREAD_JOIN_S
        for thread in threads:
            thread.join(max(0.0, joined_by - time.monotonic()))
    for producer in producers:
        history.sends.update(producer.sends)
        history.acks.update(producer.acks)
        history.ack_times.update(producer.ack_times)
        history.send_errors.update(producer.errors)
    for consumer in consumers:
        history.polls.extend(run for run in consumer.runs if run)
    failures = [f"{t.name}: {type(t.failure).__name__}: {t.failure}" for t in threads if t.failure is not None]
    if failures:
        raise RuntimeError("workload thread failed: " + "; ".join(failures))
    return history


def _settled_replica_logs(cluster, options: WorkloadOptions, ends: dict[int, int]) -> dict[int, dict[int, list]]:
    """Replica digests per partition, re-read until every replica reached the end offset and they agree
    (followers may still be fetching the last batches) or the timeout passes."""
    deadline = time.monotonic() + options.replica_sync_timeout_s
    while True:
        metadata = cluster.metadata([options.topic])
        logs: dict[int, dict[int, list]] = {}
        for partition in range(options.partitions):
            state = metadata.partitions.get((options.topic, partition))
            replicas = set(state.replicas) if state is not None else set()
            dirs = {b: d for b, d in cluster.partition_dirs(options.topic, partition).items()
                    if not replicas or b in replicas}
            logs[partition] = replica_logs(dirs)
        settled = all(replica_difference(replicas) is None
                      and all(end_offset(d) >= ends.get(p, 0) for d in replicas.values())
                      for p, replicas in logs.items())
        if settled or time.monotonic() > deadline:
            return logs
        time.sleep(0.5)



# --------------------------------------------------------------------------- stress rounds

def run_rounds(rounds: int, seconds: float, *, work_dir: str | None = None, seed: int | None = None,
               faults: tuple[str, ...] = ("kill", "pause"), out=None, err=None) -> list[dict]:
    """*rounds* runs, each on a fresh 3-broker LocalCluster: workload, heal, check. Prints each
    result as one JSON line on *out*; returns the results. Histories and broker logs stay in
    *work_dir* (a temp dir by default) for post-mortems."""
    import sys
    import tempfile

    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    base = Path(work_dir or tempfile.mkdtemp(prefix="pylog-stress-cluster-"))
    results = []
    for round_number in range(1, rounds + 1):
        round_seed = (seed if seed is not None else int(time.time())) + round_number
        directory = base / f"round-{round_number}"
        print(f"stress_cluster: round {round_number}/{rounds}, seed {round_seed}, {seconds:g} s, in {directory}",
              file=err, flush=True)
        started = time.monotonic()
        options = WorkloadOptions(duration_s=seconds, seed=round_seed, faults=faults,
                                  log=lambda line: print(f"  {line}", file=err, flush=True))
        try:
            with LocalCluster(directory / "cluster", brokers=3, configs=FAST_FAILOVER_CONFIGS) as cluster:
                history = run_workload(cluster, options)
            (directory / "history.json").write_text(history.to_json())
            result = check(history)
        except Exception as exc:  # noqa: BLE001 - a crashed round is an invalid round, reported as such
            result = {"valid": False, "problems": [f"the round crashed: {type(exc).__name__}: {exc}"]}
        result.update(round=round_number, seed=round_seed, seconds=round(time.monotonic() - started, 1),
                      work_dir=str(directory))
        results.append(result)
        print(json.dumps(result), file=out, flush=True)
    return results


def main(argv=None) -> int:
    """``python -m broker_sim.testing.jepsen_workload [--rounds N] [--seconds S]``: exit 1 if any round is invalid."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m broker_sim.testing.jepsen_workload",
                                     description="Run the Jepsen-style nemesis workload on fresh local clusters.")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=60.0, help="faulty phase per round (default: 60)")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--work-dir", default=None, help="keep clusters and histories here (default: a temp dir)")
    parser.add_argument("--faults", default="kill,pause",
                        help=f"comma-separated, from {','.join(FAULTS)} (default: kill,pause)")
    args = parser.parse_args(argv)
    faults = tuple(f.strip() for f in args.faults.split(",") if f.strip())
    unknown = [f for f in faults if f not in FAULTS]
    if unknown or not faults:
        parser.error(f"--faults: unknown {','.join(unknown) or args.faults!r}; choose from {','.join(FAULTS)}")
    results = run_rounds(args.rounds, args.seconds, work_dir=args.work_dir, seed=args.seed, faults=faults)
    invalid = [r["round"] for r in results if not r.get("valid")]
    summary = {"rounds": len(results), "invalid_rounds": invalid,
               "acked": sum(r.get("acked", 0) for r in results),
               "faults": sum(r.get("faults", 0) for r in results)}
    print(json.dumps({"summary": summary}), flush=True)
    return 1 if invalid else 0


if __name__ == "__main__":
    raise SystemExit(main())
