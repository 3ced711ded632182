"""``pylog reassign`` (kafka-reassign-partitions.sh) and ``pylog cluster decommission``: move replicas.

Examples::

    $ echo '{"version":1,"topics":[{"topic":"events"}]}' > move.json
    $ pylog reassign --generate --topics-to-move-json-file move.json --broker-list 0,1,2,3,4 > plan.txt
    $ pylog reassign --execute --reassignment-json-file proposed.json --throttle 1048576
    $ pylog reassign --verify --reassignment-json-file proposed.json     # and removes the throttles once done
    $ pylog reassign --cancel --reassignment-json-file proposed.json
    $ pylog cluster decommission --broker 2                              # every replica off broker 2, waits

The JSON is kafka-reassign-partitions.sh's: a topics-to-move file
``{"version":1,"topics":[{"topic":"t"}]}``, and a reassignment
``{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[3,1,2],"log_dirs":["any","any","any"]}]}``
(``log_dirs`` optional, "any" only).  ``--generate`` prints the current assignment and a proposed one computed by
the broker's own placement (``controller/assignment.py``, Kafka's ``AdminUtils``) over ``--broker-list``.
``--execute`` prints the current assignment (keep it to roll back), sets the throttles when ``--throttle`` is
given, and sends AlterPartitionReassignments (KIP-455) to the controller.  The throttle is Kafka's: the
rate (bytes/s) as ``leader.replication.throttled.rate`` and ``follower.replication.throttled.rate`` on every
broker involved, the moving partitions' current replicas as ``leader.replication.throttled.replicas`` and their
new ones as ``follower.replication.throttled.replicas``.  ``--verify`` reports each partition (in progress,
completed, or a different replica set) and, once all are complete, removes those throttles; ``--cancel``
cancels the partitions' reassignments (each goes back to its origin replicas) and removes the throttles.

``decommission`` moves every replica of the broker (internal topics included) to the live broker holding the
fewest replicas that does not hold that partition yet, keeping each replica's position (a preferred leader
stays preferred where it was not the leaving broker), waits until no reassignment is in progress and no
partition lists the broker (bounded by ``--timeout-s``), and reports what moved.
"""
from __future__ import annotations

import json
import time
from contextlib import closing
from typing import TextIO

from kafka import TopicPartition
from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType

from broker_sim.controller.assignment import assign_replicas
from broker_sim.controller.metadata import MetadataError
from broker_sim.tools.clients import Connection
from broker_sim.tools.errors import ToolError

VERSION = 1
RATE_CONFIGS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
MAX_JSON_BYTES = 64 * 1024 * 1024

Plan = dict[tuple[str, int], list[int]]


# --- the JSON files ---

