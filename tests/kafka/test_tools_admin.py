"""Kafka's own admin tools against broker_sim and against Apache Kafka: the same commands, the same output.

Each case is data: a list of steps, each one tool and its arguments (``{bs}`` the broker's bootstrap servers,
``{topic}``, ``{user}``, ``{file}``... names of the case's own, the same on both brokers). ``both`` runs a step on
Kafka and on broker_sim at once (two JVMs) and ``normalized`` removes what is per-broker before the outputs and
exit statuses are compared:

1. topic ids, addresses, log timestamps and Java stack frames (``\tat ...``);
2. an error's message: the tool prints the exception's class and the broker's message, and the class (the
   error code) is compared, not each broker's wording;
3. Kafka 4's KIP-966 artefacts, issue #39: with ``eligible.leader.replicas.version`` finalized, Kafka's
   controller keeps a cluster-wide ``min.insync.replicas`` record (shown as a dynamic default broker config and
   in every topic's non-default configs). Both brokers serve DescribeTopicPartitions, so ``kafka-topics
   --describe`` prints each partition's (empty) ``Elr`` and ``LastKnownElr`` on both; a broker answering only
   Metadata would show ``N/A`` there and fail the comparison.

broker_sim runs in-process as node 1 (Kafka's node id), so replica lists and broker entity names agree.
"""
from __future__ import annotations

import json
import re
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from broker_sim.local.kafka import run_tool

_TOPIC_ID = re.compile(r"TopicId: \S+")
_ADDRESS = re.compile(r"127\.0\.0\.1:\d+")
_LOG_LINE = re.compile(r"^\[\d{4}-\d\d-\d\d [\d:,]+\] ", re.M)
_STACK = re.compile(r"^\s+at .*\n|^\s*\.\.\. \d+ more\n", re.M)
_ERROR = re.compile(r"((?:Exception|Error): |command : |Caused by: )[^\n]*")
_ELR_DEFAULT = re.compile(r"^  min\.insync\.replicas=1 sensitive=false synonyms=\{DYNAMIC_DEFAULT_BROKER_CONFIG:"
                          r"min\.insync\.replicas=1\}\n", re.M)
_ELR_TOPIC_CONFIG = re.compile(r"(Configs: )min\.insync\.replicas=1,?")


def normalized(text: str) -> str:
    text = _ADDRESS.sub("<address>", _TOPIC_ID.sub("TopicId: <id>", text))
    text = _STACK.sub("", _LOG_LINE.sub("[<time>] ", text))
    text = _ERROR.sub(lambda m: m.group(1) + "<message>", text)
    return _ELR_TOPIC_CONFIG.sub(r"\1", _ELR_DEFAULT.sub("", text))


@pytest.fixture(scope="module")
def pylog_node1(tmp_path_factory):
    from broker_sim.server.broker import Broker
    from broker_sim.testing.pytest_plugin import TEST_CONFIG

    broker = Broker(tmp_path_factory.mktemp("pylog-tools"), host="127.0.0.1", port=0,
                    config={**TEST_CONFIG, "schema.registry.listeners": "", "broker.id": "1"}).start()
    yield broker
    broker.stop()


def both(kafka, pylog, tool, args, names, stdin=None):
    """{"kafka": (exit status, output), "pylog": ...} of one tool run on each broker at once, normalized."""
    def run(kind, server):
        values = {**names, "bs": server.bootstrap_servers,
                  "logger": "kafka.server.KafkaApis" if kind == "kafka" else "broker_sim.server.handlers.topics"}
        result = run_tool(tool, *[a.format(**values) for a in args], input=stdin)
        return result.returncode, normalized(result.stdout + result.stderr)
    with ThreadPoolExecutor(2) as pool:
        futures = {kind: pool.submit(run, kind, server) for kind, server in (("kafka", kafka), ("pylog", pylog))}
        return {kind: future.result() for kind, future in futures.items()}


def topics(*args):
    return ("kafka-topics", ("--bootstrap-server", "{bs}") + args)


def configs(*args):
    return ("kafka-configs", ("--bootstrap-server", "{bs}") + args)


def tool(name, *args):
    return (name, ("--bootstrap-server", "{bs}") + args)


