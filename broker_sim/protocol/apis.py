"""The request dispatch table: which APIs and versions this broker implements.

Theory of operation: one row per API key gives the kafka-python package that
defines the API's schema-generated request and response classes and the
version range the broker implements.  ``ApiVersions`` advertises exactly these
ranges (clients pick the highest version both sides know), and the dispatcher
refuses anything outside them, so the table is the single statement of what
the broker speaks.  Handlers are bound to rows by the server
(``broker_sim.server.handlers``).

The classes load on first use (issue 25): kafka-python 3 builds each message
class from its JSON schema when its module is imported, ~25 ms of CPU for
``kafka.protocol.admin`` alone, for APIs a plain broker may never be asked.
A row names its package (``kafka.protocol.<package>``) and its classes are
``<ApiKey name>Request`` and ``<ApiKey name>Response``; ``ApiSpec.request`` and
``.response`` import the package the first time they are read and keep the
class, so later requests read a plain attribute.  Handlers (and the
transaction marker writer) reach message classes the same way, by name,
through ``messages``: ``messages.MetadataResponse(...)``, resolved through the
table once and then an attribute of that object.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cached_property

from kafka.protocol.api_key import ApiKey

# the kafka-python packages of the rows (kafka.protocol.<name>)
ADMIN, CONSUMER, METADATA, PRODUCER, SASL = "admin", "consumer", "metadata", "producer", "sasl"
# Kafka 4.1.1's own definitions of the messages kafka-python does not ship (a full module name)
KAFKA4 = "broker_sim.protocol.messages"


@dataclass(frozen=True)
class ApiSpec:
    key: ApiKey
    package: str  # kafka.protocol.<package> (or the module named) defines <key name>Request and <key name>Response
    min_version: int
    max_version: int
    # Lowest version advertised, when below min_version.  Kafka 4 advertises Produce from v0
    # but refuses v0-2 (KAFKA-18659): librdkafka < 2.10 compresses only when v0 is advertised.
    advertised_min_version: int | None = None
    # False: served but left out of ApiVersions, as Kafka leaves out the client telemetry APIs (71, 72) without a
    # metrics reporter plugin (ApiVersionsResponse.filterApis, clientTelemetryEnabled)
    advertised: bool = True

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    @property
    def advertised_min(self) -> int:
        return self.min_version if self.advertised_min_version is None else self.advertised_min_version

    @cached_property
    def request(self) -> type:
        """kafka-python's request class of this API (its package imported on the first read)."""
        return self._message_class("Request")

    @cached_property
    def response(self) -> type:
        """kafka-python's response class of this API (its package imported on the first read)."""
        return self._message_class("Response")

    def _message_class(self, kind: str) -> type:
        module = self.package if "." in self.package else f"kafka.protocol.{self.package}"
        return getattr(importlib.import_module(module), self.key.name + kind)


def _table(*specs: ApiSpec) -> dict[int, ApiSpec]:
    return {int(spec.key): spec for spec in specs}


