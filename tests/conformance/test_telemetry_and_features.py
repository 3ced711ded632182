"""Client telemetry (KIP-714), client-metrics and group config resources, ListConfigResources (KIP-1142) and
ApiVersions' features, compared with Apache Kafka 4.1 (which runs without a metrics reporter plugin).

Telemetry answers carry a random client instance id; a scenario names its own ids where it can and compares a
subscription id by its CRC part (the id XOR the instance id's Java hash), which is Kafka's function of the
metric set and the interval.  Subscriptions match only the scenario's own connections (``match`` on a unique
client id), so the session's shared Kafka broker sees no other test's clients subscribed.  Config resources are
named per scenario and peer and shown by role.
"""
from __future__ import annotations

import gzip
import time
import uuid

import pytest
import zstandard
from kafka.protocol.admin import (
    AlterConfigsRequest, DescribeConfigsRequest, IncrementalAlterConfigsRequest, ListConfigResourcesRequest,
)
from kafka.protocol.metadata import ApiVersionsRequest

from broker_sim.protocol.messages import GetTelemetrySubscriptionsRequest, PushTelemetryRequest
from broker_sim.server.client_metrics import java_uuid_hash
from differential import Scenario, create_topic

PYLOG_BROKER_ID = 1
CLIENT_METRICS, GROUP = 16, 32
SET, DELETE, APPEND = 0, 1, 2
IAC = IncrementalAlterConfigsRequest
ZERO = uuid.UUID(int=0)


def _client(peer, client_id: str):
    from broker_sim.protocol.client import WireConnection

    return WireConnection.connect(peer.host, peer.port, timeout_s=10, client_id=client_id)


def _alter(connection, resource_type: int, name: str, changes, validate_only: bool = False):
    answer = connection.call(IAC[1](resources=[IAC.AlterConfigsResource(
        resource_type=resource_type, resource_name=name, configs=[
            IAC.AlterConfigsResource.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in changes])],
        validate_only=validate_only), timeout_s=15)
    result = answer.responses[0]
    return {"error": result.error_code, "message": result.error_message}


def _describe(connection, resource_type: int, name: str, keys=None, synonyms=True):
    answer = connection.call(DescribeConfigsRequest[4](resources=[DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=resource_type, resource_name=name, configuration_keys=keys)], include_synonyms=synonyms,
        include_documentation=False), timeout_s=15)
    result = answer.results[0].to_dict()
    result["resource_name"] = "<own>"
    return result


def _subscribed(answer, instance_id=None) -> dict:
    """A GetTelemetrySubscriptions answer, its ids replaced by what both brokers must agree on."""
    data = answer.to_dict()
    given = answer.client_instance_id
    if answer.error_code == 0:
        data["client_instance_id"] = "assigned" if instance_id is None else given == instance_id
        data["subscription_crc"] = answer.subscription_id ^ java_uuid_hash(given)
        del data["subscription_id"]
    return data


def _applied(connection, expected: set[str], names) -> None:
    """Wait until the broker's subscriptions among ``names`` are ``expected``: Kafka's broker applies a
    client-metrics change from its metadata log a moment after the controller answered (ListConfigResources v0
    reads the same map GetTelemetrySubscriptions matches against)."""
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        listed = connection.call(ListConfigResourcesRequest[0]()).config_resources
        if {r.resource_name for r in listed} & set(names) == expected:
            return
        time.sleep(0.05)
    raise AssertionError(f"subscriptions {expected} not applied")


def _described_once(connection, resource_type: int, name: str, key: str, value, **kwargs):
    """``_describe`` once ``key`` reads ``value`` (None: back to its default), or at the deadline: Kafka's broker
    applies a config change from its metadata log a moment after the controller answered the alter."""
    deadline = time.monotonic() + 15
    while True:
        described = _describe(connection, resource_type, name, **kwargs)
        entry = next((c for c in described["configs"] if c["name"] == key), None)
        overridden = entry is not None and entry["config_source"] == 8   # GROUP_CONFIG
        if ((value is None and not overridden) or (value is not None and entry is not None
                                                    and entry["value"] == value)) or time.monotonic() > deadline:
            return described
        time.sleep(0.05)


def _get(connection, instance_id=ZERO):
    return connection.call(GetTelemetrySubscriptionsRequest[0](client_instance_id=instance_id))


def _push(connection, instance_id, subscription_id, *, terminating=False, compression=0, metrics=b"m"):
    return connection.call(PushTelemetryRequest[0](
        client_instance_id=instance_id, subscription_id=subscription_id, terminating=terminating,
        compression_type=compression, metrics=metrics)).error_code