def _load_json(path: str, what: str) -> dict:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_JSON_BYTES + 1)
    except OSError as exc:
        raise ToolError(f"cannot read the {what} {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_JSON_BYTES:
        raise ToolError(f"the {what} {path} is over {MAX_JSON_BYTES} bytes")
    try:
        doc = json.loads(data)
    except ValueError as exc:
        raise ToolError(f"the {what} {path} is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise ToolError(f"the {what} {path} is not a JSON object")
    if doc.get("version", VERSION) != VERSION:
        raise ToolError(f"the {what} {path} has version {doc.get('version')!r}; only {VERSION} is known")
    return doc


def read_topics_to_move(path: str) -> list[str]:
    doc = _load_json(path, "topics-to-move JSON file")
    entries = doc.get("topics")
    if not isinstance(entries, list) or not entries:
        raise ToolError(f'{path}: "topics" must be a non-empty list of {{"topic": NAME}}')
    names = []
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("topic"), str) or not entry["topic"]:
            raise ToolError(f'{path}: {entry!r} is not {{"topic": NAME}}')
        names.append(entry["topic"])
    return list(dict.fromkeys(names))


def read_reassignment(path: str) -> Plan:
    """A reassignment JSON file as (topic, partition) -> replicas; ToolError naming a bad entry."""
    doc = _load_json(path, "reassignment JSON file")
    entries = doc.get("partitions")
    if not isinstance(entries, list) or not entries:
        raise ToolError(f'{path}: "partitions" must be a non-empty list')
    plan: Plan = {}
    for entry in entries:
        if not isinstance(entry, dict):
            raise ToolError(f"{path}: {entry!r} is not an object")
        topic, partition, replicas = entry.get("topic"), entry.get("partition"), entry.get("replicas")
        if not isinstance(topic, str) or not topic or type(partition) is not int or partition < 0:
            raise ToolError(f'{path}: {entry!r} needs "topic" (a name) and "partition" (an integer >= 0)')
        if (not isinstance(replicas, list) or not replicas
                or not all(type(b) is int and b >= 0 for b in replicas)):
            raise ToolError(f'{path}: {topic}-{partition}: "replicas" must be a non-empty list of broker ids')
        if len(set(replicas)) != len(replicas):
            raise ToolError(f"{path}: {topic}-{partition}: duplicate broker ids in replicas {replicas}")
        log_dirs = entry.get("log_dirs")
        if log_dirs is not None:
            if not isinstance(log_dirs, list) or len(log_dirs) != len(replicas):
                raise ToolError(f'{path}: {topic}-{partition}: "log_dirs" must list one entry per replica')
            if any(d != "any" for d in log_dirs):
                raise ToolError(f'{path}: {topic}-{partition}: log_dirs other than "any" are not supported here; '
                                "move replicas between log dirs with AlterReplicaLogDirs")
        if (topic, partition) in plan:
            raise ToolError(f"{path}: {topic}-{partition} appears twice")
        plan[(topic, partition)] = list(replicas)
    return plan


def reassignment_json(plan: Plan) -> str:
    return json.dumps({"version": VERSION, "partitions": [
        {"topic": t, "partition": p, "replicas": list(r), "log_dirs": ["any"] * len(r)}
        for (t, p), r in sorted(plan.items())]})


# --- cluster reads ---

def current_assignment(admin, topics) -> Plan:
    """(topic, partition) -> replicas of ``topics`` (None: every topic), from Metadata."""
    found: Plan = {}
    for topic in admin.describe_topics(sorted(topics) if topics is not None else None):
        if topic.get("error_code"):
            raise ToolError(f"topic {topic['name']!r}: {_error_name(topic['error_code'])}")
        for partition in topic["partitions"]:
            found[(topic["name"], partition["partition_index"])] = list(partition["replica_nodes"])
    return found


def _error_name(code: int) -> str:
    from kafka.errors import for_code
    return for_code(code).__name__


def _broker_racks(admin) -> dict[int, str | None]:
    return {b["broker_id"]: b.get("rack") or None for b in admin.describe_cluster()["brokers"]}


def _brokers(admin) -> list[int]:
    return sorted(_broker_racks(admin))


# --- --generate ---

def generate(conn: Connection, topics_file: str, broker_list: str, out: TextIO, rack_aware: bool = True) -> None:
    """Kafka's --generate: a fresh assignment over ``broker_list``, rack-aware (AdminUtils) when the brokers
    have racks (``broker.rack``); as in Kafka, brokers with and without racks mixed are refused unless
    ``rack_aware`` is off (--disable-rack-aware)."""
    topics = read_topics_to_move(topics_file)
    try:
        brokers = sorted({int(b) for b in broker_list.split(",") if b.strip()})
    except ValueError:
        raise ToolError(f"--broker-list {broker_list!r} is not a comma-separated list of broker ids") from None
    if not brokers:
        raise ToolError("--broker-list names no broker")
    with closing(conn.admin()) as admin:
        racks = _broker_racks(admin)
        unknown = [b for b in brokers if b not in racks]
        if unknown:
            raise ToolError(f"--broker-list names brokers {unknown} that are not in the cluster "
                            f"(live: {sorted(racks)})")
        current = current_assignment(admin, topics)
    proposed: Plan = {}
    for topic in topics:
        partitions = sorted(p for t, p in current if t == topic)
        replication_factor = len(current[(topic, 0)])
        try:
            replicas = assign_replicas({b: racks[b] for b in brokers}, len(partitions), replication_factor,
                                       rack_aware=rack_aware)
        except MetadataError as exc:
            raise ToolError(f"topic {topic!r}: {exc.message}") from None
        proposed.update({(topic, p): r for p, r in zip(partitions, replicas)})
    print("Current partition replica assignment", file=out)
    print(reassignment_json(current), file=out)
    print("", file=out)
    print("Proposed partition reassignment configuration", file=out)
    print(reassignment_json(proposed), file=out)


# --- throttles ---

def _throttle_lists(current: Plan, plan: Plan) -> dict[str, dict[str, set[str]]]:
    """topic -> {leader replicas, follower replicas} ("partition:broker") for the partitions that move."""
    lists: dict[str, dict[str, set[str]]] = {}
    for key, target in plan.items():
        existing = current.get(key, [])
        if list(existing) == list(target):
            continue
        topic_lists = lists.setdefault(key[0], {LEADER_REPLICAS: set(), FOLLOWER_REPLICAS: set()})
        topic_lists[LEADER_REPLICAS].update(f"{key[1]}:{b}" for b in existing)
        topic_lists[FOLLOWER_REPLICAS].update(f"{key[1]}:{b}" for b in target if b not in existing)
    return lists


def _alter(admin, resources: list[ConfigResource], what: str) -> None:
    if not resources:
        return
    results = admin.alter_configs(resources, raise_on_unknown=False, incremental=True)
    for by_name in (results or {}).values():
        for name, error in by_name.items():
            if error is not None and getattr(error, "errno", 0):
                raise ToolError(f"{what} on {name}: {error.__name__ if isinstance(error, type) else error}")


def set_throttles(admin, current: Plan, plan: Plan, rate: int, out: TextIO) -> None:
    brokers = sorted({b for key in plan for b in (*current.get(key, ()), *plan[key])})
    _alter(admin, [ConfigResource(ConfigResourceType.BROKER, str(b),
                                  configs={name: (AlterConfigOp.SET, str(rate)) for name in RATE_CONFIGS})
                   for b in brokers], "setting the replication throttle rate")
    lists = _throttle_lists(current, plan)
    _alter(admin, [ConfigResource(ConfigResourceType.TOPIC, topic, configs={
        name: (AlterConfigOp.SET, ",".join(sorted(values)) or "") for name, values in sides.items() if values})
        for topic, sides in sorted(lists.items())], "setting the throttled replicas")
    print(f"Warning: You must run --verify periodically, until the reassignment completes, to ensure the "
          f"throttle is removed. The inter-broker throttle limit was set to {rate} B/s on brokers {brokers}.",
          file=out)


def clear_throttles(admin, plan: Plan, out: TextIO) -> None:
    brokers = _brokers(admin)
    _alter(admin, [ConfigResource(ConfigResourceType.BROKER, str(b),
                                  configs={name: (AlterConfigOp.DELETE, None) for name in RATE_CONFIGS})
                   for b in brokers], "removing the replication throttle rate")
    topics = sorted({t for t, _ in plan})
    _alter(admin, [ConfigResource(ConfigResourceType.TOPIC, topic, configs={
        name: (AlterConfigOp.DELETE, None) for name in (LEADER_REPLICAS, FOLLOWER_REPLICAS)}) for topic in topics],
        "removing the throttled replicas")
    print(f"Clearing broker-level throttles on brokers {','.join(map(str, brokers))}", file=out)
    print(f"Clearing topic-level throttles on topics {','.join(topics)}", file=out)


# --- --execute / --verify / --cancel ---

def _submit(admin, targets: dict[tuple[str, int], list[int] | None]) -> dict:
    results = admin.alter_partition_reassignments(
        {TopicPartition(t, p): target for (t, p), target in targets.items()})
    return {(tp.topic, tp.partition): error for tp, error in results.items() if error is not None}


def _start(admin, plan: Plan) -> None:
    """Submit ``plan``; a ToolError naming each partition the controller refused and why."""
    failed = _submit(admin, plan)
    if failed:
        raise ToolError("reassignment refused for " + "; ".join(
            f"{t}-{p}: {e.__name__}" for (t, p), e in sorted(failed.items())))


def execute(conn: Connection, reassignment_file: str, throttle: int | None, out: TextIO) -> None:
    plan = read_reassignment(reassignment_file)
    with closing(conn.admin()) as admin:
        current = current_assignment(admin, {t for t, _ in plan})
        missing = sorted(k for k in plan if k not in current)
        if missing:
            raise ToolError("unknown partitions: " + ", ".join(f"{t}-{p}" for t, p in missing))
        print("Current partition replica assignment\n", file=out)
        print(reassignment_json({k: current[k] for k in plan}), file=out)
        print("\nSave this to use as the --reassignment-json-file option during rollback", file=out)
        if throttle is not None:
            set_throttles(admin, current, plan, throttle, out)
        _start(admin, plan)
    print("Successfully started partition reassignments for "
          + ",".join(f"{t}-{p}" for t, p in sorted(plan)), file=out)


def verify(conn: Connection, reassignment_file: str, preserve_throttles: bool, out: TextIO) -> bool:
    """Report each partition; True (and throttles removed unless preserved) once all are complete."""
    plan = read_reassignment(reassignment_file)
    with closing(conn.admin()) as admin:
        ongoing = {(tp.topic, tp.partition) for tp in admin.list_partition_reassignments(
            [TopicPartition(t, p) for t, p in plan])}
        current = current_assignment(admin, {t for t, _ in plan})
        print("Status of partition reassignment:", file=out)
        complete = True
        for (topic, partition), target in sorted(plan.items()):
            name = f"{topic}-{partition}"
            if (topic, partition) in ongoing:
                complete = False
                print(f"Reassignment of partition {name} is still in progress.", file=out)
            elif current.get((topic, partition)) == target:
                print(f"Reassignment of partition {name} is completed.", file=out)
            else:
                complete = False
                print(f"There is no active reassignment of partition {name}, but replica set is "
                      f"{current.get((topic, partition))} rather than {target}.", file=out)
        if complete and not preserve_throttles:
            clear_throttles(admin, plan, out)
    return complete


def cancel(conn: Connection, reassignment_file: str, preserve_throttles: bool, out: TextIO) -> None:
    plan = read_reassignment(reassignment_file)
    with closing(conn.admin()) as admin:
        failed = _submit(admin, {key: None for key in plan})
        cancelled = sorted(k for k in plan if k not in failed)
        print("Successfully cancelled partition reassignments for "
              + (",".join(f"{t}-{p}" for t, p in cancelled) or "no partition"), file=out)
        for (t, p), error in sorted(failed.items()):
            print(f"{t}-{p}: {error.__name__}", file=out)
        if not preserve_throttles:
            clear_throttles(admin, plan, out)


# --- decommission ---

def drain_plan(current: Plan, broker: int, live: list[int]) -> Plan:
    """Each partition on ``broker`` with that replica replaced by the live broker holding the fewest replicas
    among those not holding the partition (lowest id on ties), in the same position."""
    others = [b for b in live if b != broker]
    load = {b: 0 for b in others}
    for replicas in current.values():
        for b in replicas:
            if b in load:
                load[b] += 1
    plan: Plan = {}
    for key, replicas in sorted(current.items()):
        if broker not in replicas:
            continue
        candidates = [b for b in others if b not in replicas]
        if not candidates:
            raise ToolError(f"{key[0]}-{key[1]} has replicas {replicas}: no other live broker can take broker "
                            f"{broker}'s replica (live brokers {live}); add a broker first")
        chosen = min(candidates, key=lambda b: (load[b], b))
        load[chosen] += 1
        plan[key] = [chosen if b == broker else b for b in replicas]
    return plan


def decommission(conn: Connection, broker: int, *, throttle: int | None, timeout_s: float, out: TextIO) -> None:
    started = time.monotonic()
    with closing(conn.admin()) as admin:
        live = _brokers(admin)
        current = current_assignment(admin, None)
        plan = drain_plan(current, broker, live)
        if not plan:
            print(f"Broker {broker} hosts no replica; nothing to move.", file=out)
            return
        if broker not in live:
            print(f"Broker {broker} is not running: its replicas move from their other in-sync replicas.", file=out)
        if throttle is not None:
            set_throttles(admin, current, plan, throttle, out)
        _start(admin, plan)
        print(f"Moving {len(plan)} replicas off broker {broker}...", file=out, flush=True)
        deadline = started + timeout_s
        while True:
            ongoing = admin.list_partition_reassignments()
            left = [k for k, r in current_assignment(admin, None).items() if broker in r]
            if not ongoing and not left:
                break
            if time.monotonic() > deadline:
                raise ToolError(f"broker {broker} still hosts {len(left)} replicas after {timeout_s:g} s "
                                f"({len(ongoing)} reassignments in progress); run it again to keep waiting")
            time.sleep(0.5)
        if throttle is not None:
            clear_throttles(admin, plan, out)
    moved_to: dict[int, int] = {}
    for key, target in plan.items():
        for b in target:
            if b not in current[key]:
                moved_to[b] = moved_to.get(b, 0) + 1
    print(f"Moved {len(plan)} replicas off broker {broker} in {time.monotonic() - started:.1f} s ("
          + ", ".join(f"{n} to broker {b}" for b, n in sorted(moved_to.items()))
          + f"). Broker {broker} hosts no replica now; it can be stopped.", file=out)