CREATE = topics("--create", "--topic", "{topic}", "--partitions", "2", "--replication-factor", "1")
PRODUCE = ("kafka-console-producer", ("--bootstrap-server", "{bs}", "--topic", "{topic}", "--property",
                                      "parse.key=true", "--property", "key.separator=:", "--property",
                                      "parse.headers=true", "--property", "headers.delimiter=|"),
           "h1:a,h2:b|k1:v1\nh1:c|k2:v2\nh1:d|k3:v3\nh1:e|k1:v4\n")
CONSUME = ("--bootstrap-server", "{bs}", "--topic", "{topic}", "--from-beginning", "--max-messages", "4",
           "--timeout-ms", "15000", "--property", "print.key=true", "--property", "print.headers=true",
           "--property", "print.partition=true", "--property", "print.offset=true")

# case name -> steps; every step's exit status and normalized output must be Kafka's
CASES = {
    "kafka-topics create, describe, alter, list, delete": [
        topics("--create", "--topic", "{topic}", "--partitions", "3", "--config", "cleanup.policy=compact",
               "--config", "retention.ms=1000"),
        topics("--describe", "--topic", "{topic}"),
        topics("--create", "--topic", "{topic}"),
        topics("--create", "--topic", "{other}", "--partitions", "0"),
        topics("--create", "--topic", "{other}", "--replication-factor", "3"),
        topics("--create", "--topic", "bad name {other}"),
        topics("--alter", "--topic", "{topic}", "--partitions", "2"),
        topics("--alter", "--topic", "{topic}", "--partitions", "4"),
        topics("--describe", "--topic", "{topic}", "--under-replicated-partitions"),
        topics("--describe", "--topic", "{topic}", "--at-min-isr-partitions"),
        topics("--describe", "--topic", "{topic}", "--topics-with-overrides"),
        topics("--list", "--topic", "{topic}", "--exclude-internal"),
        topics("--delete", "--topic", "{topic}"),
        topics("--describe", "--topic", "{other}"),
    ],
    "kafka-configs topics: add, delete, describe": [
        CREATE,
        configs("--alter", "--entity-type", "topics", "--entity-name", "{topic}", "--add-config",
                "retention.ms=5000,cleanup.policy=[delete,compact],max.message.bytes=2000"),
        configs("--describe", "--entity-type", "topics", "--entity-name", "{topic}"),
        configs("--alter", "--entity-type", "topics", "--entity-name", "{topic}", "--delete-config", "retention.ms"),
        configs("--alter", "--entity-type", "topics", "--entity-name", "{topic}", "--add-config", "retention.ms=x"),
        configs("--alter", "--entity-type", "topics", "--entity-name", "{topic}", "--add-config", "no.such=1"),
        configs("--describe", "--entity-type", "topics", "--entity-name", "{topic}"),
    ],
    "kafka-configs brokers: per broker and the default": [
        configs("--alter", "--entity-type", "brokers", "--entity-name", "1", "--add-config",
                "log.cleaner.threads=2"),
        configs("--describe", "--entity-type", "brokers", "--entity-name", "1"),
        configs("--alter", "--entity-type", "brokers", "--entity-name", "1", "--delete-config",
                "log.cleaner.threads"),
        configs("--alter", "--entity-type", "brokers", "--entity-default", "--add-config",
                "log.retention.ms=86400000"),
        configs("--describe", "--entity-type", "brokers", "--entity-default"),
        configs("--alter", "--entity-type", "brokers", "--entity-default", "--add-config", "log.retention.ms=x"),
        configs("--alter", "--entity-type", "brokers", "--entity-default", "--delete-config",
                "log.retention.ms"),
        configs("--describe", "--entity-type", "brokers", "--entity-default"),
    ],
    "kafka-configs broker-loggers": [
        configs("--alter", "--entity-type", "broker-loggers", "--entity-name", "1", "--add-config",
                "{logger}=DEBUG"),
        configs("--alter", "--entity-type", "broker-loggers", "--entity-name", "1", "--add-config",
                "no.such.Logger=DEBUG"),
        configs("--alter", "--entity-type", "broker-loggers", "--entity-name", "1", "--delete-config",
                "{logger}"),
    ],
    "kafka-configs users (SCRAM and quotas) and clients": [
        configs("--alter", "--entity-type", "users", "--entity-name", "{user}", "--add-config",
                "SCRAM-SHA-256=[iterations=8192,password=secret],producer_byte_rate=1024"),
        configs("--describe", "--entity-type", "users", "--entity-name", "{user}"),
        configs("--alter", "--entity-type", "users", "--entity-name", "{user}", "--entity-type", "clients",
                "--entity-name", "{client}", "--add-config", "consumer_byte_rate=2048,request_percentage=50"),
        configs("--describe", "--entity-type", "users", "--entity-name", "{user}", "--entity-type", "clients",
                "--entity-name", "{client}"),
        configs("--alter", "--entity-type", "clients", "--entity-name", "{client}", "--add-config",
                "producer_byte_rate=4096"),
        configs("--describe", "--entity-type", "clients", "--entity-name", "{client}"),
        configs("--alter", "--entity-type", "clients", "--entity-name", "{client}", "--add-config",
                "producer_byte_rate=-4"),
        configs("--alter", "--entity-type", "users", "--entity-name", "{user}", "--delete-config",
                "SCRAM-SHA-256,producer_byte_rate"),
        configs("--describe", "--entity-type", "users", "--entity-name", "{user}"),
    ],
    "kafka-configs ips (connection_creation_rate)": [
        configs("--alter", "--entity-type", "ips", "--entity-name", "{ip}", "--add-config",
                "connection_creation_rate=50"),
        configs("--describe", "--entity-type", "ips", "--entity-name", "{ip}"),
        configs("--alter", "--entity-type", "ips", "--entity-name", "{ip}", "--add-config",
                "producer_byte_rate=50"),
        configs("--alter", "--entity-type", "ips", "--entity-name", "{ip}", "--delete-config",
                "connection_creation_rate"),
        configs("--describe", "--entity-type", "ips", "--entity-name", "{ip}"),
    ],
    "kafka-acls without an authorizer": [
        tool("kafka-acls", "--list"),
        tool("kafka-acls", "--add", "--allow-principal", "User:{user}", "--operation", "Read", "--topic", "{topic}"),
    ],
    "kafka-get-offsets, kafka-delete-records, console producer and consumer": [
        CREATE,
        PRODUCE,
        ("kafka-console-consumer", CONSUME),
        ("kafka-console-consumer", CONSUME + ("--isolation-level", "read_committed")),
        tool("kafka-get-offsets", "--topic", "{topic}", "--time", "-1"),
        tool("kafka-get-offsets", "--topic", "{topic}", "--time", "-2"),
        tool("kafka-get-offsets", "--topic", "{topic}", "--time", "4102444800000"),
        tool("kafka-delete-records", "--offset-json-file", "{file}"),
        tool("kafka-get-offsets", "--topic", "{topic}", "--time", "-2"),
        # earliest local (ListOffsets v8+) after the deletion, latest tiered (v9+); not max timestamp (-3): the
        # console producer stamps each broker's records with its own clock, so which record has the largest
        # timestamp differs between the two runs (tests/conformance compares -3 on fixed timestamps)
        tool("kafka-get-offsets", "--topic", "{topic}", "--time", "-4"),
        tool("kafka-get-offsets", "--topic", "{topic}", "--time", "-5"),
    ],
    "kafka-leader-election and kafka-reassign-partitions on one node": [
        CREATE,
        tool("kafka-leader-election", "--election-type", "preferred", "--topic", "{topic}", "--partition", "0"),
        tool("kafka-leader-election", "--election-type", "unclean", "--topic", "{topic}", "--partition", "1"),
        tool("kafka-reassign-partitions", "--generate", "--topics-to-move-json-file", "{move}", "--broker-list", "1"),
        tool("kafka-reassign-partitions", "--execute", "--reassignment-json-file", "{plan}"),
        tool("kafka-reassign-partitions", "--verify", "--reassignment-json-file", "{plan}"),
        tool("kafka-reassign-partitions", "--execute", "--reassignment-json-file", "{bad_plan}"),
    ],
}


