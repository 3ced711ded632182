"""ApiVersions and Metadata, compared with Apache Kafka: what a client learns first about a broker, what happens
to a request at a version or API key the broker does not serve, and the topics Metadata answers.

Every API key either broker serves must have the same [min, max] range on both, except the rows of
``BELOW_KAFKA``: Kafka 4 features broker_sim does not have yet (issue #39), each with the reason. A version both
brokers refuse (Kafka 4 removed it, KIP-896, or it is newer than both) closes the connection on both; ApiVersions
itself at a version too new is answered UNSUPPORTED_VERSION in the v0 layout, listing only ApiVersions' range.
"""
from __future__ import annotations

import struct
import time
import uuid

import pytest
from kafka.protocol.admin import DescribeClusterRequest
from kafka.protocol.api_key import ApiKey
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest

from broker_sim.protocol.apis import APIS
from broker_sim.protocol.client import ConnectionClosed
from differential import SETTLING, Scenario

# pylog's advertised range (None: not served) where it is below Kafka 4.1.1's on purpose, and why
BELOW_KAFKA = {
    ApiKey.Produce: ((0, 9), "v10 KIP-951 leader discovery, v11-12 KIP-890 transactions v2, v13 topic ids"),
    ApiKey.InitProducerId: ((0, 4), "v5+ transactions v2 (KIP-890)"),
    ApiKey.AddPartitionsToTxn: ((0, 4), "v5 transactions v2 (KIP-890)"),
    ApiKey.AddOffsetsToTxn: ((0, 3), "v4 transactions v2 (KIP-890)"),
    ApiKey.EndTxn: ((0, 3), "v4-5 transactions v2 (KIP-890)"),
    ApiKey.TxnOffsetCommit: ((0, 3), "v4-5 transactions v2 (KIP-890)"),
    ApiKey.CreateDelegationToken: (None, "delegation tokens (KIP-48) are not implemented"),
    ApiKey.RenewDelegationToken: (None, "delegation tokens (KIP-48) are not implemented"),
    ApiKey.ExpireDelegationToken: (None, "delegation tokens (KIP-48) are not implemented"),
    ApiKey.DescribeDelegationToken: (None, "delegation tokens (KIP-48) are not implemented"),
    ApiKey.DescribeQuorum: (None, "KRaft: broker_sim has no Raft quorum (ZooKeeper or in-process metadata)"),
    ApiKey.UnregisterBroker: (None, "KRaft broker registrations"),
    ApiKey.AddRaftVoter: (None, "KRaft: no Raft quorum"),
    ApiKey.RemoveRaftVoter: (None, "KRaft: no Raft quorum"),
    **{key: (None, "share groups (KIP-932)") for key in (
        ApiKey.ShareGroupHeartbeat, ApiKey.ShareGroupDescribe, ApiKey.ShareFetch, ApiKey.ShareAcknowledge,
        ApiKey.InitializeShareGroupState, ApiKey.ReadShareGroupState, ApiKey.WriteShareGroupState,
        ApiKey.DeleteShareGroupState, ApiKey.ReadShareGroupStateSummary, ApiKey.DescribeShareGroupOffsets,
        ApiKey.AlterShareGroupOffsets, ApiKey.DeleteShareGroupOffsets)},
}
UNSUPPORTED_VERSION = 35


def _ranges(peer, version: int) -> dict:
    request = ApiVersionsRequest[version](**({"client_software_name": "pylog-conformance",
                                               "client_software_version": "1"} if version >= 3 else {}))
    answer = peer.call(request)
    return {"error_code": answer.error_code,
            "apis": {a.api_key: (a.min_version, a.max_version) for a in answer.api_keys}}


@pytest.mark.parametrize("version", [0, 3, 4])
def test_every_api_range_is_kafkas_but_the_listed_kafka_4_features(pair, version):
    """At ApiVersions v0, v3 and v4 both answer error 0; every API's range is Kafka's, or pylog's is the one
    ``BELOW_KAFKA`` names (below Kafka's max, same min) for the reason given there."""
    kafka, pylog = (_ranges(peer, version) for peer in pair.peers)
    assert kafka["error_code"] == pylog["error_code"] == 0
    differ = {}
    for key in sorted(set(kafka["apis"]) | set(pylog["apis"])):
        theirs, ours = kafka["apis"].get(key), pylog["apis"].get(key)
        if theirs == ours:
            continue
        listed = BELOW_KAFKA.get(key)
        below = listed is not None and ours == listed[0] and theirs is not None and (
            ours is None or (ours[0] == theirs[0] and ours[1] < theirs[1]))
        if not below:
            differ[ApiKey(key).name if key in ApiKey._value2member_map_ else key] = {"kafka": theirs, "pylog": ours}
    assert differ == {}
    stale = {ApiKey(key).name for key in BELOW_KAFKA if kafka["apis"].get(key) == pylog["apis"].get(key)}
    assert stale == set(), "listed as below Kafka but the same now: remove from BELOW_KAFKA"