def test_telemetry_without_a_subscription(pair):
    """No subscription matches: 5 minutes, no metrics, Kafka's compression list and 1 MiB; a second request within
    the interval THROTTLING_QUOTA_EXCEEDED; pushes: another subscription id UNKNOWN_SUBSCRIPTION_ID (after which
    GetTelemetrySubscriptions is not throttled), then the throttled push, a terminating push accepted once,
    INVALID_REQUEST after it and for the zero and reserved ids; an unknown compression, a payload over
    telemetry.max.bytes; accepted payloads, plain or compressed (never parsed), and compressed ones that do not
    decompress (INVALID_RECORD).  A client-chosen instance id is kept."""
    def run(peer):
        connection = _client(peer, peer.name("tele"))
        try:
            seen = {}
            first = _get(connection)
            seen["assigned"] = _subscribed(first)
            mine = uuid.uuid4()
            answer = _get(connection, mine)
            seen["own id"] = _subscribed(answer, mine)
            seen["again"] = _subscribed(_get(connection, mine), mine)
            seen["push other subscription"] = _push(connection, mine, answer.subscription_id + 1)
            seen["get after unknown subscription"] = _subscribed(_get(connection, mine), mine)
            seen["push throttled"] = _push(connection, mine, answer.subscription_id)
            seen["push terminating"] = _push(connection, mine, answer.subscription_id, terminating=True)
            seen["push after terminating"] = _push(connection, mine, answer.subscription_id, terminating=True)
            seen["push zero id"] = _push(connection, ZERO, 0)
            seen["push reserved id"] = _push(connection, uuid.UUID(int=1), 0)
            seen["push unknown instance"] = _push(connection, uuid.uuid4(), 0)
            other = _get(connection, uuid.uuid4())
            seen["push bad compression"] = _push(connection, other.client_instance_id, other.subscription_id,
                                                 compression=9)
            big = _get(connection, uuid.uuid4())
            seen["push too large"] = _push(connection, big.client_instance_id, big.subscription_id,
                                           metrics=b"x" * (1048576 + 1))
            for label, compression, payload in (
                    ("push plain", 0, b"\xff not protobuf"), ("push gzip", 1, gzip.compress(b"\x0a\x00")),
                    ("push zstd", 4, zstandard.ZstdCompressor().compress(b"\x0a\x00" * 1000)),
                    ("push corrupt gzip", 1, b"not gzip"), ("push corrupt zstd", 4, b"\x00" * 100)):
                fresh = _get(connection, uuid.uuid4())
                seen[label] = _push(connection, fresh.client_instance_id, fresh.subscription_id,
                                    compression=compression, metrics=payload)
            return seen
        finally:
            connection.close()
    kafka = pair.compare(Scenario("telemetry, no subscription", run))
    assert kafka["assigned"]["push_interval_ms"] == 300000 and kafka["assigned"]["requested_metrics"] == []
    assert kafka["again"]["error_code"] == 89 and kafka["push other subscription"] == 117
    assert (kafka["push too large"], kafka["push bad compression"], kafka["push gzip"]) == (118, 76, 0)
    assert kafka["push corrupt zstd"] == 87  # INVALID_RECORD: Kafka decompresses what it accepts


def test_telemetry_with_subscriptions(pair):
    """Two subscriptions match the client: their prefixes united in Kafka's (HashSet) order, the lower interval,
    the subscription id Kafka computes; a subscription for another client id does not apply; a change of the
    subscriptions is seen at once (no throttling); ``*`` subscribes to everything."""
    def run(peer):
        client_id = peer.name("tele")
        connection = _client(peer, client_id)
        names = [peer.name("sub") for _ in range(3)]
        try:
            seen = {"alter": [
                _alter(connection, CLIENT_METRICS, names[0], [
                    ("metrics", SET, "org.apache.kafka.producer.,org.apache.kafka.consumer.coordinator."),
                    ("interval.ms", SET, "2000"), ("match", SET, f"client_id={client_id}")]),
                _alter(connection, CLIENT_METRICS, names[1], [
                    ("metrics", SET, "org.apache.kafka.consumer.fetch.,org.apache.kafka.producer."),
                    ("interval.ms", SET, "1500"), ("match", SET, f"client_id={client_id},client_software_name=.*")]),
                _alter(connection, CLIENT_METRICS, names[2], [
                    ("metrics", SET, "*"), ("match", SET, "client_id=someone-else")])]}
            _applied(connection, set(names), names)
            mine = uuid.uuid4()
            seen["subscribed"] = _subscribed(_get(connection, mine), mine)
            seen["all"] = _alter(connection, CLIENT_METRICS, names[2], [("match", SET, f"client_id={client_id}")])
            time.sleep(1)  # the change applied on Kafka's broker (the set of names stays the same)
            seen["everything"] = _subscribed(_get(connection, mine), mine)
            for name in names:
                _alter(connection, CLIENT_METRICS, name, [(c, DELETE, None) for c in ("metrics", "interval.ms",
                                                                                       "match")])
            _applied(connection, set(), names)
            seen["none left"] = _subscribed(_get(connection, mine), mine)
            return seen
        finally:
            connection.close()
    kafka = pair.compare(Scenario("telemetry, subscriptions", run))
    assert kafka["subscribed"]["push_interval_ms"] == 1500 and len(kafka["subscribed"]["requested_metrics"]) == 3
    assert kafka["everything"]["requested_metrics"] == ["*"]