APIS: dict[int, ApiSpec] = _table(
    ApiSpec(ApiKey.Produce, PRODUCER, 3, 9, advertised_min_version=0),
    # v13+: topics by id (KIP-516); v15: ReplicaState (KIP-903); v16: the current leader on NOT_LEADER (KIP-951);
    # v17-18: a follower's directory id and high watermark (KIP-853, KIP-1166), which a leader here does not need
    ApiSpec(ApiKey.Fetch, CONSUMER, 4, 18),
    ApiSpec(ApiKey.ListOffsets, CONSUMER, 1, 10),
    ApiSpec(ApiKey.Metadata, METADATA, 0, 13),
    ApiSpec(ApiKey.ApiVersions, METADATA, 0, 4),
    # Kafka 4 removed CreateTopics v0-1, DeleteTopics v0, OffsetForLeaderEpoch v0-1, DescribeConfigs v0,
    # OffsetCommit v0-1 and OffsetFetch v0 (KIP-896): a request at those versions closes the connection
    ApiSpec(ApiKey.CreateTopics, ADMIN, 2, 7),
    ApiSpec(ApiKey.DeleteTopics, ADMIN, 1, 6),
    ApiSpec(ApiKey.DeleteRecords, ADMIN, 0, 2),
    ApiSpec(ApiKey.InitProducerId, PRODUCER, 0, 4),
    ApiSpec(ApiKey.OffsetForLeaderEpoch, CONSUMER, 2, 4),
    ApiSpec(ApiKey.DescribeConfigs, ADMIN, 1, 4),
    # v0: client-metrics resources (KIP-714); v1: every config resource type (KIP-1142)
    ApiSpec(ApiKey.ListConfigResources, ADMIN, 0, 1),
    ApiSpec(ApiKey.CreatePartitions, ADMIN, 0, 3),
    ApiSpec(ApiKey.AlterConfigs, ADMIN, 0, 2),
    ApiSpec(ApiKey.IncrementalAlterConfigs, ADMIN, 0, 1),
    ApiSpec(ApiKey.DescribeCluster, ADMIN, 0, 2),
    # feature levels (KIP-584): fixed here (protocol/features.py); an update is checked and answered as Kafka's
    ApiSpec(ApiKey.UpdateFeatures, ADMIN, 0, 2),
    # paged topic descriptions (KIP-966), which Kafka 4's kafka-topics --describe asks for
    ApiSpec(ApiKey.DescribeTopicPartitions, ADMIN, 0, 0),
    ApiSpec(ApiKey.FindCoordinator, METADATA, 0, 6),
    ApiSpec(ApiKey.JoinGroup, CONSUMER, 0, 9),
    ApiSpec(ApiKey.SyncGroup, CONSUMER, 0, 5),
    ApiSpec(ApiKey.Heartbeat, CONSUMER, 0, 4),
    ApiSpec(ApiKey.LeaveGroup, CONSUMER, 0, 5),
    ApiSpec(ApiKey.OffsetCommit, CONSUMER, 2, 9),
    ApiSpec(ApiKey.OffsetFetch, CONSUMER, 1, 9),
    ApiSpec(ApiKey.DescribeGroups, ADMIN, 0, 6),
    ApiSpec(ApiKey.ListGroups, ADMIN, 0, 5),
    ApiSpec(ApiKey.DeleteGroups, ADMIN, 0, 2),
    ApiSpec(ApiKey.OffsetDelete, CONSUMER, 0, 0),
    # the consumer group protocol of KIP-848 (group.protocol=consumer), Kafka 4.1's versions
    ApiSpec(ApiKey.ConsumerGroupHeartbeat, KAFKA4, 0, 1),
    ApiSpec(ApiKey.ConsumerGroupDescribe, KAFKA4, 0, 1),
    # transactions at Kafka 3.x's level (transaction version 1: no KIP-890 part 2 epoch bump per transaction)
    ApiSpec(ApiKey.AddPartitionsToTxn, PRODUCER, 0, 4),
    ApiSpec(ApiKey.AddOffsetsToTxn, PRODUCER, 0, 3),
    ApiSpec(ApiKey.EndTxn, PRODUCER, 0, 3),
    ApiSpec(ApiKey.TxnOffsetCommit, PRODUCER, 0, 3),
    ApiSpec(ApiKey.WriteTxnMarkers, PRODUCER, 1, 1),
    ApiSpec(ApiKey.DescribeTransactions, ADMIN, 0, 0),
    ApiSpec(ApiKey.ListTransactions, ADMIN, 0, 2),
    ApiSpec(ApiKey.DescribeProducers, ADMIN, 0, 0),
    # security: SASL (KIP-43, KIP-152, KIP-368) and SCRAM users (KIP-554)
    ApiSpec(ApiKey.SaslHandshake, SASL, 0, 1),
    ApiSpec(ApiKey.SaslAuthenticate, SASL, 0, 2),
    ApiSpec(ApiKey.DescribeUserScramCredentials, ADMIN, 0, 0),
    ApiSpec(ApiKey.AlterUserScramCredentials, ADMIN, 0, 0),
    # ACLs (KIP-140; v1+: pattern types, KIP-290)
    ApiSpec(ApiKey.DescribeAcls, ADMIN, 1, 3),
    ApiSpec(ApiKey.CreateAcls, ADMIN, 1, 3),
    ApiSpec(ApiKey.DeleteAcls, ADMIN, 1, 3),
    # client quotas (KIP-546)
    ApiSpec(ApiKey.DescribeClientQuotas, ADMIN, 0, 1),
    ApiSpec(ApiKey.AlterClientQuotas, ADMIN, 0, 1),
    # partition reassignment (KIP-455), answered by the active controller
    ApiSpec(ApiKey.AlterPartitionReassignments, ADMIN, 0, 1),
    ApiSpec(ApiKey.ListPartitionReassignments, ADMIN, 0, 0),
    # leader election (KIP-460: v1+ election type, PREFERRED or UNCLEAN)
    ApiSpec(ApiKey.ElectLeaders, ADMIN, 0, 2),
    # log dirs (JBOD, KIP-113): Kafka 4.1 serves DescribeLogDirs v1-4 and AlterReplicaLogDirs v1-2
    ApiSpec(ApiKey.DescribeLogDirs, ADMIN, 1, 4),
    ApiSpec(ApiKey.AlterReplicaLogDirs, ADMIN, 1, 2),
    # client telemetry (KIP-714), answered as a Kafka broker without a metrics reporter plugin
    ApiSpec(ApiKey.GetTelemetrySubscriptions, KAFKA4, 0, 0, advertised=False),
    ApiSpec(ApiKey.PushTelemetry, KAFKA4, 0, 0, advertised=False),
)