def _frame(api_key: int, version: int, correlation_id: int, body: bytes, *, flexible: bool) -> bytes:
    client_id = b"pylog-conformance"
    header = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id
    payload = header + (b"\x00" if flexible else b"") + body
    return struct.pack(">i", len(payload)) + payload


def _raw(peer, frame: bytes):
    """The response frame's payload to ``frame`` on a new connection, or "closed"."""
    with peer.connect() as connection:
        connection.send_bytes(frame)
        try:
            return connection.recv_frame(time.monotonic() + 10)
        except ConnectionClosed:
            return "closed"


@pytest.mark.parametrize("version", [5, 32767])
def test_api_versions_too_new_is_unsupported_version_in_v0_listing_only_api_versions(pair, version):
    def run(peer):
        payload = _raw(peer, _frame(18, version, 41, b"\x02x\x021\x00", flexible=True))
        answer = ApiVersionsResponse.decode(payload, version=0, header=True)
        return {"correlation_id": answer.header.correlation_id, "answer": answer}

    kafka = pair.compare(Scenario(f"ApiVersions v{version}", run))
    assert kafka["correlation_id"] == 41 and kafka["answer"]["error_code"] == UNSUPPORTED_VERSION
    assert [a["api_key"] for a in kafka["answer"]["api_keys"]] == [18]


def _refused_versions(kafka_ranges: dict) -> list[tuple[int, int]]:
    """(key, version) pairs kafka-python can encode that neither broker serves: below Kafka 4's minimum (KIP-896
    removed them), advertised but refused (Produce v0-2) or above both maxima."""
    refused = []
    for key, spec in APIS.items():
        theirs = kafka_ranges.get(key)
        for version in range(spec.request.min_version, spec.request.max_version + 1):
            served_by_kafka = theirs is not None and theirs[0] <= version <= theirs[1]
            if not spec.supports(version) and (not served_by_kafka or version < spec.min_version):
                refused.append((key, version))
    return refused


def test_a_version_neither_serves_closes_the_connection_on_both(pair):
    """Kafka 4 closes the connection on a request at a version it does not serve (OffsetCommit v0, CreateTopics
    v1, DescribeLogDirs v5, ...), as on an unknown API key; broker_sim does the same."""
    refused = _refused_versions(_ranges(pair.kafka, 3)["apis"])
    assert (int(ApiKey.OffsetCommit), 0) in refused and (int(ApiKey.DescribeLogDirs), 5) in refused

    def run(peer):
        seen = {}
        for key, version in refused:
            # acks=1: a Produce request has an answer to wait for (the default acks=0 has none)
            request = APIS[key].request[version](**({"acks": 1} if key == ApiKey.Produce else {}))
            connection = peer.connect()
            try:
                seen[f"{APIS[key].key.name} v{version}"] = type(connection.call(request, timeout_s=10)).__name__
            except ConnectionClosed:
                seen[f"{APIS[key].key.name} v{version}"] = "closed"
            finally:
                connection.close()
        for key in (70, 999, -1):  # unassigned (70), beyond every API, negative
            seen[f"key {key}"] = _raw(peer, _frame(key, 0, 1, b"", flexible=False))
        return seen

    kafka = pair.compare(Scenario("refused versions and keys", run))
    assert set(kafka.values()) == {"closed"}


@pytest.mark.parametrize("version", [0, 1, 2])
def test_describe_cluster_has_kafkas_shape(pair, version):
    fields = {"include_cluster_authorized_operations": True}
    if version >= 1:
        fields["endpoint_type"] = 1
    if version >= 2:
        fields["include_fenced_brokers"] = True

    def run(peer):
        return peer.call(DescribeClusterRequest[version](**fields))

    kafka = pair.compare(Scenario(f"DescribeCluster v{version}", run, ignore=("authorized_operations",)))
    assert kafka["error_code"] == 0