def test_client_metrics_configs_validation_and_describe(pair):
    """Kafka's errors for each bad client-metrics config (INVALID_REQUEST or INVALID_CONFIG and the message), the
    description of a subscription that does not exist (defaults, no synonyms), of one set (dynamic, its own
    synonym), a key filter, APPEND refused, the legacy AlterConfigs, and deleting every config."""
    def run(peer):
        connection = _client(peer, "configs")
        name = peer.name("sub")
        try:
            seen = {"missing": _describe(connection, CLIENT_METRICS, name)}
            for label, changes in {
                    "interval too low": [("interval.ms", SET, "50")],
                    "interval too high": [("interval.ms", SET, "3600001")],
                    "interval not a number": [("interval.ms", SET, "abc")],
                    "unknown config": [("foo", SET, "1")],
                    "match unknown key": [("match", SET, "foo=bar")],
                    "match no value": [("match", SET, "client_id")],
                    "match bad regex": [("match", SET, "client_id=[")],
                    "append": [("metrics", APPEND, "a.")]}.items():
                seen[label] = _alter(connection, CLIENT_METRICS, name, changes)
            seen["empty name"] = _alter(connection, CLIENT_METRICS, "", [("interval.ms", SET, "1000")])
            seen["validate only"] = _alter(connection, CLIENT_METRICS, name, [("interval.ms", SET, "1000")], True)
            seen["after validate only"] = _describe(connection, CLIENT_METRICS, name)
            seen["set"] = _alter(connection, CLIENT_METRICS, name, [
                ("metrics", SET, "a.,b."), ("interval.ms", SET, "1000"), ("match", SET, "client_id=x.*")])
            seen["described"] = _describe(connection, CLIENT_METRICS, name)
            seen["one key"] = _describe(connection, CLIENT_METRICS, name, ["interval.ms", "nope"])
            seen["no synonyms"] = _describe(connection, CLIENT_METRICS, name, synonyms=False)
            seen["delete all"] = _alter(connection, CLIENT_METRICS, name, [
                (c, DELETE, None) for c in ("metrics", "interval.ms", "match")])
            seen["deleted"] = _describe(connection, CLIENT_METRICS, name)
            AC = AlterConfigsRequest
            legacy = connection.call(AC[2](resources=[AC.AlterConfigsResource(
                resource_type=CLIENT_METRICS, resource_name=name, configs=[
                    AC.AlterConfigsResource.AlterableConfig(name="interval.ms", value="2000")])], validate_only=False))
            seen["legacy alter"] = legacy.responses[0].error_code
            seen["after legacy"] = _describe(connection, CLIENT_METRICS, name)
            _alter(connection, CLIENT_METRICS, name, [("interval.ms", DELETE, None)])
            return seen
        finally:
            connection.close()
    kafka = pair.compare(Scenario("client-metrics configs", run))
    assert kafka["interval too low"]["error"] == 42 and kafka["match bad regex"]["error"] == 40
    assert kafka["described"]["configs"][0]["config_source"] == 7


