"""Kafka 4.1's tools for features, client-metrics subscriptions and group configs against broker_sim and Apache
Kafka: ``kafka-features describe``, ``kafka-client-metrics`` (--alter, --describe, --list, --delete, a bad
interval) and ``kafka-configs --entity-type groups`` / ``client-metrics`` (--alter --add-config/--delete-config,
--describe, --describe --all, a value out of bounds): the same exit status and lines for this test's resources.
A broker without ListConfigResources, the GROUP / CLIENT_METRICS config resources or ApiVersions' features fails
these (UnsupportedVersionException, "Unknown resource type", or no feature lines)."""
from __future__ import annotations

import re
import uuid

from test_tools_admin import pylog_node1  # noqa: F401 (a fixture)
from test_tools_groups_transactions import _run_both, _same

_EPOCH = re.compile(r"Epoch: \d+")


def _block(text: str, name: str) -> str:
    """The lines of the resource ``name``: its header line and the indented config lines under it."""
    kept, inside = [], False
    for line in text.splitlines():
        if not line.startswith(" "):
            inside = name in line
            if inside or line.startswith(("Error", "Altered", "Completed", "Deleted")):
                kept.append(line)
        elif inside:
            kept.append(line)
    return "\n".join(kept)


def test_features_describe_group_version_as_kafka_and_pylogs_own_levels(kafka_broker, pylog_node1):  # noqa: F811
    """group.version prints as on Kafka (0-1, finalized 1); transaction.version and metadata.version print
    broker_sim's levels (protocol/features.py: transactions at Kafka 3.x's level, metadata.version 4.0-IV0)."""
    got = _run_both(kafka_broker, pylog_node1, "kafka-features", {kind: ("--bootstrap-server", "{bs}", "describe")
                                                                   for kind in ("kafka", "pylog")})
    (kafka_status, kafka), (pylog_status, pylog) = got["kafka"], got["pylog"]
    assert kafka_status == pylog_status == 0, got
    kafka_lines = {line.split("\t")[0]: _EPOCH.sub("Epoch: <n>", line) for line in kafka.splitlines() if line}
    pylog_lines = {line.split("\t")[0]: _EPOCH.sub("Epoch: <n>", line) for line in pylog.splitlines() if line}
    assert pylog_lines["Feature: group.version"] == kafka_lines["Feature: group.version"]
    assert pylog_lines == {
        "Feature: group.version": "Feature: group.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\t"
                                  "FinalizedVersionLevel: 1\tEpoch: <n>",
        "Feature: metadata.version": "Feature: metadata.version\tSupportedMinVersion: 3.3-IV3\t"
                                     "SupportedMaxVersion: 4.0-IV0\tFinalizedVersionLevel: 4.0-IV0\tEpoch: <n>",
        "Feature: transaction.version": "Feature: transaction.version\tSupportedMinVersion: 0\t"
                                        "SupportedMaxVersion: 0\tFinalizedVersionLevel: 0\tEpoch: <n>"}
    assert "FinalizedVersionLevel: 2" in kafka_lines["Feature: transaction.version"]


def test_client_metrics_command_alike(kafka_broker, pylog_node1):  # noqa: F811
    name = f"tools-sub-{uuid.uuid4().hex[:8]}"

    def run(*args, keep=lambda text: _block(text, name)):
        return _same(kafka_broker, pylog_node1, "kafka-client-metrics", "--bootstrap-server", "{bs}", *args,
                     keep=keep)

    status, output = run("--alter", "--name", name, "--metrics",
                         "org.apache.kafka.producer.,org.apache.kafka.consumer.", "--interval", "2000",
                         "--match", "client_id=abc")
    assert status == 0 and f"Altered client metrics config for {name}." in output, output
    status, described = run("--describe", "--name", name)
    assert "  interval.ms=2000" in described and "  match=client_id=abc" in described, described
    status, listed = run("--list", keep=lambda text: "\n".join(line for line in text.splitlines() if name in line))
    assert listed == name
    status, output = run("--alter", "--name", name, "--interval", "5", keep=lambda text: text)
    assert status == 1 and "InvalidRequestException" in output, output
    run("--describe")
    status, output = _same(kafka_broker, pylog_node1, "kafka-configs", "--bootstrap-server", "{bs}", "--describe",
                           "--entity-type", "client-metrics", "--entity-name", name)
    assert "DYNAMIC_CLIENT_METRICS_CONFIG:interval.ms=2000" in output, output
    status, output = run("--delete", "--name", name)
    assert status == 0 and f"Deleted client metrics config for {name}." in output
    assert run("--list", keep=lambda text: "\n".join(line for line in text.splitlines() if name in line))[1] == ""


def test_configs_entity_type_groups_alike(kafka_broker, pylog_node1):  # noqa: F811
    group = f"tools-cfg-g-{uuid.uuid4().hex[:8]}"

    def configs(*args, keep=lambda text: _block(text, group)):
        return _same(kafka_broker, pylog_node1, "kafka-configs", "--bootstrap-server", "{bs}", *args,
                     "--entity-type", "groups", keep=keep)

    status, output = configs("--alter", "--entity-name", group, "--add-config",
                             "consumer.session.timeout.ms=50000,consumer.heartbeat.interval.ms=6000")
    assert status == 0 and f"Completed updating config for group {group}." in output, output
    status, output = configs("--describe", "--entity-name", group)
    assert "DYNAMIC_GROUP_CONFIG:consumer.session.timeout.ms=50000" in output, output
    configs("--describe")
    status, output = configs("--describe", "--all", "--entity-name", group)
    assert "share.auto.offset.reset=latest sensitive=false synonyms={DEFAULT_CONFIG:" in output, output
    status, output = configs("--alter", "--entity-name", group, "--add-config", "consumer.session.timeout.ms=1",
                             keep=lambda text: text)
    assert status == 1 and "ExecutionException" in output, output
    configs("--alter", "--entity-name", group, "--delete-config", "consumer.session.timeout.ms")
    status, output = configs("--describe", "--entity-name", group)
    assert "consumer.session.timeout.ms" not in output and "consumer.heartbeat.interval.ms=6000" in output, output
    configs("--alter", "--entity-name", group, "--delete-config", "consumer.heartbeat.interval.ms")


def test_features_upgrade_dry_runs_alike(kafka_broker, pylog_node1):  # noqa: F811
    """``kafka-features upgrade --dry-run``: group.version to its finalized level is accepted, beyond its range
    refused with Kafka's message, on both."""
    def features(*args):
        return _same(kafka_broker, pylog_node1, "kafka-features", "--bootstrap-server", "{bs}", *args)

    status, output = features("upgrade", "--feature", "group.version=1", "--dry-run")
    assert status == 0 and "group.version" in output, output
    status, output = features("upgrade", "--feature", "group.version=7", "--dry-run")
    assert status == 1 and "group.version" in output, output
