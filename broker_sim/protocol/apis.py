"""The request dispatch table: which APIs and versions this broker implements.

Theory of operation: one row per API key gives the kafka-python
schema-generated request and response classes and the version range the
broker implements.  ``ApiVersions`` advertises exactly these ranges (clients
pick the highest version both sides know), and the dispatcher refuses anything
outside them, so the table is the single statement of what the broker speaks.
Handlers are bound to rows by the server (``broker_sim.server.handlers``).
"""
from __future__ import annotations

from dataclasses import dataclass

from kafka.protocol.admin import (
    CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse,
    DeleteGroupsRequest, DeleteGroupsResponse, DeleteRecordsRequest, DeleteRecordsResponse,
    DeleteTopicsRequest, DeleteTopicsResponse, DescribeClusterRequest, DescribeClusterResponse,
    DescribeConfigsRequest, DescribeConfigsResponse, DescribeGroupsRequest, DescribeGroupsResponse,
    DescribeTransactionsRequest, DescribeTransactionsResponse, IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse, ListGroupsRequest, ListGroupsResponse, ListTransactionsRequest,
    ListTransactionsResponse, AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse, CreateAclsRequest, CreateAclsResponse,
    DeleteAclsRequest, DeleteAclsResponse, DescribeAclsRequest, DescribeAclsResponse, AlterClientQuotasRequest,
    AlterClientQuotasResponse, DescribeClientQuotasRequest, DescribeClientQuotasResponse, AlterConfigsRequest,
    AlterConfigsResponse, ElectLeadersRequest, ElectLeadersResponse,
)
from kafka.protocol.admin import (
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from kafka.protocol.admin import (
    AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse, DescribeLogDirsRequest, DescribeLogDirsResponse,
)
from kafka.protocol.sasl import (
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
)
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import (
    FetchRequest, FetchResponse, HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse,
    LeaveGroupRequest, LeaveGroupResponse, ListOffsetsRequest, ListOffsetsResponse, OffsetCommitRequest,
    OffsetCommitResponse, OffsetDeleteRequest, OffsetDeleteResponse, OffsetFetchRequest, OffsetFetchResponse,
    OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, SyncGroupRequest, SyncGroupResponse,
)
from kafka.protocol.metadata import (
    ApiVersionsRequest, ApiVersionsResponse, FindCoordinatorRequest, FindCoordinatorResponse, MetadataRequest,
    MetadataResponse,
)
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest, AddPartitionsToTxnResponse,
    EndTxnRequest, EndTxnResponse, InitProducerIdRequest, InitProducerIdResponse, ProduceRequest, ProduceResponse,
    TxnOffsetCommitRequest, TxnOffsetCommitResponse, WriteTxnMarkersRequest, WriteTxnMarkersResponse,
)


@dataclass(frozen=True)
class ApiSpec:
    key: ApiKey
    request: type
    response: type
    min_version: int
    max_version: int
    # Lowest version advertised, when below min_version.  Kafka 4 advertises Produce from v0
    # but refuses v0-2 (KAFKA-18659): librdkafka < 2.10 compresses only when v0 is advertised.
    advertised_min_version: int | None = None

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    @property
    def advertised_min(self) -> int:
        return self.min_version if self.advertised_min_version is None else self.advertised_min_version


def _table(*specs: ApiSpec) -> dict[int, ApiSpec]:
    return {int(spec.key): spec for spec in specs}