def test_group_configs_validation_and_describe(pair):
    """GroupConfig names and bounds (the broker's group.consumer.min/max.* bounds, session > heartbeat, the share
    and streams validators), Kafka's errors and messages, the default group refused, every config described
    with its source (DYNAMIC_GROUP_CONFIG or the default, each its own synonym)."""
    def run(peer):
        connection = _client(peer, "configs")
        group = peer.name("grp")
        try:
            seen = {"missing": _describe(connection, GROUP, group)}
            for label, changes in {
                    "session too low": [("consumer.session.timeout.ms", SET, "1000")],
                    "session too high": [("consumer.session.timeout.ms", SET, "100000")],
                    "session not a number": [("consumer.session.timeout.ms", SET, "abc")],
                    "session zero": [("consumer.session.timeout.ms", SET, "0")],
                    "heartbeat too high": [("consumer.heartbeat.interval.ms", SET, "20000")],
                    "unknown config": [("foo", SET, "1")],
                    "reset bogus": [("share.auto.offset.reset", SET, "bogus")],
                    "reset by duration": [("share.auto.offset.reset", SET, "by_duration:PT1H")],
                    "isolation bogus": [("share.isolation.level", SET, "bogus")],
                    "standby too many": [("streams.num.standby.replicas", SET, "3")],
                    "lock too short": [("share.record.lock.duration.ms", SET, "500")],
                    "append": [("consumer.session.timeout.ms", APPEND, "1")]}.items():
                seen[label] = _alter(connection, GROUP, group, changes)
            seen["default group"] = _alter(connection, GROUP, "", [("consumer.session.timeout.ms", SET, "50000")])
            seen["set"] = _alter(connection, GROUP, group, [("consumer.session.timeout.ms", SET, "50000"),
                                                            ("consumer.heartbeat.interval.ms", SET, "6000")])
            seen["described"] = _described_once(connection, GROUP, group, "consumer.heartbeat.interval.ms", "6000")
            seen["keys"] = _describe(connection, GROUP, group, ["consumer.heartbeat.interval.ms"], synonyms=False)
            seen["delete"] = _alter(connection, GROUP, group, [("consumer.session.timeout.ms", DELETE, None),
                                                               ("share.auto.offset.reset", DELETE, None)])
            seen["after delete"] = _described_once(connection, GROUP, group, "consumer.session.timeout.ms", None)
            _alter(connection, GROUP, group, [(c, DELETE, None) for c in ("consumer.heartbeat.interval.ms",)])
            return seen
        finally:
            connection.close()
    kafka = pair.compare(Scenario("group configs", run))
    assert kafka["session too low"]["message"] == ("consumer.session.timeout.ms must be greater than or equal to "
                                                   "group.consumer.min.session.timeout.ms")
    assert kafka["default group"]["error"] == 42 and kafka["reset by duration"]["error"] == 0


def test_list_config_resources(pair):
    """v0 lists the subscriptions; v1 the groups with configs, subscriptions, broker loggers, brokers and topics
    (each type on its own or all for none), in Kafka's order of types; a type Kafka does not list is
    UNSUPPORTED_VERSION.  Other tests' resources are left out (the Kafka broker is shared)."""
    def run(peer):
        connection = _client(peer, "configs")
        group, sub = peer.name("grp"), peer.name("sub")
        topic = create_topic(peer, "lcr")
        own = {group: "group", sub: "subscription", topic: "topic", "1": "broker 1"}
        try:
            _alter(connection, GROUP, group, [("consumer.session.timeout.ms", SET, "50000")])
            _alter(connection, CLIENT_METRICS, sub, [("interval.ms", SET, "1000")])
            seen = {}
            for label, version, types in (("v0", 0, None), ("v1 all", 1, []), ("v1 groups", 1, [32]),
                                          ("v1 subscriptions", 1, [16]), ("v1 topics", 1, [2]),
                                          ("v1 brokers and loggers", 1, [4, 8]), ("v1 unknown type", 1, [99]),
                                          ("v1 config types", 1, [32, 16, 2])):
                answer = connection.call(ListConfigResourcesRequest[version](
                    **({} if version == 0 else {"resource_types": types})))
                listed = [(own[r.resource_name], r.resource_type if version else 16)
                          for r in answer.config_resources if r.resource_name in own]
                seen[label] = {"error": answer.error_code, "own": listed,
                               "internal topics": sorted(r.resource_name for r in answer.config_resources
                                                         if r.resource_name.startswith("__"))}
            _alter(connection, GROUP, group, [("consumer.session.timeout.ms", DELETE, None)])
            _alter(connection, CLIENT_METRICS, sub, [("interval.ms", DELETE, None)])
            # Kafka's GroupConfigManager keeps listing a group whose configs were all deleted, until a restart
            # (pylog lists only what is stored): subscriptions only here
            after = connection.call(ListConfigResourcesRequest[1](resource_types=[16]))
            seen["after deletes"] = [r.resource_name for r in after.config_resources if r.resource_name in own]
            return seen
        finally:
            connection.close()
    kafka = pair.compare(Scenario("ListConfigResources", run, ignore=("*.internal topics",)))
    assert kafka["v1 all"]["own"][:2] == [["group", 32], ["subscription", 16]]
    assert kafka["v1 unknown type"]["error"] == 35 and kafka["after deletes"] == []