def _names(tmp_path) -> dict[str, str]:
    tag = uuid.uuid4().hex[:8]
    names = {"topic": f"tools-{tag}", "other": f"tools-other-{tag}", "user": f"user-{tag}",
             "client": f"client-{tag}", "ip": f"10.99.{int(tag[:2], 16)}.{int(tag[2:4], 16)}"}
    files = {"file": {"version": 1, "partitions": [{"topic": names["topic"], "partition": 1, "offset": 1}]},
             "move": {"version": 1, "topics": [{"topic": names["topic"]}]},
             "plan": {"version": 1, "partitions": [{"topic": names["topic"], "partition": 0, "replicas": [1]}]},
             "bad_plan": {"version": 1, "partitions": [{"topic": names["topic"], "partition": 0, "replicas": [4]}]}}
    for key, content in files.items():
        path = tmp_path / f"{key}.json"
        path.write_text(json.dumps(content))
        names[key] = str(path)
    return names


@pytest.mark.parametrize("case", CASES, ids=str)
def test_tool_output_matches_kafka(kafka_broker, pylog_node1, tmp_path, case):
    names = _names(tmp_path)
    for tool_name, args, *stdin in CASES[case]:
        got = both(kafka_broker, pylog_node1, tool_name, args, names, stdin[0] if stdin else None)
        assert got["pylog"] == got["kafka"], f"{tool_name} {' '.join(args)}:\nkafka: {got['kafka']}\n" \
                                             f"pylog: {got['pylog']}"