class Messages:
    """kafka-python's message classes of the rows of ``APIS`` by name: ``messages.FetchResponse`` is
    ``APIS[ApiKey.Fetch].response``.  The first read of a name resolves it through its row (importing the row's
    package then); the class is kept as an attribute of this object, so later reads are plain lookups."""

    def __getattr__(self, name: str) -> type:  # only reached for a name not resolved yet
        for kind in ("Request", "Response"):
            stem = name[:-len(kind)]
            if name.endswith(kind) and stem in ApiKey.__members__ and int(ApiKey[stem]) in APIS:
                spec = APIS[int(ApiKey[stem])]
                found = spec.request if kind == "Request" else spec.response
                setattr(self, name, found)
                return found
        raise AttributeError(f"{name!r} is not the Request or Response class of an API in APIS")


messages = Messages()


def api_versions_response(version: int, error_code: int = 0):
    """The ApiVersions answer: every advertised row of ``APIS`` and, from v3, the features (``features.py``).
    With an error (a version this broker does not know, answered in the v0 layout) it lists only ApiVersions'
    own range, as Kafka's ``ApiVersionsRequest.getErrorResponse`` does: enough for the client to retry at a
    version both sides speak."""
    from broker_sim.protocol import features

    response = messages.ApiVersionsResponse
    specs = [APIS[int(ApiKey.ApiVersions)]] if error_code else [s for s in APIS.values() if s.advertised]
    keys = [response.ApiVersion(api_key=s.key, min_version=s.advertised_min, max_version=s.max_version)
            for s in specs]
    if error_code or version < 3:
        return response(version=version, error_code=error_code, api_keys=keys, throttle_time_ms=0)
    return response(version=version, error_code=error_code, api_keys=keys, throttle_time_ms=0,
                    supported_features=[response.SupportedFeatureKey(name=f.name, min_version=f.min_version,
                                                                     max_version=f.max_version)
                                        for f in features.supported(version)],
                    finalized_features_epoch=features.FINALIZED_EPOCH,
                    finalized_features=[response.FinalizedFeatureKey(name=f.name, max_version_level=f.level,
                                                                     min_version_level=f.level)
                                        for f in features.finalized()],
                    zk_migration_ready=False)