@pytest.mark.parametrize("version", [3, 4])
def test_api_versions_features(pair, version):
    """ApiVersions v3+ carries the features: group.version is Kafka's (0-1, finalized 1) on both; v3 leaves out
    supported features whose minimum is 0 on both.  broker_sim's own levels differ from Kafka 4.1's where it
    implements less (protocol/features.py): transaction.version 0 (Kafka finalizes 2), metadata.version 22
    (4.0-IV0; Kafka 27), no kraft/share/ELR versions.  GetTelemetrySubscriptions and PushTelemetry are advertised
    by neither (no metrics reporter plugin)."""
    def run(peer):
        answer = peer.call(ApiVersionsRequest[version](client_software_name="pylog-conformance",
                                                       client_software_version="1"))
        supported = {f.name: (f.min_version, f.max_version) for f in answer.supported_features}
        finalized = {f.name: (f.min_version_level, f.max_version_level) for f in answer.finalized_features}
        return {"group.version supported": supported.get("group.version"),
                "group.version finalized": finalized.get("group.version"),
                "supported with minimum 0": sorted(n for n, (low, _) in supported.items() if low == 0) if version < 4
                else "v4 lists them",
                "epoch valid": answer.finalized_features_epoch >= 0,
                "telemetry advertised": sorted(a.api_key for a in answer.api_keys if a.api_key in (71, 72)),
                "transactions v2 finalized": finalized.get("transaction.version", (0, 0))[1] >= 2,
                "metadata.version finalized": finalized.get("metadata.version")}
    both = pair.answers(Scenario(f"ApiVersions v{version} features", run))
    kafka, pylog = both["kafka"], both["pylog"]
    shared = ("group.version supported", "group.version finalized", "supported with minimum 0", "epoch valid",
              "telemetry advertised")
    assert {k: pylog[k] for k in shared} == {k: kafka[k] for k in shared}
    assert kafka["group.version finalized"] == [1, 1] and kafka["telemetry advertised"] == []
    assert (kafka["transactions v2 finalized"], pylog["transactions v2 finalized"]) == (True, False)
    assert pylog["metadata.version finalized"] == [22, 22]


@pytest.mark.parametrize("version", [0, 1, 2])
def test_update_features(pair, version):
    """UpdateFeatures as Kafka's controller answers it: a level outside the supported range or a feature it does
    not know fails every update with INVALID_UPDATE_VERSION and its message; group.version to its finalized level
    succeeds (v0-1 with a result per feature), as does an empty update.  (Only validate-only or no-op updates:
    the Kafka broker is shared.)  transaction.version and metadata.version beyond the range fail on both, their
    messages naming each broker's own range."""
    from kafka.protocol.admin import UpdateFeaturesRequest as Update

    def key(feature, level):
        return Update.FeatureUpdateKey(feature=feature, max_version_level=level,
                                       **({"allow_downgrade": False} if version == 0 else {"upgrade_type": 1}))

    def run(peer):
        seen = {}
        for label, updates, validate_only in (
                ("group.version too high", [("group.version", 5)], True),
                ("unknown feature", [("nope.version", 1)], True),
                ("group.version as finalized", [("group.version", 1)], False),
                ("first bad fails all", [("group.version", 1), ("nope.version", 2)], False),
                ("nothing", [], False),
                ("transaction.version too high", [("transaction.version", 3)], True),
                ("metadata.version too high", [("metadata.version", 99)], True)):
            # v0 has no validate-only: its validate-only updates are refused levels, which change nothing anyway
            fields = {} if version == 0 else {"validate_only": validate_only}
            answer = peer.call(Update[version](
                timeout_ms=10_000, feature_updates=[key(f, level) for f, level in updates], **fields)).to_dict()
            if label.startswith(("transaction", "metadata")):
                answer = {"error_code": answer["error_code"]}
            seen[label] = answer
        return seen
    kafka = pair.compare(Scenario(f"UpdateFeatures v{version}", run))
    assert kafka["group.version too high"]["error_code"] == 95 and kafka["nothing"]["error_code"] == 0
    assert kafka["transaction.version too high"]["error_code"] == 95