# -- Metadata ---------------------------------------------------------------------------------------------------

METADATA_VERSIONS = [0, 1, 4, 9, 12, 13]
# a topic being auto-created: Kafka's first answer is UNKNOWN_TOPIC_OR_PARTITION (the creation goes to its
# controller), broker_sim's the created topic; clients retry, so the answers are compared once settled
CREATING = SETTLING | {3}


def _metadata(version: int, names, *, auto_create: bool = True):
    Topic = MetadataRequest.MetadataRequestTopic
    return MetadataRequest[version](topics=None if names is None else [Topic(name=name) for name in names],
                                    allow_auto_topic_creation=auto_create,
                                    include_cluster_authorized_operations=False,
                                    include_topic_authorized_operations=False)


@pytest.mark.parametrize("version", METADATA_VERSIONS)
def test_metadata_of_illegal_and_missing_topic_names(pair, version):
    """Illegal names (a space, "..", 250 characters) are INVALID_TOPIC_EXCEPTION with or without auto-creation;
    a missing topic without auto-creation (v4+) UNKNOWN_TOPIC_OR_PARTITION; v1+ ``topics=[]`` lists none."""
    illegal = {"space": "bad name!", "dots": "..", "too long": "x" * 250}

    def run(peer):
        seen = {label: peer.call(_metadata(version, [name])) for label, name in illegal.items()}
        if version >= 1:
            seen["no topics"] = peer.call(_metadata(version, []))
        if version >= 4:
            seen.update({f"{label}, no auto-create": peer.call(_metadata(version, [name], auto_create=False))
                         for label, name in illegal.items()})
            seen["missing, no auto-create"] = peer.call(_metadata(version, [peer.name("m")], auto_create=False))
        return seen

    kafka = pair.compare(Scenario(f"Metadata v{version} illegal and missing", run,
                                  ignore=("missing, no auto-create.topics.*.name",)))
    assert {answer["topics"][0]["error_code"] for label, answer in kafka.items() if label in illegal} == {17}


@pytest.mark.parametrize("version", METADATA_VERSIONS)
def test_metadata_auto_creates_a_named_topic_and_lists_it_among_all(pair, version):
    def run(peer):
        name = peer.name("auto")
        created = peer.settled(lambda: _metadata(version, [name]), codes=CREATING)
        everything = peer.call(_metadata(version, [] if version == 0 else None))
        return {"created": created, "listed among all": name in [t.name for t in everything.topics]}

    node_ids = ("created.topics.*.partitions.*.replica_nodes", "created.topics.*.partitions.*.isr_nodes")
    kafka = pair.compare(Scenario(f"Metadata v{version} auto-create", run,
                                  ignore=("created.topics.*.name", *node_ids)))
    assert kafka["listed among all"] and kafka["created"]["topics"][0]["error_code"] == 0


@pytest.mark.parametrize("version", [10, 11, 12, 13])
def test_metadata_by_topic_id(pair, version):
    """v12 names a topic by id: a known id answers the topic with its name, an unknown one UNKNOWN_TOPIC_ID. v10-11
    carry the field but Kafka refuses it: every topic INVALID_REQUEST."""
    Topic = MetadataRequest.MetadataRequestTopic

    def by_id(peer, topic_id):
        return peer.call(MetadataRequest[version](topics=[Topic(name=None, topic_id=topic_id)],
                                                  allow_auto_topic_creation=False,
                                                  include_topic_authorized_operations=False))

    def run(peer):
        name = peer.name("byid")
        created = peer.settled(lambda: _metadata(version, [name]), codes=CREATING)
        known = by_id(peer, created.topics[0].topic_id)
        return {"known": known, "named": known.topics[0].name == name, "unknown": by_id(peer, uuid.uuid4())}

    node_ids = ("known.topics.*.partitions.*.replica_nodes", "known.topics.*.partitions.*.isr_nodes")
    kafka = pair.compare(Scenario(f"Metadata v{version} by topic id", run, ignore=("known.topics.*.name", *node_ids)))
    if version >= 12:
        assert kafka["named"] and kafka["unknown"]["topics"][0]["error_code"] == 100
    else:
        assert {kafka[k]["topics"][0]["error_code"] for k in ("known", "unknown")} == {42}