def test_acl_tool_with_an_authorizer_on_both(kafka_broker_factory, pylog_broker_factory, tmp_path):
    """kafka-acls add/list/remove, literal and prefixed patterns, against StandardAuthorizer and broker_sim's."""
    config = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "super.users": "User:ANONYMOUS"}
    kafka = kafka_broker_factory(config=config)
    pylog = pylog_broker_factory(config={**config, "broker.id": "1", "schema.registry.listeners": ""})
    names = _names(tmp_path)
    steps = [
        tool("kafka-acls", "--add", "--allow-principal", "User:{user}", "--operation", "Read", "--operation",
             "Describe", "--topic", "{topic}"),
        tool("kafka-acls", "--add", "--deny-principal", "User:{user}", "--operation", "Write", "--topic", "{topic}",
             "--resource-pattern-type", "prefixed"),
        tool("kafka-acls", "--add", "--allow-principal", "User:{user}", "--operation", "Read", "--group", "g-",
             "--resource-pattern-type", "prefixed"),
        tool("kafka-acls", "--list", "--topic", "{topic}"),
        tool("kafka-acls", "--list", "--topic", "{topic}", "--resource-pattern-type", "match"),
        tool("kafka-acls", "--list", "--principal", "User:{user}"),
        tool("kafka-acls", "--remove", "--force", "--allow-principal", "User:{user}", "--operation", "Read",
             "--topic", "{topic}"),
        tool("kafka-acls", "--list", "--topic", "{topic}", "--resource-pattern-type", "any"),
    ]
    for tool_name, args in steps:  # resources and their ACLs are listed in no particular order: lines compared
        got = {kind: (code, sorted(output.splitlines())) for kind, (code, output) in
               both(kafka, pylog, tool_name, args, names).items()}
        assert got["pylog"] == got["kafka"], f"{' '.join(args)}:\nkafka: {got['kafka']}\npylog: {got['pylog']}"


def test_broker_api_versions_and_features_tools_run_on_both(kafka_broker, pylog_node1):
    """kafka-broker-api-versions lists every API on both (their ranges are B1's comparison); kafka-features
    describe: Kafka 4's finalized features are issue #39, broker_sim lists none."""
    names = {}
    versions = both(kafka_broker, pylog_node1, *tool("kafka-broker-api-versions"), names)
    for kind, (code, output) in versions.items():
        assert code == 0 and "Produce(0):" in output and "ApiVersions(18):" in output, (kind, output)
    features = both(kafka_broker, pylog_node1, *tool("kafka-features", "describe"), names)
    assert features["kafka"][0] == features["pylog"][0] == 0
    assert "metadata.version" in features["kafka"][1]


def test_log_dirs_tool_describes_the_topic_on_both(kafka_broker, pylog_node1, tmp_path):
    names = _names(tmp_path)
    both(kafka_broker, pylog_node1, *CREATE, names)
    got = both(kafka_broker, pylog_node1, *tool("kafka-log-dirs", "--describe", "--topic-list", "{topic}"), names)
    shapes = {}
    for kind, (code, output) in got.items():
        assert code == 0, (kind, output)
        report = json.loads(output.strip().splitlines()[-1])
        shapes[kind] = sorted((b["broker"], p["partition"], p["size"], p["offsetLag"], p["isFuture"])
                              for b in report["brokers"] for d in b["logDirs"] for p in d["partitions"])
    assert shapes["pylog"] == shapes["kafka"]