APIS: dict[int, ApiSpec] = _table(
    ApiSpec(ApiKey.Produce, ProduceRequest, ProduceResponse, 3, 9, advertised_min_version=0),
    ApiSpec(ApiKey.Fetch, FetchRequest, FetchResponse, 4, 12),
    ApiSpec(ApiKey.ListOffsets, ListOffsetsRequest, ListOffsetsResponse, 1, 7),
    ApiSpec(ApiKey.Metadata, MetadataRequest, MetadataResponse, 0, 12),
    ApiSpec(ApiKey.ApiVersions, ApiVersionsRequest, ApiVersionsResponse, 0, 3),
    ApiSpec(ApiKey.CreateTopics, CreateTopicsRequest, CreateTopicsResponse, 0, 7),
    ApiSpec(ApiKey.DeleteTopics, DeleteTopicsRequest, DeleteTopicsResponse, 0, 6),
    ApiSpec(ApiKey.DeleteRecords, DeleteRecordsRequest, DeleteRecordsResponse, 0, 2),
    ApiSpec(ApiKey.InitProducerId, InitProducerIdRequest, InitProducerIdResponse, 0, 4),
    ApiSpec(ApiKey.OffsetForLeaderEpoch, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, 0, 4),
    ApiSpec(ApiKey.DescribeConfigs, DescribeConfigsRequest, DescribeConfigsResponse, 0, 4),
    ApiSpec(ApiKey.CreatePartitions, CreatePartitionsRequest, CreatePartitionsResponse, 0, 3),
    ApiSpec(ApiKey.AlterConfigs, AlterConfigsRequest, AlterConfigsResponse, 0, 2),
    ApiSpec(ApiKey.IncrementalAlterConfigs, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, 0, 1),
    ApiSpec(ApiKey.DescribeCluster, DescribeClusterRequest, DescribeClusterResponse, 0, 1),
    ApiSpec(ApiKey.FindCoordinator, FindCoordinatorRequest, FindCoordinatorResponse, 0, 4),
    ApiSpec(ApiKey.JoinGroup, JoinGroupRequest, JoinGroupResponse, 0, 7),
    ApiSpec(ApiKey.SyncGroup, SyncGroupRequest, SyncGroupResponse, 0, 5),
    ApiSpec(ApiKey.Heartbeat, HeartbeatRequest, HeartbeatResponse, 0, 4),
    ApiSpec(ApiKey.LeaveGroup, LeaveGroupRequest, LeaveGroupResponse, 0, 5),
    ApiSpec(ApiKey.OffsetCommit, OffsetCommitRequest, OffsetCommitResponse, 0, 8),
    ApiSpec(ApiKey.OffsetFetch, OffsetFetchRequest, OffsetFetchResponse, 0, 8),
    ApiSpec(ApiKey.DescribeGroups, DescribeGroupsRequest, DescribeGroupsResponse, 0, 5),
    ApiSpec(ApiKey.ListGroups, ListGroupsRequest, ListGroupsResponse, 0, 4),
    ApiSpec(ApiKey.DeleteGroups, DeleteGroupsRequest, DeleteGroupsResponse, 0, 2),
    ApiSpec(ApiKey.OffsetDelete, OffsetDeleteRequest, OffsetDeleteResponse, 0, 0),
    # transactions at Kafka 3.x's level (transaction version 1: no KIP-890 part 2 epoch bump per transaction)
    ApiSpec(ApiKey.AddPartitionsToTxn, AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, 0, 4),
    ApiSpec(ApiKey.AddOffsetsToTxn, AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, 0, 3),
    ApiSpec(ApiKey.EndTxn, EndTxnRequest, EndTxnResponse, 0, 3),
    ApiSpec(ApiKey.TxnOffsetCommit, TxnOffsetCommitRequest, TxnOffsetCommitResponse, 0, 3),
    ApiSpec(ApiKey.WriteTxnMarkers, WriteTxnMarkersRequest, WriteTxnMarkersResponse, 1, 1),
    ApiSpec(ApiKey.DescribeTransactions, DescribeTransactionsRequest, DescribeTransactionsResponse, 0, 0),
    ApiSpec(ApiKey.ListTransactions, ListTransactionsRequest, ListTransactionsResponse, 0, 2),
    # security: SASL (KIP-43, KIP-152, KIP-368) and SCRAM users (KIP-554)
    ApiSpec(ApiKey.SaslHandshake, SaslHandshakeRequest, SaslHandshakeResponse, 0, 1),
    ApiSpec(ApiKey.SaslAuthenticate, SaslAuthenticateRequest, SaslAuthenticateResponse, 0, 2),
    ApiSpec(ApiKey.DescribeUserScramCredentials, DescribeUserScramCredentialsRequest,
            DescribeUserScramCredentialsResponse, 0, 0),
    ApiSpec(ApiKey.AlterUserScramCredentials, AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
            0, 0),
    # ACLs (KIP-140; v1+: pattern types, KIP-290)
    ApiSpec(ApiKey.DescribeAcls, DescribeAclsRequest, DescribeAclsResponse, 1, 3),
    ApiSpec(ApiKey.CreateAcls, CreateAclsRequest, CreateAclsResponse, 1, 3),
    ApiSpec(ApiKey.DeleteAcls, DeleteAclsRequest, DeleteAclsResponse, 1, 3),
    # client quotas (KIP-546)
    ApiSpec(ApiKey.DescribeClientQuotas, DescribeClientQuotasRequest, DescribeClientQuotasResponse, 0, 1),
    ApiSpec(ApiKey.AlterClientQuotas, AlterClientQuotasRequest, AlterClientQuotasResponse, 0, 1),
    # partition reassignment (KIP-455), answered by the active controller
    ApiSpec(ApiKey.AlterPartitionReassignments, AlterPartitionReassignmentsRequest,
            AlterPartitionReassignmentsResponse, 0, 1),
    ApiSpec(ApiKey.ListPartitionReassignments, ListPartitionReassignmentsRequest,
            ListPartitionReassignmentsResponse, 0, 0),
    # leader election (KIP-460: v1+ election type, PREFERRED or UNCLEAN)
    ApiSpec(ApiKey.ElectLeaders, ElectLeadersRequest, ElectLeadersResponse, 0, 2),
    # log dirs (JBOD, KIP-113): Kafka 4 serves DescribeLogDirs v1-5 and AlterReplicaLogDirs v1-2
    ApiSpec(ApiKey.DescribeLogDirs, DescribeLogDirsRequest, DescribeLogDirsResponse, 1, 5),
    ApiSpec(ApiKey.AlterReplicaLogDirs, AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse, 1, 2),
)


def api_versions_response(version: int, error_code: int = 0):
    """The ApiVersions answer: every row of ``APIS``; v0 layout when reporting an unsupported version."""
    keys = [ApiVersionsResponse.ApiVersion(api_key=s.key, min_version=s.advertised_min, max_version=s.max_version)
            for s in APIS.values()]
    return ApiVersionsResponse(version=version, error_code=error_code, api_keys=keys, throttle_time_ms=0)
