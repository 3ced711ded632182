"""``pylog``: topics, produce, consume and bench against any Kafka-protocol broker.

Usage::

    pylog [--bootstrap-server HOST:PORT] [--connect-timeout-ms MS] [--command-config FILE] COMMAND ...

    pylog topics create NAME [--partitions N] [--replication-factor N] [--config k=v ...] [--if-not-exists]
    pylog topics list [--all]
    pylog topics describe [NAME ...] [--all-configs] [--format text|json]
    pylog topics delete NAME ... [--if-exists]
    pylog produce TOPIC [--key K | --key-separator SEP] [--header k=v ...] [--partition P]
                        [--acks 0|1|all] [--compression none|gzip|snappy|lz4|zstd]
                        [--value V [--count N]] [--progress]
    pylog consume TOPIC [--from-beginning | --offset N] [--partition P] [--max-messages N]
                        [--timeout-ms T] [--group G] [--print-key] [--print-headers]
                        [--print-offset] [--format text|json]
                        [--isolation-level read_committed|read_uncommitted] [--progress]
    pylog groups list [--format text|json]
    pylog groups describe GROUP ... [--format text|json]
    pylog groups reset-offsets GROUP (--topic T[:P,...] ... | --all-topics)
                        (--to-earliest | --to-latest | --to-datetime ISO8601 | --to-offset N | --shift-by N)
                        [--dry-run | --execute] [--format text|json]
    pylog groups delete GROUP ...
    pylog top [--interval S] [--iterations N] [--group G ...] [--format text|json]
    pylog transactions list [--state STATE ...] [--format text|json]
    pylog transactions describe TRANSACTIONAL-ID ... [--format text|json]
    pylog log-dirs describe [--topic-list T1,T2] [--broker-list 0,1]
    pylog acls add|remove (--allow-principal|--deny-principal) User:NAME --operation OP ...
                        (--topic T | --group G | --transactional-id ID | --cluster | --subject S | --registry)
                        [--resource-pattern-type prefixed]
    pylog acls list [--topic T | --group G | --transactional-id ID | --cluster | --subject S | --registry]
                    [--principal P] [--format json]
    pylog users add NAME --password PW [--mechanism SCRAM-SHA-256|SCRAM-SHA-512] [--iterations N]
    pylog users list [--format text|json]
    pylog users remove NAME [--mechanism M]
    pylog quotas set (--user U | --user-default) [--client-id C | --client-default] [--producer-byte-rate N]
                        [--consumer-byte-rate N] [--request-percentage P] [--remove KEY ...]
    pylog quotas describe [--user U] [--client-id C] [--format text|json]
    pylog schemas list|get|register|delete|compat|config|mode ... [--url URL] [--command-config FILE]
    pylog bench [--records N] [--record-size B] [--rounds R] [--brokers pylog,tansu]
                [--skip-kafka-python] [--output FILE] [--progress]
    pylog bench --workload groups [--members N] [--session-timeout-ms MS] [--cycles C] [--commits N] ...
    pylog bench --workload cluster [--cluster-records N] [--rounds R] [--failover-rounds F] ...
    pylog bench --workload spark-latency [--latency-records N] [--interval-ms MS]
    pylog bench --workload spark-vs-kafka [--records N] [--rounds R] [--matrix-records N] [--headline-only] [--quick]
    pylog cluster up --brokers N --data-dir DIR [--base-port P] [--config k=v ...] [--racks a,b,c]
    pylog reassign --generate --topics-to-move-json-file FILE --broker-list 0,1,2
    pylog reassign (--execute [--throttle B/S] | --verify | --cancel) --reassignment-json-file FILE
    pylog cluster decommission --broker N [--throttle B/S] [--timeout-s S]
    pylog leader-election --election-type PREFERRED|UNCLEAN
                        (--topic T --partition P | --all-topic-partitions | --path-to-json-file FILE)

``--bootstrap-server`` may be given before or after the command; its default is
``$PYLOG_BOOTSTRAP_SERVERS``, else ``127.0.0.1:9092``.

Exit status: 0 on success, 1 for an expected failure (unknown topic, broker not
reachable, broker refused the request; one line on stderr naming the problem),
2 for bad usage (argparse's message names the option), 130 on Ctrl-C. ``pylog schemas`` exits 1 only when
``compat`` finds a schema incompatible and 2 on any error (the registry's error_code and message).
``pylog reassign --verify`` exits 3 while a partition's reassignment is not complete.

See :mod:`broker_sim.tools.topics`, :mod:`broker_sim.tools.console`, :mod:`broker_sim.tools.schemas`,
:mod:`broker_sim.tools.groups`, :mod:`broker_sim.tools.transactions`, the :mod:`broker_sim.bench` package
and :mod:`broker_sim.local.cluster` for each command's manual.
"""

import argparse
import itertools
import os
import sys
from typing import Sequence

from kafka.errors import KafkaError

from broker_sim.bench import groups as bench_groups
from broker_sim.bench import kafka_start as bench_kafka_start
from broker_sim.bench import partitions as bench_partitions
from broker_sim.bench import registry as bench_registry
from broker_sim.bench import spark_latency as bench_spark_latency
from broker_sim.bench import spark_vs_kafka as bench_spark_vs_kafka
from broker_sim.bench import replication as bench_replication
from broker_sim.bench import runner as bench
from broker_sim.bench import schema_validation as bench_schema_validation
from broker_sim.bench import security as bench_security
from broker_sim.bench import start as bench_start
from broker_sim.local import cluster as local_cluster
from broker_sim.progress import Progress, progress_wanted
from broker_sim.tools import console, election, groups, reassign, schemas, security, top, topics, transactions
from broker_sim.tools import log_dirs
from broker_sim.tools.clients import Connection, default_bootstrap_servers
from broker_sim.arguments import key_value, non_negative_int, positive_float, positive_int
from broker_sim.protocol.client import principal_for
from broker_sim.tools.errors import ToolError, authorization_hint

PROG = "pylog"


def topic_partitions(text: str) -> tuple[str, list[int] | None]:
    """argparse type for ``TOPIC`` or ``TOPIC:P[,P...]``."""
    try:
        return groups.parse_topic_partitions(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def iso_datetime(text: str):
    """argparse type for an ISO 8601 date-time."""
    try:
        return groups.parse_datetime(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an ISO 8601 date-time such as 2026-01-31T12:00:00Z, got {text!r}") from None


def _connection_options(on_subcommand: bool) -> argparse.ArgumentParser:
    """Options every command shares. On subcommands their default is SUPPRESS,
    so a value given before the command is not overwritten by a default."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT",
                        default=argparse.SUPPRESS if on_subcommand else default_bootstrap_servers(),
                        help="broker address (default: $PYLOG_BOOTSTRAP_SERVERS or 127.0.0.1:9092)")
    parser.add_argument("--connect-timeout-ms", type=positive_int, metavar="MS",
                        default=argparse.SUPPRESS if on_subcommand else 10_000,
                        help="how long to wait for the broker to answer (default: 10000)")
    parser.add_argument("--command-config", metavar="FILE", default=argparse.SUPPRESS if on_subcommand else None,
                        help="Kafka client properties: security.protocol, sasl.mechanism, sasl.jaas.config (or "
                             "sasl.username/sasl.password), ssl.truststore.location, ...")
    return parser


def build_parser() -> argparse.ArgumentParser:
    common = _connection_options(on_subcommand=True)
    progress = argparse.ArgumentParser(add_help=False)
    progress.add_argument("--progress", action="store_true",
                          help="print progress lines on stderr even when it is not a terminal")

    parser = argparse.ArgumentParser(prog=PROG, parents=[_connection_options(on_subcommand=False)],
                                     description="Command-line tools for Kafka-protocol brokers.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    topics_parser = commands.add_parser("topics", help="create, list, describe, delete topics")
    topic_commands = topics_parser.add_subparsers(dest="topics_command", required=True, metavar="ACTION")
    create = topic_commands.add_parser("create", parents=[common], help="create a topic")
    create.add_argument("name")
    create.add_argument("--partitions", type=positive_int, help="default: the broker's num.partitions")
    create.add_argument("--replication-factor", type=positive_int,
                        help="default: the broker's default.replication.factor")
    create.add_argument("--config", type=key_value, action="append", default=[], metavar="KEY=VALUE",
                        help="topic config, repeatable, e.g. --config cleanup.policy=compact")
    create.add_argument("--if-not-exists", action="store_true", help="succeed if the topic exists")
    listing = topic_commands.add_parser("list", parents=[common], help="list topic names")
    listing.add_argument("--all", action="store_true", help="include internal topics")
    describe = topic_commands.add_parser("describe", parents=[common],
                                         help="partitions, leaders, replicas, configs, offsets")
    describe.add_argument("names", nargs="*", metavar="NAME", help="default: all non-internal topics")
    describe.add_argument("--all-configs", action="store_true", help="show every config, not just overrides")
    describe.add_argument("--format", choices=["text", "json"], default="text")
    delete = topic_commands.add_parser("delete", parents=[common], help="delete topics")
    delete.add_argument("names", nargs="+", metavar="NAME")
    delete.add_argument("--if-exists", action="store_true", help="succeed if a topic does not exist")

    produce = commands.add_parser("produce", parents=[common, progress],
                                  help="send stdin lines (or --value) as records")
    produce.add_argument("topic")
    keys = produce.add_mutually_exclusive_group()
    keys.add_argument("--key", help="key for every record")
    keys.add_argument("--key-separator", metavar="SEP", help="split each line into KEY SEP VALUE")
    produce.add_argument("--header", type=key_value, action="append", default=[], metavar="KEY=VALUE",
                         help="header for every record, repeatable")
    produce.add_argument("--partition", type=non_negative_int, help="default: the client's partitioner")
    produce.add_argument("--acks", choices=sorted(console.ACKS), default="1")
    produce.add_argument("--compression", choices=["none", "gzip", "snappy", "lz4", "zstd"], default="none")
    produce.add_argument("--value", help="send this value instead of reading stdin")
    produce.add_argument("--count", type=positive_int, help="with --value: send it this many times")

    consume = commands.add_parser("consume", parents=[common, progress], help="print records of a topic")
    consume.add_argument("topic")
    start = consume.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true")
    start.add_argument("--offset", type=non_negative_int, help="start each selected partition at N")
    consume.add_argument("--partition", type=non_negative_int, help="default: all partitions")
    consume.add_argument("--max-messages", type=positive_int, help="stop after N records")
    consume.add_argument("--timeout-ms", type=positive_int, help="stop after T ms without a record")
    consume.add_argument("--group", help="consumer group: use and commit its offsets")
    consume.add_argument("--print-key", action="store_true")
    consume.add_argument("--print-headers", action="store_true")
    consume.add_argument("--print-offset", action="store_true")
    consume.add_argument("--format", choices=["text", "json"], default="text")
    consume.add_argument("--isolation-level", choices=["read_uncommitted", "read_committed"],
                         default="read_uncommitted")

    groups_parser = commands.add_parser("groups", help="list, describe, reset offsets of, delete consumer groups")
    group_commands = groups_parser.add_subparsers(dest="groups_command", required=True, metavar="ACTION")
    group_list = group_commands.add_parser("list", parents=[common], help="group ids, states, protocol types")
    group_list.add_argument("--format", choices=["text", "json"], default="text")
    group_describe = group_commands.add_parser("describe", parents=[common],
                                               help="members, assignments, committed offsets and lag")
    group_describe.add_argument("groups", nargs="+", metavar="GROUP")
    group_describe.add_argument("--format", choices=["text", "json"], default="text")
    reset = group_commands.add_parser("reset-offsets", parents=[common],
                                      help="plan or commit new offsets for an inactive group")
    reset.add_argument("group", metavar="GROUP")
    scope = reset.add_mutually_exclusive_group(required=True)
    scope.add_argument("--topic", type=topic_partitions, action="append", metavar="TOPIC[:P,...]",
                       help="topic, optionally with partitions, repeatable")
    scope.add_argument("--all-topics", action="store_true", help="every partition the group has an offset for")
    target = reset.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_true")
    target.add_argument("--to-latest", action="store_true")
    target.add_argument("--to-datetime", type=iso_datetime, metavar="ISO8601",
                        help="first offset at or after this time, e.g. 2026-01-31T12:00:00Z")
    target.add_argument("--to-offset", type=non_negative_int, metavar="N")
    target.add_argument("--shift-by", type=int, metavar="N", help="move the committed offset by N (may be < 0)")
    mode = reset.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="print the plan only (the default)")
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    reset.add_argument("--format", choices=["text", "json"], default="text")
    group_delete = group_commands.add_parser("delete", parents=[common], help="delete inactive groups")
    group_delete.add_argument("groups", nargs="+", metavar="GROUP")

    top_parser = commands.add_parser("top", parents=[common],
                                     help="live consumer-group lag and produce/commit rates (Ctrl-C stops)")
    top_parser.add_argument("--interval", type=positive_float, default=2.0, metavar="S",
                            help="seconds between refreshes (default 2)")
    top_parser.add_argument("--iterations", type=positive_int, default=None, metavar="N",
                            help="stop after N refreshes (default: until Ctrl-C)")
    top_parser.add_argument("--group", action="append", default=[], metavar="G", help="only this group, repeatable")
    top_parser.add_argument("--format", choices=["text", "json"], default="text")

    txn_parser = commands.add_parser("transactions", help="list and describe transactions")
    txn_commands = txn_parser.add_subparsers(dest="transactions_command", required=True, metavar="ACTION")
    txn_list = txn_commands.add_parser("list", parents=[common], help="transactional ids, producer ids, states")
    txn_list.add_argument("--state", action="append", metavar="STATE",
                          help="only transactions in this state (e.g. Ongoing), repeatable")
    txn_list.add_argument("--format", choices=["text", "json"], default="text")
    txn_describe = txn_commands.add_parser("describe", parents=[common],
                                           help="state, producer epoch, timeout, start time and partitions")
    txn_describe.add_argument("transactional_ids", nargs="+", metavar="TRANSACTIONAL-ID")
    txn_describe.add_argument("--format", choices=["text", "json"], default="text")

    log_dirs_parser = commands.add_parser("log-dirs", help="brokers' log directories (kafka-log-dirs.sh)")
    log_dirs_commands = log_dirs_parser.add_subparsers(dest="log_dirs_command", required=True, metavar="ACTION")
    log_dirs_describe = log_dirs_commands.add_parser("describe", parents=[common],
                                                     help="each log dir's partitions, sizes and offset lags (JSON)")
    log_dirs_describe.add_argument("--topic-list", default="", metavar="T1,T2",
                                   help="only these topics' partitions (default: all)")
    log_dirs_describe.add_argument("--broker-list", default="", metavar="0,1",
                                   help="only these brokers (default: every broker of the cluster)")

    acls_parser = commands.add_parser("acls", help="add, list and remove ACLs (kafka-acls.sh)")
    acl_commands = acls_parser.add_subparsers(dest="acls_command", required=True, metavar="ACTION")
    for action, text in (("add", "create ACL bindings"), ("list", "list ACL bindings"),
                         ("remove", "delete ACL bindings")):
        acl_parser = acl_commands.add_parser(action, parents=[common], help=text)
        resource = acl_parser.add_mutually_exclusive_group()
        resource.add_argument("--topic", metavar="T")
        resource.add_argument("--group", metavar="G")
        resource.add_argument("--transactional-id", metavar="ID")
        resource.add_argument("--cluster", action="store_true")
        resource.add_argument("--subject", metavar="S", help="a Schema Registry subject (prefixed with "
                              "--resource-pattern-type prefixed)")
        resource.add_argument("--registry", action="store_true",
                              help="the Schema Registry's global config and mode")
        if action == "list":
            acl_parser.add_argument("--principal", metavar="User:NAME", help="only this principal's bindings")
            acl_parser.add_argument("--format", choices=["text", "json"], default="text")
            continue
        acl_parser.add_argument("--allow-principal", action="append", metavar="User:NAME")
        acl_parser.add_argument("--deny-principal", action="append", metavar="User:NAME")
        acl_parser.add_argument("--allow-host", action="append", metavar="HOST", help="default: * (any host)")
        acl_parser.add_argument("--deny-host", action="append", metavar="HOST", help="default: * (any host)")
        acl_parser.add_argument("--operation", action="append", metavar="OP", type=str.upper,
                                choices=["READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION",
                                         "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "ALL"])
        acl_parser.add_argument("--resource-pattern-type", choices=["literal", "prefixed"], default="literal",
                                type=str.lower)

    users_parser = commands.add_parser("users", help="SCRAM users (AlterUserScramCredentials, KIP-554)")
    user_commands = users_parser.add_subparsers(dest="users_command", required=True, metavar="ACTION")
    user_add = user_commands.add_parser("add", parents=[common], help="set a user's SCRAM credentials")
    user_add.add_argument("name")
    user_add.add_argument("--password", required=True)
    user_add.add_argument("--mechanism", action="append", choices=["SCRAM-SHA-256", "SCRAM-SHA-512"],
                          help="repeatable; default: both")
    user_add.add_argument("--iterations", type=positive_int, default=4096, help="4096-16384 (default 4096)")
    user_list = user_commands.add_parser("list", parents=[common], help="users and their SCRAM mechanisms")
    user_list.add_argument("--format", choices=["text", "json"], default="text")
    user_remove = user_commands.add_parser("remove", parents=[common], help="delete a user's SCRAM credentials")
    user_remove.add_argument("name")
    user_remove.add_argument("--mechanism", action="append", choices=["SCRAM-SHA-256", "SCRAM-SHA-512"],
                             help="repeatable; default: both")

    quotas_parser = commands.add_parser("quotas", help="client quotas (kafka-configs.sh --entity-type users|clients)")
    quota_commands = quotas_parser.add_subparsers(dest="quotas_command", required=True, metavar="ACTION")
    quota_set = quota_commands.add_parser("set", parents=[common], help="set or remove quotas of an entity")
    quota_describe = quota_commands.add_parser("describe", parents=[common], help="list quotas")
    for quota_parser in (quota_set, quota_describe):
        quota_parser.add_argument("--user", metavar="NAME")
        quota_parser.add_argument("--client-id", metavar="ID")
    quota_set.add_argument("--user-default", action="store_true", help="the default user (<default>)")
    quota_set.add_argument("--client-default", action="store_true", help="the default client id (<default>)")
    for key, option in security.QUOTA_OPTIONS:
        quota_set.add_argument(option, dest=key, type=float, metavar="N")
    quota_set.add_argument("--remove", action="append", metavar="KEY",
                           choices=[key for key, _ in security.QUOTA_OPTIONS])
    quota_describe.add_argument("--format", choices=["text", "json"], default="text")

    bench_parser = commands.add_parser("bench", parents=[progress],
                                       help="throughput, start-time and group benchmarks, pylog vs Tansu (JSON)")
    bench.add_arguments(bench_parser)
    bench_groups.add_arguments(bench_parser)
    bench_replication.add_arguments(bench_parser)
    bench_partitions.add_arguments(bench_parser)
    bench_kafka_start.add_arguments(bench_parser)

    schemas_parser = commands.add_parser("schemas", help="a Schema Registry's subjects, schemas, compatibility, "
                                                         "config and mode (REST API v1)")
    schemas.add_arguments(schemas_parser)

    cluster_parser = commands.add_parser("cluster", help="run a local ZooKeeper and N brokers (development, tests)")
    cluster_commands = cluster_parser.add_subparsers(dest="cluster_command", required=True, metavar="ACTION")
    cluster_up = cluster_commands.add_parser(
        "up", help="start ZooKeeper and N brokers on 127.0.0.1 in the foreground; Ctrl-C stops them")
    local_cluster.add_arguments(cluster_up)
    decommission = cluster_commands.add_parser(
        "decommission", parents=[common], help="move every replica off a broker (reassignment), wait, report")
    decommission.add_argument("--broker", type=non_negative_int, required=True, help="the broker to drain")
    decommission.add_argument("--throttle", type=positive_int, metavar="B/S", default=None,
                              help="replication throttle while moving, bytes/s (removed once done)")
    decommission.add_argument("--timeout-s", type=positive_float, default=600.0,
                              help="how long to wait for the moves (default: 600)")

    reassign_parser = commands.add_parser("reassign", parents=[common],
                                          help="move partition replicas (kafka-reassign-partitions.sh)")
    action = reassign_parser.add_mutually_exclusive_group(required=True)
    for name, text in (("--generate", "propose an assignment of --topics-to-move-json-file over --broker-list"),
                       ("--execute", "start the reassignment of --reassignment-json-file"),
                       ("--verify", "report progress; once complete, remove the throttles"),
                       ("--cancel", "cancel the reassignments of --reassignment-json-file")):
        action.add_argument(name, action="store_true", help=text)
    reassign_parser.add_argument("--topics-to-move-json-file", metavar="FILE",
                                 help='{"version":1,"topics":[{"topic":"t"}]} (with --generate)')
    reassign_parser.add_argument("--broker-list", metavar="0,1,2", help="brokers to place replicas on (--generate)")
    reassign_parser.add_argument("--reassignment-json-file", metavar="FILE",
                                 help='{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}]}')
    reassign_parser.add_argument("--throttle", type=positive_int, metavar="B/S", default=None,
                                 help="replication throttle, bytes/s, while the reassignment runs (--execute)")
    reassign_parser.add_argument("--disable-rack-aware", action="store_true",
                                 help="--generate ignores the brokers' racks (broker.rack)")
    reassign_parser.add_argument("--preserve-throttles", action="store_true",
                                 help="--verify / --cancel leave the throttles in place")

    election_parser = commands.add_parser("leader-election", parents=[common],
                                          help="preferred or unclean leader elections (kafka-leader-election.sh)")
    election.add_arguments(election_parser)
    return parser


def _run(args, parser: argparse.ArgumentParser, stdin, out, err) -> int:
    if args.command == "cluster" and args.cluster_command == "up":
        return local_cluster.run_from_args(args, out=out, err=err)
    if args.command == "reassign":
        _check_reassign_args(args, parser)
    if args.command == "schemas":
        return schemas.run_from_args(args, out=out, err=err)
    if args.command == "bench":
        runner = {"groups": bench_groups, "cluster": bench_replication, "security": bench_security,
                  "schema-validation": bench_schema_validation, "registry": bench_registry,
                  "start": bench_start, "spark-latency": bench_spark_latency,
                  "partitions": bench_partitions, "kafka-start": bench_kafka_start,
                  "spark-vs-kafka": bench_spark_vs_kafka}.get(args.workload, bench)
        return runner.run_from_args(args, out=out, err=err)
    conn = Connection(args.bootstrap_server, timeout_ms=args.connect_timeout_ms,
                      security=security.client_settings(args.command_config))
    if args.command == "cluster":
        reassign.decommission(conn, args.broker, throttle=args.throttle, timeout_s=args.timeout_s, out=out)
        return 0
    if args.command == "reassign":
        if args.generate:
            reassign.generate(conn, args.topics_to_move_json_file, args.broker_list, out,
                              rack_aware=not args.disable_rack_aware)
        elif args.execute:
            reassign.execute(conn, args.reassignment_json_file, args.throttle, out)
        elif args.verify:
            return 0 if reassign.verify(conn, args.reassignment_json_file, args.preserve_throttles, out) else 3
        else:
            reassign.cancel(conn, args.reassignment_json_file, args.preserve_throttles, out)
        return 0
    if args.command == "leader-election":
        election.elect_leaders(conn, args, out)
        return 0
    if args.command == "acls":
        {"add": security.add_acls, "list": security.list_acls, "remove": security.remove_acls}[
            args.acls_command](conn, args, out)
        return 0
    if args.command == "users":
        if args.users_command == "add":
            security.add_user(conn, args.name, args.password, args.mechanism or ["SCRAM-SHA-256", "SCRAM-SHA-512"],
                              args.iterations, out)
        elif args.users_command == "list":
            security.list_users(conn, args.format, out)
        else:
            users = args.mechanism or ["SCRAM-SHA-256", "SCRAM-SHA-512"]
            security.remove_user(conn, args.name, users, out)
        return 0
    if args.command == "quotas":
        (security.set_quotas if args.quotas_command == "set" else security.describe_quotas)(conn, args, out)
        return 0
    if args.command == "groups":
        _run_groups(args, conn, out, err)
        return 0
    if args.command == "top":
        top.run(conn, interval_s=args.interval, iterations=args.iterations, groups=args.group,
                output_format=args.format, out=out)
        return 0
    if args.command == "log-dirs":
        log_dirs.describe(conn, topics=log_dirs.parse_list(args.topic_list, "--topic-list"),
                          brokers=log_dirs.parse_list(args.broker_list, "--broker-list", int), out=out)
        return 0
    if args.command == "transactions":
        if args.transactions_command == "list":
            transactions.list_transactions(conn, states=args.state, output_format=args.format, out=out)
        else:
            transactions.describe_transactions(conn, args.transactional_ids, output_format=args.format, out=out)
        return 0
    if args.command == "topics":
        if args.topics_command == "create":
            topics.create_topic(conn, args.name, partitions=args.partitions,
                                replication_factor=args.replication_factor, configs=dict(args.config),
                                if_not_exists=args.if_not_exists, out=out)
        elif args.topics_command == "list":
            topics.list_topics(conn, include_internal=args.all, out=out)
        elif args.topics_command == "describe":
            topics.describe_topics(conn, args.names, all_configs=args.all_configs,
                                   output_format=args.format, out=out)
        else:
            topics.delete_topics(conn, args.names, if_exists=args.if_exists, out=out)
        return 0
    wants_progress = progress_wanted(args.progress, err)
    if args.command == "produce":
        if args.count is not None and args.value is None:
            parser.error("argument --count: only valid with --value")
        if args.value is not None:
            values = itertools.repeat(args.value.encode(), args.count or 1)
        else:
            values = console.stdin_values(stdin.buffer if hasattr(stdin, "buffer") else stdin)
        opts = console.ProduceOptions(
            topic=args.topic, key=args.key, headers=args.header, partition=args.partition,
            acks=args.acks, compression=args.compression, key_separator=args.key_separator)
        console.produce(conn, opts, values, Progress(f"produce {args.topic}", enabled=wants_progress,
                                                     total=args.count, stream=err), err=err)
        return 0
    opts = console.ConsumeOptions(
        topic=args.topic, from_beginning=args.from_beginning, offset=args.offset, partition=args.partition,
        max_messages=args.max_messages, timeout_ms=args.timeout_ms, group=args.group,
        print_key=args.print_key, print_headers=args.print_headers, print_offset=args.print_offset,
        output_format=args.format, isolation_level=args.isolation_level)
    console.consume(conn, opts, Progress(f"consume {args.topic}", enabled=wants_progress,
                                         total=args.max_messages, stream=err), out=out, err=err)
    return 0


def _check_reassign_args(args, parser: argparse.ArgumentParser) -> None:
    if args.generate:
        if not args.topics_to_move_json_file or not args.broker_list:
            parser.error("--generate needs --topics-to-move-json-file and --broker-list")
    elif not args.reassignment_json_file:
        parser.error("--execute, --verify and --cancel need --reassignment-json-file")
    if args.throttle is not None and not args.execute:
        parser.error("argument --throttle: only valid with --execute")


def _run_groups(args, conn: Connection, out, err) -> None:
    if args.groups_command == "list":
        groups.list_groups(conn, output_format=args.format, out=out)
    elif args.groups_command == "describe":
        groups.describe_groups(conn, args.groups, output_format=args.format, out=out)
    elif args.groups_command == "reset-offsets":
        spec = groups.ResetSpec(to_earliest=args.to_earliest, to_latest=args.to_latest,
                                to_datetime=args.to_datetime, to_offset=args.to_offset, shift_by=args.shift_by)
        groups.reset_offsets(conn, args.group, topics=args.topic or [], all_topics=args.all_topics, spec=spec,
                             execute=args.execute, output_format=args.format, out=out, err=err)
    else:
        groups.delete_groups(conn, args.groups, out=out)


def _authorization_hint(text: str, args) -> str:
    """What to grant after an authorization failure (``errors.authorization_hint``), for --command-config's
    principal."""
    if "AuthorizationFailed" not in text:
        return ""
    settings = security.client_settings(getattr(args, "command_config", None))
    return authorization_hint(text, args, principal_for(settings))


def main(argv: Sequence[str] | None = None, *, stdin=None, stdout=None, stderr=None) -> int:
    """Run ``pylog`` with *argv* (default ``sys.argv[1:]``); return the exit status.

    The streams default to the process's; tests pass their own.
    """
    stdin = stdin if stdin is not None else sys.stdin
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return _run(args, parser, stdin, out, err)
    except ToolError as exc:
        print(f"{PROG}: error: {exc}{_authorization_hint(str(exc), args)}", file=err)
        return 1
    except KafkaError as exc:
        # A broker or client error the commands do not anticipate: still one line.
        text = f"{type(exc).__name__}: {exc}"
        print(f"{PROG}: error: {text}{_authorization_hint(text, args)}", file=err)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (e.g. `pylog consume ... | head`); not an error.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
